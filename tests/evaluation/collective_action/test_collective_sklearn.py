"""The classical learners of collective-action are scikit-learn classifiers (issue 13): each passes the estimator
checks; ERM limits (JTT with lambda_up = 1, CVaR-DRO with rho = 1) are ERM exactly."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

from icml24.evaluation.collective_action import (
    CVaRDROClassifier,
    JTTClassifier,
    LfFClassifier,
    cvar_weights,
)

# Checks that cannot apply, each with its reason; today none.
EXPECTED_FAILED_CHECKS: dict[str, str] = {}


@parametrize_with_checks(
    [JTTClassifier(), CVaRDROClassifier(rho=0.3, n_rounds=3), LfFClassifier(n_rounds=2)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _digits():
    X, y = load_digits(return_X_y=True)
    return X[:600] / 16, y[:600]


def test_jtt_with_upweight_one_is_erm_bit_for_bit():
    X, y = _digits()
    erm = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    jtt = JTTClassifier(upweight=1.0).fit(X, y)
    assert np.array_equal(jtt.estimator_.coef_, erm.coef_) and not jtt.error_set_.any()
    assert np.array_equal(jtt.predict_proba(X), erm.predict_proba(X))


def test_cvar_with_rho_one_is_erm_and_weights_are_uniform():
    X, y = _digits()
    erm = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    cv = CVaRDROClassifier(rho=1.0).fit(X, y)
    assert np.array_equal(cv.estimator_.coef_, erm.coef_) and np.all(cv.weights_ == 1.0)


def test_jtt_upweights_exactly_the_stage1_errors():
    X, y = _digits()
    jtt = JTTClassifier(stage1_C=0.01, upweight=7.0).fit(X, y)
    errors = jtt.stage1_estimator_.predict(X) != y
    assert errors.any() and np.array_equal(jtt.error_set_, errors)
    assert np.array_equal(jtt.weights_, np.where(errors, 7.0, 1.0))


def test_cvar_weights_put_one_over_rho_on_the_worst_mass_with_a_fractional_boundary():
    w = cvar_weights(np.array([0.1, 5.0, 3.0, 0.2, 1.0]), 0.5)
    # budget 2.5 points: the worst two in full (1/0.5 = 2 each) and half of the third worst (loss 1.0)
    np.testing.assert_allclose(w, [0.0, 2.0, 2.0, 0.0, 1.0])
    assert w.sum() == pytest.approx(5.0)
    # a weight of 2 acts as a duplicate
    w2 = cvar_weights(np.array([5.0, 1.0, 0.5]), 0.5, sample_weight=np.array([1.0, 2.0, 1.0]))
    dup = cvar_weights(np.array([5.0, 1.0, 1.0, 0.5]), 0.5)
    # (the same CVaR mass on each loss value: the weighted point carries what its two copies carry)
    assert w2[0] == dup[0] and 2 * w2[1] == pytest.approx(dup[1] + dup[2]) and w2[2] == dup[3]


def test_cvar_raises_the_weight_of_hard_points_and_lff_of_the_biased_models_failures():
    X, y = _digits()
    erm = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    loss = -np.log(erm.predict_proba(X)[np.arange(len(y)), y])
    hard = loss > np.quantile(loss, 0.9)
    cv = CVaRDROClassifier(rho=0.2, n_rounds=4).fit(X, y)
    assert cv.weights_[hard].mean() > cv.weights_[~hard].mean()
    assert cv.weights_.mean() == pytest.approx(1.0)
    # LfF (one round): the relative difficulty CE_b / (CE_b + CE_d) of the GCE-refitted biased model against the
    # first (ERM) debiased model, normalised to mean 1
    lff = LfFClassifier(n_rounds=1).fit(X, y)
    ce_b = -np.log(lff.biased_estimator_.predict_proba(X)[np.arange(len(y)), y])
    ce_d = loss
    rel = ce_b / (ce_b + ce_d)
    np.testing.assert_allclose(lff.weights_, rel / rel.mean(), rtol=1e-6)


def test_grid_search_and_not_fitted():
    X, y = _digits()
    gs = GridSearchCV(JTTClassifier(), {"upweight": [1.0, 5.0]}, cv=2).fit(X[:300], y[:300])
    assert gs.best_params_["upweight"] in (1.0, 5.0)
    with pytest.raises(NotFittedError):
        LfFClassifier().predict(X)
    with pytest.raises(ValueError, match="rho"):
        CVaRDROClassifier(rho=1.5).fit(X, y)
