"""The reproduction's decision rule: hand-made supporting and refuting cases, its power, and the helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml24.common.experiment import Job, JobResult
from icml24.language.deep_fusion import reproduce as R


def _result(method: str, seed: int, reach_at: float, *, parent_flops=(), lrs=(1e-3, 3e-3), n=21, noise=0.0,
            experiment: str = "lm"):  # fmt: skip
    """A run whose test loss falls linearly from 2 to 1 at fraction ``reach_at`` of its evaluations (then
    stays), with the validation loss tracking it; the second learning rate is worse everywhere."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    test = np.where(t < reach_at, 2 - t / reach_at, 1.0) + noise * rng.standard_normal(n)
    good = {"val": list(test), "test": list(test)}
    bad = {"val": list(test + 1), "test": list(test + 1)}
    metrics = {
        "lrs": list(lrs), "steps": list(range(n)), "fused_flops": [1000 * i for i in range(n)],
        "parent_flops": list(parent_flops), "val_loss": [good["val"], bad["val"]],
        "test_loss": [good["test"], bad["test"]], "test_accuracy": [list(1 - test / 3)] * 2,
    }  # fmt: skip
    if method == "fusion":
        metrics.update(parent_test_loss=[1.5, 1.5], parent_test_accuracy=[0.5, 0.5], fusion_gap=1e-7)
    job = Job(R.SLUG, experiment, f"icml24.language.deep_fusion.reproduce:run_{experiment}", {"method": method}, seed)
    return JobResult(job, "ok", metrics)


def _runs(fusion_reach: list[float], parent_flops=(2000, 2000), experiment: str = "lm"):
    out = []
    for s, reach in enumerate(fusion_reach):
        out.append(_result("scratch", s, 1.0, experiment=experiment))  # reaches its own final quality at its last evaluation
        out.append(_result("fusion", s, reach, parent_flops=parent_flops, experiment=experiment))
    return out


def test_fusion_that_reaches_the_target_early_is_supported():
    # Scratch: target at 20_000 FLOPs. Fusion: 4_000 parents + 0.5 * 20_000 = 14_000 (ratio 0.7).
    a = R.analyze(_runs([0.5, 0.45, 0.55, 0.5, 0.4, 0.5, 0.6, 0.5]), "quick")
    check = next(c for c in a.checks if c.id == "lm-fusion-flops")
    assert check.verdict == "supported" and a.verdict == "supported"
    assert a.decided_by == ["lm-fusion-flops"]
    assert math.exp(check.effect) == pytest.approx(0.7, abs=0.03)


def test_fusion_that_needs_more_flops_than_scratch_is_refuted():
    # The parents cost 8_000 and the fused model still needs the whole budget: ratio 1.4 on every seed.
    a = R.analyze(_runs([1.0] * 8, parent_flops=(4000, 4000)), "quick")
    assert a.verdict == "not_supported"
    check = next(c for c in a.checks if c.id == "lm-fusion-flops")
    assert math.exp(check.effect) == pytest.approx(1.4, abs=0.01)


def test_fusion_that_never_reaches_the_target_is_refuted_not_dropped():
    runs = []
    for s in range(8):
        runs.append(_result("scratch", s, 1.0))
        r = _result("fusion", s, 1.0, parent_flops=(1000, 1000))
        r.metrics["test_loss"][0] = [x + 0.5 for x in r.metrics["test_loss"][0]]  # never gets to 1.0
        runs.append(r)
    a = R.analyze(runs, "full")
    assert a.verdict == "not_supported"
    table = a.tables[0]
    assert table.rows[1][-1] == "8 of 8"


@pytest.mark.parametrize("reach", [0.5, 1.0])
def test_digits_is_reported_not_decisive(reach):
    # The same supporting (0.5) and refuting (1.0, parents 8_000) results on digits decide nothing: scratch
    # saturates early there and the parents' cost alone leaves no room for a saving (DIGITS_REPORTED).
    a = R.analyze(_runs([reach] * 8, parent_flops=(4000, 4000) if reach == 1.0 else (2000, 2000),
                        experiment="digits"), "quick")  # fmt: skip
    check = next(c for c in a.checks if c.id == "digits-fusion-flops")
    assert not check.decisive and "reported only" in check.evidence
    assert check.verdict == ("supported" if reach == 0.5 else "not_supported")
    assert a.verdict == "inconclusive" and not a.decided_by


def test_mixed_evidence_is_inconclusive():
    a = R.analyze(_runs([0.6, 1.0, 0.7, 1.0]), "quick")  # two clear savings, two clear losses
    assert a.verdict == "inconclusive"


def test_the_rule_has_power_at_the_default_seed_count_and_a_low_false_support_rate():
    n = R.DEFAULT_SEEDS["quick"]
    assert R.power_of_rule(n, R.PLANNING_SD["digits"]) >= 0.8
    assert R.power_of_rule(R.LM_SEEDS["full"], R.PLANNING_SD["lm"]) >= 0.8
    assert R.power_of_rule(n, R.PLANNING_SD["digits"], saving=1.0) <= 0.1  # no effect: rarely "supported"


def test_learning_rate_selection_uses_validation_and_the_same_rule_for_every_method():
    runs = _runs([0.5] * 3)
    for r in runs:
        r.metrics["val_loss"] = r.metrics["val_loss"][::-1]  # now the second rate validates better
    assert R.select_lr([r for r in runs if r.job.config["method"] == "fusion"]) == 1
    assert R.select_lr([r for r in runs if r.job.config["method"] == "scratch"]) == 1


def test_best_so_far_and_flops_to_reach():
    q = R.best_so_far([3.0, 2.0, 2.5, 1.0], [30.0, 20.0, 10.0, 5.0])
    assert list(q) == [30.0, 20.0, 20.0, 5.0]  # a checkpoint counts only when validation improves
    assert R.flops_to_reach(20.0, [0, 10, 20, 30], q) == 10
    assert R.flops_to_reach(1.0, [0, 10, 20, 30], q) == math.inf
    with pytest.raises(ValueError, match="val and test"):
        R.best_so_far([1.0], [1.0, 2.0])


def test_build_jobs_covers_every_method_and_lm_only_at_full():
    quick = R.build_jobs("quick", None)
    assert {j.config["method"] for j in quick} == set(R.DIGITS_METHODS)
    assert {j.experiment for j in quick} == {"digits"}
    full = R.build_jobs("full", None)
    assert {j.config["method"] for j in full if j.experiment == "lm"} == set(R.LM_METHODS)


def test_smoke_jobs_measure_the_fusion_identity_in_the_run():
    cfg = {"method": "fusion", **R.DIGITS_COMMON, **R.DIGITS["smoke"]}
    out = R.run_digits(cfg, 0)
    assert out["fusion_gap"] < 1e-5  # float32 logits of the fused model = the parents' average
    assert out["test_loss"][0][0] == pytest.approx(float(np.mean(out["parent_test_loss"])), abs=0.5)
    assert len(out["fused_flops"]) == len(out["val_loss"][0]) and out["fused_flops"][0] == 0
    lm = R.run_lm({"method": "fusion", **R.LM_COMMON, **R.LM["smoke"]}, 0)
    assert lm["fusion_gap"] < 1e-4
    plain = R.run_lm({"method": "fusion_plain_norm", **R.LM_COMMON, **R.LM["smoke"]}, 0)
    assert plain["fusion_gap"] > lm["fusion_gap"]  # one norm over the fused stream is not exact
