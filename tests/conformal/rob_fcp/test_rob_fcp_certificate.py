"""The coverage certificate: closed form, monotonicity, limits, bad input."""

import numpy as np
import pytest
from scipy.stats import norm

from icml24.conformal.rob_fcp import rob_fcp_bound


def test_closed_form_by_hand():
    # K=10, K_b=8 (tau=0.25), n_b=20000, H=5, beta=0.05, alpha=0.1, eps=0, N=n_b (official code).
    z = norm.ppf(1 - 0.05 / (2 * 5 * 8))
    gap = 5 * z / (2 * np.sqrt(20000)) * (1 + 2 * 0.25 / 0.75)
    b = rob_fcp_bound(10, 8, 20000, n_bins=5, alpha=0.1, beta=0.05)
    assert b.p_gap == pytest.approx(gap)
    assert b.lower == pytest.approx(0.9 - gap - 1 / 20008)
    assert b.upper == pytest.approx(0.9 + 8 / 20008 + gap)


def test_total_sample_count_and_sketch_error_terms():
    b = rob_fcp_bound(10, 8, 20000, n_bins=5, eps=0.01, n_total=160000)
    assert b.lower == pytest.approx(0.9 - b.p_gap - (0.01 * 160000 + 1) / 160008)
    assert b.upper == pytest.approx(min(0.9 + 0.01 + 8 / 160008 + b.p_gap, 1.0))


def test_monotone_in_tau_bins_and_sample_size():
    lowers_tau = [rob_fcp_bound(20, 20 - m, 50000, n_bins=5).lower for m in range(0, 9)]
    assert all(a > b for a, b in zip(lowers_tau, lowers_tau[1:]))  # widens with tau
    lowers_h = [rob_fcp_bound(20, 16, 50000, n_bins=h).lower for h in (2, 5, 10, 20)]
    assert all(a > b for a, b in zip(lowers_h, lowers_h[1:]))  # widens with H
    lowers_n = [rob_fcp_bound(20, 16, n, n_bins=5).lower for n in (10**4, 10**5, 10**6)]
    assert all(a < b for a, b in zip(lowers_n, lowers_n[1:]))  # narrows with n_b


@pytest.mark.parametrize("m", [0, 3, 6])
def test_lower_below_target_below_upper(m):
    b = rob_fcp_bound(15, 15 - m, 1000, n_bins=20, alpha=0.1)
    assert 0.0 <= b.lower <= 0.9 <= b.upper <= 1.0


def test_no_attackers_and_infinite_data_recovers_fcp_interval():
    b = rob_fcp_bound(10, 10, 10**14, n_bins=2, alpha=0.1, n_total=10**15)
    assert b.lower == pytest.approx(0.9, abs=1e-5)
    assert b.upper == pytest.approx(0.9, abs=1e-5)


def test_clipped_when_vacuous():
    b = rob_fcp_bound(100, 60, 50, n_bins=100)
    assert (b.lower, b.upper) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((10, 5, 100), {}, "tau"),
        ((10, 11, 100), {}, "exceed"),
        ((10, 8, 0), {}, "n_per_client"),
        ((10, 8, 100), {"alpha": 0.0}, "alpha"),
        ((10, 8, 100), {"beta": 1.0}, "beta"),
        ((10, 8, 100), {"eps": -0.1}, "eps"),
        ((10, 8, 100), {"n_bins": 0}, "n_bins"),
    ],
)
def test_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        rob_fcp_bound(*args, **kwargs)


def test_rob_fcp_coverage_lies_inside_the_certificate_under_attack():
    """Uniform benign scores: the coverage of threshold q is q itself. 10 clients of 20,000 scores, two
    coverage attackers, H = 10: every seed's coverage must lie in the certified interval."""
    from icml24.conformal.rob_fcp import apply_attack, rob_fcp_quantile

    bound = rob_fcp_bound(10, 8, 20000, n_bins=10, alpha=0.1, beta=0.05)
    assert bound.lower > 0.6  # the check is informative
    for seed in range(10):
        rng = np.random.default_rng(seed)
        clients = apply_attack([rng.uniform(size=20000) for _ in range(10)], [3, 7], "coverage")
        coverage = min(rob_fcp_quantile(clients, 0.1, 2, n_bins=10).qhat, 1.0)
        assert bound.lower <= coverage <= bound.upper
