"""Miniature reproduction of *Factored-Reward Bandits with Intermediate Observations* (Mussi et al., ICML 2024,
https://proceedings.mlr.press/v235/mussi24a.html).

Experiments (each job runs several trials vectorised; jobs are repeated over seeds):

* ``flat_vs_factored``: random instances (means ~ U[0.3, 1], Gaussian sigma = 0.1) over a grid of ``d`` and
  ``K``; F-UCB against UCB1 and median-of-means UCB on the flattened ``K^d`` arms (the paper's experiments and
  the official ``notebooks/frb.py``).
* ``parallel_ftrack``: the parallel instance (``K = 2``, best mean 1, others 0.5) for growing ``d``; F-Track
  against F-UCB (official ``notebooks/ftrack_experiment.py``).
* ``high_noise``: the same at sigma = 0.5, where F-Track's short warm-up can lock onto wrong arms.
* ``alpha_sweep`` (full): noise correlation across factors in {0, 0.5, 1}.
* ``lp_check``: F-Track's aligned schedule against the exploration LP solved by ``scipy.optimize.linprog``.

Verdict rule (also in the README): the claim is *supported* when (C1) F-UCB's mean regret is below both
flattened baselines in every configuration and at most half of UCB1's, (C2) the UCB1 / F-UCB regret ratio grows
along every step of ``K`` and of ``d`` in the grid, and (C3) the log-log slope of F-Track's regret against ``d``
is below F-UCB's at every (sigma, T) where the two slopes differ by at least ``SLOPE_TIE`` (and there is one);
*not supported* when any of them fails outright; otherwise inconclusive.
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
    mean_std,
    new_figure,
    seeds_for,
)

from ..regret import loglog_slope
from ..verdicts import all_cells as _all_cells
from . import SLUG
from .agents import FUCB, FlatMoMUCB, FlatUCB1, FTrack
from .environments import FactoredEnv, ParallelFactoredEnv
from .lower_bound import aligned_schedule, exploration_lp, schedule_cost
from .simulation import simulate

MOM_BUDGET = 7_000_000
"""Largest ``n_trials * K^d * T`` for which the median-of-means baseline (which keeps every reward) is run."""
N_POINTS = 100
SLOPE_TIE = 0.05
"""Slopes of log R_T in log d closer than this are a tie: that (sigma, T) cannot tell which is flatter."""
LABELS = {"fucb": "F-UCB", "ucb1": "UCB1 (flattened)", "mom": "MoM-UCB (flattened)", "ftrack": "F-Track"}
MODULE = "icml24.bandits.factored_reward_bandits.reproduce"


# ----------------------------------------------------------------------------------------------------------
# Job functions: pure functions of (config, seed)
# ----------------------------------------------------------------------------------------------------------


def _curve_stats(cumulative: np.ndarray) -> dict[str, Any]:
    """Mean and mean-of-squares of the cumulative regret over trials at <= N_POINTS checkpoints."""
    horizon = cumulative.shape[1]
    idx = np.unique(np.linspace(horizon / N_POINTS, horizon, N_POINTS).astype(int) - 1)
    sub = cumulative[:, idx]
    return {"t": (idx + 1).tolist(), "mean": sub.mean(axis=0).tolist(), "sq": (sub**2).mean(axis=0).tolist()}


def _agent(name: str, k: int, d: int, sigma: float, horizon: int):
    if name == "fucb":
        return FUCB(n_arms=k, n_factors=d, sigma=sigma)
    if name == "ftrack":
        return FTrack(n_arms=k, n_factors=d, sigma=sigma, horizon=horizon)
    if name == "ucb1":
        return FlatUCB1(n_arms=k, n_factors=d, sigma=sigma)
    if name == "mom":
        return FlatMoMUCB(n_arms=k, n_factors=d, sigma=sigma)
    raise ValueError(f"unknown agent {name!r}")


def _run_agents(env: FactoredEnv, agents: Sequence[str], config: dict, seed: int) -> dict[str, Any]:
    k, d, sigma, horizon, trials = env.n_arms, env.n_factors, config["sigma"], config["horizon"], config["n_trials"]
    out: dict[str, Any] = {"agents": list(agents)}
    for name in agents:
        agent = _agent(name, k, d, sigma, horizon)
        sim = simulate(env, agent, horizon, trials, seed)  # same seed: every agent faces the same instances
        cum = sim.cumulative
        out[f"final_{name}"] = sim.final.tolist()
        out[f"curve_{name}"] = _curve_stats(cum)
        out[f"slope_{name}"] = loglog_slope(cum.mean(axis=0))
        if isinstance(agent, FTrack):
            out["ftrack_switched"] = agent.switched_.astype(int).tolist()
            out["ftrack_warmup"] = agent.warmup_rounds
    return out


def run_flat_vs_factored(config: dict, seed: int) -> dict[str, Any]:
    """F-UCB vs flattened UCB1 (and MoM-UCB when it fits in memory) on random U[0.3, 1] instances."""
    env = FactoredEnv(n_arms=config["n_arms"], n_factors=config["n_factors"], sigma=config["sigma"])
    return _run_agents(env, config["agents"], config, seed)


def run_parallel(config: dict, seed: int) -> dict[str, Any]:
    """F-UCB vs F-Track on the parallel instance (also the high-noise and alpha-sweep experiments)."""
    env = ParallelFactoredEnv(
        n_arms=config["n_arms"], n_factors=config["n_factors"], sigma=config["sigma"], alpha=config["alpha"]
    )
    return _run_agents(env, ["fucb", "ftrack"], config, seed)


def run_lp_check(config: dict, seed: int) -> dict[str, Any]:
    """Aligned schedules (both orders, real and integer counts) against the exploration LP on random instances."""
    rng = np.random.default_rng(seed)
    d, k, horizon = config["n_factors"], config["n_arms"], config["horizon"]
    rows: dict[str, list[float]] = {"increasing": [], "decreasing": [], "increasing_int": [], "lp_cost": []}
    for _ in range(config["n_instances"]):
        means = rng.uniform(0.3, 1.0, size=(d, k))
        lp = exploration_lp(means, config["sigma"], horizon)
        best = means.argmax(axis=1)
        for order in ("increasing", "decreasing"):
            acts, counts = aligned_schedule(lp.required, best, order=order)
            rows[order].append(schedule_cost(means, acts, counts) / lp.cost - 1)
        acts, counts = aligned_schedule(np.ceil(lp.required).astype(np.int64), best)
        rows["increasing_int"].append(schedule_cost(means, acts, counts) / lp.cost - 1)
        rows["lp_cost"].append(lp.cost)
    return {f"excess_{key}": val for key, val in rows.items() if key != "lp_cost"} | {"lp_cost": rows["lp_cost"]}


# ----------------------------------------------------------------------------------------------------------
# Jobs per scale
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScaleConfig:
    """The grid of one scale of the reproduction (defaults: the paper's and the official scripts' settings)."""

    trials: int
    """Independent trials per job, simulated together along the arrays' first axis."""
    seeds: int
    """Default number of seeds, i.e. jobs per configuration."""
    flat_d: tuple[int, ...]
    """Numbers of factors of ``flat_vs_factored``."""
    flat_k: tuple[int, ...]
    """Arms per factor of ``flat_vs_factored``."""
    flat_horizon: int
    """Horizon of ``flat_vs_factored``."""
    parallel_d: tuple[int, ...]
    """Numbers of factors of ``parallel_ftrack`` (parallel instance, K = 2)."""
    parallel_sigma: tuple[float, ...] = (0.1,)
    """Noise levels of ``parallel_ftrack``."""
    parallel_horizon: tuple[int, ...] = (10_000,)
    """Horizons of ``parallel_ftrack`` (F-Track needs T in advance: one run per T)."""
    high_noise_d: int = 10
    """Factors of the high-noise run (the notes' probe: d = 10)."""
    high_noise_horizon: int = 20_000
    """Horizon of the high-noise run."""
    alpha: tuple[float, ...] = ()
    """Noise correlations of ``alpha_sweep`` (empty: no sweep), on the parallel instance with d = 10, T = 10^4."""
    lp_sizes: tuple[tuple[int, int], ...] = ((2, 2), (2, 3), (3, 2), (3, 3))
    """(d, K) of the LP check."""
    lp_instances: int = 20
    """Random instances per (d, K) and seed in the LP check."""
    sigma: float = 0.1
    """Gaussian noise of ``flat_vs_factored``, ``parallel``'s default and the sweep (official scripts: 0.1)."""
    high_noise_sigma: float = 0.5
    """Noise of the high-noise run."""


