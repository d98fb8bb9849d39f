"""Set construction of the conformal-decision-sets paper: top-k, coverage matching, display."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError

from icml24.conformal import conformal_quantile, raps_scores
from icml24.conformal.conformal_decision_sets import (
    CoverageMatchedSets,
    display_order,
    smallest_k_for_alpha,
    temperature_softmax,
    topk_coverage,
    topk_sets,
)


def _probs(seed, n=600, k=10, conc=0.4):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, conc), size=n)
    y = np.minimum((rng.random(n)[:, None] > np.cumsum(0.7 * p + 0.3 / k, axis=1)).sum(1), k - 1)
    return p, y


def test_topk_sets_hand_computed_and_ties():
    p = np.array([[0.1, 0.6, 0.3], [0.4, 0.2, 0.4]])
    np.testing.assert_array_equal(topk_sets(p, 1), [[0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(topk_sets(p, 2), [[0, 1, 1], [1, 0, 1]])
    assert topk_coverage(p, np.array([2, 1]), 2) == 0.5


def test_temperature_softmax():
    z = np.array([[0.0, np.log(3.0)]])
    np.testing.assert_allclose(temperature_softmax(z), [[0.25, 0.75]])
    np.testing.assert_allclose(temperature_softmax(z, 0.5), [[0.1, 0.9]])
    with pytest.raises(ValueError, match="temperature"):
        temperature_softmax(z, 0.0)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.floats(0.02, 0.6))
def test_smallest_k_for_alpha_brute_force(seed, alpha):
    p, y = _probs(seed, n=80, k=6)
    k = smallest_k_for_alpha(p, y, alpha)
    covs = [topk_coverage(p, y, j) for j in range(1, 7)]
    assert covs[k - 1] > 1 - alpha  # strictly, as the official compute_k_empirically
    assert k == 1 or covs[k - 2] <= 1 - alpha


def test_smallest_k_for_alpha_is_strict_at_equality():
    """Top-1 coverage exactly 0.75 and alpha = 0.25: the official code needs accuracy > 1 - alpha, so k = 2."""
    p = np.array([[0.6, 0.3, 0.1]] * 4)
    y = np.array([0, 0, 0, 1])
    assert topk_coverage(p, y, 1) == 0.75
    assert smallest_k_for_alpha(p, y, 0.25) == 2
    assert smallest_k_for_alpha(p, y, 0.26) == 1


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coverage_matched_on_calibration_and_never_empty(k, seed):
    p, y = _probs(seed)
    cms = CoverageMatchedSets("precomputed", k=k, lam=0.5, k_reg=4, random_state=seed).fit(p, y)
    # recompute the displayed calibration coverage with the calibration U's: top label or score <= qhat
    covered = (p.argmax(1) == y) | (cms.calibration_scores_ <= cms.qhat_)
    target = cms.topk_coverage_cal_
    assert covered.mean() >= target - 1e-12
    assert covered.mean() - target < 1 / len(y) + 1e-12  # matched up to one calibration point
    # minimal: one rank lower would fall short
    assert ((p.argmax(1) == y) | (cms.calibration_scores_ < cms.qhat_)).mean() < target or np.isinf(cms.qhat_)
    sets = cms.predict_set(p)
    assert sets.any(axis=1).all()
    assert cms.alpha_ == pytest.approx(1 - target)


def test_match_alpha_uses_the_conformal_quantile_and_quantile_rules():
    p, y = _probs(4)
    a = CoverageMatchedSets("precomputed", k=2, match="alpha", random_state=3).fit(p, y)
    s = raps_scores(p, y, lam=0.5, k_reg=5, randomized=True, rng=np.random.default_rng(3))
    assert a.qhat_ == conformal_quantile(s, a.alpha_)
    h = CoverageMatchedSets("precomputed", k=2, match="alpha", quantile_rule="higher", random_state=3).fit(p, y)
    assert h.qhat_ == float(np.quantile(s, 1 - h.alpha_, method="higher"))
    assert h.qhat_ <= a.qhat_  # without the (n+1) correction the threshold is never higher


def test_matched_sets_hold_coverage_on_fresh_data_and_adapt():
    """Coverage on held-out data matches top-k's within binomial noise; sizes vary with the model's doubt."""
    rng = np.random.default_rng(0)
    k_cls, n = 10, 4000
    logits = rng.normal(size=(n, k_cls)) * 2.5
    p = temperature_softmax(logits)
    y = np.minimum((rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(1), k_cls - 1)  # calibrated model
    cms = CoverageMatchedSets("precomputed", k=2, lam=0.1, k_reg=4, random_state=1).fit(p[:2000], y[:2000])
    conf, topk = cms.predict_set(p[2000:]), cms.predict_topk(p[2000:])
    yt = y[2000:]
    cov_c = conf[np.arange(2000), yt].mean()
    cov_t = topk[np.arange(2000), yt].mean()
    assert abs(cov_c - cov_t) < 4 * np.sqrt(2 * 0.25 / 2000)
    sizes = conf.sum(1)
    confident = p[2000:].max(1) > 0.9
    assert sizes[confident].mean() < sizes[~confident].mean()
    assert sizes.std() > 0.3


def test_display_order_is_by_class_id():
    sets = np.array([[0, 1, 0, 1], [1, 0, 0, 0]], dtype=bool)
    assert display_order(sets) == [[1, 3], [0]]


def test_bad_input():
    p, y = _probs(0, n=50, k=5)
    with pytest.raises(ValueError, match="k must be"):
        CoverageMatchedSets("precomputed", k=6).fit(p, y)
    with pytest.raises(ValueError, match="match"):
        CoverageMatchedSets("precomputed", match="size").fit(p, y)
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 4\]"):
        CoverageMatchedSets("precomputed", k=5).fit(p, y)  # top-5 of 5 classes holds every label
    with pytest.raises(ValueError, match="y must be class indices"):
        CoverageMatchedSets("precomputed", k=2).fit(p, np.full(50, 7))
    with pytest.raises(NotFittedError, match="fit"):
        CoverageMatchedSets().predict_set(p)
    fitted = CoverageMatchedSets("precomputed", k=2).fit(p, y)
    for method in (fitted.predict_set, fitted.predict_topk):
        with pytest.raises(ValueError, match=r"shape \(n_samples, 5\)"):
            method(p[:, :4] / p[:, :4].sum(1, keepdims=True))  # 4 classes, calibrated on 5
    with pytest.raises(ValueError, match="sum to 1"):
        topk_sets(p * 2, 1)


def test_is_a_sklearn_estimator():
    from sklearn.base import clone

    cms = CoverageMatchedSets("precomputed", k=2, lam=0.1, k_reg=3, match="alpha", random_state=4)
    params = cms.get_params()
    assert params == {"estimator": "precomputed", "k": 2, "lam": 0.1, "k_reg": 3, "randomized": True,
                      "allow_empty": False, "match": "alpha", "quantile_rule": "finite_sample", "prefit": False,
                      "calibration_size": 0.25, "random_state": 4}
    p, y = _probs(2)
    a = clone(cms).fit(p, y).predict_set(p)
    b = clone(cms).fit(p, y).predict_set(p)
    np.testing.assert_array_equal(a, b)
