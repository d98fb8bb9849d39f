"""Miniature reproduction of *A Contextual Combinatorial Bandit Approach to Negotiation* (Li, Mu, Qi; ICML 2024,
https://arxiv.org/abs/2407.00567).

Experiments (each job runs several trials vectorised; jobs are repeated over seeds; every agent of a job meets
the same opponents, utilities and acceptance draws, so comparisons are paired by trial):

* ``varying_types`` (the headline): multi-issue negotiation (3 issues x 4 values = 64 bids) against opponents
  of three hidden concession types; NegUCB against every baseline of the notes and the oracle.
* ``stationary``: the same domain with a single opponent type, where the acceptance function is a function of
  the observed context and the bid (the regret theorem's setting): NegUCB's log-log regret slope.
* full only: ``trading`` (50 prices, two hidden buyer types), ``allocation`` (3 item types, quantities 1-4,
  hidden opponent values), ``large_bids`` (6 issues x 5 values = 15,625 bids, NegUCB and linear UCB through
  the candidate pool), and ``sensitivity`` (beta, lambda and the state lengthscale, reported only).

Verdict rule (also in the README): supported when (C1) NegUCB's log-log regret slope on the stationary task is
below 1 (one-sided t-test over trials), (C2) its regret is below each baseline's in every compared task
(paired test of log regret per trial; intersection-union), (C3) its deals are better, i.e. more own utility
from deals over the same number of proposals, than each baseline's in every task, and (C4) the hidden-state
ablation has higher regret than NegUCB where opponent types vary; not_supported when any of them is refuted
with the same strength (Holm across cells for refutation); otherwise inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from icml24.common.experiment import (
    Analysis,
    ClaimCheck,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    fmt_mean_std,
    group_results,
    new_figure,
    seeds_for,
)

from ..regret import loglog_slope, window_means
from ..verdicts import all_cells
from . import SLUG
from .agents import (
    EpsilonGreedy,
    LinearUCB,
    NegotiationAgent,
    NegUCB,
    OracleBidder,
    RandomBidder,
    TimeDependentTactic,
)
from .domains import AllocationDomain, MultiIssueDomain, TradingDomain
from .environment import NegotiationEnv
from .simulation import simulate

MODULE = "icml24.bandits.negucb.reproduce"
N_POINTS = 60
LABELS = {
    "negucb": "NegUCB",
    "no_hidden": "NegUCB without hidden state",
    "eps_greedy": "epsilon-greedy (same kernel model)",
    "linear_ucb": "linear UCB",
    "boulware": "Boulware tactic",
    "conceder": "Conceder tactic",
    "random": "random bids",
    "greedy": "NegUCB with beta = 0 (greedy, no optimism)",
    "oracle": "oracle (knows g)",
}
ALL_AGENTS = tuple(LABELS)
BASE_AGENTS = tuple(a for a in LABELS if a != "greedy")
"""The agents of the headline and trading tasks; the optimism ablation (``greedy``) runs on allocation."""
REGRET_BASELINES = ("eps_greedy", "linear_ucb", "boulware", "conceder", "random")
DEAL_BASELINES = ("no_hidden",) + REGRET_BASELINES
THREE_TYPES = [[0.2, 0.3], [1.0, 0.3], [3.0, 0.3]]
EFFECT_OF_INTEREST = math.log(0.8)
"""The effect the power figures are computed for: a 20% lower regret (the paper reports no numbers)."""


# ----------------------------------------------------------------------------------------------------------
# Job functions: pure functions of (config, seed)
# ----------------------------------------------------------------------------------------------------------


def make_env(spec: dict) -> NegotiationEnv:
    """The environment a job's ``env`` entry describes."""
    kind = spec["domain"]
    if kind == "multi_issue":
        domain = MultiIssueDomain(n_issues=spec["n_issues"], n_values=spec["n_values"])
    elif kind == "trading":
        domain = TradingDomain(n_levels=spec["n_levels"])
    elif kind == "allocation":
        domain = AllocationDomain(counts=tuple(spec["counts"]))
    else:
        raise ValueError(f"unknown domain {kind!r}")
    types = tuple(tuple(t) for t in spec["types"])
    return NegotiationEnv(domain, types=types, episode_length=spec.get("episode_length", 20))


