"""Miniature reproduction of MSCP (Wu, Hu, Yang, Zhang, Zhang; ICML 2024, PMLR 235:53515-53541).

Claims (abstract): (1) with identifiable dynamics, action-free offline data speeds up online RL, through a slow
(subgoal) and a fast (next-state) planner pre-trained on it and an inverse dynamics model (IDM) learned online;
(2) when the action's effect cannot be told apart from the environment's stochasticity, that benefit is not
there; (3) the fast planner's pessimism matters when the offline data does not cover the online states.

Setting: the 8x8 point maze of :mod:`icml24.rl.envs.mazes` (start 7 cells from the goal, sparse reward 1 at the
goal, 60-step episodes, step 0.5 cell), in the identifiable world (``drift_prob = 0``) and a non-identifiable one
(``drift_prob = 0.5``: half the steps the action is ignored for a random full step), with 300 passive
trajectories of a scripted navigator between random cells (actions dropped), and a coverage-gap world whose
passive data never enters the goal's corridor. Learners (:mod:`icml24.rl.mscp.agent`): TD3 from scratch, TD3 with
the slow planner's subgoals only, IDM-labelled BC + TD3 (VPT-style), MSCP, and MSCP without pessimism. Metric:
area under the success curve over the online budget (AUC, the mean success rate of the training episodes),
paired over seeds (a seed fixes the passive data, the networks and the env stream of every learner).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from icml24.common import decide
from icml24.common.decide import Decision
from icml24.common.experiment import (
    Analysis,
    ClaimCheck,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    group_results,
    new_figure,
    numeric_cell,
    seeds_for,
)

SLUG = "mscp"
MOD = "icml24.rl.mscp.reproduce"

WORLDS: dict[str, dict[str, Any]] = {
    "identifiable": {"drift_prob": 0.0, "exclude_cells": []},
    "non_identifiable": {"drift_prob": 0.5, "exclude_cells": []},
    "coverage_gap": {"drift_prob": 0.0, "exclude_cells": [[3, 5], [3, 6]]},
}
"""The three worlds: the coverage gap drops every passive trajectory entering the goal cell (3, 6) or the cell
before it on the short route (3, 5)."""
WORLD_METHODS = {
    "identifiable": ("scratch", "subgoals", "idm_bc", "mscp"),
    "non_identifiable": ("scratch", "subgoals", "idm_bc", "mscp"),
    "coverage_gap": ("mscp", "mscp_no_pessimism"),
}
LABELS = {
    "scratch": "TD3 from scratch",
    "subgoals": "TD3 + slow-planner subgoals",
    "idm_bc": "IDM-labelled BC + TD3",
    "mscp": "MSCP",
    "mscp_no_pessimism": "MSCP without pessimism",
}
COLORS = {"scratch": "tab:blue", "subgoals": "tab:orange", "idm_bc": "tab:green", "mscp": "tab:red",
          "mscp_no_pessimism": "tab:purple"}
"""One colour per learner in every panel."""
WORLD_LABELS = {
    "identifiable": "identifiable",
    "non_identifiable": "non-identifiable (drift 0.5)",
    "coverage_gap": "identifiable, coverage gap",
}
DEFAULT_SEEDS = {"smoke": 2, "quick": 3, "full": 8}
PLANS: dict[str, dict[str, Any]] = {
    "smoke": {"total_steps": 480, "warmup_steps": 160, "num_envs": 8, "passive_trajectories": 40,
              "planner_steps": 30, "eval_points": 4, "idm_samples": [100, 400]},
    "quick": {"total_steps": 5_000, "warmup_steps": 800, "num_envs": 8, "passive_trajectories": 300,
              "planner_steps": 400, "eval_points": 10, "idm_samples": [250, 1000, 4000]},
    "full": {"total_steps": 12_000, "warmup_steps": 1_000, "num_envs": 8, "passive_trajectories": 300,
             "planner_steps": 800, "eval_points": 16, "idm_samples": [250, 1000, 4000]},
}  # fmt: skip

ASSUMED_GAIN = 0.3
"""AUC gain at which the speed-up rule's power is stated. The paper reports no number we could read (abstract:
"significantly outperforms"); 0.3 of the success-rate scale is a large, visible speed-up."""
ASSUMED_SD = 0.15
"""Seed-to-seed standard deviation of the paired AUC differences assumed in the power simulations."""
ASSUMED_ACTION_INFERENCE_GAIN = 0.15
"""AUC gain of the action-inference component (MSCP - TD3 + slow-planner subgoals: the fast planner acting through
the IDM) in the identifiable world at which the interaction rule's power is stated: half the assumed speed-up (the
paper gives no split between its two planners; the other half is the subgoals' share)."""
ASSUMED_PESSIMISM_GAIN = 0.1
"""AUC gain of pessimism under the coverage gap at which the pessimism rule's power is stated (an ablation of one
regulariser: a third of the assumed speed-up; the paper gives no number we could read)."""
NO_GAIN_MARGIN = 0.15
"""An action-inference gain below this (half the assumed speed-up) counts as "adds nothing": the upper bound of
the non-identifiable check and the equivalence band of the interaction check."""
EQUIVALENCE_MARGIN = 0.05
"""TOST band for "no difference" (the refuting side of the speed-up and pessimism checks)."""


