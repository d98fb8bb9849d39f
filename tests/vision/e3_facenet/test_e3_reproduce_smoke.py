"""A tiny-scale run of the reproduction's job (two variants, a few steps) and its analysis."""

from __future__ import annotations

import math

import pytest

from icml24.common.experiment import JobResult
from icml24.vision.e3_facenet.reproduce import REPRODUCTION, analyze, run_seed


def test_tiny_run_has_every_metric_and_analyzes():
    job = REPRODUCTION.jobs("smoke")[0]
    m = run_seed(dict(job.config), job.seed)
    for v in ("base", "full"):
        for k in ("attribute_accuracy", "reprojection_error", "depth_tv", "view_embedding_similarity"):
            assert math.isfinite(m[f"{v}/{k}"])
        assert 0 <= m[f"{v}/attribute_accuracy"] <= 1
    assert m["base/offset_abs_mean"] == 0.0 and m["full/offset_abs_mean"] > 0  # SCE offsets are non-zero
    assert m["speed/optimisation_time_ratio"] > 1  # even 5 optimisation steps cost more than one pass
    assert m["speed/curve_steps"] == [1, 2, 5]
    assert m["speed/censored"] in (0, 1) and 1 <= m["speed/steps_to_direct_accuracy"] <= m["speed/budget_steps"]
    if m["speed/censored"]:
        assert m["speed/steps_to_direct_accuracy"] == m["speed/budget_steps"] == 8
    assert m["speed/equal_quality_ratio_cpu"] > 0 and m["speed/step_over_direct_cpu"] > 0
    a = analyze([JobResult(job, "ok", m)], "smoke")
    assert a.verdict in ("inconclusive", "not_supported")  # one seed cannot support anything
    assert {c.id for c in a.checks if c.decisive} == {"speed-orders-of-magnitude", "reg-multiview-consistency",
                                                      "sce-text-alignment"}  # fmt: skip


@pytest.mark.parametrize(("scale", "n"), [("smoke", 1), ("quick", 2), ("full", 5)])
def test_jobs_per_scale(scale, n):
    jobs = REPRODUCTION.jobs(scale)
    assert len(jobs) == n and all(j.experiment == "variants" for j in jobs)
    if scale != "smoke":
        assert jobs[0].config["variants"] == ["base", "reg", "sce", "full"]
