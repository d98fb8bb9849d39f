"""The grid maze, the point maze and the tabular-MDP env: Gymnasium conventions."""

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from icml24.rl.envs.chain import TabularMDPEnv, garnet_mdp, needle_chain_mdp
from icml24.rl.envs.mazes import MAZE_SINGLE_GOAL, GridMaze, PointMazeVecEnv, dsp_reward, parse_maze


def test_grid_maze_passes_the_env_checker():
    check_env(GridMaze(slip=0.2), skip_render_check=True)
    check_env(TabularMDPEnv(garnet_mdp(n_states=4, n_actions=6)), skip_render_check=True)


def test_grid_maze_truncates_and_terminates():
    env = GridMaze(max_episode_steps=3)
    env.reset(seed=0)
    out = [env.step(3) for _ in range(3)]  # walk into the left wall from the start
    assert [o[3] for o in out] == [False, False, True] and not any(o[2] for o in out)
    # the shortest path reaches the goal and terminates
    env = GridMaze()
    s, _ = env.reset(seed=0)
    for _ in range(20):
        a = int(np.argmin([env.dist[env.next_cell[s, b]] for b in range(4)]))
        s, r, term, trunc, _ = env.step(a)
        if term:
            break
    assert term and r == 1.0 and s == env.goal_state


def test_dsp_reward_and_bfs():
    info = parse_maze(MAZE_SINGLE_GOAL)
    r = dsp_reward(info["dist"], 0.9)
    assert r[info["goal"]] == 1.0
    free = info["dist"] >= 0
    assert np.all(r[free & (info["dist"] > 0)] == 0.9 ** (info["dist"][free & (info["dist"] > 0)] + 1))
    with pytest.raises(ValueError, match="beta"):
        dsp_reward(info["dist"], 1.5)
    with pytest.raises(ValueError, match="slip"):
        GridMaze(slip=2.0)


def test_slippery_transition_rows_sum_to_one():
    mdp = GridMaze(slip=0.3).to_mdp()
    np.testing.assert_allclose(mdp.P.sum(-1), 1.0)
    assert np.delete(mdp.P, GridMaze().goal_state, axis=0).max() < 1.0  # slips spread every move


def test_point_maze_vector_api_autoreset_and_walls():
    env = PointMazeVecEnv(4, max_episode_steps=5)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 2) and env.single_action_space.shape == (2,)
    for _ in range(5):
        obs, r, term, trunc, info = env.step(torch.tensor([[-1.0, -1.0]] * 4))  # push into the corner wall
    assert trunc.all() and not term.any()
    assert "final_obs" in info and torch.all(info["final_obs"] >= -1) and torch.all(info["final_obs"] <= 1)
    assert torch.all(env._is_free(env.pos))
    with pytest.raises(ValueError, match="actions"):
        env.step(torch.zeros(3, 2))


def test_point_maze_reaches_goal_with_a_scripted_path():
    env = PointMazeVecEnv(1, step_size=0.25, max_episode_steps=400)
    env.reset(seed=0)
    info = parse_maze(MAZE_SINGLE_GOAL)
    dist = info["dist"]
    for _ in range(400):
        cell = env.pos[0].floor().long()
        r, c = int(cell[0]), int(cell[1])
        best = min(((dist[r + dr, c + dc], dr, dc) for dr, dc in [(-1, 0), (0, 1), (1, 0), (0, -1)]
                    if dist[r + dr, c + dc] >= 0), default=(0, 0, 0))  # fmt: skip
        target = torch.tensor([r + best[1] + 0.5, c + best[2] + 0.5]) if dist[r, c] > 0 else env.goal
        a = ((target - env.pos[0]) / 0.25).clamp(-1, 1)
        _, rew, term, _, _ = env.step(a[None])
        if term[0]:
            break
    assert bool(term[0]) and float(rew[0]) == 1.0


def test_chain_mdps_are_valid():
    m = needle_chain_mdp(n_states=4, n_actions=16, seed=0)
    np.testing.assert_allclose(m.P.sum(-1), 1.0)
    assert m.terminal.sum() == 1
    g = garnet_mdp(n_states=5, n_actions=7, branching=2, seed=1)
    assert ((g.P > 0).sum(-1) <= 2).all()


def test_point_maze_move_is_the_step_kinematics():
    """``move`` is exactly the position update of ``step`` (free space: pos + step * a; walls: slide)."""
    import torch

    from icml24.rl.envs.mazes import PointMazeVecEnv

    env = PointMazeVecEnv(3, step_size=0.25)
    env.reset(seed=0)
    a = torch.tensor([[0.0, 1.0], [1.0, 0.0], [-1.0, -1.0]])
    moved = env.move(env.pos, a)
    env.step(a)
    assert torch.equal(moved, env.pos)
    # from the start (1.5, 1.5) every move stays inside free cells
    assert torch.allclose(moved, torch.tensor([[1.5, 1.75], [1.75, 1.5], [1.25, 1.25]]))
    # a 0.75 step up-left would enter the outer wall on both axes: blocked; up-right slides along the top wall
    big = PointMazeVecEnv(2, step_size=0.75)
    pos = big.start.repeat(2, 1)
    out = big.move(pos, torch.tensor([[-1.0, -1.0], [-1.0, 1.0]]))
    assert torch.allclose(out, torch.tensor([[1.5, 1.5], [1.5, 2.25]]))
