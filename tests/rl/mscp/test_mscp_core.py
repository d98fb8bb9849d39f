"""MSCP's world, passive data, planners, IDM, pessimism and guided TD3: closed forms, brute force, limits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from icml24.rl.envs.mazes import MAZE_SINGLE_GOAL, PointMazeVecEnv, parse_maze
from icml24.rl.mscp import (
    METHODS,
    DriftPointMazeVecEnv,
    FastPlanner,
    GuidedTD3Agent,
    InverseDynamicsModel,
    MSCPConfig,
    PlannerConfig,
    SlowPlanner,
    WorldConfig,
    collect_passive_data,
    hindsight_batch,
    idm_action_error,
    maze_routes,
    pessimism_weight,
    pretrain_planners,
    run_online,
    scripted_actions,
    trajectory_index,
)
from icml24.rl.offline import StateDataset
from icml24.rl.value.td3 import TD3Config

torch.set_num_threads(1)
DERAND = settings(derandomize=True, max_examples=25, deadline=None)


# ------------------------------------------------------------------------------------------------ world


def test_identifiable_world_is_the_base_maze():
    """drift_prob = 0: every step is the shared PointMazeVecEnv's, bit for bit."""
    a = DriftPointMazeVecEnv(4, drift_prob=0.0, step_size=0.5, max_episode_steps=60)
    b = PointMazeVecEnv(4, reward="sparse", step_size=0.5, goal_radius=0.4, max_episode_steps=60)
    a.reset(seed=0)
    b.reset(seed=0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        act = torch.rand((4, 2), generator=gen) * 2 - 1
        oa, ra, ta, _, ia = a.step(act)
        ob, rb, tb, _, _ = b.step(act)
        assert torch.equal(oa, ob) and torch.equal(ra, rb) and torch.equal(ta, tb)
        assert not bool(ia["drifted"].any())


def test_drift_replaces_the_action_at_the_stated_rate_with_a_full_step():
    env = DriftPointMazeVecEnv(1, drift_prob=0.3)
    env.generator.manual_seed(1)
    a = torch.zeros((4000, 2))
    applied, coin = env.drift(a)
    k = int(coin.sum())
    assert stats.binomtest(k, 4000, 0.3).pvalue > 1e-3
    assert torch.allclose(applied[coin].norm(dim=1), torch.ones(k), atol=1e-6)  # unit step: a deliberate move's size
    assert torch.equal(applied[~coin], a[~coin])
    # drift_prob = 1: the action has no influence on the next state's distribution (same random stream)
    env1 = DriftPointMazeVecEnv(1, drift_prob=1.0)
    env1.generator.manual_seed(2)
    x, _ = env1.drift(torch.ones((10, 2)))
    env1.generator.manual_seed(2)
    y, _ = env1.drift(-torch.ones((10, 2)))
    assert torch.equal(x, y)


def test_routes_match_brute_force_shortest_paths():
    """BFS distances equal Floyd-Warshall on the free-cell graph; next_cell is a neighbour one step closer."""
    r = maze_routes(MAZE_SINGLE_GOAL)
    C = len(r.cells)
    D = np.full((C, C), np.inf)
    np.fill_diagonal(D, 0)
    for i, j in itertools.product(range(C), range(C)):
        if np.abs(r.cells[i] - r.cells[j]).sum() == 1:
            D[i, j] = 1
    for k in range(C):
        D = np.minimum(D, D[:, k : k + 1] + D[k : k + 1, :])
    assert np.array_equal(r.dist, D.astype(np.int64))
    for g, c in itertools.product(range(C), range(C)):
        n = r.next_cell[g, c]
        if c == g:
            assert n == c
        else:
            assert np.abs(r.cells[n] - r.cells[c]).sum() == 1 and r.dist[g, n] == r.dist[g, c] - 1
    info = parse_maze(MAZE_SINGLE_GOAL)
    assert r.dist[r.index[info["goal"]], r.index[info["start"]]] == info["dist"][info["start"]] == 7


def test_scripted_navigator_reaches_every_goal_without_noise():
    r = maze_routes()
    env = DriftPointMazeVecEnv(1)
    C = len(r.cells)
    pairs = torch.tensor([(s, g) for s in range(C) for g in range(C) if s != g])
    pos = torch.as_tensor(r.cells, dtype=torch.float32)[pairs[:, 0]] + 0.5
    gen = torch.Generator().manual_seed(0)
    for _ in range(2 * int(r.dist.max()) + 6):  # two steps of 0.5 per cell, plus settling
        pos = env.move(pos, scripted_actions(pos, pairs[:, 1], r, noise=0.0, generator=gen))
    goal_centre = torch.as_tensor(r.cells, dtype=torch.float32)[pairs[:, 1]] + 0.5
    assert float((pos - goal_centre).norm(dim=1).max()) < 0.1


def test_passive_data_is_action_free_consistent_and_respects_the_gap():
    data = collect_passive_data(n_trajectories=40, horizon=12, seed=3, exclude_cells=[(3, 4)])
    assert isinstance(data, StateDataset) and not hasattr(data, "actions")  # the planners cannot read actions
    assert len(data) == 40 * 11
    traj, last = trajectory_index(data)
    same = traj[1:] == traj[:-1]
    assert np.allclose(data.next_states[:-1][same], data.states[1:][same])  # s_{t+1} of row t is row t+1's s
    env = DriftPointMazeVecEnv(1)
    assert np.abs(data.next_states - data.states).max() <= env.max_obs_step + 1e-6
    r = maze_routes()
    cells = r.cell_of(env.to_pos(torch.as_tensor(np.r_[data.states, data.next_states], dtype=torch.float32)))
    assert int(r.index[3, 4]) not in set(cells.tolist())
    assert np.array_equal(last[:11], np.full(11, 10))


def test_trajectory_index_by_hand():
    d = StateDataset(states=np.zeros((5, 1)), next_states=np.zeros((5, 1)), steps=np.array([0, 1, 2, 0, 1]))
    traj, last = trajectory_index(d)
    assert traj.tolist() == [0, 0, 0, 1, 1] and last.tolist() == [2, 2, 2, 4, 4]


# ------------------------------------------------------------------------------------------------ planners


def _line_data(n_traj: int, T: int, v: float) -> StateDataset:
    """Straight lines at constant velocity along x from random starts: state t = x0 + t v."""
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 0, size=(n_traj, 1)) * np.array([[1.0, 0.0]]) + np.array([[0.0, 1.0]]) * rng.uniform(
        -1, 1, size=(n_traj, 1))  # fmt: skip
    t = np.arange(T + 1)[None, :, None]
    s = x0[:, None, :] + t * np.array([v, 0.0])
    return StateDataset(states=s[:, :-1].reshape(-1, 2), next_states=s[:, 1:].reshape(-1, 2),
                        steps=np.tile(np.arange(T), n_traj))  # fmt: skip


