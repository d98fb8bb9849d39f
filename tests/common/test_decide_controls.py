"""Issue 33 part 3: decision primitives that stop the design from deciding a verdict (both tests significant,
negative controls, headroom, the unit of analysis, missing arms), on hand-made results."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common import decide
from icml24.common.experiment import ClaimCheck, Reproduction, missing_extra


def _supported_check(id="c", **kw):
    d = decide.compare_to_value([0.5, 0.6, 0.55, 0.52, 0.58], 0.0)
    assert d.verdict == "supported"
    return d.to_check(id=id, claim="the effect is positive", **kw)


def test_both_significant_is_its_own_outcome_not_rule_order():
    """crossget's case: the support test and the equivalence test are both significant."""
    diffs = np.array([0.30, 0.35, 0.25, 0.32, 0.28, 0.31, 0.29, 0.33])
    both = decide.compare(diffs, np.zeros_like(diffs), paired=True, equivalence_margin=1.0)
    assert both.p_value < 0.05 and both.p_refute < 0.05
    assert both.verdict == "inconclusive" and both.outcome == "effect_below_margin"
    assert "effect_below_margin" in both.describe()
    check = both.to_check(id="gap", claim="merging keeps accuracy")
    assert check.outcome == "effect_below_margin" and decide.combine([check])[0] == "inconclusive"
    # Without the equivalence band the same data support the claim; far from zero with a wide spread, neither.
    only = decide.compare(diffs, np.zeros_like(diffs), paired=True)
    assert only.verdict == "supported" and only.outcome == "effect_shown"
    refuted = decide.compare(-diffs, np.zeros_like(diffs), paired=True)
    assert refuted.verdict == "not_supported" and refuted.outcome == "refuted"


def test_negative_control_that_comes_out_supported_makes_the_check_uninformative():
    control = decide.compare_to_value([0.4, 0.5, 0.45, 0.48, 0.52], 0.0)  # the no-effect arm "shows" an effect
    check = _supported_check(control=control, control_claim="epsilon-greedy (linear regret) passes too")
    assert check.verdict == "supported" and check.uninformative and check.effective_verdict == "inconclusive"
    assert check.to_dict()["control"]["verdict"] == "supported" and check.to_dict()["uninformative"] is True
    verdict, _, text = decide.combine([check])
    assert verdict == "inconclusive" and "negative control" in text and "c" in text
    assert "uninformative" in check.evidence


def test_negative_control_that_shows_no_effect_lets_the_check_decide_both_ways():
    quiet = decide.compare_to_value([-0.01, 0.02, 0.0, -0.02, 0.01], 0.0)
    assert quiet.verdict != "supported"
    check = _supported_check(control=quiet)
    assert not check.uninformative and decide.combine([check])[0] == "supported"
    refuting = decide.compare_to_value([-0.5, -0.6, -0.55, -0.52, -0.58], 0.0).to_check(
        id="r", claim="the effect is positive", control=quiet
    )
    assert decide.combine([refuting])[0] == "not_supported"  # the same evidence refutes


def test_headroom_below_the_paper_effect_cannot_decide():
    # The failure-landscape case: random search at 12 queries a cell already recalls ~0.99 of the cells.
    recall = decide.random_search_recall([0.3, 0.35, 0.4], 12)
    assert recall == pytest.approx(np.mean([1 - 0.7**12, 1 - 0.65**12, 1 - 0.6**12]))
    room = decide.headroom(baseline_best=recall, ceiling=1.0, paper_effect=0.10, what="random search, 12 queries")
    assert not room.can_decide and room.max_effect == pytest.approx(1 - recall)
    assert "cannot decide" in room.text
    check = _supported_check(headroom=room)
    assert check.limited_by_headroom and decide.combine([check])[0] == "inconclusive"
    wide = decide.headroom(baseline_best=0.5, ceiling=1.0, paper_effect=0.10)
    assert wide.can_decide and decide.combine([_supported_check(headroom=wide)])[0] == "supported"
    lower = decide.headroom(baseline_best=0.3, ceiling=0.0, paper_effect=0.1, alternative="less")
    assert lower.max_effect == pytest.approx(0.3)
    with pytest.raises(ValueError, match="paper_effect"):
        decide.headroom(baseline_best=0.5, ceiling=1.0, paper_effect=0.0)
    with pytest.raises(ValueError, match="ceiling"):
        decide.headroom(baseline_best=1.2, ceiling=1.0, paper_effect=0.1)


def test_random_search_recall_matches_simulation():
    rng = np.random.default_rng(0)
    p = np.array([0.05, 0.2, 0.5])
    sim = (rng.random((20000, 3, 7)) < p[None, :, None]).any(axis=2).mean()
    assert decide.random_search_recall(p, 7) == pytest.approx(sim, abs=0.01)
    with pytest.raises(ValueError, match="queries"):
        decide.random_search_recall(0.1, -1)
    with pytest.raises(ValueError, match="probabilities"):
        decide.random_search_recall([1.5], 3)