# ------------------------------------------------------------------------------------------------ jobs


def _world(config: dict) -> Any:
    from icml24.rl.mscp.agent import WorldConfig

    w = WORLDS[config["world"]]
    return WorldConfig(drift_prob=w["drift_prob"], exclude_cells=tuple(tuple(c) for c in w["exclude_cells"]),
                       passive_trajectories=config["passive_trajectories"], num_envs=config["num_envs"],
                       total_steps=config["total_steps"], warmup_steps=config["warmup_steps"],
                       eval_points=config["eval_points"])  # fmt: skip


def run_online_job(config: dict, seed: int) -> dict:
    """One learner in one world: its learning curve, AUC and greedy success (:func:`agent.run_online`)."""
    import torch

    from icml24.rl.mscp.agent import MSCPConfig, run_online
    from icml24.rl.mscp.planners import PlannerConfig

    torch.set_num_threads(1)
    cfg = MSCPConfig(planner=PlannerConfig(steps=config["planner_steps"]))
    out = run_online(config["method"], _world(config), cfg, seed=seed)
    return out


def run_idm_job(config: dict, seed: int) -> dict:
    """IDM action error against the number of online samples, in one world (the identifiability mechanism)."""
    import torch

    from icml24.rl.mscp.agent import idm_action_error
    from icml24.rl.mscp.data import DriftPointMazeVecEnv, maze_routes
    from icml24.rl.mscp.planners import InverseDynamicsModel

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    env = DriftPointMazeVecEnv(1, drift_prob=WORLDS[config["world"]]["drift_prob"])
    env.generator.manual_seed(seed + 5)
    r = maze_routes()
    gen = torch.Generator().manual_seed(seed)
    cells = torch.as_tensor(r.cells, dtype=torch.float32)
    out: dict[str, Any] = {"samples": list(config["idm_samples"]), "errors": []}
    for n in config["idm_samples"]:
        pos = cells[torch.randint(len(cells), (n,), generator=gen)] + 0.2 + 0.6 * torch.rand((n, 2), generator=gen)
        a = torch.rand((n, 2), generator=gen) * 2 - 1
        s, s2 = env.to_obs(pos), env.to_obs(env.move(pos, env.drift(a)[0]))
        idm = InverseDynamicsModel(max_step=env.max_obs_step)
        opt = torch.optim.Adam(idm.parameters(), lr=1e-3)
        for _ in range(config["idm_steps"]):
            i = torch.randint(n, (128,), generator=gen)
            loss = (idm(s[i], s2[i]) - a[i]).pow(2).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        out["errors"].append(idm_action_error(idm, env, seed=seed + 1000))
    out["chance"] = float((torch.rand((20000, 2), generator=torch.Generator().manual_seed(0)) * 2 - 1).norm(dim=1)
                          .mean())  # fmt: skip
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    plan = PLANS[scale]
    jobs: list[Job] = []
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    for world, methods in WORLD_METHODS.items():
        for method in methods:
            cfg = {"world": world, "method": method, "total_steps": plan["total_steps"],
                   "warmup_steps": plan["warmup_steps"], "num_envs": plan["num_envs"],
                   "passive_trajectories": plan["passive_trajectories"], "planner_steps": plan["planner_steps"],
                   "eval_points": plan["eval_points"]}  # fmt: skip
            jobs += [Job(SLUG, "online", f"{MOD}:run_online_job", cfg, s) for s in seed_list]
    for world in ("identifiable", "non_identifiable"):
        cfg = {"world": world, "idm_samples": plan["idm_samples"], "idm_steps": 400 if scale != "smoke" else 30}
        jobs += [Job(SLUG, "idm", f"{MOD}:run_idm_job", cfg, s) for s in seed_list[:3]]
    return jobs


