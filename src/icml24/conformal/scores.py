"""Nonconformity scores for split conformal classification: LAC, APS and RAPS.

- LAC, "Least Ambiguous set-valued Classifiers with Bounded Error Levels" (Sadinle, Lei & Wasserman, JASA
  2019, https://arxiv.org/abs/1609.00451): ``s(x, y) = 1 - p_y(x)``. Smallest average sets, but the same
  threshold for every input, so sets do not grow much where the model is unsure.
- APS, "Classification with Valid and Adaptive Coverage" (Romano, Sesia & Candès, NeurIPS 2020,
  https://arxiv.org/abs/2006.02544): sort the probabilities in decreasing order; the score of ``y`` is the
  mass of the labels ranked strictly above ``y`` plus ``p_y`` (or ``U * p_y`` with ``U ~ Unif(0, 1)`` in
  the randomised version, which makes coverage exact rather than conservative).
- RAPS, "Uncertainty Sets for Image Classifiers using Conformal Prediction" (Angelopoulos, Bates, Malik &
  Jordan, ICLR 2021, https://arxiv.org/abs/2009.14193), Eq. (3)-(4): APS plus a rank penalty
  ``lam * max(0, o(y) - k_reg)`` where ``o(y)`` is the 1-based rank of ``y``; it discourages the long
  tails of noisy low-probability labels that APS includes.

Every score comes in two forms. With ``labels`` it returns the 1-D vector ``s(x_i, y_i)`` (what
calibration needs). Without labels it returns the ``(n, K)`` matrix ``S[i, k] = s(x_i, k)`` that a test
point would give each candidate label, so that the prediction set is ``{k : S[i, k] <= qhat}``
(:func:`icml24.conformal.calibration.prediction_sets`). Ties in probability are ranked by class index
(a stable sort of ``-p``), in both forms. Randomised scores draw one ``U`` per sample, shared by all the
labels of that sample: this keeps each row's scores increasing in rank, so sets are prefixes of the
ranking.
"""

from __future__ import annotations

import numpy as np

from icml24.conformal._validation import (
    as_probs_array,
    block_rows,
    check_labels,
    check_probs,
    check_probs_block,
    check_rng,
)

__all__ = ["SCORES", "aps_scores", "lac_scores", "raps_scores", "score_function"]


