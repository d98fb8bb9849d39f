"""Gaussian log-likelihoods and KL divergences used by variational GP models.

* ``gaussian_loglik_dense``: ``Σ_d log N(y_d | 0, K)`` by an N×N Cholesky.
* ``gaussian_loglik_lowrank``: the same for ``K = Φ Φᵀ + σ² I`` through the Woodbury identity and the matrix
  determinant lemma with ``A = Φᵀ Φ + σ² I_M`` (advisedRFLVM, Li et al., ICML 2024, arXiv:2404.01697, Sec. 4):
  ``log p(Y) = -(ND/2) log 2π - (D/2)[(N-M) log σ² + log|A|] - (1/(2σ²))[tr(YᵀY) - tr(YᵀΦ A⁻¹ ΦᵀY)]``,
  O(N M² + M³) instead of O(N³). With a mask of observed entries each output column gets its own ``A_d``.
* ``kl_diag_normal_std``: ``KL(N(μ, diag s²) || N(0, I))``.
* ``kl_normal_chol_diag_prior``: ``KL(N(m, L Lᵀ) || N(0, diag p))`` for a batch of Cholesky factors.
"""

from __future__ import annotations

import math

import torch

from icml24.gp.linalg import DEFAULT_JITTER, check_scalar, check_tensor, psd_cholesky

__all__ = [
    "gaussian_loglik_dense",
    "gaussian_loglik_lowrank",
    "kl_diag_normal_std",
    "kl_normal_chol_diag_prior",
    "lowrank_posterior_weights",
]

_LOG2PI = math.log(2.0 * math.pi)


def gaussian_loglik_dense(y: torch.Tensor, cov: torch.Tensor, *, jitter: float = DEFAULT_JITTER) -> torch.Tensor:
    """``Σ_d log N(y[:, d] | 0, cov)`` for ``y`` of shape ``(N, D)`` and ``cov`` of shape ``(N, N)``."""
    check_tensor("y", y, ndim=2)
    check_tensor("cov", cov, ndim=2)
    if cov.shape != (y.shape[0], y.shape[0]):
        raise ValueError(f"y must be (N, D) and cov (N, N); got {tuple(y.shape)} and {tuple(cov.shape)}")
    n, d = y.shape
    chol = psd_cholesky(cov, jitter=jitter, name="cov")
    alpha = torch.linalg.solve_triangular(chol, y, upper=False)
    logdet = 2.0 * torch.log(torch.diagonal(chol)).sum()
    return -0.5 * (n * d * _LOG2PI + d * logdet + (alpha * alpha).sum())


def _check_lowrank(y: torch.Tensor, phi: torch.Tensor, noise: object, mask: torch.Tensor | None) -> None:
    check_tensor("y", y, ndim=2)
    check_tensor("phi", phi, ndim=2)
    if phi.shape[0] != y.shape[0]:
        raise ValueError(f"y must be (N, D) and phi (N, M) with the same N; got {tuple(y.shape)}, {tuple(phi.shape)}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a boolean or 0/1 torch.Tensor (or None), got {type(mask).__name__}")
        if mask.shape != y.shape:
            raise ValueError(f"mask must have the shape of y {tuple(y.shape)}, got {tuple(mask.shape)}")
    check_scalar("noise", noise, low=0.0)


def gaussian_loglik_lowrank(
    y: torch.Tensor,
    phi: torch.Tensor,
    noise: torch.Tensor | float,
    *,
    mask: torch.Tensor | None = None,
    jitter: float = 0.0,
) -> torch.Tensor:
    """``Σ_d log N(y_d | 0, Φ Φᵀ + σ² I)`` by Woodbury (see the module docstring).

    Args:
        y: ``(N, D)`` data (entries outside ``mask`` are ignored; they may be anything finite).
        phi: ``(N, M)`` features.
        noise: ``σ² > 0``.
        mask: optional ``(N, D)`` boolean/0-1 mask of observed entries; column ``d`` then uses only its observed
            rows, which is the exact marginal likelihood of the observed entries.
        jitter: added to the diagonal of ``A`` (``A`` is already ``>= σ² I``, so 0 is safe by default).
    """
    _check_lowrank(y, phi, noise, mask)
    check_scalar("jitter", jitter, low=0.0, strict=False, allow_tensor=False)
    noise_t = torch.as_tensor(noise, dtype=phi.dtype)
    m = phi.shape[1]
    eye = torch.eye(m, dtype=phi.dtype, device=phi.device)
    if mask is None:
        n, d = y.shape
        a = phi.T @ phi + noise_t * eye
        chol = psd_cholesky(a, jitter=jitter, name="A = PhiᵀPhi + noise I")
        b = torch.linalg.solve_triangular(chol, phi.T @ y, upper=False)  # L⁻¹ Φᵀ Y
        logdet_a = 2.0 * torch.log(torch.diagonal(chol)).sum()
        quad = ((y * y).sum() - (b * b).sum()) / noise_t
        return -0.5 * (n * d * _LOG2PI + d * ((n - m) * torch.log(noise_t) + logdet_a) + quad)
    w = mask.to(phi.dtype)
    ym = y * w
    n_obs = w.sum(0)  # (D,)
    a = torch.einsum("nd,nm,nk->dmk", w, phi, phi) + noise_t * eye  # one A_d per column
    chol = psd_cholesky(a, jitter=jitter, name="A_d = Phi_dᵀPhi_d + noise I")
    rhs = (phi.T @ ym).T.unsqueeze(-1)  # (D, M, 1)
    b = torch.linalg.solve_triangular(chol, rhs, upper=False).squeeze(-1)
    logdet_a = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
    quad = ((ym * ym).sum(0) - (b * b).sum(-1)) / noise_t
    per_col = n_obs * _LOG2PI + (n_obs - m) * torch.log(noise_t) + logdet_a + quad
    return -0.5 * per_col.sum()


