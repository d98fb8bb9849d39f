"""CAI estimator: the Gaussian KLs against closed forms, the score against the exact mutual information of a
linear-Gaussian model, smoothing against a loop, and a learned world model detecting contact in the push world."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from icml24.rl.caiac import (
    FactoredGaussianWorldModel,
    WorldModelConfig,
    causal_action_influence,
    gaussian_kl,
    kl_gaussian_to_mixture,
    smooth_scores,
    uncontrolled_mask,
)


def test_gaussian_kl_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    m1, m2 = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    v1, v2 = torch.rand(5, 3, generator=g) + 0.1, torch.rand(5, 3, generator=g) + 0.1
    ref = torch.distributions.kl_divergence(
        torch.distributions.Independent(torch.distributions.Normal(m1, v1.sqrt()), 1),
        torch.distributions.Independent(torch.distributions.Normal(m2, v2.sqrt()), 1),
    )
    torch.testing.assert_close(gaussian_kl(m1, v1, m2, v2), ref)


@pytest.mark.parametrize("delta", [0.0, 0.3, 1.0, 2.5])
def test_mixture_kl_with_one_component_is_the_closed_form(delta):
    """M = 1, equal variances v, 1-D: variational part = delta^2 / 2v (exact KL), product part =
    max(0, delta^2 / 4v + (log 2 - 1) / 2); the estimate is their mean."""
    v = 0.5
    out = kl_gaussian_to_mixture(torch.tensor([[0.0]]), torch.tensor([[v]]), torch.tensor([[delta]]), torch.tensor([[v]]))
    expected = 0.5 * (delta**2 / (2 * v) + max(0.0, delta**2 / (4 * v) + 0.5 * (math.log(2) - 1)))
    assert float(out[0]) == pytest.approx(expected, rel=1e-5, abs=1e-6)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 3), st.integers(0, 10_000))
def test_mixture_kl_is_nonnegative_and_zero_for_identical_components(m, d, seed):
    g = torch.Generator().manual_seed(seed)
    mu, var = torch.randn(4, m, d, generator=g), torch.rand(4, m, d, generator=g) + 0.05
    kls = kl_gaussian_to_mixture(mu, var, mu, var)
    assert kls.shape == (4, m) and bool((kls >= -1e-6).all())
    same = kl_gaussian_to_mixture(mu[:, :1].expand(4, m, d), var[:, :1].expand(4, m, d),
                                  mu[:, :1].expand(4, m, d), var[:, :1].expand(4, m, d))  # fmt: skip
    torch.testing.assert_close(same, torch.zeros(4, m), atol=1e-5, rtol=0)


def _linear_model(cs: list[float], sigma: float) -> FactoredGaussianWorldModel:
    """An exact world model s'^j = s^j + c_j a + N(0, sigma^2) with a 1-D action, built into the MLP heads:
    hidden (relu(a), relu(-a)), identity, output c_j (h1 - h2) and log-variance log sigma^2."""
    model = FactoredGaussianWorldModel(entity_dims=(1,) * len(cs), action_dim=1,
                                       config=WorldModelConfig(hidden=(2, 2), min_var=1e-8))  # fmt: skip
    K = len(cs)
    with torch.no_grad():
        for c, head in zip(cs, model.heads, strict=True):
            l1, l2, l3 = head[0], head[2], head[4]
            l1.weight.zero_(), l1.bias.zero_()
            l1.weight[0, K], l1.weight[1, K] = 1.0, -1.0
            l2.weight.copy_(torch.eye(2)), l2.bias.zero_()
            l3.weight.zero_(), l3.bias.zero_()
            l3.weight[0, 0], l3.weight[0, 1] = c, -c
            l3.bias[1] = math.log(sigma**2)
    return model


def _exact_mi(c: float, sigma: float) -> float:
    """I(S'; A) for S' = c A + N(0, sigma^2), A ~ U(-1, 1): h(S') - h(noise), by quadrature."""
    if c == 0:
        return 0.0
    p = lambda y: (stats.norm.cdf((y + c) / sigma) - stats.norm.cdf((y - c) / sigma)) / (2 * c)  # noqa: E731
    lim = c + 8 * sigma
    h = integrate.quad(lambda y: -p(y) * math.log(max(p(y), 1e-300)), -lim, lim, limit=200)[0]
    return h - 0.5 * math.log(2 * math.pi * math.e * sigma**2)


def test_cai_of_a_linear_gaussian_model_tracks_the_exact_mutual_information():
    """C^j = 0 exactly for an entity the action does not move; for small c_j it is close to the exact
    I(S'^j; A | s) (~ c^2 / (6 sigma^2)) and it increases with c_j."""
    sigma = 0.1
    cs = [0.0, 0.02, 0.05, 0.1]
    model = _linear_model(cs, sigma)
    scores = causal_action_influence(model, np.zeros((200, len(cs))), n_action_samples=64, seed=0)
    mean = scores.mean(0)
    assert mean[0] == pytest.approx(0.0, abs=1e-7)
    assert np.all(np.diff(mean) > 0)
    for j in (1, 2):
        exact = _exact_mi(cs[j], sigma)
        assert exact == pytest.approx(cs[j] ** 2 / (6 * sigma**2), rel=0.1)
        assert mean[j] == pytest.approx(exact, rel=0.25)


def test_smoothing_matches_a_loop_and_kernel_one_is_identity():
    rng = np.random.default_rng(0)
    x = rng.random((3, 7, 2))
    np.testing.assert_array_equal(smooth_scores(x, 1), x)
    ref = np.empty_like(x)
    for t in range(7):
        ref[:, t] = x[:, max(0, t - 1) : min(7, t + 2)].mean(1)
    np.testing.assert_allclose(smooth_scores(x, 3), ref)
    ref4 = np.stack([x[:, max(0, t - 1) : min(7, t + 3)].mean(1) for t in range(7)], axis=1)
    np.testing.assert_allclose(smooth_scores(x, 4), ref4)


def test_uncontrolled_mask_limits():
    x = np.array([[0.0, 0.01, 3.0]])
    assert not uncontrolled_mask(x, 0.0).any()  # theta = 0: nothing uncontrolled -> CAIAC = no augmentation
    assert uncontrolled_mask(x, math.inf).all()  # theta = inf: random swaps
    np.testing.assert_array_equal(uncontrolled_mask(x, 0.05), [[True, True, False]])
    with pytest.raises(ValueError, match="threshold"):
        uncontrolled_mask(x, -1.0)


def test_learned_world_model_cai_detects_contact_in_the_push_world():
    """A small world model on 60 episodes already ranks contact states above free ones (AUC > 0.95)."""
    from sklearn.metrics import roc_auc_score

    from icml24.rl.caiac import collect_push_dataset, reachable, train_world_model

    torch.manual_seed(0)
    data = collect_push_dataset(20, 40, seed=0)
    S = data.states
    model = FactoredGaussianWorldModel(entity_dims=(2, 2, 2), action_dim=2,
                                       config=WorldModelConfig(hidden=(64, 64), lr=1e-3, min_var=1e-4))  # fmt: skip
    train_world_model(model, S[:, :-1].reshape(-1, 6), data.actions.reshape(-1, 2), S[:, 1:].reshape(-1, 6),
                      seed=0, steps=600)  # fmt: skip
    flat = S[:, ::3].reshape(-1, 6)
    scores = causal_action_influence(model, flat, n_action_samples=16, seed=0)
    contact = reachable(flat)
    assert roc_auc_score(contact[:, 1], scores[:, 1]) > 0.95
    assert scores[:, 0].min() > 0.5  # the agent is always under control
