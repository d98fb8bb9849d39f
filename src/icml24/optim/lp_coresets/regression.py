"""Multiple lp regression: ``min_X sum_i w_i ||a_i^T X - b_i||_p^p`` (entrywise), solved by IRLS.

Paper: *Coresets for Multiple lp Regression*, Woodruff & Yasuda, ICML 2024. https://arxiv.org/abs/2406.02432

The entrywise objective separates over the ``m`` response columns, ``f(X) = sum_j ||A x_j - b_j||_p^p``,
so the solver runs ``m`` single-response problems at once (one batched ``d x d`` solve per column).

* ``p = 2``: weighted least squares, in closed form.
* ``p < 2``: IRLS as majorise-minimise: ``x <- (A^T D A)^{-1} A^T D b`` with ``D = w |r|^{p-2}``, ``|r|``
  floored at ``delta`` (the smoothed objective decreases monotonically; ``delta`` shrinks geometrically).
* ``p > 2``: the IRLS direction is Newton's step scaled by ``p - 1``; we take the Newton step
  ``x <- x - (A^T D A)^{-1} A^T D r / (p - 1)`` with a per-column backtracking line search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml24.optim.lp_coresets._validation import (
    check_int,
    check_matrix,
    check_p,
    check_real,
    check_responses,
    check_solution,
    check_weights,
)


def lp_cost(
    A: np.ndarray, B: np.ndarray, X: np.ndarray, p: float, weights: np.ndarray | None = None
) -> float:
    """``sum_i w_i sum_j |a_i^T x_j - B_ij|^p`` (``w = 1`` when ``weights`` is None; ``p > 0``).

    ``B`` may be ``(n,)`` with ``X`` of shape ``(d,)`` (one response).
    """
    A = check_matrix(A, "A")
    n, d = A.shape
    B = check_responses(B, n)
    X = check_solution(X, d, B.shape[1])
    p = check_p(p)
    w = None if weights is None else check_weights(weights, n)
    return _lp_cost(A, B, X, p, w)


def _lp_cost(A: np.ndarray, B: np.ndarray, X: np.ndarray, p: float, w: np.ndarray | None) -> float:
    rows = (np.abs(A @ X - B) ** p).sum(axis=1)
    return float(rows.sum() if w is None else w @ rows)


@dataclass(frozen=True)
class LpSolution:
    """The minimiser and how the solver went."""

    X: np.ndarray
    """Minimiser, shape ``(d, m)``."""
    cost: float
    """Objective at ``X``."""
    n_iter: int
    """IRLS iterations."""


def solve_multi_lp(
    A: np.ndarray,
    B: np.ndarray,
    p: float,
    weights: np.ndarray | None = None,
    *,
    max_iter: int = 200,
    tol: float = 1e-10,
    X0: np.ndarray | None = None,
) -> LpSolution:
    """Minimise ``sum_i w_i ||a_i^T X - B_i||_p^p`` over ``X in R^{d x m}`` (see the module docstring).

    Args:
        A: ``(n, d)`` design. B: ``(n, m)`` or ``(n,)`` responses. p: ``p >= 1`` (the problem is convex).
        weights: nonnegative row weights ``(n,)`` (a coreset's), or None for ones.
        max_iter: IRLS iterations cap. tol: stop when the relative decrease of every column is below it.
        X0: a starting point (default: the weighted least-squares solution).
    """
    A = check_matrix(A, "A")
    n, d = A.shape
    B = check_responses(B, n)
    p = check_p(p)
    if p < 1:
        raise ValueError(f"p must be >= 1 for the (convex) lp regression solver, got {p}")
    w = np.ones(n) if weights is None else check_weights(weights, n)
    if not w.sum() > 0:
        raise ValueError("weights must not all be zero")
    max_iter = check_int(max_iter, "max_iter", lo=1)
    tol = check_real(tol, "tol", lo=0.0)
    if X0 is not None:
        X0 = check_solution(X0, d, B.shape[1], "X0")
    Aw = A[w > 0]
    Bw = B[w > 0]
    w = w[w > 0]
    AA = _outer_rows(Aw)
    X = _wls(Aw, Bw, AA, np.broadcast_to(w[:, None], Bw.shape)) if X0 is None else np.array(X0, dtype=float)
    if p == 2.0:
        return LpSolution(X, _lp_cost(Aw, Bw, X, p, w), 0)

    def col_cost(X: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return w @ np.abs(Aw @ X - Bw[:, cols]) ** p

    m = B.shape[1]
    f = col_cost(X, np.arange(m))
    scale = float(np.max(np.abs(Bw))) or 1.0
    delta = 1e-2 * scale if p < 2 else 0.0
    active = np.ones(m, dtype=bool)  # columns still improving: converged columns are frozen
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        cols = np.flatnonzero(active)
        Xa, fa = X[:, cols], f[cols]
        R = Aw @ Xa - Bw[:, cols]
        D = w[:, None] * np.maximum(np.abs(R), delta) ** (p - 2.0)
        if p < 2:  # majorise-minimise on the smoothed objective
            X_new = _wls(Aw, Bw[:, cols], AA, D)
            f_new = col_cost(X_new, cols)
        else:  # Newton with per-column backtracking
            step = _wls(Aw, R, AA, D) / (p - 1.0)
            t = np.ones(len(cols))
            X_new = Xa - step
            f_new = col_cost(X_new, cols)
            for _ in range(30):
                bad = f_new > fa * (1.0 + 1e-13)
                if not bad.any():
                    break
                t[bad] /= 2.0
                X_new[:, bad] = Xa[:, bad] - step[:, bad] * t[bad]
                f_new[bad] = col_cost(X_new[:, bad], cols[bad])
        keep = f_new <= fa
        X[:, cols[keep]] = X_new[:, keep]
        rel = (fa - np.where(keep, f_new, fa)) / np.maximum(fa, 1e-300)
        f[cols[keep]] = f_new[keep]
        if p < 2:
            delta = max(delta * 0.3, 1e-12 * scale)
            if delta > 1e-10 * scale:
                continue
        active[cols[rel < tol]] = False
        if not active.any():
            break
    return LpSolution(X, float(f.sum()), it)


_CHUNK = 1 << 16
"""Rows per block when the row outer products would not fit comfortably in memory."""


def _outer_rows(A: np.ndarray) -> np.ndarray | None:
    """Row outer products ``a_i a_i^T`` flattened, shape ``(n, d*d)``; None when too large (computed in blocks)."""
    n, d = A.shape
    if n * d * d > 1 << 25:
        return None
    return (A[:, :, None] * A[:, None, :]).reshape(n, d * d)


def _wls(A: np.ndarray, B: np.ndarray, AA: np.ndarray | None, D: np.ndarray) -> np.ndarray:
    """Per column j: ``(A^T diag(D_j) A)^{-1} A^T diag(D_j) B_j``, batched (``AA`` = row outer products)."""
    n, d = A.shape
    if AA is not None:
        G = (D.T @ AA).reshape(-1, d, d)
    else:
        G = np.zeros((D.shape[1], d * d))
        for s in range(0, n, _CHUNK):
            a = A[s : s + _CHUNK]
            G += D[s : s + _CHUNK].T @ (a[:, :, None] * a[:, None, :]).reshape(len(a), d * d)
        G = G.reshape(-1, d, d)
    rhs = (A.T @ (D * B)).T
    G = G + 1e-13 * np.trace(G, axis1=1, axis2=2)[:, None, None] * np.eye(d)
    return np.linalg.solve(G, rhs[:, :, None])[:, :, 0].T
