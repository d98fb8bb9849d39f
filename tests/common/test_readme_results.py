"""The README results block (``icml24 readme``): what it says, where it goes, and the kernel-set verdict."""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common import decide
from icml24.common import readme_results as rr
from icml24.common.compare import CheckDiff, PaperDiff
from icml24.common.experiment import Job, JobResult
from icml24.common.report import PaperReport

ENV = {"description": "torch 2.13.0 (AVX2), numpy 2.3.4, openblas 0.3.30 (Haswell)", "n_rows": 4, "readers": True}


def _report(verdict_shift: float = 1.0, *, n_ok: int = 4) -> PaperReport:
    x = np.array([0.9, 1.1, 1.0, 1.2]) * verdict_shift
    main = decide.compare_to_value(x, 0.0).to_check(id="x-positive", claim="x is positive")
    side = decide.compare_to_value(-x, 0.0).to_check(id="side", claim="a side effect", decisive=False)
    analysis = decide.analysis([main, side], summary="x")
    code = {"fingerprint": "abcdef1234567890", "n_stale": 0, "environments": [ENV],
            "runs": [{"current": True, "git_commit": "0123456789abc", "git_dirty": False,
                      "last_finished": 1_796_256_000.0}]}  # fmt: skip
    return PaperReport(slug="p", title="P", claim="x is positive.", scale="quick", seeds=[0, 1, 2, 3],
                       analysis=analysis, deviations=(), n_jobs=4, n_ok=n_ok, wall_time=12.3, code=code)  # fmt: skip


def test_block_names_code_environment_verdict_and_folds_reported_checks():
    block = rr.results_block(_report(), command="icml24 reproduce p --scale quick", note="Load 0.5-1.9.")
    assert block.startswith(rr.BEGIN.format(scale="quick")) and block.endswith(rr.END.format(scale="quick"))
    assert "commit 0123456" in block and "code fingerprint abcdef123456" in block and "(AVX2)" in block
    assert "Load 0.5-1.9." in block and "4/4 ok" in block and "**Verdict: supported" in block
    main_table, folded = block.split("<details>")
    assert "`x-positive`" in main_table and "`side`" not in main_table and "`side`" in folded
    assert "Incomplete" not in block


def test_incomplete_block_says_so():
    assert "**Incomplete**: 1 job(s)" in rr.results_block(_report(n_ok=3), command="c")


def test_replace_block_inserts_under_results_then_replaces_in_place():
    readme = "# P\n\n## Results\n\nHand-written quick table.\n\n## Deviations\n"
    quick = rr.results_block(_report(), command="c")
    once = rr.replace_block(readme, quick, "quick")
    assert once.index("## Results") < once.index(rr.BEGIN.format(scale="quick")) < once.index("Hand-written")
    assert rr.replace_block(once, quick, "quick") == once  # idempotent
    other = rr.results_block(_report(-1.0), command="c")
    twice = rr.replace_block(once, other, "quick")
    assert twice.count(rr.BEGIN.format(scale="quick")) == 1 and "not supported" in twice
    assert "Hand-written quick table." in twice and twice.endswith("## Deviations\n")
    full = rr.results_block(_report(), command="c").replace("scale=quick", "scale=full")
    both = rr.replace_block(twice, full, "full")
    assert both.index(rr.END.format(scale="quick")) < both.index(rr.BEGIN.format(scale="full"))
    with pytest.raises(ValueError, match="Results"):
        rr.replace_block("# no results heading\n", quick, "quick")
    placed = rr.replace_block("# P\n\n## The run\n\ntext\n\n## Deviations from the paper\n", quick, "quick")
    assert placed.index("text") < placed.index("## Results\n\n" + quick) < placed.index("## Deviations")


def _diff(verdict_b: str, check_b: str, *, kernels_b=("torch DEFAULT, openblas Sandybridge",)) -> PaperDiff:
    checks = [CheckDiff("x-positive", "supported", check_b, 1.0, 0.1, 0.001, 0.4, True),
              CheckDiff("side", "not_supported", "not_supported", -1.0, -1.0, 0.9, 0.9, False)]
    return PaperDiff("p", "supported", verdict_b, [], [], checks=checks, kernels_a=["torch AVX2, openblas Haswell"],
                     kernels_b=list(kernels_b))  # fmt: skip


def test_kernel_sentence_held_fragile_same_kernels_and_missing():
    held = rr.kernel_sentence(_diff("supported", "supported"), rr.JobAgreement(4, 1, 4), "ATEN default")
    assert "the verdict held" in held and "1 of 4 jobs bit-identical" in held and "Fragile" not in held
    fragile = rr.kernel_sentence(_diff("inconclusive", "inconclusive"), rr.JobAgreement(4, 0, 4), "ATEN default")
    assert "**Fragile**" in fragile and "`x-positive` supported → inconclusive (p 0.001 → 0.400)" in fragile
    same = rr.kernel_sentence(_diff("supported", "supported", kernels_b=("torch AVX2, openblas Haswell",)), None,
                              "avx2")  # fmt: skip
    assert "same kernels" in same and "held" not in same
    missing = rr.kernel_sentence(PaperDiff("p", "supported", None, [], []), None, "x")
    assert "not checked" in missing


class _Store:
    def __init__(self, rows):
        self.rows = rows

    def get_many(self, jobs):
        return [self.rows.get(j.seed) for j in jobs]


def test_job_agreement_ignores_timing_metrics_and_counts_missing(monkeypatch):
    jobs = [Job("p", "e", "m:f", {}, s) for s in range(3)]

    class Repro:
        def jobs(self, scale, seeds):
            return jobs

    monkeypatch.setattr(rr, "get_reproduction", lambda slug: Repro())
    a = _Store({s: JobResult(jobs[s], "ok", {"acc": 0.5, "train_seconds": 1.0 + s}) for s in range(3)})
    b = _Store({0: JobResult(jobs[0], "ok", {"acc": 0.5, "train_seconds": 9.0}),
                1: JobResult(jobs[1], "ok", {"acc": 0.6, "train_seconds": 2.0})})  # fmt: skip
    assert rr.job_agreement("p", "quick", None, a, b) == rr.JobAgreement(both=2, identical=1, total=3)
