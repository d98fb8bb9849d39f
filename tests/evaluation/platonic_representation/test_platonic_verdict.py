"""``analyze`` applies the README's verdict rules to hand-made results (the smoke test only sees the
bag-of-words encoder, which can never give "supported")."""

from __future__ import annotations

from icml24.common.experiment import Job, JobResult
from icml24.evaluation.platonic_representation.reproduce import SLUG, analyze


def _job(seed: int, *, rho: float, trained: float, shuffled: float, rho_vv: float, vv_rises: bool,
         encoder: str = "minilm") -> JobResult:  # fmt: skip
    models = [{"width": w, "steps": s, "competence": 0.5 + 0.1 * i, "align": 0.1 + 0.05 * i,
               "align_last_layer": 0.1, "align_shuffled": shuffled}
              for i, (w, s) in enumerate([(8, 0), (32, 0), (8, 60), (32, 60)])]  # fmt: skip
    vv = [{"steps": 0, "vision_vision": 0.2, "competence": 0.5},
          {"steps": 60, "vision_vision": 0.4 if vv_rises else 0.1, "competence": 0.8}]  # fmt: skip
    metrics = {"models": models, "vision_vision": vv, "chance": 0.04, "k": 5, "n": 128,
               "align_pixels": 0.1, "align_latent": 0.5, "spearman_competence_align": rho,
               "best_trained_align": trained, "best_random_align": 0.15, "best_shuffled_align": shuffled,
               "spearman_competence_vv": rho_vv}  # fmt: skip
    cfg = {"text_encoder": encoder}
    return JobResult(Job(SLUG, "alignment", "icml24.evaluation.platonic_representation.reproduce:run_alignment",
                         cfg, seed), "ok", metrics)  # fmt: skip


GOOD = {"rho": 0.9, "trained": 0.3, "shuffled": 0.05, "rho_vv": 0.9, "vv_rises": True}


def _verdicts(**kw) -> tuple[str, list[str]]:
    a = analyze([_job(s, **(GOOD | kw)) for s in (0, 1)], "quick")
    return a.verdict, [c.verdict for c in a.checks]


def test_all_three_rules_hold():
    assert _verdicts() == ("supported", ["supported"] * 3)


def test_bag_of_words_text_can_never_support():
    assert _verdicts(encoder="hashed_bow")[0] == "inconclusive"


def test_each_rule_can_fail():
    assert _verdicts(rho=-0.2)[1][0] == "not_supported"
    assert _verdicts(rho=0.3)[1][0] == "inconclusive"
    assert _verdicts(trained=0.1)[1][1] == "not_supported"  # below the best random-init model
    assert _verdicts(shuffled=0.5)[1][1] == "not_supported"  # shuffled control beats the trained model
    assert _verdicts(shuffled=0.2)[1][1] == "inconclusive"  # beaten, but not near chance (3 x 0.04)
    assert _verdicts(rho_vv=-0.5, vv_rises=False)[1][2] == "not_supported"
    assert _verdicts(vv_rises=False)[1][2] == "inconclusive"
    assert _verdicts(rho=-0.2, trained=0.1, rho_vv=-0.5, vv_rises=False)[0] == "not_supported"


def test_no_trained_snapshot_is_inconclusive_not_refuted():
    assert _verdicts(trained=float("nan"))[1][1] == "inconclusive"
