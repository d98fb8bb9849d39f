"""Miniature reproduction of PW-DICE (Yan, Schwing, Wang; ICML 2024, arXiv:2311.01331).

Claim: minimising the primal Wasserstein distance between learner and expert state occupancies (KL-regularised,
solved through its convex dual, policy by weighted behaviour cloning) imitates from expert states alone better
than SMODICE (KL, chi-square), LobsDICE and behaviour cloning on the task-agnostic data.

Experiments: (1) ``tabular``: the official "Arbitrary" random MDPs (20 states, 4 actions, gamma 0.95), one
100-step expert rollout (states only), 10,000 uniform-policy steps, the transitions estimated from them; every
method solved exactly (cvxpy), evaluated in the true MDP: the regret ``d_E(target) - d_pi(target)`` of the
paper's code and the L1 distance between state occupancies. (2) ``point_mass`` (full): continuous 2-D
navigation around a wall (:mod:`icml24.rl.pw_dice.continuous`), learned dual networks with the contrastive metric,
weighted BC, against SMODICE-KL and BC; also with the expert's states seen through a distorted representation.
"""

from __future__ import annotations

import math
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
    group_results,
    new_figure,
    numeric_cell,
    seeds_for,
)

SLUG = "pw-dice"
MOD = "icml24.rl.pw_dice.reproduce"

TABULAR_METHODS = ("pw_dice", "lp", "smodice_kl", "smodice_chi", "lobsdice", "bc")
"""Methods of the tabular experiment (code names; :data:`LABELS` has the names the README uses)."""
LABELS = {
    "pw_dice": "PW-DICE",
    "lp": "Wasserstein LP (eps = 0)",
    "smodice_kl": "SMODICE-KL",
    "smodice_chi": "SMODICE-chi2",
    "lobsdice": "LobsDICE",
    "bc": "BC (task-agnostic data)",
    "pw_dice_learned": "PW-DICE (learned metric)",
    "pw_dice_euclid": "PW-DICE (Euclidean)",
}
TABULAR_BASELINES = ("smodice_kl", "smodice_chi", "lobsdice", "bc")
"""The baselines PW-DICE's tabular regret is compared with (decisive, Holm-corrected as one family)."""

PAPER_REGRET_EFFECT = -0.0046
"""Mean paired regret difference PW-DICE - SMODICE-KL over the 10 MDPs of the official result files
(``res/LDexperiment/*-10000-100-0.01.txt``, estimated MDP, empirical d_E)."""
PAPER_REGRET_SD = 0.0088
"""Standard deviation of those paired differences."""
LP_MARGIN = 0.005
"""Equivalence band for "PW-DICE is on par with the exact LP" (regret units; about the paper's effect size)."""

DEFAULT_SEEDS = {"smoke": 2, "quick": 40, "full": 40}
PLANS: dict[str, dict[str, Any]] = {
    "smoke": {"n_states": 8, "ts_steps": 30, "ta_steps": 1000, "point_mass": True},
    "quick": {"n_states": 20, "ts_steps": 100, "ta_steps": 10_000, "point_mass": False},
    "full": {"n_states": 20, "ts_steps": 100, "ta_steps": 10_000, "point_mass": True},
}


# ------------------------------------------------------------------------------------------------ jobs


