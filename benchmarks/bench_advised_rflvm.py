"""Benchmark: advisedRFLVM fit time against N and the number of random features, Woodbury vs direct likelihood.

    python benchmarks/bench_advised_rflvm.py            # N up to 4000
    python benchmarks/bench_advised_rflvm.py --quick    # N up to 1000

Table 1: seconds per ELBO step (forward + backward) of the Woodbury form, O(N M² + M³), against the direct
N×N Cholesky, O(N³), of the same likelihood, for M = 2·m·L features; the ratio is direct / Woodbury.
Table 2: fit time of ``AdvisedRFLVM`` (SM kernel, m = 2) for 100 Adam steps against N and L.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from icml24.gp import SpectralMixtureKernel  # noqa: E402
from icml24.gp.advised_rflvm import AdvisedRFLVM, rflvm_elbo  # noqa: E402


def _step_time(n: int, d: int, n_freq: int, dense: bool, reps: int) -> float:
    g = torch.Generator().manual_seed(0)
    y = torch.randn(n, d, generator=g, dtype=torch.float64) / np.sqrt(n * d)
    kern = SpectralMixtureKernel(n_components=2, input_dim=2)
    mu = torch.nn.Parameter(torch.randn(n, 2, generator=g, dtype=torch.float64))
    s = torch.full((n, 2), 0.1, dtype=torch.float64, requires_grad=True)
    noise = torch.tensor(1e-4, dtype=torch.float64, requires_grad=True)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        elbo = rflvm_elbo(y, mu, s, kern, noise, eps_x=torch.randn(n, 2, generator=g, dtype=torch.float64),
                          eps_omega=torch.randn(2, n_freq, 2, generator=g, dtype=torch.float64), dense=dense)  # fmt: skip
        elbo.backward()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ns = [250, 500, 1000] if args.quick else [250, 500, 1000, 2000, 4000]
    print("Seconds per ELBO step (forward+backward), D=30, m=2, L=25 (M=100 features); best of 3, one thread")
    print(f"{'N':>6} {'Woodbury s':>11} {'direct s':>10} {'direct/Woodbury':>16}")
    for n in ns:
        tw = _step_time(n, 30, 25, False, 3)
        td = _step_time(n, 30, 25, True, 3)
        print(f"{n:>6} {tw:>11.4f} {td:>10.4f} {td / tw:>16.1f}")
    print("\nAdvisedRFLVM.fit, 100 Adam steps, D=30, SM m=2")
    print(f"{'N':>6} {'L':>4} {'M':>5} {'fit s':>8}")
    rng = np.random.default_rng(0)
    for n in ns[:3]:
        for n_freq in (10, 25, 50) if not args.quick else (10, 25):
            y = rng.normal(size=(n, 30))
            start = time.perf_counter()
            AdvisedRFLVM(2, n_iter=100, n_frequencies=n_freq, random_state=0).fit(y)
            print(f"{n:>6} {n_freq:>4} {4 * n_freq:>5} {time.perf_counter() - start:>8.2f}")


if __name__ == "__main__":
    main()
