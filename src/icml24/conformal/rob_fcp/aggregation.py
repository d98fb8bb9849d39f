"""Server-side aggregation of client histograms: pure functions, no Flower in sight.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Algorithm 1 run by a server that receives, from each client ``k``, only
its bin counts ``c_k in N^{H r}`` (a fine histogram of its calibration scores) and its sample count
``n_k``; never a raw score. The server

1. rejects every malformed message (wrong length or shape, NaN/inf, negative or non-integer mass, a total
   that is zero or disagrees with ``n_k``) and counts it as malicious: a Byzantine client may send
   anything, and a malformed report must neither crash the round nor enter the quantile;
2. coarsens the well-formed counts by ``r`` into ``H``-bin characterisation vectors and runs Rob-FCP's
   detection on them (estimating the number of malicious clients if it is unknown);
3. returns the FCP threshold of the kept clients from their fine counts (upper edge of the bin that holds
   the rank, see :func:`~icml24.conformal.rob_fcp.quantile.histogram_quantile`).

:class:`~icml24.conformal.rob_fcp.flower.RobFCPStrategy` is a thin Flower wrapper around
:func:`aggregate_histograms`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from icml24.common.validation import real_array
from icml24.conformal._validation import check_alpha
from icml24.conformal.rob_fcp._checks import int_at_least
from icml24.conformal.rob_fcp.characterization import check_bounds, coarsen_histograms
from icml24.conformal.rob_fcp.detection import NeighborMode
from icml24.conformal.rob_fcp.quantile import RankRule, histogram_quantile
from icml24.conformal.rob_fcp.robust import select_clients
from icml24.conformal.rob_fcp.weights import (
    DEFAULT_MAX_WEIGHT_RATIO,
    cap_counts,
    check_max_weight_ratio,
    weight_cap,
)

__all__ = ["ServerAggregate", "aggregate_histograms", "validate_histogram"]


MAX_TOTAL = float(2**53)
"""Largest total count the server accepts: beyond it float64 no longer counts integers exactly."""


def validate_histogram(counts: object, expected_bins: int, num_examples: object = None) -> str | None:
    """Why a client's reported counts are malformed, or None if they are well formed.

    Args:
        counts: the reported bin counts.
        expected_bins: the length the server asked for.
        num_examples: the sample count the client claims (None: not checked).
    """
    expected_bins = int_at_least(expected_bins, "expected_bins", 1)
    try:
        c = real_array(counts, "counts")
    except TypeError as exc:
        return "counts are complex, not real" if "complex" in str(exc) else "counts are not numeric"
    except (ValueError, OverflowError):
        return "counts are not numeric"
    if c.ndim != 1:
        return f"counts must be 1-D, got shape {c.shape}"
    if c.size != expected_bins:
        return f"counts have length {c.size}, expected {expected_bins}"
    if not np.isfinite(c).all():
        return "counts contain NaN or infinite values"
    if (c < 0).any():
        return "counts contain negative mass"
    if not np.array_equal(c, np.round(c)):
        return "counts are not integer-valued"
    with np.errstate(over="ignore"):  # finite counts may overflow to an infinite total: reported below
        total = c.sum()
    if not math.isfinite(total):
        return "counts sum to a non-finite total"
    if total > MAX_TOTAL:
        return f"counts sum to {total:g}, more than {MAX_TOTAL:g} (not countable exactly in float64)"
    if total <= 0:
        return "counts are all zero"
    if num_examples is not None:
        if isinstance(num_examples, (bool, np.bool_)):
            return f"num_examples is not a number: {num_examples!r}"
        try:
            n = float(num_examples)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return f"num_examples is not a number: {num_examples!r}"
        if not math.isfinite(n) or n != total:
            return f"counts sum to {total:g} but num_examples is {num_examples!r}"
    return None


@dataclass(frozen=True)
class ServerAggregate:
    """The outcome of one robust aggregation round.

    Attributes:
        qhat: the robust threshold (``+inf``: every label in every set; NaN: no usable client).
        benign: indices (into the reply list) of the clients whose counts entered the quantile.
        malicious: indices of every client treated as malicious (detected or malformed).
        rejected: ``{index: reason}`` for the malformed messages.
        n_malicious: number of malicious clients, malformed ones included (given or estimated).
        maliciousness: (K,) maliciousness scores, ``inf`` for malformed messages.
        capped: ``{index: (claimed size, size used)}`` for the kept clients whose weight was capped (a
            defence beyond the paper, see :mod:`~icml24.conformal.rob_fcp.weights`).
    """

    qhat: float
    benign: np.ndarray
    malicious: np.ndarray
    rejected: dict[int, str] = field(default_factory=dict)
    n_malicious: int = 0
    maliciousness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    capped: dict[int, tuple[float, float]] = field(default_factory=dict)


def aggregate_histograms(
    counts: Sequence[object],
    num_examples: Sequence[object] | None = None,
    *,
    alpha: float = 0.1,
    n_bins: int = 100,
    refine: int = 10,
    n_malicious: int | None = None,
    neighbor_mode: NeighborMode = "nearest",
    ord: float = 2,
    rank_rule: RankRule = "fcp",
    bounds: tuple[float, float] = (0.0, 1.0),
    variance: Literal["mle", "unit"] = "unit",
    max_weight_ratio: float | None = DEFAULT_MAX_WEIGHT_RATIO,
) -> ServerAggregate:
    """Rob-FCP on the server from the clients' fine bin counts (length ``n_bins * refine`` each).

    Args:
        counts: one array of bin counts per client (anything: malformed ones are rejected).
        num_examples: the sample count each client claims (None: not checked).
        alpha: target miscoverage.
        n_bins: ``H``, bins of the characterisation vectors used for detection.
        refine: each characterisation bin is split into ``refine`` bins for the quantile.
        n_malicious: known total number of malicious clients (malformed ones count towards it), or None
            to estimate it among the well-formed clients.
        neighbor_mode, ord, rank_rule, bounds, variance: as in
            :func:`~icml24.conformal.rob_fcp.robust.rob_fcp_quantile`.
        max_weight_ratio: a kept client weighs at most this many times the median kept client (its counts
            are rescaled to the cap); ``None``: weights as claimed, as in the paper. Beyond the paper: it
            stops a client with a benign-looking histogram and an inflated sample count.
    """
    alpha = check_alpha(alpha)
    max_weight_ratio = check_max_weight_ratio(max_weight_ratio)
    n_bins = int_at_least(n_bins, "n_bins", 1)
    refine = int_at_least(refine, "refine", 1)
    if n_malicious is not None:
        n_malicious = int_at_least(n_malicious, "n_malicious", 0)
    bounds = check_bounds(bounds)
    n_clients = len(counts)
    if num_examples is not None and len(num_examples) != n_clients:
        raise ValueError(f"num_examples has {len(num_examples)} entries for {n_clients} clients")
    expected = int(n_bins) * int(refine)
    rejected: dict[int, str] = {}
    for i, c in enumerate(counts):
        reason = validate_histogram(c, expected, None if num_examples is None else num_examples[i])
        if reason is not None:
            rejected[i] = reason
    ok = np.array([i for i in range(n_clients) if i not in rejected], dtype=np.int64)
    scores = np.full(n_clients, np.inf)
    if ok.size == 0:
        return ServerAggregate(math.nan, ok, np.arange(n_clients), rejected, n_clients, scores)
    fine = np.stack([np.asarray(counts[i], dtype=np.float64) for i in ok])
    vectors = coarsen_histograms(fine, refine) / fine.sum(axis=1, keepdims=True)
    if n_malicious is None:
        remaining = None
    else:
        # Malformed senders are malicious clients that gave themselves away; the rest hide among `ok`.
        remaining = max(int(n_malicious) - len(rejected), 0)
        remaining = min(remaining, (ok.size - 1) // 2)
    benign_local, local_scores, n_mal, _ = select_clients(
        vectors, remaining, neighbor_mode=neighbor_mode, ord=ord, variance=variance
    )
    scores[ok] = local_scores
    benign = ok[benign_local]
    kept = fine[benign_local]
    sizes = kept.sum(axis=1)
    cap = weight_cap(sizes, max_weight_ratio)
    capped: dict[int, tuple[float, float]] = {}
    if math.isfinite(cap) and (sizes > cap).any():
        kept = kept.copy()
        for j in np.flatnonzero(sizes > cap):
            kept[j] = cap_counts(kept[j], cap)
            capped[int(benign[j])] = (float(sizes[j]), float(kept[j].sum()))
    qhat = histogram_quantile(kept, alpha, rank_rule=rank_rule, bounds=bounds)
    malicious = np.setdiff1d(np.arange(n_clients), benign)
    return ServerAggregate(qhat, benign, malicious, rejected, n_mal + len(rejected), scores, capped)
