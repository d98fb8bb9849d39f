"""SAPG invariants (notes section 7): M = 1 is PPO, relabelling, shapes, entropy schedule, leader-only reports."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from icml24.rl.envs import BatchedDeceptivePointMass, BatchedPendulum
from icml24.rl.ppo import PPO, PPOConfig, gaussian_log_prob
from icml24.rl.sapg import SAPG, SAPGConfig, entropy_schedule, follower_blocks_for_leader

SMALL = PPOConfig(horizon=4, epochs=2, num_minibatches=2)


def _params(agent: PPO) -> list[torch.Tensor]:
    return [p.detach().clone() for p in agent.policy.parameters()]


@pytest.mark.parametrize("aggregation", ["leader_follower", "symmetric", "none"])
def test_one_block_reduces_to_ppo_exactly(aggregation: str) -> None:
    cfg = PPOConfig(horizon=4, epochs=2, num_minibatches=2, entropy_coef=0.01)
    ppo = PPO(BatchedDeceptivePointMass(num_envs=16), config=cfg, seed=3)
    sapg = SAPG(
        BatchedDeceptivePointMass(num_envs=16),
        config=SAPGConfig(num_blocks=1, latent_dim=0, aggregation=aggregation, entropy_scale=0.5, ppo=cfg),
        seed=3,
    )
    ppo.learn(3)
    sapg.learn(3)
    assert all(torch.equal(a, b) for a, b in zip(_params(ppo), _params(sapg), strict=True))
    assert sapg.entropy_coefs.tolist() == pytest.approx([0.01])


def test_leader_follower_relabelling_shapes_and_targets() -> None:
    N, M, T = 24, 4, SMALL.horizon
    raw_values = dataclasses.replace(SMALL, normalize_value=False)  # compare targets in return units
    agent = SAPG(BatchedDeceptivePointMass(num_envs=N), config=SAPGConfig(num_blocks=M, ppo=raw_values), seed=0)
    rollout = agent.collect()
    batch = agent.build_batch(rollout)
    B, K = N // M, 1
    assert batch["advantages"].shape[0] == N * T + K * B * T  # union size
    off = batch["off_policy"]
    assert int(off.sum()) == K * B * T
    assert (batch["block"][off] == agent.leader).all()  # relabelled to the leader
    assert (batch["entropy_coef"][off] == 0).all()  # leader's coefficient
    # Off-policy samples are copies of one follower block's on-policy samples, with the follower's
    # behaviour log-probs: every off-policy action appears among the on-policy ones of a single follower.
    obs, act = batch["obs"][off], batch["actions"][off]
    on_act, on_block, on_logp = batch["actions"][~off], batch["block"][~off], batch["old_log_prob"][~off]
    match = (act[:, None, :] == on_act[None, :, :]).all(-1)  # [off, on]
    assert bool(match.any(1).all())
    src = match.float().argmax(1)
    assert on_block[src].unique().numel() == 1 and int(on_block[src][0]) != agent.leader
    torch.testing.assert_close(batch["old_log_prob"][off], on_logp[src])
    # One-step targets under the leader's critic.
    leader = torch.full((obs.shape[0],), agent.leader)
    with torch.no_grad():
        v = agent.policy.value(obs, leader)
    torch.testing.assert_close(batch["old_values"][off], v)
    assert batch["old_log_prob"][off].shape == (K * B * T,)
    assert act.shape == (K * B * T, 2)


def test_off_policy_ratio_is_one_when_follower_equals_leader() -> None:
    agent = SAPG(BatchedDeceptivePointMass(num_envs=12), config=SAPGConfig(num_blocks=3, ppo=SMALL), seed=1)
    with torch.no_grad():
        agent.policy.latent[:] = agent.policy.latent[agent.leader]
        agent.policy.log_std[:] = agent.policy.log_std[agent.leader]
    rollout = agent.collect()
    batch = agent.build_batch(rollout)
    off = batch["off_policy"]
    with torch.no_grad():
        mean, log_std, _ = agent.policy(batch["obs"][off], batch["block"][off])
    logp = gaussian_log_prob(batch["actions"][off], mean, log_std)
    torch.testing.assert_close(logp, batch["old_log_prob"][off], rtol=1e-5, atol=1e-5)


def test_followers_only_and_filter_leader_index_rule() -> None:
    assert follower_blocks_for_leader([0, 1, 3]) == [0, 2]
    M = 5
    agent = SAPG(
        BatchedPendulum(num_envs=20), config=SAPGConfig(num_blocks=M, off_policy_ratio=3, ppo=SMALL), seed=0
    )
    seen = set()
    for _ in range(30):
        draws = agent.sample_relabelling()
        assert len(draws) == 3
        followers = [int(envs[0]) // agent.block_size for envs, _ in draws]
        assert len(set(followers)) == 3 and agent.leader not in followers
        for envs, target in draws:
            assert (target == agent.leader).all() and envs.numel() == agent.block_size
        seen.update(followers)
    assert seen == {0, 1, 2, 3}
    big_rho = SAPGConfig(num_blocks=3, off_policy_ratio=10)
    assert big_rho.num_off_policy_blocks == 2


def test_symmetric_aggregation_relabels_every_block_to_another() -> None:
    N, M, T = 16, 4, SMALL.horizon
    agent = SAPG(
        BatchedPendulum(num_envs=N), config=SAPGConfig(num_blocks=M, aggregation="symmetric", ppo=SMALL), seed=0
    )
    ((envs, target),) = agent.sample_relabelling()
    own = agent.env_blocks[envs]
    shift = int((own[0] - target[0]) % M)
    assert 1 <= shift < M
    assert torch.equal((own - shift) % M, target)
    batch = agent.build_batch(agent.collect())
    assert int(batch["off_policy"].sum()) == N * T
    assert batch["advantages"].shape[0] == 2 * N * T


def test_no_aggregation_has_no_off_policy_samples() -> None:
    agent = SAPG(BatchedPendulum(num_envs=16), config=SAPGConfig(num_blocks=4, aggregation="none", ppo=SMALL))
    batch = agent.build_batch(agent.collect())
    assert not batch["off_policy"].any() and batch["advantages"].shape[0] == 16 * SMALL.horizon


def test_entropy_schedule_monotone_with_leader_at_base() -> None:
    c = entropy_schedule(6, 0.005)
    assert c[-1].item() == 0.0 and c[0].item() == pytest.approx(0.0025)
    assert bool((c[:-1] >= c[1:]).all())
    assert entropy_schedule(1, 0.005).tolist() == [0.0]
    assert entropy_schedule(4, 0.01, base=0.002)[-1].item() == pytest.approx(0.002)


def test_leader_only_evaluation_ignores_followers() -> None:
    agent = SAPG(BatchedPendulum(num_envs=16), config=SAPGConfig(num_blocks=4, ppo=SMALL), seed=0)
    before = agent.evaluate(BatchedPendulum(num_envs=8), seed=5)
    with torch.no_grad():
        agent.policy.latent[: agent.leader] += 3.0
        agent.policy.log_std[: agent.leader] += 1.0
    assert agent.evaluate(BatchedPendulum(num_envs=8), seed=5) == before
    with torch.no_grad():
        agent.policy.latent[agent.leader] += 3.0
    assert agent.evaluate(BatchedPendulum(num_envs=8), seed=5) != before


def test_reported_training_stats_are_the_leaders() -> None:
    agent = SAPG(
        BatchedDeceptivePointMass(num_envs=16, max_episode_steps=4),
        config=SAPGConfig(num_blocks=4, ppo=SMALL),
        seed=0,
    )
    stats = agent.iterate()
    per_block = agent.block_stats()
    assert stats["episode_return"] == pytest.approx(per_block["episode_return"][agent.leader])
    assert stats["episodes"] == 4.0  # one finished episode per leader env (horizon == episode length)


def test_bad_configs() -> None:
    with pytest.raises(ValueError, match="divisible"):
        SAPG(BatchedPendulum(num_envs=10), config=SAPGConfig(num_blocks=3))
    with pytest.raises(ValueError, match="aggregation"):
        SAPGConfig(aggregation="all")
    with pytest.raises(ValueError, match="num_blocks"):
        SAPGConfig(num_blocks=0)
    with pytest.raises(TypeError, match="num_blocks"):
        SAPGConfig(num_blocks=True)
    with pytest.raises(TypeError, match="SAPGConfig"):
        SAPG(BatchedPendulum(num_envs=4), config=PPOConfig())