SCALES: dict[str, ScaleConfig] = {
    "smoke": ScaleConfig(
        trials=3, seeds=1, flat_d=(2,), flat_k=(3,), flat_horizon=300, parallel_d=(2, 5),
        parallel_horizon=(1000,), high_noise_d=5, high_noise_horizon=1000, lp_sizes=((2, 2), (2, 3)),
        lp_instances=5,
    ),
    "quick": ScaleConfig(trials=5, seeds=2, flat_d=(2, 3), flat_k=(3, 5), flat_horizon=5000, parallel_d=(2, 5, 10, 20)),
    "full": ScaleConfig(
        trials=10, seeds=2, flat_d=(2, 3, 4), flat_k=(2, 4, 6), flat_horizon=10_000, parallel_d=(2, 5, 10, 20),
        parallel_sigma=(0.01, 0.1), parallel_horizon=(10_000, 30_000), alpha=(0.0, 0.5, 1.0),
    ),
}  # fmt: skip
DEFAULT_SEEDS = {name: cfg.seeds for name, cfg in SCALES.items()}


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = SCALES[scale]
    trials, sigma = cfg.trials, cfg.sigma
    jobs: list[Job] = []

    def add(experiment: str, fn: str, config: dict) -> None:
        for s in seeds_for(scale, seeds, DEFAULT_SEEDS):
            jobs.append(Job(SLUG, experiment, f"{MODULE}:{fn}", config, s))

    for d in cfg.flat_d:
        for k in cfg.flat_k:
            agents = ["fucb", "ucb1"]
            if trials * k**d * cfg.flat_horizon <= MOM_BUDGET:
                agents.append("mom")
            config = {"n_factors": d, "n_arms": k, "sigma": sigma, "horizon": cfg.flat_horizon, "n_trials": trials}
            add("flat_vs_factored", "run_flat_vs_factored", config | {"agents": agents})
    for noise in cfg.parallel_sigma:
        for horizon in cfg.parallel_horizon:
            for d in cfg.parallel_d:
                config = {"n_factors": d, "n_arms": 2, "sigma": noise, "alpha": 0.0, "horizon": horizon}
                add("parallel_ftrack", "run_parallel", config | {"n_trials": trials})
    config = {"n_factors": cfg.high_noise_d, "n_arms": 2, "sigma": cfg.high_noise_sigma, "alpha": 0.0}
    add("high_noise", "run_parallel", config | {"horizon": cfg.high_noise_horizon, "n_trials": trials})
    for alpha in cfg.alpha:
        config = {"n_factors": 10, "n_arms": 2, "sigma": sigma, "alpha": alpha, "horizon": 10_000}
        add("alpha_sweep", "run_parallel", config | {"n_trials": trials})
    for d, k in cfg.lp_sizes:
        config = {"n_factors": d, "n_arms": k, "sigma": sigma, "horizon": 10_000, "n_instances": cfg.lp_instances}
        add("lp_check", "run_lp_check", config)
    return jobs


