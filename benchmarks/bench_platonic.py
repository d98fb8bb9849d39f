"""Benchmark: mutual k-nearest-neighbour alignment at n = 10,000 (k = 10).

Ours (``icml24.evaluation.platonic_representation.mutual_knn``: row-chunked ``matmul`` + ``topk``, overlap
by sorting) against

* a naive implementation, one row at a time with numpy (similarities, ``argsort``, Python sets); it is
  timed on the first ``--naive-rows`` rows and scaled to n (its cost is linear in the rows), and its
  per-row overlaps are checked against ours;
* the official code path (dense: full ``n x n`` similarity, full-row ``argsort``, two ``n x n`` masks), in
  torch, skipped with ``--no-dense`` (it needs ~2 GB at n = 10,000).

Features: A is 384-d Gaussian, B = tanh(A W) + noise (256-d), so the score is well above chance.

    .venv/bin/python benchmarks/bench_platonic.py [--quick] [--no-dense]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from icml24.evaluation.platonic_representation import knn_indices, knn_overlap, mutual_knn


def naive_rows(a: np.ndarray, b: np.ndarray, k: int, rows: int) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    out = np.zeros(rows)
    for i in range(rows):
        sa, sb = a @ a[i], b @ b[i]
        sa[i] = sb[i] = -np.inf
        na = set(np.argsort(-sa)[:k].tolist())
        nb = set(np.argsort(-sb)[:k].tolist())
        out[i] = len(na & nb)
    return out


def dense_official_style(a: torch.Tensor, b: torch.Tensor, k: int) -> float:
    a = torch.nn.functional.normalize(a, dim=1)
    b = torch.nn.functional.normalize(b, dim=1)
    n = a.shape[0]
    knn_a = (a @ a.T).fill_diagonal_(-1e8).argsort(dim=1, descending=True)[:, :k]
    knn_b = (b @ b.T).fill_diagonal_(-1e8).argsort(dim=1, descending=True)[:, :k]
    rows = torch.arange(n).unsqueeze(1)
    ma, mb = torch.zeros(n, n), torch.zeros(n, n)
    ma[rows, knn_a] = 1.0
    mb[rows, knn_b] = 1.0
    return float(((ma * mb).sum(1) / k).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 2,000")
    ap.add_argument("--no-dense", action="store_true")
    ap.add_argument("--naive-rows", type=int, default=1000)
    args = ap.parse_args()
    n, k = (2000, 10) if args.quick else (10_000, 10)
    rows = min(args.naive_rows, n)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n, 384)).astype(np.float32)
    b = (np.tanh(a @ rng.normal(size=(384, 256)) / 20) + 0.05 * rng.normal(size=(n, 256))).astype(np.float32)
    print(f"n = {n}, k = {k}, torch threads = {torch.get_num_threads()}")

    t = time.perf_counter()
    score = mutual_knn(a, b, k=k)
    t_ours = time.perf_counter() - t
    print(f"ours:                     {t_ours:8.2f} s   score {score:.4f} (chance {k / (n - 1):.4f})")

    t = time.perf_counter()
    naive = naive_rows(a.astype(np.float64), b.astype(np.float64), k, rows)
    t_naive = (time.perf_counter() - t) * n / rows
    ours_rows = knn_overlap(knn_indices(a[:, :].astype(np.float64), k), knn_indices(b.astype(np.float64), k))[:rows]
    agree = float(np.mean(ours_rows.numpy() == naive))
    print(f"naive per-row loop:       {t_naive:8.2f} s   (timed on {rows} rows, x{n / rows:.0f}); "
          f"ratio {t_naive / t_ours:6.1f}x; per-row overlaps equal on {agree:.1%} of rows")  # fmt: skip

    if not args.no_dense:
        t = time.perf_counter()
        dense = dense_official_style(torch.from_numpy(a), torch.from_numpy(b), k)
        t_dense = time.perf_counter() - t
        print(f"dense (official-style):   {t_dense:8.2f} s   score {dense:.4f}; ratio {t_dense / t_ours:6.1f}x")


if __name__ == "__main__":
    main()
