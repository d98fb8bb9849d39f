"""``analyze`` applies the README's rule to hand-made results, and the rule's power at the run's seed counts.

Rule: four one-sided paired t-tests, Holm-corrected at family level 0.05, on the per-seed metrics averaged over
the descendant sizes: PEG vs random (final accuracy, accuracy after 5 epochs, area under the accuracy curve) and
PEG vs direct inheritance (final accuracy). supported iff all four are supported; not_supported if any is
refuted (significantly worse, or TOST-equivalent within ±0.02).
"""

from __future__ import annotations

import numpy as np
import pytest

from icml24.common.decide import combine, power
from icml24.common.experiment import Job, JobResult
from icml24.vision.peg_learngene.reproduce import (
    DEFAULT_SEEDS,
    SLUG,
    analyze,
    collect_metrics,
    decisive_checks,
    size_averaged,
)

BASE = {"random": 0.40, "direct": 0.70, "peg_uniform": 0.60, "tleg": 0.70}


def _job(seed: int, peg: float, rng: np.random.Generator, *, noise: float = 0.02, sizes=((4, 6),),
         base: dict | None = None, peg_early: float | None = None) -> JobResult:  # fmt: skip
    base = {**BASE, **(base or {})}
    m: dict = {"ancestry_acc": 0.95}
    for h, d in sizes:
        for method, acc in {**base, "peg": peg}.items():
            a = acc + noise * rng.standard_normal()
            early = a - 0.1 if method != "peg" or peg_early is None else peg_early + noise * rng.standard_normal()
            curve = list(np.linspace(early - 0.1, a, 20))
            curve[4] = early
            k = f"{h}x{d}/{method}"
            m.update({f"{k}/train_seconds": 1.0, f"{k}/acc": a, f"{k}/acc_early": early, f"{k}/auc": float(np.mean(curve)), f"{k}/curve": curve,
                      f"{k}/params": 1000})  # fmt: skip
    return JobResult(Job(SLUG, "descendants", "icml24.vision.peg_learngene.reproduce:run_seed", {}, seed), "ok", m)


def _analyze(peg=0.80, seeds=4, rng=None, **kw):
    rng = rng or np.random.default_rng(0)
    return analyze([_job(s, peg, rng, **kw) for s in range(seeds)], "smoke")


def _decisive(a):
    return {c.id: c.verdict for c in a.checks if c.decisive}


def test_peg_best_everywhere_is_supported():
    a = _analyze()
    d = _decisive(a)
    assert len(d) == 4 and set(d.values()) == {"supported"} and a.verdict == "supported", d
    assert all(c.power is not None and 0 <= c.power <= 1 for c in a.checks if c.decisive)
    assert a.tables and a.figures


def test_peg_worse_than_direct_refutes_the_claim():
    """The refuting case: PEG beats random but loses to direct inheritance."""
    a = _analyze(peg=0.60)
    d = _decisive(a)
    assert d["peg-beats-random-final"] == "supported"
    assert d["peg-beats-direct"] == "not_supported" and a.verdict == "not_supported"
    assert a.decided_by == ["peg-beats-direct"]


def test_peg_equal_to_direct_is_refuted_by_equivalence():
    a = _analyze(peg=0.70, noise=0.003)
    assert _decisive(a)["peg-beats-direct"] == "not_supported"


def test_peg_no_faster_than_random_refutes_convergence():
    a = _analyze(peg_early=0.15)
    d = _decisive(a)
    assert d["peg-faster-early"] == "not_supported" and a.verdict == "not_supported"


def test_one_seed_is_inconclusive_and_noise_gives_inconclusive():
    assert _analyze(seeds=1).verdict == "inconclusive"
    assert _analyze(peg=0.72, noise=0.08, seeds=3).verdict == "inconclusive"


def test_sizes_are_averaged_per_seed():
    rng = np.random.default_rng(0)
    res = [_job(s, 0.8, rng, sizes=((2, 3), (4, 6), (6, 9))) for s in range(3)]
    col = {}
    for r in res:
        for k, v in r.metrics.items():
            if isinstance(v, float):
                col.setdefault(k, {})[r.job.seed] = v
    avg = size_averaged(col, "peg", "acc")
    assert sorted(avg) == [0, 1, 2]
    assert avg[1] == pytest.approx(np.mean([col[f"{s}/peg/acc"][1] for s in ("2x3", "4x6", "6x9")]))
    a = analyze(res, "full")
    assert len(a.tables) == 7 and a.verdict == "supported"


@pytest.mark.parametrize(("scale", "least"), [("quick", 0.55), ("full", 0.85)])
def test_power_at_the_run_seed_counts(scale, least):
    """The power simulation, at each scale's seed count, with the per-method per-seed spread of the quick run
    (0.075 accuracy: paired differences of sd ~0.1): the whole rule says supported in at least ``least`` of
    simulated runs where PEG gains 0.15 over direct inheritance and 0.45 over random, and rarely (<= 10%) when
    PEG equals direct inheritance. (At 6 seeds a gain of 0.05 is detected in about a quarter of runs, 0.10 in
    about two thirds: see the README.)"""
    n = DEFAULT_SEEDS[scale]

    def sim(gain):
        return lambda rng: [_job(s, 0.70 + gain, rng, noise=0.075) for s in range(n)]

    def rule(results):  # analyze's decisive checks and its "all" combination, without tables and figures
        return combine(decisive_checks(collect_metrics(results)[0], with_power=False), "all")[0]

    good = power(rule, sim(0.15), n_sims=300, seed=1)
    null = power(rule, sim(0.0), n_sims=300, seed=2)
    assert good.supported >= least, good.describe()
    assert null.supported <= 0.1, null.describe()


def test_epochs_to_reach():
    from icml24.vision.peg_learngene.reproduce import epochs_to_reach

    assert epochs_to_reach([0.1, 0.5, 0.7], 0.5) == 2
    assert epochs_to_reach([0.1, 0.2], 0.9) == 2
    assert epochs_to_reach([0.9], 0.5) == 1


def test_the_equivalence_route_says_when_it_cannot_fire():
    """At 4 seeds with a per-seed spread of 0.03 the TOST within ±0.02 cannot refute even an exact tie (its reach
    0.02 - t_0.95,3 · 0.03/2 is below 0), and each decisive check says so; with 12 seeds and a tight spread it can,
    and a tie is then refuted."""
    from icml24.vision.peg_learngene.reproduce import EQUIV_MARGIN, equivalence_reach

    tie = [0.03, -0.03, 0.03, -0.03]
    assert equivalence_reach(tie, [0.0] * 4) < 0
    a = _analyze(peg=0.70, noise=0.03, base={"direct": 0.70})
    c = next(c for c in a.checks if c.id == "peg-beats-direct")
    assert "cannot fire at 4 seeds" in c.evidence and c.verdict != "not_supported"
    assert 0 < equivalence_reach([0.002, -0.002] * 6, [0.0] * 12) < EQUIV_MARGIN
    b = _analyze(peg=0.70, noise=0.001, seeds=12, base={"direct": 0.70})
    c = next(c for c in b.checks if c.id == "peg-beats-direct")
    assert "would need |mean difference| <" in c.evidence and c.verdict == "not_supported"
