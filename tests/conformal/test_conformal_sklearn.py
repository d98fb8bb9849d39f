"""SplitConformalClassifier follows scikit-learn's conventions (issue 13): it passes the estimator checks,
and the tools that call ``fit`` then ``score`` (``cross_val_score``, ``GridSearchCV``, ``Pipeline``) give
meaningful results."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from icml24.conformal import SmallCalibrationWarning, SplitConformalClassifier, marginal_coverage

# Checks that cannot apply to a set predictor, each with its reason. Today every check of
# scikit-learn 1.9 applies and passes: the set is empty, and the test below fails if a check is added to
# it without a reason.
EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def _expected_failed(estimator):
    return EXPECTED_FAILED_CHECKS


@parametrize_with_checks(
    [
        SplitConformalClassifier(LogisticRegression(), random_state=0),
        SplitConformalClassifier(LogisticRegression(), conformity_score="raps", allow_empty=False, random_state=0),
    ],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        # the checks fit on a handful of samples: the too-small-calibration warning is expected there
        warnings.simplefilter("ignore", SmallCalibrationWarning)
        check(estimator)


def test_every_expected_failure_has_a_reason():
    assert all(isinstance(r, str) and len(r) > 20 for r in EXPECTED_FAILED_CHECKS.values())



def test_cross_val_score_is_finite_and_meaningful(gaussian_blobs):
    """Was ``[nan nan nan]``: no ``score`` and a hyper-parameter named ``score``."""
    X, y = gaussian_blobs()
    scores = cross_val_score(SplitConformalClassifier(LogisticRegression(), random_state=0), X, y, cv=3)
    assert scores.shape == (3,) and np.isfinite(scores).all()
    assert (scores > 0.3).all()  # informative small sets, far above the trivial predictors' 0


def test_score_is_coverage_minus_relative_size(gaussian_blobs):
    X, y = gaussian_blobs(seed=1)
    cp = SplitConformalClassifier(LogisticRegression(), random_state=0).fit(X[:400], y[:400])
    sets = cp.predict_set(X[400:])
    expect = marginal_coverage(sets, y[400:]) - sets.sum(axis=1).mean() / cp.n_classes_
    assert cp.score(X[400:], y[400:]) == pytest.approx(expect)
    # trivial predictors score 0: every label (a too-small calibration set) ...
    full = SplitConformalClassifier(cp.estimator_, prefit=True)
    with pytest.warns(SmallCalibrationWarning):
        full.conformalize(X[:5], y[:5])
    assert full.score(X[400:], y[400:]) == pytest.approx(0.0)


def test_grid_search_prefers_the_model_with_smaller_sets(gaussian_blobs):
    """Was: silently the first candidate. A strongly regularised model (C = 1e-4) is nearly uniform and needs
    large sets for the same coverage; GridSearchCV must pick the informative one whatever the order."""
    X, y = gaussian_blobs(seed=2)
    for grid in ([1e-4, 1.0], [1.0, 1e-4]):
        gs = GridSearchCV(
            SplitConformalClassifier(LogisticRegression(), random_state=0), {"estimator__C": grid}, cv=3
        ).fit(X, y)
        assert gs.best_params_ == {"estimator__C": 1.0}
    gs = GridSearchCV(
        SplitConformalClassifier(LogisticRegression(), random_state=0),
        {"conformity_score": ["lac", "aps", "raps"]},
        cv=3,
    ).fit(X, y)
    assert np.isfinite(gs.cv_results_["mean_test_score"]).all()


def test_pipeline_score_and_staged_flow(gaussian_blobs):
    """``Pipeline.score`` raised; the MAPIE flow (fit on train, conformalize on a separate set) still works."""
    X, y = gaussian_blobs(seed=3)
    pipe = make_pipeline(StandardScaler(), SplitConformalClassifier(LogisticRegression(), random_state=0))
    assert np.isfinite(pipe.fit(X[:400], y[:400]).score(X[400:], y[400:]))
    cp = SplitConformalClassifier(LogisticRegression(), confidence_level=0.9, calibration_size=None)
    cp.fit(X[:300], y[:300]).conformalize(X[300:450], y[300:450])
    assert cp.n_calibration_ == 150 and cp.alpha_ == pytest.approx(0.1)
    assert marginal_coverage(cp.predict_set(X[450:]), y[450:]) > 0.8


def test_one_call_fit_holds_out_the_calibration_share(gaussian_blobs):
    X, y = gaussian_blobs(n=400, seed=4)
    cp = SplitConformalClassifier(LogisticRegression(), calibration_size=0.25, random_state=0).fit(X, y)
    assert cp.n_calibration_ == 100
    # prefit: fit conformalizes on all of (X, y)
    pre = SplitConformalClassifier(cp.estimator_, prefit=True).fit(X[:120], y[:120])
    assert pre.n_calibration_ == 120


def test_marginal_coverage_takes_the_classes_of_string_labels():
    """Issue 35: the string labels SplitConformalClassifier accepts also go into marginal_coverage (classes=)."""
    from sklearn.datasets import load_iris

    from icml24.conformal import class_conditional_coverage, covered

    iris = load_iris()
    X, names = iris.data, iris.target_names[iris.target]
    order = np.random.default_rng(0).permutation(len(X))
    X, names = X[order], names[order]
    cp = SplitConformalClassifier(LogisticRegression(max_iter=500), confidence_level=0.9, random_state=0)
    cp.fit(X[:100], names[:100])
    sets = cp.predict_set(X[100:])
    idx = np.searchsorted(cp.classes_, names[100:])  # classes_ is sorted: the index of each true label
    assert marginal_coverage(sets, names[100:], classes=cp.classes_) == marginal_coverage(sets, idx)
    np.testing.assert_array_equal(covered(sets, names[100:], classes=cp.classes_), sets[np.arange(50), idx])
    np.testing.assert_array_equal(class_conditional_coverage(sets, list(names[100:]), classes=list(cp.classes_)),
                                  class_conditional_coverage(sets, idx))  # fmt: skip
    # a permuted column order is honoured: the classes say which column is which label
    perm = np.array([2, 0, 1])
    assert marginal_coverage(sets[:, perm], names[100:], classes=cp.classes_[perm]) == marginal_coverage(sets, idx)
    with pytest.raises(TypeError, match="labels"):
        marginal_coverage(sets, names[100:])  # strings without classes: refused, as before
    with pytest.raises(ValueError, match="not in classes.*daisy"):
        marginal_coverage(sets, np.r_[names[101:], ["daisy"]], classes=cp.classes_)
    with pytest.raises(ValueError, match="classes must be 1-D with one entry per column"):
        marginal_coverage(sets, names[100:], classes=cp.classes_[:2])
    with pytest.raises(ValueError, match="repeat"):
        marginal_coverage(sets, names[100:], classes=["setosa", "setosa", "virginica"])