def run_tabular(config: dict, seed: int) -> dict:
    """One random Arbitrary MDP: every method's regret and occupancy distances in the true MDP."""
    from icml24.rl.offline import (
        collect_transitions,
        discounted_state_distribution,
        empirical_mdp,
        empirical_policy,
        state_action_occupancy,
    )
    from icml24.rl.pw_dice.tabular import (
        arbitrary_task,
        dirac_cost,
        lobsdice_tabular,
        occupancy_metrics,
        pw_dice_primal,
        smodice_chi_tabular,
        smodice_kl_tabular,
    )

    S, A = int(config["n_states"]), int(config["n_actions"])
    task = arbitrary_task(S, A, seed=seed, gamma=config["gamma"])
    g = task.gamma
    expert = collect_transitions(task.mdp, task.expert_policy, n_steps=config["ts_steps"], seed=10_000 + seed)
    data = collect_transitions(task.mdp, np.full((S, A), 1.0 / A), n_steps=config["ta_steps"], seed=20_000 + seed)
    model = empirical_mdp(data, S, A, task.mdp.start)
    pi_b = empirical_policy(data, S, A)
    # the code's d_I: the occupancy of the empirical behaviour policy in the estimated MDP
    d_data = state_action_occupancy(model, pi_b, g)
    d_exp = discounted_state_distribution(expert, S, g)
    w = (1 - g) * g ** expert.steps.astype(float)
    d_pairs = np.zeros((S, S))
    np.add.at(d_pairs, (expert.states, expert.next_states), w)
    d_pairs /= d_pairs.sum()
    cost = dirac_cost(S)
    eps = config["eps"]
    policies = {
        "pw_dice": pw_dice_primal(model, d_exp, d_data, cost, gamma=g, eps1=eps, eps2=eps).policy,
        "lp": pw_dice_primal(model, d_exp, d_data, cost, gamma=g, eps1=0.0, eps2=0.0).policy,
        "smodice_kl": smodice_kl_tabular(model, d_exp, d_data, gamma=g).policy,
        "smodice_chi": smodice_chi_tabular(model, d_exp, d_data, gamma=g).policy,
        "lobsdice": lobsdice_tabular(model, d_pairs, d_data, gamma=g).policy,
        "bc": pi_b,
    }
    out: dict[str, Any] = {"target": task.target, "expert_states_seen": int(len(np.unique(expert.states)))}
    for name, pi in policies.items():
        for k, v in occupancy_metrics(task, pi).items():
            out[f"{name}_{k}"] = v
    # how well each method fits the empirical expert occupancy it was given (in the model it optimised in)
    from icml24.rl.offline import state_occupancy

    for name, pi in policies.items():
        out[f"{name}_fit_l1"] = float(np.abs(state_occupancy(model, pi, g) - d_exp).sum())
    return out


def run_point_mass(config: dict, seed: int) -> dict:
    """One continuous point-mass imitation run (see :func:`icml24.rl.pw_dice.continuous.run_imitation`)."""
    from icml24.rl.pw_dice.continuous import ImitationConfig, run_imitation

    cfg = ImitationConfig(**{k: v for k, v in config.items() if k != "method"})
    return run_imitation(cfg, method=config["method"], seed=seed)


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    plan = PLANS[scale]
    jobs: list[Job] = []
    for s in seeds_for(scale, seeds, DEFAULT_SEEDS):
        cfg = {"n_states": plan["n_states"], "n_actions": 4, "gamma": 0.95, "eps": 0.01,
               "ts_steps": plan["ts_steps"], "ta_steps": plan["ta_steps"]}  # fmt: skip
        jobs.append(Job(SLUG, "tabular", f"{MOD}:run_tabular", cfg, s))
    if plan["point_mass"]:
        from icml24.rl.pw_dice.continuous import POINT_MASS_PLANS

        pm = POINT_MASS_PLANS[scale]
        for variant in pm["variants"]:
            for method in pm["methods"]:
                for s in range(pm["seeds"] if seeds is None else seeds):
                    cfg = dict(pm["config"], variant=variant, method=method)
                    jobs.append(Job(SLUG, "point_mass", f"{MOD}:run_point_mass", cfg, s))
    return jobs


# ------------------------------------------------------------------------------------------------ rules


def regret_decision(pw: Sequence[float], baseline: Sequence[float], baseline_name: str) -> Decision:
    """Lower regret than a baseline on the same MDPs: one-sided paired t-test at 0.05 (Holm across the
    baselines in :func:`analyze`); not_supported if the baseline's regret is shown lower at the same level."""
    return decide.compare(pw, baseline, paired=True, alternative="less",
                          effect_name=f"mean regret difference (PW-DICE - {baseline_name})")  # fmt: skip


