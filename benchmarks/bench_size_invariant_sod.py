"""Benchmark: size-invariant SOD metrics (SI-MAE, SI-F mean, SI-AUC) on a batch of 512x512 maps.

Ours (``icml24.vision.size_invariant_sod``: one labelling call for the batch, summed-area tables and one
``bincount`` of per-frame threshold histograms) against two per-object Python loops over the same
frames and conventions:

* "official-style": as the official ``metrics.py`` does, each object frame is a full-image mask and each
  of the 100 thresholds is a full-image pass;
* "box loop": each frame is sliced out of the image first (the cheapest plain loop).

Both loops are checked to give our numbers. Prints median times and the ratios loop / ours.

    .venv/bin/python benchmarks/bench_size_invariant_sod.py [--quick] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import ndimage

from icml24.vision.size_invariant_sod import object_frames, si_auc, si_f_measure, si_mae

T = np.arange(100) / 99


def make_batch(
    n: int, size: int, n_objects: int, r_range: tuple[float, float], seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    gt = np.zeros((n, size, size), bool)
    for i in range(n):
        r = np.exp(rng.uniform(np.log(r_range[0]), np.log(r_range[1]), n_objects))
        cy, cx = rng.uniform(0, size, n_objects), rng.uniform(0, size, n_objects)
        for j in range(n_objects):
            gt[i] |= (yy - cy[j]) ** 2 + (xx - cx[j]) ** 2 <= r[j] ** 2
    pred = np.clip(0.6 * gt + rng.uniform(0, 0.5, gt.shape), 0, 1)
    return pred, gt


def _f_mean(p: np.ndarray, g: np.ndarray, m: np.ndarray | None) -> float:
    fs = []
    gs = g.sum() if m is None else (g & m).sum()
    for t in T:
        y = p >= t if m is None else (p >= t) & m
        tp = (y & g).sum()
        pr, rc = tp / (y.sum() + 1), tp / (gs + 1)
        fs.append(0.0 if pr + rc == 0 else 1.3 * pr * rc / (0.3 * pr + rc))
    return float(np.mean(fs))


def _auc(p: np.ndarray, g: np.ndarray, m: np.ndarray | None) -> float:
    pos = g if m is None else g & m
    neg = ~g if m is None else ~g & m
    npos, nneg = pos.sum(), neg.sum()
    if npos == 0 or nneg == 0:
        return float("nan")
    tpr, fpr = [], []
    for t in T:
        y = p >= t
        tpr.append((y & pos).sum() / (npos + 1))
        fpr.append((y & neg).sum() / (nneg + 1))
    return float(np.trapezoid(tpr[::-1], fpr[::-1]))


def per_object_loop(pred: np.ndarray, gt: np.ndarray, full_masks: bool) -> tuple[list, list, list]:
    maes, fs, aucs = [], [], []
    for p, g in zip(pred, gt, strict=True):
        lab, k = ndimage.label(g)
        boxes = ndimage.find_objects(lab)
        pn = np.clip((p - p.min() + 1e-20) / (p.max() - p.min() + 1e-20), 0, 1)
        covered = np.zeros(g.shape, bool)
        m_k, f_k, a_k = [], [], []
        for sl in boxes:
            covered[sl] = True
            if full_masks:
                m = np.zeros(g.shape, bool)
                m[sl] = True
                m_k.append(np.abs(p - g)[m].mean())
                f_k.append(_f_mean(pn, g, m))
                a_k.append(_auc(p, g, m))
            else:
                m_k.append(np.abs(p[sl] - g[sl]).mean())
                f_k.append(_f_mean(pn[sl], g[sl], None))
                a_k.append(_auc(p[sl], g[sl], None))
        bg = ~covered
        alpha = bg.sum() / (g.size - bg.sum())
        maes.append((sum(m_k) + alpha * np.abs(p - g)[bg].mean()) / (k + alpha))
        fs.append(np.mean(f_k))
        aucs.append(np.nanmean(a_k))
    return maes, fs, aucs


def ours(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    frames = object_frames(gt)  # labelled once, shared by the three metrics (as ``evaluate`` does)
    return si_mae(pred, gt, frames), si_f_measure(pred, gt, frames), si_auc(pred, gt, frames)


def median_time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 maps and 1 repeat of the loops")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, objects = (2, 8) if args.quick else (8, 12)
    for regime, r_range in (
        ("small objects, radius 2-32 px", (2.0, 32.0)),
        ("large objects, radius 16-128 px", (16.0, 128.0)),
    ):
        pred, gt = make_batch(n, 512, objects, r_range)
        k = sum(ndimage.label(g)[1] for g in gt)
        print(f"== {regime}: {n} maps of 512x512, {k} objects in total")
        t_ours, res = median_time(lambda pred=pred, gt=gt: ours(pred, gt), args.repeats)
        loop_repeats = 1 if args.quick else max(1, args.repeats // 2)
        t_box, box = median_time(
            lambda pred=pred, gt=gt: per_object_loop(pred, gt, full_masks=False), loop_repeats
        )
        t_full, full = median_time(
            lambda pred=pred, gt=gt: per_object_loop(pred, gt, full_masks=True), loop_repeats
        )
        for a, b, c in zip(res, box, full, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-9)
            np.testing.assert_allclose(a, c, atol=1e-9)
        print(f"ours (batched):                      {t_ours * 1e3:9.1f} ms")
        print(f"per-object loop, box slices:         {t_box * 1e3:9.1f} ms   ratio {t_box / t_ours:6.1f}x")
        print(f"per-object loop, full-image masks:   {t_full * 1e3:9.1f} ms   ratio {t_full / t_ours:6.1f}x")


if __name__ == "__main__":
    main()
