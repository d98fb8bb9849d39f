"""The offline learners: TD3+BC's actor loss by hand, goal-conditioned BC fitting a known policy."""

import numpy as np
import pytest
import torch

from icml24.rl.caiac import (
    ENTITY_SLICES,
    BCConfig,
    CounterfactualSampler,
    GoalConditionedPolicy,
    OfflineConfig,
    TD3BCAgent,
    collect_push_dataset,
    sparse_reward,
    train_gcbc,
    train_offline,
)
from icml24.rl.value import TD3Config


def test_td3bc_actor_loss_is_the_fujimoto_gu_objective():
    agent = TD3BCAgent(obs_dim=3, action_dim=2, config=TD3Config(hidden=(8,)), seed=0, bc_alpha=2.5)
    g = torch.Generator().manual_seed(0)
    batch = {"obs": torch.randn(16, 3, generator=g), "action": torch.rand(16, 2, generator=g) * 2 - 1}
    pi = agent.actor(batch["obs"])
    q = agent.critic_value(agent.critics[0], batch["obs"], pi)
    expected = -(2.5 / q.abs().mean()) * q.mean() + ((pi - batch["action"]) ** 2).mean()
    torch.testing.assert_close(agent.actor_loss(batch), expected)
    with pytest.raises(ValueError, match="bc_alpha"):
        TD3BCAgent(obs_dim=3, action_dim=2, bc_alpha=0.0)


def _sampler(data):
    return CounterfactualSampler(states=data.states, actions=data.actions, goals=data.goals, uncontrolled=None,
                                 entity_slices=list(ENTITY_SLICES.values()), swappable=np.array([False, True, True]),
                                 achieved_goal=lambda x: x[:, 2:4], reward=lambda ag, g: sparse_reward(ag, g))  # fmt: skip


def test_gcbc_fits_the_dataset_actions():
    """BC on noise-free expert episodes with commanded goals drives the action error well below the actions'
    variance."""
    data = collect_push_dataset(20, 0, seed=0, expert_noise=0.0)
    sampler = _sampler(data)
    policy = train_gcbc(sampler, BCConfig(updates=400, hidden=(64, 64)), seed=0)
    b = sampler.sample(2000, np.random.default_rng(9))
    with torch.no_grad():
        err = float(((policy(torch.as_tensor(b["obs"], dtype=torch.float32)).numpy() - b["action"]) ** 2).mean())
    assert err < 0.5 * b["action"].var(0).sum() / 2
    assert policy.act(b["states"][:3], b["obs"][:3, 6:]).shape == (3, 2)
    with pytest.raises(ValueError, match="obs"):
        policy(torch.zeros(2, 5))


def test_td3bc_offline_training_runs_and_is_deterministic():
    data = collect_push_dataset(4, 4, seed=1)
    cfg = OfflineConfig(updates=5, batch_size=16, hidden=(8,))
    a, b = train_offline(_sampler(data), cfg, seed=0), train_offline(_sampler(data), cfg, seed=0)
    for p, q in zip(a.actor.parameters(), b.actor.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    assert isinstance(GoalConditionedPolicy(obs_dim=8, action_dim=2), torch.nn.Module)


def test_td3bc_with_a_small_alpha_imitates_the_dataset():
    """TD3+BC through the shared TD3 agent's ``actor_loss`` hook: with alpha -> 0 the actor loss is behaviour
    cloning, so on noise-free expert episodes the actor's action error falls well below the actions' variance (a
    plain TD3 actor loss, the hook bypassed, would not fit the actions). At the default alpha = 2.5 on this sparse
    0/-1 reward the Q term dominates and the error stays near the variance (review note: tune alpha before
    reading the README's "learned too slowly")."""
    data = collect_push_dataset(20, 0, seed=0, expert_noise=0.0)
    sampler = _sampler(data)
    b = sampler.sample(2000, np.random.default_rng(9))
    obs = torch.as_tensor(b["obs"], dtype=torch.float32)
    agent = train_offline(sampler, OfflineConfig(updates=400, batch_size=128, hidden=(64, 64), bc_alpha=0.01), seed=0)
    with torch.no_grad():
        err = float(((agent.actor(obs).numpy() - b["action"]) ** 2).mean())
    assert err < 0.6 * b["action"].var(0).sum() / 2
