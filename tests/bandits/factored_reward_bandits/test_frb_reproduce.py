"""The reproduction runs end to end at smoke scale, is deterministic, and its verdict rule reacts to numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from icml24.bandits.factored_reward_bandits.reproduce import REPRODUCTION, analyze
from icml24.common.experiment import VERDICTS, Job, JobResult, execute_job


@pytest.fixture(scope="module")
def smoke_results() -> list[JobResult]:
    return [execute_job(j) for j in REPRODUCTION.jobs("smoke")]


def test_every_scale_builds_jobs() -> None:
    for scale in REPRODUCTION.scales:
        jobs = REPRODUCTION.jobs(scale)
        assert jobs and {j.experiment for j in jobs} >= {"flat_vs_factored", "parallel_ftrack", "lp_check"}
        json.dumps([j.to_dict() for j in jobs])


def test_smoke_runs_and_analyzes(smoke_results: list[JobResult]) -> None:
    assert [r.error for r in smoke_results if r.status != "ok"] == []
    analysis = REPRODUCTION.analyze(smoke_results, "smoke")
    assert analysis.verdict in VERDICTS
    assert analysis.tables and analysis.figures and analysis.checks
    assert all(f.png.startswith(b"\x89PNG") for f in analysis.figures)
    json.dumps([r.metrics for r in smoke_results])


def test_same_seed_same_metrics(smoke_results: list[JobResult]) -> None:
    job = next(r.job for r in smoke_results if r.job.experiment == "parallel_ftrack")
    assert execute_job(job).metrics == next(r.metrics for r in smoke_results if r.job == job)


def test_analyze_tolerates_missing_results(smoke_results: list[JobResult]) -> None:
    assert analyze([], "smoke").verdict == "inconclusive"
    partial = [r for r in smoke_results if r.job.experiment == "lp_check"]
    assert analyze(partial, "smoke").verdict == "inconclusive"


def _noisy(mean: float, n: int, rng, spread: float = 0.1) -> list[float]:
    return (mean * np.exp(spread * rng.standard_normal(n))).tolist()


def _flat(d: int, k: int, fucb: float, ucb1: float, n: int = 10, seed: int = 0) -> JobResult:
    rng = np.random.default_rng([d, k, seed])
    cfg = {"n_factors": d, "n_arms": k, "sigma": 0.1, "horizon": 100, "n_trials": n, "agents": ["fucb", "ucb1"]}
    job = Job("factored-reward-bandits", "flat_vs_factored", "m:f", cfg, seed)
    return JobResult(job, "ok", {"final_fucb": _noisy(fucb, n, rng), "final_ucb1": _noisy(ucb1, n, rng),
                                 "slope_fucb": 0.5})


def _par(d: int, fucb: float, ftrack: float, n: int = 10, spread: float = 0.1) -> JobResult:
    rng = np.random.default_rng([d, 7])
    cfg = {"n_factors": d, "n_arms": 2, "sigma": 0.1, "alpha": 0.0, "horizon": 100, "n_trials": n}
    job = Job("factored-reward-bandits", "parallel_ftrack", "m:f", cfg, 0)
    return JobResult(job, "ok", {"final_fucb": _noisy(fucb, n, rng, spread), "final_ftrack": _noisy(ftrack, n, rng, spread),
                                 "ftrack_switched": [0] * n})


WIDENING = [_flat(2, 3, 1, 3), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
FLATTER = [_par(2, 2, 4), _par(5, 4, 5), _par(10, 8, 6)]


def test_verdict_is_computed_from_the_numbers() -> None:
    a = analyze(WIDENING + FLATTER, "quick")
    assert a.verdict == "supported"
    assert set(a.decided_by) == {"fucb-below-ucb1", "gap-widens-in-d-and-k", "ftrack-flatter-in-d"}
    losing = [_flat(2, 3, 5, 3), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
    assert analyze(losing + FLATTER, "quick").verdict == "not_supported"
    steeper = [_par(2, 2, 1), _par(5, 3, 4), _par(10, 4, 16)]
    assert analyze(WIDENING + steeper, "quick").verdict == "not_supported"
    # the ratio at the smallest instance is only 1.5x: the paper never set a 2x bar, so this is support
    small_first = [_flat(2, 3, 1, 1.5), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
    assert analyze(small_first + FLATTER, "quick").verdict == "supported"
    # two trials per cell and a lot of noise: nothing can be shown either way
    noisy = [_flat(d, k, 1, 1.1, n=2) for d in (2, 3) for k in (3, 5)]
    assert analyze(noisy + FLATTER, "quick").verdict == "inconclusive"


def test_mom_comparison_is_reported_not_decisive() -> None:
    res = [_flat(2, 3, 1, 3)]
    res[0].metrics["final_mom"] = [1000.0] * 10
    check = next(c for c in analyze(res, "quick").checks if c.id == "fucb-below-mom")
    assert check.decisive is False and "cannot fail" in check.claim


def test_equal_slopes_in_d_are_a_tie_not_evidence() -> None:
    proportional = [_par(2, 1, 5, spread=0.0), _par(5, 1.2, 6, spread=0.0), _par(10, 1.3, 6.5, spread=0.0)]
    analysis = analyze(WIDENING + proportional, "quick")
    check = next(c for c in analysis.checks if c.id == "ftrack-flatter-in-d")
    assert check.verdict == "inconclusive" and "Ties" in check.evidence


def test_rule_power_at_the_quick_seed_count() -> None:
    """Could this have failed? At quick (10 trials per (d, K)), the smallest instance's effect (UCB1/F-UCB
    1.78x, log-ratio sd about 0.5 over trials) is detected with power near 1; a true ratio of 1 (no
    advantage) is called supported in about 5% of runs or less, never more."""
    from icml24.common.decide import compare, power

    def rule(ab):
        return compare(ab[0], ab[1], paired=True, alternative="less")

    def sim(effect):
        return lambda rng: (effect + 0.5 * rng.standard_normal(10), np.zeros(10))

    assert power(rule, sim(-np.log(1.78)), 300).supported > 0.95
    assert power(rule, sim(0.0), 300).supported < 0.09
