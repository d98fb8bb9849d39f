"""Regret-curve summaries shared by the bandit papers.

The log-log slope of cumulative regret is how the bandit papers here read "sublinear regret" off a finite
run: ``R_t ~ t^a`` has slope ``a``; ``a < 1`` is sublinear, ``sqrt(T)`` growth gives 1/2, ``log T`` tends to 0.
"""

from __future__ import annotations

import numpy as np

from ._checks import unit_interval


def loglog_slope(cumulative: np.ndarray, start_fraction: float = 0.1) -> float:
    """Least-squares slope of ``log R_t`` against ``log t`` over ``t >= start_fraction * T`` (1-D curve).

    A slope below 1 means sublinear regret; ``sqrt(T)`` growth has slope 1/2 and ``log T`` growth tends to 0.
    """
    curve = np.asarray(cumulative, dtype=float)
    if curve.ndim != 1 or curve.size < 3:
        raise ValueError(f"cumulative must be a 1-D curve with >= 3 points, got shape {curve.shape}")
    if not np.isfinite(curve).all() or (curve < 0).any():
        raise ValueError("cumulative must be a finite, non-negative cumulative regret curve")
    start_fraction = unit_interval(start_fraction, "start_fraction")
    if start_fraction == 1.0:
        raise ValueError("start_fraction must be < 1 (the fit needs more than the last point)")
    t = np.arange(1, curve.size + 1)
    keep = (t >= start_fraction * curve.size) & (curve > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(t[keep]), np.log(curve[keep]), 1)[0])