# ------------------------------------------------------------------------------------------------ rules


def speedup_decision(method: Sequence[float], baseline: Sequence[float], label: str) -> Decision:
    """A speed-up: the paired mean AUC difference is > 0 (one-sided paired t-test at 0.05); not_supported if it
    is shown < 0 at the same level or within +-EQUIVALENCE_MARGIN by TOST; otherwise inconclusive."""
    return decide.compare(method, baseline, paired=True, alternative="greater",
                          equivalence_margin=EQUIVALENCE_MARGIN,
                          effect_name=f"mean AUC difference ({label})")  # fmt: skip


def no_speedup_decision(method: Sequence[float], baseline: Sequence[float], label: str) -> Decision:
    """No gain: the paired mean AUC gain is shown < NO_GAIN_MARGIN (one-sided paired t-test at 0.05: an
    equivalence-type bound that also covers harm, since the claim is "no benefit", not "no effect");
    not_supported if it is shown > NO_GAIN_MARGIN at the same level; otherwise inconclusive."""
    return decide.compare(method, baseline, paired=True, alternative="less", margin=NO_GAIN_MARGIN,
                          effect_name=f"mean AUC difference ({label})")  # fmt: skip


def interaction_decision(gain_identifiable: Sequence[float], gain_non_identifiable: Sequence[float],
                         label: str) -> Decision:
    """The gain depends on identifiability: the per-seed gains of the identifiable world exceed those of the
    non-identifiable one (one-sided Welch t-test at 0.05; the two worlds' seeds are different passive datasets,
    so unpaired); not_supported if the gain is shown larger without identifiability at the same level, or the two
    are shown equal within +-NO_GAIN_MARGIN (Welch TOST); otherwise inconclusive."""
    return decide.compare(gain_identifiable, gain_non_identifiable, paired=False, alternative="greater",
                          equivalence_margin=NO_GAIN_MARGIN,
                          effect_name=f"{label}, identifiable - non-identifiable")  # fmt: skip


@lru_cache(maxsize=64)
def speedup_power(n: int, *, gain: float = ASSUMED_GAIN, sd: float = ASSUMED_SD) -> float:
    """Chance :func:`speedup_decision` says supported at ``n`` seeds when the true paired gain is ``gain``."""
    if n < 2:
        return 0.0
    return decide.power_of_compare(gain, sd, n, paired=True, alternative="greater",
                                   equivalence_margin=EQUIVALENCE_MARGIN, n_sims=600).supported  # fmt: skip


@lru_cache(maxsize=64)
def no_speedup_power(n: int, *, sd: float = ASSUMED_SD) -> float:
    """Chance :func:`no_speedup_decision` says supported at ``n`` seeds when the true gain is 0."""
    if n < 2:
        return 0.0
    return decide.power_of_compare(0.0, sd, n, paired=True, alternative="less", margin=NO_GAIN_MARGIN,
                                   n_sims=600).supported  # fmt: skip


