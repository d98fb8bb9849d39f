"""Benchmark: m-free lp coreset construction time against n, and the full-data solve time it saves.

    python benchmarks/bench_lp_coresets.py            # n up to 10^6 rows, d = 20, m = 16
    python benchmarks/bench_lp_coresets.py --quick    # n up to 10^5

For each n: the time to build a coreset of k = 2000 rows (Lewis weights + pilot solve + residual mass +
sampling), the time to solve on it, the time of the full-data IRLS solve, and the solution quality
f(X_S)/f(X*) - 1. A second table times our vectorised Lewis-weight iteration against a naive per-row
Python loop (same fixed point) on small n.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from icml24.optim.lp_coresets import MultipleLpCoreset, lewis_weights, lp_cost, solve_multi_lp  # noqa: E402
from icml24.optim.lp_coresets.reproduce import make_regression  # noqa: E402


def naive_lewis(A: np.ndarray, p: float, iters: int) -> np.ndarray:
    """Textbook per-row loop of the same fixed-point map (the oracle the vectorised code replaces)."""
    n, d = A.shape
    w = np.full(n, d / n)
    for _ in range(iters):
        M = sum(w[i] ** (1 - 2 / p) * np.outer(A[i], A[i]) for i in range(n))
        Minv = np.linalg.inv(M)
        w = np.array([float(A[i] @ Minv @ A[i]) ** (p / 2) for i in range(n)])
    return w


def vectorised_lewis(A: np.ndarray, p: float, iters: int, damping: float = 1.0) -> np.ndarray:
    """The same fixed-point map, vectorised in plain numpy on A itself (no orthonormal basis, no Cholesky):
    the alternative a user would write in a few lines."""
    n, d = A.shape
    w = np.full(n, d / n)
    for _ in range(iters):
        M = (A * (w ** (1 - 2 / p))[:, None]).T @ A
        t = np.einsum("ij,ij->i", A, np.linalg.solve(M, A.T).T) ** (p / 2)
        w = t if damping == 1.0 else w ** (1 - damping) * t**damping
    return w


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--p", type=float, default=1.5)
    args = ap.parse_args()
    p, d, m, k = args.p, 20, 16, 2000
    ns = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    print(f"p={p}, d={d}, m={m}, k={k} (one BLAS thread)")
    print(
        f"{'n':>9} {'build s':>8} {'coreset solve s':>15} {'full solve s':>12} {'speed-up':>8} {'weak err':>9}"
    )
    for n in ns:
        A, B = make_regression(n, d, m, np.random.default_rng(0))
        t0 = time.perf_counter()
        est = MultipleLpCoreset(p=p, k=k, random_state=0).fit(A, B)
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        X_S = est.solve(max_iter=100, tol=1e-8)
        t_cs = time.perf_counter() - t0
        t0 = time.perf_counter()
        X_star = solve_multi_lp(A, B, p, max_iter=100, tol=1e-8).X
        t_full = time.perf_counter() - t0
        err = lp_cost(A, B, X_S, p) / lp_cost(A, B, X_star, p) - 1
        print(
            f"{n:>9} {t_build:>8.2f} {t_cs:>15.2f} {t_full:>12.2f} {t_full / (t_build + t_cs):>7.1f}x {err:>9.2e}"
        )
    print("\nLewis weights: ours vs a plain vectorised numpy iteration (same map, same damping, 20 iterations;"
          " best of 3, interleaved)")
    from _timing import best_of

    for n in [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]:
        A, _ = make_regression(n, d, 1, np.random.default_rng(1))
        for pp in (1.5, 3.0):
            damp = 4 / (pp + 2) if pp > 2 else 1.0
            t_ours = best_of(lewis_weights, A, pp, max_iter=20, tol=0.0, on_fail="ignore")
            t_vec = best_of(vectorised_lewis, A, pp, 20, damp)
            w, w_vec = lewis_weights(A, pp, max_iter=20, tol=0.0, on_fail="ignore"), vectorised_lewis(A, pp, 20, damp)
            assert np.allclose(w, w_vec, rtol=1e-6, atol=1e-12), "vectorised and ours disagree"
            print(f"n={n:>8}, p={pp}: ours {t_ours * 1e3:8.1f} ms, vectorised {t_vec * 1e3:8.1f} ms, "
                  f"ratio {t_vec / t_ours:5.2f}x")
    print("\nLewis weights: vectorised vs naive per-row loop (10 iterations each)")
    for n in [500, 2000] if args.quick else [500, 2000, 5000]:
        A, _ = make_regression(n, d, 1, np.random.default_rng(1))
        t0 = time.perf_counter()
        w = lewis_weights(A, p, max_iter=10, tol=0.0, on_fail="ignore")
        t_vec = time.perf_counter() - t0
        t0 = time.perf_counter()
        w_naive = naive_lewis(A, p, 10)
        t_naive = time.perf_counter() - t0
        assert np.allclose(w, w_naive, rtol=1e-6), "naive and vectorised iterations disagree"
        print(
            f"n={n:>5}: vectorised {t_vec * 1e3:8.1f} ms, naive {t_naive * 1e3:9.1f} ms, ratio {t_naive / t_vec:7.0f}x"
        )


if __name__ == "__main__":
    main()
