"""``analyze`` applies the README's rules to simulated results: flat-in-m (TOST on the log-log slope), the
paired comparison with the union baseline, the power-mean rates; the rule is symmetric and has power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml24.common import decide
from icml24.common.experiment import Job, JobResult
from icml24.optim.lp_coresets import (
    coreset_probabilities,
    lewis_weights,
    lp_cost,
    sample_coreset,
    solve_multi_lp,
)
from icml24.optim.lp_coresets.reproduce import (
    METHODS,
    SLOPE_MARGIN,
    SLUG,
    analyze,
    flat_in_m_decision,
    make_queries,
    make_regression,
)

KS = [100, 400, 1600]
MS = [1, 16, 256]
PS = [1.5, 3.0]
SEEDS = [0, 1, 2]  # the quick scale's seed count


def _reg(p, m, seed, values: dict[str, float]) -> JobResult:
    cfg = {"p": p, "m": m, "ks": KS}
    metrics = {f"{meth}_k{k}_{metric}": values[meth] * (400 / k) ** 0.5
               for k in KS for meth in METHODS for metric in ("strong", "dominant", "adversarial", "weak")}  # fmt: skip
    return JobResult(Job(SLUG, "regression", "icml24.optim.lp_coresets.reproduce:run_regression", cfg, seed),
                     "ok", metrics)  # fmt: skip


def simulate(rng: np.random.Generator, slope: float, noise: float = 0.3, union_ratio: float = 3.0) -> list:
    """m-free errors ~ m^slope times log-normal noise (sd ``noise``, the spread seen at quick scale); the
    union is ``union_ratio`` times worse and grows like m^0.5."""
    out = []
    for p in PS:
        for s in SEEDS:
            for m in MS:
                base = 0.05 * m**slope * math.exp(noise * rng.standard_normal())
                out.append(_reg(p, m, s, {"mfree": base, "mfree_half": base,
                                          "uniform": 10 * base * math.exp(noise * rng.standard_normal()),
                                          "union": union_ratio * 0.05 * m**0.5 * math.exp(noise * rng.standard_normal())}))  # fmt: skip
    return out


def _check(a, cid):
    return next(c for c in a.checks if c.id == cid)


def test_flat_errors_support_and_growing_errors_refute():
    rng = np.random.default_rng(0)
    flat = analyze(simulate(rng, 0.0), "quick")
    assert _check(flat, "flat-in-m").verdict == "supported"
    assert _check(flat, "beats-union").verdict == "supported"
    assert flat.verdict == "supported" and "flat-in-m" in flat.decided_by
    growing = analyze(simulate(rng, 0.3), "quick")  # 256^0.3 = 5.3x: the 2.36x from 1 to 32 is 0.25
    assert _check(growing, "flat-in-m").verdict == "not_supported"
    assert growing.verdict == "not_supported"


def test_the_flat_rule_is_symmetric_and_inconclusive_in_between():
    # a slope right at the margin is neither shown inside nor outside it
    verdicts = [flat_in_m_decision(simulate(np.random.default_rng(s), SLOPE_MARGIN)).verdict for s in range(6)]
    assert "inconclusive" in verdicts


def test_flat_rule_power_at_the_quick_seed_count():
    """Could this have failed? Power to say supported when the error is flat, and to say not_supported when
    it grows like the union baseline (slope 0.5), at 3 seeds with the quick-scale noise."""
    flat = decide.power(flat_in_m_decision, lambda rng: simulate(rng, 0.0), n_sims=100, seed=1)
    grows = decide.power(flat_in_m_decision, lambda rng: simulate(rng, 0.25), n_sims=100, seed=2)
    assert flat.supported >= 0.9 and flat.not_supported == 0.0
    assert grows.not_supported >= 0.9 and grows.supported == 0.0


def test_losing_to_the_union_refutes_the_baseline_check():
    res = simulate(np.random.default_rng(3), 0.0, union_ratio=0.01)
    a = analyze(res, "quick")
    assert _check(a, "beats-union").verdict == "not_supported" and a.verdict == "not_supported"


def _pm(kind, p, seed, errs: dict[int, float]) -> JobResult:
    cfg = {"instance": kind, "p": p, "ks": sorted(errs)}
    return JobResult(Job(SLUG, "power_means", "icml24.optim.lp_coresets.reproduce:run_power_means", cfg, seed),
                     "ok", {f"err_k{k}": v for k, v in errs.items()})  # fmt: skip


@pytest.mark.parametrize(("slope", "expected"), [(-0.5, "supported"), (-1.2, "not_supported")])
def test_hard_instance_rate_rule(slope, expected):
    rng = np.random.default_rng(0)
    ks = [30, 100, 300, 1000]
    res = [_pm("hard", 3.0, s, {k: 0.2 * k**slope * math.exp(0.1 * rng.standard_normal()) for k in ks})
           for s in SEEDS]  # fmt: skip
    assert _check(analyze(res, "quick"), "rate-attained-p3").verdict == expected


# ------------------------------------------------------------------------ flatness on real coresets
def _max_error(p: float, m: int, seed: int, mix: float | None, k: int = 300) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    A, B = make_regression(2000, 4, m, rng)
    X_star = solve_multi_lp(A, B, p, max_iter=60, tol=1e-8).X
    tau = lewis_weights(A, p, tol=1e-6)
    queries = make_queries(A, B, X_star, p, tau, rng, n_random=0, n_cols=0)
    cs = sample_coreset(coreset_probabilities(A, B, p, X0=X_star, lewis=tau, mix=mix), k, rng)
    out: dict[str, float] = {}
    for kind, X in queries:
        err = abs(cs.cost(A, B, X, p) / lp_cost(A, B, X, p) - 1.0)
        out[kind] = max(out.get(kind, 0.0), err)
    return out


def test_dominant_column_and_adversarial_queries_are_dominant():
    rng = np.random.default_rng(0)
    A, B = make_regression(500, 3, 8, rng)
    X_star = solve_multi_lp(A, B, 3.0).X
    for kind, X in make_queries(A, B, X_star, 3.0, lewis_weights(A, 3.0), rng, n_random=0, n_cols=0):
        col = np.abs(A @ X - B) ** 3
        moved = int(np.argmax(np.abs(X - X_star).sum(0)))
        assert col[:, moved].sum() / col.sum() == pytest.approx(0.9, abs=1e-3), kind


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_sensitivity_sampling_error_is_flat_in_m_on_dominant_and_adversarial_queries(p):
    """m = 1 against m = 32 at k = 300 (6 seeds): the mean max error may not grow by more than 1.5x."""
    ratios = {}
    for kind in ("dominant", "adversarial"):
        lo = np.mean([_max_error(p, 1, s, None)[kind] for s in range(6)])
        hi = np.mean([_max_error(p, 32, s, None)[kind] for s in range(6)])
        ratios[kind] = hi / lo
    assert max(ratios.values()) <= 1.5, ratios