def make_agent(name: str, hp: dict, seed: int) -> NegotiationAgent:
    """An agent by name with the job's hyperparameters ``hp`` (beta, lam, n_features, lengthscale_state)."""
    kernel = {"lam": hp["lam"], "n_features": hp["n_features"], "lengthscale_state": hp["lengthscale_state"],
              "exhaustive_limit": hp["exhaustive_limit"], "seed": seed}  # fmt: skip
    if name == "negucb":
        return NegUCB(beta=hp["beta"], features=hp["features"], **kernel)
    if name == "no_hidden":
        return NegUCB(beta=hp["beta"], features=hp["features"], hidden_state=False, **kernel)
    if name == "greedy":  # the optimism ablation: the same model, the posterior mean only, no random bids
        return NegUCB(beta=0.0, features=hp["features"], **kernel)
    if name == "eps_greedy":
        return EpsilonGreedy(epsilon=hp["epsilon"], **kernel)
    if name == "linear_ucb":
        return LinearUCB(beta=hp["beta"], lam=hp["lam"], exhaustive_limit=hp["exhaustive_limit"], seed=seed)
    if name == "boulware":
        return TimeDependentTactic(exponent=0.2, floor=0.3)
    if name == "conceder":
        return TimeDependentTactic(exponent=2.0, floor=0.3)
    if name == "random":
        return RandomBidder(seed=seed)
    if name == "oracle":
        return OracleBidder()
    raise ValueError(f"unknown agent {name!r}")


def _curve(cumulative: np.ndarray) -> dict[str, list]:
    """Mean and mean-of-squares over trials of the cumulative regret at <= N_POINTS log-spaced checkpoints."""
    horizon = cumulative.shape[1]
    idx = np.unique(np.geomspace(1, horizon, N_POINTS).astype(int)) - 1
    sub = cumulative[:, idx]
    return {"t": (idx + 1).tolist(), "mean": sub.mean(axis=0).tolist(), "sq": (sub**2).mean(axis=0).tolist()}


HOPELESS = 0.1
"""A proposal the opponent accepts with probability below this counts as hopeless in the diagnostics."""


def _proposal_utility(env: NegotiationEnv, run, window: slice) -> np.ndarray:
    """Mean own utility U(S_t) of the proposals in ``window`` per trial: expected reward / acceptance probability."""
    p = run.accept_probability[:, window]
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(p > 0, run.expected_reward[:, window] / np.where(p > 0, p, 1.0), np.nan)
    return np.nanmean(u, axis=1)


