"""Euclidean power means and uniform-sampling coresets for them.

Paper: *Coresets for Multiple lp Regression*, Woodruff & Yasuda, ICML 2024, https://arxiv.org/abs/2406.02432
(the application to lp Euclidean power means, answering Cohen-Addad, Saulpic and Schwiegelshohn).

The lp power mean of points ``b_1..b_n in R^D`` minimises ``f(x) = sum_i ||x - b_i||_2^p``. The paper shows
that a **uniform** sample of ``k`` points (weights ``n/k``) gives a ``(1 + eps)``-approximate minimiser with

    k = Theta~(eps^-2)  (p = 1),     Theta~(eps^-1)  (1 < p < 2),     Theta~(eps^{1-p})  (p > 2),

i.e. the error ``f(x_S)/f(x*) - 1`` decays like ``k^-1/2``, ``k^-1`` and ``k^{-1/(p-1)}``, and these rates
are tight (worst case over instances).
"""

from __future__ import annotations

import numpy as np

from icml24.optim.lp_coresets._validation import (
    as_float_array,
    check_int,
    check_k,
    check_matrix,
    check_p,
    check_real,
    check_rng,
    check_weights,
)

RATE_EXPONENT_DOC = "error ~ k^-a with a = 1/2 (p=1), 1 (1<p<=2), 1/(p-1) (p>2)"


def power_mean_rate(p: float) -> float:
    """The paper's tight exponent ``a`` in ``f(x_S)/f(x*) - 1 ~ k^-a`` for uniform samples."""
    p = check_p(p)
    if p < 1:
        raise ValueError(f"the power-mean rates are stated for p >= 1, got {p}")
    if p == 1.0:
        return 0.5
    if p <= 2.0:
        return 1.0
    return 1.0 / (p - 1.0)


def power_mean_cost(points: np.ndarray, x: np.ndarray, p: float, weights: np.ndarray | None = None) -> float:
    """``sum_i w_i ||x - b_i||_2^p`` (``p > 0``)."""
    points = check_matrix(points, "points")
    x = _check_point(x, points.shape[1], "x")
    p = check_p(p)
    w = None if weights is None else check_weights(weights, len(points))
    return _power_mean_cost(points, x, p, w)


def _check_point(x: object, dim: int, name: str) -> np.ndarray:
    arr = as_float_array(x, name)
    if arr.shape != (dim,):
        raise ValueError(f"{name} must have shape ({dim},) (a point in R^{dim}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return arr


def _power_mean_cost(points: np.ndarray, x: np.ndarray, p: float, weights: np.ndarray | None) -> float:
    dist = np.linalg.norm(points - x[None, :], axis=1) ** p
    return float(dist.sum() if weights is None else weights @ dist)


def solve_power_mean(
    points: np.ndarray,
    p: float,
    weights: np.ndarray | None = None,
    *,
    max_iter: int = 500,
    tol: float = 1e-12,
) -> np.ndarray:
    """The minimiser of ``sum_i w_i ||x - b_i||^p`` (``p >= 1``; convex).

    ``p = 2``: the weighted mean. ``p = 1``: Weiszfeld's iteration (distances floored to avoid the
    data-point singularity). Otherwise: L-BFGS with the exact gradient, started at the weighted mean.
    """
    points = check_matrix(points, "points")
    p = check_p(p)
    if p < 1:
        raise ValueError(f"p must be >= 1 for the (convex) power mean, got {p}")
    n = len(points)
    w = np.ones(n) if weights is None else check_weights(weights, n)
    if not w.sum() > 0:
        raise ValueError("weights must not all be zero")
    max_iter = check_int(max_iter, "max_iter", lo=1)
    tol = check_real(tol, "tol", lo=0.0)
    x = (w @ points) / w.sum()
    if p == 2.0:
        return x
    scale = float(np.sqrt(((points - x) ** 2).sum(1).max())) or 1.0
    if p == 1.0:
        f = _power_mean_cost(points, x, 1.0, w)
        for _ in range(max_iter):
            dist = np.maximum(np.linalg.norm(points - x, axis=1), 1e-12 * scale)
            c = w / dist
            x_new = (c @ points) / c.sum()
            f_new = _power_mean_cost(points, x_new, 1.0, w)
            if f - f_new <= tol * f:
                if f_new < f:
                    x = x_new
                break
            x, f = x_new, f_new
        return x
    from scipy.optimize import minimize

    def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
        diff = z[None, :] - points
        dist = np.linalg.norm(diff, axis=1)
        val = w @ dist**p
        grad = (w * p * dist ** (p - 2.0)) @ diff
        return float(val) / norm, grad / norm

    norm = _power_mean_cost(points, x, p, w) or 1.0
    res = minimize(
        fun, x, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "ftol": 1e-15, "gtol": 1e-12}
    )
    return res.x


def uniform_power_mean(
    points: np.ndarray, p: float, k: int, rng: np.random.Generator | int | None = None
) -> np.ndarray:
    """The power mean of ``k`` points drawn uniformly without replacement (the paper's uniform coreset)."""
    points = check_matrix(points, "points")
    p = check_p(p)
    k = check_k(k, len(points))
    rng = check_rng(rng)
    idx = rng.choice(len(points), size=k, replace=False)
    return solve_power_mean(points[idx], p)


def power_mean_excess(points: np.ndarray, x: np.ndarray, x_star: np.ndarray, p: float) -> float:
    """``f(x)/f(x*) - 1``: the weak-coreset error of the approximate minimiser ``x``."""
    points = check_matrix(points, "points")
    x = _check_point(x, points.shape[1], "x")
    x_star = _check_point(x_star, points.shape[1], "x_star")
    p = check_p(p)
    best = _power_mean_cost(points, x_star, p, None)
    if not best > 0:
        raise ValueError("x_star has zero cost (every point equals x_star): the relative excess is undefined")
    return _power_mean_cost(points, x, p, None) / best - 1.0
