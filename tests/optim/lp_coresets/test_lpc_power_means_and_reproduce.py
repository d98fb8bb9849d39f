"""Power means (closed forms, exactness at k = n, rates) and the reproduction's smoke run."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common.experiment import execute_job
from icml24.optim.lp_coresets import (
    power_mean_cost,
    power_mean_excess,
    power_mean_rate,
    solve_power_mean,
    uniform_power_mean,
)
from icml24.optim.lp_coresets.reproduce import REPRODUCTION


def points(n=500, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3)) * [1.0, 2.0, 0.5] + 1.0


def test_p2_power_mean_is_the_mean_and_the_weak_error_has_a_closed_form():
    P = points()
    x = solve_power_mean(P, 2.0)
    assert np.allclose(x, P.mean(0))
    S = P[np.random.default_rng(1).choice(len(P), 50, replace=False)]
    xs = solve_power_mean(S, 2.0)
    closed = len(P) * np.sum((xs - x) ** 2) / power_mean_cost(P, x, 2.0)
    assert np.isclose(power_mean_excess(P, xs, x, 2.0), closed)


@pytest.mark.parametrize("p", [1.0, 1.5, 3.0])
def test_k_equal_n_gives_the_exact_minimiser(p):
    P = points(200)
    x = solve_power_mean(P, p)
    assert abs(power_mean_excess(P, uniform_power_mean(P, p, len(P), 0), x, p)) < 1e-8


@pytest.mark.parametrize("p", [1.0, 1.5, 3.0])
def test_solver_beats_perturbations(p):
    P = points(300, seed=2)
    x = solve_power_mean(P, p)
    f = power_mean_cost(P, x, p)
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert power_mean_cost(P, x + 1e-3 * rng.standard_normal(3), p) >= f * (1 - 1e-10)


def test_one_dimensional_p1_is_the_median():
    b = np.random.default_rng(3).standard_normal((301, 1))
    assert np.isclose(solve_power_mean(b, 1.0)[0], np.median(b), atol=1e-6)


def test_rates():
    assert power_mean_rate(1.0) == 0.5 and power_mean_rate(1.5) == 1.0 and power_mean_rate(3.0) == 0.5
    assert np.isclose(power_mean_rate(5.0), 0.25)
    with pytest.raises(ValueError):
        power_mean_rate(0.5)
    with pytest.raises(ValueError, match="k must be in"):
        uniform_power_mean(points(10), 1.5, 11)
    with pytest.raises(ValueError, match="p must be"):
        solve_power_mean(points(10), 0.0)


def test_smoke_reproduction_runs_and_is_deterministic():
    jobs = REPRODUCTION.jobs("smoke")
    results = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.status != "ok"]
    assert execute_job(jobs[0]).metrics == results[0].metrics
    analysis = REPRODUCTION.analyze(results, "smoke")
    assert analysis.verdict in ("supported", "not_supported", "inconclusive") and analysis.checks
    assert REPRODUCTION.analyze(results[:1], "smoke").verdict in (
        "supported",
        "not_supported",
        "inconclusive",
    )
    assert REPRODUCTION.analyze([], "smoke").verdict == "inconclusive"
