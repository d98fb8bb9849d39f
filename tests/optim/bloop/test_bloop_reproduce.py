"""The reproduction runs at smoke scale, is deterministic, and its analysis copes with missing jobs."""

from __future__ import annotations

import numpy as np

from icml24.common.experiment import execute_job
from icml24.optim.bloop.reproduce import REPRODUCTION, hypervolume_2d


def test_hypervolume_hand_computed():
    pts = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    # staircase below (2, 2): [0,0.5]x[1,2] + [0.5,1]x[0.5,2] + [1,2]x[0,2]
    assert np.isclose(hypervolume_2d(pts, np.array([2.0, 2.0])), 0.5 + 0.75 + 2.0)
    assert hypervolume_2d(np.array([[3.0, 3.0]]), np.array([2.0, 2.0])) == 0.0


def test_smoke_reproduction_runs_and_is_deterministic():
    jobs = REPRODUCTION.jobs("smoke")
    assert {j.experiment for j in jobs} == {"quadratic", "digits"}
    results = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.status != "ok"]
    again = execute_job(jobs[0])
    assert again.metrics == results[0].metrics
    analysis = REPRODUCTION.analyze(results, "smoke")
    assert analysis.verdict in ("supported", "not_supported", "inconclusive")
    assert analysis.tables and analysis.checks
    partial = REPRODUCTION.analyze(results[: len(results) // 3], "smoke")
    assert partial.verdict in ("supported", "not_supported", "inconclusive")
    assert REPRODUCTION.analyze([], "smoke").verdict == "inconclusive"
