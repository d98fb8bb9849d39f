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


EARLY_WINDOW = (0.1, 0.2)
"""Rounds ``(0.1 T, 0.2 T]``: the early window of :func:`window_means` (after the first tenth, which any learner
spends exploring)."""
LATE_WINDOW = (0.8, 1.0)
"""Rounds ``(0.8 T, T]``: the late window of :func:`window_means`."""


def window_means(
    per_round: np.ndarray,
    early: tuple[float, float] = EARLY_WINDOW,
    late: tuple[float, float] = LATE_WINDOW,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean per-round regret in an early and a late window of the horizon, per trial.

    ``per_round`` is ``(n_trials, T)`` (or one curve ``(T,)``); a window ``(a, b)`` is the rounds ``t`` with
    ``a T < t <= b T`` (1-based). Linear regret has the same per-round regret in both windows; regret
    ``R_t ~ t^a`` has ``late / early ~ (0.9 / 0.15)^(a - 1) = 6^(a - 1)`` with the default windows (0.75 at
    ``a = 0.84``, 0.41 at ``a = 1/2``). Unlike the log-log slope of ``R_t``, this does not pass a learner
    whose per-round regret has settled on a floor (linear regret) after a costly start.
    """
    x = np.asarray(per_round, dtype=float)
    if x.ndim not in (1, 2) or x.shape[-1] < 10:
        raise ValueError(f"per_round must be (T,) or (n_trials, T) with T >= 10, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("per_round must be finite")
    horizon = x.shape[-1]
    out = []
    for name, (a, b) in (("early", early), ("late", late)):
        a, b = unit_interval(a, f"{name}[0]"), unit_interval(b, f"{name}[1]")
        lo, hi = int(np.floor(a * horizon)), int(np.floor(b * horizon))
        if hi <= lo:
            raise ValueError(f"{name} window {(a, b)} holds no round at T = {horizon}")
        out.append(x[..., lo:hi].mean(axis=-1))
    return out[0], out[1]
