"""Cost of SAPG's aggregation: iterations per second of PPO vs SAPG (leader-follower, symmetric, none) at the
same number of environments on the deceptive point mass (one torch thread).

SAPG's leader-follower update adds K * B * T relabelled samples (plus two critic passes over them) to PPO's
N * T, so at M blocks its update should cost about (1 + 1/M) of PPO's; symmetric aggregation doubles the batch.
Usage: ``python benchmarks/bench_sapg.py [--quick]``.
"""

from __future__ import annotations

import argparse

import torch

from _timing import iterations_per_s
from icml24.rl.envs import BatchedDeceptivePointMass
from icml24.rl.ppo import PPO, PPOConfig
from icml24.rl.sapg import SAPG, SAPGConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one size, fewer iterations")
    args = parser.parse_args()
    torch.set_num_threads(1)
    iters = 2 if args.quick else 5
    cfg = PPOConfig()
    print(f"{'N':>6} {'method':<26}{'it/s':>8}{'rel. to PPO':>13}")
    for n in (512,) if args.quick else (1024, 4096):
        base = iterations_per_s(PPO(BatchedDeceptivePointMass(num_envs=n), config=cfg, seed=0), iters)
        print(f"{n:>6} {'PPO':<26}{base:>8.2f}{1.0:>13.2f}")
        for agg in ("leader_follower", "symmetric", "none"):
            sc = SAPGConfig(num_blocks=4, aggregation=agg, ppo=cfg)
            ips = iterations_per_s(SAPG(BatchedDeceptivePointMass(num_envs=n), config=sc, seed=0), iters)
            print(f"{n:>6} {f'SAPG M=4 {agg}':<26}{ips:>8.2f}{ips / base:>13.2f}")


if __name__ == "__main__":
    main()
