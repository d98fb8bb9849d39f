"""The verdict rules of collective-action on hand-made results: the crossover (supported), its refutation (a
learner that only helps: not_supported), the CVaR-DRO validation-leverage rule (supported, refuted by
equivalence, inconclusive without its arm), the simplicity-bias rule reported only, the Hardt et al. reference
bound, the power of the rules at 5 seeds, and the smoke reproduction."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common import decide
from icml24.common.experiment import Job, JobResult, execute_job
from icml24.evaluation.collective_action import reproduce as R

ALPHAS = list(R.ALPHAS)


def _crossover_result(seed: int, gain_small: float, gain_large: float, rng: np.random.Generator,
                      noise: float = 0.05, xi: float = 0.05) -> JobResult:
    """ERM's success rises with alpha; JTT's is ERM's + gain_small at small alpha and + gain_large at large
    alpha; JTT's alpha_eff / alpha is exp(+-0.5) on the side the gain points to."""
    m: dict = {"erm@0:success": 0.01, "erm@0:accuracy": 0.95}
    for a in ALPHAS:
        k = R._akey(a)
        erm = min(1.0, 0.1 + 2.5 * np.sqrt(a))
        gain = gain_small if a in R.SMALL_ALPHAS else (gain_large if a in R.LARGE_ALPHAS else 0.0)
        m[f"alpha@{k}"] = a
        for name, s, ratio in (("erm", erm, 1.0), ("jtt", erm + gain, np.exp(np.sign(gain) * 0.5))):
            m[f"{name}@{k}:success"] = float(np.clip(s + noise * rng.standard_normal(), 0, 1))
            m[f"{name}@{k}:accuracy"] = 0.95
            m[f"{name}@{k}:alpha_eff"] = float(a * ratio * np.exp(0.1 * rng.standard_normal()))
        m[f"jtt@{k}:e_collective"] = 0.5
        m[f"jtt@{k}:e_rest"] = 0.1
    cfg = {**R.CLASSICAL, "alphas": ALPHAS, "overlap": xi, "learners": ["erm", "jtt"]}
    return JobResult(Job(R.SLUG, "crossover", "x:y", cfg, seed), "ok", m)


def _validation_result(seed: int, gain: float, rng: np.random.Generator, *, jtt_gain: float | None = None,
                       cvar: bool = True, noise: float = 0.05) -> JobResult:
    """Selection on the validation set the collective joined raises CVaR-DRO's success by ``gain`` (JTT's by
    ``jtt_gain``, default the same); ``cvar=False``: rows without the CVaR-DRO selection."""
    m: dict = {}
    alphas = [0.008, 0.015, 0.03]
    for fam, g in (("jtt", gain if jtt_gain is None else jtt_gain), ("cvar", gain)):
        if fam == "cvar" and not cvar:
            continue
        for a in alphas:
            base = 0.3 + 0.05 * rng.standard_normal()
            for v, s in (("clean", base), ("collective", base + g + noise * rng.standard_normal())):
                m[f"{fam}@{R._akey(a)}:{v}:success"] = float(s)
                m[f"{fam}@{R._akey(a)}:{v}:accuracy"] = 0.95
                m[f"{fam}@{R._akey(a)}:{v}:choice"] = 0
    cfg = {**R.CLASSICAL, "alphas": alphas, "overlap": 0.05, "cvar": cvar}
    return JobResult(Job(R.SLUG, "validation", "x:y", cfg, seed), "ok", m)


def _results(gain_small, gain_large, gain_val, rng, seeds=5, **kw):
    return ([_crossover_result(s, gain_small, gain_large, rng) for s in range(seeds)]
            + [_validation_result(s, gain_val, rng, **kw) for s in range(seeds)])  # fmt: skip


def test_the_crossover_is_supported_on_hand_made_results():
    a = R.analyze(_results(0.25, -0.3, 0.2, np.random.default_rng(0)), "quick")
    checks = {c.id: c for c in a.checks}
    for cid in ("jtt-amplifies-small-xi0.05", "jtt-dilutes-large-xi0.05", "jtt-alpha-eff-up-small-xi0.05",
                "jtt-alpha-eff-down-large-xi0.05", "validation-leverage-cvar"):
        assert checks[cid].verdict == "supported" and checks[cid].decisive, cid
    assert not checks["validation-leverage-jtt"].decisive
    assert a.verdict == "supported"
    assert checks["validation-leverage-cvar"].power is not None
    assert checks["jtt-amplifies-small-xi0.05"].power is not None
    assert checks["jtt-alpha-eff-up-small-xi0.05"].power > 0.8  # a factor-2 change at this spread is detected


