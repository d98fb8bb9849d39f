"""Miniature reproduction of SAPG's scaling claim (arXiv:2407.20230, Fig. 1 and section 5) on batched CPU envs.

Claim: with many parallel environments PPO saturates, while SAPG, splitting them into blocks of a fixed size
B that share one network and aggregating follower data into the leader through importance sampling, uses the
extra environments. Miniature: the multi-goal deceptive point mass (a decoy next to the start; in each episode
one of four far corner goals pays +20, shown to the agent as a one-hot). Metric: the leader's goal-reaching
rate on fresh envs (actions sampled from its policy), averaged over the four tasks, one value per seed (the
paper reports successes; the single-goal version's two-valued return, about 20 or about 9 per seed, could not
bound PPO's slope in N at 20 seeds). The rule (``analyze``): first show that PPO saturates on the N grid (the
slope of its rate in log2 N is shown below ``SATURATION_MARGIN`` per doubling); only then compare SAPG with
PPO at the largest N (one-sided Welch test; ``not_supported`` needs SAPG shown worse, or shown equal within
``EQUIVALENCE_MARGIN`` by a TOST). Without shown saturation the verdict is ``inconclusive`` whatever the
comparison says. Controls (``PLANS[scale]["controls"]``): PPO with an entropy bonus, PPO with one more epoch (as
many Adam steps per iteration as SAPG), SAPG without off-policy data; negative control: the dense-reward pendulum.
The full scale's N grid (512, 2048, 8192) was chosen on a PPO-only pilot of its own PPO jobs (see README).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from icml24.common.decide import analysis as decide_analysis
from icml24.common.decide import compare, equivalence, power, trend
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
    metric_values,
    new_figure,
    seeds_for,
)

SLUG = "sapg"
FN_POINT_MASS = "icml24.rl.sapg.reproduce:run_point_mass"
FN_PENDULUM = "icml24.rl.sapg.reproduce:run_pendulum"
DEFAULT_SEEDS = {"smoke": 1, "quick": 4, "full": 8, "gpu": 32}
METRIC = "success_rate"
"""The verdict's metric: the leader's goal-reaching rate on fresh envs, the mean over the tasks of the share of
evaluation episodes that reach their goal (the paper reports successes per episode)."""
DISCOVERY_THRESHOLD = 0.5
"""A run "discovered" a task's goal when the leader reaches it in >= 50% of that task's evaluation episodes
(reported beside the rate). Evaluation samples from the leader's policy, as rl_games reports the leader envs'
training episodes."""
SATURATION_MARGIN = 0.05
"""PPO saturates when the slope of its goal-reaching rate in log2 N is shown (one-sided, alpha 0.05) below this
many rate units per doubling of N (0.05: a fifth of one of the four goals per doubling)."""
EQUIVALENCE_MARGIN = 0.1
"""SAPG "no better than PPO" (not_supported) may also come from a TOST showing |SAPG - PPO| < 0.1 in the
goal-reaching rate (0.4 of one of the four goals)."""
ALPHA = 0.05
POCOCK_SECOND_LOOK_ALPHA = 0.0294
"""The registered two-look rule of the full grid (README, *The 18-seed extension*, commit 8c1feb8): a second look
at more than ``DEFAULT_SEEDS["full"]`` seeds tests both the premise and the comparison at Pocock's one-sided
0.0294 per look (overall 0.05 over two looks), not at 0.05."""

# Per scale: SAPG's fixed block size B, PPO's N grid, SAPG's N grid (M = N / B), iterations, evaluation envs,
# the controls run at the largest N (with at most ``control_seeds`` seeds), and the pendulum (N, iters, seeds).
PLANS: dict[str, dict[str, Any]] = {
    "smoke": {"block": 16, "ppo_ns": [32, 64], "sapg_ns": [64], "iterations": 1, "eval_envs": 16,
              "controls": [], "control_seeds": 0, "pendulum": (32, 1, 1)},
    "quick": {"block": 128, "ppo_ns": [128, 512], "sapg_ns": [512], "iterations": 40, "eval_envs": 128,
              "controls": [], "control_seeds": 0, "pendulum": None},
    "full": {"block": 2048, "ppo_ns": [512, 2048, 8192], "sapg_ns": [8192], "iterations": 40,
             "eval_envs": 256, "controls": ["ppo_more_epochs"], "control_seeds": 3, "pendulum": None},
    "gpu": {"block": 4096, "ppo_ns": [1024, 4096, 16384], "sapg_ns": [8192, 16384], "iterations": 60,
            "eval_envs": 1024, "controls": ["ppo_entropy", "ppo_more_epochs", "sapg_no_offpolicy"],
            "control_seeds": 16, "pendulum": (4096, 100, 8)},
}  # fmt: skip

TASK: dict[str, Any] = {
    "env": "multi_goal",
    "goals": [[-3.3, 3.3], [3.3, 3.3], [3.3, -3.3], [-3.3, -3.3]],
    "goal_radius": 0.5,
    "walls": [],
}
"""The task of every scaling run: ``BatchedMultiGoalPointMass`` with the four corner goals of the single-goal
arena (open, no walls). ``{"env": "single_goal", "goals": [[x, y]], ...}`` selects the single-goal task of the
previous revision."""
ENTROPY_SCALE = 0.05
"""SAPG's per-block entropy scale c_j = 0.05 linspace(0.5, 0) (leader 0); see README for the pilot."""
OFF_POLICY_RATIO = 1
"""rho, the official default: the leader takes one follower block per iteration."""
PPO_ENTROPY = 0.01
"""Entropy coefficient of the entropy-tuned PPO control (the largest follower coefficient of SAPG, x0.4)."""
PPO_MORE_EPOCHS = 6
"""Epochs of the step-matched PPO control: 6 x 4 = 24 Adam steps per iteration, against SAPG's 5 x 5 = 25 at
M = 4 (its union batch of 1.25 N T is cut into minibatches of PPO's size N T / 4)."""


