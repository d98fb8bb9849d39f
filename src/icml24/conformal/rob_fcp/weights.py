"""Capping each client's weight in the pooled quantile: a defence beyond the paper.

Rob-FCP (Kang et al., ICML 2024, https://arxiv.org/abs/2406.01960) detects malicious clients from the
*shape* of their characterisation vectors (normalised histograms), then pools the kept clients' scores, so
each client weighs in proportion to the number of samples it *claims*. A Byzantine client that sends an
ordinary-looking histogram but claims 1000x the sample count is never flagged (its shape is benign) and then
dominates the quantile: on digits it pulls coverage from 0.92 to 0.80. The paper's threat model bounds the
number of malicious clients, not their claimed sizes, so this is outside its certificate.

The defence: a client's weight is capped at ``max_weight_ratio`` times the median claimed size of the kept
clients (a robust estimate that a minority of liars cannot move far). A capped client keeps the shape of
its scores, rescaled to the cap: histogram counts by largest-remainder rounding, exact scores by taking
evenly spaced order statistics. Clients at or below the cap are untouched, so with equal honest sizes (the
paper's IID splits) nothing changes; honest size differences up to ``max_weight_ratio`` x the median pass.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from icml24.common.validation import real_array

__all__ = ["DEFAULT_MAX_WEIGHT_RATIO", "cap_counts", "cap_scores", "check_max_weight_ratio", "weight_cap"]

DEFAULT_MAX_WEIGHT_RATIO: float = 3.0
"""Default cap: a client may weigh at most 3x the median kept client."""


def check_max_weight_ratio(max_weight_ratio: object) -> float | None:
    """``None`` (no cap) or a finite float >= 1."""
    if max_weight_ratio is None:
        return None
    if isinstance(max_weight_ratio, (bool, np.bool_)) or not isinstance(max_weight_ratio, numbers.Real):
        raise TypeError(f"max_weight_ratio must be a number >= 1 or None, got {type(max_weight_ratio).__name__}")
    value = float(max_weight_ratio)
    if not math.isfinite(value) or value < 1.0:
        raise ValueError(f"max_weight_ratio must be a finite number >= 1 or None, got {max_weight_ratio!r}")
    return value


def weight_cap(sizes: Sequence[float] | np.ndarray, max_weight_ratio: float | None) -> float:
    """``max_weight_ratio * median(sizes)`` (at least 1), or ``inf`` without a cap."""
    ratio = check_max_weight_ratio(max_weight_ratio)
    s = real_array(sizes, "sizes")
    if ratio is None or s.size == 0:
        return math.inf
    return max(1.0, math.floor(ratio * float(np.median(s))))


def cap_counts(counts: np.ndarray, cap: float) -> np.ndarray:
    """Integer bin counts with the same shape as ``counts`` and total ``min(total, cap)``.

    Largest-remainder rounding of ``counts * cap / total``: the total is exactly ``floor(cap)`` and every
    bin moves by less than one count from the proportional share.
    """
    c = np.asarray(counts, dtype=np.float64)
    total = float(c.sum())
    if not math.isfinite(cap) or total <= cap:
        return c
    target = int(math.floor(cap))
    share = c * (target / total)
    out = np.floor(share)
    short = target - int(out.sum())
    if short > 0:
        order = np.argsort(-(share - out), kind="stable")[:short]
        out[order] += 1
    return out


def cap_scores(scores: np.ndarray, cap: float) -> np.ndarray:
    """``scores`` itself, or ``floor(cap)`` evenly spaced order statistics of it (same empirical shape)."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    if not math.isfinite(cap) or s.size <= cap:
        return s
    m = int(math.floor(cap))
    srt = np.sort(s)
    # order statistics at the mid-points of m equal-mass slices
    idx = np.minimum(((np.arange(m) + 0.5) * s.size / m).astype(np.int64), s.size - 1)
    return srt[idx]
