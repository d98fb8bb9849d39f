"""Benchmark: the exhaustive failure landscape (``icml24.evaluation.failure_landscape``), batched vs per query.

The official code answers one query at a time: perturb one image by one concept cell, one forward pass of
the model under test. :func:`evaluate_landscape` perturbs every (image, cell) pair in one batched
``grid_sample`` / convolution and scores them in batches of 8192. Both ways, interleaved, one torch thread,
best of ``--repeats``, on the same trained CNN and images; checks that they agree and prints
(image, cell) pairs per second and the speed-up.

    .venv/bin/python benchmarks/bench_failure_landscape.py [--quick] [--images N]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from icml24.evaluation.failure_landscape import (
    ConceptGrid,
    DigitsCNN,
    TrainConfig,
    apply_concepts,
    evaluate_landscape,
    failure_reward,
    load_digit_images,
    predict_proba,
    train_classifier,
)


def per_query(model, images, labels, grid: ConceptGrid) -> np.ndarray:
    """One perturbation and one forward pass per (image, cell) pair, as the official environment does."""
    failed = np.zeros((len(labels), grid.n_cells), bool)
    vals = grid.values(np.arange(grid.n_cells))
    for i in range(len(labels)):
        x = torch.as_tensor(images[i : i + 1])
        for c in range(grid.n_cells):
            _, f = failure_reward(predict_proba(model, apply_concepts(x, vals[c : c + 1])), labels[i : i + 1])
            failed[i, c] = f[0]
    return failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 images, 1 repeat")
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    n, repeats = (8, 1) if args.quick else (args.images, args.repeats)
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads 1; "
          f"{n} images x 125 cells")  # fmt: skip
    images, labels = load_digit_images()
    torch.manual_seed(0)
    model = train_classifier(DigitsCNN(), images[:1000], labels[:1000], config=TrainConfig(epochs=5), seed=0)
    pool, pool_labels = images[1000 : 1000 + n], labels[1000 : 1000 + n]
    grid = ConceptGrid()
    best = {"per query (official loop)": float("inf"), "batched (evaluate_landscape)": float("inf")}
    out = {}
    for _ in range(repeats):
        for name in best:
            t0 = time.perf_counter()
            if name.startswith("per query"):
                out[name] = per_query(model, pool, pool_labels, grid)
            else:
                out[name] = evaluate_landscape(model, pool, pool_labels, grid).failed
            best[name] = min(best[name], time.perf_counter() - t0)
    a, b = out.values()
    print(f"agree on {np.mean(a == b):.4f} of the pairs")
    pairs = n * grid.n_cells
    for name, s in best.items():
        print(f"{name:32s} {s:8.3f} s  {pairs / s:10.0f} pairs/s")
    slow, fast = best.values()
    print(f"speed-up of the batched landscape: {slow / fast:.1f}x")


if __name__ == "__main__":
    main()
