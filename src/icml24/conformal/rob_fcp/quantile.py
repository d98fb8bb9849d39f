"""Federated conformal quantiles: from pooled exact scores, or from the clients' histograms alone.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Section 4, builds on federated conformal prediction (FCP; Lu et al.,
"Federated Conformal Predictors for Distributed Uncertainty Quantification", ICML 2023,
https://arxiv.org/abs/2305.17564). With ``K`` clients holding ``N = sum_k n_k`` calibration scores that are
exchangeable within each client (partial exchangeability), FCP thresholds at

    qhat = the ceil((1 - alpha)(N + K))-th smallest pooled score      (rank_rule="fcp"),

one rank above split conformal's ``ceil((1 - alpha)(N + 1))`` (rank_rule="split", what the official Rob-FCP
code computes with a T-Digest sketch). Rob-FCP applies the same rule to the clients it kept. If the rank
exceeds ``N`` no finite threshold gives the guarantee and ``qhat = +inf``.

A server that only sees histograms cannot recover the exact order statistic. :func:`histogram_quantile`
returns the *upper edge* of the bin that contains it: every score in that bin or below is ``<= qhat``, so
the sets can only grow relative to the exact threshold (coverage is kept; the price is at most one bin
width of score, the ``epsilon`` of the paper's bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from icml24.common.validation import real_array
from icml24.conformal._validation import check_alpha
from icml24.conformal.calibration import conformal_rank
from icml24.conformal.rob_fcp._checks import int_at_least
from icml24.conformal.rob_fcp.characterization import check_bounds

__all__ = ["federated_quantile", "federated_rank", "histogram_quantile"]

RankRule = Literal["fcp", "split"]


def federated_rank(n_total: int, n_clients: int, alpha: float, rank_rule: RankRule = "fcp") -> int:
    """1-based rank of the threshold among ``n_total`` pooled scores from ``n_clients`` clients.

    ``"fcp"``: ``ceil((1 - alpha)(N + K))`` (FCP, Lu et al. 2023); ``"split"``: ``ceil((1 - alpha)(N + 1))``.
    """
    alpha = check_alpha(alpha)
    n_total = int_at_least(n_total, "n_total", 1)
    n_clients = int_at_least(n_clients, "n_clients", 1)
    if rank_rule == "fcp":
        # Round before ceil so that float error does not push an exact integer up one rank.
        return math.ceil(round((1.0 - alpha) * (int(n_total) + int(n_clients)), 9))
    if rank_rule == "split":
        return conformal_rank(int(n_total), alpha)
    raise ValueError(f"rank_rule must be 'fcp' or 'split', got {rank_rule!r}")


def federated_quantile(
    client_scores: Sequence[Sequence[float] | np.ndarray], alpha: float, *, rank_rule: RankRule = "fcp"
) -> float:
    """FCP threshold from the clients' exact scores (a simulation, or a secure-aggregation protocol).

    Args:
        client_scores: K arrays of calibration nonconformity scores, one per client.
        alpha: miscoverage level in (0, 1).
        rank_rule: ``"fcp"`` or ``"split"`` (see :func:`federated_rank`).

    Returns:
        qhat, ``+inf`` when the rank exceeds the number of scores.
    """
    arrays = [np.asarray(s, dtype=np.float64).ravel() for s in client_scores]
    if not arrays:
        raise ValueError("client_scores is empty: need at least one client")
    pooled = np.concatenate(arrays)
    if pooled.size == 0:
        raise ValueError("client_scores holds no scores: the calibration set is empty")
    if np.isnan(pooled).any():
        raise ValueError("client_scores contains NaN")
    k = federated_rank(pooled.size, len(arrays), alpha, rank_rule)
    if k > pooled.size:
        return math.inf
    return float(np.partition(pooled, k - 1)[k - 1])


def histogram_quantile(
    counts: np.ndarray,
    alpha: float,
    *,
    n_clients: int | None = None,
    rank_rule: RankRule = "fcp",
    bounds: tuple[float, float] = (0.0, 1.0),
) -> float:
    """FCP threshold from bin counts: the upper edge of the bin holding the rank-``k`` score.

    Args:
        counts: (K, H) per-client bin counts (integer-valued), or (H,) pooled counts with ``n_clients``.
        alpha: miscoverage level in (0, 1).
        n_clients: number of clients behind pooled counts (ignored, and inferred, for a (K, H) matrix).
        rank_rule: ``"fcp"`` or ``"split"``.
        bounds: the score range ``(lo, hi)`` the bins partition.

    Returns:
        ``lo + (h + 1)(hi - lo) / H`` for the bin ``h`` holding the rank, or ``+inf``.
    """
    c = real_array(counts, "counts")
    if not np.isfinite(c).all() or (c < 0).any() or not np.array_equal(c, np.round(c)):
        raise ValueError("counts must be finite, non-negative and integer-valued")
    if c.ndim == 2:
        if n_clients is not None:
            int_at_least(n_clients, "n_clients", 1)
        n_clients = c.shape[0]
        c = c.sum(axis=0)
    elif c.ndim != 1 or n_clients is None:
        raise ValueError("counts must be (n_clients, n_bins), or (n_bins,) together with n_clients")
    if n_clients is not None:
        n_clients = int_at_least(n_clients, "n_clients", 1)
    if not np.isfinite(c).all() or (c < 0).any() or not np.array_equal(c, np.round(c)):
        raise ValueError("counts must be finite, non-negative and integer-valued")
    lo, hi = check_bounds(bounds)
    n_total = int(c.sum())
    if n_total == 0:
        raise ValueError("counts are all zero: the calibration set is empty")
    k = federated_rank(n_total, int(n_clients), alpha, rank_rule)
    if k > n_total:
        return math.inf
    h = int(np.searchsorted(np.cumsum(c), k))  # first bin whose cumulative count reaches k
    return float(lo + (h + 1) * (hi - lo) / c.size)
