"""Fuzz cases for the shared conformal core (icml24.conformal; see tests/test_fuzz_api.py)."""

import numpy as np
from sklearn.linear_model import LogisticRegression

import icml24.conformal as cp

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
Y = np.array([0, 1, 2, 0])
S = cp.lac_scores(P)
SETS = S <= 0.7
X = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [0.2, 0.9], [0.9, 0.1], [0.4, 0.6]] * 5)
XY = np.array([0, 1, 0, 0, 1, 1] * 5)
BAD_ALPHA = [0.0, 1.0, -0.5, 2.0, "0.1", None]

FUZZ_CASES = [
    dict(fn=cp.conformal_quantile, args=(np.array([0.1, 0.4, 0.3, 0.2]), 0.2),
         invalid={"scores": [np.array([]), np.ones((2, 2)), np.array([0.1, np.nan])], "alpha": BAD_ALPHA},
         allowed={"scores": "+-inf scores are valid order statistics (an inf rank gives qhat = inf)"}),
    dict(fn=cp.conformal_rank, args=(10, 0.1), invalid={"alpha": BAD_ALPHA, "n": [-1, 0, 2.5, "3", None]}),
    dict(fn=cp.prediction_sets, args=(S, 0.7),
         invalid={"score_matrix": [np.array([[0.1, np.nan]]), np.ones(3), np.array([["a"]])],
                  "qhat": [float("nan"), "x", None], "allow_empty": ["no", 1]},
         allowed={"qhat": "+-inf is a valid threshold (every label / no label)",
                  "score_matrix": "+-inf scores compare correctly with any threshold"}),
    dict(fn=cp.sets_from_probs, args=(P, 0.7), kwargs={"score": "lac"},
         invalid={"probs": [np.array([[0.5, 0.6]]), np.array([[np.nan, 1.0]]), np.ones(3)],
                  "qhat": [float("nan"), "x"], "score": ["thr", None], "lam": [-1.0, "x"], "k_reg": [-1, 1.5],
                  "randomized": ["yes"], "allow_empty": [None]},
         allowed={"qhat": "+-inf is a valid threshold"}),
    dict(fn=cp.lac_scores, args=(P, Y), invalid={"probs": [np.array([[0.5, 0.6, 0.1]] * 4), np.ones(3)],
                                                 "labels": [np.array([0, 1, 2, 3]), np.array([0, 1]),
                                                            np.array([0.5, 1, 2, 0])]}),
    dict(fn=cp.aps_scores, args=(P, Y), invalid={"probs": [np.array([[-0.1, 1.1, 0.0]] * 4)], "randomized": ["yes"],
                                                 "rng": ["seed", 1.5]}),
    dict(fn=cp.raps_scores, args=(P, Y), invalid={"lam": [-0.1, None], "k_reg": [-1, 2.5], "rng": ["x"]}),
    dict(fn=cp.score_function, args=("lac",), invalid={"name": ["thr", None, 3]}),
    dict(fn=cp.check_alpha, args=(0.1,), invalid={"alpha": BAD_ALPHA}),
    dict(fn=cp.check_probs, args=(P,), invalid={"probs": [np.array([[0.5, 0.6]]), np.array([[np.inf, 0.0]])],
                                               "atol": [-1.0, "x"]}),
    dict(fn=cp.check_labels, args=(Y, 3), invalid={"labels": [np.array([0, 3]), np.array([[0]])],
                                                  "n_classes": [0, -1, 1.5, "3"]}),
    dict(fn=cp.covered, args=(SETS, Y), invalid={"sets": [np.ones(3), np.array([[0.5, 1, 0]] * 4)],
                                                 "labels": [np.array([0, 1, 2, 5])]}),
    dict(fn=cp.marginal_coverage, args=(SETS, Y), invalid={"labels": [np.array([0, 1])]}),
    dict(fn=cp.set_sizes, args=(SETS,), invalid={"sets": [np.ones(3), np.array([["a", "b"]])]}),
    dict(fn=cp.mean_set_size, args=(SETS,), invalid={"sets": [np.array([[2, 0]])]}),
    dict(fn=cp.size_stratified_coverage, args=(SETS, Y), invalid={"bins": [[3, 1], [], "x"]}),
    dict(fn=cp.size_stratified_coverage_violation, args=(SETS, Y, 0.1), invalid={"alpha": BAD_ALPHA}),
    dict(fn=cp.class_conditional_coverage, args=(SETS, Y), invalid={"labels": [np.array([0, -1, 2, 0])]}),
    dict(fn=cp.min_calibration_size, args=(0.9,), invalid={"confidence_level": [0.0, 1.0, 1.5, "0.9", None]}),
    dict(fn=cp.SplitConformalClassifier(LogisticRegression()).fit, args=(X, XY),
         covers=(cp.SplitConformalClassifier,)),
]

EXEMPT = {
    "StratifiedCoverage": "a result record returned by size_stratified_coverage",
    "SmallCalibrationWarning": "a warning class",
    "SCORES": "a tuple of names, not a callable",
}
