"""VinT-6D's verdict rule on hand-made results: support, both kinds of refutation, too little data, and the rule's
simulated power at the seed counts the reproduction runs."""

import numpy as np
import pytest

from icml24.common.experiment import Job, JobResult
from icml24.vision.vint_6d.reproduce import (
    DEFAULT_SEEDS,
    LEVELS,
    OBJECTS,
    PAPER_GAIN_20,
    PAPER_SLOPE,
    REPRODUCTION,
    analyze,
    rule_power,
)


def _metrics(auc: dict[str, list[float]]) -> dict:
    m = {"generate_seconds": 1.0, "tried": 10, "penetration_dropped": 1, "contacts_mean": 3.5, "taxels_mean": 7.0}
    for variant, values in auc.items():
        m[f"{variant}/train_seconds"] = 1.0
        m[f"{variant}/final_loss"] = 0.004
        for lv, a in zip(LEVELS, values):
            k = f"{variant}/occ{round(100 * lv)}"
            m[f"{k}/auc"] = a
            m[f"{k}/auc_d10"] = 1.0 - 10 * (1.0 - a)  # the same ADD-S on a ten times shorter threshold
            m[f"{k}/trans_mm"] = 100 * (1.0 - a)  # the AUC up to 0.1 m is about 1 - mean ADD-S / 0.1 m
            m[f"{k}/rot_deg"] = 300 * (1.0 - a)
            for extra in ("acc_005d", "adds_mm"):
                m[f"{k}/{extra}"] = 1.0
    for lv in LEVELS:
        m[f"occ{round(100 * lv)}/occlusion_measured"] = lv
    return m


def _results(gain_at, seeds=4, noise=0.004, base=0.6, objects=("cylinder",), seed=0):
    """Vision-only AUC falls with occlusion; fusion = vision + gain_at(level) + noise."""
    rng = np.random.default_rng(seed)
    out = []
    for s in range(seeds):
        for obj in objects:
            vision = [base - 0.4 * (lv - 0.2) + noise * rng.standard_normal() for lv in LEVELS]
            fusion = [v + gain_at(lv) + noise * rng.standard_normal() for v, lv in zip(vision, LEVELS)]
            touch = [0.45 + noise * rng.standard_normal() for _ in LEVELS]
            cfg = {"object": obj, "size": OBJECTS[obj], "levels": list(LEVELS)}
            job = Job("vint-6d", "pose", "icml24.vision.vint_6d.reproduce:run_job", cfg, s)
            out.append(JobResult(job, "ok", _metrics({"fusion": fusion, "vision": vision, "touch": touch})))
    return out


def _paper_gain(lv):
    return PAPER_GAIN_20 + PAPER_SLOPE * (lv - 0.2)


def _check(a, cid):
    return next(c for c in a.checks if c.id == cid)


def test_a_gain_growing_with_occlusion_is_supported():
    a = analyze(_results(_paper_gain), "quick")
    assert a.verdict == "supported", a.summary
    assert _check(a, "fusion-beats-vision").verdict == "supported"
    assert _check(a, "gain-grows-with-occlusion").verdict == "supported"
    assert _check(a, "gain-grows-with-occlusion").effect == pytest.approx(PAPER_SLOPE, abs=0.05)
    assert _check(a, "touch-below-vision-low-occlusion").decisive is False
    assert set(a.decided_by) == {"fusion-beats-vision", "gain-grows-with-occlusion"}
    assert len(a.figures) == 1 and a.tables


def test_fusion_worse_than_vision_is_not_supported():
    a = analyze(_results(lambda lv: -0.05), "quick")
    assert _check(a, "fusion-beats-vision").verdict == "not_supported"
    assert a.verdict == "not_supported"


def test_no_gain_at_all_is_refuted_by_equivalence():
    a = analyze(_results(lambda lv: 0.0, noise=0.001, seeds=6), "quick")
    assert _check(a, "fusion-beats-vision").verdict == "not_supported"  # TOST within +-0.01
    assert _check(a, "gain-grows-with-occlusion").verdict == "not_supported"  # flat within +-0.05
    assert a.verdict == "not_supported"