def run_negotiation(config: dict, seed: int) -> dict[str, Any]:
    """Every agent of ``config["agents"]`` on the job's environment, ``n_trials`` trials at once.

    Besides each agent's regret against the oracle in its own state (``regret_``), it records, when the oracle
    is among the agents, the regret against a *common reference*: the oracle run's expected reward in round
    ``t`` of the same trial minus the agent's, ``R^c_T = sum_t (E r*_t - E r_t)`` (``common_``), which does
    not depend on where the agent's own negotiations stand. ``early_`` / ``late_`` (own oracle) and
    ``early_common_`` / ``late_common_`` are the mean per-round regrets in rounds (0.1 T, 0.2 T] and
    (0.8 T, T] (:func:`~icml24.bandits.regret.window_means`).
    """
    import time

    env = make_env(config["env"])
    out: dict[str, Any] = {"agents": list(config["agents"])}
    hp = config["hp"]
    reference = None
    # The oracle first: its expected reward per round is the common reference of every other agent.
    for name in sorted(config["agents"], key=lambda a: a != "oracle"):
        start = time.perf_counter()
        run = simulate(env, make_agent(name, hp, seed), config["horizon"], config["n_trials"], seed)
        cum = run.cumulative
        out[f"regret_{name}"] = run.final.tolist()
        out[f"reward_{name}"] = run.reward.sum(axis=1).tolist()
        out[f"agree_{name}"] = run.agreement_rate.tolist()
        out[f"per_deal_{name}"] = [None if not np.isfinite(v) else float(v) for v in run.utility_per_deal]
        out[f"episodes_{name}"] = run.episodes.tolist()
        if name == "oracle":
            reference = run.expected_reward
        else:
            out[f"slope_{name}"] = [loglog_slope(c) for c in cum]
            out[f"curve_{name}"] = _curve(cum)
            early, late = window_means(run.regret)
            out[f"early_{name}"], out[f"late_{name}"] = early.tolist(), late.tolist()
            # Diagnostics of over-optimism, second half of the horizon: the share of proposals the opponent
            # accepts with probability < HOPELESS, and the share of the (own-state) regret they cause.
            half = slice(config["horizon"] // 2, None)
            hopeless = run.accept_probability[:, half] < HOPELESS
            regret_half = run.regret[:, half]
            out[f"hopeless_{name}"] = hopeless.mean(axis=1).tolist()
            out[f"hopeless_regret_{name}"] = [float(r[h].sum() / r.sum()) if r.sum() > 0 else 0.0
                                              for r, h in zip(regret_half, hopeless)]  # fmt: skip
            out[f"proposal_utility_{name}"] = [float(u) for u in _proposal_utility(env, run, half)]
            if reference is not None:
                common = reference - run.expected_reward
                out[f"common_{name}"] = common.sum(axis=1).tolist()
                early, late = window_means(common)
                out[f"early_common_{name}"], out[f"late_common_{name}"] = early.tolist(), late.tolist()
        out[f"seconds_{name}"] = time.perf_counter() - start
    return out


# ----------------------------------------------------------------------------------------------------------
# Jobs per scale
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleConfig:
    """One scale of the reproduction."""

    trials: int
    """Independent trials per job (own utilities, opponent streams and acceptance draws), simulated together."""
    seeds: int
    """Default number of seeds (jobs per experiment)."""
    horizon: int
    """Proposals per trial (bandit rounds; a negotiation ends at a deal or after 20 rejected proposals)."""
    extra_tasks: bool = False
    """Run the trading, allocation and large-bid-set tasks."""
    sensitivity: bool = False
    """Run the beta / lambda / lengthscale sensitivity of NegUCB (reported only)."""
    n_features: int = 128
    """Random Fourier features of the kernel models."""
    large_horizon: int = 1000
    """Proposals per trial on the 15,625-bid task and in the sensitivity runs."""
    stationary_seeds: int = 2
    """Seeds (jobs) of the stationary task: the sublinear-regret check's unit of analysis is the seed (the trials
    of a job share the agent's random features)."""


SCALES: dict[str, ScaleConfig] = {
    "smoke": ScaleConfig(trials=2, seeds=1, horizon=120, n_features=16, stationary_seeds=2),
    "quick": ScaleConfig(trials=12, seeds=2, horizon=1500, stationary_seeds=6),
    "full": ScaleConfig(trials=12, seeds=2, horizon=3000, extra_tasks=True, sensitivity=True, stationary_seeds=8),
}
DEFAULT_SEEDS = {name: cfg.seeds for name, cfg in SCALES.items()}
DEFAULT_HP = {"beta": 0.3, "lam": 1.0, "lengthscale_state": 1.0, "epsilon": 0.1, "exhaustive_limit": 1024,
              "features": "rff+linear"}


def _multi(types: list, n_issues: int = 3, n_values: int = 4) -> dict:
    return {"domain": "multi_issue", "n_issues": n_issues, "n_values": n_values, "types": types}


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = SCALES[scale]
    hp = dict(DEFAULT_HP, n_features=cfg.n_features)
    jobs: list[Job] = []

    def add(experiment: str, env: dict, agents: Sequence[str], horizon: int, hp_: dict = hp, n_seeds: int | None = None,
            **extra) -> None:  # fmt: skip
        config = {"env": env, "agents": list(agents), "horizon": horizon, "n_trials": cfg.trials, "hp": hp_} | extra
        for s in seeds_for(scale, seeds, {scale: n_seeds or cfg.seeds}):
            jobs.append(Job(SLUG, experiment, f"{MODULE}:run_negotiation", config, s))

    add("varying_types", _multi(THREE_TYPES), BASE_AGENTS, cfg.horizon)
    # epsilon-greedy (constant epsilon: linear regret) is the sublinear-regret check's negative control; the
    # oracle's expected reward is the common reference.
    add("stationary", _multi([[1.0, 0.3]]), ("negucb", "linear_ucb", "eps_greedy", "oracle"), cfg.horizon,
        n_seeds=cfg.stationary_seeds)
    allocation = {"domain": "allocation", "counts": [2, 3, 4], "types": [[0.2, 0.3], [3.0, 0.3]]}
    if not cfg.extra_tasks:
        # Where epsilon-greedy beat NegUCB at full scale: the learners and the optimism ablation (beta = 0).
        add("allocation", allocation, ("negucb", "greedy", "eps_greedy", "linear_ucb", "oracle"), cfg.horizon)
    if cfg.extra_tasks:
        add("trading", {"domain": "trading", "n_levels": 50, "types": [[0.3, 0.7], [2.0, 0.2]]}, BASE_AGENTS,
            cfg.horizon)
        add("allocation", allocation, ALL_AGENTS, cfg.horizon)
        add("large_bids", _multi(THREE_TYPES, 6, 5), ("negucb", "linear_ucb", "boulware", "random"),
            cfg.large_horizon)
    if cfg.sensitivity:
        for key, values in (("beta", (0.1, 1.0)), ("lam", (0.3, 3.0)), ("lengthscale_state", (0.5, 2.0)),
                            ("features", ("rff",))):
            for v in values:
                add("sensitivity", _multi(THREE_TYPES), ("negucb",), cfg.large_horizon, dict(hp, **{key: v}),
                    varied=key, value=v)
        add("sensitivity", _multi(THREE_TYPES), ("negucb",), cfg.large_horizon, hp, varied="none (defaults)",
            value="-")
    return jobs


# ----------------------------------------------------------------------------------------------------------
# Analysis
# ----------------------------------------------------------------------------------------------------------

TASKS = ("varying_types", "trading", "allocation", "large_bids")
TASK_NAMES = {
    "varying_types": "multi-issue, 3 hidden types",
    "stationary": "multi-issue, 1 type",
    "trading": "trading",
    "allocation": "allocation",
    "large_bids": "multi-issue, 15,625 bids",
}
WINDOW_DROP = 0.25
"""The sublinear-regret check's margin: the late window's per-round regret must lie below (1 - 0.25) times the
early window's. Linear regret keeps the same per-round regret in both windows (late/early = 1); ``R_t ~ t^a``
gives late/early ~ 6^(a - 1) with the windows of :func:`~icml24.bandits.regret.window_means`, below 0.75 for
a < 0.84."""
SLOPE_RULE = ("on the stationary task, per seed (the unit: a job's trials share the agent's random features), the "
              "mean per-round regret against the common reference in rounds (0.8 T, T] minus 0.75 times that in "
              "rounds (0.1 T, 0.2 T]; one-sided one-sample t-test over seeds at alpha 0.05: supported if the mean "
              "< 0 (per-round regret falls by more than 25%), not_supported if > 0; the same rule on "
              "epsilon-greedy with constant epsilon (linear regret) is the negative control: if the control comes "
              "out supported the check is uninformative")  # fmt: skip
REGRET_RULE = ("per task and baseline, a one-sided paired t-test over trials (same opponents, utilities and "
               "acceptance draws) of R_T(NegUCB) - R_T(baseline) < 0, regret against the common reference (the "
               "oracle run's expected reward per round), at alpha 0.05; supported if it holds in every cell "
               "(intersection-union); not_supported if a cell shows NegUCB worse after Holm across cells; "
               "otherwise inconclusive")  # fmt: skip
DEAL_RULE = ("per task and baseline, a one-sided paired t-test over trials of the own utility won in deals over "
             "the same number of proposals, NegUCB - baseline > 0 at alpha 0.05; every cell needed; "
             "not_supported if a cell shows NegUCB worse after Holm; otherwise inconclusive")  # fmt: skip
HIDDEN_RULE = ("on every task with varying opponent types, a one-sided paired t-test over trials of "
               "log R_T(NegUCB) - log R_T(NegUCB without hidden state) < 0 at alpha 0.05; every task needed; "
               "not_supported if the ablation is significantly better (Holm)")  # fmt: skip


def _pooled(results: Sequence[JobResult], key: str) -> np.ndarray:
    """Per-trial values pooled over the seeds of a group, in (seed, trial) order; None becomes NaN."""
    vals = [np.nan if v is None else float(v) for r in sorted(results, key=lambda r: r.job.seed)
            for v in r.metrics.get(key, [])]  # fmt: skip
    return np.asarray(vals, dtype=float)


def _log(values: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(values, 1e-9))


def _by_task(results: Sequence[JobResult]) -> dict[str, list[JobResult]]:
    out: dict[str, list[JobResult]] = {}
    for r in results:
        out.setdefault(r.job.experiment, []).append(r)
    return out


def _power_of_log_ratio(diffs: np.ndarray) -> float | None:
    from icml24.common.decide import power_of_compare

    diffs = diffs[np.isfinite(diffs)]
    if diffs.size < 3 or diffs.std(ddof=1) <= 0:
        return None
    return power_of_compare(EFFECT_OF_INTEREST, float(diffs.std(ddof=1)), int(diffs.size), paired=True,
                            alternative="less", n_sims=400).supported  # fmt: skip


def _power_of_difference(diffs: np.ndarray, effect: float) -> float | None:
    """Power of the paired one-sided test at ``effect`` (a regret difference) with the measured spread."""
    from icml24.common.decide import power_of_compare

    diffs = diffs[np.isfinite(diffs)]
    if diffs.size < 3 or diffs.std(ddof=1) <= 0 or not effect < 0:
        return None
    return power_of_compare(effect, float(diffs.std(ddof=1)), int(diffs.size), paired=True, alternative="less",
                            n_sims=400).supported  # fmt: skip


def _window_values(results: Sequence[JobResult], agent: str, common: bool) -> tuple[list, list, list]:
    """Per seed (job): mean over trials of the early- and late-window per-round regret of ``agent``."""
    tag = "common_" if common else ""
    units, early, late = [], [], []
    for r in sorted(results, key=lambda r: r.job.seed):
        e, l = r.metrics.get(f"early_{tag}{agent}"), r.metrics.get(f"late_{tag}{agent}")
        if e is None or l is None or not len(e):
            continue
        units.append(r.job.seed)
        early.append(float(np.mean(e)))
        late.append(float(np.mean(l)))
    return units, early, late


def window_decision(results: Sequence[JobResult], agent: str, *, common: bool = True):
    """The sublinear-regret rule (:data:`SLOPE_RULE`) on one agent: per seed ``late - (1 - WINDOW_DROP) early``
    of the per-round regret, one-sided one-sample t-test of mean < 0 over seeds; None below 2 seeds."""
    from icml24.common.decide import compare_to_value

    units, early, late = _window_values(results, agent, common)
    if len(units) < 2:
        return None
    values = np.asarray(late) - (1 - WINDOW_DROP) * np.asarray(early)
    return compare_to_value(values, 0.0, alternative="less", units=units,
                            effect_name=f"mean over seeds of late - {1 - WINDOW_DROP:g} x early per-round regret")


def _window_evidence(results: Sequence[JobResult], agent: str, common: bool) -> str:
    units, early, late = _window_values(results, agent, common)
    if not units:
        return "no window data"
    ratio = np.asarray(late) / np.where(np.asarray(early) != 0, early, np.nan)
    return (f"per-round regret {np.mean(early):.4f} in rounds (0.1T, 0.2T] and {np.mean(late):.4f} in (0.8T, T] "
            f"(late/early per seed {', '.join(f'{x:.2f}' for x in ratio)}; {len(units)} seeds)")


def _table(task: str, res: list[JobResult]) -> Table:
    agents = [a for a in ALL_AGENTS if f"regret_{a}" in res[0].metrics]
    rows = []
    for a in agents:
        slope = _pooled(res, f"slope_{a}")
        per_deal = _pooled(res, f"per_deal_{a}")
        common = _pooled(res, f"common_{a}")
        early, late = _pooled(res, f"early_common_{a}"), _pooled(res, f"late_common_{a}")
        rows.append([
            LABELS[a],
            fmt_mean_std(_pooled(res, f"regret_{a}").tolist()),
            fmt_mean_std(common.tolist()) if common.size else ("0" if a == "oracle" else "n/a"),
            f"{np.mean(early):.4f} -> {np.mean(late):.4f}" if early.size and late.size else "n/a",
            fmt_mean_std(_pooled(res, f"reward_{a}").tolist()),
            fmt_mean_std(_pooled(res, f"agree_{a}").tolist()),
            fmt_mean_std(per_deal[np.isfinite(per_deal)].tolist()),
            fmt_mean_std(slope[np.isfinite(slope)].tolist(), 2) if slope.size else "n/a (zero regret)",
        ])  # fmt: skip
    cfg = res[0].job.config
    return Table(
        f"{TASK_NAMES.get(task, task)}: T = {cfg['horizon']} proposals per trial",
        ["negotiator", "regret R_T (own-state oracle)", "regret R^c_T (common reference)",
         "per-round R^c, rounds (0.1T, 0.2T] -> (0.8T, T]", "utility won in deals", "agreement rate", "own utility per deal",
         "log-log regret slope"],
        rows,
        f"mean ± std over {len(_pooled(res, 'regret_' + agents[0]))} trials ({len(res)} seeds x "
        f"{cfg['n_trials']} trials). R_T is against the oracle in the agent's own state (it knows the opponent's "
        "acceptance function, hidden type included); R^c_T against a common reference, the oracle run's expected "
        "reward in the same round of the same trial (the same for every agent); 'utility won in deals' is the sum of own utility over deals within the T "
        "proposals; the slope is fitted per trial over t >= T/10.",
    )


def _figure(tasks: dict[str, list[JobResult]]) -> Figure | None:
    shown = [t for t in ("varying_types", "stationary", *TASKS[1:]) if t in tasks]
    if not shown:
        return None
    ncols = min(len(shown), 3)
    nrows = math.ceil(len(shown) / ncols)
    fig, axes = new_figure(nrows, ncols, width=4.2, height=3.4)  # sizes are per panel
    axes = np.atleast_1d(axes).ravel()
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    colours = {a: f"C{i}" for i, a in enumerate(ALL_AGENTS)}  # one colour per agent in every panel
    for ax, task in zip(axes, shown):
        res = tasks[task]
        for a in ALL_AGENTS:
            curves = [r.metrics[f"curve_{a}"] for r in res if f"curve_{a}" in r.metrics]
            if not curves:
                continue
            t = np.asarray(curves[0]["t"])
            mean = np.mean([c["mean"] for c in curves], axis=0)
            sq = np.mean([c["sq"] for c in curves], axis=0)
            n = sum(len(r.metrics[f"regret_{a}"]) for r in res)
            se = np.sqrt(np.maximum(sq - mean**2, 0) / max(n - 1, 1))
            ax.plot(t, mean, label=LABELS[a], lw=2.2 if a == "negucb" else 1.2, color=colours[a])
            ax.fill_between(t, np.maximum(mean - se, 1e-3), mean + se, alpha=0.2, color=colours[a])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(TASK_NAMES.get(task, task), fontsize=9)
        ax.set_xlabel("proposals t (log)")
        ax.set_ylabel("cumulative regret R_t (log)")
    for ax in axes[: len(shown)]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    return Figure("Cumulative regret", figure_png(fig),
                  "Mean cumulative regret over all trials, band ± 1 standard error over trials; both axes "
                  "logarithmic, so a slope below 1 is sublinear regret.")  # fmt: skip


def _sensitivity_table(res: list[JobResult]) -> Table | None:
    if not res:
        return None
    rows = []
    groups = group_results(res, "sensitivity", by=("varied", "value"))
    for (key, value), g in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        rows.append([key, str(value), fmt_mean_std(_pooled(g, "regret_negucb").tolist()),
                     fmt_mean_std(_pooled(g, "reward_negucb").tolist())])  # fmt: skip
    horizon = res[0].job.config["horizon"]
    return Table(f"NegUCB's sensitivity (multi-issue, 3 hidden types, T = {horizon}; one setting changed at a time)",
                 ["changed", "value", "regret R_T", "utility won in deals"], rows,
                 f"mean ± std over trials. Defaults: beta {DEFAULT_HP['beta']}, lambda {DEFAULT_HP['lam']}, state "
                 f"lengthscale {DEFAULT_HP['lengthscale_state']}, kernel RBF + linear; 'features rff' is the RBF "
                 "kernel alone.")  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import combine, compare, compare_to_value, not_run_check

    ok = [r for r in results if r.status == "ok"]
    tasks = _by_task(ok)
    tables: list[Table] = [_table(t, tasks[t]) for t in ("varying_types", "stationary", *TASKS[1:]) if t in tasks]
    sens = _sensitivity_table(tasks.get("sensitivity", []))
    if sens is not None:
        tables.append(sens)
    checks: list[ClaimCheck] = []

    # C1: sublinear regret on the stationary task: per-round regret late vs early, per seed, with the control.
    stat = tasks.get("stationary", [])
    claim1 = ("NegUCB's regret is sublinear: its per-round regret (against the common reference) falls from the "
              "early to the late window by more than 25%, where epsilon-greedy with constant epsilon, whose regret "
              "is linear, does not.")  # fmt: skip
    d = window_decision(stat, "negucb", common=True)
    control = window_decision(stat, "eps_greedy", common=True)
    if d is None:
        checks.append(not_run_check("sublinear-regret", claim1, "the stationary task was not run on >= 2 seeds"))
    elif control is None:
        checks.append(not_run_check("sublinear-regret", claim1, "the negative control (epsilon-greedy with constant "
                                    "epsilon on the stationary task) did not run"))  # fmt: skip
    else:
        checks.append(d.to_check(id="sublinear-regret", claim=claim1, control=control,
                                 evidence="stationary task (one opponent type), "
                                          + _window_evidence(stat, "negucb", True),
                                 control_claim="epsilon-greedy, constant epsilon "
                                               f"{DEFAULT_HP['epsilon']} (linear regret): "
                                               + _window_evidence(stat, "eps_greedy", True)))  # fmt: skip
    checks[-1].rule = SLOPE_RULE
    own, own_control = window_decision(stat, "negucb", common=False), window_decision(stat, "eps_greedy", common=False)
    if own is not None:
        checks.append(own.to_check(
            id="sublinear-regret-own-oracle", decisive=False, control=own_control,
            claim="The same window rule on the regret against the oracle in the agent's own state (reported only).",
            evidence=_window_evidence(stat, "negucb", False),
            control_claim="epsilon-greedy, constant epsilon" + (": " + _window_evidence(stat, "eps_greedy", False)
                                                                if own_control is not None else "")))  # fmt: skip
    slopes = _pooled(stat, "slope_negucb")
    slopes = slopes[np.isfinite(slopes)]
    if slopes.size >= 2:
        ctrl = _pooled(stat, "slope_eps_greedy")
        ctrl = ctrl[np.isfinite(ctrl)]
        ctrl_d = (compare_to_value(ctrl, 1.0, alternative="less", effect_name="mean log-log slope")
                  if ctrl.size >= 2 else None)  # fmt: skip
        d = compare_to_value(slopes, 1.0, alternative="less", effect_name="mean log-log slope of NegUCB's regret")
        checks.append(d.to_check(id="sublinear-regret-slope", decisive=False, control=ctrl_d,
                                 control_claim="epsilon-greedy with constant epsilon has a log-log slope below 1",
                                 claim="NegUCB's log-log regret slope is below 1 (the former decisive rule, per "
                                       "trial; reported only: a linear-regret learner passes it after a costly "
                                       "start)"))  # fmt: skip
    varying_slopes = _pooled(tasks.get("varying_types", []), "slope_negucb")
    varying_slopes = varying_slopes[np.isfinite(varying_slopes)]
    if varying_slopes.size >= 2:
        d = compare_to_value(varying_slopes, 1.0, alternative="less", effect_name="mean log-log slope")
        checks.append(d.to_check(id="sublinear-regret-varying-types", decisive=False,
                                 claim="NegUCB's regret slope where opponent types vary (reported only: the regret is "
                                       "against an oracle that knows the hidden type, which the learner can only "
                                       "infer, so part of it cannot vanish)."))  # fmt: skip

    # C2, C3: regret and deals against each baseline on every task.
    regret_cells, deal_cells, powers = {}, {}, []
    for task in TASKS:
        res = tasks.get(task)
        if not res:
            continue
        mine_w = _pooled(res, "reward_negucb")
        for b in DEAL_BASELINES:
            if f"regret_{b}" not in res[0].metrics:
                continue
            key = f"{TASK_NAMES[task]} vs {LABELS[b]}"
            base_w = _pooled(res, f"reward_{b}")
            if b in REGRET_BASELINES and f"common_{b}" in res[0].metrics:
                mine_c, base_c = _pooled(res, "common_negucb"), _pooled(res, f"common_{b}")
                regret_cells[key] = compare(mine_c, base_c, paired=True, alternative="less",
                                            effect_name="mean R_T difference against the common reference "
                                                        "(NegUCB - baseline)")  # fmt: skip
                powers.append(_power_of_difference(mine_c - base_c, -0.2 * float(np.mean(base_c))))
            deal_cells[key] = compare(mine_w, base_w, paired=True, alternative="greater",
                                      effect_name="mean utility won, NegUCB - baseline")  # fmt: skip
    power = float(np.prod(powers)) if powers and all(p is not None for p in powers) else None
    checks.append(all_cells(regret_cells, id="regret-below-baselines", rule=REGRET_RULE, power=power,
                            claim="NegUCB's regret is below every baseline's (epsilon-greedy, linear UCB, Boulware, "
                                  "Conceder, random) on every task."))  # fmt: skip
    checks.append(all_cells(deal_cells, id="better-deals", rule=DEAL_RULE,
                            claim="NegUCB wins more own utility in deals than every baseline (the hidden-state "
                                  "ablation included) over the same number of proposals."))  # fmt: skip

    # C4: the hidden-state ablation loses when types vary.
    hidden_cells, hidden_powers = {}, []
    for task in TASKS:
        res = tasks.get(task)
        if not res or "regret_no_hidden" not in res[0].metrics:
            continue
        mine, abl = _log(_pooled(res, "regret_negucb")), _log(_pooled(res, "regret_no_hidden"))
        hidden_cells[TASK_NAMES[task]] = compare(mine, abl, paired=True, alternative="less",
                                                 effect_name="mean log(R_T NegUCB / R_T without hidden state)")
        hidden_powers.append(_power_of_log_ratio(mine - abl))
    hp_ = float(np.prod(hidden_powers)) if hidden_powers and all(p is not None for p in hidden_powers) else None
    extra = ""
    if stat and "regret_no_hidden" in stat[0].metrics:
        d = compare(_log(_pooled(stat, "regret_negucb")), _log(_pooled(stat, "regret_no_hidden")), paired=True,
                    alternative="less")  # fmt: skip
        extra = f". For contrast, with a single opponent type (reported only): {d.describe()}"
    checks.append(all_cells(hidden_cells, id="hidden-state-helps", rule=HIDDEN_RULE, power=hp_, extra=extra,
                            claim="Without the hidden-state features NegUCB's regret is higher when opponent types "
                                  "vary."))  # fmt: skip

    # Reported: does the optimism pay where it ran against its ablation (beta = 0)?
    for task in TASKS:
        res = tasks.get(task)
        if not res or "common_greedy" not in res[0].metrics or "common_negucb" not in res[0].metrics:
            continue
        d = compare(_pooled(res, "common_negucb"), _pooled(res, "common_greedy"), paired=True, alternative="less",
                    effect_name="mean R_T difference against the common reference (NegUCB - NegUCB with beta 0)")
        diag = "; ".join(
            f"{LABELS[a]}: {np.mean(_pooled(res, f'hopeless_{a}')):.2f} of the second half's proposals hopeless "
            f"(acceptance < {HOPELESS:g}), causing {np.mean(_pooled(res, f'hopeless_regret_{a}')):.2f} of its regret "
            f"there, mean own utility proposed {np.nanmean(_pooled(res, f'proposal_utility_{a}')):.2f}"
            for a in ALL_AGENTS if f"hopeless_{a}" in res[0].metrics)  # fmt: skip
        checks.append(d.to_check(id=f"optimism-pays-{task.replace('_', '-')}", decisive=False, evidence=diag,
                                 claim=f"{TASK_NAMES[task]}: NegUCB's optimism (beta {DEFAULT_HP['beta']}) lowers "
                                       "its regret against the same model without it (beta 0; reported only)"))
    core_ids = ("sublinear-regret", "regret-below-baselines", "better-deals", "hidden-state-helps")
    for c in checks:
        c.decisive = c.id in core_ids
    verdict, decided_by, rule_text = combine(checks, "all")
    core = [c for c in checks if c.decisive]
    summary = (f"Scale {scale}, {len(ok)} jobs. Verdict rule: {rule_text}. "
               + " ".join(f"[{c.verdict}] {c.claim} {c.evidence}." for c in core))  # fmt: skip
    figures = [f for f in (_figure(tasks),) if f is not None]
    return Analysis(verdict, summary, tables, figures, checks, rule=rule_text, decided_by=decided_by)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "NegUCB (our reconstruction from the abstract and introduction: the paper's method section was not "
        "readable), a contextual combinatorial bandit with hidden-state features and kernel regression under "
        "full-bandit feedback, has sublinear regret (per-round regret that keeps falling, unlike a "
        "constant-epsilon learner's) and lower regret against a common reference and better deals than the "
        "baselines; dropping the hidden state hurts when opponent types vary."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Sublinear regret is tested as per-round regret (against the common reference) falling by more than 25% "
        "from rounds (0.1T, 0.2T] to (0.8T, T] over seeds of the stationary task, with epsilon-greedy at a constant "
        "epsilon 0.1 (linear regret) as its negative control; the former log-log-slope rule is reported only.",
        "The regret check uses the regret against a common reference (the oracle run's expected reward per round, "
        "the same for every agent); the regret against the oracle in the agent's own state is reported.",
        "The paper's method section, theorem and experiment tables were not readable to us (only the abstract "
        "and the introduction); NegUCB follows the notes' reconstruction, so the hidden-state summary, the "
        "kernel, the constants and the regret definition are ours.",
        "The paper's tasks (ANAC multi-issue domains, Deal-or-No-Deal allocation, its trading task) and opponent "
        "agents are replaced by domains and time-dependent opponents generated in code.",
        "The kernel is the sum of a product RBF kernel on (context, hidden state, bid encoding), approximated by "
        "128 random Fourier features, and a linear kernel on the same inputs (primal ridge regression, O(D^2) "
        "per proposal, instead of the exact dual kernel matrix; a test checks the features converge to the exact "
        "posterior). The notes' default is the RBF kernel alone; in a pilot the sum had lower regret than "
        "either part, and the full scale reports the RBF kernel alone in the sensitivity table.",
        "Regret is per proposal, against the myopic oracle argmax_S U(S) g_t(S) that knows the hidden type; "
        "the multi-step structure of a negotiation (a rejection leads to the next proposal) is not planned over.",
        "'Better deals' is measured as the own utility won in deals over the same number of proposals; the "
        "utility per deal is reported but is not the criterion (a tactic that concedes late makes fewer, "
        "richer deals).",
        "The learner proposes only; it never accepts the opponent's counter-offers (they feed the hidden state).",
        "beta = 0.3 and a state lengthscale of 1.0 come from a pilot on the quick task (the notes' defaults, "
        "beta = 1 and lengthscale 0.3, gave higher regret); the full scale reports the sensitivity.",
        "The sublinear-regret check uses the single-type task, where the acceptance function depends only on "
        "what the learner observes; with hidden types the regret against a type-knowing oracle keeps an "
        "irreducible part, and its slope is reported only.",
        "The negmas / Genius agents are not used (the wheel bundles no scenarios and heavy dependencies).",
    ),
    scales=("smoke", "quick", "full"),
)
