"""PW-DICE reproduction: smoke run end to end, and the verdict rule on hand-made results (supported, refuted,
inconclusive) with its power simulated at the run's seed count."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common.experiment import Job, JobResult, execute_job
from icml24.rl.pw_dice.reproduce import (
    DEFAULT_SEEDS,
    PAPER_REGRET_EFFECT,
    PAPER_REGRET_SD,
    REPRODUCTION,
    TABULAR_METHODS,
    regret_power,
    success_power,
)


def test_smoke_reproduction_runs_and_analyzes() -> None:
    results = [execute_job(j) for j in REPRODUCTION.jobs("smoke")]
    assert [r.error for r in results if r.status != "ok"] == []
    a = REPRODUCTION.analyze(results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive")
    assert a.tables and a.checks and a.rule and a.figures
    assert {r.job.experiment for r in results} == {"tabular", "point_mass"}
    for r in results:
        if r.job.experiment == "point_mass":
            assert 0.0 <= r.metrics["success_rate"] <= 1.0 and r.metrics["expert_success_rate"] == 1.0
            continue
        for m in TABULAR_METHODS:
            assert 0.0 <= r.metrics[f"{m}_state_l1"] <= 2.0 + 1e-9
            assert -1.0 <= r.metrics[f"{m}_regret"] <= 1.0


def _results(regrets: dict[str, np.ndarray]) -> list[JobResult]:
    out = []
    n = len(next(iter(regrets.values())))
    for s in range(n):
        metrics = {}
        for m in TABULAR_METHODS:
            metrics[f"{m}_regret"] = float(regrets[m][s])
            metrics[f"{m}_state_l1"] = 0.3 + 0.01 * s
            metrics[f"{m}_pair_l1"] = 0.5
            metrics[f"{m}_fit_l1"] = 0.1
        job = Job("pw-dice", "tabular", "x:y", {"n_states": 20, "n_actions": 4, "gamma": 0.95, "eps": 0.01,
                                               "ts_steps": 100, "ta_steps": 10000}, s)
        out.append(JobResult(job, "ok", metrics))
    return out


def _regrets(rng, n, shift: dict[str, float], sd: float = 0.005) -> dict[str, np.ndarray]:
    base = rng.normal(0.01, 0.01, n)  # the MDP's difficulty, shared by all methods (paired design)
    return {m: base + shift.get(m, 0.0) + sd * rng.standard_normal(n) for m in TABULAR_METHODS}


def test_rule_supported_when_pw_dice_is_better() -> None:
    rng = np.random.default_rng(0)
    r = _regrets(rng, 40, {"smodice_kl": 0.01, "smodice_chi": 0.01, "lobsdice": 0.01, "bc": 0.02})
    a = REPRODUCTION.analyze(_results(r), "quick")
    assert a.verdict == "supported"
    assert set(a.decided_by) == {f"tabular-regret-vs-{b}" for b in ("smodice-kl", "smodice-chi", "lobsdice", "bc")}


def test_rule_refuted_when_a_baseline_is_better() -> None:
    rng = np.random.default_rng(1)
    r = _regrets(rng, 40, {"smodice_kl": -0.01, "smodice_chi": 0.01, "lobsdice": 0.01, "bc": 0.02})
    a = REPRODUCTION.analyze(_results(r), "quick")
    assert a.verdict == "not_supported" and a.decided_by == ["tabular-regret-vs-smodice-kl"]


def test_rule_inconclusive_without_an_effect() -> None:
    rng = np.random.default_rng(2)
    a = REPRODUCTION.analyze(_results(_regrets(rng, 40, {})), "quick")
    assert a.verdict == "inconclusive"


def _pm_results(success: dict[tuple[str, str], list[float]]) -> list[JobResult]:
    out = []
    for (variant, method), values in success.items():
        for s, v in enumerate(values):
            job = Job("pw-dice", "point_mass", "x:y", {"variant": variant, "method": method}, s)
            out.append(JobResult(job, "ok", {"success_rate": v, "mean_return": 20 * v, "expert_weight_share": 0.5,
                                             "config": {}}))
    return out


def test_point_mass_rule_supported_refuted_and_power() -> None:
    rng = np.random.default_rng(3)
    tab = _results(_regrets(rng, 40, {"smodice_kl": 0.01, "smodice_chi": 0.01, "lobsdice": 0.01, "bc": 0.02}))
    good = {}
    for variant in ("normal", "distorted"):
        base = rng.uniform(0.3, 0.6, 5)
        good[(variant, "pw_dice_learned")] = list(base + 0.4 + 0.02 * rng.standard_normal(5))
        good[(variant, "pw_dice_euclid")] = list(base + 0.2)
        good[(variant, "smodice_kl")] = list(base)
        good[(variant, "bc")] = list(base - 0.2)
    a = REPRODUCTION.analyze(tab + _pm_results(good), "full")
    assert a.verdict == "supported" and "point-mass-distorted-vs-smodice-kl" in a.decided_by
    bad = dict(good)
    bad[("distorted", "smodice_kl")] = [v + 0.6 for v in good[("distorted", "pw_dice_learned")]]
    a = REPRODUCTION.analyze(tab + _pm_results(bad), "full")
    assert a.verdict == "not_supported" and a.decided_by == ["point-mass-distorted-vs-smodice-kl"]
    assert success_power(5) >= 0.8 and success_power(5, gain=0.0) < 0.02


def test_power_at_the_paper_effect_and_false_support() -> None:
    n = DEFAULT_SEEDS["quick"]
    assert regret_power(n, n_sims=300) >= 0.7  # the paper's paired effect -0.0046 (sd 0.0088) at 40 MDPs
    assert regret_power(10, n_sims=300) < 0.3  # the paper's own 10 MDPs would rarely decide it
    assert regret_power(n, effect=0.0, sd=PAPER_REGRET_SD, n_sims=300) < 0.01
    assert PAPER_REGRET_EFFECT < 0


@pytest.mark.parametrize("scale", ["quick", "full"])
def test_scales_build_one_tabular_job_per_seed(scale: str) -> None:
    jobs = [j for j in REPRODUCTION.jobs(scale) if j.experiment == "tabular"]
    assert len(jobs) == DEFAULT_SEEDS[scale] and len({j.seed for j in jobs}) == len(jobs)
    pm = [j for j in REPRODUCTION.jobs(scale) if j.experiment == "point_mass"]
    assert len(pm) == (80 if scale == "full" else 0)  # 2 variants x 4 methods x 10 seeds