@lru_cache(maxsize=64)
def interaction_power(n: int, *, gain: float = ASSUMED_ACTION_INFERENCE_GAIN, sd: float = ASSUMED_SD) -> float:
    """Chance :func:`interaction_decision` says supported with ``n`` seeds per world when the action-inference
    gain is ``gain`` in the identifiable world and 0 in the other (each world's per-seed gains with sd ``sd``)."""
    if n < 2:
        return 0.0
    return decide.power_of_compare(gain, sd, n, paired=False, alternative="greater",
                                   equivalence_margin=NO_GAIN_MARGIN, n_sims=600).supported  # fmt: skip


def pessimism_power(n: int) -> float:
    """Chance the pessimism check (:func:`speedup_decision`) says supported at ``n`` seeds when pessimism's true
    paired gain is :data:`ASSUMED_PESSIMISM_GAIN`."""
    return speedup_power(n, gain=ASSUMED_PESSIMISM_GAIN)


# ------------------------------------------------------------------------------------------------ analysis


def _by(results: Sequence[JobResult]) -> dict[tuple[str, str], dict[int, JobResult]]:
    out: dict[tuple[str, str], dict[int, JobResult]] = {}
    for (world, method), rs in group_results(results, "online", by=("world", "method")).items():
        out[(str(world), str(method))] = {r.job.seed: r for r in rs}
    return out


