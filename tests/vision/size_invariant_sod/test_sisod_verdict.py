"""``analyze`` applies the README's verdict rules to hand-made results (the smoke test accepts any verdict)."""

from __future__ import annotations

from icml24.common.experiment import Job, JobResult
from icml24.vision.size_invariant_sod.reproduce import BUCKETS, METRICS, SLUG, analyze

MOD = "icml24.vision.size_invariant_sod.reproduce"


def _behaviour(seed: int, a_mae: float, b_mae: float, a_si: float, b_si: float, frac: float) -> JobResult:
    m = {f"A_{k}": 0.5 for k in METRICS} | {f"B_{k}": 0.5 for k in METRICS}
    m |= {"A_mae": a_mae, "B_mae": b_mae, "A_si_mae": a_si, "B_si_mae": b_si,
          "frac_mae_prefers_A": frac, "frac_si_mae_prefers_B": frac}  # fmt: skip
    return JobResult(Job(SLUG, "metric_behaviour", f"{MOD}:run_metric_behaviour", {}, seed), "ok", m)


def _training(seed: int, loss: str, small: float, large: float) -> JobResult:
    m = {k: 0.1 for k in METRICS} | {f"recall_{b}": 0.5 for b in BUCKETS}
    m |= {"recall_small": small, "recall_large": large}
    return JobResult(Job(SLUG, "training", f"{MOD}:run_training", {"loss": loss}, seed), "ok", m)


def _results(d_small: list[float], d_large: float, behaviour_ok: bool = True) -> list[JobResult]:
    res = [_behaviour(s, 0.01, 0.05, 0.2, 0.1, 0.9) if behaviour_ok else _behaviour(s, 0.05, 0.01, 0.2, 0.1, 0.9)
           for s in range(len(d_small))]  # fmt: skip
    for s, d in enumerate(d_small):
        res += [_training(s, "bce", 0.3, 0.9), _training(s, "si", 0.3 + d, 0.9 + d_large)]
    return res


def _verdicts(res: list[JobResult]) -> tuple[str, list[str]]:
    a = analyze(res, "smoke")
    return a.verdict, [c.verdict for c in a.checks]


def test_both_sub_claims_hold():
    assert _verdicts(_results([0.1, 0.2], -0.01)) == ("supported", ["supported", "supported"])


def test_metric_behaviour_fails_when_mae_does_not_prefer_the_predictor_missing_small_objects():
    assert _verdicts(_results([0.1, 0.2], -0.01, behaviour_ok=False)) == ("not_supported", ["not_supported", "supported"])


def test_training_rule_thresholds():
    # gain below +0.05 on average: inconclusive
    assert _verdicts(_results([0.02, 0.03], 0.0))[1][1] == "inconclusive"
    # one seed loses: not every seed positive, so not supported even with a large mean gain
    assert _verdicts(_results([0.3, -0.01], 0.0))[1][1] == "inconclusive"
    # large objects drop by more than 0.05
    assert _verdicts(_results([0.1, 0.2], -0.1))[1][1] == "inconclusive"
    # no gain at all
    assert _verdicts(_results([0.0, -0.02], 0.0)) == ("not_supported", ["supported", "not_supported"])


def test_metric_behaviour_without_small_objects_is_inconclusive_not_refuted():
    # run_metric_behaviour returns only counts when no image has a small object
    res = [JobResult(Job(SLUG, "metric_behaviour", f"{MOD}:run_metric_behaviour", {}, s), "ok",
                     {"n_images": 10, "n_with_small": 0}) for s in (0, 1)]  # fmt: skip
    a = analyze(res, "smoke")
    assert a.checks[0].verdict == "inconclusive"