# ----------------------------------------------------------------------------------------------------------
# Analysis
# ----------------------------------------------------------------------------------------------------------


def _pooled(results: Sequence[JobResult], key: str) -> list[float]:
    """Per-trial values of a list metric pooled over the seeds of a group."""
    return [float(v) for r in results for v in r.metrics.get(key, [])]


def _mean(results: Sequence[JobResult], key: str) -> float:
    return mean_std(_pooled(results, key))[0]


def _pooled_curve(results: Sequence[JobResult], name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Mean curve and its standard error over all trials of all seeds (equal trials per job)."""
    curves = [r.metrics[f"curve_{name}"] for r in results if f"curve_{name}" in r.metrics]
    if not curves:
        return None
    t = np.asarray(curves[0]["t"])
    mean = np.mean([c["mean"] for c in curves], axis=0)
    sq = np.mean([c["sq"] for c in curves], axis=0)
    n = sum(len(r.metrics.get(f"final_{name}", [])) for r in results)
    se = np.sqrt(np.maximum(sq - mean**2, 0) / max(n - 1, 1))
    return t, mean, se


def _numeric(groups: dict) -> dict:
    """``group_results`` orders keys as strings (10 before 2); order numeric keys numerically."""
    return dict(sorted(groups.items(), key=lambda kv: tuple(float(x) for x in kv[0])))


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}g}"


def _analyze_flat(results: Sequence[JobResult]) -> tuple[Table | None, list[ClaimCheck], Figure | None]:
    groups = _numeric(group_results(results, "flat_vs_factored", by=("n_factors", "n_arms")))
    if not groups:
        return None, [], None
    rows, ratio = [], {}
    for (d, k), res in groups.items():
        f, u, m = (_mean(res, f"final_{a}") for a in ("fucb", "ucb1", "mom"))
        ratio[(d, k)] = _ratio(u, f)
        slopes = [r.metrics["slope_fucb"] for r in res if r.metrics.get("slope_fucb") is not None]
        rows.append(
            [
                d,
                k,
                k**d,
                res[0].job.config["horizon"],
                fmt_mean_std(_pooled(res, "final_fucb")),
                fmt_mean_std(_pooled(res, "final_ucb1")),
                fmt_mean_std(_pooled(res, "final_mom")) if np.isfinite(m) else "not run (memory)",
                _fmt(ratio[(d, k)]),
                _fmt(_ratio(m, f)),
                _fmt(float(np.mean(slopes)) if slopes else math.nan, 2),
            ]
        )
    table = Table(
        "Final regret R_T: F-UCB vs flattened baselines (mean ± std over trials, seeds pooled)",
        ["d", "K", "K^d", "T", "F-UCB", "UCB1 (flat)", "MoM-UCB (flat)", "UCB1/F-UCB", "MoM/F-UCB", "F-UCB slope"],
        rows,
        "slope: least-squares slope of log R_t vs log t over t >= T/10 (1 = linear, 0.5 = sqrt T).",
    )
    check1, check_mom, check2 = _flat_checks(groups)
    # Figure: regret curves per configuration.
    n = len(groups)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig, axes = new_figure(nrows, ncols, width=4.2, height=3.2)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    for ax, ((d, k), res) in zip(axes.ravel(), groups.items()):
        for name in ("fucb", "ucb1", "mom"):
            pc = _pooled_curve(res, name)
            if pc is None:
                continue
            t, m, se = pc
            ax.plot(t, m, label=LABELS[name])
            ax.fill_between(t, m - se, m + se, alpha=0.25)
        ax.set_title(f"d={d}, K={k} (K^d={k**d})", fontsize=9)
        ax.set_xlabel("round t")
        ax.set_ylabel("cumulative regret")
        ax.set_yscale("log")
    if axes.ravel()[0].get_legend_handles_labels()[0]:
        axes.ravel()[0].legend(fontsize=7)
    figure = Figure(
        "Regret curves: factored vs flattened",
        figure_png(fig),
        "Mean cumulative pseudo-regret ± 1 standard error over all trials (log scale); random U[0.3, 1] instances, sigma = 0.1.",
    )
    return table, [check1, check2, check_mom], figure


def _analyze_parallel(results: Sequence[JobResult]) -> tuple[Table | None, list[ClaimCheck], Figure | None]:
    groups = _numeric(group_results(results, "parallel_ftrack", by=("sigma", "horizon", "n_factors")))
    if not groups:
        return None, [], None
    rows = []
    series: dict[tuple[float, int], list[tuple[int, float, float]]] = {}
    for (sigma, horizon, d), res in groups.items():
        f, tr = _mean(res, "final_fucb"), _mean(res, "final_ftrack")
        sw = _pooled(res, "ftrack_switched")
        rows.append(
            [
                sigma,
                horizon,
                d,
                fmt_mean_std(_pooled(res, "final_fucb")),
                fmt_mean_std(_pooled(res, "final_ftrack")),
                _fmt(_ratio(tr, f)),
                f"{100 * np.mean(sw):.0f}%" if sw else "n/a",
            ]
        )
        series.setdefault((sigma, horizon), []).append((d, f, tr))
    table = Table(
        "Parallel instance (K=2): F-Track vs F-UCB as d grows (final regret, mean ± std over trials)",
        ["sigma", "T", "d", "F-UCB", "F-Track", "F-Track/F-UCB", "F-Track switched to F-UCB"],
        rows,
    )
    check3 = _parallel_check(groups)
    fig, axes = new_figure(1, 1, width=5.2, height=3.8)
    ax = axes[0, 0]
    for (sigma, horizon), pts in series.items():
        pts = sorted(pts)
        dd = [p[0] for p in pts]
        (line,) = ax.plot(dd, [p[1] for p in pts], "o-", label=f"F-UCB σ={sigma} T={horizon}")
        ax.plot(dd, [p[2] for p in pts], "s--", color=line.get_color(), label=f"F-Track σ={sigma} T={horizon}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xticks(sorted({p[0] for pts in series.values() for p in pts}))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("number of factors d")
    ax.set_ylabel("final regret R_T (mean over trials)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    figure = Figure(
        "F-Track vs F-UCB on the parallel instance",
        figure_png(fig),
        "Final regret against d (log-log). Solid: F-UCB; dashed: F-Track. A flatter line grows more slowly with d.",
    )
    return table, [check3], figure


def _analyze_high_noise(results: Sequence[JobResult]) -> tuple[Table | None, list[ClaimCheck], Figure | None]:
    groups = group_results(results, "high_noise", by=("sigma", "horizon", "n_factors"))
    if not groups:
        return None, [], None
    (sigma, horizon, d), res = next(iter(groups.items()))
    f, tr = _pooled(res, "final_fucb"), _pooled(res, "final_ftrack")
    sw = _pooled(res, "ftrack_switched")
    blowups = int(sum(x > 10 * np.mean(f) for x in tr)) if f else 0
    table = Table(
        f"High noise (parallel instance, sigma={sigma}, d={d}, T={horizon})",
        ["agent", "final regret", "median", "max", "trials > 10x F-UCB mean", "switched to F-UCB"],
        [
            ["F-UCB", fmt_mean_std(f), _fmt(float(np.median(f))), _fmt(float(np.max(f))), "-", "-"],
            [
                "F-Track",
                fmt_mean_std(tr),
                _fmt(float(np.median(tr))),
                _fmt(float(np.max(tr))),
                f"{blowups}/{len(tr)}",
                f"{int(sum(sw))}/{len(sw)}",
            ],
        ],
    )
    worse = np.mean(tr) > np.mean(f)
    check = ClaimCheck(
        "Finding (not a claim of the paper): F-Track's advantage is asymptotic; at high noise its short warm-up "
        "can lock onto wrong arms without the safety switch firing, and it does worse than F-UCB.",
        "supported" if worse else "not_supported",
        f"sigma={sigma}, d={d}, T={horizon}: F-Track {np.mean(tr):.4g} vs F-UCB {np.mean(f):.4g} mean regret; "
        f"{blowups}/{len(tr)} F-Track trials above 10x F-UCB's mean; switch fired in {int(sum(sw))}/{len(sw)}.",
    )
    fig, axes = new_figure(1, 1, width=5.0, height=3.6)
    ax = axes[0, 0]
    for name in ("fucb", "ftrack"):
        pc = _pooled_curve(res, name)
        if pc is not None:
            t, m, se = pc
            ax.plot(t, m, label=LABELS[name])
            ax.fill_between(t, m - se, m + se, alpha=0.25)
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative regret")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    figure = Figure(
        "High noise: F-Track vs F-UCB",
        figure_png(fig),
        f"Parallel instance, sigma={sigma}, d={d}: mean cumulative regret ± 1 standard error over trials.",
    )
    return table, [check], figure


def _analyze_alpha(results: Sequence[JobResult]) -> Table | None:
    groups = _numeric(group_results(results, "alpha_sweep", by=("alpha",)))
    if not groups:
        return None
    rows = [
        [alpha, fmt_mean_std(_pooled(res, "final_fucb")), fmt_mean_std(_pooled(res, "final_ftrack"))]
        for (alpha,), res in groups.items()
    ]
    cfg = next(iter(groups.values()))[0].job.config
    return Table(
        f"Noise correlation across factors (parallel instance, d={cfg['n_factors']}, sigma={cfg['sigma']}, "
        f"T={cfg['horizon']})",
        ["alpha", "F-UCB", "F-Track"],
        rows,
        "Each factor keeps standard deviation sigma; alpha is the correlation between any two factors.",
    )


def _analyze_lp(results: Sequence[JobResult]) -> tuple[Table | None, list[ClaimCheck]]:
    groups = _numeric(group_results(results, "lp_check", by=("n_factors", "n_arms")))
    if not groups:
        return None, []
    rows, worst_inc, worst_int_ok = [], 0.0, True
    for (d, k), res in groups.items():
        inc = _pooled(res, "excess_increasing")
        dec = _pooled(res, "excess_decreasing")
        integ = _pooled(res, "excess_increasing_int")
        worst_inc = max(worst_inc, max(abs(x) for x in inc))
        rows.append(
            [d, k, len(inc), f"{max(abs(x) for x in inc):.1e}", f"{100 * max(dec):.2f}%", f"{100 * max(integ):.2f}%"]
        )
        worst_int_ok &= min(integ) >= -1e-9
    table = Table(
        "Aligned schedule vs the exploration LP (scipy linprog over all K^d vectors): relative excess cost",
        ["d", "K", "instances", "increasing order (ours), max |excess|", "decreasing (official code), max",
         "ours with counts rounded up, max"],
        rows,
        "excess = schedule cost / LP optimum - 1, sigma=0.1, log T with T=10^4, means ~ U[0.3, 1].",
    )
    ok = worst_inc < 1e-6 and worst_int_ok
    check = ClaimCheck(
        "F-Track's aligned schedule attains the instance-dependent exploration LP (checked against linprog).",
        "supported" if ok else "not_supported",
        f"max |excess| of the increasing-order alignment over all instances: {worst_inc:.1e}; the official "
        "decreasing order is optimal only for K=2 (see table).",
    )
    return table, [check]



# ----------------------------------------------------------------------------------------------------------
# The verdict rule, stated with icml24.common.decide
# ----------------------------------------------------------------------------------------------------------

C1_RULE = ("per (d, K), a one-sided paired t-test over trials (same instance, same noise seed) of log R_T(F-UCB) "
           "- log R_T(UCB1 flattened) < 0 at alpha 0.05; supported if it holds in every (d, K) (intersection-union, "
           "no correction); not_supported if some (d, K) shows F-UCB worse (Holm across configurations)")
C2_RULE = ("the per-trial log regret ratio log(R_T(UCB1) / R_T(F-UCB)) grows with K at each d and with d at each K: "
           "OLS slope > 0, one-sided at alpha 0.05, every line needed; not_supported if a slope is significantly "
           "negative (Holm across lines)")
C3_RULE = ("per (sigma, T), the per-trial log ratio log(R_T(F-Track) / R_T(F-UCB)) decreases in log d (F-Track flatter "
           "in d): OLS slope < 0, one-sided at alpha 0.05; a (sigma, T) where both regrets are deterministic (no spread) "
           "is a tie and not counted; every counted (sigma, T) needed; not_supported if a slope is significantly "
           "positive (Holm)")


def _log(values) -> np.ndarray:
    return np.log(np.maximum(np.asarray(values, dtype=float), 1e-12))


def _flat_checks(groups: dict) -> tuple[ClaimCheck, ClaimCheck, ClaimCheck]:
    from icml24.common.decide import compare, power_of_compare, trend

    c1, mom, lines = {}, {}, {}
    powers = []
    per_cfg: dict[tuple[int, int], np.ndarray] = {}
    for (d, k), res in groups.items():
        f, u, m = _pooled(res, "final_fucb"), _pooled(res, "final_ucb1"), _pooled(res, "final_mom")
        if len(f) == len(u) and f:
            c1[f"d={d},K={k}"] = compare(_log(f), _log(u), paired=True, alternative="less",
                                         effect_name="mean log(R_T F-UCB / R_T UCB1)")
            diff = _log(f) - _log(u)
            per_cfg[(d, k)] = -diff
            if len(diff) >= 2 and diff.std(ddof=1) > 0:
                powers.append(power_of_compare(float(diff.mean()), float(diff.std(ddof=1)), len(diff), paired=True,
                                               alternative="less", n_sims=300).supported)
        if len(f) == len(m) and m:
            mom[f"d={d},K={k}"] = compare(_log(f), _log(m), paired=True, alternative="less",
                                          effect_name="mean log(R_T F-UCB / R_T MoM-UCB)")
    power = float(np.prod(powers)) if powers and len(powers) == len(c1) else None
    check1 = _all_cells(c1, id="fucb-below-ucb1", claim="F-UCB's regret is below flattened UCB1's in every (d, K).",
                        rule=C1_RULE, power=power)
    check_mom = _all_cells(mom, id="fucb-below-mom", decisive=False,
                           claim="F-UCB's regret is below flattened median-of-means UCB's (reported only: with the "
                                 "official width multiplier 1 that baseline's regret is near-linear, so this "
                                 "comparison cannot fail).", rule=C1_RULE.replace("UCB1 flattened", "MoM-UCB"))
    ds = sorted({d for d, _ in per_cfg})
    ks = sorted({k for _, k in per_cfg})
    for d in ds:
        row = [(k, per_cfg[(d, k)]) for k in ks if (d, k) in per_cfg]
        if len(row) >= 2:
            x = np.concatenate([np.full(v.size, k, float) for k, v in row])
            lines[f"d={d}, in K"] = trend(x, np.concatenate([v for _, v in row]), claim="increasing",
                                          effect_name="slope of log(UCB1/F-UCB) per arm")
    for k in ks:
        col = [(d, per_cfg[(d, k)]) for d in ds if (d, k) in per_cfg]
        if len(col) >= 2:
            x = np.concatenate([np.full(v.size, d, float) for d, v in col])
            lines[f"K={k}, in d"] = trend(x, np.concatenate([v for _, v in col]), claim="increasing",
                                          effect_name="slope of log(UCB1/F-UCB) per factor")
    ratios = ", ".join(f"d={d},K={k}: {float(np.exp(v.mean())):.2f}x" for (d, k), v in per_cfg.items())
    check2 = _all_cells(lines, id="gap-widens-in-d-and-k", rule=C2_RULE,
                        claim="The gap between F-UCB and flattened UCB1 widens with d and with K.",
                        extra=f". Geometric-mean UCB1/F-UCB regret ratios: {ratios}" if ratios else "")
    return check1, check_mom, check2


def _parallel_check(groups: dict) -> ClaimCheck:
    from icml24.common.decide import trend

    series: dict[tuple[float, int], list[tuple[int, np.ndarray]]] = {}
    for (sigma, horizon, d), res in groups.items():
        f, t = _pooled(res, "final_fucb"), _pooled(res, "final_ftrack")
        if f and len(f) == len(t):
            series.setdefault((sigma, horizon), []).append((d, _log(t) - _log(f)))
    decisions, ties = {}, []
    for (sigma, horizon), pts in series.items():
        if len(pts) < 2:
            continue
        if all(np.ptp(v) == 0 for _, v in pts):
            ties.append(f"sigma={sigma}, T={horizon}")
            continue
        x = np.concatenate([np.full(v.size, math.log(d)) for d, v in pts])
        decisions[f"sigma={sigma}, T={horizon}"] = trend(
            x, np.concatenate([v for _, v in pts]), claim="decreasing",
            effect_name="slope of log(F-Track/F-UCB) in log d")
    extra = f". Ties (both regrets deterministic, not counted): {'; '.join(ties)}" if ties else ""
    return _all_cells(decisions, id="ftrack-flatter-in-d", rule=C3_RULE, extra=extra,
                      claim="F-Track's regret is flatter in the number of factors d than F-UCB's.")


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    ok = [r for r in results if r.status == "ok"]
    tables: list[Table] = []
    figures: list[Figure] = []
    checks: list[ClaimCheck] = []
    for part in (_analyze_flat, _analyze_parallel, _analyze_high_noise):
        table, cks, fig = part(ok)
        if table is not None:
            tables.append(table)
        checks.extend(cks)
        if fig is not None:
            figures.append(fig)
    alpha_table = _analyze_alpha(ok)
    if alpha_table is not None:
        tables.append(alpha_table)
    lp_table, lp_checks = _analyze_lp(ok)
    if lp_table is not None:
        tables.append(lp_table)
    checks.extend(lp_checks)
    from icml24.common.decide import combine

    for c in checks:  # the MoM comparison, the high-noise finding and the LP check are reported only
        if c.id not in ("fucb-below-ucb1", "gap-widens-in-d-and-k", "ftrack-flatter-in-d"):
            c.decisive = False
    core = [c for c in checks if c.decisive]
    verdict, decided_by, rule_text = combine(core, "all")
    if len(core) < 3 and verdict == "supported":
        verdict = "inconclusive"
    summary = (
        f"Scale {scale}, {len(ok)} jobs. Verdict rule: {rule_text} (F-UCB below UCB1; gap widens in d and K; "
        "F-Track flatter in d). "
        + " ".join(f"[{c.verdict}] {c.claim} {c.evidence}." for c in core)
        + (f" Missing sub-claims (crashed or not run): {3 - len(core)}." if len(core) < 3 else "")
    )
    return Analysis(verdict, summary, tables, figures, checks, rule=rule_text, decided_by=decided_by)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Learning each factor from its own intermediate observation (F-UCB) gives far lower regret than flattening "
        "the K^d joint actions, with the gap widening in d and K, and aligned exploration (F-Track) makes regret "
        "nearly flat in the number of factors."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Miniature horizons and trial counts: T <= 3*10^4 and 10 (quick) or 20 (full) trials per configuration, "
        "against 50 trials in the official scripts; the paper's table values were not available to compare with.",
        "The TEA baseline (Zimmert & Seldin 2018) is not implemented; the flattened baselines are UCB1 and "
        "median-of-means UCB.",
        "Median-of-means UCB keeps every reward, so it is only run where n_trials * K^d * T <= 7*10^6 "
        "(in full: not for d=3,K=6, d=4,K=4 and d=4,K=6). Its width multiplier is 1 (a command-line value in the "
        "official scripts).",
        "Flattened UCB1 uses the per-factor sigma as its scale, as the official code does, although the product "
        "reward is not sigma-sub-Gaussian.",
        "Correlated noise keeps each factor's standard deviation at sigma (sqrt(alpha) shared + sqrt(1-alpha) own "
        "normal); the official code mixes alpha*shared + (1-alpha)*own, which also shrinks the variance for "
        "0 < alpha < 1. Regret is measured on the product of means in both.",
        "F-Track aligns each factor's suboptimal arms in increasing order of required samples, which solves the "
        "exploration LP exactly (checked against linprog); the official code uses decreasing order, which is the "
        "same schedule for K=2 (all our F-Track runs) but up to ~10% costlier than the LP for K>=3.",
        "The official F-Track (FRB/agents.py, _create_schedule) counts the first column of its schedule twice "
        "(the loop appends it with count 1 at i = 0 and then increments it for the same column), so the official "
        "agent plays its first exploration vector one extra round; ours plays each column exactly its count.",
        "The official flattened UCB1 baseline (notebooks) is built with d*K arms but indexes the K^d joint actions, "
        "which only agree when d = K = 2; ours has K^d arms.",
        "The verdict has no '>= 2x' bar (the paper states none): F-UCB must be below UCB1 in a paired test per "
        "(d, K), the gap must grow in d and K (trend tests), F-Track must be flatter in d (trend of the log ratio). "
        "The MoM-UCB comparison is reported but does not decide (that baseline's regret is near-linear).",
        "Ties between arms are broken towards the lowest index in every agent (the official MoM-UCB breaks them at "
        "random), so runs are deterministic given the seed.",
    ),
    scales=("smoke", "quick", "full"),
)