def lowrank_posterior_weights(
    y: torch.Tensor, phi: torch.Tensor, noise: torch.Tensor | float, *, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Posterior mean of the weights ``β`` in ``y_d = Φ β_d + noise``, ``β_d ~ N(0, I)``: ``A_d⁻¹ Φᵀ y_d``.

    The posterior mean of the function at new features ``Φ*`` is then ``Φ* β``, i.e. ``K*(K + σ²I)⁻¹ Y``.
    Returns ``(M, D)``.
    """
    _check_lowrank(y, phi, noise, mask)
    noise_t = torch.as_tensor(noise, dtype=phi.dtype)
    eye = torch.eye(phi.shape[1], dtype=phi.dtype, device=phi.device)
    if mask is None:
        chol = psd_cholesky(phi.T @ phi + noise_t * eye, jitter=0.0, name="A")
        return torch.cholesky_solve(phi.T @ y, chol)
    w = mask.to(phi.dtype)
    a = torch.einsum("nd,nm,nk->dmk", w, phi, phi) + noise_t * eye
    chol = psd_cholesky(a, jitter=0.0, name="A_d")
    rhs = (phi.T @ (y * w)).T.unsqueeze(-1)
    return torch.cholesky_solve(rhs, chol).squeeze(-1).T


def kl_diag_normal_std(mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``Σ KL(N(mean, std²) || N(0, 1))`` over all entries: ``½ Σ (μ² + s² - 1 - log s²)``."""
    check_tensor("mean", mean)
    check_tensor("std", std)
    if mean.shape != std.shape:
        raise ValueError(f"mean and std must have the same shape, got {tuple(mean.shape)} and {tuple(std.shape)}")
    if bool((std <= 0).any()):
        raise ValueError("std must be > 0")
    return 0.5 * (mean * mean + std * std - 1.0 - 2.0 * torch.log(std)).sum()


def kl_normal_chol_diag_prior(mean: torch.Tensor, chol: torch.Tensor, prior_var: torch.Tensor) -> torch.Tensor:
    """``Σ_batch KL(N(mean, L Lᵀ) || N(0, diag(prior_var)))``.

    ``½ [tr(P⁻¹ L Lᵀ) + mᵀ P⁻¹ m - s + log|P| - log|L Lᵀ|]`` with ``L`` lower-triangular with a positive
    diagonal. Shapes: ``mean (..., s)``, ``chol (..., s, s)``, ``prior_var (..., s)`` (broadcast).
    """
    check_tensor("mean", mean)
    check_tensor("chol", chol)
    check_tensor("prior_var", prior_var)
    if chol.dim() < 2 or chol.shape[-1] != chol.shape[-2]:
        raise ValueError(f"chol must be (..., s, s), got shape {tuple(chol.shape)}")
    if mean.shape[-1] != chol.shape[-1]:
        raise ValueError(f"mean (..., s) and chol (..., s, s) disagree: {tuple(mean.shape)}, {tuple(chol.shape)}")
    if bool((prior_var <= 0).any()):
        raise ValueError("prior_var must be > 0")
    diag = torch.diagonal(chol, dim1=-2, dim2=-1)
    if bool((diag <= 0).any()):
        raise ValueError("chol must have a positive diagonal")
    s = chol.shape[-1]
    inv_p = 1.0 / prior_var
    trace = (chol * chol * inv_p.unsqueeze(-1)).sum((-2, -1))
    maha = (mean * mean * inv_p).sum(-1)
    logdet_p = torch.log(prior_var).sum(-1)
    logdet_q = 2.0 * torch.log(diag).sum(-1)
    return 0.5 * (trace + maha - s + logdet_p - logdet_q).sum()
