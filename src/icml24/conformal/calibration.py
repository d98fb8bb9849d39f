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
import numbers
from collections.abc import Sequence

import numpy as np

from icml24.common.validation import real_array
from icml24.conformal._validation import as_probs_array, block_rows, check_alpha, check_probs_block, check_rng
from icml24.conformal.scores import SCORES, check_raps_params

__all__ = ["conformal_quantile", "conformal_rank", "prediction_sets", "sets_from_probs"]


def conformal_rank(n: int, alpha: float) -> int:
    """``ceil((n + 1)(1 - alpha))``: the rank (1-based) of the calibration score used as threshold.

    The product is rounded to 9 decimals first so that float error (e.g. ``(99 + 1) * 0.9 =
    90.00000000000001``) does not push an exact integer up by one rank.
    """
    alpha = check_alpha(alpha)
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1 (the calibration size), got {n!r}")
    return math.ceil(round((int(n) + 1) * (1.0 - alpha), 9))


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
    s = real_array(scores, "scores")
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
    if S.dtype == object or not (np.issubdtype(S.dtype, np.number) or S.dtype == np.bool_):
        raise TypeError(f"score_matrix must be a numeric array (n_samples, n_classes), got dtype {S.dtype}")
    if S.ndim != 2:
        raise ValueError(f"score_matrix must be 2-D (n_samples, n_classes), got shape {S.shape}")
    if np.isnan(S).any():
        # NaN <= qhat is False: a NaN score would silently drop its label and lose coverage.
        bad = int(np.flatnonzero(np.isnan(S).any(axis=1))[0])
        raise ValueError(f"score_matrix contains NaN (first in row {bad}); a NaN score has no place in a set")
    q = _check_qhat(qhat)
    if not isinstance(allow_empty, (bool, np.bool_)):
        raise TypeError(f"allow_empty must be a bool, got {allow_empty!r}")
    sets = S <= q
    if not allow_empty and sets.shape[0] and sets.shape[1]:
        empty = ~sets.any(axis=1)
        if empty.any():
            rows = np.flatnonzero(empty)
            sets[rows, np.argmin(S[rows], axis=1)] = True
    return sets


def sets_from_probs(
    probs: np.ndarray,
    qhat: float,
    *,
    score: str,
    lam: float = 0.01,
    k_reg: int = 5,
    randomized: bool = False,
    rng: np.random.Generator | int | None = None,
    allow_empty: bool = True,
) -> np.ndarray:
    """Prediction sets straight from probabilities: the same boolean (n, K) matrix as
    ``prediction_sets(score_fn(probs, ...), qhat, allow_empty=...)``, computed faster.

    Why it is faster: APS/RAPS scores increase along the ranking, so each set is the top ``m`` labels,
    where ``m`` counts the ranked scores ``<= qhat``. That needs the *sorted values* of each row (a SIMD
    sort) but not the sorting *permutation* (a stable argsort, ~10x slower): the set is every label with
    ``p > t`` plus, among labels tied at ``t`` (the ``m``-th largest probability), the lowest class
    indices, exactly as the stable ranking of the score functions orders them. Rows are processed in
    cache-sized blocks. The same ``rng`` draws the same ``U`` as the score functions.

    ``score`` (with ``lam``, ``k_reg`` and ``randomized``) must be the score that produced ``qhat``: a
    threshold is only a conformal threshold for the score it was calibrated on, so there is no default.
    """
    if not isinstance(score, str) or score not in SCORES:
        raise ValueError(f"score must be the name of the score that produced qhat, one of {SCORES}, got {score!r}")
    p = as_probs_array(probs)
    lam, k_reg = check_raps_params(lam, k_reg)
    q = _check_qhat(qhat)
    if not isinstance(randomized, (bool, np.bool_)):
        raise TypeError(f"randomized must be a bool, got {randomized!r}")
    if not isinstance(allow_empty, (bool, np.bool_)):
        raise TypeError(f"allow_empty must be a bool, got {allow_empty!r}")
    n, n_classes = p.shape
    out = np.empty((n, n_classes), dtype=bool)
    u = check_rng(rng).random(n) if (randomized and score != "lac") else None
    if score == "aps":
        lam = 0.0
    penalty = lam * np.maximum(0, np.arange(1, n_classes + 1) - k_reg)[None, :] if lam > 0 else None
    lac_cut = _lac_cut(q, p.dtype) if score == "lac" else None
    step = block_rows(n_classes)
    # Check each block, then compute on it while it is in cache: one read of the probabilities from RAM.
    for start in range(0, n, step):
        sl = slice(start, start + step)
        blk = p[sl]
        check_probs_block(blk, start)
        if lac_cut is not None:
            np.greater_equal(blk, lac_cut, out=out[sl])
            if not allow_empty:
                _fill_empty_with_top(out[sl], blk)
        else:
            out[sl] = _ranked_prefix_sets(blk, q, None if u is None else u[sl], penalty, allow_empty)
    return out


