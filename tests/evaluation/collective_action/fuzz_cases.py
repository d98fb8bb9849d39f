"""Fuzz cases for the collective-action entry points (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.evaluation.collective_action import (
    CVaRDROClassifier,
    JTTClassifier,
    LfFClassifier,
    PatchSignal,
    cvar_weights,
    effective_collective_size,
    jtt_effective_size,
    make_dominoes,
    plant_collective,
    success_rate,
    train_mlp,
)

_rng = np.random.default_rng(0)
X = _rng.random((40, 16))
Y = np.arange(40) % 4
G = PatchSignal((14, 15), 1.0)
MASK = np.arange(40) < 5
BAD_X = [np.full((40, 16), np.nan), X[:, :0], X[0], "X", None]
BAD_Y = [Y[:10], Y.astype(float) + 0.5, "y", None]
BAD_FRACTION = [-0.1, 1.0, 1.5, float("nan"), "0.1", None, True]
BAD_POSITIVE = [0.0, -1.0, float("nan"), float("inf"), "1", None]


def _predict_zero(Z):
    return np.zeros(len(Z), dtype=int)


def make_patch_signal(columns, value):
    """PatchSignal(columns, value)."""
    return PatchSignal(columns, value)


def make_corner_signal(height, width, size=2, value=1.0, offset=0):
    """PatchSignal.corner(height, width, size=, value=, offset=)."""
    return PatchSignal.corner(height, width, size=size, value=value, offset=offset)


def fit_jtt(X, y, C=1.0, stage1_C=0.05, upweight=20.0, max_iter=200):
    """JTTClassifier(...).fit(X, y): hyperparameters are checked in fit (scikit-learn)."""
    return JTTClassifier(C=C, stage1_C=stage1_C, upweight=upweight, max_iter=max_iter).fit(X, y)


def fit_cvar(X, y, C=1.0, rho=0.3, n_rounds=2, max_iter=200):
    """CVaRDROClassifier(...).fit(X, y)."""
    return CVaRDROClassifier(C=C, rho=rho, n_rounds=n_rounds, max_iter=max_iter).fit(X, y)


def fit_lff(X, y, C=1.0, biased_C=0.05, q=0.7, n_rounds=1, max_iter=200):
    """LfFClassifier(...).fit(X, y)."""
    return LfFClassifier(C=C, biased_C=biased_C, q=q, n_rounds=n_rounds, max_iter=max_iter).fit(X, y)


FUZZ_CASES = [
    dict(fn=make_patch_signal, args=((0, 1), 1.0), covers=(PatchSignal,),
         invalid={"columns": [(), (-1,), (1, 1), (0.5,), "ab", None], "value": [float("nan"), "1", None, True]}),
    dict(fn=make_corner_signal, args=(8, 8),
         invalid={"height": [0, -2, 2.5, "8"], "width": [0, 1.5], "size": [0, 9, 1.5], "offset": [-1, 0.5],
                  "value": [float("inf"), "v"]}),
    dict(fn=plant_collective, args=(X, Y, G), kwargs={"alpha": 0.1, "target": 0, "overlap": 0.05, "random_state": 0},
         invalid={"X": BAD_X, "y": BAD_Y, "signal": [None, (14, 15), "g"], "alpha": BAD_FRACTION,
                  "overlap": BAD_FRACTION, "target": [0.5, "0", None, True], "random_state": [-1, 1.5, "s"]}),
    dict(fn=success_rate, args=(_predict_zero, X, Y, G, 0),
         invalid={"predict": [None, 3], "X_test": BAD_X, "y_test": BAD_Y, "signal": [None, "g"],
                  "target": [1.5, None, "0"]}),
    dict(fn=effective_collective_size, args=(np.ones(40), MASK),
         invalid={"weights": [-np.ones(40), np.zeros(40), np.ones((2, 20)), np.array([]), "w", None],
                  "collective": [MASK[:10], MASK.astype(int), "c", None]}),
    dict(fn=jtt_effective_size, args=(0.05, 0.8, 0.1, 20.0),
         invalid={"alpha": [-0.1, 1.5, "a", None], "e_collective": [1.2, -0.5, None], "e_rest": [2.0, "e"],
                  "upweight": BAD_POSITIVE}),
    dict(fn=cvar_weights, args=(np.linspace(0, 1, 10), 0.3),
         invalid={"losses": [np.array([]), np.ones((2, 5)), "l", None], "rho": [0.0, 1.5, -1.0, "0.2", None],
                  "sample_weight": [-np.ones(10), np.ones(3), np.zeros(10)]}),
    dict(fn=fit_jtt, args=(X, Y), covers=(JTTClassifier,),
         invalid={"X": BAD_X, "C": BAD_POSITIVE, "stage1_C": BAD_POSITIVE, "upweight": BAD_POSITIVE,
                  "max_iter": [0, -1, 2.5, "9"]}),
    dict(fn=fit_cvar, args=(X, Y), covers=(CVaRDROClassifier,),
         invalid={"X": BAD_X, "C": BAD_POSITIVE, "rho": BAD_POSITIVE + [1.5], "n_rounds": [0, 1.5, "2"],
                  "max_iter": [0, "9"]}),
    dict(fn=fit_lff, args=(X, Y), covers=(LfFClassifier,),
         invalid={"X": BAD_X, "C": BAD_POSITIVE, "biased_C": BAD_POSITIVE, "q": BAD_POSITIVE + [1.5],
                  "n_rounds": [0, "1"], "max_iter": [0, 1.5]}),
    dict(fn=train_mlp, args=(X, Y), kwargs={"epochs": 1, "hidden": (8,), "seed": 0},
         invalid={"X": BAD_X, "y": BAD_Y + [Y - 1], "method": ["sgd", None], "n_classes": [1, 2.5, "4"],
                  "hidden": [(0,), "8", 8, (1.5,)], "epochs": [0, 1.5], "lr": BAD_POSITIVE,
                  "momentum": [1.0, -0.1, float("nan")], "weight_decay": [-1.0, float("inf")],
                  "batch_size": [0, 2.5], "upweight": BAD_POSITIVE, "stage1_epochs": [0, "2"],
                  "rho": BAD_POSITIVE + [1.5], "q": BAD_POSITIVE + [2.0], "ema": [1.0, -0.2, "e"],
                  "eval_sets": [[X], {"v": X[:, :3]}, {"v": "X"}], "seed": [-1, 1.5, "0"]}),
    dict(fn=make_dominoes, args=(np.random.default_rng(1).random((30, 16)), np.arange(30) % 3),
         kwargs={"image_shape": (4, 4), "random_state": 0},
         invalid={"X_hard": BAD_X[:1] + ["X", None], "y": [np.arange(5), "y", np.arange(30) - 1],
                  "image_shape": [(4, 5), (4,), [4, 4], (0, 16), "44"], "n_classes": [1, 2, "3"],
                  "free_dims": [-1, 1.5], "margin": BAD_POSITIVE, "noise": [-0.1, float("inf"), "n"],
                  "random_state": [-3, "r"]}),
]

EXEMPT = {
    "CollectiveData": "a frozen record of plant_collective's output; plant_collective validates its inputs",
    "Dominoes": "a frozen record of make_dominoes's output; make_dominoes validates the data, its signal "
                "methods their sizes",
    "MLPRun": "the record train_mlp returns; train_mlp validates every argument, predict validates X",
}
