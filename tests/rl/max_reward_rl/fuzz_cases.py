"""Fuzz cases for max-reward RL's exported callables (driven by tests/test_fuzz_api.py)."""

import numpy as np

from icml24.rl.envs.mazes import PointMazeVecEnv
from icml24.rl.max_reward import (
    MaxTD3Agent,
    Outcomes,
    YGrid,
    augmented_backup,
    check_reward_bounds,
    cumulative_value_iteration,
    episodes_to_success,
    evaluate_greedy,
    max_returns,
    max_reward_value_iteration,
    maxdet_value_iteration,
    maze_q_learning,
    rollout,
    stochastic_counterexample,
    train_td3_vec,
    y_grid,
)
from icml24.rl.value import TD3Config

M = stochastic_counterexample()
GRID = y_grid(M.reward, 1.0)
Q0 = np.zeros((M.n_states, len(GRID.values), M.n_actions))
SMALL = TD3Config(gamma=0.99, hidden=(8,), batch_size=4, buffer_size=64)


def _agent() -> MaxTD3Agent:
    return MaxTD3Agent(obs_dim=2, action_dim=2, r_lb=0.0, r_ub=1.0, config=SMALL, seed=0)


def _env() -> PointMazeVecEnv:
    return PointMazeVecEnv(2, max_episode_steps=5)


FUZZ_CASES = [
    dict(fn=check_reward_bounds, args=(np.array([0.1, 0.5, 0.9]), 0.0, 1.0),
         invalid={"rewards": [np.array([0.5, 1.5]), np.array(["a"])], "r_lb": [2.0, None, "0"], "r_ub": [-1.0]}),
    dict(fn=Outcomes, args=(M.prob, M.next_state, M.reward, M.terminal, M.start),
         invalid={"prob": [M.prob * 2, np.zeros((2, 2))], "next_state": [M.next_state + 5, M.next_state * 0.5],
                  "reward": [np.zeros((2, 2, 3))], "terminal": [M.terminal.astype(float)],
                  "start": [np.array([0.5, 0.6]), np.array([1.0])]}),
    dict(fn=YGrid, args=(GRID.values, GRID.next_index, GRID.rewards, GRID.r_max),
         invalid={"values": [GRID.values[::-1] + 1.0], "next_index": [GRID.next_index + 100, GRID.next_index * 0.5],
                  "rewards": [-GRID.rewards - 1.0], "r_max": ["1"]}),
    dict(fn=y_grid, args=(M.reward, 1.0), invalid={"rewards": [np.array([-0.5, 1.0]), np.array([])],
                                                   "gamma": [0.0, 1.5, float("nan")], "max_size": [0, 1.5]}),
    dict(fn=augmented_backup, args=(M, GRID, Q0, 1.0),
         invalid={"mdp": [None], "grid": [None, GRID.values], "Q": [np.zeros((2, 2))], "gamma": [-0.1, 2.0]}),
    dict(fn=max_reward_value_iteration, args=(M, 1.0),
         invalid={"mdp": [None], "gamma": [1.5], "r_lb": [0.5, float("nan")], "r_ub": [0.2], "tol": [0.0, -1.0],
                  "max_iter": [0, 2.5], "max_y": [0]}),
    dict(fn=maxdet_value_iteration, args=(M, 1.0), invalid={"mdp": [None], "gamma": [-1.0], "tol": [-1e-3], "max_iter": [0]}),
    dict(fn=cumulative_value_iteration, args=(M, 0.9), invalid={"mdp": ["m"], "gamma": [1.2], "tol": [0.0], "max_iter": [-1]}),
    dict(fn=rollout, args=(M, np.zeros((2, len(GRID.values)), dtype=np.int64)),
         kwargs={"gamma": 1.0, "episodes": 10, "horizon": 5, "rng": np.random.default_rng(0), "grid": GRID},
         invalid={"policy": [np.zeros(2, dtype=np.int64), np.full((2, len(GRID.values)), 5), np.zeros((2, len(GRID.values)))],
                  "episodes": [0, 1.5], "horizon": [0], "rng": [0], "grid": ["grid"], "gamma": [2.0]}),
    dict(fn=max_returns, args=(np.array([0.1, 0.0, 0.7]), 0.9),
         invalid={"rewards": [np.array([]), np.array([0.1, -0.2])], "gamma": [1.5], "y0": [-1.0, "0"]}),
    dict(fn=stochastic_counterexample),
    dict(fn=maze_q_learning, args=(M,), kwargs={"objective": "max", "gamma": 1.0, "horizon": 3, "episodes": 2,
                                                 "n_runs": 2, "eval_every": 1},
         invalid={"mdp": [None], "objective": ["sum"], "gamma": [1.5], "alpha": [0.0, 1.5], "epsilon": [-0.1],
                  "horizon": [0], "episodes": [0, 2.5], "n_runs": [0], "seed": [-1], "eval_every": [0],
                  "eval_episodes": [0]}),
    dict(fn=episodes_to_success, args=(np.array([[0.0, 0.5, 1.0]]), [5, 10, 15]),
         invalid={"curve": [np.array([0.5, 1.0]), np.array([[1.5, 0.0, 0.0]])], "eval_at": [[5, 10]],
                  "threshold": [1.5, -0.1, None]}),
    dict(fn=MaxTD3Agent, kwargs={"obs_dim": 2, "action_dim": 2, "r_lb": 0.0, "r_ub": 1.0, "config": SMALL},
         invalid={"obs_dim": [0, 1.5], "action_dim": [-1], "r_lb": [1.0, None], "r_ub": [-0.5],
                  "critic_start": ["optimistic"], "config": [None], "seed": [-1]}),
    dict(fn=train_td3_vec, args=(_env(), _agent()), kwargs={"total_steps": 8, "seed": 0, "warmup_steps": 4},
         invalid={"agent": [None], "env": [None], "total_steps": [0, 2.5], "seed": [-1], "warmup_steps": [-1],
                  "updates_per_step": [-1], "eval_points": [0]}),
    dict(fn=evaluate_greedy, args=(_env(), _agent()), kwargs={"seed": 0},
         invalid={"agent": ["agent"], "env": [3], "seed": [-2, 0.5]}),
]
