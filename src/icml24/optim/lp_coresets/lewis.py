"""lp Lewis weights by (damped) fixed-point iteration.

Paper: *Coresets for Multiple lp Regression*, D. P. Woodruff and T. Yasuda, ICML 2024 (PMLR 235).
https://arxiv.org/abs/2406.02432 (the coresets sample rows by lp Lewis weights, Sec. 2-3).

The lp Lewis weights of ``A in R^{n x d}`` are the unique ``w > 0`` with

    w_i = ( a_i^T (A^T W^{1-2/p} A)^{-1} a_i )^{p/2},          W = diag(w),           (Lewis' fixed point)

they sum to ``rank(A)`` and equal the leverage scores at ``p = 2``. Cohen & Peng (2015) show the plain
iteration ``w <- T(w)`` contracts for ``p < 4`` (in log space, with rate ``|p/2 - 1|``) and may fail for
``p >= 4``. In log coordinates the Jacobian of ``T`` has eigenvalues in ``[-(p/2 - 1), 0]`` (``p > 2``), so
the damped iteration ``log w <- (1 - a) log w + a log T(w)`` with ``a = 4 / (p + 2)`` contracts with rate
``(p - 2) / (p + 2) < 1`` for every ``p``; we use it for ``p >= 4`` (the case the plain iteration does not
cover) and the plain iteration below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml24.optim.lp_coresets._validation import check_matrix, check_p


@dataclass(frozen=True)
class LewisResult:
    """Lewis weights and how the iteration went."""

    weights: np.ndarray
    """The Lewis weights, shape ``(n,)``; zero for zero rows."""
    n_iter: int
    """Number of fixed-point iterations performed."""
    residual: float
    """Final fixed-point residual ``max_i |w_i - T(w)_i|``."""
    rank: int
    """Numerical rank of ``A`` (the weights sum to it)."""


def orthonormal_basis(A: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """An orthonormal basis ``U`` (n x r) of ``col(A)``: Lewis weights only depend on the column space."""
    if A.shape[0] >= A.shape[1]:  # QR then an SVD of the small factor: cheaper than an SVD of A
        Q, R = np.linalg.qr(A)
        Ur, s, _ = np.linalg.svd(R)
    else:
        Q, (Ur, s, _) = np.eye(A.shape[0]), np.linalg.svd(A, full_matrices=False)
    r = int(np.sum(s > rtol * s[0])) if s.size and s[0] > 0 else 0
    if r == 0:
        raise ValueError("A must have at least one nonzero entry (rank 0 has no Lewis weights)")
    return Q @ Ur[:, :r]


def _leverage(U: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``sigma_i = u_i^T (U^T diag(u) U)^{-1} u_i`` via a Cholesky factor (a cheap n x r product)."""
    M = U.T @ (U * u[:, None])
    L = np.linalg.cholesky(M)
    Z = U @ np.linalg.inv(L).T  # U L^{-T}: one small inverse and a tall matrix product
    return np.einsum("ij,ij->i", Z, Z)


def lewis_weights(
    A: np.ndarray,
    p: float,
    *,
    max_iter: int = 500,
    tol: float = 1e-10,
    damping: float | None = None,
    return_info: bool = False,
) -> np.ndarray | LewisResult:
    """The lp Lewis weights of ``A`` (fixed point of Lewis' equation, see the module docstring).

    Args:
        A: design matrix, shape ``(n, d)``, finite.
        p: ``p > 0``.
        max_iter: iteration cap.
        tol: stop when ``max_i |w_i - T(w)_i| <= tol``.
        damping: step ``a`` in log space; ``None`` uses 1 for ``p < 4`` and ``4/(p+2)`` for ``p >= 4``.
        return_info: return a :class:`LewisResult` instead of the weights.
    """
    A = check_matrix(A, "A")
    p = check_p(p)
    if damping is None:
        damping = 1.0 if p < 4 else 4.0 / (p + 2.0)
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    nonzero = np.any(A != 0, axis=1)
    U = orthonormal_basis(A[nonzero])
    n, r = U.shape
    w = np.full(n, r / n)
    residual, it = np.inf, 0
    for it in range(1, max_iter + 1):  # noqa: B007 - n_iter is reported
        t = _leverage(U, w ** (1.0 - 2.0 / p)) ** (p / 2.0)
        residual = float(np.max(np.abs(w - t)))
        w = t if damping == 1.0 else w ** (1.0 - damping) * t**damping
        if residual <= tol:
            break
    out = np.zeros(A.shape[0])
    out[nonzero] = w
    if return_info:
        return LewisResult(out, it, residual, r)
    return out
