"""A tiny-scale run of the CrossGET reproduction: jobs build, run, are deterministic and analyse."""

from __future__ import annotations

import copy

from icml24.common.experiment import JobResult
from icml24.multimodal.crossget.reproduce import REPRODUCTION, run_clip


def _tiny_config():
    job = REPRODUCTION.jobs("smoke")[0]
    cfg = copy.deepcopy(job.config)
    cfg.update(steps=3, n_eval=24, r_grid=[8], finetune=[("none", 0), ("crossget", 8), ("tome", 8)], ft_steps=2,
               timing=1)  # fmt: skip
    cfg["model"] = {**cfg["model"], "vision_width": 16, "text_width": 16, "embed_dim": 16, "vision_mlp": 16,
                    "vision_layers": 2, "text_layers": 2}  # fmt: skip
    return job, cfg


def test_jobs_per_scale():
    assert len(REPRODUCTION.jobs("quick")) == 3 and len(REPRODUCTION.jobs("full")) == 3
    assert REPRODUCTION.jobs("full")[0].config["finetune"]
    assert not REPRODUCTION.jobs("quick")[0].config["finetune"]


def test_tiny_run_is_deterministic_and_analysable():
    job, cfg = _tiny_config()
    a = run_clip(cfg, 0)
    b = run_clip(cfg, 0)
    deterministic = {k: v for k, v in a.items() if not k.endswith("img_per_s")}
    assert deterministic == {k: v for k, v in b.items() if not k.endswith("img_per_s")}
    for key in ("ots/none/r0/mean_r1", "ots/crossget/r8/mflops", "ft/crossget/r8/mean_r1", "ft/none/r0/img_per_s"):
        assert key in a
    # at width 16 the complete-graph similarity (T² · C) costs more than merging 8 tokens saves: measured
    assert a["ots/tome/r8/mflops"] < a["ots/none/r0/mflops"] < a["ots/crossget/r8/mflops"]
    assert 0 <= a["ots/crossget/r8/mean_r1"] <= 100
    results = [JobResult(job.__class__(job.slug, job.experiment, job.fn, cfg, s), "ok", run_clip(cfg, s)) for s in (0, 1)]
    analysis = REPRODUCTION.analyze(results, "smoke")
    assert analysis.verdict in ("supported", "not_supported", "inconclusive")
    assert {"ft-crossget-above-tome", "ft-crossget-near-unmerged"} <= {c.id for c in analysis.checks}
