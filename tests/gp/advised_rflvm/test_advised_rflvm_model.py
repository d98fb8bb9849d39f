"""advisedRFLVM: linear-GPLVM closed form, ELBO gradients, the estimator API, collapse, imputation, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone

from icml24.gp import SpectralMixtureKernel
from icml24.gp.advised_rflvm import (
    AdvisedRFLVM,
    linear_gplvm_closed_form,
    linear_gplvm_loglik,
    rflvm_elbo,
    rflvm_official_loss,
)
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
    new = a.set_params(transform_n_iter=20).transform(y[:4] + 0.01)
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
        (np.ones(5), {}, "2D"),
        (np.array([[1.0, np.inf], [0.0, 1.0], [2.0, 3.0]]), {}, "infinity"),
        (np.array([[np.nan, 1.0], [np.nan, 1.0], [np.nan, 3.0]]), {"n_components": 1}, "column with no observed"),
        (np.array([[np.nan, np.nan], [np.nan, np.nan], [2.0, 3.0]]), {}, "at least 2 rows"),
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
    with pytest.raises((TypeError, ValueError), match="X"):
        AdvisedRFLVM(n_iter=2).fit([["a", "b"], ["c", "d"]])
    with pytest.raises(Exception, match="not fitted"):
        AdvisedRFLVM().transform(np.ones((3, 3)))
    with pytest.raises(ValueError, match="n_components"):
        linear_gplvm_closed_form(np.ones((3, 2)), 3)


def _official_by_hand(y, x, phi, noise, mean, std):
    """The official ``compute_loss`` (kl_option=True) written out with numpy determinants and solves."""
    n, d = y.shape
    q, m = mean.shape[1], phi.shape[1]
    kl = 0.5 * (mean**2 + std**2 - 1 - np.log(std**2)).sum() / (n * q) / (n * 50)
    if n > m:
        a = phi.T @ phi + (noise + 1e-8) * np.eye(m)
        quad = (y * y).sum() - np.trace(y.T @ phi @ np.linalg.solve(a, phi.T @ y))
        # log Π diag chol(A) = ½ log|A|, entering once instead of D/2 times; (N - M)·√σ² instead of (D/2)(N-M) log σ².
        return quad / (2 * noise) + 0.5 * np.linalg.slogdet(a)[1] + (n - m) * np.sqrt(noise) + 0.5 * n * np.log(2 * np.pi) + kl
    c = phi @ phi.T + noise * np.eye(n)
    chol = np.linalg.cholesky(c)
    quad = (np.linalg.solve(chol, y) ** 2).sum()
    return (0.5 * n * d * np.log(2 * np.pi) + d * np.log(np.diag(chol).sum()) + 0.5 * quad) / (d * n) + kl


@pytest.mark.parametrize("n", [30, 6])  # N > M (Woodbury branch) and N <= M (dense branch), M = 2*2*3 = 12
def test_official_loss_matches_the_official_formula(n):
    g = torch.Generator().manual_seed(4)
    y = torch.randn(n, 5, generator=g, dtype=D64)
    kern = SpectralMixtureKernel(n_components=2, input_dim=2, means=torch.rand(2, 2, generator=g, dtype=D64))
    mean, std = torch.randn(n, 2, generator=g, dtype=D64), torch.rand(n, 2, generator=g, dtype=D64) + 0.1
    eps_x, eps_omega = torch.randn(n, 2, generator=g, dtype=D64), torch.randn(2, 3, 2, generator=g, dtype=D64)
    noise = torch.tensor(0.3, dtype=D64)
    got = float(rflvm_official_loss(y, mean, std, kern, noise, eps_x=eps_x, eps_omega=eps_omega).detach())
    with torch.no_grad():
        phi = kern.features(mean + std * eps_x, eps_omega).numpy()
    want = _official_by_hand(y.numpy(), None, phi, 0.3, mean.numpy(), std.numpy())
    assert got == pytest.approx(want, rel=1e-10)
    # It is not the negative ELBO (which multiplies log|A| by D and has (D/2)(N-M) log σ²).
    elbo = float(rflvm_elbo(y, mean, std, kern, noise, eps_x=eps_x, eps_omega=eps_omega))
    assert abs(got + elbo) > 1e-3 * abs(elbo)


def test_official_objective_fits_and_rejects_missing_entries():
    y = _low_rank_data(30, 6)
    m = AdvisedRFLVM(2, objective="official", n_iter=100, n_frequencies=5, random_state=0).fit(y)
    curve = m.loss_curve_  # one-sample estimates are noisy: compare medians of the first and last 20 steps
    assert np.isfinite(m.embedding_).all() and np.median(curve[-20:]) < np.median(curve[:20])
    y_missing = y.copy()
    y_missing[0, 0] = np.nan
    with pytest.raises(ValueError, match="official"):
        AdvisedRFLVM(2, objective="official", n_iter=2).fit(y_missing)
    with pytest.raises(ValueError, match="objective"):
        AdvisedRFLVM(2, objective="paper", n_iter=2).fit(y)


def test_transform_is_row_order_and_subset_independent():
    y = _low_rank_data(30, 6)
    m = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, transform_n_iter=30, random_state=0).fit(y)
    perm = np.random.default_rng(0).permutation(30)
    np.testing.assert_array_equal(m.transform(y[perm]), m.embedding_[perm])
    np.testing.assert_array_equal(m.transform(y[perm[:7]]), m.embedding_[perm[:7]])
    # New rows, alone or inside a shuffled batch with training rows, get the same latent.
    new = y[:5] + 0.05
    batch = np.vstack([y[10:20], new])[np.r_[14, 3, 10, 0, 12, 5, 11, 7, 13, 1, 2, 4, 6, 8, 9]]
    alone = m.transform(new)
    mixed = m.transform(batch)
    pos = {14: 4, 10: 0, 12: 2, 11: 1, 13: 3}  # batch position of each new row -> its index in `new`
    for i, j in pos.items():
        np.testing.assert_allclose(mixed[list(np.r_[14, 3, 10, 0, 12, 5, 11, 7, 13, 1, 2, 4, 6, 8, 9]).index(i)],
                                   alone[j], atol=1e-10)  # fmt: skip
    # Duplicate training rows map to the mean of their latents.
    y_dup = np.vstack([y, y[:1]])
    md = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0).fit(y_dup)
    np.testing.assert_allclose(md.transform(y_dup[:1])[0], md.embedding_[[0, 30]].mean(0))


def test_row_with_no_observed_entry_gets_the_prior_latent_with_a_warning():
    """Issue 35: an all-NaN row is not refused; the data say nothing about it, so it keeps the prior N(0, I)."""
    y = _low_rank_data(30, 6)
    y_missing = y.copy()
    y_missing[[4, 17]] = np.nan
    with pytest.warns(UserWarning, match="2 row.*no observed.*prior") as record:
        z = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0).fit_transform(y_missing)
    assert len(record) == 1  # fit_transform warns once, not once in fit and once in transform
    with pytest.warns(UserWarning, match="no observed"):
        m = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0).fit(y_missing)
    np.testing.assert_array_equal(m.embedding_[[4, 17]], 0.0)
    np.testing.assert_array_equal(m.latent_std_[[4, 17]], 1.0)
    np.testing.assert_array_equal(z, m.embedding_)
    others = np.setdiff1d(np.arange(30), [4, 17])
    assert np.isfinite(m.embedding_).all() and np.abs(m.embedding_[others]).sum() > 0
    # The other rows are fitted exactly as if the empty rows were not there (same draws, same data).
    ref = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0).fit(y[others])
    np.testing.assert_allclose(m.embedding_[others], ref.embedding_, atol=1e-10)
    filled = m.impute()
    assert np.isfinite(filled).all()
    np.testing.assert_allclose(filled[4], m.inverse_transform(np.zeros((1, 2)))[0])
    with pytest.warns(UserWarning, match="no observed"):
        z_new = m.transform(np.vstack([np.full(6, np.nan), y[:1] + 0.1]))
    np.testing.assert_array_equal(z_new[0], 0.0)


def test_transform_of_one_new_row_with_a_missing_entry():
    y = _low_rank_data(30, 6)
    m = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, transform_n_iter=20, random_state=0).fit(y)
    row = y[:1] + 0.05
    row[0, 2] = np.nan  # its column is all-NaN within this one-row batch: still a valid row
    assert np.isfinite(m.transform(row)).all()


def test_feature_names_set_output_and_inverse_transform():
    pd = pytest.importorskip("pandas")
    y = _low_rank_data(30, 6)
    m = AdvisedRFLVM(2, n_iter=30, n_frequencies=5, random_state=0)
    m.set_output(transform="pandas")
    frame = pd.DataFrame(y, columns=[f"gene{i}" for i in range(6)])
    z = m.fit_transform(frame)
    assert isinstance(z, pd.DataFrame) and list(z.columns) == ["advisedrflvm0", "advisedrflvm1"]
    assert list(m.get_feature_names_out()) == ["advisedrflvm0", "advisedrflvm1"]
    np.testing.assert_array_equal(z.to_numpy(), m.embedding_)
    back = m.inverse_transform(z.to_numpy())
    np.testing.assert_allclose(back, m.reconstruct(), atol=1e-12)
    # the reconstruction explains most of the variance of this rank-2 data
    assert ((back - y) ** 2).sum() < 0.5 * ((y - y.mean(0)) ** 2).sum()
    with pytest.raises(ValueError, match="n_components"):
        m.inverse_transform(np.zeros((3, 3)))


def test_verbose_prints_the_loss(capsys):
    AdvisedRFLVM(2, n_iter=20, n_frequencies=3, verbose=4, random_state=0).fit(_low_rank_data(20, 5))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[AdvisedRFLVM]")]
    assert len(lines) == 5 and "step 20/20" in lines[-1]
    AdvisedRFLVM(2, n_iter=20, n_frequencies=3, random_state=0).fit(_low_rank_data(20, 5))
    assert capsys.readouterr().out == ""
    with pytest.raises(TypeError, match="verbose"):
        AdvisedRFLVM(2, n_iter=2, verbose=-1).fit(_low_rank_data(20, 5))
