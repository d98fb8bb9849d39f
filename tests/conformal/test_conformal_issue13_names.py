"""Issue 13 audit of the conformal estimators' names and shared flows: MAPIE 1.x's names where the concept is
the same, no hyper-parameter that shadows ``score``, ``sets_from_probs`` needs the score that made the
threshold, and ``estimator="precomputed"`` is the same computation as the model flow."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from icml24.conformal import PRECOMPUTED, SplitConformalClassifier, sets_from_probs
from icml24.conformal.conformal_decision_sets import CoverageMatchedSets
from icml24.conformal.rob_fcp import RobustFederatedConformal

ESTIMATORS = [SplitConformalClassifier, CoverageMatchedSets, RobustFederatedConformal]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_mapie_names_and_no_parameter_named_score(cls):
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert "score" not in params and "alpha" not in params  # MAPIE 1.x: confidence_level, conformity_score
    assert {"estimator", "prefit", "calibration_size", "random_state"} <= params
    for method in ("fit", "conformalize", "predict_set", "predict", "predict_proba", "score"):
        assert callable(getattr(cls, method, None)), f"{cls.__name__} lacks {method}"
    if cls is not CoverageMatchedSets:  # its level is derived from k (alpha = 1 - top-k coverage)
        assert {"confidence_level", "conformity_score"} <= params


def test_sets_from_probs_has_no_default_score():
    score = inspect.signature(sets_from_probs).parameters["score"]
    assert score.kind is inspect.Parameter.KEYWORD_ONLY and score.default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="score"):
        sets_from_probs(np.full((2, 2), 0.5), 0.5)  # type: ignore[call-arg]


def test_precomputed_probabilities_equal_the_prefit_model_flow():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 900)
    X = rng.normal(size=(4, 5))[y] + rng.normal(size=(900, 5))
    clf = LogisticRegression(max_iter=300).fit(X[:300], y[:300])
    kw = dict(confidence_level=0.9, conformity_score="aps")
    model = SplitConformalClassifier(clf, prefit=True, **kw).fit(X[300:600], y[300:600])
    probs = SplitConformalClassifier(PRECOMPUTED, **kw).fit(clf.predict_proba(X[300:600]), y[300:600])
    assert model.qhat_ == probs.qhat_
    np.testing.assert_array_equal(model.predict_set(X[600:]), probs.predict_set(clf.predict_proba(X[600:])))
    with pytest.raises(ValueError, match="shape"):
        probs.predict_set(np.full((5, 3), 1 / 3))  # 3 classes, calibrated on 4
    with pytest.raises(ValueError, match="estimator must be"):
        SplitConformalClassifier("precomputd").fit(X, y)
