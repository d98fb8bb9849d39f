"""advisedRFLVM: linear-GPLVM closed form, ELBO gradients, the estimator API, collapse, imputation, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone

from icml24.gp import SpectralMixtureKernel
from icml24.gp.advised_rflvm import AdvisedRFLVM, linear_gplvm_closed_form, linear_gplvm_loglik, rflvm_elbo
from icml24.gp.advised_rflvm.reproduce import make_s_curve_gp

D64 = torch.float64


def _low_rank_data(n=40, d=8, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2))
    return z @ rng.normal(size=(2, d)) * np.array([3.0, 1.0] + [1.0] * (d - 2)) + 0.3 * rng.normal(size=(n, d))


@pytest.mark.parametrize("sigma2_frac", [0.05, 0.5])
def test_linear_closed_form_matches_numerical_optimum(sigma2_frac):
    y = _low_rank_data()
    _, _, lam = linear_gplvm_closed_form(y, 2)
    sigma2 = sigma2_frac * lam[0]
    x_cf, _, _ = linear_gplvm_closed_form(y, 2, sigma2)
    yt = torch.as_tensor(y, dtype=D64)
    x = torch.nn.Parameter(torch.randn(y.shape[0], 2, generator=torch.Generator().manual_seed(1), dtype=D64))
    opt = torch.optim.LBFGS([x], max_iter=300, tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = -linear_gplvm_loglik(x, yt, sigma2)
        loss.backward()
        return loss

    opt.step(closure)
    # Equal up to rotation: compare X Xᵀ and the objective.
    np.testing.assert_allclose(x.detach().numpy() @ x.detach().numpy().T, x_cf @ x_cf.T, atol=1e-4 * lam[0])
    ll_cf = float(linear_gplvm_loglik(torch.as_tensor(x_cf), yt, sigma2))
    assert float(linear_gplvm_loglik(x.detach(), yt, sigma2)) <= ll_cf + 1e-8


def test_linear_collapse_past_top_eigenvalue_and_learned_sigma():
    y = _low_rank_data()
    _, _, lam = linear_gplvm_closed_form(y, 2)
    for frac in (1.0, 1.5, 10.0):
        assert np.all(linear_gplvm_closed_form(y, 2, frac * lam[0])[0] == 0.0)
    x_partial, _, _ = linear_gplvm_closed_form(y, 2, 0.5 * (lam[0] + lam[1]))  # only direction 1 survives
    assert np.linalg.norm(x_partial[:, 0]) > 0 and np.all(x_partial[:, 1] == 0)
    x_hat, s_hat, _ = linear_gplvm_closed_form(y, 2)
    assert s_hat == pytest.approx(lam[2:].mean())
    assert s_hat <= lam[1] and np.linalg.matrix_rank(x_hat) == 2
    # The learned σ² maximises the profile likelihood: nudging it either way lowers the objective.
    yt = torch.as_tensor(y, dtype=D64)

    def profile(s2):
        return float(linear_gplvm_loglik(torch.as_tensor(linear_gplvm_closed_form(y, 2, s2)[0]), yt, s2))

    assert profile(s_hat) > profile(1.1 * s_hat) and profile(s_hat) > profile(0.9 * s_hat)


def test_elbo_gradients_reach_every_parameter():
    g = torch.Generator().manual_seed(2)
    y = torch.randn(15, 4, generator=g, dtype=D64)
    kern = SpectralMixtureKernel(n_components=2, input_dim=2, means=torch.rand(2, 2, dtype=D64))
    mu = torch.nn.Parameter(torch.randn(15, 2, dtype=D64))
    raw_s = torch.nn.Parameter(torch.zeros(15, 2, dtype=D64))
    raw_noise = torch.nn.Parameter(torch.tensor(0.0, dtype=D64))
    for dense, mask in ((False, None), (True, None), (False, torch.rand(15, 4, generator=g) > 0.3)):
        for p in (mu, raw_s, raw_noise, *kern.parameters()):
            p.grad = None
        elbo = rflvm_elbo(y, mu, torch.nn.functional.softplus(raw_s), kern, torch.nn.functional.softplus(raw_noise),
                          eps_x=torch.randn(15, 2, generator=g, dtype=D64),
                          eps_omega=torch.randn(2, 5, 2, generator=g, dtype=D64), mask=mask, dense=dense)  # fmt: skip
        elbo.backward()
        for name, p in [("mu", mu), ("s", raw_s), ("noise", raw_noise), *kern.named_parameters()]:
            assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_dense_and_woodbury_elbo_agree():
    g = torch.Generator().manual_seed(3)
    y = torch.randn(10, 3, generator=g, dtype=D64)
    kern = SpectralMixtureKernel(n_components=2, input_dim=2)
    args = (y, torch.randn(10, 2, dtype=D64), torch.full((10, 2), 0.3, dtype=D64), kern, torch.tensor(0.2, dtype=D64))
    kw = {"eps_x": torch.randn(10, 2, generator=g, dtype=D64), "eps_omega": torch.randn(2, 4, 2, generator=g, dtype=D64)}
    dense, wood = rflvm_elbo(*args, dense=True, **kw).detach(), rflvm_elbo(*args, **kw).detach()
    assert float(dense) == pytest.approx(float(wood), abs=1e-8)


def test_fit_shapes_and_determinism():
    y = _low_rank_data(30, 6)
    a = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0).fit(y)
    b = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0).fit(y)
    assert a.embedding_.shape == (30, 2) and a.latent_std_.shape == (30, 2)
    np.testing.assert_array_equal(a.embedding_, b.embedding_)
    np.testing.assert_array_equal(a.fit_transform(y), a.transform(y))
    assert a.noise_variance_ > 0 and np.isfinite(a.loss_curve_).all()
    assert a.reconstruct().shape == y.shape
    new = a.transform(y[:4] + 0.01, n_steps=20)
    assert new.shape == (4, 2) and np.isfinite(new).all()
    assert clone(a).get_params()["n_iter"] == 30
    c = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=1).fit(y)
    assert not np.array_equal(a.embedding_, c.embedding_)


def test_training_increases_elbo():
    y, _, _ = make_s_curve_gp(60, 10, np.random.default_rng(0))
    m = AdvisedRFLVM(2, n_iter=100, n_frequencies=6, random_state=0).fit(y)
    assert m.loss_curve_[-20:].mean() < m.loss_curve_[:20].mean()


def test_fixed_large_noise_collapses_and_learned_does_not():
    y, _, _ = make_s_curve_gp(50, 10, np.random.default_rng(1))
    kw = {"kernel": "rbf", "n_iter": 150, "n_frequencies": 6, "random_state": 0, "learning_rate": 0.05}
    fixed = AdvisedRFLVM(2, noise_variance=10.0, learn_noise=False, **kw).fit(y)
    learned = AdvisedRFLVM(2, **kw).fit(y)
    spread_fixed = np.trace(np.cov(fixed.embedding_.T))
    spread_learned = np.trace(np.cov(learned.embedding_.T))
    assert spread_fixed < 0.2 * spread_learned
    assert learned.noise_variance_ < fixed.noise_variance_


def test_impute_fills_only_missing_and_beats_mean():
    y, _, _ = make_s_curve_gp(50, 10, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    missing = rng.random(y.shape) < 0.3
    y_obs = np.where(missing, np.nan, y)
    m = AdvisedRFLVM(2, n_iter=150, n_frequencies=6, random_state=0, scaling="none", learning_rate=0.05).fit(y_obs)
    filled = m.impute()
    assert np.isfinite(filled).all()
    np.testing.assert_array_equal(filled[~missing], y[~missing])
    mse = ((filled - y)[missing] ** 2).mean()
    mse_mean = ((np.nanmean(y_obs, 0)[None, :].repeat(len(y), 0) - y)[missing] ** 2).mean()
    assert mse < mse_mean
    with pytest.raises(ValueError, match="fitted on"):
        m.impute(y)


@pytest.mark.parametrize(
    "data, kwargs, match",
    [
        (np.ones(5), {}, "2-D"),
        (np.array([[1.0, np.inf], [0.0, 1.0], [2.0, 3.0]]), {}, "inf"),
        (np.array([[np.nan, np.nan], [0.0, 1.0], [2.0, 3.0]]), {}, "no observed"),
        (np.ones((5, 2)) + np.arange(10).reshape(5, 2), {"n_components": 3}, "data dimension"),
        (np.arange(10.0).reshape(5, 2), {"n_components": 1, "noise_variance": -1.0}, "noise_variance"),
        (np.arange(10.0).reshape(5, 2), {"n_components": 1, "kernel": "matern"}, "kernel"),
        (np.arange(10.0).reshape(5, 2), {"n_components": 1, "n_iter": 0}, "n_iter"),
        (np.arange(10.0).reshape(5, 2), {"n_components": 1, "kl_weight": -1.0}, "kl_weight"),
        (np.ones((5, 2)), {"n_components": 1}, "constant"),
    ],
)
def test_bad_input(data, kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdvisedRFLVM(**{"n_iter": 2, **kwargs}).fit(data)


def test_bad_input_type_and_unfitted():
    with pytest.raises(TypeError, match="numeric"):
        AdvisedRFLVM(n_iter=2).fit([["a", "b"], ["c", "d"]])
    with pytest.raises(Exception, match="not fitted"):
        AdvisedRFLVM().transform(np.ones((3, 3)))
    with pytest.raises(ValueError, match="n_components"):
        linear_gplvm_closed_form(np.ones((3, 2)), 3)
