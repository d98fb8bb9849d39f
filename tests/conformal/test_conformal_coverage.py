"""The split conformal theorem, tested statistically, plus bad-input checks.

Tolerance. For continuous scores, ``n`` calibration points and ``k = ceil((n+1)(1-alpha))``, the coverage of
one split conditional on its calibration set is ``C ~ Beta(k, n + 1 - k)`` (Vovk 2012; Angelopoulos & Bates
2021, Sec. 3.2), so ``E[C] = k / (n + 1)`` lies in ``[1 - alpha, 1 - alpha + 1/(n+1)]``. The empirical test
coverage of a split with ``m`` test points has variance ``Var(C) + E[C(1 - C)] / m``. Over ``R`` independent
splits the mean coverage then has standard error ``se = sqrt(that / R)``, and we require
``1 - alpha - 3 se <= mean <= 1 - alpha + 1/(n+1) + 3 se`` (a false alarm has probability ~0.1% per side).
"""

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from icml24.conformal import (
    SplitConformalClassifier,
    aps_scores,
    conformal_quantile,
    conformal_rank,
    covered,
    lac_scores,
    prediction_sets,
    raps_scores,
)


def coverage_band(n: int, m: int, R: int, alpha: float, z: float = 3.0) -> tuple[float, float]:
    k = conformal_rank(n, alpha)
    a, b = k, n + 1 - k
    mean = a / (a + b)
    var_c = a * b / ((a + b) ** 2 * (a + b + 1))
    e_c1mc = mean - (var_c + mean**2)  # E[C] - E[C^2]
    se = math.sqrt((var_c + e_c1mc / m) / R)
    return 1 - alpha - z * se, 1 - alpha + 1 / (n + 1) + z * se


def _synthetic(rng, size, k=8):
    """Exchangeable data from a model that is wrong: labels come from a flattened version of probs."""
    logits = rng.normal(size=(size, k)) * 2.0
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    truth = 0.6 * probs + 0.4 / k
    y = np.minimum((rng.random(size)[:, None] > np.cumsum(truth, axis=1)).sum(1), k - 1)
    return probs, y


SCORE_FNS = {
    "lac": lambda p, y=None, rng=None: lac_scores(p, y),
    "aps_rand": lambda p, y=None, rng=None: aps_scores(p, y, randomized=True, rng=rng),
    "raps_rand": lambda p, y=None, rng=None: raps_scores(p, y, lam=0.1, k_reg=2, randomized=True, rng=rng),
}


@pytest.mark.parametrize("score", sorted(SCORE_FNS))
@pytest.mark.parametrize("alpha,n", [(0.1, 100), (0.2, 49), (0.05, 300)])
def test_coverage_over_random_splits_within_beta_band(score, alpha, n):
    R, m = 300, 200
    rng = np.random.default_rng(12345)
    fn = SCORE_FNS[score]
    cov = np.empty(R)
    for r in range(R):
        p, y = _synthetic(rng, n + m)
        qhat = conformal_quantile(fn(p[:n], y[:n], rng), alpha)
        cov[r] = covered(prediction_sets(fn(p[n:], None, rng), qhat), y[n:]).mean()
    lo, hi = coverage_band(n, m, R, alpha)
    assert lo <= cov.mean() <= hi, (cov.mean(), lo, hi)


def test_uncorrected_quantile_undercovers_negative_control():
    """The test above can fail: the naive in-sample quantile (rank ceil(n(1-alpha)) - 1, i.e. no (n+1)
    correction and one rank lower) at small n falls below the band."""
    alpha, n, m, R = 0.1, 19, 200, 300
    rng = np.random.default_rng(1)
    cov = np.empty(R)
    for r in range(R):
        p, y = _synthetic(rng, n + m)
        s = np.sort(lac_scores(p[:n], y[:n]))
        qhat = s[math.ceil(n * (1 - alpha)) - 2]
        cov[r] = covered(prediction_sets(lac_scores(p[n:]), qhat), y[n:]).mean()
    lo, _ = coverage_band(n, m, R, alpha)
    assert cov.mean() < lo


@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
def test_wrapper_coverage_on_fresh_splits(score):
    """SplitConformalClassifier around a fixed logistic regression, fresh exchangeable cal/test draws."""
    rng = np.random.default_rng(5)
    k, d = 6, 5
    centers = rng.normal(size=(k, d)) * 1.2

    def draw(size):
        y = rng.integers(0, k, size)
        return centers[y] + rng.normal(size=(size, d)), y

    clf = LogisticRegression(max_iter=300).fit(*draw(300))
    alpha, n, m, R = 0.1, 100, 200, 120
    cov = np.empty(R)
    cp = SplitConformalClassifier(clf, confidence_level=1 - alpha, conformity_score=score, prefit=True, lam=0.05, k_reg=2)
    for r in range(R):
        Xc, yc = draw(n)
        Xt, yt = draw(m)
        cov[r] = covered(cp.conformalize(Xc, yc).predict_set(Xt), yt).mean()
    lo, _ = coverage_band(n, m, R, alpha)
    assert cov.mean() >= lo  # deterministic scores may over-cover (ties), so only the lower side


# ------------------------------------------------------------------ bad input
GOOD = np.array([[0.2, 0.8], [0.5, 0.5]])


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan"), float("inf")])
def test_alpha_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        conformal_quantile([0.1, 0.2], alpha)
    with pytest.raises(ValueError, match="confidence_level"):
        SplitConformalClassifier(LogisticRegression(), confidence_level=1 - alpha).fit(np.eye(2), [0, 1])


@pytest.mark.parametrize("alpha", ["0.1", None, True])
def test_alpha_wrong_type(alpha):
    with pytest.raises(TypeError, match="alpha"):
        conformal_quantile([0.1, 0.2], alpha)