@DERAND
@given(horizon=st.integers(1, 8), size=st.integers(1, 64), seed=st.integers(0, 10_000))
def test_hindsight_batch_relations_on_a_line(horizon, size, seed):
    """On x_t = x_0 + t v: goal later than the state, subgoal = min(t + H, j), condition within H, next = t + 1."""
    v = 0.1
    data = _line_data(5, 10, v)
    b = {k: x.double().numpy() for k, x in hindsight_batch(data, horizon, size, np.random.default_rng(seed)).items()}
    steps = lambda x: np.round((x - b["state"])[:, 0] / v).astype(int)  # noqa: E731
    j, sub, k = steps(b["goal"]), steps(b["subgoal"]), steps(b["condition"])
    assert np.all(j >= 1) and np.allclose((b["goal"] - b["state"])[:, 1], 0, atol=1e-6)
    assert np.array_equal(sub, np.minimum(horizon, j))
    assert np.all((k >= 1) & (k <= horizon))
    assert np.allclose(b["next"] - b["state"], [v, 0.0], atol=1e-5)


@DERAND
@given(seed=st.integers(0, 1000), horizon=st.integers(1, 10), scale=st.floats(0.01, 10.0))
def test_slow_planner_subgoal_within_reach(seed, horizon, scale):
    """||s_hat_{t+H} - s_t||_inf <= H m for any weights and inputs (the dynamics' reach)."""
    torch.manual_seed(seed)
    m = 0.125
    p = SlowPlanner(horizon=horizon, max_step=m, hidden=(8,))
    s, g = torch.randn(32, 2) * scale, torch.randn(32, 2) * scale
    with torch.no_grad():
        assert float((p(s, g) - s).abs().max()) <= horizon * m + 1e-6
        mean, u = FastPlanner(max_step=m, ensemble=3, hidden=(8,))(s, g)
    assert float((mean - s).abs().max()) <= m + 1e-6 and bool((u >= 0).all())


