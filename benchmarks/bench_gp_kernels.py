"""Benchmark: the shared GP kernels against GPyTorch, and the Woodbury likelihood against the direct one.

    python benchmarks/bench_gp_kernels.py            # N up to 4000
    python benchmarks/bench_gp_kernels.py --quick    # N up to 1000

Table 1: SM Gram matrix (m = 4 components, 1-D inputs, where both kernels are the same function) and RBF
Gram matrix, ours vs GPyTorch (``ratio`` = GPyTorch / ours). Table 2: ``Σ_d log N(y_d | 0, ΦΦᵀ + σ²I)`` with
M = 100 features, Woodbury vs direct Cholesky (``ratio`` = direct / Woodbury).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from _timing import best_of  # noqa: E402
from icml24.gp import gaussian_loglik_dense, gaussian_loglik_lowrank, rbf_kernel, sm_kernel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ns = [250, 1000] if args.quick else [250, 1000, 2000, 4000]
    d64 = torch.float64
    try:
        import gpytorch
    except ImportError:  # pragma: no cover - gpytorch is a dev extra
        gpytorch = None
    g = torch.Generator().manual_seed(0)
    w, mu, v = torch.rand(4, dtype=d64) + 0.1, torch.rand(4, 1, dtype=d64), torch.rand(4, 1, dtype=d64) * 0.1
    print("Gram matrix seconds (best of 3, one thread)")
    print(f"{'N':>6} {'SM ours':>8} {'SM gpytorch':>12} {'ratio':>6} {'RBF ours':>9} {'RBF gpytorch':>13} {'ratio':>6}")
    for n in ns:
        x = torch.randn(n, 1, generator=g, dtype=d64)
        t_sm = best_of(sm_kernel, x, x, weights=w, means=mu, variances=v)
        t_rbf = best_of(rbf_kernel, x, x, lengthscale=0.5, variance=1.0)
        if gpytorch is not None:
            sm_ref = gpytorch.kernels.SpectralMixtureKernel(num_mixtures=4, ard_num_dims=1).double()
            sm_ref.mixture_weights, sm_ref.mixture_means, sm_ref.mixture_scales = w, mu.unsqueeze(1), v.sqrt().unsqueeze(1)
            rbf_ref = gpytorch.kernels.RBFKernel().double()
            with torch.no_grad():
                r_sm = best_of(lambda a, k: k(a, a).to_dense(), x, sm_ref)
                r_rbf = best_of(lambda a, k: k(a, a).to_dense(), x, rbf_ref)
        else:
            r_sm = r_rbf = float("nan")
        print(f"{n:>6} {t_sm:>8.4f} {r_sm:>12.4f} {r_sm / t_sm:>6.2f} {t_rbf:>9.4f} {r_rbf:>13.4f} {r_rbf / t_rbf:>6.2f}")
    print("\nGaussian log-likelihood seconds, D=30, M=100 (best of 3)")
    print(f"{'N':>6} {'Woodbury':>9} {'direct':>8} {'ratio':>6}")
    for n in ns:
        y = torch.randn(n, 30, generator=g, dtype=d64)
        phi = torch.randn(n, 100, generator=g, dtype=d64) / 10
        tw = best_of(gaussian_loglik_lowrank, y, phi, 0.1)
        td = best_of(lambda a, p: gaussian_loglik_dense(a, p @ p.T + 0.1 * torch.eye(len(a), dtype=d64)), y, phi)
        print(f"{n:>6} {tw:>9.4f} {td:>8.4f} {td / tw:>6.1f}")


if __name__ == "__main__":
    main()