def lp_decision(pw: Sequence[float], lp: Sequence[float]) -> Decision:
    """PW-DICE on par with the unregularised Wasserstein LP: paired TOST within +-LP_MARGIN."""
    return decide.equivalence(pw, lp, margin=LP_MARGIN, paired=True,
                              effect_name="mean regret difference (PW-DICE - LP)")  # fmt: skip


def regret_power(n: int, *, effect: float = PAPER_REGRET_EFFECT, sd: float = PAPER_REGRET_SD, n_sims: int = 400,
                 n_baselines: int = len(TABULAR_BASELINES)) -> float:  # fmt: skip
    """Power of the Holm-corrected regret rule at ``n`` MDPs for the paper's effect: the chance all
    ``n_baselines`` paired comparisons come out supported when each true paired difference is ``effect`` with
    standard deviation ``sd`` (independent comparisons: conservative for the conjunction)."""

    def sim(rng: np.random.Generator) -> list[np.ndarray]:
        return [effect + sd * rng.standard_normal(n) for _ in range(n_baselines)]

    def rule(diffs: list[np.ndarray]) -> str:
        ds = decide.holm([regret_decision(d, np.zeros(n), "b") for d in diffs])
        checks = [d.to_check(id=f"b{i}", claim="c") for i, d in enumerate(ds)]
        return decide.combine(checks, "all")[0]

    return decide.power(rule, sim, n_sims=n_sims, seed=0).supported


# ------------------------------------------------------------------------------------------------ analysis


def _tabular(results: Sequence[JobResult], checks: list[ClaimCheck], tables: list[Table], figures: list[Figure]):
    rs = [r for rs in group_results(results, "tabular").values() for r in rs]
    if not rs:
        return
    rs = sorted(rs, key=lambda r: r.job.seed)
    get = lambda m, k: [float(r.metrics[f"{m}_{k}"]) for r in rs]  # noqa: E731
    rows = []
    for m in TABULAR_METHODS:
        rows.append([LABELS[m], numeric_cell(get(m, "regret"), 4), numeric_cell(get(m, "state_l1"), 3),
                     numeric_cell(get(m, "pair_l1"), 3), numeric_cell(get(m, "fit_l1"), 3)])  # fmt: skip
    cfg = rs[0].job.config
    tables.append(Table(
        f"Tabular Arbitrary MDPs ({cfg['n_states']} states, {cfg['n_actions']} actions, gamma {cfg['gamma']}; "
        f"{cfg['ts_steps']} expert states, {cfg['ta_steps']} uniform-policy steps; transitions estimated)",
        ["method", "regret d_E(target) - d_pi(target) (lower is better)", "L1(d_pi, d_E) states",
         "L1 state pairs", "L1 to the empirical d_E it was given (model)"], rows,
        "mean ± std over MDPs (one seed = one MDP and its datasets); regret and L1 in the true MDP against the "
        "true expert's occupancy"))  # fmt: skip
    n = len(rs)
    pw = get("pw_dice", "regret")
    decisions = holm([regret_decision(pw, get(b, "regret"), LABELS[b]) for b in TABULAR_BASELINES])
    pwr = regret_power(n)
    for b, d in zip(TABULAR_BASELINES, decisions):
        checks.append(d.to_check(
            id=f"tabular-regret-vs-{b.replace('_', '-')}",
            claim=f"Tabular: PW-DICE's regret is lower than {LABELS[b]}'s", power=pwr,
            evidence=f"{n} MDPs"))  # fmt: skip
    lp = lp_decision(pw, get("lp", "regret"))
    checks.append(lp.to_check(id="tabular-on-par-with-lp", claim="Tabular: PW-DICE's regret is on par with the "
                              "exact Wasserstein LP's", decisive=False, evidence=f"{n} MDPs"))  # fmt: skip
    l1 = decide.compare(get("pw_dice", "state_l1"), get("smodice_kl", "state_l1"), paired=True, alternative="less",
                        effect_name="mean L1 difference (PW-DICE - SMODICE-KL)")  # fmt: skip
    checks.append(l1.to_check(
        id="tabular-state-l1-vs-smodice-kl", decisive=False,
        claim="Tabular: PW-DICE's state occupancy is closer (L1) to the true expert's than SMODICE-KL's",
        evidence="not the paper's headline metric (the official result files show PW-DICE behind SMODICE on it: "
        "+0.155 paired); reported because the issue states the claim as occupancy matching"))  # fmt: skip
    fig, ax = new_figure(1, 1, width=6.4, height=3.6)
    a = ax[0][0]
    for i, m in enumerate(TABULAR_METHODS):
        v = np.array(get(m, "regret"))
        a.errorbar([i], [v.mean()], yerr=[v.std(ddof=1) / math.sqrt(len(v))], fmt="o", capsize=4)
    a.axhline(0.0, color="grey", lw=0.8)
    a.set_xticks(range(len(TABULAR_METHODS)))
    a.set_xticklabels([LABELS[m].split(" (")[0] for m in TABULAR_METHODS], rotation=30, ha="right")
    a.set_ylabel("regret (occupancy of target state)")
    a.set_title(f"Tabular regret, mean ± s.e. over {n} MDPs")
    figures.append(Figure("Tabular regret", figure_png(fig), "Tabular regret of each method (error bars: "
                          "standard error over MDPs)"))  # fmt: skip


