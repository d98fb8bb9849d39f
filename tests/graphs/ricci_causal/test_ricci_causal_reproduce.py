"""The ricci-causal reproduction at smoke scale: runs, is deterministic, and its analysis copes with no results."""

from __future__ import annotations

import networkx as nx
import pytest

from icml24.common.experiment import deterministic_metrics, execute_job
from icml24.graphs.ricci_causal.reproduce import FAMILIES, REPRODUCTION, make_graph


def test_smoke_reproduction_runs_and_is_deterministic():
    jobs = REPRODUCTION.jobs("smoke")
    assert len(jobs) == 1
    results = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    again = execute_job(jobs[0])
    assert deterministic_metrics(again.metrics) == deterministic_metrics(results[0].metrics)
    analysis = REPRODUCTION.analyze(results, "smoke")
    assert analysis.verdict == "inconclusive"  # one run cannot decide
    assert REPRODUCTION.analyze([], "smoke").verdict == "inconclusive"


def test_job_lists():
    quick, full = REPRODUCTION.jobs("quick"), REPRODUCTION.jobs("full")
    assert {j.config["family"] for j in quick} == set(FAMILIES)
    assert sum(j.experiment == "speed" for j in full) == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_graph_families(family):
    g = make_graph(family, 400, 0)
    assert g.number_of_nodes() == 400 and nx.number_of_selfloops(g) == 0
    assert 3 <= 2 * g.number_of_edges() / 400 <= 20
    with pytest.raises(ValueError, match="family"):
        make_graph("grid", 10, 0)
