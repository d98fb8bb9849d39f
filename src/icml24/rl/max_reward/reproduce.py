"""Miniature reproduction of max-reward RL (Veviurko et al., ICML 2024).

Claim: optimising the maximum instead of the sum of a shaped reward avoids the loitering optimum of cumulative
RL, the running-max augmentation makes the recursion right under stochastic dynamics, and max-reward agents
learn goal reaching faster than cumulative ones on the same reward.

Experiments: (1) ``exact_optimum``: exact DP on our 8x8 grid maze (deterministic and slippery) with the DSP
reward, cumulative vs max-reward optimal policies; (2) ``counterexample``: the two-step stochastic MDP where
the y-free recursion is wrong, and the slippery maze; (3) ``tabular_learning``: episodes until the greedy
policy succeeds, max-Q-learning vs MaxDet and cumulative Q-learning (DSP, DSP - 1, sparse); (4) ``deep_maze``:
max-TD3 vs TD3 on the batched continuous point maze.
"""

from __future__ import annotations

import math
import textwrap
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
    metric_values,
    new_figure,
    seeds_for,
)

SLUG = "max-reward-rl"
MOD = "icml24.rl.max_reward.reproduce"
DEFAULT_SEEDS = {"smoke": 1, "quick": 2, "full": 3}


def _maze_outcomes(reward: str, slip: float) -> Any:
    from icml24.rl.envs.mazes import GridMaze
    from icml24.rl.max_reward.bellman import Outcomes

    env = GridMaze(reward=reward, slip=slip)
    return env, Outcomes.from_tabular(env.to_mdp())


def run_exact_optimum(config: dict, seed: int) -> dict:
    """Exact optimal policies of the cumulative and max-reward objectives; their success and max-return by MC."""
    from icml24.rl.max_reward.bellman import cumulative_value_iteration, max_reward_value_iteration, rollout

    rng = np.random.default_rng(seed)
    gamma, slip, H, E = config["gamma"], config["slip"], config["horizon"], config["episodes"]
    env, m = _maze_outcomes("dsp", slip)
    _, m_shift = _maze_outcomes("dsp_shifted", slip)
    Qc = cumulative_value_iteration(m, gamma)
    Qs = cumulative_value_iteration(m_shift, gamma)
    Qm, grid = max_reward_value_iteration(m, gamma)
    out: dict[str, Any] = {"y_grid_size": len(grid.values), "start_distance": int(env.dist[env.start_state])}
    for name, pol, g in (("cumulative", Qc.argmax(1), None), ("cumulative_shifted", Qs.argmax(1), None),
                         ("max", Qm.argmax(-1), grid)):  # fmt: skip
        ro = rollout(m, pol, gamma=gamma, episodes=E, horizon=H, rng=rng, grid=g)
        out[f"{name}_success"] = float(ro["terminated"].mean())
        out[f"{name}_max_return"] = float(ro["max_return"].mean())
    out["max_value_start"] = float(Qm[env.start_state, 0].max())
    out["loiter_condition"] = float(env.beta**2 / (1 - gamma))
    return out


def run_counterexample(config: dict, seed: int) -> dict:
    """Augmented DP vs the y-free recursion vs Monte Carlo, on the two-step MDP or the slippery maze."""
    from icml24.rl.max_reward.bellman import (
        max_reward_value_iteration,
        maxdet_value_iteration,
        rollout,
        stochastic_counterexample,
    )

    rng = np.random.default_rng(seed)
    gamma, E, H = config["gamma"], config["episodes"], config["horizon"]
    if config["mdp"] == "two_step":
        m, s0 = stochastic_counterexample(), 0
    else:
        env, m = _maze_outcomes("dsp", config["slip"])
        s0 = env.start_state
    Qm, grid = max_reward_value_iteration(m, gamma)
    Qd = maxdet_value_iteration(m, gamma)
    mc_aug = rollout(m, Qm.argmax(-1), gamma=gamma, episodes=E, horizon=H, rng=rng, grid=grid)["max_return"]
    mc_det = rollout(m, Qd.argmax(-1), gamma=gamma, episodes=E, horizon=H, rng=rng)["max_return"]
    return {
        "augmented_value": float(Qm[s0, 0].max()),
        "maxdet_value": float(Qd[s0].max()),
        "mc_augmented_policy": float(mc_aug.mean()),
        "mc_augmented_se": float(mc_aug.std() / math.sqrt(E)),
        "mc_maxdet_policy": float(mc_det.mean()),
        "mc_maxdet_se": float(mc_det.std() / math.sqrt(E)),
    }