def _paired(by: dict, world: str, a: str, b: str, metric: str = "auc") -> tuple[list[float], list[float]]:
    ra, rb = by.get((world, a), {}), by.get((world, b), {})
    seeds = sorted(set(ra) & set(rb))
    return [float(ra[s].metrics[metric]) for s in seeds], [float(rb[s].metrics[metric]) for s in seeds]


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    checks: list[ClaimCheck] = []
    tables: list[Table] = []
    figures: list[Figure] = []
    by = _by(results)
    rows = []
    for world, methods in WORLD_METHODS.items():
        for method in methods:
            rs = [by[(world, method)][s] for s in sorted(by.get((world, method), {}))]
            if not rs:
                continue
            get = lambda k: [float(r.metrics[k]) if k in r.metrics else float("nan") for r in rs]  # noqa: B023, E731
            rows.append([WORLD_LABELS[world], LABELS[method], numeric_cell(get("auc"), 3),
                         numeric_cell(get("final_success"), 3), numeric_cell(get("greedy_success"), 3),
                         numeric_cell(get("idm_error"), 3) if "idm_error" in rs[0].metrics else "n/a",
                         numeric_cell(get("guide_weight"), 3) if "guide_weight" in rs[0].metrics else "n/a"])  # fmt: skip
    if rows:
        any_r = next(iter(next(iter(by.values())).values()))
        c = any_r.job.config
        tables.append(Table(
            f"Online learning on the point maze ({c['total_steps']} env steps, {c['num_envs']} envs, "
            f"{c['passive_trajectories']} passive trajectories)",
            ["world", "learner", "AUC of the success curve", "success, last fifth of training",
             "greedy success after training", "IDM action error (chance 0.77)", "mean pessimistic weight"],
            rows, "mean ± std over seeds (one seed = one passive dataset, network init and env stream, shared by "
            "the learners); AUC = mean success rate of the training episodes over the budget"))  # fmt: skip
    n_id = len(_paired(by, "identifiable", "mscp", "scratch")[0])
    n_gap = len(_paired(by, "coverage_gap", "mscp", "mscp_no_pessimism")[0])
    if n_id:
        d = speedup_decision(*_paired(by, "identifiable", "mscp", "scratch"), "MSCP - TD3 from scratch")
        checks.append(d.to_check(
            id="identifiable-speedup", claim="Identifiable dynamics: MSCP learns faster than TD3 from scratch (AUC)",
            power=speedup_power(n_id), evidence=f"{n_id} paired seeds; power at a {ASSUMED_GAIN} AUC gain, "
            f"sd {ASSUMED_SD}"))  # fmt: skip
    # The claim is about the action-inference route (the fast planner's next states turned into actions by the
    # IDM): MSCP - subgoals-only isolates it, since both learners get the same action-free subgoals and shaping.
    ia, ib = _paired(by, "identifiable", "mscp", "subgoals")
    na, nb = _paired(by, "non_identifiable", "mscp", "subgoals")
    if len(ia) >= 2 and len(na) >= 2:
        d = interaction_decision(np.subtract(ia, ib), np.subtract(na, nb), "MSCP - subgoals only (action inference)")
        n_int = min(len(ia), len(na))
        checks.append(d.to_check(
            id="action-inference-gain-depends-on-identifiability",
            claim="The action-inference component (MSCP - TD3 + slow-planner subgoals) gains more in the "
            "identifiable world than in the non-identifiable one",
            power=interaction_power(n_int), evidence=f"Welch t-test on the per-seed gains, {len(ia)} and {len(na)} "
            f"seeds; power at a {ASSUMED_ACTION_INFERENCE_GAIN} AUC gain identifiable and 0 non-identifiable, "
            f"sd {ASSUMED_SD}"))  # fmt: skip
    if len(na) >= 2:
        d = no_speedup_decision(na, nb, "MSCP - subgoals only")
        checks.append(d.to_check(
            id="non-identifiable-action-inference-adds-nothing",
            claim=f"Non-identifiable dynamics: the action-inference component (MSCP - TD3 + slow-planner subgoals) "
            f"adds less than {NO_GAIN_MARGIN} AUC",
            power=no_speedup_power(len(na)), evidence=f"{len(na)} paired seeds; power at a true gain of 0, "
            f"sd {ASSUMED_SD}"))  # fmt: skip
    if n_gap:
        d = speedup_decision(*_paired(by, "coverage_gap", "mscp", "mscp_no_pessimism"),
                             "MSCP - MSCP without pessimism")  # fmt: skip
        checks.append(d.to_check(
            id="pessimism-under-coverage-gap",
            claim="Coverage gap: MSCP with pessimism learns faster than without (AUC)",
            power=pessimism_power(n_gap), evidence=f"{n_gap} paired seeds; power at a {ASSUMED_PESSIMISM_GAIN} "
            f"AUC gain, sd {ASSUMED_SD}"))  # fmt: skip
    # Reported only. The decisive converse check before the review: MSCP's whole gain over scratch without
    # identifiability, which the action-free subgoals carry in any world (it tested the world, not the claim).
    a, b = _paired(by, "non_identifiable", "mscp", "scratch")
    if len(a) >= 2:
        d = no_speedup_decision(a, b, "MSCP - TD3 from scratch")
        checks.append(d.to_check(
            id="non-identifiable-no-speedup", decisive=False,
            claim=f"Non-identifiable dynamics: MSCP's AUC gain over TD3 from scratch is below {NO_GAIN_MARGIN} "
            "(the decisive rule before the review)",
            power=no_speedup_power(len(a)), evidence=f"{len(a)} paired seeds"))  # fmt: skip
    for world in ("identifiable", "non_identifiable"):
        for base in ("subgoals", "idm_bc"):
            a, b = _paired(by, world, "mscp", base)
            if len(a) >= 2:
                d = speedup_decision(a, b, f"MSCP - {LABELS[base]}")
                checks.append(d.to_check(id=f"{world.replace('_', '-')}-mscp-vs-{base.replace('_', '-')}",
                                         claim=f"{WORLD_LABELS[world]}: MSCP learns faster than {LABELS[base]}",
                                         decisive=False, evidence=f"{len(a)} paired seeds"))  # fmt: skip
        a, b = _paired(by, world, "idm_bc", "scratch")
        if len(a) >= 2:
            d = speedup_decision(a, b, "IDM-labelled BC - TD3 from scratch")
            checks.append(d.to_check(id=f"{world.replace('_', '-')}-idm-bc-vs-scratch", decisive=False,
                                     claim=f"{WORLD_LABELS[world]}: IDM-labelled BC learns faster than TD3 from "
                                     "scratch", evidence=f"{len(a)} paired seeds"))  # fmt: skip
    for learner, cid in (("mscp", "gain-depends-on-identifiability"),
                         ("idm_bc", "idm-bc-gain-depends-on-identifiability")):
        ga, gb = _paired(by, "identifiable", learner, "scratch")
        na, nb = _paired(by, "non_identifiable", learner, "scratch")
        if len(ga) >= 2 and len(na) >= 2:
            d = interaction_decision(np.subtract(ga, gb), np.subtract(na, nb), f"{LABELS[learner]} - TD3 from scratch")
            checks.append(d.to_check(id=cid, decisive=False,
                                     claim=f"{LABELS[learner]}'s gain over TD3 from scratch is larger in the "
                                     "identifiable world", evidence="Welch t-test on the per-seed gains of the two "
                                     "worlds"))  # fmt: skip
    _idm_table(results, tables)
    _curves_figure(by, figures)
    decisive = [c for c in checks if c.decisive]
    summary = f"{scale}: " + "; ".join(f"{c.id} {c.verdict}" for c in decisive)
    return decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