def test_slow_planner_learns_straight_lines():
    """Trained on straight-line trajectories the subgoal lies on the line, H steps ahead (or at the goal)."""
    v, H = 0.05, 4
    data = _line_data(200, 12, v)
    slow, fast, u0 = pretrain_planners(data, max_step=v * 1.5, config=PlannerConfig(horizon=H, steps=600), seed=0)
    b = hindsight_batch(data, H, 512, np.random.default_rng(1))
    pred = slow(b["state"], b["goal"])
    assert float((pred - b["subgoal"]).norm(dim=1).mean()) < 0.25 * H * v
    nxt, u = fast(b["state"], b["condition"])
    assert float((nxt - b["next"]).norm(dim=1).mean()) < 0.25 * v
    assert u0 > 0


def test_fast_planner_spread_is_zero_for_identical_members():
    f = FastPlanner(ensemble=4, hidden=(8,))
    for mbr in f.members[1:]:
        mbr.load_state_dict(f.members[0].state_dict())
    _, u = f(torch.randn(10, 2), torch.randn(10, 2))
    assert torch.allclose(u, torch.zeros(10), atol=1e-6)


def test_fast_planner_is_unsure_off_the_data():
    """The ensemble disagrees more on states no passive trajectory visited (the coverage gap)."""
    data = collect_passive_data(n_trajectories=200, horizon=20, seed=0, exclude_cells=[(5, 2), (5, 3), (5, 4)])
    env = DriftPointMazeVecEnv(1)
    _, fast, u0 = pretrain_planners(data, max_step=env.max_obs_step, config=PlannerConfig(steps=500), seed=0)
    gap = env.to_obs(torch.tensor([[5.5, 3.5]]).repeat(8, 1) + 0.2 * torch.randn(8, 2))
    seen = env.to_obs(torch.tensor([[1.5, 2.5]]).repeat(8, 1) + 0.2 * torch.randn(8, 2))
    sub_gap, sub_seen = env.to_obs(torch.tensor([[5.5, 4.5]])).repeat(8, 1), env.to_obs(torch.tensor([[1.5, 3.5]])).repeat(8, 1)
    assert float(fast(gap, sub_gap)[1].mean()) > float(fast(seen, sub_seen)[1].mean())


# ------------------------------------------------------------------------------------------------ IDM


def _fit_idm(drift_prob: float, n: int, steps: int = 600) -> tuple[float, float]:
    torch.manual_seed(0)
    env = DriftPointMazeVecEnv(1, drift_prob=drift_prob)
    env.generator.manual_seed(5)
    r = maze_routes()
    gen = torch.Generator().manual_seed(3)
    cells = torch.as_tensor(r.cells, dtype=torch.float32)
    pos = cells[torch.randint(len(cells), (n,), generator=gen)] + 0.2 + 0.6 * torch.rand((n, 2), generator=gen)
    a = torch.rand((n, 2), generator=gen) * 2 - 1
    nxt = env.move(pos, env.drift(a)[0])
    s, s2 = env.to_obs(pos), env.to_obs(nxt)
    idm = InverseDynamicsModel(max_step=env.max_obs_step)
    opt = torch.optim.Adam(idm.parameters(), lr=3e-3)
    for _ in range(steps):
        i = torch.randint(n, (256,), generator=gen)
        loss = (idm(s[i], s2[i]) - a[i]).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    chance = float((torch.rand((20000, 2), generator=gen) * 2 - 1).norm(dim=1).mean())
    return idm_action_error(idm, env, seed=11), chance


def test_idm_recovers_actions_only_in_the_identifiable_world():
    """Identifiable: the IDM's error is far below chance. drift_prob = 1: at chance whatever the sample size."""
    err_id, chance = _fit_idm(0.0, 2000)
    assert err_id < 0.35 * chance
    for n in (500, 4000):
        err_nid, _ = _fit_idm(1.0, n)
        assert err_nid > 0.9 * chance


def test_perfect_idm_reproduces_the_navigators_actions():
    """(s' - s) / (step m) inverts the identifiable kinematics in free space: the controller acts as the expert."""
    env = DriftPointMazeVecEnv(1)
    r = maze_routes()
    pos = torch.tensor([[1.5, 1.5], [5.5, 3.0], [3.5, 3.4]])
    goals = torch.tensor([int(r.index[1, 3]), int(r.index[5, 6]), int(r.index[3, 6])])
    a = scripted_actions(pos, goals, r, noise=0.0, generator=torch.Generator())
    nxt = env.move(pos, a)
    assert torch.allclose((nxt - pos) / env.step_size, a, atol=1e-6)


