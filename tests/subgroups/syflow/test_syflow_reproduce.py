"""The reproduction at a tiny scale: jobs run, metrics are sane, and SYFLOW recovers an easy planted subgroup."""

from __future__ import annotations

import numpy as np

from icml24.common.experiment import execute_job
from icml24.subgroups.syflow import SyflowConfig, discover_subgroups, make_planted_subgroup
from icml24.subgroups.syflow.reproduce import ALL_TARGETS, REPRODUCTION, analyze, data_seed


def test_smoke_jobs_run_and_analyze():
    jobs = REPRODUCTION.jobs("smoke")
    results = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.error]
    syn = [r for r in results if r.job.experiment == "synthetic"]
    for r in syn:
        for m in ("syflow", "sd_mu", "sd_kl", "prim"):
            assert 0.0 <= r.metrics[f"{m}_f1"] <= 1.0
    for r in (r for r in results if r.job.experiment == "real"):  # fitted on one half, scored on the other
        assert r.metrics["n"] + r.metrics["n_fit"] == 442 and abs(r.metrics["n"] - r.metrics["n_fit"]) <= 1
    a = analyze(results, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive") and a.tables


def test_syflow_recovers_a_planted_variance_only_subgroup():
    """The distinguishing property (notes Sec. 7.10): same mean inside and outside, SYFLOW still finds it."""
    d = make_planted_subgroup(3000, 4, 1, "variance", seed=1)
    res = discover_subgroups(d.X, d.y, SyflowConfig(n_subgroups=2, pop_epochs=300, epochs=300), seed=0)
    f1 = []
    for g in res.subgroups:
        m = g.rule.covers(d.X)
        f1.append(2 * np.sum(m & d.members) / (m.sum() + d.members.sum()))
    best = int(np.argmax(f1))
    assert f1[best] > 0.8, [str(g.rule) for g in res.subgroups]
    assert res.subgroups[best].rule.features == d.features
    assert res.subgroups[best].kl > 0.3


def test_each_target_and_seed_draws_its_own_data_set():
    """Pooled (target, seed) pairs are independent: no two pairs share a data seed, and two targets at the same
    job seed get different X and planted intervals (one seed for all targets would share them)."""
    seeds = {data_seed(t, s) for t in ALL_TARGETS for s in range(10)}
    assert len(seeds) == 10 * len(ALL_TARGETS)
    a = make_planted_subgroup(200, 5, 2, "normal", seed=data_seed("normal", 0))
    b = make_planted_subgroup(200, 5, 2, "variance", seed=data_seed("variance", 0))
    assert not np.allclose(a.X, b.X) and not np.array_equal(a.members, b.members)
