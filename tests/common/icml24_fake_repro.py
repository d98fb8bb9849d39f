"""A tiny reproduction used by the foundation tests (registered through ICML24_REPRODUCTIONS).

Its jobs draw random numbers from numpy and torch (so determinism across backends is tested on real
random streams), may sleep (so a run can be killed mid-way) and may crash on request.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from icml24.common.experiment import (
    Analysis,
    ClaimCheck,
    Figure,
    Job,
    Reproduction,
    Table,
    fmt_mean_std,
    numeric_cell,
    seeds_for,
)

SLUG = "fake-sleepy"
DEFAULT_SEEDS = {"smoke": 2, "quick": 3, "full": 4}


def run_draw(config: dict, seed: int) -> dict:
    time.sleep(float(config.get("sleep", 0.0)))
    if config.get("crash"):
        raise RuntimeError("this job crashes on purpose")
    rng = np.random.default_rng(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 16, generator=g, dtype=torch.float64)
    w = torch.randn(16, 4, generator=g, dtype=torch.float64)
    return {
        "numpy_mean": float(rng.normal(size=1000).mean() * config["n"]),
        "torch_norm": float((x @ w).norm()),
        "curve": rng.random(5).tolist(),
    }


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    sleep = {"smoke": 0.0, "quick": 0.4, "full": 0.0}[scale]
    jobs = []
    for n in (1, 2, 3, 4):
        for s in seeds_for(scale, seeds, DEFAULT_SEEDS):
            jobs.append(Job(SLUG, "draw", f"{__name__}:run_draw", {"n": n, "sleep": sleep}, s))
    return jobs


def analyze(results, scale) -> Analysis:
    vals = [r.metrics["numpy_mean"] for r in results]
    table = Table(
        "draws",
        ["metric", "value", "numbers"],
        [["numpy_mean", fmt_mean_std(vals), numeric_cell(vals)], ["with a gap", float("nan"), numeric_cell([1.0, None])]],
    )
    verdict = "supported" if len(results) > 0 else "inconclusive"
    checks = [
        ClaimCheck("draws exist", verdict, str(len(vals)), id="draws-exist", rule="at least one draw", n=len(vals)),
        ClaimCheck(
            "mean near zero: the draws are centred", "inconclusive", "reported only", rule="one-sided t-test, alpha 0.05",
            effect=float("nan"), effect_name="mean", ci=(-0.1, float("inf")), ci_level=0.95, p_value=0.2, power=0.8,
            decisive=False,
        ),
    ]
    figures = []
    if scale == "smoke" and results:
        figures = [Figure("draws by n", _plot(results), "mean over seeds; band: std over seeds")]
    return Analysis(verdict, f"{len(results)} draws", [table], figures, checks, rule="supported when draws exist")


def _plot(results) -> bytes:
    from icml24.common.experiment import figure_png, new_figure

    fig, axes = new_figure(1, 2)
    for ax in axes[0]:
        ax.plot([r.job.config["n"] for r in results], [r.metrics["numpy_mean"] for r in results], "o")
        ax.set_xlabel("n (multiplier)")
        ax.set_ylabel("numpy mean (a.u.)")
    return figure_png(fig)


def write_many(path: str, worker: int, n: int) -> None:
    """Write n results into the store at path (the concurrent-writers test runs several of these)."""
    from icml24.common.experiment import JobResult
    from icml24.common.store import ResultStore

    store = ResultStore(path)
    for i in range(n):
        job = Job("p", "e", "m:f", {"i": i, "nested": {"a": [1, 2]}}, worker)
        store.put(JobResult(job, "ok", {"w": worker, "i": i}, 0.0))


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim="Random draws are reproducible.",
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=("Not a paper.",),
)

CRASHING = Reproduction(
    slug="fake-crash",
    claim="A crashing job is reported.",
    build_jobs=lambda scale, seeds: [
        Job("fake-crash", "draw", f"{__name__}:run_draw", {"n": 1, "crash": True}, 0),
        Job("fake-crash", "draw", f"{__name__}:run_draw", {"n": 1}, 0),
    ],
    analyze=analyze,
)

SLOW = Reproduction(
    slug="fake-slow",
    claim="Slow jobs can be interrupted.",
    build_jobs=lambda scale, seeds: [
        Job("fake-slow", "draw", f"{__name__}:run_draw", {"n": n, "sleep": 4.0}, 0) for n in range(1, 9)
    ],
    analyze=analyze,
)

EMPTY = Reproduction(
    slug="fake-empty",
    claim="A job without the metrics its experiment declares is an error.",
    build_jobs=lambda scale, seeds: [
        Job("fake-empty", "draw", f"{__name__}:run_draw", {"n": 1}, 0),
        Job("fake-empty", "empty", f"{__name__}:run_empty", {"n": 1}, 0),
    ],
    analyze=analyze,
    required_metrics={"draw": ("numpy_mean", "not_returned")},
)


def run_empty(config: dict, seed: int) -> dict:
    return {}
