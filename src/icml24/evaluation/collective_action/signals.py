"""The collective's strategy and its success (Ben-Dov et al., ICML 2024, section 2; Hardt et al., ICML 2023).

A collective is a fraction ``alpha`` of the training points whose owners coordinate: each member replaces its
``(x, y)`` by ``(g(x), y*)``, the *feature-label strategy* with a signal ``g`` and a target class ``y*``. The
deployed classifier ``f`` succeeds for the collective when it maps signal-bearing inputs to ``y*``:

    S(alpha) = P_{(x, y) ~ P_0, y != y*}[ f(g(x)) = y* ]

(test points of class ``y*`` are left out: for them ``f(g(x)) = y*`` says nothing about the signal). *Signal
overlap* ``xi`` is the chance that clean data carries the signal with its own label: we plant ``g`` on a
fraction ``xi`` of the non-collective training points and keep their true labels.

A re-weighting learner with final per-point weights ``w_i`` trains on the collective with the *effective size*

    alpha_eff = sum_{i in C} w_i / sum_i w_i,

and for JTT (weight ``lambda_up`` on the stage-1 error set E, 1 elsewhere) with ``e_C = |C n E| / |C|`` and
``e_0 = |E \\ C| / (n - |C|)`` this is the closed form of :func:`jtt_effective_size`; ``alpha_eff > alpha``
exactly when ``e_C > e_0`` (for ``lambda_up > 1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from icml24.evaluation.collective_action._validation import (
    check_class,
    check_int,
    check_labels,
    check_mask,
    check_matrix,
    check_real,
    check_rng,
)

__all__ = [
    "CollectiveData",
    "PatchSignal",
    "effective_collective_size",
    "jtt_effective_size",
    "plant_collective",
    "success_rate",
]


@dataclass(frozen=True)
class PatchSignal:
    """The signal ``g(x)``: set a fixed set of feature columns to a fixed value (a trigger patch).

    For 8x8 digit images, ``PatchSignal.corner(8, 8, size=2, value=16)`` is the 2x2 bottom-right patch set to
    the maximum intensity. ``g`` is deterministic and idempotent (``g(g(x)) = g(x)``).

    Attributes:
        columns: the feature indices the signal overwrites (distinct, non-negative).
        value: the value written into them.
    """

    columns: tuple[int, ...]
    value: float

    def __post_init__(self) -> None:
        if isinstance(self.columns, (str, bytes)) or not hasattr(self.columns, "__iter__"):
            raise TypeError(f"columns must be a sequence of non-negative ints, got {type(self.columns).__name__}")
        cols = tuple(self.columns)
        if not cols:
            raise ValueError("columns must name at least one feature column")
        for c in cols:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 0:
                raise ValueError(f"columns must be non-negative ints, got {c!r}")
        if len(set(cols)) != len(cols):
            raise ValueError(f"columns must be distinct, got {cols}")
        object.__setattr__(self, "columns", tuple(int(c) for c in cols))
        object.__setattr__(self, "value", check_real(self.value, "value"))

    @classmethod
    def corner(cls, height: int, width: int, *, size: int = 2, value: float = 16.0, offset: int = 0) -> PatchSignal:
        """A ``size x size`` patch in the bottom-right corner of row-major ``height x width`` images whose
        pixels start at column ``offset`` of the feature vector."""
        height = check_int(height, "height", lo=1)
        width = check_int(width, "width", lo=1)
        size = check_int(size, "size", lo=1)
        offset = check_int(offset, "offset", lo=0)
        if size > min(height, width):
            raise ValueError(f"size must be at most min(height, width) = {min(height, width)}, got {size}")
        cols = [offset + r * width + c for r in range(height - size, height) for c in range(width - size, width)]
        return cls(tuple(cols), value)

    def __call__(self, X: Any) -> np.ndarray:
        """``g(X)``: a copy of ``X`` with the signal planted in every row."""
        X = check_matrix(X)
        if max(self.columns) >= X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but the signal writes column {max(self.columns)}")
        out = X.copy()
        out[:, list(self.columns)] = self.value
        return out


@dataclass(frozen=True)
class CollectiveData:
    """A training set after the collective acted (and the natural signal overlap was planted).

    Attributes:
        X, y: the training features and labels the firm sees.
        collective: boolean mask of the collective's points (``(g(x), y*)``).
        overlap: boolean mask of clean points that carry the signal with their own label.
        alpha: the realised collective fraction ``|C| / n``.
    """

    X: np.ndarray
    y: np.ndarray
    collective: np.ndarray
    overlap: np.ndarray
    alpha: float


def plant_collective(
    X: Any,
    y: Any,
    signal: PatchSignal,
    *,
    alpha: float,
    target: int,
    overlap: float = 0.0,
    random_state: int | np.random.Generator | None = None,
) -> CollectiveData:
    """The feature-label strategy: ``round(alpha n)`` random points become ``(g(x), target)``; then a
    fraction ``overlap`` of the remaining points get ``g(x)`` with their true label (the signal overlap xi).

    Args:
        X, y: clean training data (n x d features, n integer labels).
        signal: the signal ``g``.
        alpha: the collective's fraction of the training set, in [0, 1).
        target: the target class ``y*``.
        overlap: the signal overlap xi in [0, 1): the fraction of non-collective points that carry the signal
            naturally (with their own labels).
        random_state: seed or generator for who joins the collective and who carries the overlap.
    """
    X = check_matrix(X)
    y = check_labels(y, X.shape[0])
    if not isinstance(signal, PatchSignal):
        raise TypeError(f"signal must be a PatchSignal, got {type(signal).__name__}")
    alpha = check_real(alpha, "alpha", lo=0.0, hi=1.0, hi_open=True)
    overlap = check_real(overlap, "overlap", lo=0.0, hi=1.0, hi_open=True)
    target = check_class(target, "target")
    rng = check_rng(random_state, "random_state")
    n = X.shape[0]
    n_c = int(round(alpha * n))
    order = rng.permutation(n)
    collective = np.zeros(n, dtype=bool)
    collective[order[:n_c]] = True
    rest = order[n_c:]
    n_o = int(round(overlap * rest.size))
    overlap_mask = np.zeros(n, dtype=bool)
    overlap_mask[rest[rng.permutation(rest.size)[:n_o]]] = True
    Xm, ym = X.copy(), y.copy()
    marked = collective | overlap_mask
    if marked.any():
        Xm[marked] = signal(X[marked])
    ym[collective] = int(target)
    return CollectiveData(Xm, ym, collective, overlap_mask, n_c / n)


def success_rate(predict: Any, X_test: Any, y_test: Any, signal: PatchSignal, target: int) -> float:
    """``S = P[f(g(x)) = y* | y != y*]`` estimated on the test points whose class is not ``target``.

    Args:
        predict: the classifier: an object with ``predict`` or a callable ``X -> labels``.
        X_test, y_test: clean test data.
        signal: the collective's signal ``g``.
        target: the target class ``y*``.
    """
    fn = getattr(predict, "predict", predict)
    if not callable(fn):
        raise TypeError(f"predict must be a fitted classifier or a callable X -> labels, got {type(predict).__name__}")
    X_test = check_matrix(X_test, "X_test")
    y_test = check_labels(y_test, X_test.shape[0], "y_test")
    if not isinstance(signal, PatchSignal):
        raise TypeError(f"signal must be a PatchSignal, got {type(signal).__name__}")
    target = check_class(target, "target")
    keep = y_test != int(target)
    if not keep.any():
        raise ValueError(f"y_test has no point outside the target class {target}: S is undefined")
    pred = np.asarray(fn(signal(X_test[keep])))
    return float(np.mean(pred == int(target)))


def effective_collective_size(weights: Any, collective: Any) -> float:
    """``alpha_eff = sum_{i in C} w_i / sum_i w_i``: the collective's share of a re-weighting learner's
    training weight (section 3 of the paper; equals ``alpha`` for uniform weights)."""
    if isinstance(weights, (str, bytes)) or weights is None:
        raise TypeError(f"weights must be a 1-D array of non-negative numbers, got {type(weights).__name__}")
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"weights must be a non-empty 1-D array, got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights must be finite, non-negative and not all zero")
    c = check_mask(collective, w.size, "collective")
    return float(w[c].sum() / w.sum())


def jtt_effective_size(alpha: float, e_collective: float, e_rest: float, upweight: float) -> float:
    """The closed form of JTT's effective collective size:

        alpha_eff = a (1 + (l - 1) e_C) / [a (1 + (l - 1) e_C) + (1 - a)(1 + (l - 1) e_0)]

    with ``a = alpha``, ``l = upweight`` (lambda_up), ``e_C`` the share of the collective in the stage-1 error
    set and ``e_0`` the share of the other points (our derivation from JTT's weights)."""
    a = check_real(alpha, "alpha", lo=0.0, hi=1.0)
    ec = check_real(e_collective, "e_collective", lo=0.0, hi=1.0)
    e0 = check_real(e_rest, "e_rest", lo=0.0, hi=1.0)
    lam = check_real(upweight, "upweight", lo=0.0, lo_open=True)
    num = a * (1.0 + (lam - 1.0) * ec)
    den = num + (1.0 - a) * (1.0 + (lam - 1.0) * e0)
    return float(num / den) if den > 0 else math.nan
