"""Gaussian processes: kernels, random features, variational GP algebra and the GP papers.

Shared machinery (float64 by default, explicit jitter, loud failure on non-PSD matrices):

* :mod:`icml24.gp.kernels`: RBF and spectral-mixture kernels and their differentiable random Fourier features.
* :mod:`icml24.gp.gaussian`: dense and Woodbury Gaussian log-likelihoods, Gaussian KL divergences.
* :mod:`icml24.gp.linalg`: jittered Cholesky (:class:`NotPSDError`) and input checks.

Papers: :mod:`icml24.gp.advised_rflvm` and :mod:`icml24.gp.kep_svgp`.
"""

from icml24.gp.gaussian import (
    gaussian_loglik_dense,
    gaussian_loglik_lowrank,
    kl_diag_normal_std,
    kl_normal_chol_diag_prior,
    lowrank_posterior_weights,
)
from icml24.gp.kernels import (
    RBFKernel,
    SpectralMixtureKernel,
    rbf_kernel,
    rbf_to_sm_variance,
    sm_kernel,
    sm_random_features,
)
from icml24.gp.linalg import DEFAULT_DTYPE, DEFAULT_JITTER, NotPSDError, psd_cholesky

__all__ = [
    "DEFAULT_DTYPE",
    "DEFAULT_JITTER",
    "NotPSDError",
    "RBFKernel",
    "SpectralMixtureKernel",
    "gaussian_loglik_dense",
    "gaussian_loglik_lowrank",
    "kl_diag_normal_std",
    "kl_normal_chol_diag_prior",
    "lowrank_posterior_weights",
    "psd_cholesky",
    "rbf_kernel",
    "rbf_to_sm_variance",
    "sm_kernel",
    "sm_random_features",
]