def test_pooled_pseudo_replicates_are_refused_unless_pooling_is_stated():
    values = [0.3, 0.31, 0.5, 0.52, 0.4, 0.42]
    models = ["m0", "m0", "m1", "m1", "m2", "m2"]  # two scenes per trained model
    with pytest.raises(ValueError, match="pseudo-replicates"):
        decide.compare_to_value(values, 0.0, units=models)
    with pytest.raises(ValueError, match="pseudo-replicates"):
        decide.compare(values, [0.0] * 6, paired=True, units=models)
    pooled = decide.compare_to_value(values, 0.0, units=models, pooled="scenes are independent draws")
    assert pooled.n == 6
    units, means = decide.per_unit(values, models)
    assert units == ["m0", "m1", "m2"] and means == pytest.approx([0.305, 0.51, 0.41])
    per_model = decide.compare_to_value(means, 0.0, units=units)
    assert per_model.n == 3  # the independent unit
    with pytest.raises(ValueError, match="one unit"):
        decide.compare_to_value(values, 0.0, units=models[:3])
    with pytest.raises(ValueError, match="unpaired"):
        decide.compare(values, values, paired=False, units=models)
    ok = decide.compare(values, values, paired=False, units=([f"a{i}" for i in range(6)], [f"b{i}" for i in range(6)]))
    assert ok.n == 6


def test_missing_arm_is_inconclusive_and_listed():
    reason = missing_extra("no_such_package_xyz", "language")
    assert reason is not None and "icml24[language]" in reason
    assert missing_extra("numpy", "core") is None
    check = decide.not_run_check("smollm2-drop", "accuracy drops under permutation", reason)
    assert check.verdict == "inconclusive" and check.outcome == "not_run" and "not run" in check.evidence
    verdict, _, _ = decide.combine([_supported_check(), check])
    assert verdict == "inconclusive"  # a decisive arm that did not run is never replaced
    repro = Reproduction("p", "c", lambda scale, seeds: [], lambda r, s: None,
                         missing_arms=lambda scale: [f"SmolLM2 arms: {reason}"] if scale == "quick" else [])  # fmt: skip
    assert repro.not_run("quick") == [f"SmolLM2 arms: {reason}"] and repro.not_run("full") == []
    with pytest.raises(ValueError, match="reason"):
        decide.not_run_check("x", "y", "")


def test_control_must_be_a_decision_and_checks_validate_it():
    with pytest.raises(TypeError, match="control"):
        _supported_check(control="supported")
    with pytest.raises(ValueError, match="control"):
        ClaimCheck("c", "supported", "e", control={"verdict": "maybe"})


def test_every_primitive_states_the_margins_its_rule_used():
    """The forest plot draws the rule's margin: each primitive records the bar and the no-effect band it used."""
    a, b = [0.5, 0.6, 0.55, 0.52, 0.58], [0.4, 0.45, 0.5, 0.41, 0.47]
    d = decide.compare(a, b, paired=True, margin=0.02, equivalence_margin=0.05)
    assert (d.margin, d.equivalence_margin) == (0.02, 0.05)
    check = d.to_check(id="gain", claim="the method is better")
    assert (check.margin, check.equivalence_margin) == (0.02, 0.05)
    assert check.to_dict()["margin"] == 0.02 and check.to_dict()["equivalence_margin"] == 0.05
    plain = decide.compare(a, b, paired=False)
    assert plain.margin == 0.0 and plain.equivalence_margin is None
    assert decide.compare_to_value(a, 0.3, alternative="greater").margin == 0.3
    eq = decide.equivalence(a, b, margin=0.2, paired=True)
    assert eq.margin is None and eq.equivalence_margin == 0.2
    assert decide.rate_vs_value(8, 10, 0.5).margin == 0.5
    assert decide.compare_rates(8, 10, 3, 10, margin=0.1).margin == 0.1
    assert decide.trend([1, 2, 3, 4], [1.0, 2.1, 2.9, 4.2], claim="increasing", margin=0.5).margin == 0.5
    flat = decide.trend([1, 2, 3, 4], [1.0, 1.01, 0.99, 1.0], claim="flat", margin=0.1)
    assert flat.margin is None and flat.equivalence_margin == 0.1
    # Holm keeps them.
    assert [h.margin for h in decide.holm([d, d])] == [0.02, 0.02]
    # Positional calls bind the same way as keyword ones.
    assert decide.compare_to_value(a, 0.3).margin == 0.3


def test_forest_rows_carry_the_margins_of_the_checks():
    from icml24.common.experiment import Analysis
    from icml24.common.report import PaperReport, forest_rows

    check = decide.compare([0.5, 0.6, 0.55], [0.4, 0.45, 0.5], paired=True, margin=0.02,
                           equivalence_margin=0.05).to_check(id="gain", claim="better")  # fmt: skip
    report = PaperReport(slug="p", title="A paper", claim="c", scale="quick", seeds=[0, 1, 2],
                         analysis=Analysis("supported", "s", checks=[check]), deviations=(), n_jobs=3, n_ok=3,
                         field="vision")  # fmt: skip
    rows = forest_rows([report])
    assert rows[0].margin == 0.02 and rows[0].equivalence_margin == 0.05