def test_a_learner_that_helps_every_collective_refutes_the_dilution():
    # JTT better than ERM at every size (no crossover): the dilution check is refuted, so is the claim
    a = R.analyze(_results(0.25, 0.25, 0.2, np.random.default_rng(1)), "quick")
    checks = {c.id: c for c in a.checks}
    assert checks["jtt-dilutes-large-xi0.05"].verdict == "not_supported"
    assert checks["jtt-alpha-eff-down-large-xi0.05"].verdict == "not_supported"
    assert a.verdict == "not_supported" and "jtt-dilutes-large-xi0.05" in a.decided_by


def test_no_effect_gives_no_support():
    a = R.analyze(_results(0.0, 0.0, 0.0, np.random.default_rng(2)), "quick")
    assert a.verdict != "supported"


def _verdict_of(rs):
    """The two crossover rules, as analyze applies them (without building the report's tables and figures)."""
    amp, _ = R.amplification_decision(rs, "jtt", R.SMALL_ALPHAS, alternative="greater")
    dil, _ = R.amplification_decision(rs, "jtt", R.LARGE_ALPHAS, alternative="less")
    return "supported" if amp.verdict == dil.verdict == "supported" else "inconclusive"


def test_power_of_the_crossover_rule_at_5_seeds_against_the_probe_effects():
    # the notes' probe: +0.18 at small alpha, -0.19 at large alpha; per-point noise 0.1 (above the probe's spread)
    pw = decide.power(_verdict_of, lambda rng: [_crossover_result(s, 0.18, -0.19, rng, noise=0.1) for s in range(5)],
                      n_sims=200, seed=0)  # fmt: skip
    assert pw.supported >= 0.8, pw
    null = decide.power(_verdict_of, lambda rng: [_crossover_result(s, 0.0, 0.0, rng, noise=0.1) for s in range(5)],
                        n_sims=200, seed=1)  # fmt: skip
    assert null.supported <= 0.05, null


def test_power_of_the_placement_rule_at_5_seeds():
    # a placement gap of 0.2 with a per-seed spread of the paired differences of 0.1: power >= 0.8 at 5 seeds
    # (at a spread of 0.15 it falls to ~0.77; the run reports its own power from its own spread)
    pw = decide.power_of_compare(R.PLACEMENT_EFFECT, 0.1, 5, paired=True, alternative="greater", alpha=R.ALPHA,
                                 n_sims=500)  # fmt: skip
    assert pw.supported >= 0.8, pw


