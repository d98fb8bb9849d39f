"""Benchmark: the vectorised max-reward Bellman backup and max-return estimator vs naive Python loops, and env
steps per CPU second of the training loops (tabular max-Q vs cumulative Q; max-TD3 vs TD3 on the point maze).

Run: ``python benchmarks/bench_max_reward.py [--quick]``. CPU time (``process_time``), one torch thread.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from icml24.rl.envs.mazes import GridMaze, PointMazeVecEnv
from icml24.rl.max_reward import (
    MaxTD3Agent,
    Outcomes,
    augmented_backup,
    max_returns,
    maze_q_learning,
    train_td3_vec,
)
from icml24.rl.max_reward.bellman import y_grid
from icml24.rl.value import TD3Agent, TD3Config


def naive_backup(m: Outcomes, grid, Q: np.ndarray, gamma: float) -> np.ndarray:
    """The augmented backup one (s, y, a, outcome) at a time: the reference the vectorised one must match."""
    out = np.zeros_like(Q)
    V = Q.max(-1)
    ridx = {float(r): i for i, r in enumerate(grid.rewards)}
    for s in range(m.n_states):
        for yi, y in enumerate(grid.values):
            for a in range(m.n_actions):
                acc = 0.0
                for k in range(m.prob.shape[-1]):
                    p, s2, r, term = m.prob[s, a, k], m.next_state[s, a, k], m.reward[s, a, k], m.terminal[s, a, k]
                    if p == 0:
                        continue
                    mx = max(y, r)
                    ny = grid.next_index[yi, ridx[float(np.round(r, 12))]]
                    val = mx if term or ny < 0 else gamma * max(grid.values[ny], V[s2, ny])
                    acc += p * val
                out[s, yi, a] = acc
    return out


def naive_max_returns(r: np.ndarray, gamma: float) -> np.ndarray:
    T = len(r)
    y, ys = 0.0, []
    for t in range(T):
        ys.append(y)
        y = max(y, r[t]) / gamma
    return np.array([max([ys[t]] + [gamma ** (k - t) * r[k] for k in range(t, T)]) for t in range(T)])


def clock(fn, reps: int = 1) -> float:
    t = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - t) / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    m = Outcomes.from_tabular(GridMaze(slip=0.2).to_mdp())
    grid = y_grid(m.reward, 0.99)
    Q = np.random.default_rng(0).random((m.n_states, len(grid.values), m.n_actions))
    np.testing.assert_allclose(augmented_backup(m, grid, Q, 0.99), naive_backup(m, grid, Q, 0.99), atol=1e-12)
    tv, tn = clock(lambda: augmented_backup(m, grid, Q, 0.99), 5), clock(lambda: naive_backup(m, grid, Q, 0.99))
    print(f"augmented backup, slippery maze (S={m.n_states}, |Y|={len(grid.values)}, A=4): vectorised "
          f"{1e3 * tv:.1f} ms, naive loop {1e3 * tn:.0f} ms -> {tn / tv:.0f}x")  # fmt: skip
    r = np.random.default_rng(1).random(300)
    np.testing.assert_allclose(max_returns(r, 0.99), naive_max_returns(r, 0.99), rtol=1e-12)
    tv, tn = clock(lambda: max_returns(r, 0.99), 20), clock(lambda: naive_max_returns(r, 0.99))
    print(f"max-return estimator, T=300: vectorised {1e3 * tv:.2f} ms, naive O(T^2) {1e3 * tn:.0f} ms -> {tn / tv:.0f}x")

    eps = 30 if args.quick else 100
    print(f"\ntabular Q-learning on the grid maze, 10 parallel learners, {eps} episodes of <= 50 steps:")
    for obj, rew, g in (("max", "dsp", 0.99), ("cumulative", "dsp_shifted", 0.99)):
        mm = Outcomes.from_tabular(GridMaze(reward=rew).to_mdp())
        t = time.process_time()
        maze_q_learning(mm, objective=obj, gamma=g, episodes=eps, n_runs=10, eval_every=10**9)
        dt = time.process_time() - t
        print(f"  {obj:10s} {eps * 10 * 50 / dt:10.0f} learner steps / CPU s (upper bound: episodes may end early)")

    steps = 2000 if args.quick else 8000
    print(f"\npoint maze, 16 envs, {steps} env steps (warm-up 1000), one update per vector step:")
    for name in ("max_td3", "td3"):
        env = PointMazeVecEnv(16)
        cfg = TD3Config(gamma=0.995 if name == "max_td3" else 0.99, hidden=(128, 128))
        agent = (MaxTD3Agent(obs_dim=2, action_dim=2, r_lb=0.0, r_ub=1.0, config=cfg) if name == "max_td3"
                 else TD3Agent(obs_dim=2, action_dim=2, config=cfg))  # fmt: skip
        out = train_td3_vec(env, agent, total_steps=steps, seed=0, warmup_steps=1000)
        print(f"  {name:8s} {out['env_steps_per_second']:8.0f} env steps / CPU s")
    env = PointMazeVecEnv(1024)
    env.reset(seed=0)
    a = torch.zeros(1024, 2)
    t = clock(lambda: env.step(a), 50)
    print(f"  raw batched env: {1024 / t:.0f} env steps / CPU s at 1024 envs")


if __name__ == "__main__":
    main()