def test_empty_calibration():
    with pytest.raises(ValueError, match="empty"):
        conformal_quantile([], 0.1)
    clf = LogisticRegression().fit(np.eye(4), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="empty"):
        SplitConformalClassifier(clf, prefit=True).conformalize(np.empty((0, 4)), np.empty(0, dtype=int))


@pytest.mark.parametrize("fn", [lac_scores, aps_scores, raps_scores])
@pytest.mark.parametrize(
    "probs,match",
    [
        (np.array([[np.nan, 1.0], [0.5, 0.5]]), "NaN"),
        (np.array([[np.inf, 0.0], [0.5, 0.5]]), "NaN or infinite"),
        (np.array([[-0.1, 1.1], [0.5, 0.5]]), "negative"),
        (np.array([[0.2, 0.7], [0.5, 0.5]]), "sum to 1"),
        (np.array([[2.0, 3.0], [1.0, 0.5]]), "sum to 1"),
        (np.array([0.5, 0.5]), "2-D"),
    ],
)
def test_bad_probabilities(fn, probs, match):
    with pytest.raises(ValueError, match=match):
        fn(probs)
    with pytest.raises(ValueError, match=match):
        fn(probs, np.zeros(len(probs), dtype=int))


@pytest.mark.parametrize("fn", [lac_scores, aps_scores, raps_scores])
def test_labels_outside_classes(fn):
    with pytest.raises(ValueError, match=r"labels must be class indices in \[0, 2\)"):
        fn(GOOD, np.array([0, 2]))
    with pytest.raises(ValueError, match="labels"):
        fn(GOOD, np.array([-1, 0]))
    with pytest.raises(ValueError, match="labels"):
        fn(GOOD, np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="3 entries"):
        fn(GOOD, np.array([0, 1, 1]))


def test_wrapper_labels_outside_classes_and_order_of_calls():
    from sklearn.exceptions import NotFittedError

    X = np.random.default_rng(0).normal(size=(30, 3))
    y = np.array(["a", "b", "c"] * 10)
    cp = SplitConformalClassifier(LogisticRegression(), confidence_level=0.8, calibration_size=None)
    with pytest.raises(NotFittedError):
        cp.conformalize(X, y)
    with pytest.raises(NotFittedError):
        cp.predict_set(X)
    cp.fit(X, y)
    with pytest.raises(NotFittedError, match="conformalize"):
        cp.predict_set(X)  # calibration_size=None: fit does not conformalize
    with pytest.raises(ValueError, match="not among the classes"):
        cp.conformalize(X[:3], np.array(["a", "b", "z"]))
    Xi, yi = X, np.arange(30) % 3
    cpi = SplitConformalClassifier(LogisticRegression(), confidence_level=0.8, calibration_size=None).fit(Xi, yi)
    with pytest.raises(ValueError, match=r"y_conformalize must be class indices in \[0, 3\)"):
        cpi.conformalize(Xi[:3], np.array([0, 1, 3]))
    with pytest.raises(NotFittedError, match="prefit"):
        SplitConformalClassifier(LogisticRegression(), prefit=True).conformalize(X, y)
    with pytest.raises(ValueError, match="conformity_score"):
        SplitConformalClassifier(LogisticRegression(), conformity_score="thr").fit(X, y)
    with pytest.raises(TypeError, match="predict_proba"):
        SplitConformalClassifier(object()).fit(X, y)
    with pytest.raises(TypeError, match="lam"):
        SplitConformalClassifier(LogisticRegression(), lam=None).fit(X, y)
    with pytest.raises(ValueError, match="k_reg"):
        SplitConformalClassifier(LogisticRegression(), k_reg=1.5).fit(X, y)
    with pytest.raises(TypeError, match="randomized"):
        SplitConformalClassifier(LogisticRegression(), randomized="yes").fit(X, y)
    with pytest.raises(ValueError, match="calibration_size"):
        SplitConformalClassifier(LogisticRegression(), calibration_size=1.5).fit(X, y)
    with pytest.raises(TypeError, match="confidence_level"):
        SplitConformalClassifier(LogisticRegression(), confidence_level="0.9").fit(X, y)


def test_small_calibration_set_warns_and_gives_full_sets():
    """At level 0.9 split conformal needs n >= 9; with 8 calibration points qhat = +inf (all-label sets), and
    the user is told so instead of getting trivial sets silently."""
    from icml24.conformal import SmallCalibrationWarning, min_calibration_size

    assert [min_calibration_size(c) for c in (0.5, 0.8, 0.9, 0.95, 0.99)] == [1, 4, 9, 19, 99]
    for level in (0.8, 0.9, 0.95):
        n = min_calibration_size(level)
        assert math.isinf(conformal_quantile(np.arange(n - 1.0), 1 - level)) if n > 1 else True
        assert math.isfinite(conformal_quantile(np.arange(float(n)), 1 - level))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = LogisticRegression().fit(X, y)
    cp = SplitConformalClassifier(clf, confidence_level=0.9, prefit=True)
    with pytest.warns(SmallCalibrationWarning, match="at least 9"):
        cp.conformalize(X[:8], y[:8])
    assert cp.predict_set(X[8:]).all()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallCalibrationWarning)
        cp.conformalize(X[:9], y[:9])
    assert not cp.predict_set(X[9:]).all()


def test_raps_parameter_checks():
    with pytest.raises(ValueError, match="lam"):
        raps_scores(GOOD, lam=-1.0)
    with pytest.raises(ValueError, match="k_reg"):
        raps_scores(GOOD, k_reg=-1)
    with pytest.raises(TypeError, match="rng"):
        aps_scores(GOOD, randomized=True, rng="seed")
