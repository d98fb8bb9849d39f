"""``analyze`` applies the README's verdict rules to hand-made results, each rule can come out either way,
and the competence-trend rule has power at the quick scale's seed count (a simulation)."""

from __future__ import annotations

import numpy as np

from icml24.common import decide
from icml24.common.experiment import Job, JobResult
from icml24.evaluation.platonic_representation.reproduce import (
    DEFAULT_SEEDS,
    OBJECTIVES,
    SLUG,
    analyze,
    competence_trend_decision,
    simulate_snapshot_rhos,
)

TEXTS = ("minilm", "minilm_random", "hashed_bow")


def _model(objective: str, width: int, steps: int, competence: float, align: float) -> dict:
    return {"objective": objective, "width": width, "steps": steps, "competence": competence, "probe": [competence] * 5,
            "align": align, "align_last_layer": align, "align_shuffled": 0.02,
            "align_by_text": {t: align * (1.0 if t == "minilm" else 0.8) for t in TEXTS},
            "align_by_text_layer": {t: [align] * 7 for t in TEXTS}}  # fmt: skip


def _job(seed: int, *, rho: float, trained: float, rho_vv: float, encoder: str = "minilm") -> JobResult:
    models = [_model("ssl", w, s, 0.4 + 0.1 * i, 0.03 + 0.01 * i) for i, (w, s) in enumerate([(8, 0), (32, 0), (8, 60), (32, 60)])]
    models += [_model(o, 32, 60, 0.6, 0.06) for o in OBJECTIVES if o != "ssl"]
    vv = [{"steps": 0, "vision_vision": 0.1, "competence": 0.4}, {"steps": 60, "vision_vision": 0.3, "competence": 0.7}]
    metrics = {"models": models, "vision_vision": vv, "chance": 0.02, "k": 10, "n": 512, "align_pixels": 0.05,
               "align_latent": 0.2, "latent_by_text": {t: 0.2 for t in TEXTS}, "cross_objective": {"ssl|ae": 0.1},
               "spearman_competence_align": rho, "best_trained_align": trained, "best_random_align": 0.04,
               "best_shuffled_align": 0.02, "spearman_competence_vv": rho_vv}  # fmt: skip
    job = Job(SLUG, "alignment", "icml24.evaluation.platonic_representation.reproduce:run_alignment",
              {"text_encoder": encoder}, seed)  # fmt: skip
    return JobResult(job, "ok", metrics)


def _verdicts(per_seed: list[dict], encoder: str = "minilm") -> tuple[str, dict[str, str]]:
    a = analyze([_job(s, encoder=encoder, **kw) for s, kw in enumerate(per_seed)], "quick")
    return a.verdict, {c.id: c.verdict for c in a.checks}


GOOD = [{"rho": 0.9, "trained": 0.09, "rho_vv": 1.0}, {"rho": 0.85, "trained": 0.085, "rho_vv": 0.9},
        {"rho": 0.8, "trained": 0.095, "rho_vv": 1.0}]  # fmt: skip


def test_all_decisive_rules_hold_and_controls_are_reported():
    verdict, v = _verdicts(GOOD)
    assert verdict == "supported"
    assert v["align-rises-with-competence"] == v["trained-above-random-init"] == v["vision-vision-rises"] == "supported"
    assert {"control-colour-only", "control-bag-of-words", "control-untrained-minilm"} <= set(v)


def test_bag_of_words_text_can_never_support():
    assert _verdicts(GOOD, encoder="hashed_bow")[0] == "inconclusive"


def test_each_rule_can_fail_either_way():
    bad_trend = [g | {"rho": r} for g, r in zip(GOOD, (-0.8, -0.7, -0.9), strict=True)]
    assert _verdicts(bad_trend)[1]["align-rises-with-competence"] == "not_supported"
    mixed = [g | {"rho": r} for g, r in zip(GOOD, (0.8, -0.7, 0.1), strict=True)]
    assert _verdicts(mixed)[1]["align-rises-with-competence"] == "inconclusive"
    below = [g | {"trained": t} for g, t in zip(GOOD, (0.02, 0.025, 0.03), strict=True)]
    assert _verdicts(below)[1]["trained-above-random-init"] == "not_supported"
    vv_down = [g | {"rho_vv": r} for g, r in zip(GOOD, (-1.0, -0.9, -0.8), strict=True)]
    verdict, v = _verdicts(vv_down)
    assert v["vision-vision-rises"] == "not_supported" and verdict == "not_supported"


def test_no_result_is_inconclusive():
    assert analyze([], "quick").verdict == "inconclusive"


def test_competence_trend_rule_has_power_at_the_quick_seed_count():
    """Could this have failed? With a true snapshot-level correlation of 0.7 (8 snapshots per seed) the
    rule says supported in at least 85% of simulated quick runs (about 0.6 at a correlation of 0.5); with
    none it rarely does."""
    n = DEFAULT_SEEDS["quick"]
    true = decide.power(competence_trend_decision, lambda rng: simulate_snapshot_rhos(rng, n), n_sims=300, seed=1)
    null = decide.power(competence_trend_decision, lambda rng: simulate_snapshot_rhos(rng, n, rho=0.0), n_sims=300, seed=2)
    assert true.supported >= 0.85, true.describe()
    assert null.supported <= 0.09, null.describe()
    assert np.isfinite(simulate_snapshot_rhos(np.random.default_rng(0), 2)).all()