def run_tabular_learning(config: dict, seed: int) -> dict:
    """``n_runs`` Q-learners of one objective/reward on the grid maze; episodes until greedy success >= 0.9."""
    from icml24.rl.max_reward.tabular import episodes_to_success, maze_q_learning

    _, m = _maze_outcomes(config["reward"], config["slip"])
    out = maze_q_learning(
        m, objective=config["objective"], gamma=config["gamma"], alpha=config["alpha"], epsilon=config["epsilon"],
        horizon=config["horizon"], episodes=config["episodes"], n_runs=config["n_runs"], seed=seed,
        eval_every=config["eval_every"], eval_episodes=config["eval_episodes"],
    )  # fmt: skip
    e = episodes_to_success(out["curve"], out["eval_episodes"], 0.9)
    censored = np.where(
        np.isnan(e), config["episodes"], e
    )  # unsolved runs count as the budget (a lower bound)
    return {
        "episodes_to_success": censored.tolist(),
        "solved_fraction": float((~np.isnan(e)).mean()),
        "final_success": float(out["curve"][:, -1].mean()),
        "curve": out["curve"].mean(0).tolist(),
        "eval_episodes": out["eval_episodes"],
    }


def run_deep_maze(config: dict, seed: int) -> dict:
    """Max-TD3 or TD3 on the batched continuous point maze."""
    import torch

    from icml24.rl.envs.mazes import PointMazeVecEnv
    from icml24.rl.max_reward.deep import MaxTD3Agent, evaluate_greedy, train_td3_vec
    from icml24.rl.value.td3 import TD3Agent, TD3Config

    kw = {"reward": config["reward"], "max_episode_steps": config["horizon"], "step_size": config.get("step_size", 0.25)}
    env = PointMazeVecEnv(config["num_envs"], **kw)
    cfg = TD3Config(gamma=config["gamma"], hidden=tuple(config["hidden"]), batch_size=config["batch_size"],
                    exploration_noise=config["noise"])  # fmt: skip
    if config["agent"] == "max_td3":
        agent: TD3Agent = MaxTD3Agent(obs_dim=2, action_dim=2, r_lb=0.0, r_ub=1.0, config=cfg, seed=seed,
                                      critic_start=config.get("critic_start", "official"))  # fmt: skip
    else:
        agent = TD3Agent(obs_dim=2, action_dim=2, config=cfg, seed=seed)
    out = train_td3_vec(env, agent, total_steps=config["steps"], seed=seed, warmup_steps=config["warmup"],
                        updates_per_step=config["updates_per_step"])  # fmt: skip
    greedy = evaluate_greedy(PointMazeVecEnv(32, **kw), agent, seed=seed + 10_000)
    del torch
    return {**out, "greedy_success": greedy}


DEEP_DECISIVE_STEPS = 20_000  # the deep same-reward check decides only at this many env steps or more
SAME_REWARD_NOT_INDEPENDENT = (
    "cumulative Q on the DSP reward converges to the loitering optimum that exact-loitering shows, so it "
    "cannot reach greedy success 0.9 and this check re-measures that optimum rather than learning speed"
)

SCALE_PLAN: dict[str, dict[str, Any]] = {
    "smoke": {"mc": 20_000, "tab_episodes": 20, "tab_runs": 3, "slips": [0.0], "deep_steps": 480, "deep_warm": 320},
    "quick": {"mc": 1_000_000, "tab_episodes": 200, "tab_runs": 10, "slips": [0.0, 0.2], "deep_steps": 4000,
              "deep_warm": 1000},
    "full": {"mc": 2_000_000, "tab_episodes": 400, "tab_runs": 20, "slips": [0.0, 0.2], "deep_steps": 100_000,
             "deep_warm": 5000, "deep_seeds": 5},
}  # fmt: skip

