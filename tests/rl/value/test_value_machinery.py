"""Shared value-based machinery: replay, action grid, DQN/DDQN targets, tabular DP and Q-learning, TD3."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.rl.value import (
    ActionGrid,
    DQNAgent,
    DQNConfig,
    QLearningConfig,
    ReplayBuffer,
    StateActionQNetwork,
    StateQNetwork,
    TabularMDP,
    TD3Agent,
    TD3Config,
    policy_evaluation,
    q_learning,
    value_iteration,
)


def test_replay_fifo_and_shapes():
    buf = ReplayBuffer(capacity=4, fields={"obs": ((2,), torch.float32), "terminated": ((), torch.float32)})
    buf.add({"obs": torch.arange(6.0).reshape(3, 2), "terminated": torch.zeros(3)})
    buf.add({"obs": torch.full((3, 2), 9.0), "terminated": torch.ones(3)})
    assert len(buf) == 4
    batch = buf.sample(64, torch.Generator().manual_seed(0))
    # the two oldest rows (0,1) and (2,3) were overwritten; (4,5) survives
    assert set(batch["obs"][:, 0].tolist()) <= {4.0, 9.0}
    with pytest.raises(ValueError, match="shape"):
        buf.add({"obs": torch.zeros(1, 3), "terminated": torch.zeros(1)})
    with pytest.raises(ValueError, match="fields"):
        buf.add({"obs": torch.zeros(1, 2)})


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 3), levels=st.integers(2, 7))
def test_action_grid_is_a_bijection_with_exact_endpoints(d, levels):
    low = -np.arange(1, d + 1, dtype=float)
    high = np.arange(1, d + 1, dtype=float) * 2
    g = ActionGrid(low, high, levels)
    idx = np.arange(g.n)
    acts = g.index_to_action(idx)
    assert g.n == levels**d
    assert len(np.unique(acts, axis=0)) == g.n
    np.testing.assert_array_equal(g.action_to_index(acts), idx)
    np.testing.assert_allclose(acts[0], low)
    np.testing.assert_allclose(acts[-1], high)
    assert np.all(np.abs(g.table()) <= 1.0)


def test_action_grid_bad_input():
    with pytest.raises(ValueError, match="levels"):
        ActionGrid([-1], [1], 1)
    with pytest.raises(ValueError, match="high > low"):
        ActionGrid([1], [-1], 3)
    with pytest.raises(ValueError, match="action index"):
        ActionGrid([-1], [1], 3).index_to_action(3)


def test_batched_and_looped_scoring_agree_and_count():
    torch.manual_seed(0)
    g = ActionGrid([-2.0], [2.0], 16)
    net = StateActionQNetwork(obs_dim=3, action_table=g.table())
    obs = torch.randn(5, 3)
    cand = torch.tensor([0, 3, 7, 15])
    a = net.q_candidates(obs, cand)
    b = net.q_candidates_looped(obs, cand)
    torch.testing.assert_close(a, b)
    assert net.evaluations == 2 * 5 * 4
    with pytest.raises(ValueError, match="obs"):
        net.q_candidates(torch.randn(5, 4), cand)
    with pytest.raises(TypeError, match="integer"):
        net.q_candidates(obs, cand.float())
    head = StateQNetwork(obs_dim=3, n_actions=16)
    assert head.q_candidates(obs, cand).shape == (5, 4)


def _filled_agent(double, seed=0):
    g = ActionGrid([-2.0], [2.0], 8)
    agent = DQNAgent(obs_dim=3, action_table=g.table(), config=DQNConfig(double=double, batch_size=4), seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(8):
        agent.store(rng.normal(size=3), int(rng.integers(8)), float(rng.normal()), rng.normal(size=3), False)
    return agent


@pytest.mark.parametrize("double", [False, True])
def test_dqn_target_matches_brute_force(double):
    agent = _filled_agent(double)
    batch = agent.buffer.sample(4, torch.Generator().manual_seed(1))
    with torch.no_grad():
        # brute force: score every action one row at a time
        q_t = torch.stack([agent.q_target(batch["next_obs"], torch.full((4,), a)) for a in range(8)], 1)
        q_o = torch.stack([agent.q(batch["next_obs"], torch.full((4,), a)) for a in range(8)], 1)
        boot = q_t.gather(1, q_o.argmax(1, keepdim=True)).squeeze(1) if double else q_t.max(1).values
        expected = batch["reward"] + 0.99 * (1 - batch["terminated"]) * boot
    torch.testing.assert_close(agent.td_target(batch), expected)


def test_dqn_terminated_cuts_bootstrap_truncated_does_not():
    agent = _filled_agent(False)
    batch = agent.buffer.sample(4, torch.Generator().manual_seed(1))
    batch["terminated"] = torch.ones(4)
    torch.testing.assert_close(agent.td_target(batch), batch["reward"])


def test_dqn_bad_obs_shape():
    agent = _filled_agent(False)
    with pytest.raises(ValueError, match="obs"):
        agent.act(np.zeros(4))
    with pytest.raises(ValueError, match="gamma"):
        DQNConfig(gamma=1.5)
    with pytest.raises(ValueError, match="action must be an index"):
        agent.store(np.zeros(agent.obs_dim), agent.n_actions, 0.0, np.zeros(agent.obs_dim), False)
    with pytest.raises(ValueError, match="obs"):
        agent.store(np.zeros(agent.obs_dim + 1), 0, 0.0, np.zeros(agent.obs_dim), False)
    with pytest.raises(ValueError, match="target_update_every"):
        DQNConfig(target_update_every=0)
    with pytest.raises(ValueError, match="epsilon_start"):
        DQNConfig(epsilon_start=1.5)


def _two_state_mdp(p_slip=0.0):
    # s0 -a1-> s1 (reward 1, terminal); a0 stays (reward 0.1)
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = 1
    P[0, 1, 1] = 1 - p_slip
    P[0, 1, 0] = p_slip
    P[1, :, 1] = 1
    R = np.zeros((2, 2, 2))
    R[0, 0, 0] = 0.1
    R[0, 1, 1] = 1.0
    T = np.zeros((2, 2, 2), dtype=bool)
    T[0, 1, 1] = True
    return TabularMDP(P=P, R=R, terminal=T, start=np.array([1.0, 0.0]))


def test_value_iteration_closed_form():
    mdp = _two_state_mdp()
    Q = value_iteration(mdp, 0.9)
    # Q(s0, a1) = 1; Q(s0, a0) = 0.1 + 0.9 * 1 = 1.0
    np.testing.assert_allclose(Q[0], [1.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(policy_evaluation(mdp, np.array([0, 0]), 0.9)[0], 0.1 / 0.1, atol=1e-9)


def test_tabular_q_learning_converges_to_q_star():
    mdp = _two_state_mdp(p_slip=0.3)
    Q_star = value_iteration(mdp, 0.8)
    out = q_learning(mdp, config=QLearningConfig(gamma=0.8, alpha=0.05, epsilon=1.0, horizon=20), n_runs=4,
                     steps=4000, seed=0)  # fmt: skip
    np.testing.assert_allclose(out["Q"][:, 0].mean(0), Q_star[0], atol=0.05)


def test_q_learning_bad_gamma():
    with pytest.raises(ValueError, match="gamma"):
        q_learning(_two_state_mdp(), config=QLearningConfig(gamma=-0.1), n_runs=1, steps=1, seed=0)


def test_tabular_mdp_validation():
    with pytest.raises(ValueError, match="probability"):
        TabularMDP(P=np.ones((2, 1, 2)), R=np.zeros((2, 1, 2)), terminal=np.zeros((2, 1, 2), bool),
                   start=np.array([1.0, 0]))  # fmt: skip


def test_td3_update_runs_and_target_respects_termination():
    agent = TD3Agent(obs_dim=2, action_dim=1, config=TD3Config(batch_size=8, hidden=(16,)), seed=0)
    g = torch.Generator().manual_seed(0)
    agent.store({"obs": torch.randn(16, 2, generator=g), "action": torch.rand(16, 1, generator=g) * 2 - 1,
                 "reward": torch.randn(16, generator=g), "next_obs": torch.randn(16, 2, generator=g),
                 "terminated": torch.ones(16)})  # fmt: skip
    batch = agent.buffer.sample(8, g)
    torch.testing.assert_close(agent.compute_target(batch), batch["reward"])
    before = [p.clone() for p in agent.critics.parameters()]
    assert agent.update() is not None and agent.update() is not None
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.critics.parameters(), strict=True))
    with pytest.raises(ValueError, match="obs"):
        agent.act(torch.zeros(3, 5))


def test_td3_update_on_a_given_batch_trains_without_the_buffer():
    """``update(batch)`` trains on the supplied minibatch (offline samplers) and leaves the empty buffer alone."""
    g = torch.Generator().manual_seed(1)
    batch = {"obs": torch.randn(8, 2, generator=g), "action": torch.rand(8, 1, generator=g) * 2 - 1,
             "reward": torch.randn(8, generator=g), "next_obs": torch.randn(8, 2, generator=g),
             "terminated": torch.zeros(8)}  # fmt: skip
    agent = TD3Agent(obs_dim=2, action_dim=1, config=TD3Config(batch_size=64, hidden=(16,), policy_delay=1), seed=3)
    assert agent.update() is None  # empty buffer
    actor_before = [p.clone() for p in agent.actor.parameters()]
    out = agent.update(batch)
    assert out is not None and "actor_loss" in out and len(agent.buffer) == 0
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, agent.actor.parameters(), strict=True))
    with pytest.raises(TypeError, match="batch"):
        agent.update([1, 2])


def test_q_learning_over_a_gymnasium_env_matches_q_star():
    from icml24.rl.envs.chain import TabularMDPEnv
    from icml24.rl.value import q_learning_gym

    mdp = _two_state_mdp(p_slip=0.3)
    env = TabularMDPEnv(mdp, max_episode_steps=20)
    out = q_learning_gym(env, config=QLearningConfig(gamma=0.8, alpha=0.05, epsilon=1.0), steps=4000, seed=0)
    np.testing.assert_allclose(out["Q"][0], value_iteration(mdp, 0.8)[0], atol=0.05)
    assert out["evaluations"] == 2 * 4000 * 2
    import gymnasium as gym

    with pytest.raises(TypeError, match="Discrete"):
        q_learning_gym(gym.make("Pendulum-v1"), config=QLearningConfig(), steps=1, seed=0)


def test_truncation_at_every_step_still_bootstraps():
    """Horizon 1 on a continuing one-action MDP: every step is truncated, never terminated, so Q -> r / (1 - gamma)
    (cutting the bootstrap at truncation would give Q -> r = 0.5)."""
    from icml24.rl.envs.chain import TabularMDPEnv
    from icml24.rl.value import q_learning_gym

    mdp = TabularMDP(P=np.ones((1, 1, 1)), R=np.full((1, 1, 1), 0.5), terminal=np.zeros((1, 1, 1), bool),
                     start=np.ones(1))  # fmt: skip
    cfg = QLearningConfig(gamma=0.5, alpha=0.5, epsilon=0.0, horizon=1)
    np.testing.assert_allclose(q_learning(mdp, config=cfg, n_runs=2, steps=200, seed=0)["Q"], 1.0, atol=1e-6)
    out = q_learning_gym(TabularMDPEnv(mdp, max_episode_steps=1), config=cfg, steps=200, seed=0)
    np.testing.assert_allclose(out["Q"], 1.0, atol=1e-6)
    assert len(out["episode_returns"]) == 200  # every step ended an episode by truncation


def test_train_dqn_stores_truncated_steps_as_non_terminal():
    import gymnasium as gym

    from icml24.rl.value import train_dqn

    g = ActionGrid([-2.0], [2.0], 4)
    agent = DQNAgent(obs_dim=3, action_table=g.table(), config=DQNConfig(batch_size=4, hidden=(8,)), seed=0)
    out = train_dqn(gym.make("Pendulum-v1"), agent, steps=30, seed=0, grid=g, max_episode_steps=5)
    assert out["episode_end_steps"] == [5, 10, 15, 20, 25, 30]
    assert len(agent.buffer) == 30 and not agent.buffer._data["terminated"][:30].any()


def _trained(double, every, updates=30, seed=0):
    g = ActionGrid([-2.0], [2.0], 8)
    cfg = DQNConfig(double=double, batch_size=4, target_update_every=every)
    agent = DQNAgent(obs_dim=3, action_table=g.table(), config=cfg, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(updates):
        agent.store(rng.normal(size=3), int(rng.integers(8)), float(rng.normal()), rng.normal(size=3), False)
        agent.update()
    return agent


def test_target_network_is_copied_every_c_gradient_steps_only():
    agent = _trained(False, every=7, updates=3)  # buffer reaches the batch at the 4th store: no update yet
    assert agent.updates == 0
    agent = _trained(False, every=7, updates=12)  # 9 updates: copied after update 7, not since
    assert agent.updates == 9
    online = list(agent.q.parameters())
    target = list(agent.q_target.parameters())
    assert any(not torch.equal(p, q) for p, q in zip(online, target, strict=True))
    agent = _trained(False, every=9, updates=12)  # copied right after update 9
    assert all(torch.equal(p, q) for p, q in zip(agent.q.parameters(), agent.q_target.parameters(), strict=True))


def test_dqn_and_ddqn_differ_with_a_lagged_target_and_coincide_with_a_per_step_copy():
    """With the target copied after every step (the released StochDQN script) the target network *is* the online
    one at every update, so Double DQN's select-online/evaluate-target equals DQN's max bit for bit; the
    periodic copy of DQN/DDQN makes them different learners."""
    same = [_trained(d, every=1) for d in (False, True)]
    for p, q in zip(same[0].q.parameters(), same[1].q.parameters(), strict=True):
        assert torch.equal(p, q)
    lagged = [_trained(d, every=10) for d in (False, True)]
    assert any(not torch.equal(p, q) for p, q in zip(lagged[0].q.parameters(), lagged[1].q.parameters(), strict=True))
    assert DQNConfig().target_update_every > 1
