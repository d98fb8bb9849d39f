"""The instance-dependent exploration problem of factored-reward bandits and F-Track's aligned schedule.

Mussi et al., *Factored-Reward Bandits with Intermediate Observations*, ICML 2024,
https://proceedings.mlr.press/v235/mussi24a.html (the instance-dependent lower bound and F-Track).

Every suboptimal arm ``j`` of factor ``i`` must be observed about ``r_ij = 2 sigma^2 log T / Delta_ij^2`` times
(``Delta_ij = max_l mu_i(l) - mu_i(j)``), and one round observes one arm in *every* factor. The cheapest way to
collect those samples is the covering linear program over all ``K^d`` action vectors

    minimise   sum_a N(a) (mu* - mu(a))
    subject to sum_{a : a_i = j} N(a) >= r_ij    for every factor i and suboptimal arm j,   N >= 0,

whose value is the leading ``log T`` term of the asymptotic regret lower bound (up to the paper's constants).
F-Track does not call an LP solver: it lays each factor's suboptimal arms out back to back on a common
timeline and reads the action vectors off the aligned columns (:func:`aligned_schedule`). Because ``mu(a)`` is a
product of positive factors, ``-mu(a)`` is submodular and the *comonotone* alignment, every factor's arms in
increasing order of mean (so increasing required count, the best arm last), solves the program exactly when the
counts are real numbers; rounding them up adds at most one column's cost per change of column. The official code
sorts the other way (decreasing count); that is the same schedule when ``K = 2`` (one suboptimal arm per factor,
the paper's parallel instance) but not LP-optimal for ``K >= 3``: the tests and the reproduction's ``lp_check``
measure both against ``scipy.optimize.linprog``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._checks import means_array, non_negative_float, positive_int
from .environments import joint_actions


def required_samples(means: np.ndarray, sigma: float, log_term: float) -> np.ndarray:
    """``r_ij = 2 sigma^2 log_term / Delta_ij^2`` for suboptimal arms and 0 for each factor's best arm.

    ``log_term`` is ``log T`` for the lower bound and ``f_T(1/T)`` for F-Track. Raises when a factor has two
    best arms (a zero gap would need infinitely many samples).
    """
    means = means_array(means)
    sigma = non_negative_float(sigma, "sigma")
    log_term = non_negative_float(log_term, "log_term")
    best = means.argmax(axis=1)
    gaps = means.max(axis=1, keepdims=True) - means
    suboptimal = np.ones_like(means, dtype=bool)
    suboptimal[np.arange(means.shape[0]), best] = False
    if np.any(gaps[suboptimal] <= 0):
        raise ValueError("means must have a unique best arm in every factor (a zero gap needs infinite samples)")
    out = np.zeros_like(means)
    out[suboptimal] = 2.0 * sigma**2 * log_term / gaps[suboptimal] ** 2
    return out


def aligned_schedule(
    required: np.ndarray,
    best: np.ndarray,
    length: float | None = None,
    order: Literal["increasing", "decreasing"] = "increasing",
) -> tuple[np.ndarray, np.ndarray]:
    """F-Track's aligned exploration schedule (official code ``FtrackAgent._create_schedule``).

    For every factor ``i`` the suboptimal arms are laid out back to back on a common timeline, sorted by
    ``required[i, j]`` (ties: lower arm first), arm ``j`` occupying ``required[i, j]`` slots; the rest of the
    timeline plays ``best[i]``. Column ``t`` of the resulting ``d x length`` matrix is the action vector of slot
    ``t``; runs of identical columns are merged.

    Args:
        required: shape (d, K), non-negative counts (integers or reals); ``required[i, best[i]]`` is ignored.
        best: shape (d,), the arm treated as best in each factor.
        length: timeline length; segments past it are cut. ``None``: the longest factor's total.
        order: ``"increasing"`` (fewest required samples first: the comonotone layout that solves the exploration
            LP) or ``"decreasing"`` (the official code's layout; identical when ``K = 2``).

    Returns:
        ``(actions, counts)``: shape (G, d) distinct consecutive action vectors and shape (G,) their run
        lengths (positive; integers when ``required`` and ``length`` are).
    """
    required = np.asarray(required)
    best = np.asarray(best, dtype=np.intp)
    if required.ndim != 2:
        raise ValueError(f"required must have shape (n_factors, n_arms), got {required.shape}")
    d, k = required.shape
    if best.shape != (d,) or (d and (best.min() < 0 or best.max() >= k)):
        raise ValueError(f"best must have shape ({d},) with entries in [0, {k}), got {best!r}")
    if np.any(~np.isfinite(required)) or np.any(required < 0):
        raise ValueError("required must be finite and >= 0")
    if length is not None:
        length = non_negative_float(length, "length")
    req = required.copy()
    req[np.arange(d), best] = 0
    integer = np.issubdtype(req.dtype, np.integer) and (length is None or float(length).is_integer())
    if order not in ("increasing", "decreasing"):
        raise ValueError(f"order must be 'increasing' or 'decreasing', got {order!r}")
    # Per factor: the suboptimal arms sorted by requirement (stable, so ties keep the lower arm first); the best
    # arm gets a key that sorts it last so that the first K-1 entries are exactly the suboptimal arms.
    is_best = np.zeros_like(req, dtype=bool)
    is_best[np.arange(d), best] = True
    key = np.where(is_best, np.inf, req if order == "increasing" else -req)
    arms = np.argsort(key, axis=1, kind="stable")[:, : k - 1]
    seg_len = np.take_along_axis(req, arms, axis=1)
    seg_end = np.cumsum(seg_len, axis=1)
    total = seg_end[:, -1] if k > 1 else np.zeros(d)
    horizon = float(total.max()) if length is None else float(length)
    if horizon < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    # Every change of column happens at an end of some factor's segment: cut the timeline there.
    cuts = np.unique(np.concatenate([[0.0, horizon], np.minimum(seg_end.ravel(), horizon)]))
    starts, ends = cuts[:-1], cuts[1:]
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    actions = np.empty((starts.size, d), dtype=np.intp)
    for i in range(d):  # d is small; the segment holding each cut is found by binary search
        if k == 1:
            actions[:, i] = best[i]
            continue
        pos = np.searchsorted(seg_end[i], starts, side="right")
        actions[:, i] = np.where(pos < k - 1, arms[i][np.minimum(pos, k - 2)], best[i])
    counts = ends - starts
    # Merge runs of identical consecutive columns (possible when a segment has zero length).
    if starts.size:
        change = np.ones(starts.size, dtype=bool)
        change[1:] = np.any(actions[1:] != actions[:-1], axis=1)
        group = np.cumsum(change) - 1
        counts = np.bincount(group, weights=counts)
        actions = actions[change]
    if integer:
        counts = np.rint(counts).astype(np.int64)
    return actions, counts


def schedule_cost(means: np.ndarray, actions: np.ndarray, counts: np.ndarray) -> float:
    """Pseudo-regret ``sum_g counts_g (mu* - mu(a_g))`` of playing each action vector ``counts_g`` times."""
    means = means_array(means)
    actions = np.asarray(actions, dtype=np.intp)
    if actions.ndim != 2 or actions.shape[1] != means.shape[0]:
        raise ValueError(f"actions must have shape (G, {means.shape[0]}), got {actions.shape}")
    if actions.size and (actions.min() < 0 or actions.max() >= means.shape[1]):
        raise ValueError(f"actions must lie in [0, {means.shape[1]}), got values in [{actions.min()}, {actions.max()}]")
    counts = np.asarray(counts, dtype=float)
    if counts.shape != (actions.shape[0],):
        raise ValueError(f"counts must have shape ({actions.shape[0]},), got {counts.shape}")
    if not np.isfinite(counts).all() or (counts < 0).any():
        raise ValueError("counts must be finite and >= 0")
    reward = means[np.arange(means.shape[0]), actions].prod(axis=1)
    return float(np.dot(counts, means.max(axis=1).prod() - reward))


@dataclass(frozen=True)
class ExplorationLP:
    """Solution of the covering program over all ``K^d`` action vectors.

    Attributes:
        cost: optimal value ``sum_a N(a) (mu* - mu(a))``.
        counts: the optimal ``N(a)``, shape (K^d,), in the order of :func:`joint_actions`.
        actions: the action vectors, shape (K^d, d).
        required: the right-hand sides ``r_ij``, shape (d, K).
    """

    cost: float
    counts: np.ndarray
    actions: np.ndarray
    required: np.ndarray


def exploration_lp(means: np.ndarray, sigma: float, horizon: int, max_vectors: int = 20_000) -> ExplorationLP:
    """Solve the per-factor exploration program (the instance-dependent lower bound) with ``scipy.optimize.linprog`` (HiGHS).

    The right-hand side uses ``log_term = log(horizon)``. The program has one variable per action vector, so it
    is refused above ``max_vectors`` vectors.
    """
    from scipy.optimize import linprog

    means = means_array(means)
    horizon = positive_int(horizon, "horizon")
    max_vectors = positive_int(max_vectors, "max_vectors")
    d, k = means.shape
    if k**d > max_vectors:
        raise ValueError(f"K^d = {k**d} action vectors exceed max_vectors={max_vectors}")
    req = required_samples(means, sigma, float(np.log(horizon)))
    vectors = joint_actions(k, d)
    reward = means[np.arange(d), vectors].prod(axis=1)
    cost = means.max(axis=1).prod() - reward
    best = means.argmax(axis=1)
    rows, rhs = [], []
    for i in range(d):
        for j in range(k):
            if j == best[i]:
                continue
            rows.append(-(vectors[:, i] == j).astype(float))  # linprog wants A_ub x <= b_ub
            rhs.append(-req[i, j])
    if not rows:  # K == 1: nothing to explore
        return ExplorationLP(0.0, np.zeros(len(vectors)), vectors, req)
    res = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    return ExplorationLP(float(res.fun), np.asarray(res.x), vectors, req)
