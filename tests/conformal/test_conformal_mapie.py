"""Cross-check against MAPIE: same probabilities and alpha -> same quantile and same sets."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from icml24.conformal import (
    SplitConformalClassifier,
    aps_scores,
    conformal_quantile,
    lac_scores,
    prediction_sets,
)

mapie_classification = pytest.importorskip("mapie.classification")


class _FixedProbs(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose input is a row index into a fixed probability matrix."""

    def __init__(self, probs=None):
        self.probs = probs

    def fit(self, X, y):
        self.classes_ = np.arange(self.probs.shape[1])
        return self

    def predict_proba(self, X):
        return self.probs[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


def _problem(seed, n=400, k=10):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.3), size=2 * n)
    # labels drawn from a flattened version of the model: the model is overconfident, sets must grow
    flat = 0.7 * probs + 0.3 / k
    y = (rng.random(2 * n)[:, None] > np.cumsum(flat, axis=1)).sum(axis=1)
    X = np.arange(2 * n)[:, None]
    return probs, np.minimum(y, k - 1), X, n


def _mapie(est, alpha, score, **kw):
    return mapie_classification.SplitConformalClassifier(
        est, confidence_level=1 - alpha, conformity_score=score, prefit=True, **kw
    )


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.33])
@pytest.mark.parametrize("seed", [0, 1])
def test_lac_same_quantile_and_sets_as_mapie(alpha, seed):
    probs, y, X, n = _problem(seed)
    est = _FixedProbs(probs).fit(X, y)
    m = _mapie(est, alpha, "lac").conformalize(X[:n], y[:n])
    _, m_sets = m.predict_set(X[n:])
    qhat = conformal_quantile(lac_scores(probs[:n], y[:n]), alpha)
    assert qhat == pytest.approx(float(m._mapie_classifier.conformity_score_function_.quantiles_[0]), abs=1e-12)
    np.testing.assert_array_equal(prediction_sets(lac_scores(probs[n:]), qhat), m_sets[:, :, 0])
    # the wrapper gives the same sets
    ours = SplitConformalClassifier(est, confidence_level=1 - alpha, prefit=True).conformalize(X[:n], y[:n])
    np.testing.assert_array_equal(ours.predict_set(X[n:]), m_sets[:, :, 0])


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_aps_same_quantile_and_sets_as_mapie(alpha):
    """MAPIE always randomises APS calibration scores as ``cumsum_incl - U p_y`` (U from a RandomState);
    we rebuild those scores from our deterministic APS score and the same U, and compare the quantile.
    MAPIE's ``include_last_label=False`` sets are ``{cumsum_incl <= qhat}``, never empty: our
    deterministic APS matrix with ``allow_empty=False``."""
    probs, y, X, n = _problem(3)
    est = _FixedProbs(probs).fit(X, y)
    m = _mapie(est, alpha, "aps", random_state=7).conformalize(X[:n], y[:n])
    _, m_sets = m.predict_set(X[n:], conformity_score_params={"include_last_label": False})
    u = np.random.RandomState(7).uniform(size=n)
    scores = aps_scores(probs[:n], y[:n]) - u * probs[np.arange(n), y[:n]]
    qhat = conformal_quantile(scores, alpha)
    assert qhat == pytest.approx(float(m._mapie_classifier.conformity_score_function_.quantiles_[0]), abs=1e-12)
    np.testing.assert_array_equal(prediction_sets(aps_scores(probs[n:]), qhat, allow_empty=False), m_sets[:, :, 0])
