"""The demonstration's rules on hand-made results (each rule's supporting and refuting case, decided over trained
models), the mirrored-twin checks of the paper's point, their power at the run's model and scene counts, and a
smoke run of the reproduction."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common.experiment import VERDICTS, Job, JobResult, execute_job
from icml24.evaluation.context_explanations import reproduce as rp


def _counts(rate: float, n: int) -> list[int]:
    k = round(rate * n)
    return [1] * k + [0] * (n - k)


def _metrics(task="relation", model="cnn", *, n=300, acc=1.0, twin=1.0, point=0.95, probe=0.5, recovered=0.99,
             twin_probe=0.5, told=0.99, twins=True, methods=("gradcam", "ig", "shapley")):  # fmt: skip
    per = {}
    for mt in methods:
        entry = {"probe_correct": _counts(probe, n), "probe_accuracy": probe,
                 "share_a_by_class": [0.4, 0.4], "share_b_by_class": [0.3, 0.3]}  # fmt: skip
        if twins and task == "relation":
            entry |= {"twin_probe_correct": _counts(twin_probe, n), "twin_probe_accuracy": twin_probe,
                      "twin_summary_distance": 0.01}
        if mt == "shapley":
            entry |= {"phi_a_by_class": [1.0, 1.0], "phi_b_by_class": [1.0, 1.0], "efficiency_gap": 1e-7}
        else:
            entry |= {"pointing_hits_by_class": [round(point * n / 2)] * 2, "object_mass": 0.6}
        per[mt] = entry
    out = {
        "task": task, "model": model, "n_test": n, "test_correct": round(acc * n), "twin_a_correct": round(twin * n),
        "twin_b_correct": round(twin * n), "n_by_class": [n // 2, n // 2], "methods": per, "final_train_loss": 0.01,
        "counterfactual": {"n": n, "recovered": round(recovered * n), "flips": n, "flip_offset_mean": 0.0,
                           "flip_offset_std": 0.5, "example_offsets": [-3.0, 0.0, 3.0], "example_margins": [-2.0, 0.1, 2.0]},
    }  # fmt: skip
    if twins and task == "relation":
        out["twins_told_apart_by_counterfactual"] = round(told * n)
    return out


def _jitter(m: dict, seed: int) -> dict:
    """A copy of ``m`` for one more trained model: its probe accuracies moved by up to +-0.02 (models differ)."""
    out = {**m, "methods": {k: dict(v) for k, v in m["methods"].items()}}
    d = 0.01 * ((seed % 5) - 2)
    for v in out["methods"].values():
        v["probe_accuracy"] = float(np.clip(v["probe_accuracy"] + d, 0, 1))
        if "twin_probe_accuracy" in v:
            v["twin_probe_accuracy"] = float(np.clip(v["twin_probe_accuracy"] - d, 0, 1))
    return out


def _results(*runs: dict, seeds: int = 4) -> list[JobResult]:
    out = []
    for m in runs:
        for seed in range(seeds):
            job = Job(rp.SLUG, f"{m['task']}_{m['model']}", f"{rp.MODULE}:run_demo", {"task": m["task"]}, seed)
            out.append(JobResult(job, "ok", _jitter(m, seed)))
    return out


def _good():
    return [_metrics(), _metrics("colour", probe=0.95, recovered=0.0)]


def _check(a, prefix):
    return [c for c in a.checks if c.id.startswith(prefix)]


def test_the_expected_directions_support_the_illustration():
    a = rp.analyze(_results(*_good()), "quick")
    assert a.verdict == "supported", a.summary
    assert "not a reproduction" in a.summary and "not empirical support" in a.summary
    ids = {c.id for c in a.checks}
    assert {"solved-by-relation-cnn", "where-right-gradcam-cnn", "how-missing-gradcam-cnn", "how-missing-shapley-cnn",
            "counterfactual-recovers-cnn", "control-informative-gradcam-cnn", "twins-indistinct-gradcam-cnn",
            "twins-told-apart-by-counterfactual-cnn"} <= ids  # fmt: skip
    assert all(c.power is not None for c in a.checks if c.decisive)
    # every decisive rule is decided over the 4 trained models, not over their pooled scenes
    assert all(c.n == 4 for c in a.checks if c.decisive), [(c.id, c.n) for c in a.checks if c.decisive]


def test_an_explanation_that_tells_mirrored_twins_apart_refutes_the_point():
    relation, colour = _good()
    relation["methods"]["ig"] |= {"twin_probe_accuracy": 0.9}
    a = rp.analyze(_results(relation, colour), "quick")
    assert _check(a, "twins-indistinct-ig")[0].verdict == "not_supported"
    assert a.verdict == "not_supported" and a.decided_by == ["twins-indistinct-ig-cnn"]


def test_a_counterfactual_that_cannot_tell_twins_apart_refutes_the_point():
    relation, colour = _good()
    relation["twins_told_apart_by_counterfactual"] = 150
    a = rp.analyze(_results(relation, colour), "quick")
    assert _check(a, "twins-told-apart")[0].verdict == "not_supported" and a.verdict == "not_supported"


def test_rows_without_twin_explanations_are_inconclusive_not_supported():
    relation, colour = _metrics(twins=False), _metrics("colour", probe=0.95, recovered=0.0)
    a = rp.analyze(_results(relation, colour), "quick")
    assert _check(a, "twins-indistinct-gradcam")[0].verdict == "inconclusive"
    assert _check(a, "twins-told-apart")[0].verdict == "inconclusive"
    assert a.verdict == "inconclusive"


def test_explanations_that_tell_the_class_refute_it():
    relation, colour = _good()
    relation["methods"]["gradcam"] |= {"probe_correct": _counts(0.8, 300), "probe_accuracy": 0.8}
    a = rp.analyze(_results(relation, colour), "quick")
    assert a.verdict == "not_supported"
    assert _check(a, "how-missing-gradcam")[0].verdict == "not_supported"
    assert a.decided_by == ["how-missing-gradcam-cnn"]


def test_a_counterfactual_that_misses_the_rule_refutes_it():
    relation, colour = _good()
    relation["counterfactual"]["recovered"] = 200
    a = rp.analyze(_results(relation, colour), "quick")
    assert a.verdict == "not_supported" and _check(a, "counterfactual")[0].verdict == "not_supported"


def test_a_model_that_reads_a_border_cue_fails_the_twin_test():
    relation, colour = _good()
    relation["twin_a_correct"] = 150  # right on the scenes, wrong on one twin: not the relation
    a = rp.analyze(_results(relation, colour), "quick")
    assert _check(a, "solved")[0].verdict == "not_supported" and a.verdict == "not_supported"


def test_heatmaps_off_the_objects_refute_the_where_part():
    relation, colour = _good()
    relation["methods"]["ig"]["pointing_hits_by_class"] = [150, 60]  # 40% in class 1 in every model
    a = rp.analyze(_results(relation, colour), "quick")
    assert _check(a, "where-right-ig")[0].verdict == "not_supported"


def test_an_uninformative_control_refutes_the_specificity():
    relation, colour = _good()
    colour["methods"]["gradcam"] |= {"probe_correct": _counts(0.5, 300), "probe_accuracy": 0.5}
    a = rp.analyze(_results(relation, colour), "quick")
    assert _check(a, "control-informative-gradcam")[0].verdict == "not_supported" and a.verdict == "not_supported"


def test_one_trained_model_cannot_decide():
    # a single model is one unit: every decisive rule is inconclusive, whatever its scenes say
    relation, colour = _metrics(probe=0.5), _metrics("colour", probe=0.95, recovered=0.0)
    a = rp.analyze(_results(relation, colour, seeds=1), "smoke")
    assert all(c.verdict == "inconclusive" for c in a.checks if c.decisive) and a.verdict == "inconclusive"


def test_power_at_the_quick_and_full_model_counts():
    """Power simulations over trained models (quick: 4 models x 300 scenes, full: 5 x 400), drawing the unit the
    rules decide on."""
    for models, n in ((4, 300), (5, 400)):
        for rule in ("recovery", "control", "solved"):
            assert rp.rule_power(rule, models, n) > 0.8, (rule, models)
    # the TOST at chance has less: about 0.7 at 4 models (the README states it), more with more models
    assert 0.6 < rp.rule_power("chance", 4, 300) < rp.rule_power("chance", 5, 400)
    assert rp.rule_power("chance", 1, 300) == 0.0
    with pytest.raises(ValueError, match="rule"):
        rp.rule_power("nope", 4, 300)
    # ... and the rules rarely say supported when the truth is the other way.
    from icml24.common import decide

    leak = decide.power(rp.chance_decision, lambda rng: 0.7 + 0.05 * rng.standard_normal(4), n_sims=300, seed=1)
    assert leak.supported < 0.05 and leak.not_supported > 0.8
    miss = decide.power(rp.recovery_decision, lambda rng: 0.9 + 0.01 * rng.standard_normal(4), n_sims=300)
    assert miss.supported < 0.05 and miss.not_supported > 0.8


def test_no_results_is_inconclusive():
    assert rp.analyze([], "quick").verdict == "inconclusive"


def test_the_jobs_of_each_scale():
    for scale in ("smoke", "quick", "full"):
        jobs = rp.REPRODUCTION.jobs(scale)
        assert len({j.key for j in jobs}) == len(jobs)
    full = rp.REPRODUCTION.jobs("full")
    assert {j.experiment for j in full} == {"relation_cnn", "colour_cnn", "relation_vit"}
    assert all("occlusion" in j.config["methods"] for j in full)


@pytest.mark.slow
def test_smoke_reproduction_end_to_end():
    results = [execute_job(j) for j in rp.REPRODUCTION.jobs("smoke")]
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.error]
    a = rp.analyze(results, "smoke")
    assert a.verdict in VERDICTS and a.tables and a.figures
    m = results[0].metrics
    assert m["methods"]["shapley"]["efficiency_gap"] < 1e-4
    assert np.isfinite(m["methods"]["gradcam"]["probe_accuracy"])


def test_pooled_scenes_are_reported_only_and_the_model_is_the_unit():
    """Pooled scenes call probes of 0.62 and 0.78 (mean 0.70) not at chance; over the two trained models the
    spread between them leaves it open: the per-model rule decides, the pooled one is reported."""
    relation, colour = _good()
    relation_hi = {**relation, "methods": {**relation["methods"]}}
    relation["methods"]["gradcam"] = relation["methods"]["gradcam"] | {"probe_correct": _counts(0.62, 300),
                                                                       "probe_accuracy": 0.62}
    relation_hi["methods"]["gradcam"] = relation["methods"]["gradcam"] | {"probe_correct": _counts(0.78, 300),
                                                                          "probe_accuracy": 0.78}
    res = [JobResult(Job(rp.SLUG, "relation_cnn", f"{rp.MODULE}:run_demo", {"task": "relation"}, s), "ok", m)
           for s, m in enumerate((relation, relation_hi))] + _results(colour, seeds=2)  # fmt: skip
    a = rp.analyze(res, "quick")
    by_id = {c.id: c for c in a.checks}
    pooled, per_model = by_id["how-missing-gradcam-cnn-pooled"], by_id["how-missing-gradcam-cnn"]
    assert pooled.verdict == "not_supported" and not pooled.decisive
    assert per_model.verdict == "inconclusive" and per_model.decisive and per_model.n == 2
    assert "how-missing-gradcam-cnn-pooled" not in a.decided_by
    # Models all far above the band are refuted over models too.
    relation, colour = _good()
    relation["methods"]["gradcam"] |= {"probe_correct": _counts(0.9, 300), "probe_accuracy": 0.9}
    a = rp.analyze(_results(relation, colour, seeds=3), "quick")
    assert {c.id: c for c in a.checks}["how-missing-gradcam-cnn"].verdict == "not_supported"


def test_rules_refuse_repeated_units():
    with pytest.raises(ValueError):
        rp.solved_decision([1.0, 1.0], units=[0])
    _, v = rp._per_model([0.5, 0.7, 0.6], [0, 0, 1])
    assert np.allclose(v, [0.6, 0.6])
