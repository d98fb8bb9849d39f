"""Hypothesis property tests of the conformal core."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from icml24.conformal import (
    SplitConformalClassifier,
    aps_scores,
    conformal_quantile,
    conformal_rank,
    lac_scores,
    prediction_sets,
    raps_scores,
    sets_from_probs,
)


@st.composite
def probs_and_labels(draw, max_n=30, max_k=8):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, max_k))
    raw = draw(arrays(np.float64, (n, k), elements=st.floats(0.0, 1.0)))
    # snap to a coarse grid so ties (the hard case for ranking) are frequent
    raw = np.round(raw, 1) + 1e-3
    probs = raw / raw.sum(axis=1, keepdims=True)
    labels = draw(arrays(np.int64, (n,), elements=st.integers(0, k - 1)))
    return probs, labels


@st.composite
def score_kind(draw):
    name = draw(st.sampled_from(["lac", "aps", "raps"]))
    lam = draw(st.sampled_from([0.0, 0.01, 0.5]))
    k_reg = draw(st.integers(0, 4))
    if name == "lac":
        return lambda p, y=None: lac_scores(p, y)
    if name == "aps":
        return lambda p, y=None: aps_scores(p, y)
    return lambda p, y=None: raps_scores(p, y, lam=lam, k_reg=k_reg)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(probs_and_labels(), score_kind())
def test_label_scores_match_matrix_entries(data, fn):
    p, y = data
    np.testing.assert_allclose(fn(p, y), fn(p)[np.arange(len(y)), y], atol=1e-12)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(probs_and_labels(), st.booleans(), st.integers(0, 2**31))
def test_randomized_scores_match_matrix_and_bounds(data, randomized, seed):
    p, y = data
    s_lab = aps_scores(p, y, randomized=randomized, rng=seed)
    s_mat = aps_scores(p, randomized=randomized, rng=seed)
    np.testing.assert_allclose(s_lab, s_mat[np.arange(len(y)), y], atol=1e-12)
    assert np.all(s_mat >= -1e-12) and np.all(s_mat <= 1 + 1e-9)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(probs_and_labels(), st.integers(0, 5), st.integers(0, 2**31))
def test_raps_with_zero_lambda_is_aps(data, k_reg, seed):
    p, y = data
    np.testing.assert_array_equal(
        raps_scores(p, lam=0.0, k_reg=k_reg, randomized=True, rng=seed), aps_scores(p, randomized=True, rng=seed)
    )


@settings(max_examples=60, deadline=None, derandomize=True)
@given(probs_and_labels(), score_kind(), st.integers(0, 2**31))
def test_sets_are_prefixes_of_the_ranking(data, fn, seed):
    """A label is in the set only if every strictly more probable label is too (all three scores)."""
    p, _ = data
    S = fn(p)
    q = np.quantile(S, np.random.default_rng(seed).random())
    sets = prediction_sets(S, q)
    more_probable = p[:, None, :] > p[:, :, None]  # [i, j, l]: label l beats label j
    violates = sets[:, :, None] & more_probable & ~sets[:, None, :]
    assert not violates.any()


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    arrays(np.float64, st.integers(1, 60), elements=st.floats(-5, 5)),
    st.floats(0.01, 0.99),
    st.floats(0.01, 0.99),
)
def test_quantile_is_an_order_statistic_and_monotone(scores, a1, a2):
    n = scores.size
    q1 = conformal_quantile(scores, a1)
    k = conformal_rank(n, a1)
    if k > n:
        assert q1 == np.inf
    else:
        assert q1 in scores
        # at least k of the calibration scores are <= qhat: in-sample coverage >= k / n >= (1-alpha)(1+1/n)
        assert (scores <= q1).sum() >= k
        assert (scores < q1).sum() < k
    lo, hi = sorted((a1, a2))
    assert conformal_quantile(scores, lo) >= conformal_quantile(scores, hi)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(probs_and_labels(), score_kind(), st.floats(0.01, 0.5), st.floats(0.01, 0.5))
def test_sets_nested_in_alpha(data, fn, a1, a2):
    p, y = data
    lo, hi = sorted((a1, a2))
    cal = fn(p, y)
    big = prediction_sets(fn(p), conformal_quantile(cal, lo))
    small = prediction_sets(fn(p), conformal_quantile(cal, hi))
    assert not (small & ~big).any()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(probs_and_labels(), st.integers(0, 2**31))
def test_allow_empty_false_never_empty_and_superset(data, seed):
    p, y = data
    S = aps_scores(p, randomized=True, rng=seed)
    q = conformal_quantile(aps_scores(p, y, randomized=True, rng=seed + 1), 0.3)
    base = prediction_sets(S, q)
    nonempty = prediction_sets(S, q, allow_empty=False)
    assert nonempty.any(axis=1).all()
    assert not (base & ~nonempty).any()
    assert (nonempty.sum(1) - base.sum(1)).max() <= 1


@settings(max_examples=30, deadline=None, derandomize=True)
@given(probs_and_labels(max_k=6), st.randoms(use_true_random=False))
def test_lac_and_aps_equivariant_to_class_permutation(data, rnd):
    p, _ = data
    perm = np.array(rnd.sample(range(p.shape[1]), p.shape[1]))
    np.testing.assert_allclose(lac_scores(p[:, perm]), lac_scores(p)[:, perm])
    # APS breaks ties by class index, so equivariance holds on rows without ties
    distinct = np.array([len(np.unique(r)) == len(r) for r in p])
    np.testing.assert_allclose(aps_scores(p[distinct][:, perm]), aps_scores(p[distinct])[:, perm], atol=1e-12)


def test_wrapper_is_a_sklearn_estimator_and_deterministic():
    cp = SplitConformalClassifier(LogisticRegression(C=0.5), confidence_level=0.8, conformity_score="raps", lam=0.1,
                                  randomized=True, calibration_size=None,
                                  random_state=3)
    params = cp.get_params()
    assert params["confidence_level"] == 0.8 and params["conformity_score"] == "raps" and params["estimator__C"] == 0.5
    twin = clone(cp)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + rng.normal(size=200) > 0).astype(int) + (X[:, 1] > 1)
    a = cp.fit(X[:80], y[:80]).conformalize(X[80:140], y[80:140]).predict_set(X[140:])
    b = twin.fit(X[:80], y[:80]).conformalize(X[80:140], y[80:140]).predict_set(X[140:])
    np.testing.assert_array_equal(a, b)
    assert a.shape == (60, 3) and a.dtype == bool
    assert cp.n_calibration_ == 60 and np.isfinite(cp.qhat_)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(
    probs_and_labels(max_n=40, max_k=9),
    st.sampled_from(["lac", "aps", "raps"]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0.0, 0.02, 0.3]),
    st.integers(0, 4),
    st.integers(0, 2**31),
    st.booleans(),
)
def test_fast_sets_equal_score_matrix_sets(data, score, randomized, allow_empty, lam, k_reg, seed, f32):
    """sets_from_probs (sorted values, no argsort) == prediction_sets(score matrix), ties included."""
    p, y = data
    if f32:
        p = p.astype(np.float32)
    kw = {"randomized": randomized, "rng": seed}
    if score == "lac":
        mat = lac_scores(p)
    elif score == "aps":
        mat = aps_scores(p, **kw)
    else:
        mat = raps_scores(p, lam=lam, k_reg=k_reg, **kw)
    # thresholds at, between and beyond the matrix's own values (the exact-tie cases matter most)
    for q in (*np.unique(mat)[:: max(1, mat.size // 7)], 0.5, -1.0, np.inf):
        want = prediction_sets(mat, q, allow_empty=allow_empty)
        got = sets_from_probs(p, q, score=score, lam=lam, k_reg=k_reg, allow_empty=allow_empty, **kw)
        np.testing.assert_array_equal(got, want)
