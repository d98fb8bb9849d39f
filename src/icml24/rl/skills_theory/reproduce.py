"""Miniature reproduction of "When Do Skills Help Reinforcement Learning?" (Li, Poesia, Solar-Lezama; ICML 2024).

Claims (Section 5, Table 1 and Figure 1 of the paper):

1. across the 32 action spaces of one environment (the base one and 31 macroaction augmentations), log sample
   complexity of RL correlates positively with log combined difficulty
   ``log(lambda J_learn + (1 - lambda) exp(J_explore))``;
2. the best improvement from macroactions, ``min_aug C_aug / C_base``, shrinks as p-incompressibility grows:
   largest on CliffWalking (I_p = 0), smallest on the 8-puzzle (and the 2x2 cube).

Experiments: ``measures``: exact d_A, J_learn, J_explore (eps = 0.02), I_p for the 32 action spaces of each
environment and macro seed; ``qlearning``: tabular Q-learning's env steps until its greedy policy solves
>= 95% of start states, per action space (CliffWalking; CompILE2 at full scale).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
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
    fmt_mean_std,
    group_results,
    new_figure,
    seeds_for,
)

SLUG = "skills-theory"
MOD = "icml24.rl.skills_theory.reproduce"
DEFAULT_SEEDS = {"smoke": 2, "quick": 2, "full": 3}
EPSILON = 0.02
"""Termination probability of the exploration random walk (the paper's analysis uses 0.02)."""
THRESHOLD = 0.95
"""Greedy success rate at which a Q-learner counts as having solved the task (the paper's r >= 0.95)."""
ENV_LABELS = {"cliff": "CliffWalking", "compile": "CompILE2", "8puzzle": "8-puzzle", "cube": "2x2 cube"}
ASSUMED_R = 0.7
"""Correlation assumed in the power simulation: the low end of the paper's Table 1 (about 0.7 to 0.95)."""

SCALE_PLAN: dict[str, dict[str, Any]] = {
    # measures: envs; ql: env -> (budget, eval_every); sets_per_size: random macro sets per size 1..5;
    # few: env -> (macro seeds, random sets per size) for the environments whose q_eps iteration is slow
    "smoke": {"measures": ("cliff", "compile"), "ql": {"cliff": (20_000, 200)}, "sets_per_size": 1, "runs": 1,
              "few": {}},
    "quick": {"measures": ("cliff", "compile", "8puzzle"), "ql": {"cliff": (60_000, 100)}, "sets_per_size": 5,
              "runs": 2, "few": {"8puzzle": (1, 5)}},
    "full": {"measures": ("cliff", "compile", "8puzzle", "cube"),
             "ql": {"cliff": (100_000, 100), "compile": (250_000, 1000)}, "sets_per_size": 5, "runs": 2,
             "ql_seeds": {"compile": 2}, "few": {"cube": (1, 1)}},
}  # fmt: skip
QL = {"gamma": 0.99, "alpha": 0.1, "epsilon": 0.1, "horizon": 100}


def _variants(env: str, seed: int, sets_per_size: int) -> tuple[Any, list]:
    from icml24.rl.skills_theory.envs import make_task
    from icml24.rl.skills_theory.macros import macroaction_variants

    task = make_task(env)
    return task, macroaction_variants(task, seed, sets_per_size=sets_per_size)


# ------------------------------------------------------------------------------------------------ jobs


def run_measures(config: dict, seed: int) -> dict:
    """Exact difficulty measures of every action space of one environment (one macro seed)."""
    from icml24.rl.skills_theory.difficulty import (
        entropy,
        exploration_difficulty,
        exploration_probabilities,
        goal_distances,
        incompressibility,
        mean_solution_length,
    )
    from icml24.rl.skills_theory.macros import augment

    t0 = time.perf_counter()
    task, variants = _variants(config["env"], seed, config["sets_per_size"])
    build_seconds = time.perf_counter() - t0
    H = entropy(task.start)
    d_base = None
    rows: dict[str, list] = {k: [] for k in ("label", "n_actions", "mean_length", "max_length", "j_learn",
                                             "j_explore", "incompressibility", "macros")}  # fmt: skip
    monotone = True
    bfs_seconds = q_seconds = 0.0
    for label, macros in variants:
        T = augment(task.next_state, macros)
        t = time.perf_counter()
        d = goal_distances(T, task.goal)
        bfs_seconds += time.perf_counter() - t
        if d_base is None:
            d_base = d
        monotone &= bool(np.all(d <= d_base))
        t = time.perf_counter()
        q = exploration_probabilities(T, task.goal, config["epsilon"], rtol=config["rtol"])
        q_seconds += time.perf_counter() - t
        D = mean_solution_length(d, task.start)
        rows["label"].append(label)
        rows["n_actions"].append(int(T.shape[1]))
        rows["mean_length"].append(D)
        rows["max_length"].append(float(d[task.start > 0].max()))
        rows["j_learn"].append(T.shape[1] * D)
        rows["j_explore"].append(exploration_difficulty(q, task.start))
        rows["incompressibility"].append(incompressibility(H, D, int(T.shape[1])))
        rows["macros"].append([list(m) for m in macros])
    finite = d_base[np.isfinite(d_base)]
    return {
        **rows,
        "n_states": task.n_states,
        "n_reachable": int(finite.size),
        "diameter": float(finite.max()),
        "start_entropy": H,
        "distances_never_increase": monotone,
        "build_seconds": build_seconds,
        "bfs_seconds": bfs_seconds,
        "explore_seconds": q_seconds,
    }


def run_qlearning(config: dict, seed: int) -> dict:
    """Tabular Q-learning's env steps to solve one action space (``n_runs`` learners in lock-step)."""
    from icml24.rl.skills_theory.learning import steps_to_solve
    from icml24.rl.value.tabular import QLearningConfig

    task, variants = _variants(config["env"], seed, config["sets_per_size"])
    label, macros = variants[config["variant"]]
    mdp = task.mdp(macros)
    cfg = QLearningConfig(gamma=config["gamma"], alpha=config["alpha"], epsilon=config["epsilon"],
                          horizon=config["horizon"])  # fmt: skip
    t = time.perf_counter()
    out = steps_to_solve(mdp, config=cfg, n_runs=config["n_runs"], budget=config["budget"],
                         eval_every=config["eval_every"], seed=seed * 1000 + config["variant"],
                         threshold=config["threshold"])  # fmt: skip
    return {
        "label": label,
        "n_actions": mdp.n_actions,
        "steps": [float(x) for x in out["steps"]],
        "final_success": [float(x) for x in out["final_success"]],
        "train_seconds": time.perf_counter() - t,
    }


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    plan = SCALE_PLAN[scale]
    ss = seeds_for(scale, seeds, DEFAULT_SEEDS)
    jobs: list[Job] = []
    for env in plan["measures"]:
        n_seeds, per_size = plan["few"].get(env, (len(ss), plan["sets_per_size"]))
        for s in ss[:n_seeds]:
            cfg = {"env": env, "epsilon": EPSILON, "rtol": 1e-3, "sets_per_size": per_size}
            jobs.append(Job(SLUG, "measures", f"{MOD}:run_measures", cfg, s))
    n_variants = 1 + 6 + 5 * plan["sets_per_size"]
    for env, (budget, every) in plan["ql"].items():
        for s in ss[: plan.get("ql_seeds", {}).get(env, len(ss))]:
            for v in range(n_variants):
                cfg = {"env": env, "variant": v, "sets_per_size": plan["sets_per_size"], "budget": budget,
                       "eval_every": every, "n_runs": plan["runs"], "threshold": THRESHOLD, **QL}  # fmt: skip
                jobs.append(Job(SLUG, "qlearning", f"{MOD}:run_qlearning", cfg, s))
    return jobs


# ------------------------------------------------------------------------------------------------ analysis


def best_ratio(values: Sequence[float]) -> float:
    """``min_aug C_aug / C_base`` with the base action space first (Figure 1's y axis); ``nan`` if the base
    value is missing."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2 or not np.isfinite(v[0]) or v[0] <= 0:
        return math.nan
    rest = v[1:][np.isfinite(v[1:])]
    return float(rest.min() / v[0]) if rest.size else math.nan


def log_steps(steps: Sequence[float]) -> float:
    """Mean log env steps of the learners of one action space; ``nan`` unless every learner solved it (the
    paper keeps only runs that converged within the budget)."""
    a = np.asarray(steps, dtype=np.float64)
    return float(np.mean(np.log(a))) if a.size and np.all(np.isfinite(a)) else math.nan


def correlation_decision(points: Sequence[tuple[int, float, float, float]]) -> tuple[Decision, dict]:
    """Claim 1 on pooled ``(seed, J_learn, J_explore, log steps)`` points of one environment.

    The weight lambda of the combined difficulty is fitted per seed to maximise the correlation, as in the
    paper; the test uses each seed's points with the lambda fitted on the *other* seeds (leave-one-seed-out,
    so the fit cannot manufacture the correlation), pooled: OLS slope of log steps on log combined difficulty,
    one-sided at 0.05 (supported if > 0, not_supported if shown < 0). Also returns the in-sample per-seed r.
    """
    from icml24.rl.skills_theory.difficulty import combined_difficulty, fit_combination_weight

    pts = [p for p in points if all(math.isfinite(x) for x in p[1:])]
    seeds = sorted({p[0] for p in pts})
    per_seed_r, per_seed_lam = [], []
    for s in seeds:
        sub = np.array([p[1:] for p in pts if p[0] == s])
        if len(sub) >= 3:
            lam, r = fit_combination_weight(sub[:, 0], sub[:, 1], sub[:, 2])
            per_seed_r.append(r)
            per_seed_lam.append(lam)
    xs, ys = [], []
    if len(seeds) >= 2:
        for s in seeds:
            test = np.array([p[1:] for p in pts if p[0] == s])
            train = np.array([p[1:] for p in pts if p[0] != s])
            if len(train) < 3 or len(test) == 0:
                continue
            lam, _ = fit_combination_weight(train[:, 0], train[:, 1], train[:, 2])
            xs += list(combined_difficulty(test[:, 0], test[:, 1], lam))
            ys += list(test[:, 2])
    dec = decide.trend(xs, ys, claim="increasing", method="ols",
                       effect_name="slope of log steps in log combined difficulty (leave-one-seed-out lambda)")  # fmt: skip
    r_oos = float(np.corrcoef(xs, ys)[0, 1]) if len(xs) >= 3 and np.ptp(xs) > 0 and np.ptp(ys) > 0 else math.nan
    return dec, {"per_seed_r": per_seed_r, "per_seed_lambda": per_seed_lam, "r_out_of_sample": r_oos,
                 "n_points": len(xs), "x": xs, "y": ys}  # fmt: skip


def power_of_correlation(n: int, r: float = ASSUMED_R, n_sims: int = 400, seed: int = 0) -> float:
    """Chance that the pooled slope test says supported with ``n`` bivariate-normal points of correlation ``r``."""
    if n < 3:
        return 0.0

    def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal(n)
        return x, r * x + math.sqrt(1 - r * r) * rng.standard_normal(n)

    return decide.power(lambda xy: decide.trend(xy[0], xy[1], claim="increasing"), simulate, n_sims, seed).supported


def gain_trend_decision(points: Sequence[tuple[str, float, float]], what: str, *, alpha: float = 0.05) -> Decision:
    """Claim 2 on ``(environment, I_p of the base environment, best ratio)`` points, one per environment and macro
    seed. I_p belongs to the environment, so the environment is the independent unit: the log best ratios are
    averaged per environment (:func:`icml24.common.decide.per_unit`) and the Spearman correlation of the
    per-environment means with I_p is tested by an exact permutation test over all ``k!`` pairings of the ``k``
    environments, one-sided at ``alpha``: supported if rho > 0 (the gain shrinks as I_p grows), not_supported if
    rho < 0 at the same level. With ``k`` environments the smallest possible p is ``1/k!`` (1/6 with 3, 1/24 with
    4), so fewer than 4 environments can never decide at 0.05 (the check is then inconclusive, and says so).
    """
    from itertools import permutations

    from scipy import stats

    pts = [(e, x, math.log(y)) for e, x, y in points if math.isfinite(x) and math.isfinite(y) and y > 0]
    name = f"Spearman rho of the per-environment mean log best {what} ratio with p-incompressibility"
    rule = (f"exact permutation test (all k! pairings of the k environments, the independent unit) of Spearman rho "
            f"at alpha {alpha:g}: supported if rho > 0, not_supported if rho < 0 at the same level; the smallest "
            f"possible p is 1/k!, so k < 4 environments cannot decide")  # fmt: skip
    envs = list(dict.fromkeys(e for e, _, _ in pts))
    for e in envs:
        if len({x for f, x, _ in pts if f == e}) != 1:
            raise ValueError(f"points of environment {e!r} must share one I_p (it is a property of the environment)")
    units, y = decide.per_unit([v for _, _, v in pts], [e for e, _, _ in pts])
    x = np.array([next(xv for f, xv, _ in pts if f == u) for u in units])
    k = len(units)
    test = f"exact permutation test of Spearman rho over {math.factorial(k) if k else 0} pairings"
    if k < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Decision("inconclusive", math.nan, name, (math.nan, math.nan), 1 - 2 * alpha, math.nan, math.nan, k,
                        alpha, rule, test)  # fmt: skip
    # Spearman rho = Pearson r of the (tie-averaged) ranks, for every pairing at once
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    perms = ry[np.array(list(permutations(range(k))))]
    cx = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    cy = perms - perms.mean(1, keepdims=True)
    null = (cy @ cx) / np.linalg.norm(cy, axis=1)
    rho = float(null[0])  # the identity pairing comes first
    tol = 1e-12
    p_sup = float(np.mean(null >= rho - tol))
    p_ref = float(np.mean(null <= rho + tol))
    verdict = "supported" if p_sup < alpha else "not_supported" if p_ref < alpha else "inconclusive"
    return Decision(verdict, rho, name, (math.nan, math.nan), 1 - 2 * alpha, p_sup, p_ref, k, alpha, rule, test)


def paper_gain_curve(incompress: np.ndarray) -> np.ndarray:
    """The effect assumed for power: best ratio 0.1 at I_p = 0 rising linearly to 1 (no gain) at I_p = 0.5 and
    staying there (the shape of the paper's Figure 1: CliffWalking gains most, the puzzles about nothing)."""
    return 0.1 + 0.9 * np.minimum(1.0, np.asarray(incompress, dtype=np.float64) / 0.5)


def power_of_gain_trend(
    points: Sequence[tuple[str, float]], sd: float, *, effect: bool = True, n_sims: int = 400
) -> float:
    """Power of :func:`gain_trend_decision` at the run's points (``points``: ``(environment, I_p)`` of each point,
    one per environment and macro seed) under :func:`paper_gain_curve` with log-normal noise ``sd`` over macro
    seeds, averaged per environment as the rule does (``effect=False``: a flat curve, giving the false-support
    rate)."""
    envs = [e for e, _ in points]
    xs = np.asarray([x for _, x in points], dtype=np.float64)
    if len(set(envs)) < 3 or np.ptp(xs) == 0:
        return 0.0
    mu = np.log(paper_gain_curve(xs)) if effect else np.zeros(xs.size)

    def simulate(rng: np.random.Generator) -> list[tuple[str, float, float]]:
        return list(zip(envs, xs, np.exp(mu + sd * rng.standard_normal(xs.size))))

    return decide.power(lambda pts: gain_trend_decision(pts, "J"), simulate, n_sims, 0).supported


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    tables: list[Table] = []
    checks: list[ClaimCheck] = []
    figures: list[Figure] = []
    measures = group_results(results, "measures", by=("env",))
    meas: dict[str, dict[int, dict]] = {env: {r.job.seed: r.metrics for r in rs} for (env,), rs in measures.items()}
    order = [e for e in ENV_LABELS if e in meas]

    # --- environments
    rows = []
    for env in order:
        m = next(iter(meas[env].values()))
        rows.append([ENV_LABELS[env], m["n_reachable"], int(m["diameter"]), m["n_actions"][0],
                     f"{m['mean_length'][0]:.3f}", f"{m['j_learn'][0]:.2f}", f"{m['j_explore'][0]:.3f}",
                     f"{m['incompressibility'][0]:.3f}", f"{m['build_seconds']:.2f}",
                     f"{m['bfs_seconds'] / len(m['label']):.3f}", f"{m['explore_seconds'] / len(m['label']):.2f}"])  # fmt: skip
    if rows:
        tables.append(Table(
            "Base environments: exact measures (start distribution p as in the official code)",
            ["environment", "states", "BFS diameter", "|A|", "E_p[d_A]", "J_learn", f"J_explore (eps={EPSILON})",
             "I_p", "table build (s)", "BFS per action space (s)", "q_eps per action space (s)"], rows,
            "Deterministic (no spread). Times: wall seconds of one run, first macro seed."))  # fmt: skip

    # --- best gains
    ql = group_results(results, "qlearning", by=("env",))
    ql_by: dict[str, dict[int, dict[int, dict]]] = {}
    for (env,), rs in ql.items():
        for r in rs:
            ql_by.setdefault(env, {}).setdefault(r.job.seed, {})[int(r.job.config["variant"])] = r.metrics
    incompress = {env: next(iter(meas[env].values()))["incompressibility"][0] for env in order}
    gain_pts: dict[str, list[tuple[float, float]]] = {"J_learn": [], "J_explore": [], "Q-learning steps": []}
    gain_env: dict[str, list[str]] = {"J_learn": [], "J_explore": []}  # the environment of each point
    rows = []
    for env in order:
        jl = [best_ratio(m["j_learn"]) for m in meas[env].values()]
        je = [best_ratio(m["j_explore"]) for m in meas[env].values()]
        gain_pts["J_learn"] += [(incompress[env], x) for x in jl]
        gain_pts["J_explore"] += [(incompress[env], x) for x in je]
        gain_env["J_learn"] += [env] * len(jl)
        gain_env["J_explore"] += [env] * len(je)
        steps_ratio = []
        for _s, vs in ql_by.get(env, {}).items():
            ls = [vs[v]["steps"] if v in vs else [math.nan] for v in range(max(vs) + 1)]
            steps_ratio.append(best_ratio([math.exp(log_steps(x)) if math.isfinite(log_steps(x)) else math.nan
                                           for x in ls]))  # fmt: skip
        gain_pts["Q-learning steps"] += [(incompress[env], x) for x in steps_ratio]
        mono = all(m["distances_never_increase"] for m in meas[env].values())
        rows.append([ENV_LABELS[env], f"{incompress[env]:.3f}", fmt_mean_std(jl), fmt_mean_std(je),
                     fmt_mean_std(steps_ratio) if steps_ratio else "not run", "yes" if mono else "NO"])  # fmt: skip
    if rows:
        tables.append(Table(
            "Best improvement from macroactions: min over the 31 augmented action spaces of C_aug / C_base",
            ["environment", "I_p", "J_learn ratio", "J_explore ratio", "Q-learning steps ratio",
             "d_A never increased"], rows,
            "mean ± std over macro seeds (each seed draws its own 25 random macroaction sets; the 6 hand-picked "
            "sets are the same). Below 1 = the best augmentation helps."))  # fmt: skip

    for what, ident, decisive in (("J_learn", "jlearn", True), ("J_explore", "jexplore", True)):
        pts = [(e, x, y) for e, (x, y) in zip(gain_env[what], gain_pts[what], strict=True)]
        if len({p[0] for p in pts}) < 2:
            continue
        dec = gain_trend_decision(pts, what)
        # power at the shape of the paper's Figure 1 with a seed-to-seed sd of 0.3 in log ratio
        pw = power_of_gain_trend([(e, x) for e, x, y in pts if math.isfinite(y)], sd=0.3)
        k = len({e for e, _, y in pts if math.isfinite(y)})
        floor = 1 / math.factorial(k) if k else 1.0
        limit = ("" if floor < 0.05 else f"; with {k} environments (the independent unit) the smallest possible p "
                 f"is 1/{k}! = {floor:.3f} > 0.05, so this scale cannot support or refute claim 2")  # fmt: skip
        per_env = " | ".join(
            f"{ENV_LABELS[e]}: I_p {incompress[e]:.3f}, mean log ratio "
            f"{np.mean([math.log(y) for f, _, y in pts if f == e and math.isfinite(y) and y > 0]):.3f}"
            for e in order if any(f == e for f, _, _ in pts))  # fmt: skip
        checks.append(dec.to_check(
            id=f"gain-vs-incompressibility-{ident}",
            claim=f"The best {what} improvement from macroactions shrinks as p-incompressibility grows "
                  "(largest on CliffWalking, smallest on the most incompressible puzzle)",
            evidence=per_env + limit, decisive=decisive, power=pw))  # fmt: skip
    # the abstract's "skills benefit exploration more than learning": on each environment and macro seed, the best
    # J_explore ratio below the best J_learn ratio (paired over points; supporting evidence, not deciding: the
    # two ratios are of differently scaled quantities, J_explore being a log-probability already)
    pairs = [(math.log(e[1]), math.log(l[1])) for e, l in zip(gain_pts["J_explore"], gain_pts["J_learn"])
             if math.isfinite(e[1]) and math.isfinite(l[1]) and e[1] > 0 and l[1] > 0]  # fmt: skip
    if len(pairs) >= 2:
        dec = decide.compare([p[0] for p in pairs], [p[1] for p in pairs], paired=True, alternative="less",
                             effect_name="mean log best ratio, J_explore - J_learn")  # fmt: skip
        checks.append(dec.to_check(
            id="exploration-gains-more-than-learning",
            claim="Macroactions reduce the exploration difficulty more than the learning difficulty",
            evidence=f"best ratios paired over {len(pairs)} environment x macro seed points", decisive=False))  # fmt: skip
    qpts = gain_pts["Q-learning steps"]
    envs_q = [e for e in order if e in ql_by]
    if len(envs_q) >= 2:
        lo, hi = envs_q[0], envs_q[-1]
        a = [math.log(y) for x, y in qpts if x == incompress[lo] and math.isfinite(y)]
        b = [math.log(y) for x, y in qpts if x == incompress[hi] and math.isfinite(y)]
        dec = decide.compare(a, b, paired=False, alternative="less",
                             effect_name=f"mean log best steps ratio, {ENV_LABELS[lo]} - {ENV_LABELS[hi]}")  # fmt: skip
        # power at the paper's Figure 1 shape (best ratios paper_gain_curve(I_p)) with sd 0.3 in log ratio; the
        # check decides only if that power reaches 0.8 at the run's seed count
        effect = float(np.log(paper_gain_curve(incompress[lo]) / paper_gain_curve(incompress[hi])))
        pw = decide.power_of_compare(min(effect, -1e-3), 0.3, max(2, min(len(a), len(b))), paired=False,
                                     n_sims=1000, alternative="less").supported  # fmt: skip
        checks.append(dec.to_check(
            id="gain-vs-incompressibility-qlearning",
            claim=f"Macroactions cut Q-learning's steps to solve more on {ENV_LABELS[lo]} "
                  f"(I_p {incompress[lo]:.3f}) than on {ENV_LABELS[hi]} (I_p {incompress[hi]:.3f})",
            evidence=f"best steps ratio per macro seed ({len(a)} and {len(b)} seeds); decisive only with power "
                     f">= 0.8 at the assumed effect {effect:.2f} in log ratio",
            decisive=pw >= 0.8, power=pw))  # fmt: skip

    # --- correlations
    rows = []
    corr_fig_data = []
    for env in envs_q:
        pts = []
        for s, vs in ql_by[env].items():
            m = meas.get(env, {}).get(s)
            if m is None:
                continue
            for v, mt in vs.items():
                pts.append((s, m["j_learn"][v], m["j_explore"][v], log_steps(mt["steps"])))
        n_all = len(pts)
        dec, info = correlation_decision(pts)
        n_ok = sum(math.isfinite(p[3]) for p in pts)
        checks.append(dec.to_check(
            id=f"qlearning-correlation-{env}",
            claim=f"Log Q-learning steps to solve grow with log combined difficulty across action spaces "
                  f"({ENV_LABELS[env]})",
            evidence=f"{n_ok}/{n_all} action spaces x seeds solved by every learner within the budget; "
                     f"out-of-sample r = {info['r_out_of_sample']:.3f}; in-sample per-seed r (paper's fit) "
                     f"{fmt_mean_std(info['per_seed_r'])}",
            power=power_of_correlation(info["n_points"])))  # fmt: skip
        rows.append([ENV_LABELS[env], f"{n_ok}/{n_all}", fmt_mean_std(info["per_seed_r"]),
                     fmt_mean_std(info["per_seed_lambda"], 3), f"{info['r_out_of_sample']:.3f}",
                     _single_corr(pts, 1), _single_corr(pts, 2)])  # fmt: skip
        corr_fig_data.append((env, info["x"], info["y"]))
    if rows:
        tables.append(Table(
            "Correlation of log Q-learning steps to solve with log combined difficulty across action spaces",
            ["environment", "solved", "r per seed (lambda fitted, as the paper)", "lambda per seed",
             "r pooled, leave-one-seed-out lambda", "r with log J_learn", "r with J_explore"], rows,
            "mean ± std over macro seeds; 'solved' = action spaces x seeds where every learner reached a 95% "
            "greedy success rate within the budget (only these enter the correlations)."))  # fmt: skip
    if corr_fig_data:
        fig, axes = new_figure(1, len(corr_fig_data), width=4.2, height=3.4)
        axes = np.atleast_1d(axes).ravel()
        for ax, (env, x, y) in zip(axes, corr_fig_data):
            ax.scatter(x, np.asarray(y) / math.log(10), s=14)
            ax.set_xlabel("log combined difficulty (nats)")
            ax.set_ylabel("log10 env steps to solve")
            ax.set_title(ENV_LABELS[env])
        figures.append(Figure("Q-learning steps vs combined difficulty", figure_png(fig),
                              "One point per action space and macro seed (mean of the learners' log steps; "
                              "no error bars: each point is one action space)."))  # fmt: skip
    if gain_pts["J_learn"]:
        fig, ax = new_figure(1, 1, width=5.0, height=3.6)
        ax = np.atleast_1d(ax).ravel()[0]
        for what, marker in (("J_learn", "o"), ("J_explore", "s"), ("Q-learning steps", "^")):
            by_x: dict[float, list[float]] = {}
            for x, y in gain_pts[what]:
                if math.isfinite(y):
                    by_x.setdefault(x, []).append(y)
            if not by_x:
                continue
            xs = sorted(by_x)
            mu = [float(np.mean(by_x[x])) for x in xs]
            sd = [float(np.std(by_x[x], ddof=1)) if len(by_x[x]) > 1 else 0.0 for x in xs]
            ax.errorbar(xs, mu, yerr=sd, marker=marker, capsize=3, label=what)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("p-incompressibility I_p of the base environment")
        ax.set_ylabel("min C_aug / C_base")
        ax.legend()
        figures.append(Figure("Best improvement vs incompressibility (Figure 1 of the paper)", figure_png(fig),
                              "Error bars: std over macro seeds."))  # fmt: skip

    decisive = [c for c in checks if c.decisive]
    summary = f"{scale}: " + " | ".join(f"{c.claim}: {c.verdict}" for c in decisive)
    return decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


def _single_corr(pts: Sequence[tuple[int, float, float, float]], which: int) -> str:
    """Per-seed Pearson r of log steps with log J_learn (``which=1``) or J_explore (``which=2``), mean ± std."""
    rs = []
    for s in sorted({p[0] for p in pts}):
        sub = np.array([p[1:] for p in pts if p[0] == s and math.isfinite(p[3])])
        if len(sub) >= 3:
            x = np.log(sub[:, 0]) if which == 1 else sub[:, 1]
            if np.ptp(x) > 0 and np.ptp(sub[:, 2]) > 0:
                rs.append(float(np.corrcoef(x, sub[:, 2])[0, 1]))
    return fmt_mean_std(rs)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Across macroaction augmentations of a deterministic sparse-reward environment, RL sample complexity tracks "
        "the combined learning/exploration difficulty, and the best gain from macroactions shrinks as the "
        "environment's p-incompressibility grows (largest on CliffWalking, smallest on the 8-puzzle)."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "RL algorithm: tabular Q-learning only (alpha 0.1, gamma 0.99, epsilon-greedy 0.1, zero init with random "
        "tie-breaking, 100-step episodes in augmented steps, no replay buffer or adaptive epsilon); the paper also "
        "runs value iteration in the RL setting, REINFORCE and DQN with replay and adaptive epsilon.",
        "Q-learning on CliffWalking (quick and full) and CompILE2 (full) only; the 8-puzzle and the 2x2 cube enter "
        "the gain claim through the exact J_learn and J_explore ratios (the paper's Figure 1 also plots these).",
        "The paper's 6 LEMMA-learned macroaction sets are replaced by 6 hand-picked sets per environment; the 25 "
        "random sets follow the official generator (geometric lengths, the official action weights).",
        "CompILE2 is our own CompILE-like grid (10x10, 6 objects, visit 2 colours in order; state = cell, objects "
        "left, progress), not the official grid's seed-1 layout.",
        "p-incompressibility: the official formula maximised over eps on a grid plus a bounded search; I_p = 0 for "
        "a point-mass start (as the official code for CliffWalking).",
        "Steps to solve: the first evaluation (every 100 augmented steps on CliffWalking, 1000 on CompILE2) at which the greedy policy solves "
        ">= 95% of the start distribution exactly; runs that never get there are dropped from the correlations "
        "(the paper also drops out-of-budget runs) and counted in the report.",
        "Seeds: 2 (quick) or 3 (full) macro seeds with 2 Q-learners each per action space (CompILE2 Q-learning: 2 "
        "macro seeds); the 8-puzzle's measures use 1 macro seed at quick scale (2 min budget) and the 2x2 cube's 1 "
        "macro seed with 12 action spaces (base, 6 hand-picked, 1 random set of each size 1-5) at full scale, because its q_eps "
        "iteration takes ~10 s per action space; the paper uses 5 seeds.",
    ),
    scales=("smoke", "quick", "full"),
    required_metrics={"measures": ("j_learn", "j_explore", "incompressibility", "distances_never_increase"),
                      "qlearning": ("steps",)},  # fmt: skip
)
