"""A tiny-scale run of VinT-6D's reproduction job: every variant and level is scored, and analyze copes."""

import math

import pytest

pytest.importorskip("mujoco")

from icml24.common.experiment import Job, JobResult  # noqa: E402
from icml24.vision.vint_6d.reproduce import LEVELS, OBJECTS, VARIANTS, analyze, run_job  # noqa: E402


def test_tiny_job_scores_every_variant_at_every_level_and_analyzes():
    cfg = {"object": "cylinder", "size": OBJECTS["cylinder"], "levels": [0.2, 0.5], "n_train": 40, "n_test": 6,
           "epochs": 1, "steps": 60}  # fmt: skip
    m = run_job(cfg, 0)
    assert m["n_train"] == 40 and m["n_test"] == 12
    for variant in VARIANTS:
        assert m[f"{variant}/train_seconds"] > 0
        for lv in (20, 50):
            assert 0.0 <= m[f"{variant}/occ{lv}/auc"] <= 1.0
            assert 0.0 <= m[f"{variant}/occ{lv}/acc_005d"] <= 1.0
            assert math.isfinite(m[f"{variant}/occ{lv}/rot_deg"]) and m[f"{variant}/occ{lv}/trans_mm"] > 0
    assert m["occ50/occlusion_measured"] > m["occ20/occlusion_measured"]
    # the touch-only variant does not see the image: its scores are the same at every occlusion level
    assert m["touch/occ20/auc"] == m["touch/occ50/auc"]
    job = Job("vint-6d", "pose", "icml24.vision.vint_6d.reproduce:run_job", cfg, 0)
    a = analyze([JobResult(job, "ok", m)], "smoke")
    assert a.verdict == "inconclusive"  # one seed decides nothing
    assert {c.id for c in a.checks} >= {"fusion-beats-vision", "gain-grows-with-occlusion"}
    assert len(LEVELS) == 5
