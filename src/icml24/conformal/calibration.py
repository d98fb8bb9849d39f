"""Split conformal calibration: the finite-sample quantile and the prediction sets it defines.

"A Gentle Introduction to Conformal Prediction and Distribution-Free Uncertainty Quantification"
(Angelopoulos & Bates, 2021, https://arxiv.org/abs/2107.07511), Section 1: with ``n`` exchangeable
calibration scores ``s_1..s_n`` and a test score ``s_{n+1}``, the set ``{y : s(x_{n+1}, y) <= qhat}`` with

    qhat = the ceil((n + 1)(1 - alpha))-th smallest calibration score

covers the true label with probability at least ``1 - alpha``; if the scores are almost surely distinct it
is also at most ``1 - alpha + 1 / (n + 1)``. When ``ceil((n + 1)(1 - alpha)) > n`` no finite threshold
gives the guarantee and ``qhat = +inf`` (every label is in every set).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from icml24.conformal._validation import check_alpha

__all__ = ["conformal_quantile", "conformal_rank", "prediction_sets"]


def conformal_rank(n: int, alpha: float) -> int:
    """``ceil((n + 1)(1 - alpha))``: the rank (1-based) of the calibration score used as threshold.

    The product is rounded to 9 decimals first so that float error (e.g. ``(99 + 1) * 0.9 =
    90.00000000000001``) does not push an exact integer up by one rank.
    """
    alpha = check_alpha(alpha)
    return math.ceil(round((n + 1) * (1.0 - alpha), 9))


def conformal_quantile(scores: Sequence[float] | np.ndarray, alpha: float) -> float:
    """Split conformal threshold: the ``ceil((n+1)(1-alpha))``-th smallest score, or ``+inf`` if that
    rank exceeds ``n``.

    Args:
        scores: (n,) calibration scores of the true labels, n >= 1, no NaN.
        alpha: miscoverage level in (0, 1).

    Returns:
        qhat as a Python float.

    Example:
        >>> conformal_quantile(np.arange(1.0, 11.0), 0.2)  # ceil(11 * 0.8) = 9th smallest
        9.0
    """
    alpha = check_alpha(alpha)
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-D (n_calibration,), got shape {s.shape}")
    n = s.shape[0]
    if n == 0:
        raise ValueError("scores is empty: the calibration set needs at least one sample")
    if np.isnan(s).any():
        raise ValueError("scores contains NaN")
    k = conformal_rank(n, alpha)
    if k > n:
        return math.inf
    # partition is O(n), a full sort is not needed for one order statistic.
    return float(np.partition(s, k - 1)[k - 1])


def prediction_sets(score_matrix: np.ndarray, qhat: float, *, allow_empty: bool = True) -> np.ndarray:
    """Boolean (n, K) prediction sets ``{k : S[i, k] <= qhat}``.

    Args:
        score_matrix: (n, K) scores every label would get (from a score function called without labels).
        qhat: threshold from :func:`conformal_quantile`.
        allow_empty: if False, a row whose set would be empty gets its lowest-score label (the model's top
            label for LAC/APS/RAPS), as in the human-subject study of Cresswell et al. (2024), which never
            shows an empty set. This can only raise coverage.
    """
    S = np.asarray(score_matrix)
    if S.ndim != 2:
        raise ValueError(f"score_matrix must be 2-D (n_samples, n_classes), got shape {S.shape}")
    q = float(qhat)
    if math.isnan(q):
        raise ValueError("qhat is NaN")
    sets = S <= q
    if not allow_empty and sets.shape[0] and sets.shape[1]:
        empty = ~sets.any(axis=1)
        if empty.any():
            rows = np.flatnonzero(empty)
            sets[rows, np.argmin(S[rows], axis=1)] = True
    return sets
