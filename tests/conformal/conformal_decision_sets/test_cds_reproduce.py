"""Smoke run of the conformal-decision-sets reproduction, determinism, and graceful absence of data."""

import json
from pathlib import Path

import numpy as np
import pytest

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
    assert out["available"] is False and "not a folder with any of the trial CSVs" in out["reason"]
    out = run_trial_reanalysis({"data_dir": None}, 0)
    assert out["available"] is False


def test_bundled_data_gives_the_same_verdict_from_any_directory(tmp_path, monkeypatch):
    """Issue 11: the verdict was `supported` in one folder and `inconclusive` in another."""
    monkeypatch.delenv("ICML24_HITL_DATA", raising=False)
    verdicts = []
    for where in (tmp_path, Path("/")):
        monkeypatch.chdir(where)
        job = next(j for j in REPRODUCTION.jobs("smoke") if j.experiment == "trial_reanalysis")
        assert job.config["data_dir"] == "bundled" and job.config["sha256"]
        verdicts.append(REPRODUCTION.analyze([execute_job(job)], "smoke").verdict)
    assert verdicts == ["supported", "supported"]


def test_missing_data_is_inconclusive_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML24_HITL_DATA", str(tmp_path / "nowhere"))
    with pytest.warns(UserWarning, match="inconclusive"):
        job = next(j for j in REPRODUCTION.jobs("smoke") if j.experiment == "trial_reanalysis")
    result = execute_job(job)
    assert result.metrics["available"] is False
    with pytest.warns(UserWarning, match="trial data absent"):
        a = REPRODUCTION.analyze([result], "smoke")
    assert a.verdict == "inconclusive" and "ABSENT" in a.summary and "WARNING" in a.summary


def test_users_own_folder_by_environment_variable(tmp_path, monkeypatch):
    (tmp_path / "few-nerd.csv").write_text(
        "participant_id,experiment,num_correct,time,Age,Sex\n"
        + "".join(f"{i},topk,{20 + i % 3},100.0,30,Male\n" for i in range(10))
        + "".join(f"{i + 10},conformal,{20 + i % 3},90.5,40,Female\n" for i in range(10))
    )
    monkeypatch.setenv("ICML24_HITL_DATA", str(tmp_path))
    job = next(j for j in REPRODUCTION.jobs("smoke") if j.experiment == "trial_reanalysis")
    assert job.config["data_dir"] == str(tmp_path.resolve())
    out = execute_job(job).metrics
    assert out["available"] and out["tasks"] == ["few-nerd"] and out["source"] == str(tmp_path.resolve())


def _set_construction(topk_cov, conf_cov, seed=0):
    from icml24.common.experiment import Job, JobResult

    metrics = {"n_test": 1000, "model_top1": 0.8, "alpha": 0.1, "topk_cov_test": topk_cov,
               "conformal_cov_test": conf_cov, "alpha_flow_cov_test": 0.95, "conformal_size": 1.5,
               "conformal_singleton_frac": 0.6, "conformal_size_wrong": 2.3, "conformal_size_right": 1.4,
               "size_uncertainty_spearman": 0.7, "aps_size": 2.0, "lac_size": 1.4,
               "conformal_size_hist": [0, 6, 3, 1]}
    job = Job(REPRODUCTION.slug, "set_construction", "m:f", {"task": "digits", "k": 2}, seed)
    return JobResult(job, "ok", metrics)


def _reanalysis(effects, n=50, sd=0.1, seed=0):
    """A hand-made re-analysis result: per task, conformal accuracy = top-k + effect (normal, sd)."""
    from icml24.common.experiment import Job, JobResult

    rng = np.random.default_rng(seed)
    metrics = {"available": True, "source": "test", "sha256": "x", "tasks": sorted(effects)}
    for task, eff in effects.items():
        base = rng.normal(0.7, sd, n)
        conf = base.mean() + eff + (rng.normal(0, sd, n) - 0)  # independent arms
        for arm, vals in (("topk", base), ("conformal", conf)):
            metrics[f"{task}/{arm}"] = {"n": n, "acc": float(vals.mean()), "sd": float(vals.std(ddof=1)),
                                        "ci": [0, 1], "num_correct": 0, "num_correct_sd": 0,
                                        "values": vals.tolist()}
        metrics[f"{task}/test"] = {"diff": eff, "t": 0, "df": 0, "p_welch": 0, "p_mannwhitney": 0, "cohen_d": 0}
    job = Job(REPRODUCTION.slug, "trial_reanalysis", "m:f", {"data_dir": "x"}, 0)
    return JobResult(job, "ok", metrics)


