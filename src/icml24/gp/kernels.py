"""Stationary kernels and their differentiable random Fourier features.

* RBF: ``k(x, x') = s² exp(-||x - x'||² / (2 l²))``.
* Spectral mixture (Wilson & Adams, ICML 2013, eq. 12, the form used by advisedRFLVM, Li et al., ICML 2024,
  arXiv:2404.01697, Sec. 4):
  ``k(x, x') = Σ_j w_j exp(-2π² Σ_q v_jq τ_q²) cos(2π μ_jᵀ τ)`` with ``τ = x - x'``. Its spectral density is
  the symmetrised Gaussian mixture ``Σ_j w_j N(μ_j, diag v_j)``.
* Random Fourier features (Rahimi & Recht 2007) of an SM kernel: for each component draw ``L`` frequencies
  ``ω = μ_j + √v_j ⊙ ε`` with ``ε ~ N(0, I)`` (reparameterised, so gradients reach ``μ`` and ``v``) and set
  ``φ_j(x) = √(w_j / L) [cos(2π ωᵀx), sin(2π ωᵀx)]``; then ``E[Φ Φᵀ] = K_SM``. The RBF kernel is the SM kernel
  with one component, ``μ = 0`` and ``v = 1 / (4π² l²)``.

GPyTorch's ``SpectralMixtureKernel`` is a product over input dimensions of 1-D mixtures; the two agree in one
input dimension, and a zero-mean component of ours is a one-component GPyTorch kernel (tests check both).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from icml24.gp.linalg import DEFAULT_DTYPE, check_int, check_scalar, check_tensor

__all__ = [
    "RBFKernel",
    "SpectralMixtureKernel",
    "rbf_kernel",
    "rbf_to_sm_variance",
    "sm_kernel",
    "sm_random_features",
]


def _sqdist(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    # Expanded form is O(N M Q) memory-free but loses precision at tiny distances; clamp the round-off.
    d = (x1 * x1).sum(-1, keepdim=True) - 2.0 * x1 @ x2.transpose(-1, -2) + (x2 * x2).sum(-1).unsqueeze(-2)
    return d.clamp_min(0.0)


def _check_pair(x1: torch.Tensor, x2: torch.Tensor) -> None:
    check_tensor("x1", x1, ndim=2)
    check_tensor("x2", x2, ndim=2)
    if x1.shape[1] != x2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same input dimension, got {x1.shape[1]} and {x2.shape[1]}")


def rbf_kernel(
    x1: torch.Tensor, x2: torch.Tensor, *, lengthscale: float | torch.Tensor, variance: float | torch.Tensor = 1.0
) -> torch.Tensor:
    """RBF (squared exponential) Gram matrix ``s² exp(-||x - x'||² / (2 l²))``, shape ``(n1, n2)``."""
    _check_pair(x1, x2)
    check_scalar("lengthscale", lengthscale, low=0.0)
    check_scalar("variance", variance, low=0.0, strict=False)
    ls = torch.as_tensor(lengthscale, dtype=x1.dtype)
    var = torch.as_tensor(variance, dtype=x1.dtype)
    return var * torch.exp(-0.5 * _sqdist(x1 / ls, x2 / ls))


def rbf_to_sm_variance(lengthscale: float | torch.Tensor) -> float | torch.Tensor:
    """The SM component variance ``v = 1 / (4π² l²)`` that turns a zero-mean SM component into an RBF."""
    check_scalar("lengthscale", lengthscale, low=0.0)
    return 1.0 / (4.0 * math.pi**2 * lengthscale**2)


def _check_sm(weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor, q: int) -> None:
    for name, t in (("weights", weights), ("means", means), ("variances", variances)):
        check_tensor(name, t)
    if weights.dim() != 1:
        raise ValueError(f"weights must be 1-D (m,), got shape {tuple(weights.shape)}")
    m = weights.shape[0]
    if means.shape != (m, q) or variances.shape != (m, q):
        raise ValueError(
            f"means and variances must have shape (m, q) = ({m}, {q}) with m = len(weights), got {tuple(means.shape)} and "
            f"{tuple(variances.shape)}"
        )
    if bool((weights < 0).any()):
        raise ValueError("SM weights must be non-negative")
    if bool((variances < 0).any()):
        raise ValueError("SM variances must be non-negative")


def sm_kernel(
    x1: torch.Tensor, x2: torch.Tensor, *, weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor
) -> torch.Tensor:
    """Spectral-mixture Gram matrix (Wilson & Adams 2013, eq. 12), shape ``(n1, n2)``.

    Args:
        weights: ``(m,)`` mixture weights ``w_j >= 0``.
        means: ``(m, q)`` spectral means ``μ_j``.
        variances: ``(m, q)`` spectral variances ``v_j >= 0``.
    """
    _check_pair(x1, x2)
    _check_sm(weights, means, variances, x1.shape[1])
    # One (n1, n2, q) difference tensor serves every component: the envelopes and the phases are then two
    # small matmuls over q, which is much faster than m batched squared-distance computations.
    diff = x1.unsqueeze(1) - x2.unsqueeze(0)
    env = torch.exp((diff * diff) @ (-2.0 * math.pi**2 * variances.T))  # (n1, n2, m)
    cos = torch.cos(diff @ (2.0 * math.pi * means.T))
    return (env * cos) @ weights


def sm_random_features(
    x: torch.Tensor,
    *,
    weights: torch.Tensor,
    means: torch.Tensor,
    variances: torch.Tensor,
    eps: torch.Tensor,
) -> torch.Tensor:
    """Random Fourier features of the SM kernel with reparameterised frequencies (advisedRFLVM, Sec. 4).

    Args:
        x: ``(n, q)`` inputs.
        eps: ``(m, L, q)`` standard-normal draws; the frequencies are ``μ_j + √v_j ⊙ eps[j]``.

    Returns:
        ``(n, 2 m L)`` features ``Φ`` with ``E_eps[Φ Φᵀ] = K_SM(x, x)``.
    """
    check_tensor("x", x, ndim=2)
    _check_sm(weights, means, variances, x.shape[1])
    check_tensor("eps", eps)
    m = weights.shape[0]
    if eps.dim() != 3 or eps.shape[0] != m or eps.shape[2] != x.shape[1]:
        raise ValueError(f"eps must have shape (m, L, q) = ({m}, L, {x.shape[1]}), got {tuple(eps.shape)}")
    n_freq = eps.shape[1]
    omega = means.unsqueeze(1) + variances.sqrt().unsqueeze(1) * eps  # (m, L, q)
    proj = 2.0 * math.pi * torch.einsum("nq,mlq->nml", x, omega)
    amp = (weights / n_freq).sqrt().view(1, m, 1)
    feats = torch.cat([amp * torch.cos(proj), amp * torch.sin(proj)], dim=-1)  # (n, m, 2L)
    return feats.reshape(x.shape[0], -1)


def _check_dtype(dtype: object) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")


def _inv_softplus(value: torch.Tensor) -> torch.Tensor:
    return value + torch.log(-torch.expm1(-value))


class RBFKernel(nn.Module):
    """RBF kernel with softplus-positive lengthscale and variance (learnable ``nn.Parameter`` s).

    ``forward(x1, x2)`` gives the exact Gram matrix, ``features(x, eps)`` its random Fourier features with
    ``eps`` of shape ``(1, L, q)``.
    """

    def __init__(self, *, lengthscale: float = 1.0, variance: float = 1.0, dtype: torch.dtype = DEFAULT_DTYPE):
        super().__init__()
        check_scalar("lengthscale", lengthscale, low=0.0, allow_tensor=False)
        check_scalar("variance", variance, low=0.0, allow_tensor=False)
        _check_dtype(dtype)
        self.raw_lengthscale = nn.Parameter(_inv_softplus(torch.tensor(float(lengthscale), dtype=dtype)))
        self.raw_variance = nn.Parameter(_inv_softplus(torch.tensor(float(variance), dtype=dtype)))

    @property
    def lengthscale(self) -> torch.Tensor:
        return F.softplus(self.raw_lengthscale)

    @property
    def variance(self) -> torch.Tensor:
        return F.softplus(self.raw_variance)

    n_components = 1

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return rbf_kernel(x1, x2, lengthscale=self.lengthscale, variance=self.variance)

    def spectral(self, q: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The (weights, means, variances) of the equivalent one-component zero-mean SM kernel."""
        v = rbf_to_sm_variance(self.lengthscale)
        dtype = self.raw_lengthscale.dtype
        return self.variance.reshape(1), torch.zeros(1, q, dtype=dtype), v * torch.ones(1, q, dtype=dtype)

    def features(self, x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, ndim=2)
        w, mu, v = self.spectral(x.shape[1])
        return sm_random_features(x, weights=w, means=mu, variances=v, eps=eps)


class SpectralMixtureKernel(nn.Module):
    """Spectral-mixture kernel with ``m`` components over ``q`` input dimensions.

    Weights and variances are softplus-positive; means are unconstrained.
    """

    def __init__(
        self,
        *,
        n_components: int,
        input_dim: int,
        weights: torch.Tensor | None = None,
        means: torch.Tensor | None = None,
        variances: torch.Tensor | None = None,
        dtype: torch.dtype = DEFAULT_DTYPE,
    ):
        super().__init__()
        m, q = check_int("n_components", n_components), check_int("input_dim", input_dim)
        _check_dtype(dtype)
        w = torch.full((m,), 1.0 / m, dtype=dtype) if weights is None else torch.as_tensor(weights, dtype=dtype)
        mu = torch.zeros(m, q, dtype=dtype) if means is None else torch.as_tensor(means, dtype=dtype)
        v = (
            torch.full((m, q), rbf_to_sm_variance(1.0), dtype=dtype)
            if variances is None
            else torch.as_tensor(variances, dtype=dtype)
        )
        _check_sm(w, mu, v, q)
        if bool((w <= 0).any()):
            raise ValueError("initial SM weights must be > 0")
        if bool((v <= 0).any()):
            raise ValueError("initial SM variances must be > 0")
        self.n_components = m
        self.raw_weights = nn.Parameter(_inv_softplus(w))
        self.means = nn.Parameter(mu.clone())
        self.raw_variances = nn.Parameter(_inv_softplus(v))

    @property
    def weights(self) -> torch.Tensor:
        return F.softplus(self.raw_weights)

    @property
    def variances(self) -> torch.Tensor:
        return F.softplus(self.raw_variances)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return sm_kernel(x1, x2, weights=self.weights, means=self.means, variances=self.variances)

    def spectral(self, q: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.weights, self.means, self.variances

    def features(self, x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        return sm_random_features(x, weights=self.weights, means=self.means, variances=self.variances, eps=eps)
