"""The reproduction runs end to end at smoke scale, is deterministic, and its verdict rule reacts to numbers."""

from __future__ import annotations

import json

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


def _flat(d: int, k: int, fucb: float, ucb1: float) -> JobResult:
    cfg = {"n_factors": d, "n_arms": k, "sigma": 0.1, "horizon": 100, "n_trials": 2, "agents": ["fucb", "ucb1"]}
    job = Job("factored-reward-bandits", "flat_vs_factored", "m:f", cfg, 0)
    return JobResult(job, "ok", {"final_fucb": [fucb, fucb], "final_ucb1": [ucb1, ucb1], "slope_fucb": 0.5})


def _par(d: int, fucb: float, ftrack: float) -> JobResult:
    cfg = {"n_factors": d, "n_arms": 2, "sigma": 0.1, "alpha": 0.0, "horizon": 100, "n_trials": 2}
    job = Job("factored-reward-bandits", "parallel_ftrack", "m:f", cfg, 0)
    return JobResult(job, "ok", {"final_fucb": [fucb] * 2, "final_ftrack": [ftrack] * 2, "ftrack_switched": [0, 0]})


def test_verdict_is_computed_from_the_numbers() -> None:
    widening = [_flat(2, 3, 1, 3), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
    flatter = [_par(2, 2, 4), _par(5, 4, 5), _par(10, 8, 6)]
    assert analyze(widening + flatter, "quick").verdict == "supported"
    losing = [_flat(2, 3, 5, 3), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
    assert analyze(losing + flatter, "quick").verdict == "not_supported"
    steeper = [_par(2, 2, 1), _par(5, 3, 4), _par(10, 4, 16)]
    assert analyze(widening + steeper, "quick").verdict == "not_supported"
    small_first = [_flat(2, 3, 1, 1.5), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
    assert analyze(small_first + flatter, "quick").verdict == "inconclusive"  # below UCB1 but < 2x at one point


def test_equal_slopes_in_d_are_a_tie_not_evidence() -> None:
    widening = [_flat(2, 3, 1, 3), _flat(2, 5, 1, 5), _flat(3, 3, 1, 4), _flat(3, 5, 1, 9)]
    proportional = [_par(2, 1, 5), _par(5, 1.2, 6), _par(10, 1.3, 6.5)]  # F-Track = 5 x F-UCB: same slope
    analysis = analyze(widening + proportional, "quick")
    check = next(c for c in analysis.checks if c.claim.startswith("F-Track's regret"))
    assert check.verdict == "inconclusive" and "tie" in check.evidence
