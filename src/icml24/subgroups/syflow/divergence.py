"""KL divergence between a subgroup's target distribution and the population's, estimated two ways.

SYFLOW scores a subgroup by ``KL(P_S || P_pop)`` with its flows (:attr:`FoundSubgroup.kl`). As an independent
check (Sec. 5.2 reports KL values of the found subgroups) :func:`kde_kl` estimates the same quantity with
Gaussian kernel density estimates (scipy's ``gaussian_kde``, Scott's bandwidth): the mean over the subgroup's
points of ``log p_S(y) - log p_pop(y)``, with the subgroup's own density evaluated leave-one-out so that a
small subgroup's KDE does not overrate its own points.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def kde_kl(y_subgroup: np.ndarray, y_population: np.ndarray, *, max_points: int = 4000, seed: int = 0) -> float:
    """A Gaussian-KDE estimate of ``KL(P_S || P_pop)`` in nats (1-D targets).

    Args:
        y_subgroup: the subgroup's target values (>= 3 distinct values).
        y_population: all target values.
        max_points: the population KDE uses at most this many points (a random subset) to stay fast.
        seed: the subset's seed.
    """
    s = np.asarray(y_subgroup, dtype=float).reshape(-1)
    p = np.asarray(y_population, dtype=float).reshape(-1)
    if s.size < 3 or np.unique(s).size < 3:
        raise ValueError(f"y_subgroup must hold at least 3 distinct values, got {np.unique(s).size}")
    if p.size < 3:
        raise ValueError(f"y_population must hold at least 3 values, got {p.size}")
    if not np.isfinite(s).all():
        raise ValueError("y_subgroup must be finite")
    if not np.isfinite(p).all():
        raise ValueError("y_population must be finite")
    if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) or max_points < 3:
        raise ValueError(f"max_points must be an int >= 3, got {max_points!r}")
    rng = np.random.default_rng(seed)
    if p.size > max_points:
        p = rng.choice(p, max_points, replace=False)
    pop_kde = stats.gaussian_kde(p)
    # Leave-one-out subgroup density: remove each point's own kernel from the KDE sum.
    kde_s = stats.gaussian_kde(s)
    bw = float(np.sqrt(kde_s.covariance[0, 0]))
    m = s.size
    diffs = (s[:, None] - s[None, :]) / bw if m <= 4000 else None
    if diffs is not None:
        k = np.exp(-0.5 * diffs**2) / (np.sqrt(2 * np.pi) * bw)
        np.fill_diagonal(k, 0.0)
        dens_s = k.sum(1) / (m - 1)
    else:
        dens_s = kde_s(s)
    dens_p = pop_kde(s)
    tiny = np.finfo(float).tiny
    return float(np.mean(np.log(np.maximum(dens_s, tiny)) - np.log(np.maximum(dens_p, tiny))))