# ------------------------------------------------------------------------------------------------ pessimism, TD3


@DERAND
@given(u=st.lists(st.floats(0, 5), min_size=2, max_size=10), scale=st.floats(0.01, 2), beta=st.floats(0, 50))
def test_pessimism_weight_limits_and_monotonicity(u, scale, beta):
    ut = torch.tensor(sorted(u))
    w = pessimism_weight(ut, beta=beta, scale=scale)
    assert bool(((w > 0) | (ut > scale)).all()) and bool((w <= 1).all())
    assert bool((w[1:] <= w[:-1] + 1e-7).all())  # more disagreement, less trust
    assert bool((w[ut <= scale] == 1).all())  # inside the data's spread: full trust
    assert torch.equal(pessimism_weight(ut, beta=0.0, scale=scale), torch.ones_like(ut))  # no pessimism
    big = pessimism_weight(ut, beta=1e9, scale=scale)
    assert bool((big[ut > scale * 1.001] < 1e-6).all())  # beta -> inf: guidance off the support only


def test_guided_actor_loss_limits():
    """No guide, no BC: the loss is TD3's -mean Q times alpha / mean|Q|; a dominant guide drives mu to the guide."""
    cfg = TD3Config(hidden=(16,), batch_size=32, policy_delay=1)
    plain = GuidedTD3Agent(obs_dim=2, action_dim=2, config=cfg, seed=0)
    batch = {"obs": torch.randn(32, 2)}
    q = plain.critic_value(plain.critics[0], batch["obs"], plain.actor(batch["obs"]))
    expected = -2.5 * q.mean() / q.abs().mean()
    assert torch.allclose(plain.actor_loss(batch), expected)
    target = torch.tensor([0.6, -0.3])
    guided = GuidedTD3Agent(obs_dim=2, action_dim=2, config=cfg, seed=0, q_weight=0.0, guide_weight=1.0,
                            guide=lambda o: (target.expand(len(o), 2), torch.ones(len(o))))  # fmt: skip
    opt = torch.optim.Adam(guided.actor.parameters(), lr=1e-2)
    for _ in range(300):
        loss = guided.actor_loss({"obs": torch.randn(32, 2)})
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.allclose(guided.actor(torch.randn(5, 2)), target.expand(5, 2), atol=0.05)
    # weight 0 in every state (full pessimism off the data): the guide term vanishes
    off = GuidedTD3Agent(obs_dim=2, action_dim=2, config=cfg, seed=0,
                         guide=lambda o: (target.expand(len(o), 2), torch.zeros(len(o))))  # fmt: skip
    assert torch.allclose(off.actor_loss(batch), plain.actor_loss(batch))


@pytest.mark.parametrize("method", METHODS)
def test_run_online_smoke_and_determinism(method):
    world = WorldConfig(passive_trajectories=30, passive_horizon=10, num_envs=4, total_steps=320, warmup_steps=80,
                        max_episode_steps=20, eval_points=4)  # fmt: skip
    cfg = MSCPConfig(planner=PlannerConfig(steps=20, hidden=(16,)), td3=TD3Config(hidden=(16,), batch_size=32),
                     bc_steps=5)  # fmt: skip
    a = run_online(method, world, cfg, seed=1)
    b = run_online(method, world, cfg, seed=1)
    assert a["success_curve"] == b["success_curve"] and a["greedy_success"] == b["greedy_success"]
    assert len(a["success_curve"]) == 4 and 0 <= a["auc"] <= 1
    assert ("idm_error" in a) == (method in ("idm_bc", "mscp", "mscp_no_pessimism"))


def test_planner_batches_are_action_free():
    """The planners train on batches with no action key, from a dataset type that has no actions at all."""
    data = collect_passive_data(n_trajectories=5, horizon=6, seed=0)
    b = hindsight_batch(data, 3, 8, np.random.default_rng(0))
    assert set(b) == {"state", "goal", "subgoal", "condition", "next"}
    assert not any("action" in k for k in b)
    with pytest.raises(TypeError, match="data"):
        pretrain_planners({"states": data.states, "actions": np.zeros_like(data.states)}, max_step=0.1)
