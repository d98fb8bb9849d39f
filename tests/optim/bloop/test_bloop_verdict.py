"""The verdict of ``analyze`` follows the README's rule on hand-made results (not only "some verdict")."""

from __future__ import annotations

from icml24.common.experiment import Job, JobResult
from icml24.optim.bloop.reproduce import LABELS, SLUG, analyze


def _quad(label: str, lam: float, seed: int, dist: float, main: float) -> JobResult:
    job = Job(SLUG, "quadratic", "icml24.optim.bloop.reproduce:run_quadratic", {"label": label, "lam": lam}, seed)
    return JobResult(job, "ok", {"dist_bilevel": dist, "main_loss": main})


def _quadratic_results(bloop_dist: float, bloop_main: float) -> list[JobResult]:
    out = []
    for lam in (0.01, 0.1, 1.0):
        for seed in (0, 1):
            for label in LABELS:
                if label == "bloop_ema":
                    out.append(_quad(label, lam, seed, bloop_dist, bloop_main))
                else:
                    out.append(_quad(label, lam, seed, 1.0, 1.0))
    return out


def test_quadratic_rule_supported_when_bloop_ema_wins_on_both_metrics():
    a = analyze(_quadratic_results(0.1, 0.1), "smoke")
    assert [c.verdict for c in a.checks] == ["supported"]
    assert a.verdict == "supported"


def test_quadratic_rule_not_supported_when_bloop_ema_loses():
    a = analyze(_quadratic_results(2.0, 2.0), "smoke")
    assert a.verdict == "not_supported"


def test_quadratic_rule_needs_both_distance_and_loss():
    # closer to the bilevel solution but a higher training loss: not a win in any cell
    a = analyze(_quadratic_results(0.1, 2.0), "smoke")
    assert a.verdict == "not_supported"


def test_quadratic_rule_ignores_lambda_below_0_1():
    res = [r for r in _quadratic_results(0.1, 0.1) if not (r.job.config["lam"] == 0.01)]
    # a loss at lam = 0.01 does not change the verdict
    res += [_quad(label, 0.01, s, 5.0 if label == "bloop_ema" else 1.0, 5.0 if label == "bloop_ema" else 1.0)
            for label in LABELS for s in (0, 1)]  # fmt: skip
    assert analyze(res, "smoke").verdict == "supported"