def test_a_constant_gain_refutes_the_widening_but_not_the_gain():
    a = analyze(_results(lambda lv: 0.05, noise=0.002, seeds=6), "quick")
    assert _check(a, "fusion-beats-vision").verdict == "supported"
    assert _check(a, "gain-grows-with-occlusion").verdict == "not_supported"
    assert a.verdict == "not_supported"


def test_a_shrinking_gain_refutes_the_widening():
    a = analyze(_results(lambda lv: 0.1 - 0.3 * (lv - 0.2), noise=0.003), "quick")
    assert _check(a, "gain-grows-with-occlusion").verdict == "not_supported"


def test_one_seed_decides_nothing_and_missing_results_do_not_crash():
    a = analyze(_results(_paper_gain, seeds=1), "smoke")
    assert a.verdict == "inconclusive"
    assert analyze([], "quick").verdict == "inconclusive"


def test_three_objects_are_averaged_per_seed():
    a = analyze(_results(_paper_gain, objects=("cylinder", "box", "ellipsoid")), "full")
    assert a.verdict == "supported"
    assert {c.id for c in a.checks} >= {"fusion-vs-vision-box", "fusion-vs-vision-ellipsoid"}
    assert len(a.tables) == 1 + 3 + 2  # averaged AUC, one table per object, training cost, data


@pytest.mark.parametrize("scale", ["quick", "full"])
def test_power_of_the_rule_at_the_runs_seed_count(scale):
    """The paper's effect (gain 1.45 AUC points at 20% occlusion growing 0.23 per unit occlusion) with the spread
    the quick run measured (std over seeds of the level-averaged gain 0.025; std of the per-seed slopes 0.037, i.e.
    per-level noise 0.012): power >= 0.9 for the gain and >= 0.95 for the widening at the run's 4 seeds (README:
    0.96 and 1.00 by 400 simulations); at 2 seeds the gain's power collapses (one degree of freedom at Holm's
    0.025)."""
    n = DEFAULT_SEEDS[scale]
    p_main, p_trend = rule_power(n, len(LEVELS), 0.025, 0.012, n_sims=300)
    assert p_main >= 0.9 and p_trend >= 0.95, (p_main, p_trend)
    p_main2, _ = rule_power(2, len(LEVELS), 0.025, 0.012, n_sims=300)
    assert p_main2 < 0.5


def test_the_widening_is_tested_on_one_slope_per_seed():
    """The five levels of a seed share its grasps and models: the trend check has n = seeds, not seeds x levels."""
    a = analyze(_results(_paper_gain, seeds=4), "quick")
    c = _check(a, "gain-grows-with-occlusion")
    assert c.n == 4 and "per-seed slope" in c.effect_name


def test_false_support_rate_without_an_effect():
    from icml24.common.decide import combine, power
    from icml24.vision.vint_6d.reproduce import collect, decide_checks

    def simulate(rng):
        return collect(_results(lambda lv: 0.0, seeds=4, noise=0.02, seed=int(rng.integers(1 << 30))))

    pw = power(lambda col: combine(decide_checks(col, with_power=False))[0], simulate, n_sims=200, seed=1)
    assert pw.supported <= 0.05


def test_jobs_per_scale():
    assert len(REPRODUCTION.jobs("smoke")) == 1
    assert len(REPRODUCTION.jobs("quick")) == DEFAULT_SEEDS["quick"]
    assert len(REPRODUCTION.jobs("full")) == 3 * DEFAULT_SEEDS["full"]


def test_translation_and_rotation_gains_are_reported_beside_the_auc():
    a = analyze(_results(_paper_gain), "quick")
    for cid in ("fusion-gain-trans_mm", "fusion-gain-rot_deg", "fusion-gain-auc_d10"):
        c = _check(a, cid)
        assert c.decisive is False and c.verdict == "supported" and c.effect > 0
    # the translation reduction is the AUC gain in mm (AUC up to 0.1 m = 1 - ADD-S / 100 mm here)
    gain = _check(a, "fusion-beats-vision").effect
    assert _check(a, "fusion-gain-trans_mm").effect == pytest.approx(100 * gain, rel=1e-6)
    assert "fusion-gain-trans_mm" not in a.decided_by
    worse = analyze(_results(lambda lv: -0.05), "quick")
    assert _check(worse, "fusion-gain-trans_mm").verdict == "not_supported"
