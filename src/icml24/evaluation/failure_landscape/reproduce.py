"""Miniature reproduction of *Failures Are Fated, But Can Be Faded* (Sagar, Taparia, Senanayake; ICML 2024).

One job per seed, everything paired within it:

1. train the model under test (:class:`DigitsCNN`) on 60% of the bundled digits;
2. compute the exhaustive ground-truth failure landscape on a 20% search pool (every image under each of the
   125 concept cells, batched);
3. search the landscape at one query budget with the DQN agent (the paper's method), uniform random search
   and an epsilon-greedy bandit over the cells at two exploration rates (0.1 as the official baseline; 0.6,
   the DQN's own exploration floor);
4. restructure: the simulated human marks the DQN's three most frequent failing cells, the model is
   fine-tuned with those perturbations (probability 0.5), and the exhaustive landscape and the clean
   accuracy on the remaining 20% are measured again.

Claims checked (Section 4 of the paper): within the budget the DQN agent finds more true failure cells than
random and epsilon-greedy search; its visitation tracks the true landscape more closely (Wasserstein-1 by
POT); restructuring fades the chosen failure modes while clean accuracy holds (equivalence within 2 points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    fmt_mean_std,
    seeds_for,
)

SLUG = "failure-landscape"
DEFAULT_SEEDS = {"smoke": 2, "quick": 6, "full": 12}
ALPHA = 0.05
THRESHOLD = 0.3
"""A true failure cell fails on more than 30% of the pool's images (the notes' threshold)."""
SCALES: dict[str, dict[str, Any]] = {
    "smoke": {"budget": 200, "train_epochs": 3, "pool": 40, "finetune_epochs": 1},
    "quick": {"budget": 250, "train_epochs": 30, "pool": 360, "finetune_epochs": 5},
    "full": {"budget": 500, "train_epochs": 30, "pool": 360, "finetune_epochs": 5},
}
"""Query budgets: 250 queries (2 a cell) at quick, 500 (4 a cell) at full, below saturation: on seed 0 of the
quick landscape uniform random search's closed-form expected recall is 0.56 at 250 and 0.80 at 500 queries. At the
earlier 1,500 and 3,000 (12 and 24 a cell) it was 0.99-1.00, so no search could show a recall gain of
RECALL_EFFECT; the recall checks state this ceiling (``decide.headroom``) and cannot decide when it leaves less
than RECALL_EFFECT."""
EPSILONS = (0.1, 0.6)
"""Exploration rates of the epsilon-greedy baseline: 0.1 (the official baseline) and 0.6 (the DQN's floor)."""
METHODS = ("dqn", "random", "egreedy-0.1", "egreedy-0.6")
METHOD_NAMES = {"dqn": "DQN (paper)", "random": "random search", "egreedy-0.1": "epsilon-greedy, epsilon 0.1",
                "egreedy-0.6": "epsilon-greedy, epsilon 0.6",
                "egreedy-best": "epsilon-greedy, better epsilon per seed"}  # fmt: skip

RECALL_EFFECT = 0.10
"""The recall gain the search rules must detect (10 points of the true failure cells; our bar, the paper
reports no number we could retrieve)."""
RECALL_EQ = 0.05
"""A recall difference within +-5 points is evidence of no gain (not_supported by equivalence)."""
W1_EFFECT = 0.05
"""The Wasserstein-1 reduction the visitation rules must detect (in [0, 1]^3 level units)."""
W1_EQ = 0.02
"""A W1 difference within +-0.02 is evidence of no difference."""
FADE_EFFECT = 0.15
"""The drop of the chosen cells' failure rate the fading rule must detect (15 points)."""
FADE_EQ = 0.05
"""A change of the chosen cells' failure rate within +-5 points is evidence of no fading."""
FADE_CONTROL_EFFECT = 0.10
"""The extra drop of the marked cells' failure rate, over fine-tuning on three random other cells (the control),
that the decisive fading rule must detect (10 points)."""
ACC_MARGIN = 0.02
"""Clean accuracy "holds" when the fine-tuned model's accuracy is within +-2 points of the original's (TOST)."""
PILOT_SD = {"recall": 0.03, "w1": 0.035, "fade": 0.11, "accuracy": 0.006, "fade_vs_control": 0.07}
"""Standard deviations over seeds of the paired differences in the first quick run (6 seeds, at 4ae0c1f's
parent code; ``fade_vs_control`` from the three seeds of the random-cells arm in the review of issue 42): the
spread the power tests of ``analyze`` assume."""


# ---------------------------------------------------------------------------------------------- the job
def _single_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _split(n: int, seed: int, pool: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    n_train = int(round(0.6 * n))
    rest = perm[n_train:]
    half = len(rest) // 2
    pool_idx = rest[:half][:pool]
    return perm[:n_train], pool_idx, rest[half:]


def _accuracy(model, images: np.ndarray, labels: np.ndarray) -> float:
    from icml24.evaluation.failure_landscape.model import predict_proba

    return float((predict_proba(model, images).argmax(1) == labels).mean())


def run_seed(config: dict, seed: int) -> dict:
    """One seed of the whole pipeline: train, landscape, four searches, restructure, landscape again."""
    import torch

    from icml24.evaluation.failure_landscape import (
        ConceptGrid,
        DigitsCNN,
        DQNSearchConfig,
        FailureSearchEnv,
        RestructureConfig,
        TrainConfig,
        dqn_search,
        epsilon_greedy_search,
        evaluate_landscape,
        landscape_distance,
        load_digit_images,
        random_search,
        restructure,
        search_metrics,
        select_failure_modes,
        train_classifier,
    )

    _single_thread()
    images, labels = load_digit_images()
    tr, pool, te = _split(len(labels), seed, int(config["pool"]))
    grid = ConceptGrid(**{k: tuple(v) for k, v in config["grid"].items()}) if config.get("grid") else ConceptGrid()
    torch.manual_seed(seed)
    model = train_classifier(DigitsCNN(), images[tr], labels[tr], config=TrainConfig(epochs=int(config["train_epochs"])),
                             seed=seed)  # fmt: skip
    land = evaluate_landscape(model, images[pool], labels[pool], grid)
    truth = land.failure_cells(THRESHOLD)
    out: dict[str, Any] = {
        "clean_accuracy": _accuracy(model, images[te], labels[te]),
        "true_cells": int(truth.sum()),
        "n_cells": grid.n_cells,
        "mean_failure_rate": float(land.failure_rate.mean()),
        "failure_rate_map": land.failure_rate.round(4).tolist(),
    }
    env = FailureSearchEnv(land)
    budget = int(config["budget"])
    traces = {"dqn": dqn_search(env, budget, config=DQNSearchConfig(), seed=seed),
              "random": random_search(env, budget, seed=seed)}  # fmt: skip
    for eps in EPSILONS:
        traces[f"egreedy-{eps:g}"] = epsilon_greedy_search(env, budget, epsilon=eps, seed=seed)
    for name, trace in traces.items():
        m = search_metrics(trace, land, threshold=THRESHOLD)
        for key in ("true_cells_found", "true_cells_recall", "cells_with_failures", "failure_rate", "visitation_w1",
                    "reported_w1", "recall_curve"):  # fmt: skip
            out[f"{name}:{key}"] = m[key]
        out[f"{name}:visitation"] = trace.visitation(grid.n_cells).astype(int).tolist()
    out["recall_steps"] = search_metrics(traces["dqn"], land)["recall_steps"]

    # Restructure with the simulated human's choice from the DQN's report.
    rcfg = RestructureConfig(epochs=int(config["finetune_epochs"]))
    chosen = select_failure_modes(traces["dqn"], grid.n_cells, rcfg.k)
    tuned = restructure(model, images[tr], labels[tr], chosen, grid, config=rcfg, seed=seed)
    after = evaluate_landscape(tuned, images[pool], labels[pool], grid)
    others = np.setdiff1d(np.arange(grid.n_cells), chosen)
    before_rate, after_rate = land.failure_rate, after.failure_rate
    out.update({
        "chosen_cells": chosen,
        "chosen_true": int(truth[chosen].sum()),
        "chosen_rate_before": float(before_rate[chosen].mean()),
        "chosen_rate_after": float(after_rate[chosen].mean()),
        "other_rate_before": float(before_rate[others].mean()),
        "other_rate_after": float(after_rate[others].mean()),
        "true_cells_after": int(after.failure_cells(THRESHOLD).sum()),
        "clean_accuracy_after": _accuracy(tuned, images[te], labels[te]),
        "landscape_w1_before_after": landscape_distance(before_rate, after_rate, grid)
        if before_rate.sum() > 0 and after_rate.sum() > 0 else None,
        "failure_rate_map_after": after_rate.round(4).tolist(),
    })  # fmt: skip
    # The control arm: the same fine-tuning on three random cells other than the marked ones. Fine-tuning on any
    # perturbation can lower the marked cells' failure rate; the marking must beat this to count as "fading".
    control_cells = np.random.default_rng([seed, 7]).choice(others, size=len(chosen), replace=False).tolist()
    tuned_ctrl = restructure(model, images[tr], labels[tr], control_cells, grid, config=rcfg, seed=seed)
    after_ctrl = evaluate_landscape(tuned_ctrl, images[pool], labels[pool], grid).failure_rate
    out.update({
        "control_cells": control_cells,
        "chosen_rate_after_control": float(after_ctrl[chosen].mean()),
        "other_rate_after_control": float(after_ctrl[others].mean()),
        "clean_accuracy_after_control": _accuracy(tuned_ctrl, images[te], labels[te]),
    })  # fmt: skip
    # Discovery again on the restructured model: do the chosen modes leave the agent's report?
    rediscovered = select_failure_modes(dqn_search(FailureSearchEnv(after), budget, seed=seed), grid.n_cells, rcfg.k)
    out["chosen_still_top"] = len(set(chosen) & set(rediscovered))
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = dict(SCALES[scale])
    return [Job(SLUG, "search", f"{__name__}:run_seed", cfg, s) for s in seeds_for(scale, seeds, DEFAULT_SEEDS)]


# ---------------------------------------------------------------------------------------------- decisions
def _values(rs: Sequence[JobResult], key: str) -> np.ndarray:
    return np.array([math.nan if r.metrics.get(key) is None else float(r.metrics[key]) for r in rs])


def best_egreedy(rs: Sequence[JobResult], metric: str, better: str) -> np.ndarray:
    """Per seed, the better of the two epsilon-greedy arms on ``metric`` (``better`` = ``"max"`` or
    ``"min"``): a baseline tuned per seed in hindsight, which favours the baseline."""
    vals = np.stack([_values(rs, f"egreedy-{e:g}:{metric}") for e in EPSILONS])
    return np.nanmax(vals, 0) if better == "max" else np.nanmin(vals, 0)


def _paired_power(effect: float, diffs: np.ndarray, alternative: str, equivalence_margin: float | None) -> float | None:
    """Power of the paired rule at this run's seed count and spread when the true effect is ``effect``."""
    d = diffs[np.isfinite(diffs)]
    if d.size < 2:
        return None
    sd = float(np.std(d, ddof=1)) or 1e-3
    return decide.power_of_compare(effect, sd, int(d.size), paired=True, alternative=alternative, alpha=ALPHA,
                                   equivalence_margin=equivalence_margin, n_sims=200).supported  # fmt: skip


def recall_decision(dqn: Sequence[float], baseline: Sequence[float], name: str) -> decide.Decision:
    """Paired over seeds: true-failure-cell recall of DQN - ``name`` > 0 (not_supported: significantly
    lower, or equivalent within +-RECALL_EQ)."""
    return decide.compare(dqn, baseline, paired=True, alternative="greater", equivalence_margin=RECALL_EQ, alpha=ALPHA,
                          effect_name=f"true-failure-cell recall, DQN - {name}")  # fmt: skip


def visitation_decision(dqn: Sequence[float], baseline: Sequence[float], name: str) -> decide.Decision:
    """Paired over seeds: W1(visitation, true landscape) of DQN - ``name`` < 0 (not_supported: larger, or
    equivalent within +-W1_EQ)."""
    return decide.compare(dqn, baseline, paired=True, alternative="less", equivalence_margin=W1_EQ, alpha=ALPHA,
                          effect_name=f"W1(visitation, true landscape), DQN - {name}")  # fmt: skip


def fade_decision(before: Sequence[float], after: Sequence[float]) -> decide.Decision:
    """Paired over seeds: the chosen cells' failure rate after - before restructuring < 0 (not_supported:
    it rose, or stayed within +-FADE_EQ). Run on the marked arm and, as its negative control, on the arm
    fine-tuned on random other cells (``after`` = the marked cells' rate after that fine-tuning)."""
    return decide.compare(after, before, paired=True, alternative="less", equivalence_margin=FADE_EQ, alpha=ALPHA,
                          effect_name="failure rate of the chosen cells, after - before restructuring")  # fmt: skip


def fade_vs_control_decision(after_marked: Sequence[float], after_control: Sequence[float]) -> decide.Decision:
    """Paired over seeds: the marked cells' failure rate after fine-tuning on the marked cells minus after the same
    fine-tuning on three random other cells < 0 (not_supported: not lower, shown within +-FADE_EQ or higher).
    The paper's "fading" is the effect of the human's marking, so it must beat fine-tuning on unmarked cells."""
    return decide.compare(after_marked, after_control, paired=True, alternative="less", equivalence_margin=FADE_EQ,
                          alpha=ALPHA, effect_name="marked cells' failure rate, fine-tuned on them - fine-tuned on "
                          "random other cells")  # fmt: skip


def random_recall_ceiling(rs: Sequence[JobResult], queries: int | None = None) -> np.ndarray:
    """Per seed, the closed-form expected recall of uniform random search with ``queries`` queries in all (the
    job's budget by default): a query hits cell ``c`` and fails with probability ``p_c / n_cells``, so
    ``decide.random_search_recall(p_true / n_cells, queries)`` over the true failure cells."""
    out = []
    for r in rs:
        rate = np.asarray(r.metrics["failure_rate_map"], dtype=float)
        q = int(r.job.config["budget"]) if queries is None else int(queries)
        truth = rate > THRESHOLD
        out.append(decide.random_search_recall(rate[truth] / rate.size, q) if truth.any() else math.nan)
    return np.array(out)


def dqn_uniform_queries(budget: int) -> int:
    """The expected number of the DQN's queries that are uniform random (the sum of its exploration rate over
    the budget, SB3's linear schedule 1.0 -> 0.6): the rest go to its current argmax cell."""
    from icml24.evaluation.failure_landscape.search import DQNSearchConfig, linear_epsilon

    cfg = DQNSearchConfig()
    return int(round(sum(linear_epsilon(t, budget, cfg) for t in range(budget))))


def accuracy_holds_decision(before: Sequence[float], after: Sequence[float]) -> decide.Decision:
    """TOST over seeds: clean accuracy after - before restructuring within +-ACC_MARGIN (not_supported: shown
    outside the band)."""
    return decide.equivalence(after, before, margin=ACC_MARGIN, paired=True, alpha=ALPHA,
                              effect_name="clean test accuracy, after - before restructuring")  # fmt: skip


def _equivalence_power(diffs: np.ndarray) -> float | None:
    """Power of the TOST at this seed count and spread when the true accuracy change is 0."""
    d = diffs[np.isfinite(diffs)]
    if d.size < 2:
        return None
    sd = float(np.std(d, ddof=1)) or 1e-3
    return decide.power(lambda x: accuracy_holds_decision(np.zeros(d.size), x),
                        lambda rng: sd * rng.standard_normal(d.size), n_sims=200, seed=0).supported  # fmt: skip


def _search_checks(rs: Sequence[JobResult]) -> list:
    checks = []
    dqn_recall = _values(rs, "dqn:true_cells_recall")
    dqn_w1 = _values(rs, "dqn:visitation_w1")
    baselines = {"random": (_values(rs, "random:true_cells_recall"), _values(rs, "random:visitation_w1")),
                 "egreedy-best": (best_egreedy(rs, "true_cells_recall", "max"),
                                  best_egreedy(rs, "visitation_w1", "min"))}  # fmt: skip
    budget = int(rs[0].job.config["budget"])
    ceiling = random_recall_ceiling(rs)
    rooms = {
        "random": decide.headroom(baseline_best=float(np.nanmean(ceiling)), ceiling=1.0, paper_effect=RECALL_EFFECT,
                                  what=f"random search's closed-form expected recall at {budget} queries, mean over "
                                  f"seeds"),
        "egreedy-best": decide.headroom(baseline_best=float(np.clip(np.nanmean(baselines["egreedy-best"][0]), 0, 1)),
                                        ceiling=1.0, paper_effect=RECALL_EFFECT,
                                        what="the better epsilon-greedy arm's measured recall, mean over seeds"),
    }  # fmt: skip
    decisions, meta = [], []
    for key, (recall, w1) in baselines.items():
        name = METHOD_NAMES[key]
        decisions.append(recall_decision(dqn_recall, recall, name))
        meta.append((f"recall-vs-{key}", f"within the query budget the DQN agent finds more of the true failure "
                     f"cells than {name}", RECALL_EFFECT, dqn_recall - recall, "greater", RECALL_EQ, rooms[key]))  # fmt: skip
        decisions.append(visitation_decision(dqn_w1, w1, name))
        meta.append((f"visitation-vs-{key}", f"the DQN agent's visitation tracks the true failure landscape more "
                     f"closely than {name}'s (smaller Wasserstein-1)", -W1_EFFECT, dqn_w1 - w1, "less", W1_EQ, None))  # fmt: skip
    for d, (cid, claim, effect, diffs, alt, eq, room) in zip(decide.holm(decisions), meta, strict=True):
        ev = (f"{d.effect_name}: {d.effect:+.3f}, {int(np.isfinite(diffs).sum())} paired seeds, Holm-adjusted over "
              f"the four search comparisons" if d.effect is not None else "no data")  # fmt: skip
        checks.append(d.to_check(id=cid, claim=claim, evidence=ev, power=_paired_power(effect, diffs, alt, eq),
                                 headroom=room))
    # Reported: the official evaluation's "faults over steps", failing queries within the budget.
    fr_dqn, fr_rand = _values(rs, "dqn:failure_rate"), _values(rs, "random:failure_rate")
    d = decide.compare(fr_dqn, fr_rand, paired=True, alternative="greater", alpha=ALPHA,
                       effect_name="fraction of failing queries, DQN - random search")  # fmt: skip
    checks.append(d.to_check(
        id="failing-queries-vs-random",
        claim="(reported) the DQN agent's queries fail more often than random search's (the official evaluation's "
              "faults over steps)",
        evidence=f"failing queries {np.nanmean(fr_dqn):.3f} (DQN) vs {np.nanmean(fr_rand):.3f} (random), mean over "
                 f"{len(rs)} seeds",
        decisive=False))  # fmt: skip
    return checks


def _restructure_checks(rs: Sequence[JobResult]) -> list:
    before, after = _values(rs, "chosen_rate_before"), _values(rs, "chosen_rate_after")
    acc0, acc1 = _values(rs, "clean_accuracy"), _values(rs, "clean_accuracy_after")
    hold = accuracy_holds_decision(acc0, acc1)
    checks = []
    if all("chosen_rate_after_control" in r.metrics for r in rs):
        after_c = _values(rs, "chosen_rate_after_control")
        beat = fade_vs_control_decision(after, after_c)
        checks.append(beat.to_check(
            id="restructure-fades-chosen",
            claim="fine-tuning on the three failure modes the (simulated) human marks fades them beyond what the same "
                  "fine-tuning on three random other cells does",
            evidence=f"marked cells' failure rate {np.nanmean(before):.3f} before, {np.nanmean(after):.3f} after "
                     f"fine-tuning on them, {np.nanmean(after_c):.3f} after fine-tuning on random other cells (mean "
                     f"over {len(rs)} seeds)",
            power=_paired_power(-FADE_CONTROL_EFFECT, after - after_c, "less", FADE_EQ)))  # fmt: skip
        control = fade_decision(before, after_c)
        checks.append(fade_decision(before, after).to_check(
            id="restructure-fades-chosen-vs-before", decisive=False,
            claim="(reported) the marked cells' failure rate drops after fine-tuning on them (before vs after)",
            evidence=f"{np.nanmean(before):.3f} before, {np.nanmean(after):.3f} after", control=control,
            control_claim="the same rule on the arm fine-tuned on three random other cells"))  # fmt: skip
    else:
        checks.append(decide.not_run_check(
            "restructure-fades-chosen", "fine-tuning on the three marked failure modes fades them beyond what the "
            "same fine-tuning on three random other cells does",
            "these rows have no random-cells fine-tuning arm (the control the marked arm must beat)"))  # fmt: skip
    checks.append(hold.to_check(id="clean-accuracy-holds",
                                claim=f"clean accuracy holds through restructuring (within +-{ACC_MARGIN:.2f})",
                                evidence=f"clean test accuracy {np.nanmean(acc0):.4f} before, {np.nanmean(acc1):.4f} "
                                         f"after (mean over {len(rs)} seeds)",
                                power=_equivalence_power(acc1 - acc0)))  # fmt: skip
    return checks


# ---------------------------------------------------------------------------------------------- report
def _tables(rs: Sequence[JobResult]) -> list[Table]:
    rows = []
    for key in METHODS:
        rows.append([METHOD_NAMES[key],
                     fmt_mean_std(_values(rs, f"{key}:true_cells_recall")),
                     fmt_mean_std(_values(rs, f"{key}:true_cells_found"), 3),
                     fmt_mean_std(_values(rs, f"{key}:failure_rate")),
                     fmt_mean_std(_values(rs, f"{key}:visitation_w1")),
                     fmt_mean_std(_values(rs, f"{key}:reported_w1"))])  # fmt: skip
    budget = rs[0].job.config["budget"]
    search = Table(f"Failure search at a budget of {budget} queries (mean ± std over seeds)",
                   ["search", "true-failure-cell recall", "true failure cells found", "failing queries (fraction of the budget)",
                    "W1(visitation, true landscape)", "W1(reported failures, true landscape)"], rows,
                   note=f"True failure cells: failure rate above {THRESHOLD} on the search pool; "
                        f"{fmt_mean_std(_values(rs, 'true_cells'), 3)} of {rs[0].metrics['n_cells']} per seed. "
                        f"Closed-form expected recall of uniform random search at this budget: "
                        f"{fmt_mean_std(random_recall_ceiling(rs))} (at {12 * rs[0].metrics['n_cells']} queries, 12 a "
                        f"cell: {fmt_mean_std(random_recall_ceiling(rs, 12 * rs[0].metrics['n_cells']))}); of the "
                        f"DQN's own {dqn_uniform_queries(budget)} uniform (exploring) queries alone: "
                        f"{fmt_mean_std(random_recall_ceiling(rs, dqn_uniform_queries(budget)))}.")  # fmt: skip
    rrows = [
        ["chosen cells: failure rate", fmt_mean_std(_values(rs, "chosen_rate_before")),
         fmt_mean_std(_values(rs, "chosen_rate_after"))],
        ["other cells: failure rate", fmt_mean_std(_values(rs, "other_rate_before")),
         fmt_mean_std(_values(rs, "other_rate_after"))],
        ["true failure cells", fmt_mean_std(_values(rs, "true_cells"), 3), fmt_mean_std(_values(rs, "true_cells_after"), 3)],
        ["clean test accuracy", fmt_mean_std(_values(rs, "clean_accuracy")),
         fmt_mean_std(_values(rs, "clean_accuracy_after"))],
    ]  # fmt: skip
    if all("chosen_rate_after_control" in r.metrics for r in rs):
        for row, key in zip(rrows, ("chosen_rate_after_control", "other_rate_after_control", None,
                                    "clean_accuracy_after_control"), strict=True):  # fmt: skip
            row.append(fmt_mean_std(_values(rs, key)) if key else "")
    restr = Table("Restructuring: the simulated human marks the DQN's 3 most frequent failing cells (mean ± std "
                  "over seeds)", ["quantity", "before", "after fine-tuning"]
                  + (["after fine-tuning on 3 random other cells (control)"] if len(rrows[0]) == 4 else []), rrows,
                  note=f"W1 between the landscapes before and after: "
                       f"{fmt_mean_std(_values(rs, 'landscape_w1_before_after'))}; chosen cells still among the "
                       f"DQN's top 3 when searching the restructured model: "
                       f"{fmt_mean_std(_values(rs, 'chosen_still_top'), 2)} of 3.")  # fmt: skip
    return [search, restr]


def _figures(rs: Sequence[JobResult]) -> list[Figure]:
    from icml24.common.plotting import label_axes, new_figure, plot_mean_band, spread_caption
    from icml24.evaluation.failure_landscape.concepts import ConceptGrid

    fig, ax = new_figure(1, 3, width=4.2)
    steps = rs[0].metrics["recall_steps"]
    for key in METHODS:
        curves = np.array([r.metrics[f"{key}:recall_curve"] for r in rs], dtype=float).T
        plot_mean_band(ax[0, 0], steps, curves, label=METHOD_NAMES[key])
    label_axes(ax[0, 0], "queries", "true-failure-cell recall", xunit="model evaluations", yunit="fraction",
               title="Discovery within the budget")  # fmt: skip
    ax[0, 0].legend(fontsize=7)
    r0 = rs[0]
    grid = ConceptGrid()
    maps = [np.array(r0.metrics[k]).reshape(grid.shape).mean(2) for k in ("failure_rate_map", "failure_rate_map_after")]
    top = max(float(np.max(maps)), 1e-3)
    for panel, (m, when) in enumerate(zip(maps, ("before", "after restructuring"), strict=True), start=1):
        im = ax[0, panel].imshow(m, vmin=0, vmax=top, cmap="magma", aspect="auto")
        ax[0, panel].set_xticks(range(len(grid.blurs)), [f"{b:g}" for b in grid.blurs])
        ax[0, panel].set_yticks(range(len(grid.rotations)),
                                [f"{a:g}" for a in grid.rotations] if panel == 1 else [])  # fmt: skip
        if panel == 1:
            label_axes(ax[0, panel], "blur sigma", "rotation", xunit="px", yunit="degrees",
                       title=f"Failure rate {when} (seed {r0.job.seed})")  # fmt: skip
        else:  # the rotation axis is labelled once, on the middle panel
            ax[0, panel].set_xlabel("blur sigma (px)")
            ax[0, panel].set_title(f"Failure rate {when} (seed {r0.job.seed})")
    fig.colorbar(im, ax=ax[0, 1:].ravel().tolist(), label="failure rate (fraction of pool images)")
    return [Figure("Failure discovery and restructuring", figure_png(fig),
                   "Left: recall of the true failure cells against queries spent, "
                   + spread_caption("std", len(rs)) + ". Middle and right: the exhaustive failure landscape of "
                   "one seed before and after fine-tuning on the three marked cells, averaged over the five "
                   "brightness levels.")]  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    rs = [r for r in results if r.status == "ok" and r.job.experiment == "search"]
    if not rs:
        return decide.analysis([], summary="No finished jobs.", rule="all")
    checks = _search_checks(rs) + _restructure_checks(rs)
    summary = (f"Scale {scale}, {len(rs)} seeds, budget {rs[0].job.config['budget']} queries over "
               f"{rs[0].metrics['n_cells']} cells. " + " ".join(f"{c.id}: {c.verdict.replace('_', ' ')}." for c in checks))
    return decide.analysis(checks, summary=summary, rule="all", tables=_tables(rs), figures=_figures(rs))


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "A DQN agent searching a grid of input perturbations maps a classifier's failure landscape better than "
        "random and epsilon-greedy search at the same query budget (more of the true failure cells found, "
        "visitation closer to the landscape), and fine-tuning on the failure modes a human marks fades them "
        "while clean accuracy holds."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Model under test: a 2-convolution CNN trained in-run on scikit-learn's 8x8 digits upsampled to 16x16, "
        "not pre-trained AlexNet/ResNet/EfficientNet on ImageNet; no generation or summarisation tasks.",
        "Concepts: rotation (-16..16 degrees), Gaussian blur (sigma 0..1.6 px) and brightness (factor 1..0.3), 5 "
        "levels each (125 cells as the paper's grid); saturation is meaningless on grey digits and the levels were "
        "chosen in a pilot so that failures are a minority of the grid (with -30..30 degrees most cells failed).",
        "Queries are answered from the exhaustive landscape (the same outputs a live forward pass gives), so a "
        "query costs no forward pass; the budget counts queries.",
        "DQN: icml24.rl.value.DQNAgent (Q(s) head, 64x64, Adam) with SB3's linear exploration schedule 1.0 -> "
        "0.6 over the first 10% of the budget, but lr 1e-3 and one update per query instead of SB3's 1e-4 and "
        "one per 4 (budgets of 1.5k-3k queries instead of 50k steps).",
        "Epsilon-greedy baseline: a bandit over the cells (mean reward, untried cells first), not the official "
        "script's epsilon-weighted sampling of image classes with random actions; run at epsilon 0.1 and 0.6, and "
        "the claim is tested against the better of the two per seed (in hindsight, which favours the baseline). "
        "No threshold search, Bayesian optimisation or FGSM baselines.",
        "Simulated human: marks the three cells with the most failing DQN queries. Fine-tuning: all parameters by "
        "SGD (lr 1e-3, momentum 0.9, as the official script), 5 epochs of batch 8, each image perturbed with "
        "probability 0.5 by one of the marked cells (official: a re-initialised last layer only, batch 1).",
        "Macroscopic (one-step) discovery only; no multi-step microscopic variant.",
        "Budgets of 250 (quick) and 500 (full) queries, 2 and 4 a cell, chosen below saturation (issue 42): at 12-24 "
        "queries a cell random search's closed-form recall was 0.99-1.00; each recall check states its headroom.",
        "The final exploration rate 0.6 is the released script's (exploration_final_eps=0.6), kept: we test the paper's "
        "agent; about 62% of its queries are uniform by construction.",
        "Fading is decided against our control arm (the same fine-tuning on three random unmarked cells), which the "
        "official evaluation does not have.",
    ),
    scales=("smoke", "quick", "full"),
)
