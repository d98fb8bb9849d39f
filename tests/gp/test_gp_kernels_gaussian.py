"""Tests of the shared GP module: kernels vs GPyTorch and closed forms, RFF convergence, Woodbury likelihood,
KL divergences against torch.distributions, and loud failures on bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.gp import (
    NotPSDError,
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


def _x(n: int, q: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, q, generator=torch.Generator().manual_seed(seed), dtype=D64)


def test_rbf_closed_form_by_hand():
    x1 = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=D64)
    x2 = torch.tensor([[1.0, 0.0]], dtype=D64)
    k = rbf_kernel(x1, x2, lengthscale=2.0, variance=3.0)
    expected = torch.tensor([[3 * math.exp(-1 / 8)], [3 * math.exp(-4 / 8)]], dtype=D64)
    torch.testing.assert_close(k, expected, rtol=1e-12, atol=1e-12)


def test_rbf_matches_gpytorch():
    gpytorch = pytest.importorskip("gpytorch")
    x1, x2 = _x(7, 3, 1), _x(5, 3, 2)
    ref = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel()).double()
    ref.base_kernel.lengthscale = torch.tensor(0.7, dtype=D64)
    ref.outputscale = torch.tensor(1.9, dtype=D64)
    with torch.no_grad():
        expected = ref(x1, x2).to_dense()
    ours = rbf_kernel(x1, x2, lengthscale=0.7, variance=1.9)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


def _gpytorch_sm(gpytorch, w, mu, v, x1, x2):
    q = x1.shape[1]
    ref = gpytorch.kernels.SpectralMixtureKernel(num_mixtures=len(w), ard_num_dims=q).double()
    ref.mixture_weights = w
    ref.mixture_means = mu.unsqueeze(1)
    ref.mixture_scales = v.sqrt().unsqueeze(1)
    with torch.no_grad():
        return ref(x1, x2).to_dense()


def test_sm_matches_gpytorch_1d():
    gpytorch = pytest.importorskip("gpytorch")
    g = torch.Generator().manual_seed(3)
    w = torch.rand(3, generator=g, dtype=D64) + 0.1
    mu = torch.rand(3, 1, generator=g, dtype=D64) * 0.8
    v = torch.rand(3, 1, generator=g, dtype=D64) * 0.2 + 0.01
    x1, x2 = _x(6, 1, 4), _x(8, 1, 5)
    expected = _gpytorch_sm(gpytorch, w, mu, v, x1, x2)
    torch.testing.assert_close(sm_kernel(x1, x2, weights=w, means=mu, variances=v), expected, rtol=1e-10, atol=1e-12)


def test_sm_matches_gpytorch_multidim_per_component():
    # GPyTorch takes a product over input dimensions of 1-D mixtures; one zero-mean component of it with weight
    # w^(1/q) is one component of the (Wilson-Adams) multi-dimensional SM kernel.
    gpytorch = pytest.importorskip("gpytorch")
    q, m = 3, 2
    g = torch.Generator().manual_seed(3)
    w = torch.rand(m, generator=g, dtype=D64) + 0.1
    v = torch.rand(m, q, generator=g, dtype=D64) * 0.2 + 0.01
    mu = torch.zeros(m, q, dtype=D64)
    x1, x2 = _x(6, q, 4), _x(8, q, 5)
    expected = sum(_gpytorch_sm(gpytorch, w[j : j + 1] ** (1 / q), mu[j : j + 1], v[j : j + 1], x1, x2) for j in range(m))
    torch.testing.assert_close(sm_kernel(x1, x2, weights=w, means=mu, variances=v), expected, rtol=1e-10, atol=1e-12)


def test_sm_one_zero_mean_component_is_rbf():
    x1, x2 = _x(9, 2, 6), _x(4, 2, 7)
    for ls in (0.3, 1.0, 2.5):
        sm = sm_kernel(x1, x2, weights=torch.tensor([1.7], dtype=D64), means=torch.zeros(1, 2, dtype=D64),
                       variances=torch.full((1, 2), rbf_to_sm_variance(ls), dtype=D64))  # fmt: skip
        torch.testing.assert_close(sm, rbf_kernel(x1, x2, lengthscale=ls, variance=1.7), rtol=1e-12, atol=1e-12)


def test_sm_gram_is_psd():
    kern = SpectralMixtureKernel(n_components=3, input_dim=2, means=torch.rand(3, 2, dtype=D64))
    x = _x(60, 2, 8)
    with torch.no_grad():
        k = kern(x, x)
    assert float(torch.linalg.eigvalsh(k).min()) >= -1e-8
    psd_cholesky(k, jitter=1e-8)  # must not raise


def test_rff_gram_converges_to_sm_kernel():
    w = torch.tensor([0.6, 0.4], dtype=D64)
    mu = torch.tensor([[0.0, 0.0], [0.3, 0.1]], dtype=D64)
    v = torch.tensor([[0.05, 0.02], [0.03, 0.04]], dtype=D64)
    x = _x(30, 2, 9)
    exact = sm_kernel(x, x, weights=w, means=mu, variances=v)
    g = torch.Generator().manual_seed(10)
    errs = []
    for n_freq in (50, 200, 800):
        e = [
            (lambda p: (p @ p.T - exact).abs().mean())(
                sm_random_features(x, weights=w, means=mu, variances=v, eps=torch.randn(2, n_freq, 2, generator=g, dtype=D64))
            )
            for _ in range(10)
        ]
        errs.append(float(torch.stack(e).mean()))
    assert errs[0] > errs[1] > errs[2]
    # Monte Carlo error ~ 1/sqrt(L): 16x the features -> ~4x smaller; allow a factor of 2 of slack.
    assert errs[2] < errs[0] / 2.0
    assert errs[2] * math.sqrt(800) == pytest.approx(errs[0] * math.sqrt(50), rel=0.5)


def test_rff_is_unbiased():
    kern = RBFKernel(lengthscale=0.8, variance=1.3)
    x = _x(10, 2, 11)
    g = torch.Generator().manual_seed(12)
    with torch.no_grad():
        mean_gram = sum((lambda p: p @ p.T)(kern.features(x, torch.randn(1, 200, 2, generator=g, dtype=D64)))
                        for _ in range(200)) / 200  # fmt: skip
        exact = kern(x, x)
    # 40,000 frequencies in total: the MC standard error of each entry is below ~1.3 / 200.
    assert float((mean_gram - exact).abs().max()) < 0.05


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), m=st.integers(1, 40), d=st.integers(1, 4), noise=st.floats(1e-3, 10.0),
       seed=st.integers(0, 10_000))  # fmt: skip
def test_woodbury_equals_dense(n, m, d, noise, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(n, d, generator=g, dtype=D64)
    phi = torch.randn(n, m, generator=g, dtype=D64) / math.sqrt(m)
    dense = gaussian_loglik_dense(y, phi @ phi.T + noise * torch.eye(n, dtype=D64), jitter=0.0)
    wood = gaussian_loglik_lowrank(y, phi, noise)
    assert abs(float(wood - dense)) < 1e-8 * max(1.0, abs(float(dense)))


def test_masked_woodbury_equals_per_column_dense():
    g = torch.Generator().manual_seed(13)
    y = torch.randn(25, 4, generator=g, dtype=D64)
    phi = torch.randn(25, 8, generator=g, dtype=D64)
    mask = torch.rand(25, 4, generator=g) > 0.4
    total = sum(
        gaussian_loglik_dense(y[mask[:, j], j : j + 1], (lambda p: p @ p.T)(phi[mask[:, j]]) + 0.3 * torch.eye(
            int(mask[:, j].sum()), dtype=D64), jitter=0.0)
        for j in range(4)
    )  # fmt: skip
    assert float(gaussian_loglik_lowrank(y, phi, 0.3, mask=mask)) == pytest.approx(float(total), abs=1e-8)
    # Entries outside the mask are ignored.
    y2 = torch.where(mask, y, torch.full_like(y, 123.0))
    assert float(gaussian_loglik_lowrank(y2, phi, 0.3, mask=mask)) == pytest.approx(float(total), abs=1e-8)


def test_posterior_weights_give_kernel_posterior_mean():
    g = torch.Generator().manual_seed(14)
    y = torch.randn(12, 3, generator=g, dtype=D64)
    phi = torch.randn(12, 5, generator=g, dtype=D64)
    k = phi @ phi.T
    expected = k @ torch.linalg.solve(k + 0.2 * torch.eye(12, dtype=D64), y)
    torch.testing.assert_close(phi @ lowrank_posterior_weights(y, phi, 0.2), expected, rtol=1e-9, atol=1e-9)


def test_kl_diag_against_torch_distributions():
    g = torch.Generator().manual_seed(15)
    mu = torch.randn(6, 2, generator=g, dtype=D64)
    s = torch.rand(6, 2, generator=g, dtype=D64) + 0.1
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(mu, s), torch.distributions.Normal(0.0, 1.0))
    assert float(kl_diag_normal_std(mu, s)) == pytest.approx(float(ref.sum()), rel=1e-12)
    assert float(kl_diag_normal_std(torch.zeros(3, 2, dtype=D64), torch.ones(3, 2, dtype=D64))) == 0.0
    assert float(kl_diag_normal_std(mu, s)) > 0


def test_kl_chol_against_torch_distributions():
    g = torch.Generator().manual_seed(16)
    s = 4
    mean = torch.randn(3, s, generator=g, dtype=D64)
    chol = torch.tril(torch.randn(3, s, s, generator=g, dtype=D64), -1) + torch.diag_embed(
        torch.rand(3, s, generator=g, dtype=D64) + 0.2)  # fmt: skip
    prior = torch.rand(s, generator=g, dtype=D64) + 0.3
    q = torch.distributions.MultivariateNormal(mean, scale_tril=chol)
    p = torch.distributions.MultivariateNormal(torch.zeros(s, dtype=D64), covariance_matrix=torch.diag(prior))
    ref = torch.distributions.kl_divergence(q, p).sum()
    assert float(kl_normal_chol_diag_prior(mean, chol, prior)) == pytest.approx(float(ref), rel=1e-10)
    at_prior = kl_normal_chol_diag_prior(torch.zeros(s, dtype=D64), torch.diag(prior.sqrt()), prior)
    assert abs(float(at_prior)) < 1e-12


def test_psd_cholesky_fails_loudly():
    bad = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=D64)  # eigenvalues 3 and -1
    with pytest.raises(NotPSDError, match="not positive definite.*jitter"):
        psd_cholesky(bad)
    with pytest.raises(ValueError, match="finite"):
        psd_cholesky(torch.tensor([[1.0, float("nan")], [0.0, 1.0]], dtype=D64))
    with pytest.raises(ValueError, match="square"):
        psd_cholesky(torch.ones(2, 3, dtype=D64))
    with pytest.raises(ValueError, match="jitter"):
        psd_cholesky(torch.eye(2, dtype=D64), jitter=-1.0)
    # A singular PSD matrix passes with explicit jitter.
    psd_cholesky(torch.ones(3, 3, dtype=D64), jitter=1e-6)


def test_dense_loglik_non_psd_raises_not_nan():
    y = torch.ones(2, 1, dtype=D64)
    with pytest.raises(NotPSDError):
        gaussian_loglik_dense(y, torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=D64))


def test_kernel_bad_input():
    x = _x(3, 2)
    with pytest.raises(ValueError, match="lengthscale"):
        rbf_kernel(x, x, lengthscale=-1.0)
    with pytest.raises(ValueError, match="same input dimension"):
        rbf_kernel(x, _x(3, 3), lengthscale=1.0)
    with pytest.raises(ValueError, match="2 dimensions"):
        rbf_kernel(x[0], x, lengthscale=1.0)
    w, mu = torch.ones(1, dtype=D64), torch.zeros(1, 2, dtype=D64)
    with pytest.raises(ValueError, match="non-negative"):
        sm_kernel(x, x, weights=w, means=mu, variances=-torch.ones(1, 2, dtype=D64))
    with pytest.raises(ValueError, match="shape"):
        sm_kernel(x, x, weights=w, means=torch.zeros(2, 2, dtype=D64), variances=torch.ones(1, 2, dtype=D64))
    with pytest.raises(ValueError, match="eps"):
        sm_random_features(x, weights=w, means=mu, variances=torch.ones(1, 2, dtype=D64), eps=torch.zeros(1, 5, 3))
    with pytest.raises(ValueError, match="noise"):
        gaussian_loglik_lowrank(torch.ones(3, 1, dtype=D64), torch.ones(3, 2, dtype=D64), -0.1)
    with pytest.raises(ValueError, match="mask"):
        gaussian_loglik_lowrank(torch.ones(3, 1, dtype=D64), torch.ones(3, 2, dtype=D64), 0.1,
                                mask=torch.ones(2, 1, dtype=torch.bool))  # fmt: skip
    with pytest.raises(ValueError, match="non-negative"):
        SpectralMixtureKernel(n_components=1, input_dim=1, variances=torch.tensor([[-1.0]]))
    with pytest.raises(ValueError, match="> 0"):
        RBFKernel(lengthscale=0.0)


def test_kernel_modules_are_float64_and_differentiable():
    kern = SpectralMixtureKernel(n_components=2, input_dim=2)
    assert all(p.dtype == torch.float64 for p in kern.parameters())
    x = _x(5, 2)
    out = kern.features(x, torch.randn(2, 7, 2, dtype=D64)).sum() + kern(x, x).sum()
    out.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in kern.parameters())
    np.testing.assert_equal(kern.weights.detach().numpy() > 0, True)


def test_rff_expected_loglik_lower_bounds_exact_gp_loglik():
    # log N(y | 0, C) is concave in C, and E_ω[Φ Φᵀ] = K, so by Jensen the RFF model's expected log-likelihood
    # (the advisedRFLVM ELBO at fixed X) lies below the exact GP log marginal likelihood; the gap closes as L grows.
    g = torch.Generator().manual_seed(17)
    x = _x(20, 2, 18)
    kern = SpectralMixtureKernel(n_components=2, input_dim=2, means=torch.tensor([[0.0, 0.0], [0.2, 0.1]], dtype=D64))
    with torch.no_grad():
        k = kern(x, x)
        y = torch.linalg.cholesky(k + 0.1 * torch.eye(20, dtype=D64)) @ torch.randn(20, 3, generator=g, dtype=D64)
        exact = float(gaussian_loglik_dense(y, k + 0.1 * torch.eye(20, dtype=D64)))
        gaps = []
        for n_freq in (5, 100):
            vals = torch.stack([gaussian_loglik_lowrank(y, kern.features(x, torch.randn(2, n_freq, 2, generator=g,
                                dtype=D64)), 0.1) for _ in range(300)])  # fmt: skip
            mean, se = float(vals.mean()), float(vals.std() / 300**0.5)
            assert mean < exact + 3 * se
            gaps.append(exact - mean)
    assert gaps[1] < gaps[0]
