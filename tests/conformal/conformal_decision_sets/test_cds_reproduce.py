"""Smoke run of the conformal-decision-sets reproduction, determinism, and graceful absence of data."""

import json

from icml24.common.experiment import execute_job
from icml24.conformal.conformal_decision_sets.reproduce import (
    REPRODUCTION,
    run_simulated_trial,
    run_trial_reanalysis,
)


def test_smoke_runs_and_analyzes():
    jobs = REPRODUCTION.jobs("smoke")
    assert {j.experiment for j in jobs} == {"set_construction", "simulated_trial", "trial_reanalysis"}
    results = [execute_job(j) for j in jobs]
    assert [r.error for r in results if r.status != "ok"] == []
    for r in results:
        json.dumps(r.metrics)
    a = REPRODUCTION.analyze(results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive")
    assert any(c.claim.startswith("Conformal and top-k sets are matched") for c in a.checks)
    sc = next(r for r in results if r.job.experiment == "set_construction").metrics
    assert abs(sc["conformal_cov_test"] - sc["topk_cov_test"]) < 0.05
    assert sc["conformal_size_wrong"] > sc["conformal_size_right"]
    # without results it still answers, and says the trial data is missing
    empty = REPRODUCTION.analyze([], "smoke")
    assert empty.verdict == "inconclusive" and "ABSENT" in empty.summary


def test_job_is_deterministic():
    job = next(j for j in REPRODUCTION.jobs("smoke") if j.experiment == "simulated_trial")
    assert run_simulated_trial(dict(job.config), 0) == run_simulated_trial(dict(job.config), 0)


def test_reanalysis_says_when_data_is_absent(tmp_path):
    out = run_trial_reanalysis({"data_dir": str(tmp_path / "missing")}, 0)
    assert out["available"] is False and "no trial CSVs" in out["reason"]
    out = run_trial_reanalysis({"data_dir": None}, 0)
    assert out["available"] is False
