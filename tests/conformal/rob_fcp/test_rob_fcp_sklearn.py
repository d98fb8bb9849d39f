"""RobustFederatedConformal follows scikit-learn's conventions (issue 13): it passes the estimator checks
(which call ``fit(X, y)`` without client ids: one client, where Rob-FCP is split conformal), and the
federated flows (client ids per sample, or the scores the clients report) give Rob-FCP's threshold."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from icml24.conformal import SmallCalibrationWarning, SplitConformalClassifier, lac_scores, marginal_coverage
from icml24.conformal.rob_fcp import RobustFederatedConformal, apply_attack, fcp_quantile, rob_fcp_quantile

# Checks that cannot apply to a federated calibrator, each with its reason. Today every check of
# scikit-learn 1.9 applies and passes; the test below fails if one is added without a reason.
EXPECTED_FAILED_CHECKS: dict[str, str] = {}


def _expected_failed(estimator):
    return EXPECTED_FAILED_CHECKS


@parametrize_with_checks(
    [
        RobustFederatedConformal(LogisticRegression(), random_state=0),
        RobustFederatedConformal(LogisticRegression(), conformity_score="aps", randomized=True, n_bins=10,
                                 random_state=0),
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



def test_one_client_is_split_conformal(gaussian_blobs):
    X, y = gaussian_blobs(n=1500, k=5, spread=1.2)
    kw = dict(confidence_level=0.9, random_state=0)
    rob = RobustFederatedConformal(LogisticRegression(), **kw).fit(X, y)
    split = SplitConformalClassifier(LogisticRegression(), **kw).fit(X, y)
    assert rob.n_clients_ == 1 and rob.n_malicious_ == 0
    assert rob.qhat_ == pytest.approx(split.qhat_)
    np.testing.assert_array_equal(rob.predict_set(X[:200]), split.predict_set(X[:200]))
    assert rob.score(X[:200], y[:200]) == pytest.approx(split.score(X[:200], y[:200]))


def test_client_ids_per_sample_equal_the_score_level_algorithm(gaussian_blobs):
    """fit(X, y, clients=ids) runs Algorithm 1 on each client's scores: the same threshold as
    rob_fcp_quantile on the per-client score arrays; ids may be strings and in any order."""
    X, y = gaussian_blobs(n=1500, k=5, spread=1.2, seed=1)
    clf = LogisticRegression().fit(X[:500], y[:500])
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.repeat(np.array([f"hospital-{i:02d}" for i in range(10)]), 100))
    rob = RobustFederatedConformal(clf, prefit=True, n_bins=20).fit(X[500:], y[500:], clients=ids)
    scores = lac_scores(clf.predict_proba(X[500:]), y[500:])
    per_client = [scores[ids == c] for c in np.unique(ids)]
    assert rob.qhat_ == rob_fcp_quantile(per_client, 0.1, n_bins=20).qhat
    assert rob.n_clients_ == 10 and set(rob.benign_clients_) <= set(ids)
    # and through the one-call fit, clients are split along with (X, y)
    one = RobustFederatedConformal(LogisticRegression(), n_bins=20, random_state=0).fit(X, y, clients=np.arange(1500) % 6)
    assert one.n_clients_ == 6 and one.n_calibration_ == 375
    cv = cross_val_score(RobustFederatedConformal(n_bins=20, random_state=0), X, y, cv=3,
                         params={"clients": np.arange(1500) % 6})
    assert np.isfinite(cv).all() and (cv > 0.2).all()


def test_byzantine_clients_reported_scores_are_caught(gaussian_blobs):
    """The attack the paper studies: clients report fake scores (here the efficiency attack, score 1). Rob-FCP
    flags the liars and keeps informative sets at the level; undefended FCP shows every label."""
    X, y = gaussian_blobs(n=3000, k=5, spread=1.2, seed=2)
    clf = LogisticRegression(C=0.05).fit(X[:500], y[:500])
    cal = lac_scores(clf.predict_proba(X[500:2500]), y[500:2500])
    liars = [1, 2, 5, 8, 11, 13, 17, 19]
    clients = apply_attack(list(cal.reshape(20, 100)), liars, "efficiency")  # 8 of 20 clients report score 1
    rob = RobustFederatedConformal(clf, prefit=True, n_bins=20).conformalize_scores(clients)
    assert rob.malicious_clients_.tolist() == liars
    sets = rob.predict_set(X[2500:])
    assert 0.85 < marginal_coverage(sets, y[2500:]) < 0.96 and sets.sum(1).mean() < 3
    naive = lac_scores(clf.predict_proba(X[2500:])) <= fcp_quantile(clients, 0.1)
    assert naive.all()


def test_bad_input_names_the_argument(gaussian_blobs):
    X, y = gaussian_blobs(n=200, k=5, spread=1.2)
    with pytest.raises(ValueError, match="clients"):
        RobustFederatedConformal().fit(X, y, clients=np.arange(10))
    with pytest.raises(ValueError, match="confidence_level"):
        RobustFederatedConformal(confidence_level=1.5).fit(X, y)
    with pytest.raises(TypeError, match="client_scores"):
        RobustFederatedConformal().conformalize_scores(3)
    with pytest.raises(ValueError, match="bounds"):
        RobustFederatedConformal("precomputed", conformity_score="raps").conformalize_scores([np.ones(5)] * 3)
