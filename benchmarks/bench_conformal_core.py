"""Benchmark: split conformal calibrate + predict sets, icml24.conformal vs MAPIE and vs plain numpy.

100,000 calibration samples and 100,000 test samples x 100 classes (``--quick``: 20,000 x 100), LAC and
APS. Both libraries get the same probabilities through the same index-lookup "classifier", so the time is
the conformal work (scores, quantile, sets) plus input checks. The numpy contenders are what a user would
write without a library: for LAC three lines (the true-label scores ``1 - p_y``, sorted, the
``ceil((n+1)(1-alpha))``-th smallest as ``qhat``, the threshold ``p >= 1 - qhat``); for APS the
textbook recipe (stable ``argsort`` of each row, ``cumsum``, the randomised true-label score, the same
quantile, the never-empty sets mapped back through the permutation). Prints the median of several repeats,
the ratios alternative / ours (median of per-repeat ratios, contenders interleaved, with their range), how
many set entries the numpy sets differ from ours in, and the load average.

    .venv/bin/python benchmarks/bench_conformal_core.py [--quick] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from icml24.conformal import (
    SplitConformalClassifier,
    aps_scores,
    conformal_quantile,
    lac_scores,
    prediction_sets,
    sets_from_probs,
)


class FixedProbs(ClassifierMixin, BaseEstimator):
    """Row ``i`` of X is an index into a fixed probability matrix."""

    def __init__(self, probs=None):
        self.probs = probs

    def fit(self, X, y):
        self.classes_ = np.arange(self.probs.shape[1])
        return self

    def predict_proba(self, X):
        X = np.asarray(X)
        # contiguous index ranges are slices (no copy) for both libraries alike
        start = int(X[0, 0])
        return self.probs[start : start + X.shape[0]]

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--classes", type=int, default=100)
    args = ap.parse_args()
    n = args.n or (20_000 if args.quick else 100_000)
    k, alpha = args.classes, 0.1
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.full(k, 0.1), size=2 * n)
    y = (rng.random(2 * n)[:, None] > np.cumsum(probs, axis=1)).sum(1).clip(0, k - 1)
    X = np.arange(2 * n)[:, None]
    est = FixedProbs(probs).fit(X, y)
    p_cal, p_test, y_cal = probs[:n], probs[n:], y[:n]

    try:
        from mapie.classification import SplitConformalClassifier as MapieSCC
    except ImportError:  # pragma: no cover
        MapieSCC = None
        print("mapie is not installed: timing icml24 only")

    print(f"calibrate + predict sets, n_cal = n_test = {n:,}, {k} classes, alpha = {alpha}, "
          f"median of {args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for score in ("lac", "aps"):
        if score == "lac":
            def ours_fn():
                q = conformal_quantile(lac_scores(p_cal, y_cal), alpha)
                return sets_from_probs(p_test, q, score="lac")

            def matrix_fn():
                q = conformal_quantile(lac_scores(p_cal, y_cal), alpha)
                return prediction_sets(lac_scores(p_test), q)
        else:
            def ours_fn():
                q = conformal_quantile(aps_scores(p_cal, y_cal, randomized=True, rng=0), alpha)
                return sets_from_probs(p_test, q, score="aps", allow_empty=False)

            def matrix_fn():
                q = conformal_quantile(aps_scores(p_cal, y_cal, randomized=True, rng=0), alpha)
                return prediction_sets(aps_scores(p_test), q, allow_empty=False)

        def wrapper_fn(score=score):
            cp = SplitConformalClassifier(est, confidence_level=1 - alpha, conformity_score=score, prefit=True)
            return cp.conformalize(X[:n], y_cal).predict_set(X[n:])

        if score == "lac":
            def numpy_fn():
                s = 1.0 - p_cal[np.arange(n), y_cal]
                q = np.sort(s)[math.ceil((n + 1) * (1 - alpha)) - 1]  # the ceil((n+1)(1-alpha))-th smallest
                return p_test >= 1.0 - q  # as in Angelopoulos & Bates' gentle introduction
        else:
            def numpy_fn():
                u = np.random.default_rng(0).random(n)  # the U draws of aps_scores(..., rng=0)
                order = np.argsort(-p_cal, axis=1, kind="stable")
                sorted_p = np.take_along_axis(p_cal, order, axis=1)
                cum = np.cumsum(sorted_p, axis=1)
                rank = np.argmax(order == y_cal[:, None], axis=1)
                rows = np.arange(n)
                s = cum[rows, rank] - (1.0 - u) * sorted_p[rows, rank]  # rho(y) + U p_y
                q = np.sort(s)[math.ceil((n + 1) * (1 - alpha)) - 1]  # the ceil((n+1)(1-alpha))-th smallest
                order = np.argsort(-p_test, axis=1, kind="stable")
                keep = np.cumsum(np.take_along_axis(p_test, order, axis=1), axis=1) <= q
                keep[:, 0] = True  # never empty
                sets = np.empty_like(keep)
                np.put_along_axis(sets, order, keep, axis=1)
                return sets

        fns = {"ours": ours_fn, "wrapper": wrapper_fn, "matrix": matrix_fn, "numpy": numpy_fn}
        if MapieSCC is not None:
            kw = {"conformity_score_params": {"include_last_label": False}} if score == "aps" else {}

            def mapie_fn(score=score, kw=kw):
                m = MapieSCC(est, confidence_level=1 - alpha, conformity_score=score, prefit=True, random_state=0)
                return m.conformalize(X[:n], y_cal).predict_set(X[n:], **kw)[1]

            fns["mapie"] = mapie_fn
        # Interleave the contenders inside each repeat, so that a shared, loaded machine slows them alike;
        # ratios are medians of the per-repeat ratios.
        times = {name: [] for name in fns}
        for _ in range(args.repeats):
            for name, fn in fns.items():
                times[name].append(median_time(fn, 1))
        med = {name: float(np.median(v)) for name, v in times.items()}
        line = (f"{score.upper():4s} icml24 sets_from_probs {med['ours']:6.3f} s | SplitConformalClassifier "
                f"{med['wrapper']:6.3f} s | score matrix + prediction_sets {med['matrix']:6.3f} s | "
                f"plain numpy {med['numpy']:6.3f} s")
        if "mapie" in med:
            line += f" | MAPIE {med['mapie']:6.3f} s"
        print(line, flush=True)

        def ratio(alt: str, name: str = "ours", times: dict = times) -> str:
            r = np.asarray(times[alt]) / np.asarray(times[name])
            return f"x{np.median(r):.2f} (range {r.min():.2f}-{r.max():.2f})"

        differ = int((np.asarray(numpy_fn()) != np.asarray(ours_fn())).sum())
        line = f"     numpy / sets_from_probs {ratio('numpy')}, numpy sets differ from ours in {differ} entries"
        if "mapie" in med:
            line += (f" | MAPIE / sets_from_probs {ratio('mapie')}, MAPIE / wrapper {ratio('mapie', 'wrapper')}, "
                     f"MAPIE / matrix {ratio('mapie', 'matrix')}")
        print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end", flush=True)


if __name__ == "__main__":
    main()
