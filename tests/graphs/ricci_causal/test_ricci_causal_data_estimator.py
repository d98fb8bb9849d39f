"""The semi-synthetic networked data, PEHE / ATE error, and the GCN effect estimator (notes Sec. 7, item 7)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from icml24.graphs.ricci_causal import (
    GCNEffectEstimator,
    ate_error,
    pehe,
    simulate_networked_treatment,
    tercile_pehe,
)


def test_pehe_ate_and_terciles_by_hand():
    tau = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    tau_hat = np.array([1.0, 3.0, 1.0, 2.0, 1.0, 1.0])
    assert pehe(tau_hat, tau) == pytest.approx(np.sqrt((4 + 1) / 6))
    assert ate_error(tau_hat, tau) == pytest.approx(0.5)
    kappa = np.array([-1.0, -0.5, 0.0, 0.1, 0.5, 0.9])  # lowest tercile: nodes 0, 1
    lo, mid, hi = tercile_pehe(kappa, tau_hat, tau)
    assert (lo, mid, hi) == pytest.approx((np.sqrt(2.0), np.sqrt(0.5), 0.0))


def test_generator_shapes_effects_and_confounding():
    g = nx.barabasi_albert_graph(300, 2, seed=0)
    d = simulate_networked_treatment(g, seed=1)
    assert d.x.shape == (300, 20) and d.t.shape == (300,) and set(np.unique(d.t)) <= {0, 1}
    assert 0 < d.tau.min() and d.tau.max() < 2
    # Same seed, same data; the factual outcome is the treated arm's potential outcome plus noise.
    d2 = simulate_networked_treatment(g, seed=1)
    np.testing.assert_array_equal(d.y, d2.y)
    assert np.corrcoef(d.y - np.where(d.t == 1, d.mu1, d.mu0), d.mu0)[0, 1] == pytest.approx(0, abs=0.2)
    # Network confounding: with kappa_nbr = 0 the propensity no longer depends on the neighbours.
    d0 = simulate_networked_treatment(g, seed=1, kappa_nbr=0.0, kappa_self=0.0)
    np.testing.assert_allclose(d0.propensity, 0.5)


def test_empty_graph_reduces_to_a_per_node_model():
    d = simulate_networked_treatment(nx.empty_graph(200), seed=0, kappa_nbr=0.0)
    est = GCNEffectEstimator(epochs=30, val_fraction=0.0, seed=0).fit(d.x, d.t, d.y, nx.empty_graph(200))
    po = est.predict_potential_outcomes()
    # Permuting the nodes permutes the predictions: no information flows between nodes (no validation split,
    # which is drawn by node index).
    perm = np.random.default_rng(0).permutation(200)
    est2 = GCNEffectEstimator(epochs=30, val_fraction=0.0, seed=0).fit(d.x[perm], d.t[perm], d.y[perm], nx.empty_graph(200))
    np.testing.assert_allclose(est2.predict_potential_outcomes(), po[perm], atol=1e-4)


def test_constant_effect_ate_error_shrinks_with_n():
    errs = {}
    for n in (200, 1600):
        g = nx.random_regular_graph(4, n, seed=0)
        d = simulate_networked_treatment(g, seed=0, kappa_nbr=0.0)
        base = d.mu0
        y = base + 1.0 * d.t + 0.5 * np.random.default_rng(1).standard_normal(n)  # constant tau = 1
        e = []
        for s in range(2):
            tau_hat = GCNEffectEstimator(epochs=150, seed=s).fit(d.x, d.t, y, g).predict_ite()
            e.append(ate_error(tau_hat, np.ones(n)))
        errs[n] = np.mean(e)
    assert errs[1600] < errs[200]


def test_gcn_beats_predicting_the_mean_effect_and_is_deterministic():
    g = nx.stochastic_block_model([100] * 4, [[0.15 if i == j else 0.005 for j in range(4)] for i in range(4)], seed=0)
    d = simulate_networked_treatment(g, seed=0)
    mask = np.random.default_rng(0).random(400) < 0.6
    est = GCNEffectEstimator(epochs=200, seed=3).fit(d.x, d.t, d.y, g, train_mask=mask)
    tau_hat = est.predict_ite()
    naive = np.full(400, d.y[mask & (d.t == 1)].mean() - d.y[mask & (d.t == 0)].mean())
    assert pehe(tau_hat[~mask], d.tau[~mask]) < pehe(naive[~mask], d.tau[~mask])
    again = GCNEffectEstimator(epochs=200, seed=3).fit(d.x, d.t, d.y, g, train_mask=mask).predict_ite()
    np.testing.assert_allclose(again, tau_hat, atol=1e-6)


def test_estimator_rejects_bad_input():
    d = simulate_networked_treatment(nx.path_graph(10), seed=0)
    with pytest.raises(ValueError, match="t"):
        GCNEffectEstimator(epochs=1).fit(d.x, d.t + 2, d.y, nx.path_graph(10))
    with pytest.raises(ValueError, match="epochs"):
        GCNEffectEstimator(epochs=0).fit(d.x, d.t, d.y, nx.path_graph(10))
    with pytest.raises(RuntimeError, match="fit"):
        GCNEffectEstimator().predict_ite()