def test_smoke_reproduction_runs_and_analyses():
    jobs = R.REPRODUCTION.jobs("smoke")
    assert {j.experiment for j in jobs} == {"crossover", "validation", "mlp", "dominoes"}
    results = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.error]
    a = R.analyze(results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive") and a.tables and a.figures
    cross = next(r for r in results if r.job.experiment == "crossover").metrics
    assert 0.0 <= cross["jtt@0.004:success"] <= 1.0 and cross["erm@0:success"] < 0.2


def _dominoes_result(seed: int, mlp_gap: float, lr_gap: float, rng: np.random.Generator) -> JobResult:
    alphas = [0.002, 0.004, 0.008, 0.015]
    m: dict = {}
    for a in alphas:
        k = R._akey(a)
        base = min(1.0, 4 * np.sqrt(a))
        for learner, gap in (("mlp", mlp_gap), ("logistic", lr_gap)):
            m[f"{learner}:hard@{k}:success"] = float(base + 0.03 * rng.standard_normal())
            m[f"{learner}:easy@{k}:success"] = float(base + gap + 0.03 * rng.standard_normal())
        for place in ("easy", "hard"):
            m[f"mlp:{place}@{k}:accuracy"] = 0.95
            m[f"mlp:{place}@{k}:accuracy_easy_shuffled"] = 0.1
    cfg = {**R.MLP, "alphas": alphas, "epochs": 30, "margin": 3.0, "noise": 0.1}
    return JobResult(Job(R.SLUG, "dominoes", "x:y", cfg, seed), "ok", m)


def _placement_checks(mlp_gap, lr_gap, seed=0):
    rng = np.random.default_rng(seed)
    a = R.analyze([_dominoes_result(s, mlp_gap, lr_gap, rng) for s in range(10)], "full")
    return {c.id: c for c in a.checks}, a


def test_placement_rule_credits_the_learner_not_the_data_and_is_reported_only():
    checks, a = _placement_checks(0.2, 0.0)
    assert checks["simplicity-bias-changes-placement"].verdict == "supported"
    # the design cannot isolate SGD's simplicity bias (its easy signal sits in pure-noise columns): reported only,
    # so the dominoes alone decide nothing whichever way they come out
    assert not any(c.decisive for c in checks.values()) and a.verdict == "inconclusive"
    # the same gap under both learners: the plain MLP gap is supported, the interaction is not
    checks, a = _placement_checks(0.1, 0.1, seed=1)
    assert checks["simplicity-bias-placement"].verdict == "supported"
    assert checks["simplicity-bias-changes-placement"].verdict != "supported"
    # logistic regression prefers the easy block more than the MLP does: refuted, still not deciding
    checks, a = _placement_checks(0.0, 0.15, seed=2)
    assert checks["simplicity-bias-changes-placement"].verdict == "not_supported" and a.verdict == "inconclusive"


def test_validation_rule_refuted_when_joining_the_validation_set_hurts():
    rng = np.random.default_rng(3)
    a = R.analyze([_validation_result(s, -0.15, rng) for s in range(5)], "quick")
    checks = {c.id: c for c in a.checks}
    assert checks["validation-leverage-cvar"].verdict == "not_supported" and a.verdict == "not_supported"


def test_a_null_cvar_leverage_is_refuted_by_equivalence_even_when_jtt_gains():
    # the review's case: JTT's selection gains +0.03, CVaR-DRO's +0.001; the claim names CVaR-DRO
    rng = np.random.default_rng(4)
    a = R.analyze(_results(0.25, -0.3, 0.001, rng, seeds=10, jtt_gain=0.2, noise=0.01), "full")
    checks = {c.id: c for c in a.checks}
    assert checks["validation-leverage-jtt"].verdict == "supported" and not checks["validation-leverage-jtt"].decisive
    assert checks["validation-leverage-cvar"].verdict == "not_supported"
    assert a.verdict == "not_supported" and a.decided_by == ["validation-leverage-cvar"]


def test_rows_without_the_cvar_selection_leave_the_validation_claim_inconclusive():
    a = R.analyze(_results(0.25, -0.3, 0.2, np.random.default_rng(5), cvar=False), "quick")
    checks = {c.id: c for c in a.checks}
    assert checks["validation-leverage-cvar"].verdict == "inconclusive" and checks["validation-leverage-cvar"].decisive
    assert a.verdict == "inconclusive"


def test_hardt_bound_reference_curve():
    # Bayes-optimal learner, signal overlap xi: S >= 1 - (1 - alpha) / alpha * xi, floored at 0
    assert R.hardt_success_bound(0.2, 0.05) == pytest.approx(0.8)
    assert R.hardt_success_bound(0.002, 0.05) == 0.0
    assert np.all(R.hardt_success_bound([0.001, 0.5, 1.0], 0.0) == 1.0)
    b = R.hardt_success_bound(np.geomspace(0.01, 1, 20), 0.05)
    assert np.all(np.diff(b) >= 0)  # larger collectives are guaranteed more
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            R.hardt_success_bound(bad, 0.05)
    with pytest.raises(ValueError, match="xi"):
        R.hardt_success_bound(0.1, 1.5)
    # the effective-size prediction: a learner that multiplies a 1% collective's weight by 10 is predicted more
    rs = [_crossover_result(0, 0.2, -0.2, np.random.default_rng(0))]
    eff = R._effective_bound(rs, "jtt", 0.1, 0.05)
    assert eff[0] == pytest.approx(float(R.hardt_success_bound(rs[0].metrics["jtt@0.1:alpha_eff"], 0.05)))
