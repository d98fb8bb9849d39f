"""SAPG reproduction: smoke run end to end, job layout, statistics helpers, analysis with missing results."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common.experiment import Job, JobResult, execute_job
from icml24.rl.sapg.reproduce import REPRODUCTION, analyze, fisher_one_sided, wilson_interval


def test_smoke_reproduction_runs_and_analyzes() -> None:
    jobs = REPRODUCTION.jobs("smoke")
    results = [execute_job(j) for j in jobs]
    assert [r.error for r in results if r.status != "ok"] == []
    a = REPRODUCTION.analyze(results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive")
    assert a.tables and a.checks
    for r in results:
        assert 0.0 <= r.metrics["success_rate"] <= 1.0


def test_job_is_deterministic() -> None:
    job = next(j for j in REPRODUCTION.jobs("smoke") if j.config["method"] == "sapg")
    a, b = execute_job(job), execute_job(job)
    assert a.status == "ok" and a.metrics["final_return"] == b.metrics["final_return"]
    np.testing.assert_array_equal(a.metrics["train_return_curve"], b.metrics["train_return_curve"])


@pytest.mark.parametrize("scale", ["quick", "full", "gpu"])
def test_all_scales_build_jobs_with_fixed_block_size(scale: str) -> None:
    jobs = REPRODUCTION.jobs(scale)
    scaling = [j for j in jobs if j.experiment == "scaling"]
    assert {j.config["method"] for j in scaling} == {"ppo", "sapg"}
    assert len({j.config["block_size"] for j in scaling}) == 1
    for j in scaling:
        assert j.config["num_envs"] % j.config["block_size"] == 0


def test_wilson_and_fisher_against_known_values() -> None:
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0
    # 8/10 vs 2/10: one-sided Fisher exact p = 0.01151
    assert fisher_one_sided(8, 10, 2, 10) == pytest.approx(0.01151, abs=1e-4)


def test_analyze_tolerates_missing_results() -> None:
    assert analyze([], "quick").verdict == "inconclusive"
    job = Job("sapg", "scaling", "icml24.rl.sapg.reproduce:run_point_mass",
              {"method": "sapg", "num_envs": 512}, 0)  # fmt: skip
    partial = [JobResult(job, "ok", {"discovered": 1.0, "final_return": 20.0, "success_rate": 1.0})]
    assert analyze(partial, "quick").verdict == "inconclusive"
    # With the PPO arm missing and one N only, no sub-check may claim a refutation.
    for c in analyze(partial, "quick").checks:
        assert c.verdict != "not_supported", (c.claim, c.evidence)
