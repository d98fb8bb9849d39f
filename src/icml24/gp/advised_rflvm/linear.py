"""The linear GPLVM and its closed-form maximiser: how a fixed projection variance collapses the latents.

Li et al., "Preventing Model Collapse in Gaussian Process Latent Variable Models", ICML 2024 (Sec. 3),
restating the PPCA / linear-GPLVM result (Tipping & Bishop 1999; Lawrence 2005). With the linear kernel
``k(x, x') = xᵀx'`` the model is ``y_d ~ N(0, X Xᵀ + σ² I)`` for each of the D columns of ``Y ∈ R^{N×D}``.
Let ``S = Y Yᵀ / D`` have eigenpairs ``(λ_i, u_i)``, ``λ_1 >= ... >= λ_N``. For a *fixed* σ² the maximiser
over ``X ∈ R^{N×Q}`` is ``X = U_Q diag(√max(λ_i - σ², 0)) R`` for any rotation ``R``: a direction whose
eigenvalue is not above σ² vanishes, and ``σ² >= λ_1`` gives ``X = 0``, the homogeneous latent of a
collapsed model. Maximising over σ² too gives ``σ̂² = mean(λ_{Q+1..N})``, which is at most ``λ_Q``, so
the learned projection variance never collapses a latent direction.
"""

from __future__ import annotations

import numpy as np
import torch

from icml24.gp.gaussian import gaussian_loglik_dense
from icml24.gp.linalg import check_int, check_scalar, check_tensor


def _as_data(y: object) -> np.ndarray:
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"y must be a numeric array, got {type(y).__name__}") from exc
    if arr.ndim != 2:
        raise ValueError(f"y must be 2-D (N, D), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("y must be finite")
    return arr


def _eig_gram(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = y @ y.T / y.shape[1]
    lam, u = np.linalg.eigh(s)
    order = np.argsort(lam)[::-1]
    return np.clip(lam[order], 0.0, None), u[:, order]


def linear_gplvm_closed_form(
    y: np.ndarray, n_components: int, noise_variance: float | None = None
) -> tuple[np.ndarray, float, np.ndarray]:
    """Maximiser of the linear-GPLVM likelihood (up to rotation).

    Args:
        y: ``(N, D)`` data (not centred here: the model has zero mean).
        n_components: latent dimension ``Q`` (``1 <= Q < N``).
        noise_variance: fixed σ² (> 0); ``None`` maximises over it too (σ̂² = mean of the discarded eigenvalues).

    Returns:
        ``(X, sigma2, eigenvalues)``: the ``(N, Q)`` latent, the σ² used, and all eigenvalues of ``Y Yᵀ / D``.
    """
    y = _as_data(y)
    check_int("n_components", n_components)
    if not 1 <= n_components < y.shape[0]:
        raise ValueError(f"n_components must be in [1, N-1] = [1, {y.shape[0] - 1}], got {n_components}")
    if noise_variance is not None:
        check_scalar("noise_variance", noise_variance, low=0.0, allow_tensor=False)
    lam, u = _eig_gram(y)
    sigma2 = float(lam[n_components:].mean()) if noise_variance is None else float(noise_variance)
    scale = np.sqrt(np.clip(lam[:n_components] - sigma2, 0.0, None))
    return u[:, :n_components] * scale, sigma2, lam


def linear_gplvm_loglik(x: torch.Tensor, y: torch.Tensor, noise_variance: float | torch.Tensor) -> torch.Tensor:
    """``Σ_d log N(y_d | 0, X Xᵀ + σ² I)``, the objective that :func:`linear_gplvm_closed_form` maximises."""
    check_tensor("x", x, ndim=2)
    check_tensor("y", y, ndim=2)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    check_scalar("noise_variance", noise_variance, low=0.0)
    n = y.shape[0]
    eye = torch.eye(n, dtype=y.dtype)
    return gaussian_loglik_dense(y, x @ x.T + noise_variance * eye, jitter=0.0)