def lac_scores(probs: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
    """LAC score ``1 - p_y`` (Sadinle et al., 2019).

    Args:
        probs: (n, K) predicted class probabilities.
        labels: optional (n,) integer class indices in ``[0, K)``.

    Returns:
        (n,) scores of the given labels, or the (n, K) matrix of every label's score when ``labels`` is None.

    Example:
        >>> lac_scores(np.array([[0.7, 0.2, 0.1]]), np.array([1]))
        array([0.8])
    """
    p = as_probs_array(probs)
    n, n_classes = p.shape
    y = None if labels is None else check_labels(labels, n_classes, n_samples=n)
    out = np.empty((n, n_classes) if y is None else (n,), dtype=p.dtype)
    step = block_rows(n_classes)
    rows = np.arange(min(step, n))
    # Check a block and use it while it is in cache: the probabilities are read from RAM once.
    for start in range(0, n, step):
        sl = slice(start, start + step)
        blk = p[sl]
        check_probs_block(blk, start)
        if y is None:
            np.subtract(1.0, blk, out=out[sl])
        else:
            out[sl] = 1.0 - blk[rows[: blk.shape[0]], y[sl]]
    return out


def aps_scores(
    probs: np.ndarray,
    labels: np.ndarray | None = None,
    *,
    randomized: bool = False,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """APS score (Romano et al., 2020): ``rho(y) + p_y``, or ``rho(y) + U p_y`` when randomised.

    ``rho(y)`` is the probability mass of the labels ranked strictly above ``y``.

    Args:
        probs: (n, K) predicted class probabilities.
        labels: optional (n,) integer class indices.
        randomized: add ``U * p_y`` with ``U ~ Unif(0, 1)`` (one draw per sample) instead of ``p_y``.
        rng: seed or Generator for ``U`` (only used when ``randomized``).

    Returns:
        (n,) scores of the given labels, or the (n, K) score matrix.

    Example:
        >>> aps_scores(np.array([[0.5, 0.2, 0.3]]))
        array([[0.5, 1. , 0.8]])
    """
    return raps_scores(probs, labels, lam=0.0, k_reg=0, randomized=randomized, rng=rng)


def raps_scores(
    probs: np.ndarray,
    labels: np.ndarray | None = None,
    *,
    lam: float = 0.01,
    k_reg: int = 5,
    randomized: bool = False,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """RAPS score (Angelopoulos et al., 2021, Eq. 4): ``rho(y) + U p_y + lam * max(0, o(y) - k_reg)``.

    With ``lam = 0`` this is APS. ``U = 1`` when not randomised.

    Args:
        probs: (n, K) predicted class probabilities.
        labels: optional (n,) integer class indices.
        lam: penalty per rank beyond ``k_reg`` (``lambda`` in the paper), >= 0.
        k_reg: number of top labels that are not penalised (``k_reg`` in the paper), >= 0.
        randomized: use ``U ~ Unif(0, 1)`` (one draw per sample) instead of ``U = 1``.
        rng: seed or Generator for ``U``.

    Returns:
        (n,) scores of the given labels, or the (n, K) score matrix.
    """
    p = as_probs_array(probs)
    lam, k_reg = check_raps_params(lam, k_reg)
    if not isinstance(randomized, (bool, np.bool_)):
        raise TypeError(f"randomized must be a bool, got {randomized!r}")
    gen = check_rng(rng)
    n, n_classes = p.shape
    y = None if labels is None else check_labels(labels, n_classes, n_samples=n)
    u = gen.random(n) if randomized else None
    if y is not None:
        return _label_scores(p, y, lam, k_reg, u)
    return _score_matrix(check_probs(p), lam, k_reg, u)


def check_raps_params(lam: float, k_reg: int) -> tuple[float, int]:
    """Validate the RAPS penalty ``lam >= 0`` and ``k_reg`` (integer >= 0)."""
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)):
        raise TypeError(f"lam must be a real number >= 0, got {type(lam).__name__}")
    lam = float(lam)
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if isinstance(k_reg, bool) or not isinstance(k_reg, (int, np.integer)) or k_reg < 0:
        raise ValueError(f"k_reg must be an integer >= 0, got {k_reg!r}")
    return lam, int(k_reg)


def _label_scores(p: np.ndarray, y: np.ndarray, lam: float, k_reg: int, u: np.ndarray | None) -> np.ndarray:
    # O(nK) without sorting: label j ranks above y iff p_j > p_y, or p_j == p_y and j < y (stable order).
    # Row blocks keep the boolean masks in cache.
    n, n_classes = p.shape
    p_y = np.empty(n, dtype=p.dtype)
    rho = np.empty(n)
    rank = np.empty(n, dtype=np.int64) if lam > 0 else None
    cols = np.arange(n_classes)
    step = block_rows(n_classes)
    for start in range(0, n, step):
        sl = slice(start, start + step)
        blk = p[sl]
        p_y[sl] = blk[np.arange(blk.shape[0]), y[sl]]
        py = p_y[sl, None]
        check_probs_block(blk, start)
        above = blk > py
        above |= (blk == py) & (cols < y[sl, None])
        rho[sl] = np.einsum("ij,ij->i", blk, above, dtype=np.float64)
        if rank is not None:
            rank[sl] = above.sum(axis=1) + 1
    p_y = p_y.astype(np.float64)
    scores = rho + (p_y if u is None else u * p_y)
    if rank is not None:
        scores += lam * np.maximum(0, rank - k_reg)
    return scores


def _score_matrix(p: np.ndarray, lam: float, k_reg: int, u: np.ndarray | None) -> np.ndarray:
    # The default (SIMD introsort) argsort is ~4x faster than a stable one, and gives the same permutation on
    # rows without ties; only rows with tied probabilities are re-sorted stably (ties by class index).
    order = np.argsort(-p, axis=1)
    sorted_p = np.take_along_axis(p, order, axis=1)
    tied = (np.diff(sorted_p, axis=1) == 0).any(axis=1)
    if tied.any():
        order[tied] = np.argsort(-p[tied], axis=1, kind="stable")
        sorted_p[tied] = np.take_along_axis(p[tied], order[tied], axis=1)
    sorted_p = sorted_p.astype(np.float64, copy=False)
    ranked = np.cumsum(sorted_p, axis=1)
    if u is not None:
        ranked -= (1.0 - u)[:, None] * sorted_p
    if lam > 0:
        ranked += lam * np.maximum(0, np.arange(1, p.shape[1] + 1) - k_reg)[None, :]
    out = np.empty_like(ranked)
    np.put_along_axis(out, order, ranked, axis=1)
    return out


SCORES = ("lac", "aps", "raps")
"""Names accepted by :func:`score_function` and :class:`~icml24.conformal.predictor.SplitConformalClassifier`."""


def score_function(name: str):
    """The score function registered under ``name`` (one of :data:`SCORES`)."""
    table = {"lac": lac_scores, "aps": aps_scores, "raps": raps_scores}
    if not isinstance(name, str) or name not in table:
        raise ValueError(f"name must be one of {SCORES}, got {name!r}")
    return table[name]