def _check_qhat(qhat: object) -> float:
    """``qhat`` as a float: a real number, ``+inf`` allowed (every label), NaN refused."""
    if isinstance(qhat, (bool, np.bool_)) or not isinstance(qhat, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"qhat must be a real number (a conformal threshold), got {type(qhat).__name__}")
    q = float(qhat)
    if math.isnan(q):
        raise ValueError("qhat is NaN: it must be a conformal threshold (a real number or +inf)")
    return q


def _lac_cut(q: float, dtype: np.dtype) -> np.floating:
    """The smallest ``c`` of ``dtype`` with ``fl(1 - c) <= q``, so that ``p >= c`` is *exactly*
    ``lac_scores(p) <= q`` in floating point (``fl(1 - p)`` is monotone in ``p``), at one comparison per
    entry instead of a subtraction, a temporary and a comparison."""
    one = dtype.type(1.0)
    qd = np.array(q).astype(dtype) if math.isfinite(q) else dtype.type(q)  # how `S <= q` casts q

    def inside(c):
        return (one - c) <= qd

    if math.isinf(q):
        return dtype.type(-np.inf) if q > 0 else dtype.type(np.inf)
    c = one - qd
    while not inside(c):
        c = np.nextafter(c, dtype.type(np.inf))
    while inside(np.nextafter(c, dtype.type(-np.inf))):
        c = np.nextafter(c, dtype.type(-np.inf))
    return c


def _fill_empty_with_top(sets: np.ndarray, p: np.ndarray) -> None:
    empty = ~sets.any(axis=1)
    if empty.any():
        rows = np.flatnonzero(empty)
        sets[rows, np.argmax(p[rows], axis=1)] = True


def _ranked_prefix_sets(
    p: np.ndarray, q: float, u: np.ndarray | None, penalty: np.ndarray | None, allow_empty: bool
) -> np.ndarray:
    # The same float operations, in the same order, as scores._score_matrix: identical thresholds.
    sorted_p = -np.sort(-p, axis=1)
    sorted_p = sorted_p.astype(np.float64, copy=False)
    ranked = np.cumsum(sorted_p, axis=1)
    if u is not None:
        ranked -= (1.0 - u)[:, None] * sorted_p
    if penalty is not None:
        ranked += penalty
    m = np.count_nonzero(ranked <= q, axis=1)
    if not allow_empty:
        m = np.maximum(m, 1)
    rows = np.arange(p.shape[0])
    t = np.where(m > 0, sorted_p[rows, np.maximum(m - 1, 0)], np.inf).astype(p.dtype)
    sets = p > t[:, None]
    need = m - np.count_nonzero(sets, axis=1)
    tied = p == t[:, None]
    n_tied = np.count_nonzero(tied, axis=1)
    partial = np.flatnonzero(n_tied > need)
    if partial.size:
        # Only the first `need` tied labels (lowest class index) make the cut.
        sub = tied[partial]
        tied[partial] = sub & (np.cumsum(sub, axis=1) <= need[partial, None])
    sets |= tied
    return sets