def holm(decisions: Sequence[Decision]) -> list[Decision]:
    return decide.holm(list(decisions))


POINT_MASS_BASELINES = ("smodice_kl", "bc")
"""Baselines of the decisive point-mass checks (each variant); Holm across variants x baselines."""
ASSUMED_SUCCESS_GAIN = 0.3
"""Success-rate gain at which the point-mass rule's power is stated (no paper number exists for this toy task;
about the pilot's PW-DICE - SMODICE-KL gap, 1.00 vs 0.59)."""
ASSUMED_SEED_SD = 0.15
"""Seed-to-seed standard deviation of the paired success-rate differences assumed in that power simulation."""


def success_decision(pw: Sequence[float], baseline: Sequence[float], baseline_name: str) -> Decision:
    """Higher success rate than a baseline on the same datasets: one-sided paired t-test over seeds at 0.05 (Holm
    across the point-mass checks in :func:`analyze`); not_supported if the baseline is shown higher. Seeds, not
    episodes, are the units: a seed's evaluation episodes share one trained policy."""
    return decide.compare(pw, baseline, paired=True, alternative="greater",
                          effect_name=f"mean success-rate difference (PW-DICE learned - {baseline_name})")  # fmt: skip


def success_power(n: int, *, gain: float = ASSUMED_SUCCESS_GAIN, sd: float = ASSUMED_SEED_SD, n_checks: int = 4,
                  n_sims: int = 400) -> float:  # fmt: skip
    """Chance all ``n_checks`` Holm-corrected point-mass checks say supported when each true paired gain is ``gain``
    (seed sd ``sd``) at ``n`` seeds."""
    if n < 2:
        return 0.0

    def sim(rng: np.random.Generator) -> list[np.ndarray]:
        return [gain + sd * rng.standard_normal(n) for _ in range(n_checks)]

    def rule(diffs: list[np.ndarray]) -> str:
        ds = decide.holm([success_decision(d, np.zeros(n), "b") for d in diffs])
        return decide.combine([d.to_check(id=f"b{i}", claim="c") for i, d in enumerate(ds)], "all")[0]

    return decide.power(rule, sim, n_sims=n_sims, seed=0).supported