TAB_METHODS = (
    ("max", "dsp", 0.99),
    ("maxdet", "dsp", 0.99),
    ("cumulative", "dsp", 0.99),
    ("cumulative", "dsp_shifted", 0.99),
    ("cumulative", "sparse", 0.99),
)
DEEP_AGENTS = (
    ("max_td3", "dsp", 0.995, "official"),
    ("max_td3", "dsp", 0.995, "midrange"),  # ablation: the optimistic critic start we used before
    ("td3", "dsp", 0.99, None),
    ("td3", "dsp_shifted", 0.99, None),
)


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    plan = SCALE_PLAN[scale]
    ss = seeds_for(scale, seeds, DEFAULT_SEEDS)
    jobs: list[Job] = []
    for slip in plan["slips"]:
        cfg = {"gamma": 0.99, "slip": slip, "horizon": 200, "episodes": 1 if slip == 0 else 2000}
        jobs.append(Job(SLUG, "exact_optimum", f"{MOD}:run_exact_optimum", cfg, 0))
    jobs.append(Job(SLUG, "counterexample", f"{MOD}:run_counterexample",
                    {"mdp": "two_step", "gamma": 1.0, "episodes": plan["mc"], "horizon": 5}, 0))  # fmt: skip
    if 0.2 in plan["slips"]:
        jobs.append(Job(SLUG, "counterexample", f"{MOD}:run_counterexample",
                        {"mdp": "maze", "slip": 0.2, "gamma": 0.99, "episodes": plan["mc"] // 20, "horizon": 200},
                        0))  # fmt: skip
    for slip in plan["slips"]:
        for objective, reward, gamma in TAB_METHODS:
            for s in ss:
                cfg = {"objective": objective, "reward": reward, "gamma": gamma, "slip": slip, "alpha": 0.5,
                       "epsilon": 0.1, "horizon": 50, "episodes": plan["tab_episodes"], "n_runs": plan["tab_runs"],
                       "eval_every": 5, "eval_episodes": 1 if slip == 0 else 10}  # fmt: skip
                jobs.append(Job(SLUG, "tabular_learning", f"{MOD}:run_tabular_learning", cfg, s))
    deep_seeds = seeds_for(scale, plan.get("deep_seeds"), DEFAULT_SEEDS) if seeds is None else ss
    for agent, reward, gamma, start in DEEP_AGENTS:
        for s in deep_seeds[: 1 if scale == "smoke" else None]:
            cfg = {"agent": agent, "reward": reward, "gamma": gamma, "critic_start": start, "num_envs": 16, "horizon": 200,
                   "hidden": [128, 128], "batch_size": 256, "noise": 0.5, "step_size": 0.5, "steps": plan["deep_steps"],
                   "warmup": plan["deep_warm"], "updates_per_step": 2}  # fmt: skip
            jobs.append(Job(SLUG, "deep_maze", f"{MOD}:run_deep_maze", cfg, s))
    return jobs


def _label(objective: str, reward: str) -> str:
    return {"max": "max-Q (y-augmented)", "maxdet": "MaxDet-Q (y-free)"}.get(
        objective, f"cumulative Q [{reward}]"
    )


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    tables: list[Table] = []
    checks: list[ClaimCheck] = []
    figures: list[Figure] = []

    # (1) exact optimum: loitering vs walking in
    rows, det = [], None
    for (slip,), rs in group_results(results, "exact_optimum", by=("slip",)).items():
        mt = rs[0].metrics
        rows.append([slip, f"{mt['loiter_condition']:.1f}", f"{mt['cumulative_success']:.3f}",
                     f"{mt['cumulative_shifted_success']:.3f}", f"{mt['max_success']:.3f}",
                     f"{mt['cumulative_max_return']:.3f}", f"{mt['max_max_return']:.3f}", mt["y_grid_size"]])  # fmt: skip
        if slip == 0.0:
            det = mt
    if rows:
        tables.append(Table("Exact optimal policies on the 8x8 grid maze (DSP reward, beta=0.9, gamma=0.99)",
                            ["slip", "beta^2/(1-gamma)", "success: cumulative", "success: cumulative (DSP-1)",
                             "success: max-reward", "max-return: cumulative policy", "max-return: max policy",
                             "|y grid|"], rows, "success = reaches the goal within 200 steps"))  # fmt: skip
    if det is not None:
        ok = det["cumulative_success"] == 0.0 and det["max_success"] == 1.0
        checks.append(ClaimCheck(
            "With a positive shaped reward the cumulative optimum loiters near the goal; the max-reward optimum "
            "walks to it", "supported" if ok else "not_supported",
            f"deterministic maze: cumulative optimum success {det['cumulative_success']:.2f}, max-reward optimum "
            f"{det['max_success']:.2f} (beta^2/(1-gamma) = {det['loiter_condition']:.0f} > 1)",
            id="exact-loitering", rule="exact DP, deterministic maze: supported if the cumulative optimum never reaches "
            "the goal within 200 steps (success 0) and the max-reward optimum always does (success 1); "
            "not_supported otherwise"))  # fmt: skip

    # (2) counterexample
    rows = []
    for (mdp,), rs in group_results(results, "counterexample", by=("mdp",)).items():
        mt = rs[0].metrics
        rows.append([mdp, f"{mt['augmented_value']:.4f}", f"{mt['mc_augmented_policy']:.4f} ± {mt['mc_augmented_se']:.4f}",
                     f"{mt['maxdet_value']:.4f}", f"{mt['mc_maxdet_policy']:.4f} ± {mt['mc_maxdet_se']:.4f}"])  # fmt: skip
        if mdp == "two_step":
            ok = (abs(mt["augmented_value"] - 0.725) < 1e-9 and abs(mt["mc_augmented_policy"] - 0.725) <= max(1e-3, 4 * mt["mc_augmented_se"])
                  and abs(mt["maxdet_value"] - 0.65) < 1e-9)  # fmt: skip
            checks.append(ClaimCheck(
                "Under stochastic dynamics the y-augmented recursion is right and the y-free one is not",
                "supported" if ok else "not_supported",
                f"two-step MDP: augmented DP {mt['augmented_value']:.4f}, Monte Carlo of its policy "
                f"{mt['mc_augmented_policy']:.4f} (|diff| <= max(1e-3, 4 s.e.) required), y-free recursion {mt['maxdet_value']:.4f} "
                f"(its policy truly earns {mt['mc_maxdet_policy']:.4f})", id="stochastic-correctness",
                rule="supported if the augmented DP gives the closed-form 0.725, Monte Carlo of its greedy policy is "
                "within max(1e-3, 4 standard errors) of it, and the y-free recursion gives 0.65; not_supported "
                "otherwise"))  # fmt: skip
    if rows:
        tables.append(Table("Stochastic dynamics: exact values vs Monte Carlo of the greedy policies",
                            ["MDP", "augmented DP V(s0, 0)", "MC of augmented policy", "y-free (MaxDet) V(s0)",
                             "MC of MaxDet policy"], rows, "two_step: our counterexample (gamma=1); "
                            "maze: slip 0.2, gamma 0.99"))  # fmt: skip

    # (3) tabular learning speed: episodes until the greedy policy succeeds (censored at the budget)
    rows, eps_by, solved_by = [], {}, {}
    fig, ax = new_figure(1, 2, width=4.6)
    for (slip, objective, reward), rs in group_results(
        results, "tabular_learning", by=("slip", "objective", "reward")
    ).items():
        eps = [x for r in rs for x in r.metrics["episodes_to_success"]]
        solved = metric_values(rs, "solved_fraction")
        eps_by[(slip, objective, reward)] = eps
        solved_by[(slip, objective, reward)] = solved
        rows.append([slip, _label(objective, reward), fmt_mean_std(eps), fmt_mean_std(solved),
                     fmt_mean_std(metric_values(rs, "final_success"))])  # fmt: skip
        j = 0 if slip == 0 else 1
        curves = np.array([r.metrics["curve"] for r in rs])
        x = rs[0].metrics["eval_episodes"]
        ax[0, j].plot(x, curves.mean(0), label=_label(objective, reward))
        ax[0, j].fill_between(x, curves.mean(0) - curves.std(0), curves.mean(0) + curves.std(0), alpha=0.15)
    for j, t in enumerate(("deterministic", "slip 0.2")):
        ax[0, j].set(title=t, xlabel="training episodes", ylabel="greedy success rate")
    if rows:
        ax[0, 0].legend(fontsize=6)
        figures.append(Figure("tabular learning curves", figure_png(fig),
                              "mean over seeds of the per-seed mean over learners; band: std over seeds"))  # fmt: skip
        tables.append(
            Table(
                "Tabular Q-learning on the grid maze: episodes until greedy success >= 0.9",
                ["slip", "learner", "episodes to 0.9 (censored at budget)", "solved fraction", "final greedy success"],
                rows,
                "mean ± std over seeds x parallel learners (episodes) or over seeds (fractions); unsolved runs "
                "count as the episode budget",
            )
        )
    for slip in sorted({k[0] for k in eps_by}):
        mx = eps_by.get((slip, "max", "dsp"))
        same = eps_by.get((slip, "cumulative", "dsp"))
        if mx and same:
            dec = episodes_decision(mx, same, "cumulative Q [dsp]")
            checks.append(dec.to_check(
                id=f"tabular-faster-same-reward-slip{slip:g}",
                claim=f"Max-reward Q-learning learns to reach the goal faster than cumulative Q-learning on the same "
                      f"reward (slip {slip:g}; reported only: {SAME_REWARD_NOT_INDEPENDENT})",
                evidence=f"median episodes to 0.9: max-Q {np.median(mx):.0f} vs cumulative-DSP {np.median(same):.0f}",
                power=_episodes_power(len(mx), len(same), budget=max(max(mx), max(same))),
                decisive=False))  # fmt: skip
        others = {reward: v for (sl, o, reward), v in eps_by.items() if sl == slip and o == "cumulative"}
        if mx and others:
            best = min(others, key=lambda k: float(np.median(others[k])))
            dec = episodes_decision(mx, others[best], f"cumulative Q [{best}]")
            checks.append(dec.to_check(
                id=f"tabular-faster-best-cumulative-slip{slip:g}",
                claim=f"... and faster than the best cumulative variant (shifted DSP-1 or sparse reward; slip {slip:g})",
                evidence=f"best cumulative variant by median: {best}; median episodes max-Q {np.median(mx):.0f} vs "
                         f"{np.median(others[best]):.0f}",
                power=_episodes_power(len(mx), len(others[best]), budget=max(max(mx), max(others[best]))),
                decisive=False))  # fmt: skip

    # (4) deep
    rows, deep = [], {}
    for (agent, reward, start), rs in group_results(results, "deep_maze", by=("agent", "reward", "critic_start")).items():
        fs, gs = metric_values(rs, "final_success"), metric_values(rs, "greedy_success")
        deep[(agent, reward, start)] = gs
        name = _deep_label(agent, reward, start)
        rows.append([name, fmt_mean_std(fs), fmt_mean_std(gs), fmt_mean_std(metric_values(rs, "final_progress")),
                     fmt_mean_std(metric_values(rs, "env_steps_per_second"))])  # fmt: skip
    if rows:
        steps = next(r.job.config["steps"] for r in results if r.job.experiment == "deep_maze")
        tables.append(
            Table(
                f"Point maze, {steps} env steps: success of training episodes (last 20%) and greedy",
                ["agent [reward]", "training success", "greedy success", "best DSP reached / episode",
                 "env steps / CPU s"],
                rows,
                "mean ± std over seeds. best DSP reached: mean over the last 20% of training episodes of the best "
                "cell's DSP value (1 = goal; the start cell is 0.43)",
            )
        )
        mx = deep.get(("max_td3", "dsp", "official"))
        decisive = steps >= DEEP_DECISIVE_STEPS
        gate = "" if decisive else f" (run check only at {steps} steps: reported, not decisive)"
        for reward, cid in (("dsp", "deep-beats-td3-same-reward"), ("dsp_shifted", "deep-beats-td3-shifted")):
            td = deep.get(("td3", reward, None))
            if mx and td:
                dec = deep_decision(mx, td)
                checks.append(dec.to_check(
                    id=cid,
                    claim=f"Max-TD3 reaches the goal more often than TD3 [{reward}] (point maze, greedy success)",
                    evidence=f"greedy success {np.mean(mx):.2f} vs {np.mean(td):.2f} after {steps} steps{gate}",
                    power=decide.power_of_compare(0.5, 0.35, max(2, min(len(mx), len(td))), paired=False, n_sims=400,
                                                  alternative="greater").supported,
                    decisive=decisive and reward == "dsp"))  # fmt: skip
        ab = deep.get(("max_td3", "dsp", "midrange"))
        if mx and ab:
            dec = decide.compare(mx, ab, paired=False, alternative="greater",
                                 effect_name="mean greedy success, official critic start - midrange start")  # fmt: skip
            checks.append(dec.to_check(
                id="deep-critic-start-ablation",
                claim="Ablation: max-TD3 with the official critic start (~0.12 of the value range) vs the optimistic "
                      "midrange start (~0.5)",
                evidence=f"greedy success {np.mean(mx):.2f} vs {np.mean(ab):.2f}", decisive=False))  # fmt: skip

    # The speed half of the claim is decided by the deep same-reward check only (the tabular one is not
    # independent of exact-loitering); where it is not decisive or did not run, the claim cannot be supported.
    if not any(c.id == "deep-beats-td3-same-reward" and c.decisive for c in checks):
        deep_steps = [r.job.config["steps"] for r in results if r.job.experiment == "deep_maze"]
        reason = (f"the deep max-TD3 vs TD3 [DSP] arms ran {max(deep_steps)} env steps, below the "
                  f"{DEEP_DECISIVE_STEPS} this check needs to decide" if deep_steps else
                  "the deep max-TD3 vs TD3 [DSP] arms did not run")  # fmt: skip
        checks.append(decide.not_run_check(
            "speed-same-reward-decisive",
            "Max-reward agents learn goal reaching faster than cumulative agents on the same reward (decided by "
            "the deep point-maze check; the tabular same-reward check is reported only)",
            f"{reason}; the tabular same-reward check is reported only ({SAME_REWARD_NOT_INDEPENDENT})"))  # fmt: skip
    decisive_ids = [c.id for c in checks if c.decisive]
    verdict, decided_by, rule = decide.combine(checks, "all")
    reported_refuted = [c.id for c in checks if not c.decisive and c.verdict == "not_supported"
                        and c.id.startswith("tabular-faster-best")]  # fmt: skip
    if verdict == "supported" and reported_refuted:
        verdict, decided_by = "inconclusive", reported_refuted
    rule += ("; a supported verdict is lowered to inconclusive when max-Q is shown slower than the best "
             "cumulative variant (that check alone cannot refute: the paper's claim is against the same reward)")
    # Each claim shortened at a word boundary (a plain [:70] cut "loiters near the goal" to "loiters near the").
    summary = f"{scale}: " + " | ".join(
        f"{textwrap.shorten(c.claim, 70, placeholder=' …')}: {c.verdict}" for c in checks if c.id in decisive_ids
    )
    return Analysis(verdict, summary, tables, figures, checks, rule=rule, decided_by=decided_by)


def episodes_decision(method: Sequence[float], baseline: Sequence[float], baseline_name: str) -> Decision:
    """Fewer episodes to greedy success 0.9 (censored at the budget): one-sided Mann-Whitney U at 0.05 (ranks
    treat the censored runs as tied at the budget, behind every solved one); not_supported if the baseline
    is shown faster at the same level."""
    return decide.compare(method, baseline, paired=False, alternative="less", test="rank",
                          effect_name=f"median episodes to 0.9, max-Q - {baseline_name}")  # fmt: skip


def deep_decision(method: Sequence[float], baseline: Sequence[float]) -> Decision:
    """Higher greedy success over seeds: one-sided Welch t-test at 0.05; not_supported if lower at the same level."""
    return decide.compare(method, baseline, paired=False, alternative="greater",
                          effect_name="mean greedy success over seeds, max-TD3 - TD3")  # fmt: skip


def _episodes_power(n1: int, n2: int, *, budget: float) -> float | None:
    """Power of :func:`episodes_decision` at the paper's effect: max-reward agents solve almost every run (90%)
    while cumulative ones on the same reward rarely do (20%), solved runs uniform over the budget."""
    if n1 < 2 or n2 < 2 or not math.isfinite(budget) or budget <= 0:
        return None

    def sim(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        def arm(n: int, p: float) -> np.ndarray:
            solved = rng.random(n) < p
            return np.where(solved, rng.uniform(5, budget, n), budget)

        return arm(n1, 0.9), arm(n2, 0.2)

    return decide.power(lambda ab: episodes_decision(ab[0], ab[1], "baseline"), sim, n_sims=200, seed=0).supported


def _deep_label(agent: str, reward: str, start: str) -> str:
    if agent == "max_td3":
        return "max-TD3 [DSP]" + ("" if start == "official" else ", midrange critic start (ablation)")
    return f"TD3 [{'DSP - 1' if reward == 'dsp_shifted' else 'DSP'}]"


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Optimising the maximum instead of the cumulative (shaped) reward, with the running maximum as an extra "
        "state variable, gives the right optimum in stochastic goal-reaching tasks and learns them faster than "
        "cumulative RL on the same reward."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Our own 8x8 maze layout (6x6 interior) instead of the paper's map files; tabular instead of PointMaze for "
        "the exact checks (the paper has no tabular experiments).",
        "Tabular max-Q-learning uses gamma=0.99 with the exact finite y grid (561 values); no function "
        "approximation across y.",
        "The two-step stochastic counterexample is our construction, not from the paper.",
        "Deep: our batched kinematic torch point maze instead of gymnasium-robotics PointMaze (MuJoCo); 4k "
        "(quick) / 100k (full) env steps instead of 1e6; Gaussian exploration noise (0.5) instead of pink noise; "
        "MLP [128, 128]; 2 updates per 16-env vector step.",
        "y is carried in current-time units when acting and in the target (one convention; the official code "
        "keeps it unscaled during rollouts).",
    ),
    scales=("smoke", "quick", "full"),
)