def test_verdict_is_computed_from_the_numbers():
    matched = [_set_construction(0.90, 0.90, s) for s in range(3)]
    big = REPRODUCTION.analyze(matched + [_reanalysis({"a": 0.1, "b": 0.1})], "quick")
    assert big.verdict == "supported" and set(big.decided_by) == {"trial-a", "trial-b"}
    # a task with no difference at all: equivalence within the margin (n large) -> not_supported
    eq = REPRODUCTION.analyze(matched + [_reanalysis({"a": 0.1, "b": 0.0}, n=2000, sd=0.05)], "quick")
    assert eq.verdict == "not_supported" and eq.decided_by == ["trial-b"]
    # top-k clearly better on one task -> not_supported
    assert REPRODUCTION.analyze([_reanalysis({"a": 0.1, "b": -0.1})], "quick").verdict == "not_supported"
    # a small, noisy null: neither significant nor equivalent -> inconclusive (was not_supported)
    assert REPRODUCTION.analyze([_reanalysis({"a": 0.1, "b": 0.0}, n=20, sd=0.15)], "quick").verdict == "inconclusive"
    # the library's own checks do not decide the verdict about people
    mismatched = [_set_construction(0.90, 0.80, s) for s in range(3)]
    a = REPRODUCTION.analyze(mismatched + [_reanalysis({"a": 0.1})], "quick")
    assert a.verdict == "supported"
    assert next(c for c in a.checks if c.id == "sets-coverage-matched").decisive is False
    with pytest.warns(UserWarning):
        assert REPRODUCTION.analyze(matched, "quick").verdict == "inconclusive"  # no trial data


def test_rule_power_at_the_papers_effect_matches_a_simulation():
    """Could this have failed? Simulate the trial at the released data's effect and spread per task (50 per
    arm), apply the rule, and compare the share of `supported` with the analytic power (noncentral t)."""
    from icml24.conformal.conformal_decision_sets import load_trial_results, participant_accuracy
    from icml24.conformal.conformal_decision_sets.reproduce import trial_task_checks, welch_power

    acc = participant_accuracy(load_trial_results())
    tasks = ("few-nerd", "go-emotions", "object-net")
    rng = np.random.default_rng(0)
    analytic = 1.0
    for t in tasks:
        a, b = acc[(t, "conformal")], acc[(t, "topk")]
        analytic *= welch_power(a.mean() - b.mean(), a.std(ddof=1), b.std(ddof=1), a.size, b.size)
    n_sims, wins = 200, 0
    for _ in range(n_sims):
        values = {}
        for t in tasks:
            a, b = acc[(t, "conformal")], acc[(t, "topk")]
            values[t] = (rng.normal(a.mean(), a.std(ddof=1), 50), rng.normal(b.mean(), b.std(ddof=1), 50))
        wins += all(c.verdict == "supported" for c in trial_task_checks(values))
    assert 0.35 < analytic < 0.75  # the rule is far from certain to succeed even when the claim is true
    assert abs(wins / n_sims - analytic) < 4 * np.sqrt(analytic * (1 - analytic) / n_sims)
    # and under no effect it almost never says supported (size <= alpha^3 for independent tasks)
    null = sum(all(c.verdict == "supported" for c in trial_task_checks(
        {t: (rng.normal(0.7, 0.1, 50), rng.normal(0.7, 0.1, 50)) for t in tasks})) for _ in range(100))
    assert null <= 2