def _point_mass(results: Sequence[JobResult], checks: list[ClaimCheck], tables: list[Table]) -> None:
    groups = group_results(results, "point_mass", by=("variant", "method"))
    if not groups:
        return
    by: dict[tuple[str, str], dict[int, JobResult]] = {}
    rows = []
    for (variant, method), rs in groups.items():
        by[(str(variant), str(method))] = {r.job.seed: r for r in rs}
        rs = sorted(rs, key=lambda r: r.job.seed)
        share = [float(r.metrics.get("expert_weight_share", float("nan"))) for r in rs]
        rows.append([variant, LABELS.get(str(method), str(method)),
                     numeric_cell([float(r.metrics["success_rate"]) for r in rs], 3),
                     numeric_cell([float(r.metrics["mean_return"]) for r in rs], 3),
                     numeric_cell(share, 3) if method != "bc" else "n/a"])  # fmt: skip
    any_r = next(iter(next(iter(by.values())).values()))
    cfg = any_r.metrics.get("config", {})
    tables.append(Table(
        "Point-mass imitation from expert states (success = reaches the goal within 100 steps)",
        ["state representation", "method", "success rate", "return", "weight share on TA's expert transitions"],
        rows, f"mean ± std over seeds; each seed draws its own datasets ({cfg.get('expert_episodes')} expert state "
        f"trajectories; TA = {cfg.get('data_expert_episodes')} noisy expert + {cfg.get('data_random_episodes')} "
        f"random trajectories); {cfg.get('eval_episodes')} evaluation episodes of the deterministic policy per "
        "seed"))  # fmt: skip

    def paired(variant: str, a: str, b: str) -> tuple[list[float], list[float]]:
        ra, rb = by.get((variant, a), {}), by.get((variant, b), {})
        seeds = sorted(set(ra) & set(rb))
        return ([float(ra[s].metrics["success_rate"]) for s in seeds],
                [float(rb[s].metrics["success_rate"]) for s in seeds])  # fmt: skip

    ids, decisions = [], []
    for variant in ("normal", "distorted"):
        for base in POINT_MASS_BASELINES:
            pw, b = paired(variant, "pw_dice_learned", base)
            if len(pw) < 2:
                continue
            ids.append((variant, base, len(pw)))
            decisions.append(success_decision(pw, b, LABELS[base]))
    for (variant, base, n), d in zip(ids, holm(decisions)):
        checks.append(d.to_check(
            id=f"point-mass-{variant}-vs-{base.replace('_', '-')}", power=success_power(n, n_checks=len(ids)),
            claim=f"Point mass ({variant} states): PW-DICE with the learned metric reaches the goal more often than "
            f"{LABELS[base]}", evidence=f"{n} seeds"))  # fmt: skip
    for variant in ("normal", "distorted"):
        pw, e = paired(variant, "pw_dice_learned", "pw_dice_euclid")
        if len(pw) >= 2:
            d = decide.compare(pw, e, paired=True, alternative="greater",
                               effect_name="mean success-rate difference (learned - Euclidean metric)")  # fmt: skip
            checks.append(d.to_check(id=f"point-mass-{variant}-learned-vs-euclidean", decisive=False,
                                     claim=f"Point mass ({variant} states): the learned metric beats the Euclidean one",
                                     evidence=f"{len(pw)} seeds (ablation, reported only)"))  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    checks: list[ClaimCheck] = []
    tables: list[Table] = []
    figures: list[Figure] = []
    _tabular(results, checks, tables, figures)
    _point_mass(results, checks, tables)
    decisive = [c for c in checks if c.decisive]
    summary = f"{scale}: " + "; ".join(f"{c.id} {c.verdict}" for c in decisive)
    return decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "PW-DICE (primal Wasserstein state-occupancy matching with KL pessimism, solved by its convex dual, policy "
        "by weighted BC) imitates from expert states alone better than SMODICE, LobsDICE and BC: lower regret on "
        "random tabular MDPs, and higher success on continuous navigation, also under a distorted expert state "
        "representation."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Tabular: our own draw of the official Arbitrary generator (numpy seeds differ from the paper's saved "
        "MDPs); 40 MDPs instead of 10 (power); only the paper's main setting (estimated transitions, empirical "
        "expert occupancy from one 100-step rollout, softmax expert); cvxpy with CLARABEL instead of MOSEK.",
        "Continuous: no D4RL/MuJoCo (no network); a 2-D point mass around a wall with a scripted expert instead of "
        "hopper/halfcheetah/walker2d/ant, success rate instead of D4RL normalised score; smaller networks and "
        "far fewer gradient steps (see the README); OTR and the other LfO baselines of the paper are not run.",
    ),
    scales=("smoke", "quick", "full"),
)
