"""Characterisation vectors: each client's calibration scores summarised as a normalised histogram.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang, Lin, Sun, Xiao & Li, ICML 2024,
https://arxiv.org/abs/2406.01960), Section 4 ("characterization vectors"). A client never sends its
scores; it sends ``v_k in Delta^H``, the fraction of its nonconformity scores in each of ``H`` equal bins of
the score range:

    v_k[h] = |{j : bin(s_j^(k)) = h}| / n_k,    bin(s) = min(floor(H (s - lo) / (hi - lo)), H - 1).

The ``min`` puts the top edge ``s = hi`` into the last bin. (The official code computes
``int(s * H) - 1``, which sends ``[0, 1/H)`` to the last bin, so that ``s = 0`` and ``s = 1`` share one; we
do not reproduce that.) Benign clients of an IID federation have histograms that concentrate around the
same population histogram at rate ``1/sqrt(n_k)``; Byzantine reports sit away from them, which is what
:mod:`icml24.conformal.rob_fcp.detection` measures.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icml24.conformal.rob_fcp._checks import flag

__all__ = ["bin_index", "check_bounds", "client_histograms", "coarsen_histograms", "score_histogram"]

_EDGE_TOL = 1e-9
"""Scores within this distance outside the range are clipped (APS cumsums can exceed 1 by ~1e-16)."""


def check_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """Return ``(lo, hi)`` as floats after checking that they are finite and ``lo < hi``."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"bounds must be a pair of numbers (lo, hi), got {bounds!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds must be finite with lo < hi, got {bounds!r}")
    return lo, hi


def _check_n_bins(n_bins: int, name: str = "n_bins") -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"{name} must be a positive integer, got {n_bins!r}")
    return int(n_bins)


def _check_scores(scores: object, bounds: tuple[float, float], name: str = "scores") -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,), got shape {s.shape}")
    if s.size == 0:
        raise ValueError(f"{name} is empty: a client needs at least one calibration score")
    if not np.isfinite(s).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    lo, hi = bounds
    if s.min() < lo - _EDGE_TOL or s.max() > hi + _EDGE_TOL:
        raise ValueError(
            f"{name} must lie in the score range [{lo}, {hi}], got values in [{s.min():.6g}, {s.max():.6g}]"
        )
    return np.clip(s, lo, hi)


def bin_index(scores: np.ndarray, n_bins: int, bounds: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """Bin of each score: ``min(floor(H (s - lo) / (hi - lo)), H - 1)`` (int64, values in ``[0, H)``)."""
    n_bins = _check_n_bins(n_bins)
    lo, hi = check_bounds(bounds)
    s = _check_scores(scores, (lo, hi))
    idx = np.floor((s - lo) * (n_bins / (hi - lo))).astype(np.int64)
    return np.minimum(idx, n_bins - 1)


def score_histogram(
    scores: Sequence[float] | np.ndarray,
    n_bins: int = 100,
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    normalize: bool = True,
) -> np.ndarray:
    """One client's characterisation vector ``v_k`` (Section 4), or its raw bin counts.

    Args:
        scores: (n_k,) nonconformity scores in ``bounds``.
        n_bins: number of equal-width bins ``H`` (the paper's default is 100).
        bounds: the score range ``(lo, hi)``; ``(0, 1)`` for LAC and APS.
        normalize: divide by ``n_k`` (a point of the simplex) or return integer-valued counts.

    Returns:
        (H,) float64 histogram.

    Example:
        >>> score_histogram([0.0, 0.1, 0.55, 1.0], n_bins=2)
        array([0.5, 0.5])
    """
    idx = bin_index(np.asarray(scores, dtype=np.float64), n_bins, bounds)
    counts = np.bincount(idx, minlength=int(n_bins)).astype(np.float64)
    return counts / idx.size if flag(normalize, "normalize") else counts


def client_histograms(
    client_scores: Sequence[Sequence[float] | np.ndarray],
    n_bins: int = 100,
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    normalize: bool = True,
) -> np.ndarray:
    """(K, H) matrix of every client's characterisation vector, in one ``bincount`` over all clients.

    Args:
        client_scores: K arrays of scores (client ``k`` has ``n_k >= 1`` of them).
        n_bins, bounds, normalize: as in :func:`score_histogram`.
    """
    if isinstance(client_scores, (str, bytes)) or not hasattr(client_scores, "__len__"):
        raise TypeError(f"client_scores must be a sequence of per-client score arrays, got {type(client_scores).__name__}")
    if isinstance(client_scores, np.ndarray) and client_scores.ndim == 1:
        raise ValueError("client_scores must be a sequence of per-client score arrays, got one 1-D array")
    n_bins = _check_n_bins(n_bins)
    lo, hi = check_bounds(bounds)
    arrays = [_check_scores(s, (lo, hi), name=f"client_scores[{k}]") for k, s in enumerate(client_scores)]
    if not arrays:
        raise ValueError("client_scores is empty: need at least one client")
    sizes = np.array([a.size for a in arrays])
    flat = np.concatenate(arrays)
    idx = np.minimum(np.floor((flat - lo) * (n_bins / (hi - lo))).astype(np.int64), n_bins - 1)
    owner = np.repeat(np.arange(len(arrays)), sizes)
    counts = np.bincount(owner * n_bins + idx, minlength=len(arrays) * n_bins).astype(np.float64)
    counts = counts.reshape(len(arrays), n_bins)
    return counts / sizes[:, None] if normalize else counts


def coarsen_histograms(histograms: np.ndarray, factor: int) -> np.ndarray:
    """Merge every ``factor`` adjacent bins: a fine (…, H * factor) histogram becomes a (…, H) one.

    The Flower strategy receives one fine histogram per client (for the quantile) and derives the coarse
    characterisation vector used for detection from it, so that a client sends a single message.
    """
    factor = _check_n_bins(factor, "factor")
    h = np.asarray(histograms, dtype=np.float64)
    if h.ndim < 1:
        raise ValueError(f"histograms must have a bin axis last (..., n_bins * factor), got shape {h.shape}")
    if not np.isfinite(h).all() or (h < 0).any():
        raise ValueError("histograms must be finite and non-negative")
    if h.shape[-1] % factor:
        raise ValueError(f"histograms: the last axis ({h.shape[-1]} bins) must be a multiple of factor={factor}")
    return h.reshape(*h.shape[:-1], h.shape[-1] // factor, factor).sum(axis=-1)
