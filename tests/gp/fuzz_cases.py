"""Fuzz cases for the shared GP machinery of icml24.gp (see tests/test_fuzz_api.py)."""

import torch

from icml24.gp import (
    RBFKernel,
    SpectralMixtureKernel,
    gaussian_loglik_dense,
    gaussian_loglik_lowrank,
    kl_diag_normal_std,
    kl_normal_chol_diag_prior,
    lowrank_posterior_weights,
    psd_cholesky,
    rbf_kernel,
    rbf_to_sm_variance,
    sm_kernel,
    sm_random_features,
)

D64 = torch.float64
G = torch.Generator().manual_seed(0)
X1 = torch.randn(6, 2, generator=G, dtype=D64)
X2 = torch.randn(4, 2, generator=G, dtype=D64)
W = torch.tensor([0.6, 0.4], dtype=D64)
MU = torch.tensor([[0.0, 0.0], [0.3, 0.1]], dtype=D64)
V = torch.full((2, 2), 0.05, dtype=D64)
EPS = torch.randn(2, 5, 2, generator=G, dtype=D64)
Y = torch.randn(6, 3, generator=G, dtype=D64)
PHI = torch.randn(6, 4, generator=G, dtype=D64)
COV = PHI @ PHI.T + 0.5 * torch.eye(6, dtype=D64)
# contiguous: the harness plants NaN through reshape(-1), a copy for the column-major cholesky output
CHOL = torch.linalg.cholesky(torch.eye(3, dtype=D64) + 0.1).contiguous()
PRIOR = torch.tensor([1.0, 2.0, 0.5], dtype=D64)

BAD_X = [torch.ones(6, dtype=D64), torch.ones(6, 3, dtype=D64), "x", None, [[1.0, 2.0]]]
BAD_POS = [0.0, -1.0, "1", None, True]


def rbf_features(x, eps, lengthscale=1.0, variance=1.0):
    """RBFKernel(lengthscale, variance).features(x, eps)."""
    return RBFKernel(lengthscale=lengthscale, variance=variance).features(x, eps)


def sm_module_gram(x1, x2, n_components=2, input_dim=2, weights=W, means=MU, variances=V):
    """SpectralMixtureKernel(...)(x1, x2)."""
    return SpectralMixtureKernel(n_components=n_components, input_dim=input_dim, weights=weights, means=means,
                                 variances=variances)(x1, x2)  # fmt: skip


FUZZ_CASES = [
    dict(fn=rbf_kernel, args=(X1, X2), kwargs={"lengthscale": 1.0, "variance": 1.0},
         invalid={"x1": BAD_X, "x2": BAD_X, "lengthscale": BAD_POS, "variance": [-1.0, "1", None]}),
    dict(fn=rbf_to_sm_variance, args=(1.0,), invalid={"lengthscale": BAD_POS + [torch.tensor([1.0, -1.0])]}),
    dict(fn=sm_kernel, args=(X1, X2), kwargs={"weights": W, "means": MU, "variances": V},
         invalid={"x1": BAD_X, "x2": BAD_X, "weights": [-W, W[:1], W.reshape(2, 1), "w", None],
                  "means": [MU[:1], "m", None], "variances": [-V, V[:, :1], None]}),
    dict(fn=sm_random_features, args=(X1,), kwargs={"weights": W, "means": MU, "variances": V, "eps": EPS},
         invalid={"x": BAD_X[:1] + ["x", None], "weights": [-W, None], "means": [MU[:1], None],
                  "variances": [-V, None], "eps": [EPS[:1], EPS[..., :1], EPS[0], "e", None]}),
    dict(fn=RBFKernel, kwargs={"lengthscale": 1.0, "variance": 1.0},
         invalid={"lengthscale": BAD_POS, "variance": BAD_POS, "dtype": [torch.int64, "float64"]}),
    dict(fn=rbf_features, args=(X1, EPS[:1]), invalid={"x": [None, "x"], "eps": [EPS, None]}),
    dict(fn=SpectralMixtureKernel, kwargs={"n_components": 2, "input_dim": 2},
         invalid={"n_components": [0, -1, 1.5, "2", True], "input_dim": [0, 2.0, None],
                  "dtype": [torch.int64, "float64"]}),
    dict(fn=sm_module_gram, args=(X1, X2),
         invalid={"x1": BAD_X, "weights": [-W, torch.zeros(2, dtype=D64)], "means": [MU[:1]],
                  "variances": [-V, torch.zeros(2, 2, dtype=D64)]}),
    dict(fn=gaussian_loglik_dense, args=(Y, COV),
         invalid={"y": [Y[:3], Y[:, 0], "y", None], "cov": [COV[:3], -COV, "c", None], "jitter": [-1.0, "0", None]}),
    dict(fn=gaussian_loglik_lowrank, args=(Y, PHI, 0.3),
         invalid={"y": [Y[:3], Y[:, 0], "y", None], "phi": [PHI[:3], PHI[:, 0], None], "noise": BAD_POS,
                  "mask": [torch.ones(6, 2, dtype=torch.bool), "m"], "jitter": [-1.0, "0", None]}),
    dict(fn=lowrank_posterior_weights, args=(Y, PHI, 0.3),
         invalid={"y": [Y[:3], None], "phi": [PHI[:3], None], "noise": BAD_POS, "mask": [torch.ones(2, 2)]}),
    dict(fn=kl_diag_normal_std, args=(Y, Y.abs() + 0.1),
         invalid={"mean": [Y[:3], "m", None], "std": [-Y.abs(), Y[:3], torch.zeros(6, 3, dtype=D64), None]}),
    dict(fn=kl_normal_chol_diag_prior, args=(torch.zeros(3, dtype=D64), CHOL, PRIOR),
         invalid={"mean": [torch.zeros(2, dtype=D64), "m", None], "chol": [-CHOL, CHOL[:2], None],
                  "prior_var": [-PRIOR, torch.zeros(3, dtype=D64), None]}),
    dict(fn=psd_cholesky, args=(COV,),
         invalid={"matrix": [COV[:3], -COV, COV[0], "m", None], "jitter": [-1.0, "0", None], "name": [1, None]}),
]
