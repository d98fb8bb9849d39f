"""Closed-form and brute-force checks of the conformal core (scores, quantile, sets, metrics)."""

import math

import numpy as np
import pytest

from icml24.conformal import (
    aps_scores,
    class_conditional_coverage,
    conformal_quantile,
    lac_scores,
    marginal_coverage,
    mean_set_size,
    prediction_sets,
    raps_scores,
    size_stratified_coverage,
    size_stratified_coverage_violation,
)


def _dirichlet_probs(rng, n, k, conc=0.5):
    return rng.dirichlet(np.full(k, conc), size=n)


def _naive_raps(p, y, lam, k_reg, u=None):
    """One sample at a time, straight from the definition (Angelopoulos et al., 2021, Eq. 4)."""
    order = sorted(range(len(p)), key=lambda j: (-p[j], j))
    rank = order.index(y)
    rho = sum(p[j] for j in order[:rank])
    uu = 1.0 if u is None else u
    return rho + uu * p[y] + lam * max(0, rank + 1 - k_reg)


def test_lac_closed_form():
    p = np.array([[0.7, 0.2, 0.1], [0.25, 0.25, 0.5]])
    np.testing.assert_allclose(lac_scores(p, np.array([0, 2])), [0.3, 0.5])
    np.testing.assert_allclose(lac_scores(p), 1 - p)


def test_aps_hand_computed():
    p = np.array([[0.5, 0.2, 0.3]])
    np.testing.assert_allclose(aps_scores(p), [[0.5, 1.0, 0.8]])
    # ties ranked by class index: label 0 before label 1
    q = np.array([[0.4, 0.4, 0.2]])
    np.testing.assert_allclose(aps_scores(q), [[0.4, 0.8, 1.0]])
    np.testing.assert_allclose(aps_scores(q, np.array([1])), [0.8])


def test_raps_hand_computed():
    p = np.array([[0.5, 0.2, 0.3]])
    # ranks: 0 -> 1, 2 -> 2, 1 -> 3 ; penalty lam*max(0, rank - k_reg) with k_reg=1, lam=0.5
    np.testing.assert_allclose(raps_scores(p, lam=0.5, k_reg=1), [[0.5, 2.0, 1.3]])


@pytest.mark.parametrize("lam,k_reg", [(0.0, 0), (0.1, 2), (1.0, 0)])
@pytest.mark.parametrize("randomized", [False, True])
def test_raps_matches_naive_loop(lam, k_reg, randomized):
    rng = np.random.default_rng(0)
    p = _dirichlet_probs(rng, 40, 7)
    p[:5, :3] = p[:5, [0]]  # ties
    p /= p.sum(1, keepdims=True)
    y = rng.integers(0, 7, 40)
    got = raps_scores(p, y, lam=lam, k_reg=k_reg, randomized=randomized, rng=1)
    u = np.random.default_rng(1).random(40) if randomized else [None] * 40
    want = [_naive_raps(p[i], y[i], lam, k_reg, u[i]) for i in range(40)]
    np.testing.assert_allclose(got, want, atol=1e-12)
    mat = raps_scores(p, lam=lam, k_reg=k_reg, randomized=randomized, rng=1)
    np.testing.assert_allclose(mat[np.arange(40), y], want, atol=1e-12)


def test_quantile_rank_rule():
    s = np.arange(1.0, 11.0)[::-1].copy()  # n = 10
    assert conformal_quantile(s, 0.2) == 9.0  # ceil(11 * 0.8) = 9
    assert conformal_quantile(s, 0.5) == 6.0  # ceil(5.5) = 6
    assert conformal_quantile(s, 1 / 11) == 10.0  # ceil(10) = 10 exactly, no float bump
    assert math.isinf(conformal_quantile(s, 0.05))  # ceil(10.45) = 11 > n
    assert conformal_quantile(np.arange(100.0), 0.1) == 90.0  # 91st smallest of 0..99


def test_prediction_sets_and_allow_empty():
    S = np.array([[0.1, 0.5, 0.9], [0.6, 0.7, 0.65]])
    np.testing.assert_array_equal(prediction_sets(S, 0.5), [[1, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(prediction_sets(S, 0.5, allow_empty=False), [[1, 1, 0], [1, 0, 0]])
    assert prediction_sets(S, math.inf).all()


def test_metrics_hand_computed():
    sets = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1]], dtype=bool)
    y = np.array([0, 2, 1, 2])
    assert marginal_coverage(sets, y) == 0.75
    assert mean_set_size(sets) == 2.0
    strat = size_stratified_coverage(sets, y)
    assert strat.groups == ("1", "2", "3")
    np.testing.assert_allclose(strat.coverage, [1.0, 0.5, 1.0])
    np.testing.assert_array_equal(strat.count, [1, 2, 1])
    binned = size_stratified_coverage(sets, y, bins=(0, 2))
    assert binned.groups == ("0-1", "2+")
    np.testing.assert_allclose(binned.coverage, [1.0, 2 / 3])
    assert size_stratified_coverage_violation(sets, y, 0.25) == pytest.approx(0.25)
    np.testing.assert_allclose(class_conditional_coverage(sets, y), [1.0, 1.0, 0.5])
    cc = class_conditional_coverage(sets[:1], y[:1])
    assert cc[0] == 1.0 and np.isnan(cc[1:]).all()


def test_perfect_one_hot_model_gives_singletons():
    y = np.arange(20) % 5
    p = np.eye(5)[y]
    q = conformal_quantile(lac_scores(p, y), 0.1)
    np.testing.assert_array_equal(prediction_sets(lac_scores(p), q), p.astype(bool))
    # Deterministic APS ties every zero-probability label at score 1 with the top label (a known property
    # of APS); the randomised version separates them: top label U, the others 1.
    q = conformal_quantile(aps_scores(p, y, randomized=True, rng=0), 0.1)
    sets = prediction_sets(aps_scores(p, randomized=True, rng=1), q, allow_empty=False)
    np.testing.assert_array_equal(sets, p.astype(bool))