def _idm_table(results: Sequence[JobResult], tables: list[Table]) -> None:
    groups = group_results(results, "idm", by=("world",))
    if not groups:
        return
    rows = []
    for (world,), rs in groups.items():
        samples = rs[0].metrics["samples"]
        for i, n in enumerate(samples):
            rows.append([WORLD_LABELS[str(world)], int(n), numeric_cell([float(r.metrics["errors"][i]) for r in rs], 3),
                         f"{float(rs[0].metrics['chance']):.3f}"])  # fmt: skip
    tables.append(Table("Inverse dynamics model: action error against online samples (uniform random actions)",
                        ["world", "online transitions", "mean ||IDM(s, s') - a||", "chance (predict 0)"], rows,
                        "mean ± std over seeds; fresh random transitions of the same world"))  # fmt: skip


def _curves_figure(by: dict, figures: list[Figure]) -> None:
    from icml24.common.plotting import label_axes, plot_mean_band, spread_caption

    worlds = [w for w in WORLD_METHODS if any((w, m) in by for m in WORLD_METHODS[w])]
    if not worlds:
        return
    fig, axes = new_figure(1, len(worlds), width=4.2, height=3.4)  # width per panel
    n = 0
    for ax, world in zip(axes[0], worlds, strict=True):
        for method in WORLD_METHODS[world]:
            rs = by.get((world, method), {})
            if not rs:
                continue
            runs = [rs[s].metrics for s in sorted(rs)]
            n = len(runs)
            x = runs[0]["curve_steps"]
            per_point = [[r["success_curve"][i] for r in runs] for i in range(len(x))]
            plot_mean_band(ax, x, per_point, LABELS[method], color=COLORS[method])
        label_axes(ax, "env steps", "success rate of training episodes", title=WORLD_LABELS[world])
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7)
    figures.append(Figure("Learning curves", figure_png(fig), "Success rate of the training episodes per window; "
                          + spread_caption("std", n)))  # fmt: skip


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "With identifiable dynamics, action-free offline data speeds up online RL through multiscale state-centric "
        "planners (a slow subgoal planner, a fast next-state planner with pessimism, an inverse dynamics model); "
        "without identifiability the benefit is not there; pessimism matters when the data has a coverage gap."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Only the abstract was available: the planners' form, the hindsight training, how the planners enter TD3 "
        "(subgoal conditioning with potential-based shaping, a guidance term in the actor loss) and the form of "
        "the pessimism (ensemble-spread weight) are our reconstruction.",
        "A 2-D point maze with self-generated passive data instead of the paper's benchmarks; TD3 with small "
        "networks and a budget of thousands of env steps; area under the success curve as the speed metric.",
    ),
    scales=("smoke", "quick", "full"),
)
