"""``analyze`` applies the README's flat-in-m rule to hand-made results (the smoke test accepts any verdict)."""

from __future__ import annotations

from icml24.common.experiment import Job, JobResult
from icml24.optim.lp_coresets.reproduce import FLAT_RATIO, METHODS, SLUG, analyze

KS = [100, 400]


def _reg(p: float, m: int, seed: int, mfree: float, others: float = 1.0) -> JobResult:
    cfg = {"p": p, "m": m, "ks": KS}
    metrics = {}
    for k in KS:
        for method in METHODS:
            for metric in ("strong", "weak"):
                metrics[f"{method}_k{k}_{metric}"] = mfree if method == "mfree" else others
    return JobResult(Job(SLUG, "regression", "icml24.optim.lp_coresets.reproduce:run_regression", cfg, seed),
                     "ok", metrics)  # fmt: skip


def _results(growth: float) -> list[JobResult]:
    return [_reg(p, m, s, 0.1 * (growth if m == 256 else 1.0)) for p in (1.5, 3.0) for m in (1, 256) for s in (0, 1)]


def _head(res: list[JobResult]):
    a = analyze(res, "smoke")
    head = [c for c in a.checks if "does not grow with m" in c.claim]
    assert len(head) == 1
    return a.verdict, head[0].verdict


def test_flat_error_supports_the_headline():
    assert _head(_results(1.0)) == ("supported", "supported")


def test_error_growing_past_the_allowed_ratio_refutes_the_headline():
    assert _head(_results(FLAT_RATIO * 1.1)) == ("not_supported", "not_supported")


def test_growth_just_under_the_ratio_is_still_flat():
    assert _head(_results(FLAT_RATIO * 0.95))[1] == "supported"


def test_losing_to_a_baseline_makes_the_overall_verdict_inconclusive():
    res = [_reg(p, m, s, 0.1, others=0.05) for p in (1.5, 3.0) for m in (1, 256) for s in (0, 1)]
    assert _head(res) == ("inconclusive", "supported")
