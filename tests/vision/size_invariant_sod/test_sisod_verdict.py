"""``analyze`` applies the README's verdict rules to hand-made results, each rule can come out either way,
and the training rule has power at the quick scale's seed count (a simulation)."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common import decide
from icml24.common.experiment import Job, JobResult
from icml24.vision.size_invariant_sod.reproduce import (
    BUCKETS,
    DEFAULT_SEEDS,
    EQUIVALENCE_MARGIN,
    METRICS,
    MIN_GAIN,
    POWER_EFFECT,
    POWER_SD,
    SLUG,
    analyze,
    equivalence_margin,
    small_recall_decision,
    small_recall_headroom,
    training_checks,
)

MOD = "icml24.vision.size_invariant_sod.reproduce"


def _behaviour(seed: int, n: int, k_mae_a: int, k_si_b: int) -> JobResult:
    m = {f"A_{k}": 0.5 for k in METRICS} | {f"B_{k}": 0.5 for k in METRICS}
    m |= {"n_images": n, "n_with_small": n, "n_mae_prefers_A": k_mae_a, "n_si_mae_prefers_B": k_si_b}
    return JobResult(Job(SLUG, "metric_behaviour", f"{MOD}:run_metric_behaviour", {}, seed), "ok", m)


def _training(seed: int, loss: str, small: float, large: float) -> JobResult:
    m = {k: 0.1 for k in METRICS} | {f"recall_{b}": 0.5 for b in BUCKETS} | {"si_auc_masked": 0.9}
    m |= {"recall_small": small, "recall_large": large}
    return JobResult(Job(SLUG, "training", f"{MOD}:run_training", {"loss": loss}, seed), "ok", m)


def _results(
    d_small: list[float], d_large: list[float] | float, rates: tuple[int, int] = (95, 90), bce_small: float = 0.6
) -> list[JobResult]:
    dl = d_large if isinstance(d_large, list) else [d_large] * len(d_small)
    res = [_behaviour(s, 100, *rates) for s in range(len(d_small))]
    for s, (d, e) in enumerate(zip(d_small, dl, strict=True)):
        res += [_training(s, "bce", bce_small, 0.9), _training(s, "si", bce_small + d, 0.9 + e)]
    return res


def _verdicts(res: list[JobResult]) -> tuple[str, dict[str, str]]:
    a = analyze(res, "quick")
    return a.verdict, {c.id: c.verdict for c in a.checks}


GAINS = [0.08, 0.25, 0.2, 0.12, 0.3]
SMALL_LARGE_NOISE = [0.01, -0.01, 0.0, 0.02, -0.005]


def test_every_sub_claim_holds():
    verdict, v = _verdicts(_results(GAINS, SMALL_LARGE_NOISE))
    assert verdict == "supported" and set(v.values()) == {"supported"}
    assert len(v) == 4


def test_metric_rates_can_fail_either_way():
    _, v = _verdicts(_results(GAINS, SMALL_LARGE_NOISE, rates=(20, 90)))
    assert v["mae-prefers-missing-small"] == "not_supported"  # 100 of 500 images: significantly below 1/2
    _, v = _verdicts(_results(GAINS, SMALL_LARGE_NOISE, rates=(95, 52)))
    assert v["si-mae-prefers-finding-all"] == "inconclusive"  # 260 of 500: neither side


def test_training_rule_is_symmetric():
    # a gain shown to be near zero (TOST within +-0.05) refutes the claim ...
    _, v = _verdicts(_results([0.01, -0.01, 0.0, 0.005, -0.004], SMALL_LARGE_NOISE))
    assert v["si-loss-small-recall"] == "not_supported"
    # ... a significant loss refutes it too ...
    _, v = _verdicts(_results([-0.1, -0.2, -0.15, -0.12, -0.18], SMALL_LARGE_NOISE))
    assert v["si-loss-small-recall"] == "not_supported"
    # ... and one noisy seed pair decides nothing
    _, v = _verdicts(_results([0.3, -0.25], [0.0, 0.01]))
    assert v["si-loss-small-recall"] == "inconclusive"


def test_large_object_cost_is_a_non_inferiority_test():
    _, v = _verdicts(_results(GAINS, [-0.2, -0.15, -0.12, -0.18, -0.16]))
    assert v["si-loss-large-cost"] == "not_supported"
    _, v = _verdicts(_results(GAINS, [-0.2, 0.15, -0.3, 0.1, 0.0]))
    assert v["si-loss-large-cost"] == "inconclusive"


def test_nothing_measured_is_inconclusive_not_refuted():
    res = [JobResult(Job(SLUG, "metric_behaviour", f"{MOD}:run_metric_behaviour", {}, s), "ok",
                     {"n_images": 10, "n_with_small": 0}) for s in (0, 1)]  # fmt: skip
    a = analyze(res, "smoke")
    assert a.verdict == "inconclusive" and {c.verdict for c in a.checks} == {"inconclusive"}


def test_training_rule_has_power_at_the_quick_seed_count():
    """Could this have failed? With a true gain of +0.10 (sd 0.10 per seed) the rule says supported in
    at least 75% of simulated quick runs; with no gain it says supported in at most ~5%."""
    n = DEFAULT_SEEDS["quick"]

    def rule(d: np.ndarray) -> str:
        return small_recall_decision(d).verdict

    def sim(effect: float):
        return lambda rng: effect + POWER_SD * rng.standard_normal(n)

    true = decide.power(rule, sim(POWER_EFFECT), n_sims=300, seed=1)
    null = decide.power(rule, sim(0.0), n_sims=300, seed=2)
    assert true.supported >= 0.75, true.describe()
    assert null.supported <= 0.09, null.describe()
    assert training_checks([0.1] * n, [0.0] * n)[0].power >= 0.75


def test_constructed_and_one_sided_checks_are_reported_not_decisive():
    """(a1)/(a2) score constructed predictors and (b2) is bounded above by 0 at a ceiling: they are reported,
    and their verdicts, even not_supported, leave the overall verdict to (b1)."""
    a = analyze(_results(GAINS, [-0.2, -0.15, -0.12, -0.18, -0.16], rates=(20, 90)), "quick")
    v = {c.id: c for c in a.checks}
    assert v["mae-prefers-missing-small"].verdict == "not_supported" and not v["mae-prefers-missing-small"].decisive
    assert v["si-loss-large-cost"].verdict == "not_supported" and not v["si-loss-large-cost"].decisive
    assert not v["si-mae-prefers-finding-all"].decisive and v["si-loss-small-recall"].decisive
    assert a.verdict == "supported" and a.decided_by == ["si-loss-small-recall"]
    # ... and (b1) alone still refutes
    a = analyze(_results([0.01, -0.01, 0.0, 0.005, -0.004], SMALL_LARGE_NOISE), "quick")
    assert a.verdict == "not_supported"


CEILING_GAINS = [0.02 + 0.03 * z for z in (-1.2, 0.5, 1.1, -0.4, 0.0)]
"""A real gain bounded by the ceiling: +0.02 on average, per-seed sd 0.03 (the issue's full-scale case)."""


def test_a_ceiling_limited_gain_is_not_ruled_equivalent_to_none():
    # BCE finds 96.4% of the small objects: 0.036 of headroom, so the TOST band is half of it, not +-0.05
    hr = small_recall_headroom([0.964] * 5)
    assert abs(hr.max_effect - 0.036) < 1e-12 and hr.can_decide
    assert abs(equivalence_margin(hr) - 0.018) < 1e-12 and equivalence_margin(hr) < hr.max_effect
    assert small_recall_decision(CEILING_GAINS, EQUIVALENCE_MARGIN).verdict == "not_supported"  # the old band
    a = analyze(_results(CEILING_GAINS, SMALL_LARGE_NOISE, bce_small=0.964), "full")
    c = {c.id: c for c in a.checks}["si-loss-small-recall"]
    assert c.verdict == "inconclusive" and a.verdict == "inconclusive"
    assert c.headroom is not None and "0.036" in c.headroom["text"] and "+-0.018" in c.evidence
    # with room to spare the band is the full +-0.05
    assert equivalence_margin(small_recall_headroom([0.6] * 5)) == EQUIVALENCE_MARGIN


def test_below_the_headroom_band_the_rule_still_refutes_and_supports():
    # a gain pinned near 0 with 0.036 of headroom is shown inside +-0.018: not supported
    a = analyze(_results([0.002, -0.001, 0.0, 0.001, -0.002, 0.001, 0.0, -0.001], 0.0, bce_small=0.964), "full")
    assert a.verdict == "not_supported"
    # the gain that fills the headroom is supported
    a = analyze(_results([0.03, 0.034, 0.036, 0.028, 0.033], 0.0, bce_small=0.964), "full")
    assert a.verdict == "supported"


def test_no_headroom_cannot_decide():
    # BCE at 0.99: the largest showable gain (0.01) is below MIN_GAIN, so even a consistent gain is inconclusive
    a = analyze(_results([0.008, 0.009, 0.0095, 0.0085, 0.009], 0.0, bce_small=0.99), "full")
    c = {c.id: c for c in a.checks}["si-loss-small-recall"]
    assert c.verdict == "supported" and c.effective_verdict == "inconclusive" and a.verdict == "inconclusive"
    assert c.headroom is not None and not c.headroom["can_decide"] and c.headroom["paper_effect"] == MIN_GAIN


def test_bad_headroom_input():
    with pytest.raises(ValueError, match="bce_small"):
        small_recall_headroom([1.2])
    with pytest.raises(ValueError, match="bce_small"):
        small_recall_headroom([])
    with pytest.raises(ValueError, match="margin"):
        small_recall_decision([0.1, 0.2], 0.0)
    with pytest.raises(TypeError, match="headroom"):
        equivalence_margin(0.3)  # type: ignore[arg-type]
