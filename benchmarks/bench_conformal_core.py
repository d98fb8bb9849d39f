"""Benchmark: split conformal calibrate + predict sets, icml24.conformal vs MAPIE.

100,000 calibration samples and 100,000 test samples x 100 classes (``--quick``: 20,000 x 100), LAC and
APS. Both libraries get the same probabilities through the same index-lookup "classifier", so the time is
the conformal work (scores, quantile, sets) plus input checks. Prints the median of several repeats and
the ratio MAPIE / ours (median of per-repeat ratios, contenders interleaved).

    .venv/bin/python benchmarks/bench_conformal_core.py [--quick] [--repeats 5]
"""

from __future__ import annotations

import argparse
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
          f"median of {args.repeats}")
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

        fns = {"ours": ours_fn, "wrapper": wrapper_fn, "matrix": matrix_fn}
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
                f"{med['wrapper']:6.3f} s | score matrix + prediction_sets {med['matrix']:6.3f} s")
        if "mapie" in med:
            ratio = {name: float(np.median(np.asarray(times["mapie"]) / np.asarray(times[name])))
                     for name in ("ours", "wrapper", "matrix")}
            line += (f" | MAPIE {med['mapie']:6.3f} s || MAPIE / sets_from_probs x{ratio['ours']:.1f}, "
                     f"MAPIE / wrapper x{ratio['wrapper']:.1f}, MAPIE / matrix x{ratio['matrix']:.1f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
