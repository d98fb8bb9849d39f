"""The verdict rule of mcq-permutation: its power at the run's question counts, a hand-made refuting case,
the chance-level guard, and the control's equivalence check; plus the smoke jobs end to end."""

from __future__ import annotations

import numpy as np

from icml24.common import decide
from icml24.common.experiment import Job, JobResult, execute_job
from icml24.evaluation.mcq_permutation import reproduce as R


def _result(arm: str, clean: np.ndarray, adv: np.ndarray, seed: int = 0) -> JobResult:
    n = len(clean)
    m = {"n": n, "family": ["fruit"] * n, "clean": clean.astype(int).tolist(), "adversarial": adv.astype(int).tolist(),
         "random_permutation": ((clean + adv) / 2).tolist(), "majority_vote": clean.astype(int).tolist(),
         "calibrated_clean": clean.astype(int).tolist(), "calibrated_adversarial": adv.astype(int).tolist(),
         "calibrated_random_permutation": clean.astype(float).tolist(), "letter_counts": [n * 6] * 4,
         "accuracy_by_gold_letter": [0.5] * 4}  # fmt: skip
    exp = "smollm2" if arm.startswith("smollm2") else ("cloze" if arm == "cloze" else "tiny")
    return JobResult(Job(R.SLUG, exp, "x:y", {"arm": arm}, seed), "ok", m)


def _simulate(rng: np.random.Generator, n: int, p_clean: float, p_adv_given_clean: float) -> list[JobResult]:
    clean = rng.random(n) < p_clean
    adv = clean & (rng.random(n) < p_adv_given_clean)  # right under all orders implies right in the clean one
    invariant = rng.random(n) < 0.7
    return [_result("smollm2-raw", clean, adv), _result("cloze", invariant, invariant)]


def _verdict(results: list[JobResult]) -> str:
    checks, _ = R.claim_checks(results)
    return decide.combine(checks, "all")[0]


def test_power_at_the_quick_and_full_question_counts():
    # The paper: adversarial accuracy tens of points below clean, often below chance. A model at clean 0.60
    # that keeps a third of its right answers under attack (adversarial 0.20) is such a drop.
    for n, floor in ((24, 0.75), (40, 0.95), (100, 0.99)):  # quick, full's adapted arm, full's raw arm
        pw = decide.power(_verdict, lambda rng, n=n: _simulate(rng, n, 0.6, 1 / 3), 200)
        assert pw.supported >= floor, (n, pw)
    # false support when the attack does nothing (adversarial = clean)
    for n in (40, 100):
        null = decide.power(_verdict, lambda rng, n=n: _simulate(rng, n, 0.6, 1.0), 200)
        assert null.supported <= 0.05 and null.not_supported >= 0.9, (n, null)


def test_hand_made_refuting_case_an_invariant_model_is_not_supported():
    clean = np.array([1] * 70 + [0] * 30)
    a = R.analyze([_result("smollm2-raw", clean, clean), _result("cloze", clean, clean)], "quick")
    assert a.verdict == "not_supported"
    assert "smollm2-raw-adversarial-below-clean" in a.decided_by


def test_a_model_at_chance_gives_no_verdict_even_when_the_attack_zeroes_it():
    clean = np.array([1] * 25 + [0] * 75)
    a = R.analyze([_result("smollm2-raw", clean, np.zeros(100)), _result("cloze", clean, clean)], "quick")
    checks = {c.id: c for c in a.checks}
    assert checks["smollm2-raw-adversarial-below-clean"].verdict == "supported"
    assert checks["smollm2-raw-clean-above-chance"].verdict == "inconclusive"
    assert a.verdict == "inconclusive"


def test_the_adapted_model_decides_when_it_ran_and_the_control_must_hold():
    good = np.array([1] * 60 + [0] * 40)
    adv = np.array([1] * 15 + [0] * 85)
    rs = [_result("smollm2-raw", good, good), _result("smollm2-adapted", good, adv), _result("cloze", good, good)]
    a = R.analyze(rs, "full")
    assert a.verdict == "supported" and "smollm2-adapted-adversarial-below-clean" in a.decided_by
    broken_control = [*rs[:2], _result("cloze", good, adv)]
    assert R.analyze(broken_control, "full").verdict != "supported"


def test_smoke_jobs_run_and_analyze():
    jobs = R.build_jobs("smoke", None)
    assert {j.config["arm"] for j in jobs} >= {"tiny-skewed", "tiny-augmented"}
    results = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    a = R.analyze(results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive") and a.tables and a.figures


def test_a_small_drop_is_not_a_fall_far_below_clean():
    # The case: 3 questions in 40 lost (0.60 -> 0.525). The old no-margin rule said supported; the
    # paper's "falls far" needs more than half of the accuracy above chance taken: this refutes it.
    clean = np.array([1] * 24 + [0] * 16)
    adv = clean.copy()
    adv[:3] = 0
    checks, _ = R.claim_checks([_result("smollm2-raw", clean, adv), _result("cloze", clean, clean)], "quick")
    by_id = {c.id: c for c in checks}
    assert by_id["smollm2-raw-adversarial-below-clean"].verdict == "not_supported"
    # A fall to below chance supports it, and the reported below-chance check says so.
    adv = np.zeros(40)
    adv[:4] = 1
    checks, _ = R.claim_checks([_result("smollm2-raw", clean, adv), _result("cloze", clean, clean)], "quick")
    by_id = {c.id: c for c in checks}
    assert by_id["smollm2-raw-adversarial-below-clean"].verdict == "supported"
    assert not by_id["smollm2-raw-adversarial-below-chance"].decisive


def test_drop_contrasts_by_hand():
    c = R.drop_contrasts(np.array([1, 1, 0]), np.array([1, 0, 0]))
    np.testing.assert_allclose(c, [1 - 0.625, -0.625, -0.125])
    with np.testing.assert_raises(ValueError):
        R.drop_contrasts(np.array([1, 0]), np.array([1]))


def test_without_the_pretrained_model_the_from_scratch_model_does_not_decide():
    # Only the tiny arms and the control ran (the wheels missing): the deciding arm is a missing arm, so the
    # verdict is inconclusive even though the tiny model's own drop is large and significant.
    clean = np.array([1] * 80 + [0] * 20)
    rs = [_result("tiny-skewed", clean, np.zeros(100)), _result("tiny-augmented", clean, clean),
          _result("cloze", clean, clean)]  # fmt: skip
    a = R.analyze(rs, "quick")
    by_id = {c.id: c for c in a.checks}
    assert by_id["tiny-skewed-adversarial-below-clean"].verdict == "supported"
    assert not by_id["tiny-skewed-adversarial-below-clean"].decisive
    assert by_id["smollm2-raw-adversarial-below-clean"].outcome == "not_run"
    assert a.verdict == "inconclusive"
    # At full scale the adapted arm decides: the raw arm alone does not stand in for it.
    rs_full = [_result("smollm2-raw", clean, np.zeros(100)), _result("cloze", clean, clean)]
    a = R.analyze(rs_full, "full")
    assert {c.id: c for c in a.checks}["smollm2-adapted-adversarial-below-clean"].outcome == "not_run"
    assert a.verdict == "inconclusive"


def test_missing_arms_name_the_deciding_arm(monkeypatch):
    monkeypatch.setattr(R, "_missing", lambda name: f"{name} not installed")
    assert any("smollm2-raw (deciding)" in m for m in R.missing_arms("quick"))
    assert R.build_jobs("quick", None) and all(j.config["arm"].startswith("tiny") for j in R.build_jobs("quick", None))
    assert R.REPRODUCTION.not_run("full")
