"""Speed of the batched torch environments against the same task as plain Gymnasium envs in SyncVectorEnv.

Measures environment steps per second of the full vector-env step (action checks and clipping, dynamics,
observation, reward, time limit and same-step autoreset) for ``BatchedPendulum`` vs ``Pendulum-v1`` and
``BatchedDeceptivePointMass`` vs ``DeceptivePointMassEnv``, at N in {1k, 4k, 16k} batched envs (one torch
thread) and 64 envs in ``SyncVectorEnv`` (its steps/s hardly depends on N). Also times PPO and SAPG
iterations per second on the point mass. Usage: ``python benchmarks/bench_rl_envs.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import torch

from _timing import iterations_per_s
from icml24.rl.envs import BatchedDeceptivePointMass, BatchedPendulum, DeceptivePointMassEnv
from icml24.rl.ppo import PPO, PPOConfig
from icml24.rl.sapg import SAPG, SAPGConfig


def _best_of(fn, repeats: int) -> float:
    return min(fn() for _ in range(repeats))


def batched_steps_per_s(cls, n: int, steps: int, repeats: int = 3) -> float:
    env = cls(num_envs=n)
    env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    low, high = env._act_low, env._act_high
    actions = [low + (high - low) * torch.rand(env.action_space.shape, generator=g) for _ in range(8)]

    def run() -> float:
        t = time.perf_counter()
        for i in range(steps):
            env.step(actions[i % 8])
        return time.perf_counter() - t

    env.step(actions[0])
    return n * steps / _best_of(run, repeats)


def sync_steps_per_s(make, n: int, steps: int, repeats: int = 3) -> float:
    venv = gym.vector.SyncVectorEnv(
        [make for _ in range(n)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    venv.reset(seed=0)
    venv.action_space.seed(0)
    actions = [venv.action_space.sample() for _ in range(8)]

    def run() -> float:
        t = time.perf_counter()
        for i in range(steps):
            venv.step(actions[i % 8])
        return time.perf_counter() - t

    return n * steps / _best_of(run, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and sizes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = (1024, 4096) if args.quick else (1024, 4096, 16384)
    steps = 50 if args.quick else 200
    sync_n, sync_steps = 64, (50 if args.quick else 200)
    tasks = {
        "pendulum": (BatchedPendulum, lambda: gym.make("Pendulum-v1")),
        "point_mass": (BatchedDeceptivePointMass, DeceptivePointMassEnv),
    }
    print(f"{'task':<12}{'impl':<28}{'steps/s':>14}{'ratio':>10}")
    for name, (batched, make) in tasks.items():
        base = sync_steps_per_s(make, sync_n, sync_steps)
        print(f"{name:<12}{f'SyncVectorEnv x{sync_n}':<28}{base:>14,.0f}{1.0:>10.1f}")
        for n in sizes:
            sps = batched_steps_per_s(batched, n, steps)
            print(f"{name:<12}{f'batched torch N={n}':<28}{sps:>14,.0f}{sps / base:>10.1f}")
    iters = 2 if args.quick else 5
    cfg = PPOConfig()
    for n in (1024,) if args.quick else (1024, 4096):
        ppo = iterations_per_s(PPO(BatchedDeceptivePointMass(num_envs=n), config=cfg, seed=0), iters)
        sapg = iterations_per_s(
            SAPG(BatchedDeceptivePointMass(num_envs=n), config=SAPGConfig(num_blocks=4, ppo=cfg)), iters
        )
        print(f"PPO  N={n}: {ppo:.2f} it/s ({ppo * n * cfg.horizon:,.0f} env steps/s incl. updates)")
        print(f"SAPG N={n} M=4: {sapg:.2f} it/s ({sapg * n * cfg.horizon:,.0f} env steps/s incl. updates)")


if __name__ == "__main__":
    main()
