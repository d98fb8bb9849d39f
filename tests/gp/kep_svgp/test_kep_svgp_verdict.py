"""``analyze`` applies the README's verdict rule to hand-made results (the smoke test accepts any verdict)."""

from __future__ import annotations

from icml24.common.experiment import Job, JobResult
from icml24.gp.kep_svgp.reproduce import LOWER_BETTER, METRICS, SLUG, SPLITS, analyze

SEEDS = (0, 1, 2)


def _uq(seed: int, kep_acc: float, kep_gain: float) -> JobResult:
    """One uq job; KEP-SVGP's uncertainty metrics are better than softmax's by ``kep_gain`` (plus seed noise)."""
    m = {}
    for split in SPLITS:
        for metric in METRICS:
            base = 0.9 if metric == "acc" else 0.5
            m[f"softmax/{split}/{metric}"] = base
            if metric == "acc":
                m[f"kep_sum/{split}/{metric}"] = kep_acc
            else:
                g = kep_gain + 0.001 * seed  # a little spread so the standard error is finite and small
                m[f"kep_sum/{split}/{metric}"] = base - g if metric in LOWER_BETTER else base + g
    return JobResult(Job(SLUG, "uq", "icml24.gp.kep_svgp.reproduce:run_uq", {}, seed), "ok", m)


def _verdict(kep_acc: float, kep_gain: float) -> tuple[str, list[str]]:
    a = analyze([_uq(s, kep_acc, kep_gain) for s in SEEDS], "smoke")
    return a.verdict, [c.verdict for c in a.checks]


def test_equal_accuracy_and_better_uncertainty_is_supported():
    assert _verdict(0.9, 0.05) == ("supported", ["supported", "supported", "supported"])


def test_accuracy_drop_over_two_points_is_not_supported():
    assert _verdict(0.85, 0.05)[0] == "not_supported"


def test_worse_uncertainty_everywhere_is_not_supported():
    assert _verdict(0.9, -0.05) == ("not_supported", ["supported", "not_supported", "not_supported"])


def test_one_seed_is_inconclusive():
    a = analyze([_uq(0, 0.9, 0.05)], "smoke")
    assert a.verdict == "inconclusive"
