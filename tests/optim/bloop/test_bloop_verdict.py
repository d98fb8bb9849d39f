"""The verdict of ``analyze`` follows the README's rule on simulated results (paired log-ratio tests against
every baseline, Holm-corrected; symmetric), and the rule has power at the quick seed count."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

from icml24.common import decide
from icml24.common.experiment import Job, JobResult
from icml24.optim.bloop.reproduce import (
    BASELINES,
    LABELS,
    SLUG,
    analyze,
    digits_decisions,
    quadratic_decisions,
)

SEEDS = [0, 1, 2, 3]


@pytest.fixture
def no_gc_collect(monkeypatch):
    """statsmodels' multipletests (Holm) calls gc.collect() on every call (0.2 s): skip it in the power loops."""
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
  # the quick scale's seed count
LAMS = (0.01, 0.1, 1.0, 10.0)


def _quad(label, lam, seed, dist, main) -> JobResult:
    job = Job(SLUG, "quadratic", "icml24.optim.bloop.reproduce:run_quadratic", {"label": label, "lam": lam}, seed)
    return JobResult(job, "ok", {"dist_bilevel": dist, "main_loss": main})


def simulate_quadratic(rng, log_ratio: float, sd: float = 0.2, loser: str | None = None) -> list[JobResult]:
    """Bloop-EMA's distance and loss are exp(log_ratio) times the baselines' (log-normal noise ``sd``)."""
    out = []
    for lam in LAMS:
        for s in SEEDS:
            for label in LABELS:
                r = log_ratio if label == "bloop_ema" else 0.0
                if label == loser:
                    r = 2 * log_ratio
                out.append(_quad(label, lam, s, math.exp(r + sd * rng.standard_normal()),
                                 math.exp(r + sd * rng.standard_normal())))  # fmt: skip
    return out


def test_bloop_winning_everywhere_is_supported_and_every_baseline_is_tested(no_gc_collect):
    a = analyze(simulate_quadratic(np.random.default_rng(0), -0.7), "quick")
    ids = {c.id for c in a.checks}
    assert {f"quadratic-{m}-vs-{b}" for b in BASELINES for m in ("dist_bilevel", "main_loss")} <= ids
    assert "quadratic-dist_bilevel-vs-pcgrad" in ids and "quadratic-main_loss-vs-dynamic_barrier" in ids
    assert a.verdict == "supported" and all(c.power is not None and c.power > 0.9 for c in a.checks)


def test_losing_to_pcgrad_refutes_and_a_tie_is_inconclusive(no_gc_collect):
    lose = analyze(simulate_quadratic(np.random.default_rng(1), -0.7, loser="pcgrad"), "quick")
    by = {c.id: c.verdict for c in lose.checks}
    assert by["quadratic-dist_bilevel-vs-pcgrad"] == "not_supported" and lose.verdict == "not_supported"
    assert by["quadratic-dist_bilevel-vs-mixed"] == "supported"
    tie = analyze(simulate_quadratic(np.random.default_rng(2), 0.0, sd=0.3), "quick")
    assert tie.verdict != "supported"


def test_quadratic_rule_ignores_lambda_below_0_1():
    res = simulate_quadratic(np.random.default_rng(3), -0.7)
    res = [r for r in res if not (r.job.config["lam"] == 0.01 and r.job.config["label"] == "bloop_ema")]
    res += [_quad("bloop_ema", 0.01, s, 50.0, 50.0) for s in SEEDS]  # a big loss at lam = 0.01
    assert analyze(res, "quick").verdict == "supported"


def test_quadratic_rule_power_at_the_quick_seed_count(no_gc_collect):
    """Could this have failed? With 4 seeds x 3 lambdas the rule says supported when Bloop halves the
    distance and the loss (the README's target), and not_supported when it doubles them."""
    def rule(res):
        decs = [d for _, _, d, _ in quadratic_decisions(res)]
        return decide.combine([d.to_check(id=str(i), claim="c") for i, d in enumerate(decs)], "all")[0]

    good = decide.power(rule, lambda rng: simulate_quadratic(rng, -math.log(2), sd=0.4), n_sims=40, seed=0)
    bad = decide.power(rule, lambda rng: simulate_quadratic(rng, math.log(2), sd=0.4), n_sims=40, seed=1)
    assert good.supported >= 0.9 and bad.not_supported >= 0.9 and bad.supported == 0.0


def _digits(label, lam, seed, aux_value, test_loss) -> JobResult:
    cfg = {"label": label, "lam": lam, "aux": "lipschitz"}
    return JobResult(Job(SLUG, "digits", "icml24.optim.bloop.reproduce:run_digits", cfg, seed), "ok",
                     {"aux_value": aux_value, "test_loss": test_loss, "test_acc": 0.9})  # fmt: skip


def simulate_digits(rng, shift: float, sd: float = 0.01) -> list[JobResult]:
    """Fronts over 4 lambdas; Bloop-EMA's is shifted down by ``shift`` in test loss."""
    out = []
    for s in SEEDS:
        for label in LABELS:
            for i, lam in enumerate((1e-3, 1e-2, 0.1, 1.0)):
                d = shift if label == "bloop_ema" else 0.0
                out.append(_digits(label, lam, s, 3.0 - i, 0.3 + 0.1 * i - d + sd * rng.standard_normal()))
    return out


def test_digits_rule_power_and_symmetry(no_gc_collect):
    def rule(res):
        decs = [d for _, d, _ in digits_decisions(res, "lipschitz")]
        return decide.combine([d.to_check(id=str(i), claim="c") for i, d in enumerate(decs)], "all")[0]

    better = decide.power(rule, lambda rng: simulate_digits(rng, 0.05), n_sims=40, seed=0)
    worse = decide.power(rule, lambda rng: simulate_digits(rng, -0.05), n_sims=40, seed=1)
    assert better.supported >= 0.8 and worse.not_supported >= 0.8 and worse.supported == 0.0
