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


def _set_construction(topk_cov, conf_cov, seed=0):
    from icml24.common.experiment import Job, JobResult

    metrics = {"n_test": 1000, "model_top1": 0.8, "alpha": 0.1, "topk_cov_test": topk_cov,
               "conformal_cov_test": conf_cov, "alpha_flow_cov_test": 0.95, "conformal_size": 1.5,
               "conformal_singleton_frac": 0.6, "conformal_size_wrong": 2.3, "conformal_size_right": 1.4,
               "size_uncertainty_spearman": 0.7, "aps_size": 2.0, "lac_size": 1.4,
               "conformal_size_hist": [0, 6, 3, 1]}
    job = Job(REPRODUCTION.slug, "set_construction", "m:f", {"task": "digits", "k": 2}, seed)
    return JobResult(job, "ok", metrics)


def _reanalysis(p_values):
    from icml24.common.experiment import Job, JobResult

    metrics = {"available": True, "tasks": sorted(p_values)}
    for task, p in p_values.items():
        metrics[f"{task}/test"] = {"diff": 0.05, "t": 2.0, "df": 90.0, "p_welch": p, "p_mannwhitney": p,
                                   "cohen_d": 0.4}
    job = Job(REPRODUCTION.slug, "trial_reanalysis", "m:f", {"data_dir": "x"}, 0)
    return JobResult(job, "ok", metrics)


def test_verdict_is_computed_from_the_numbers():
    matched = [_set_construction(0.90, 0.90, s) for s in range(3)]
    assert REPRODUCTION.analyze(matched + [_reanalysis({"a": 0.01, "b": 0.03})], "quick").verdict == "supported"
    assert REPRODUCTION.analyze(matched + [_reanalysis({"a": 0.01, "b": 0.2})], "quick").verdict == "not_supported"
    mismatched = [_set_construction(0.90, 0.80, s) for s in range(3)]  # coverage matching failed
    assert REPRODUCTION.analyze(mismatched + [_reanalysis({"a": 0.01})], "quick").verdict == "inconclusive"
    assert REPRODUCTION.analyze(matched, "quick").verdict == "inconclusive"  # no trial data
