"""Rob-FCP server aggregation time against the number of clients: vectorised vs the official code's loops.

Certifiably Byzantine-Robust Federated Conformal Prediction (Kang et al., ICML 2024). The server receives one
histogram of ``H * refine`` bin counts per client (H = 100 as in the paper, refine = 10) and, with the number
of malicious clients known, builds the characterisation vectors, the pairwise distances, the maliciousness
scores, the benign set and the histogram quantile. ``aggregate_histograms`` does this with numpy/scipy
(``cdist``, ``np.partition``); the reference does it as the official ``fl_conformal.py`` does, with a Python
double loop of per-pair numpy distances, ``heapq.nlargest`` per row, and a per-client loop for the quantile.
The unknown-count estimator is timed too (vectorised prefix sums vs a per-candidate refit with a per-client
likelihood loop). Both paths return the same benign set (checked here).
Usage: ``python benchmarks/bench_rob_fcp.py [--quick]``.
"""

from __future__ import annotations

import argparse
import heapq
import math

import numpy as np

from _timing import best_of
from icml24.conformal.rob_fcp import aggregate_histograms, estimate_num_malicious


def make_counts(k: int, n_mal: int, fine_bins: int, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    p = np.linspace(2.0, 1.0, fine_bins)
    p /= p.sum()
    counts = list(rng.multinomial(n, p, size=k).astype(np.float64))
    for i in rng.choice(k, n_mal, replace=False):
        c = np.zeros(fine_bins)
        c[0] = n  # coverage attack
        counts[i] = c
    return counts


def naive_aggregate(counts: list[np.ndarray], n_mal: int, n_bins: int, refine: int, alpha: float):
    """The official code's loop structure, on histograms."""
    k = len(counts)
    vecs = []
    for c in counts:
        v = np.zeros(n_bins)
        for h in range(n_bins):
            v[h] = c[h * refine : (h + 1) * refine].sum()
        vecs.append(v / c.sum())
    dist = np.zeros((k, k))
    for i in range(k):
        for j in range(k):
            dist[i][j] = np.sqrt(np.sum((vecs[i] - vecs[j]) ** 2))
    kb = k - n_mal
    scores = np.zeros(k)
    for i in range(k):
        row = np.where(np.arange(k) == i, np.inf, dist[i])
        scores[i] = sum(heapq.nsmallest(kb - 1, row))
    benign = sorted(heapq.nsmallest(kb, range(k), key=lambda i: (scores[i], i)))
    pooled = np.zeros_like(counts[0])
    for i in benign:
        pooled += counts[i]
    total = pooled.sum()
    rank = math.ceil(round((1 - alpha) * (total + kb), 9))
    if rank > total:
        return math.inf, benign
    cum = 0.0
    for h, c in enumerate(pooled):
        cum += c
        if cum >= rank:
            return (h + 1) / pooled.size, benign
    return math.inf, benign


def naive_estimator(vectors: np.ndarray, order: np.ndarray) -> int:
    k = vectors.shape[0]
    best, best_m = -np.inf, 1
    for m in range(1, (k + 1) // 2):
        ben = [vectors[i] for i in order[: k - m]]
        mu = np.mean(ben, axis=0)
        ll = [-0.5 * np.sum((vectors[i] - mu) ** 2) for i in order]
        j = np.mean(ll[: k - m]) - np.mean(ll[k - m :])
        if j > best:
            best, best_m = j, m
    return best_m


def bench_size(k: int, n_bins: int, refine: int, alpha: float, rng: np.random.Generator) -> tuple[float, ...]:
    """(naive, ours) seconds for the aggregation and for the estimator at ``k`` clients."""
    n_mal = int(0.3 * k)
    counts = make_counts(k, n_mal, n_bins * refine, 50, rng)
    repeats = 3 if k <= 100 else 1

    def ours() -> object:
        return aggregate_histograms(counts, None, alpha=alpha, n_bins=n_bins, refine=refine, n_malicious=n_mal)

    agg = ours()
    q_naive, benign_naive = naive_aggregate(counts, n_mal, n_bins, refine, alpha)
    assert list(agg.benign) == benign_naive and agg.qhat == q_naive  # same answer on both paths
    t_ours = best_of(ours, repeats=repeats)
    t_naive = best_of(lambda: naive_aggregate(counts, n_mal, n_bins, refine, alpha), repeats=repeats)
    vectors = np.stack([c.reshape(n_bins, refine).sum(1) / c.sum() for c in counts])
    est = estimate_num_malicious(vectors)
    assert naive_estimator(vectors, est.order) == est.n_malicious
    e_ours = best_of(lambda: estimate_num_malicious(vectors), repeats=repeats)
    e_naive = best_of(lambda: naive_estimator(vectors, est.order), repeats=repeats)
    return t_naive, t_ours, e_naive, e_ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small client counts only")
    args = parser.parse_args()
    sizes = (10, 50, 100) if args.quick else (10, 50, 100, 200, 500)
    rng = np.random.default_rng(0)
    print("H=100 bins x refine=10, 50 scores per client, 30% coverage attackers")
    print(f"{'clients':>8} {'naive (s)':>10} {'ours (s)':>10} {'ratio':>7} | {'est naive':>10} {'est ours':>9} {'ratio':>7}")
    for k in sizes:
        t_naive, t_ours, e_naive, e_ours = bench_size(k, 100, 10, 0.1, rng)
        print(f"{k:>8} {t_naive:>10.4f} {t_ours:>10.4f} {t_naive / t_ours:>6.1f}x | "
              f"{e_naive:>10.4f} {e_ours:>9.4f} {e_naive / e_ours:>6.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
