"""Job labels name every job apart: over every implemented paper's jobs at every scale, no two share one."""

from __future__ import annotations

import pytest

from icml24 import catalogue
from icml24.common.experiment import Job

IMPLEMENTED = [p.slug for p in catalogue.runnable()]


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_labels_are_unique_at_every_scale(slug):
    repro = catalogue.reproduction(slug)
    for scale in repro.scales:
        jobs = repro.jobs(scale)
        labels = [j.label for j in jobs]
        dupes = sorted({lb for lb in labels if labels.count(lb) > 1})
        assert not dupes, f"{slug} at {scale}: {len(dupes)} labels name two jobs, e.g. {dupes[0]}"


def test_label_keeps_every_scalar_and_tells_lists_apart():
    long = {f"parameter_{i}": i for i in range(12)}
    a = Job("p", "e", "m:f", {**long, "arms": [1, 2]}, 0)
    b = Job("p", "e", "m:f", {**long, "arms": [1, 3]}, 0)
    assert "parameter_11=11" in a.label and a.label != b.label
    assert Job("p", "e", "m:f", {"n": 1}, 3).label == "p/e[n=1] seed=3"
