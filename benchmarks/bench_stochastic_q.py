"""Benchmark: DQN vs StochDQN gradient updates per CPU second against the number of actions n.

Run: ``python benchmarks/bench_stochastic_q.py [--quick]``. One torch thread; CPU time (``process_time``), so
the ratios hold on a shared machine. Q(s, a_vec) MLP 2x64 (the paper's architecture), batch 2 round(log2 n),
Pendulum-sized observations. Scoring "batched" = one forward pass over batch x |C| rows; "looped" = one
forward pass per candidate action (the official code). Also StochDQN against a *normal* DQN whose Q(s) -> R^n
output head scores all n actions in one forward pass (the strongest exact baseline), and env steps per CPU
second of the training loops.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from icml24.rl.envs.chain import garnet_mdp
from icml24.rl.stochastic_q import make_dqn_agent, run_tabular
from icml24.rl.value import ActionGrid, DQNConfig, QLearningConfig, train_dqn


def updates_per_second(method: str, n: int, looped: bool, updates: int) -> float:
    """Gradient updates per CPU second; ``method="dqn_head"`` is exact DQN with the usual Q(s) -> R^n head."""
    grid = ActionGrid([-2.0], [2.0], n)
    if method == "dqn_head":
        agent = make_dqn_agent("dqn", obs_dim=3, action_table=n, config=DQNConfig(network="state"), seed=0)
    else:
        agent = make_dqn_agent(method, obs_dim=3, action_table=grid.table(), config=DQNConfig(looped=looped), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        agent.store(rng.normal(size=3), int(rng.integers(n)), float(rng.normal()), rng.normal(size=3), False)
    agent.update()
    t = time.process_time()
    for _ in range(updates):
        agent.update()
    return updates / (time.process_time() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ns = [32, 1024, 4096] if args.quick else [32, 256, 1024, 4096]
    print("updates per CPU second (higher is better); StochDQN and DQN score Q(s, a_vec) (the paper's network)")
    print(f"{'n':>6} {'scoring':>8} {'DQN':>9} {'StochDQN':>9} {'ratio':>7}")
    for looped in (False, True):
        for n in ns:
            if looped and n > 1024:
                continue
            reps = max(5, (20 if args.quick else 60) * 32 // n) if looped or n > 512 else (30 if args.quick else 100)
            d = updates_per_second("dqn", n, looped, reps)
            s = updates_per_second("stochdqn", n, looped, reps)
            print(f"{n:>6} {'looped' if looped else 'batched':>8} {d:9.1f} {s:9.1f} {s / d:6.1f}x")
    print("\nagainst a normal DQN: exact max over the Q(s) -> R^n output head (one forward pass scores all n)")
    print(f"{'n':>6} {'DQN head':>9} {'StochDQN':>9} {'ratio':>7}")
    for n in ns:
        reps = 30 if args.quick else 100
        # interleave the two arms and keep the best of 3, so a burst of load hits both alike
        h = s = 0.0
        for _ in range(3):
            h = max(h, updates_per_second("dqn_head", n, False, reps))
            s = max(s, updates_per_second("stochdqn", n, False, reps))
        print(f"{n:>6} {h:9.1f} {s:9.1f} {s / h:6.2f}x")
    import gymnasium as gym

    steps = 150 if args.quick else 600
    print(f"\nPendulum training loop, env steps per CPU second ({steps} steps, n=512)")
    env = gym.make("Pendulum-v1")
    grid = ActionGrid(env.action_space.low, env.action_space.high, 512)
    res = {}
    for m in ("dqn", "stochdqn"):
        agent = make_dqn_agent(m, obs_dim=3, action_table=grid.table(), seed=0)
        out = train_dqn(env, agent, steps=steps, seed=0, grid=grid, max_episode_steps=100)
        res[m] = 1.0 / out["seconds_per_step"]
        print(f"  {m:9s} {res[m]:8.1f} steps/s")
    print(f"  ratio StochDQN / DQN: {res['stochdqn'] / res['dqn']:.1f}x")
    print("\nTabular Q-learning on the 1024-action Garnet MDP, env steps per CPU second (8 parallel learners)")
    mdp = garnet_mdp(n_states=10, n_actions=1024, seed=0)
    cfg = QLearningConfig(gamma=0.9, alpha=0.5)
    tab = {}
    for m in ("q_learning", "stoch_q_learning"):
        t = time.process_time()
        run_tabular(m, mdp, config=cfg, n_runs=8, steps=2000 if args.quick else 10_000, seed=0)
        tab[m] = 8 * (2000 if args.quick else 10_000) / (time.process_time() - t)
        print(f"  {m:17s} {tab[m]:10.0f} steps/s")
    print(f"  ratio stochastic / exact: {tab['stoch_q_learning'] / tab['q_learning']:.2f}x")


if __name__ == "__main__":
    main()
