"""The advisedRFLVM reproduction runs end to end at smoke scale and is deterministic."""

from __future__ import annotations

from icml24.common.experiment import execute_job
from icml24.gp.advised_rflvm.reproduce import REPRODUCTION, run_linear_sweep


def test_smoke_reproduction_runs_and_analyzes():
    results = [execute_job(j) for j in REPRODUCTION.jobs("smoke")]
    assert [r.error for r in results if r.status != "ok"] == []
    analysis = REPRODUCTION.analyze(results, "smoke")
    assert analysis.verdict in ("supported", "not_supported", "inconclusive")
    assert analysis.tables and analysis.checks
    # A crashed job must not crash analyze.
    REPRODUCTION.analyze(results[: len(results) // 2], "smoke")
    REPRODUCTION.analyze([], "smoke")


def test_scales_build_jobs_and_linear_sweep_is_deterministic():
    for scale in ("quick", "full"):
        assert REPRODUCTION.jobs(scale)
    cfg = {"n": 100, "q": 2, "n_points": 20}
    assert run_linear_sweep(cfg, 0) == run_linear_sweep(cfg, 0)