def _device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _method_config(method: str, n: int, block: int) -> tuple[str, dict[str, Any]]:
    """(``ppo`` | ``sapg``, SAPG keyword config) of a method name."""
    if method in ("ppo", "ppo_entropy", "ppo_more_epochs"):
        return "ppo", {}
    agg = {"sapg": "leader_follower", "sapg_no_offpolicy": "none", "sapg_symmetric": "symmetric"}[method]
    m = max(1, n // block)
    return "sapg", {"num_blocks": m, "aggregation": agg, "entropy_scale": ENTROPY_SCALE,
                    "off_policy_ratio": OFF_POLICY_RATIO}  # fmt: skip


Evaluator = Callable[[Any, str, int], dict[str, Any]]


def _train(config: dict[str, Any], seed: int, make_env: Callable[[int, str], Any], evaluate: Evaluator) -> dict[str, Any]:
    from icml24.rl.ppo import PPO, PPOConfig
    from icml24.rl.sapg import SAPG, SAPGConfig

    device = _device(config.get("device", "cpu"))
    n, block, method = int(config["num_envs"]), int(config["block_size"]), str(config["method"])
    ppo_cfg = PPOConfig(
        reward_scale=float(config.get("reward_scale", 1.0)),
        entropy_coef=PPO_ENTROPY if method == "ppo_entropy" else 0.0,
        epochs=PPO_MORE_EPOCHS if method == "ppo_more_epochs" else PPOConfig.epochs,
        lr_max=float(config.get("lr_max", PPOConfig.lr_max)),
    )
    kind, kw = _method_config(method, n, block)
    env = make_env(n, device)
    if kind == "ppo":
        agent = PPO(env, config=ppo_cfg, seed=seed)
    else:
        if "off_policy_ratio" in config:
            kw["off_policy_ratio"] = int(config["off_policy_ratio"])
        if "kl_on_policy_only" in config:
            kw["kl_on_policy_only"] = bool(config["kl_on_policy_only"])
        agent = SAPG(env, config=SAPGConfig(ppo=ppo_cfg, **kw), seed=seed)
    iters = int(config["iterations"])
    curve_return, curve_success, curve_ev = [], [], []
    t0 = time.perf_counter()
    for _ in range(iters):
        stats = agent.iterate()
        curve_return.append(stats["episode_return"])
        curve_success.append(stats["success_rate"])
        curve_ev.append(stats["explained_variance"])
    train_time = time.perf_counter() - t0
    ev = evaluate(agent, device, 10_000 + seed)
    blocks = agent.block_stats() if kind == "sapg" else None
    return {
        **ev,
        "num_blocks": agent.num_blocks,
        "off_policy_ratio": kw.get("off_policy_ratio", 0),
        "train_return_curve": curve_return[:: max(1, iters // 100)],
        "train_success_curve": curve_success[:: max(1, iters // 100)],
        "any_block_success": _nanmax(blocks["success_rate"] if blocks else curve_success[-1:]),
        "final_learning_rate": agent.lr_schedule.lr,
        "optimizer_steps": agent.optimizer_steps,
        "explained_variance": float(np.nanmean(curve_ev[-max(1, iters // 4):])),
        "env_steps": agent.env_steps,
        "train_seconds": train_time,
        "device": device,
    }


def _nanmax(values: Sequence[float]) -> float:
    arr = np.asarray(values, dtype=float)
    return float(np.nanmax(arr)) if np.isfinite(arr).any() else 0.0


def run_point_mass(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train one method on the (multi-goal) deceptive point mass; the leader is evaluated task by task on fresh
    envs with sampled actions (``eval_envs`` episodes per task; see README)."""
    from icml24.rl.envs import BatchedDeceptivePointMass, BatchedMultiGoalPointMass, PointMassLayout

    task = config.get("task", TASK)
    goals = [tuple(float(x) for x in g) for g in task["goals"]]
    walls = tuple(tuple(float(x) for x in w) for w in task["walls"])
    radius = float(task["goal_radius"])
    eval_envs = int(config["eval_envs"])
    if task["env"] == "single_goal":
        layout = PointMassLayout(goal=goals[0], goal_radius=radius, walls=walls)

        def make(n: int, device: str, fixed: int | None = None) -> Any:
            return BatchedDeceptivePointMass(num_envs=n, layout=layout, device=device)
    elif task["env"] == "multi_goal":
        layout = PointMassLayout(goal_radius=radius, walls=walls)

        def make(n: int, device: str, fixed: int | None = None) -> Any:
            return BatchedMultiGoalPointMass(num_envs=n, goals=goals, layout=layout, fixed_task=fixed, device=device)
    else:
        raise ValueError(f"task['env'] must be 'single_goal' or 'multi_goal', got {task['env']!r}")

    def evaluate(agent: Any, device: str, eval_seed: int) -> dict[str, Any]:
        per_task = [agent.evaluate(make(eval_envs, device, k if len(goals) > 1 else None), seed=eval_seed + 97 * k,
                                   deterministic=False) for k in range(len(goals))]  # fmt: skip
        rates = [float(e["success_rate"]) for e in per_task]
        found = [float(r >= DISCOVERY_THRESHOLD) for r in rates]
        return {"final_return": float(np.mean([e["return"] for e in per_task])), "success_rate": float(np.mean(rates)),
                "task_success_rates": rates, "goals_discovered": float(sum(found)),
                "discovered": float(np.mean(found))}  # fmt: skip

    return _train(config, seed, make, evaluate)


def run_pendulum(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train one method on the batched pendulum (dense reward, negative control)."""
    from icml24.rl.envs import BatchedPendulum

    def make(n: int, device: str) -> BatchedPendulum:
        return BatchedPendulum(num_envs=n, device=device)

    def evaluate(agent: Any, device: str, eval_seed: int) -> dict[str, Any]:
        ev = agent.evaluate(make(int(config["eval_envs"]), device), seed=eval_seed, deterministic=False)
        return {"final_return": ev["return"], "success_rate": ev["success_rate"]}

    return _train({**config, "reward_scale": 0.1}, seed, make, evaluate)


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    plan = PLANS[scale]
    device = "auto" if scale == "gpu" else "cpu"
    jobs = []
    base = {"block_size": plan["block"], "iterations": plan["iterations"], "eval_envs": plan["eval_envs"],
            "device": device, "task": TASK}  # fmt: skip
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    n_max = max(plan["ppo_ns"] + plan["sapg_ns"])
    for seed in seed_list:
        for method, ns in (("ppo", plan["ppo_ns"]), ("sapg", plan["sapg_ns"])):
            for n in ns:
                jobs.append(Job(SLUG, "scaling", FN_POINT_MASS, {**base, "num_envs": n, "method": method}, seed))
        if seed < plan["control_seeds"]:
            for method in plan["controls"]:
                cfg = {**base, "num_envs": n_max, "method": method}
                jobs.append(Job(SLUG, "controls", FN_POINT_MASS, cfg, seed))
    if plan["pendulum"] is not None:
        n, iters, n_seeds = plan["pendulum"]
        for seed in seed_list[:n_seeds]:
            for method in ("ppo", "sapg"):
                cfg = {"block_size": max(1, n // 4), "iterations": iters, "eval_envs": plan["eval_envs"],
                       "device": device, "num_envs": n, "method": method}  # fmt: skip
                jobs.append(Job(SLUG, "pendulum", FN_PENDULUM, cfg, seed))
    return jobs


# ---------------------------------------------------------------------------------------------------------
# analysis
# ---------------------------------------------------------------------------------------------------------


def _values(results: Sequence[JobResult], key: str = METRIC) -> list[float]:
    return [float(v) for v in metric_values(results, key)]


def look_alpha(scale: str, seeds: int) -> float:
    """The level the registered rule uses: ``ALPHA`` at the first look (the scale's default seeds), the Pocock
    bound at the registered second look of the full grid (more seeds than the default)."""
    return POCOCK_SECOND_LOOK_ALPHA if scale == "full" and seeds > DEFAULT_SEEDS["full"] else ALPHA


def saturation_check(
    ns: Sequence[float], rates: Sequence[float], *, power: float | None = None, alpha: float = ALPHA
) -> ClaimCheck:
    """Premise: PPO saturates. The OLS slope of PPO's goal-reaching rate in log2 N is shown below
    ``SATURATION_MARGIN`` per doubling (one-sided t test on the slope, alpha 0.05) -> supported; shown above it
    -> not_supported (PPO still gains from more envs on this grid); otherwise inconclusive."""
    x = [math.log2(n) for n in ns]
    d = trend(x, rates, claim="increasing", margin=SATURATION_MARGIN, alpha=alpha,
              effect_name="PPO goal-reaching rate gained per doubling of N (OLS slope in log2 N)")  # fmt: skip
    verdict = {"supported": "not_supported", "not_supported": "supported"}.get(d.verdict, "inconclusive")
    # The trend test's claim is "still gaining" (slope > margin); saturation is its refuting side, so the check
    # carries the refuting p as its own p-value and says which is which.
    check = d.to_check(
        id="ppo_saturates", decisive=False, power=power,
        evidence=f"saturation (slope < {SATURATION_MARGIN:g}): one-sided p {_p_words(d.p_refute)}; the trend "
                 f"test below is stated for 'still gaining', so its refuting p is saturation's",
        claim=f"PPO saturates: more parallel envs stop improving its goal-reaching rate (slope < "
              f"{SATURATION_MARGIN:g} per doubling of N over N = {', '.join(str(int(n)) for n in sorted(set(ns)))})",
    )  # fmt: skip
    rule = (f"one-sided t test on the OLS slope of the goal-reaching rate in log2 N at alpha {alpha:g}: supported "
            f"(saturated) if the slope is shown < {SATURATION_MARGIN:g} per doubling; not_supported if shown > "
            f"{SATURATION_MARGIN:g}; otherwise inconclusive")  # fmt: skip
    p_sat = d.p_refute if math.isfinite(d.p_refute) else None
    return replace(check, verdict=verdict, rule=rule, p_value=p_sat)


def _p_words(p: float) -> str:
    return "n/a" if not math.isfinite(p) else ("< 0.001" if p < 0.001 else f"= {p:.3f}")


def sapg_vs_ppo_check(
    sapg: Sequence[float], ppo: Sequence[float], n_max: int, premise: ClaimCheck, *, power: float | None = None,
    alpha: float = ALPHA,
) -> ClaimCheck:
    """The decisive check: SAPG's leader beats saturated PPO at the largest N (Welch, one-sided, alpha 0.05);
    not_supported if SAPG is shown worse or shown within +-``EQUIVALENCE_MARGIN`` (TOST); inconclusive unless
    the premise (PPO saturates) is supported."""
    d = compare(sapg, ppo, paired=False, alternative="greater", equivalence_margin=EQUIVALENCE_MARGIN, alpha=alpha,
                effect_name="goal-reaching rate difference SAPG - PPO")  # fmt: skip
    gated = d.verdict if premise.verdict == "supported" else "inconclusive"
    evidence = (f"at N = {n_max}: SAPG {fmt_mean_std(list(sapg))} vs PPO {fmt_mean_std(list(ppo))}"
                + ("" if premise.verdict == "supported"
                   else f"; gated: PPO's saturation is {premise.verdict.replace('_', ' ')}, so the comparison "
                        f"alone would have said {d.verdict.replace('_', ' ')}"))  # fmt: skip
    check = d.to_check(id="sapg_beats_saturated_ppo", evidence=evidence, power=power,
                       claim=f"SAPG's leader beats a saturated PPO at the largest N = {n_max}")  # fmt: skip
    rule = (f"only if PPO's saturation is supported: one-sided Welch t test at alpha {alpha:g}, supported if "
            f"SAPG > PPO; not_supported if SAPG < PPO is shown or a TOST shows |SAPG - PPO| < "
            f"{EQUIVALENCE_MARGIN:g}; otherwise (or without shown saturation) inconclusive")  # fmt: skip
    return replace(check, verdict=gated, rule=rule)


def simulate_rates(rng: np.random.Generator, p_goal: float, n: int, num_goals: int = 4) -> np.ndarray:
    """A seed's goal-reaching rate under the PPO pilot's shape: each of ``num_goals`` goals is discovered
    independently with probability ``p_goal``; a discovered goal is reached in U(0.6, 1.0) of its evaluation
    episodes, an undiscovered one in U(0, 0.1) (the pilot's per-seed rates were 0-0.05 with no goal found and
    0.21-0.25 with one of four)."""
    found = rng.random((n, num_goals)) < p_goal
    per_goal = np.where(found, rng.uniform(0.6, 1.0, (n, num_goals)), rng.uniform(0.0, 0.1, (n, num_goals)))
    return per_goal.mean(axis=1)


def rule_power(
    n_seeds: int, ppo_ns: Sequence[int], *, p_ppo: float, p_sapg: float, n_sims: int = 400, seed: int = 0,
    alpha: float = ALPHA,
) -> dict[str, float]:
    """Chance of each verdict of the decisive check when PPO is truly flat (each goal discovered with
    probability ``p_ppo`` at every N of ``ppo_ns``) and SAPG discovers each goal with ``p_sapg`` at the largest
    N, ``n_seeds`` seeds per (method, N); ``premise`` is the chance that saturation is shown."""
    ns = [int(n) for n in ppo_ns for _ in range(n_seeds)]
    premise_hits = 0

    def one(rng: np.random.Generator) -> str:
        nonlocal premise_hits
        ppo = simulate_rates(rng, p_ppo, len(ns))
        sapg = simulate_rates(rng, p_sapg, n_seeds)
        prem = saturation_check(ns, ppo, alpha=alpha)
        premise_hits += prem.verdict == "supported"
        top = ppo[[i for i, n in enumerate(ns) if n == max(ns)]]
        return sapg_vs_ppo_check(sapg, top, max(ns), prem, alpha=alpha).verdict

    pw = power(one, lambda rng: rng, n_sims=n_sims, seed=seed)
    return {"supported": pw.supported, "not_supported": pw.not_supported, "inconclusive": pw.inconclusive,
            "premise": premise_hits / n_sims}  # fmt: skip


POWER_EFFECTS = {"paper-sized": (0.15, 0.6), "modest": (0.15, 0.3), "none": (0.15, 0.15)}
"""(PPO's, SAPG's) chance of discovering each goal in the power simulation: PPO at the pilot's rate (about one
goal in seven); paper-sized: SAPG finds most goals (the paper's PPO ~1-3 vs SAPG ~33-39 successes); modest:
SAPG finds twice as many."""


@functools.lru_cache(maxsize=32)
def _power_at(n_seeds: int, ppo_ns: tuple[int, ...], alpha: float = ALPHA) -> dict[str, float]:
    """Power of the decisive check (chance of ``supported``) for each effect of ``POWER_EFFECTS``, at the
    level the rule uses (``look_alpha``)."""
    return {name: rule_power(n_seeds, ppo_ns, p_ppo=p, p_sapg=q, n_sims=300, alpha=alpha)["supported"]
            for name, (p, q) in POWER_EFFECTS.items()}  # fmt: skip


NAMES = {"ppo": "PPO", "sapg": "SAPG", "ppo_entropy": "PPO + entropy 0.01",
         "ppo_more_epochs": f"PPO, {PPO_MORE_EPOCHS} epochs (SAPG's Adam steps)",
         "sapg_no_offpolicy": "SAPG without off-policy data (split only)",
         "sapg_symmetric": "SAPG, symmetric aggregation"}  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    plan = PLANS.get(scale, PLANS["quick"])
    scaling = group_results(results, "scaling", by=("method", "num_envs"))
    tables, checks, figures = [], [], []
    names = NAMES
    rows = []
    for (method, n), rs in sorted(scaling.items(), key=lambda kv: (str(kv[0][0]), int(kv[0][1]))):
        iters = max(1, int(rs[0].job.config.get("iterations", 1)))
        rows.append([
            names.get(str(method), str(method)), n, rs[0].metrics.get("num_blocks", "?"), len(rs),
            fmt_mean_std(_values(rs)), fmt_mean_std(_values(rs, "goals_discovered")),
            fmt_mean_std(_values(rs, "final_return")),
            fmt_mean_std([v / iters for v in _values(rs, "optimizer_steps")]),
            fmt_mean_std(_values(rs, "explained_variance")), fmt_mean_std(_values(rs, "train_seconds")),
        ])  # fmt: skip
    tables.append(Table(
        "Multi-goal deceptive point mass: the leader's goal-reaching rate vs N (SAPG: fixed block size, M = N / B)",
        ["method", "N", "M", "seeds", "goal-reaching rate", f"goals discovered (of {len(TASK['goals'])})", "return",
         "Adam steps / iteration", "explained variance", "train s"],
        rows, note=f"mean ± std over seeds; block size B = {plan['block']}; {plan['iterations']} iterations of "
                   "T = 16 steps; evaluation on fresh envs, each of the four tasks separately, actions sampled "
                   "from the leader; goal-reaching rate: mean over the tasks of the share of evaluation episodes "
                   f"that reach their goal; a goal counts as discovered when reached in >= {DISCOVERY_THRESHOLD:g} "
                   "of its episodes; return: a reached goal is worth 20, parking in the decoy about 9. Explained "
                   "variance: of the critic on the last quarter of training.",
    ))  # fmt: skip

    def vals(method: str, n: int, key: str = METRIC) -> list[float]:
        return _values(scaling.get((method, n), []), key)

    ppo_ns = sorted({int(k[1]) for k in scaling if k[0] == "ppo"})
    sapg_ns = sorted({int(k[1]) for k in scaling if k[0] == "sapg"})
    summary = "No scaling results."
    if ppo_ns:
        xs = [n for n in ppo_ns for _ in vals("ppo", n)]
        ys = [v for n in ppo_ns for v in vals("ppo", n)]
        n_max = ppo_ns[-1]
        k = min(len(vals("ppo", n_max)), len(vals("sapg", n_max)))
        # The registered rule: at the full grid's second look (more seeds than its default) both tests use the
        # Pocock bound, so the CLI's verdict follows the registration, not the nominal 0.05.
        level = look_alpha(scale, max(len(vals("ppo", n)) for n in ppo_ns))
        pw = _power_at(k, tuple(ppo_ns), level) if k >= 2 and len(ppo_ns) >= 2 else None
        premise = saturation_check(xs, ys, alpha=level)
        main = sapg_vs_ppo_check(vals("sapg", n_max), vals("ppo", n_max), n_max, premise, alpha=level,
                                 power=None if pw is None else pw["paper-sized"])  # fmt: skip
        checks += [premise, main]
        if len(ppo_ns) >= 2:
            ret = [v for n in ppo_ns for v in vals("ppo", n, "final_return")]
            d = trend([math.log2(n) for n in xs], ret, claim="increasing", alpha=ALPHA,
                      effect_name="PPO return gained per doubling of N")  # fmt: skip
            checks.append(d.to_check(id="ppo_return_vs_n", decisive=False,
                                     claim="Reported: PPO's return (goal and decoy rewards) vs N"))  # fmt: skip
        if len(sapg_ns) >= 2:
            sx = [n for n in sapg_ns for _ in vals("sapg", n)]
            sy = [v for n in sapg_ns for v in vals("sapg", n)]
            d = trend([math.log2(n) for n in sx], sy, claim="increasing", alpha=ALPHA,
                      effect_name="SAPG goal-reaching rate gained per doubling of N")  # fmt: skip
            checks.append(d.to_check(id="sapg_keeps_improving", decisive=False,
                                     claim=f"SAPG keeps improving with N (more blocks), N = {sapg_ns[0]}..{sapg_ns[-1]}"))  # fmt: skip
        power_text = ("" if pw is None else
                      f" Power of the rule at {k} seeds and alpha {level:g} (simulated, PPO truly flat): {pw['paper-sized']:.2f} for a "
                      f"paper-sized effect (each goal found with probability 0.15 -> 0.6), {pw['modest']:.2f} for "
                      f"0.15 -> 0.3, {pw['none']:.2f} (false positives) for none.")  # fmt: skip
        summary = (f"PPO's saturation: {premise.verdict.replace('_', ' ')} ({premise.evidence}). SAPG vs PPO at "
                   f"N = {n_max}: {main.verdict.replace('_', ' ')} ({main.evidence}).{power_text}")  # fmt: skip

    controls = group_results(results, "controls", by=("method",))
    if controls and ppo_ns:
        n_max = ppo_ns[-1]
        crow = [[names.get(str(m), str(m)), len(rs), fmt_mean_std(_values(rs)), fmt_mean_std(_values(rs, "goals_discovered")),
                 fmt_mean_std([v / max(1, int(rs[0].job.config.get("iterations", 1))) for v in _values(rs, "optimizer_steps")])]
                for (m,), rs in sorted(controls.items())]  # fmt: skip
        for m in ("ppo", "sapg"):
            rs = scaling.get((m, n_max), [])
            if rs:
                iters = max(1, int(rs[0].job.config.get("iterations", 1)))
                crow.append([f"{names[m]} (scaling run)", len(rs), fmt_mean_std(vals(m, n_max)),
                             fmt_mean_std(vals(m, n_max, "goals_discovered")),
                             fmt_mean_std([v / iters for v in vals(m, n_max, "optimizer_steps")])])  # fmt: skip
        tables.append(Table(f"Controls at N = {n_max}", ["method", "seeds", "goal-reaching rate", f"goals discovered (of {len(TASK['goals'])})",
                                                         "Adam steps / iteration"],
                            crow, note="mean ± std over seeds"))  # fmt: skip
        for ctrl, cid, claim in (("sapg_no_offpolicy", "aggregation_helps", "SAPG's off-policy aggregation helps "
                                  "(SAPG vs SAPG without off-policy data)"),
                                 ("ppo_entropy", "beats_entropy_ppo", "SAPG beats entropy-tuned PPO"),
                                 ("ppo_more_epochs", "beats_step_matched_ppo",
                                  "SAPG beats PPO given as many Adam steps per iteration")):  # fmt: skip
            if (ctrl,) in controls:
                d = compare(vals("sapg", n_max), _values(controls[(ctrl,)]), paired=False, alternative="greater",
                            alpha=ALPHA, effect_name=f"goal-reaching rate difference SAPG - {names[ctrl]}")  # fmt: skip
                checks.append(d.to_check(id=cid, claim=claim, decisive=False))

    pend = group_results(results, "pendulum", by=("method",))
    if pend:
        prow = [[names.get(str(m), str(m)), fmt_mean_std(_values(rs, "final_return"))] for (m,), rs in pend.items()]
        tables.append(Table("Negative control: dense-reward batched pendulum (leader evaluation)",
                            ["method", "final return"], prow, note="mean ± std over seeds"))  # fmt: skip
        pp, ps = _values(pend.get(("ppo",), []), "final_return"), _values(pend.get(("sapg",), []), "final_return")
        if len(pp) >= 2 and len(ps) >= 2:
            band = 0.2 * abs(float(np.mean(pp)))
            d = equivalence(ps, pp, margin=max(band, 1e-6), alpha=ALPHA,
                            effect_name="return difference SAPG - PPO")  # fmt: skip
            checks.append(d.to_check(id="dense_tie", decisive=False,
                                     claim=f"Dense reward: SAPG ties PPO (within +-20% of PPO's return, {band:.0f})"))  # fmt: skip

    if scaling:
        fig, axes = new_figure(1, 1)
        ax = axes[0][0]
        for method, colour, ns in (("ppo", "tab:blue", ppo_ns), ("sapg", "tab:red", sapg_ns)):
            pts = [(n, float(np.mean(vals(method, n))), float(np.std(vals(method, n), ddof=1)) if len(vals(method, n)) > 1
                    else 0.0) for n in ns if vals(method, n)]  # fmt: skip
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o",
                            capsize=3, label=names[method], color=colour)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xlabel("number of parallel environments N")
        ax.set_ylabel("leader's goal-reaching rate (share of episodes)")
        ax.legend()
        figures.append(Figure("Goal-reaching rate vs N", figure_png(fig), "Mean ± std over seeds (error bars)."))

    return decide_analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "With many parallel environments PPO's performance saturates, while SAPG (blocks of a fixed size "
        "with a leader that aggregates follower data through importance sampling) does better than PPO "
        "at the same large N."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Toy batched point-mass exploration task (a decoy next to the start vs four far goals, one per episode, "
        "shown as a one-hot) instead of Isaac Gym dexterous manipulation; 2k-33k env steps per iteration instead "
        "of ~400k; 40 iterations instead of ~2e10 samples.",
        "MLP actor and critic (64, 64) without a shared trunk; no LSTM.",
        "Fixed block size B = 2048 at full (M = 4 blocks at N = 8192) instead of M = 6 blocks of 4096.",
        "Full scale: PPO at N = 512, 2048, 8192 (8 seeds), SAPG at N = 8192 only; one control (PPO with 6 "
        "epochs, SAPG's Adam steps, 3 seeds); the entropy-PPO and split-only controls and the pendulum ran only "
        "in the previous revision's full grid (N <= 2048, see README).",
        "Per-block entropy scale 0.05 (paper: 0.005 or none): 0.005 had no effect in the 40-iteration pilot.",
        "Metric: the leader's goal-reaching rate per seed, averaged over the four tasks (paper: successes per "
        "episode); the verdict is gated on PPO's saturation being shown on the N grid.",
    ),
    scales=("smoke", "quick", "full", "gpu"),
)
