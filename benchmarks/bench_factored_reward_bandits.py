"""Speed of F-UCB vectorised over trials against a plain per-trial Python implementation.

Factored-Reward Bandits (Mussi et al., ICML 2024). Measures trial-rounds per second of F-UCB at d=5 factors,
K=5 arms: ``simulate`` advancing 100 trials together (one numpy step per round, environment sampling and regret
bookkeeping included) against ``reference.fucb_single_trial``, a per-trial loop over rounds, factors and arms in
the style of the official code (noise drawn in advance, so the reference does strictly less work).
Both give the same actions on the same noise (``tests/.../test_frb_agents.py``).
Usage: ``python benchmarks/bench_factored_reward_bandits.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from icml24.bandits.factored_reward_bandits import FUCB, FactoredEnv, simulate
from icml24.bandits.factored_reward_bandits.reference import fucb_single_trial


def vectorised_rate(d: int, k: int, trials: int, horizon: int) -> float:
    env = FactoredEnv(n_arms=k, n_factors=d, sigma=0.1)
    t = time.perf_counter()
    simulate(env, FUCB(n_arms=k, n_factors=d, sigma=0.1), horizon, trials, seed=0)
    return trials * horizon / (time.perf_counter() - t)


def per_trial_rate(d: int, k: int, trials: int, horizon: int) -> float:
    rng = np.random.default_rng(0)
    means = rng.uniform(0.3, 1.0, size=(trials, d, k))
    noise = 0.1 * rng.standard_normal((trials, horizon, d))
    t = time.perf_counter()
    for r in range(trials):
        fucb_single_trial(means[r], 0.1, noise[r])
    return trials * horizon / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter horizon, fewer reference trials")
    args = parser.parse_args()
    d, k, trials = 5, 5, 100
    horizon = 300 if args.quick else 2000
    ref_trials = 2 if args.quick else 5
    # Alternate the two and keep each one's best run, so that both are measured under the same (shared) load.
    vec, ref = 0.0, 0.0
    for _ in range(2 if args.quick else 3):
        vec = max(vec, vectorised_rate(d, k, trials, horizon))
        ref = max(ref, per_trial_rate(d, k, ref_trials, horizon))
    print(f"F-UCB d={d} K={k}, horizon {horizon}")
    print(f"  vectorised, {trials} trials together : {vec:12,.0f} trial-rounds/s ({vec / trials:,.0f} rounds/s)")
    print(f"  per-trial Python loop ({ref_trials} trials)  : {ref:12,.0f} trial-rounds/s")
    print(f"  ratio vectorised / per-trial        : {vec / ref:.1f}x")


if __name__ == "__main__":
    main()
