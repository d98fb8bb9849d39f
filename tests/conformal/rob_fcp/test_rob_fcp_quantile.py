"""Federated quantiles, Rob-FCP vs FCP identities, and the coverage guarantee without attackers."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.conformal import conformal_quantile
from icml24.conformal.rob_fcp import (
    client_histograms,
    fcp_quantile,
    federated_quantile,
    federated_rank,
    histogram_quantile,
    oracle_quantile,
    rob_fcp_quantile,
)


def test_ranks_by_hand():
    assert federated_rank(100, 10, 0.1, "fcp") == 99  # ceil(0.9 * 110)
    assert federated_rank(100, 10, 0.1, "split") == 91  # ceil(0.9 * 101)
    assert federated_rank(9, 1, 0.1, "fcp") == 9  # 0.9 * 10 = 9 exactly, no float push to 10
    with pytest.raises(ValueError, match="rank_rule"):
        federated_rank(10, 2, 0.1, "median")


def test_fcp_quantile_by_hand_and_infinite_rank():
    clients = [np.arange(1.0, 6.0), np.arange(6.0, 11.0)]
    assert federated_quantile(clients, 0.2) == 10.0  # ceil(0.8 * 12) = 10th smallest
    assert federated_quantile(clients, 0.2, rank_rule="split") == 9.0  # ceil(0.8 * 11) = 9
    assert federated_quantile(clients, 0.05) == math.inf  # ceil(0.95 * 12) = 12 > 10


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=30), min_size=1, max_size=5), st.floats(0.01, 0.5))
def test_split_rule_equals_core_split_conformal_on_pooled_scores(clients, alpha):
    pooled = np.concatenate([np.asarray(c) for c in clients])
    assert federated_quantile(clients, alpha, rank_rule="split") == conformal_quantile(pooled, alpha)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.integers(2, 60), st.sampled_from([0.05, 0.1, 0.2]))
def test_histogram_quantile_is_conservative_by_at_most_one_bin(seed, n_bins, alpha):
    rng = np.random.default_rng(seed)
    clients = [rng.beta(2, 3, size=rng.integers(5, 40)) for _ in range(rng.integers(1, 6))]
    exact = federated_quantile(clients, alpha)
    approx = histogram_quantile(client_histograms(clients, n_bins, normalize=False), alpha)
    if math.isinf(exact):
        assert math.isinf(approx)
    else:
        assert exact <= approx <= exact + 1.0 / n_bins + 1e-12


def test_histogram_quantile_pooled_form_and_bad_counts():
    counts = np.array([[2, 0, 1, 1], [0, 3, 1, 2]])
    assert histogram_quantile(counts, 0.3) == histogram_quantile(counts.sum(0), 0.3, n_clients=2)
    with pytest.raises(ValueError, match="n_clients"):
        histogram_quantile(counts.sum(0), 0.3)
    with pytest.raises(ValueError, match="integer-valued"):
        histogram_quantile(np.array([[0.5, 1.0]]), 0.3)
    with pytest.raises(ValueError, match="all zero"):
        histogram_quantile(np.zeros((2, 3)), 0.3)


def test_no_attack_and_no_detection_equals_fcp_exactly():
    rng = np.random.default_rng(0)
    clients = [rng.uniform(size=50) for _ in range(10)]
    for rule in ("fcp", "split"):
        res = rob_fcp_quantile(clients, 0.1, 0, n_bins=20, rank_rule=rule)
        assert res.qhat == fcp_quantile(clients, 0.1, rank_rule=rule)
        assert res.malicious.size == 0


def test_known_malicious_and_oracle_agree_when_detection_is_right():
    rng = np.random.default_rng(1)
    clients = [rng.uniform(size=100) for _ in range(10)] + [np.zeros(100), np.zeros(100)]
    res = rob_fcp_quantile(clients, 0.1, 2, n_bins=10)
    assert res.qhat == oracle_quantile(clients, range(10), 0.1)
    assert fcp_quantile(clients, 0.1) < res.qhat  # the coverage attack drags plain FCP down


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_qhat_is_invariant_to_relabelling_clients(seed):
    rng = np.random.default_rng(seed)
    clients = [rng.beta(2, 4, size=40) for _ in range(9)] + [np.ones(40), rng.uniform(size=40)]
    perm = rng.permutation(len(clients))
    a = rob_fcp_quantile(clients, 0.1, 2, n_bins=10)
    b = rob_fcp_quantile([clients[i] for i in perm], 0.1, 2, n_bins=10)
    assert a.qhat == b.qhat


def test_coverage_without_attackers_over_200_seeds():
    """Theorem (FCP): coverage >= 1 - alpha. Mean over 200 seeds of exact coverage of a fresh test point,
    P[s_test <= qhat] = F(qhat) for uniform scores; one-sided tolerance 3 standard errors."""
    alpha, covs = 0.1, []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        clients = [rng.uniform(size=30) for _ in range(8)]
        q = rob_fcp_quantile(clients, alpha, 0, n_bins=10).qhat
        covs.append(min(q, 1.0))  # uniform scores: the conditional coverage is qhat itself
    covs = np.asarray(covs)
    assert covs.mean() >= 1 - alpha - 3 * covs.std(ddof=1) / np.sqrt(covs.size)
    assert covs.mean() >= 1 - alpha  # the FCP rank rule is conservative


def test_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        federated_quantile([[0.1]], 1.5)
    with pytest.raises(ValueError, match="empty"):
        federated_quantile([], 0.1)
    with pytest.raises(ValueError, match="empty"):
        federated_quantile([[]], 0.1)
    with pytest.raises(ValueError, match="NaN"):
        federated_quantile([[0.1, np.nan]], 0.1)
    with pytest.raises(ValueError, match="benign"):
        oracle_quantile([[0.1]], [], 0.1)
