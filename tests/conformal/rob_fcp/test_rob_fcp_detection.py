"""Pairwise distances, maliciousness scores, benign selection and the malicious-count estimator."""

import heapq

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.conformal.rob_fcp import (
    detect_malicious,
    estimate_num_malicious,
    maliciousness_scores,
    pairwise_distances,
    select_benign,
)


def benign_vectors(rng, k, h=10, n=200):
    """Histograms of n draws from one fixed distribution (an IID federation)."""
    p = np.linspace(1, 2, h)
    p /= p.sum()
    return rng.multinomial(n, p, size=k) / n


@pytest.mark.parametrize("ord", [1, 2, np.inf])
def test_distances_match_loop(ord):
    v = np.random.default_rng(0).uniform(size=(6, 5))
    d = pairwise_distances(v, ord)
    for i in range(6):
        for j in range(6):
            assert d[i, j] == pytest.approx(np.linalg.norm(v[i] - v[j], ord=ord))


def test_nearest_scores_match_brute_force():
    rng = np.random.default_rng(1)
    d = pairwise_distances(rng.uniform(size=(9, 4)))
    for kb in (1, 2, 5, 9):
        m = maliciousness_scores(d, kb, neighbor_mode="nearest")
        for i in range(9):
            others = sorted(d[i, j] for j in range(9) if j != i)
            assert m[i] == pytest.approx(sum(others[: kb - 1]))


def test_farthest_scores_match_official_code():
    # Official cal_score: heapq.nlargest(K_b - 1) over the full row, self-distance included.
    rng = np.random.default_rng(2)
    d = pairwise_distances(rng.uniform(size=(8, 3)))
    m = maliciousness_scores(d, 6, neighbor_mode="farthest")
    ref = [d[i][heapq.nlargest(5, range(8), d[i].__getitem__)].sum() for i in range(8)]
    np.testing.assert_allclose(m, ref)


def test_select_benign_breaks_ties_by_index():
    np.testing.assert_array_equal(select_benign(np.array([1.0, 0.0, 1.0, 1.0]), 2), [0, 1])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.sampled_from(["nearest", "farthest"]))
def test_identical_attack_vectors_are_always_flagged(seed, n_mal, mode):
    rng = np.random.default_rng(seed)
    k = 20
    v = benign_vectors(rng, k)
    bad = rng.choice(k, n_mal, replace=False)
    v[bad] = np.eye(10)[rng.integers(0, 10)]  # every attacker reports the same point mass
    det = detect_malicious(v, n_mal, neighbor_mode=mode)
    np.testing.assert_array_equal(det.malicious, np.sort(bad))
    np.testing.assert_array_equal(np.sort(np.concatenate([det.benign, det.malicious])), np.arange(k))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_detection_is_permutation_equivariant(seed):
    rng = np.random.default_rng(seed)
    v = benign_vectors(rng, 12)
    v[:3] = rng.dirichlet(np.ones(10), size=3)
    perm = rng.permutation(12)
    a = detect_malicious(v, 3)
    b = detect_malicious(v[perm], 3)
    np.testing.assert_allclose(b.maliciousness, a.maliciousness[perm])
    np.testing.assert_array_equal(np.sort(perm[b.malicious]), a.malicious)


@pytest.mark.parametrize("variance", ["unit", "mle"])
@pytest.mark.parametrize("n_mal", [1, 3, 6, 8])
def test_estimator_recovers_well_separated_count(n_mal, variance):
    rng = np.random.default_rng(n_mal)
    k, h = 20, 8
    v = 0.5 + 0.01 * rng.standard_normal((k, h))
    bad = rng.choice(k, n_mal, replace=False)
    v[bad] = 0.9 + 0.01 * rng.standard_normal((n_mal, h))
    est = estimate_num_malicious(v, variance=variance)
    assert est.n_malicious == n_mal
    assert set(est.order[k - n_mal :].tolist()) == set(bad.tolist())
    assert est.candidates[np.argmax(est.objective)] == n_mal


def test_estimator_candidate_range_and_objective_shape():
    v = benign_vectors(np.random.default_rng(3), 11)
    est = estimate_num_malicious(v, min_malicious=2, max_malicious=4)
    np.testing.assert_array_equal(est.candidates, [2, 3, 4])
    assert est.objective.shape == (3,)
    assert estimate_num_malicious(v).candidates.max() == 5  # largest m < K / 2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda v: detect_malicious(v, 5), "n_malicious"),
        (lambda v: detect_malicious(v, -1), "n_malicious"),
        (lambda v: detect_malicious(v[0], 1), "2-D"),
        (lambda v: maliciousness_scores(pairwise_distances(v), 11), "n_benign"),
        (lambda v: maliciousness_scores(pairwise_distances(v), 3, neighbor_mode="median"), "neighbor_mode"),
        (lambda v: pairwise_distances(v, ord=3), "ord"),
        (lambda v: estimate_num_malicious(v[:2]), "at least 3"),
        (lambda v: estimate_num_malicious(v, max_malicious=5), "max_malicious"),
        (lambda v: estimate_num_malicious(v, variance="full"), "variance"),
        (lambda v: detect_malicious(np.full((3, 2), np.nan), 1), "NaN"),
    ],
)
def test_bad_input(call, match):
    v = benign_vectors(np.random.default_rng(0), 10)
    with pytest.raises(ValueError, match=match):
        call(v)
