"""skills-theory reproduction: a tiny smoke run, each analyze rule on hand-made results (supporting and
refuting), and the power of the rules at the seed counts run."""

import math

import numpy as np
import pytest

from icml24.common.experiment import Job, JobResult
from icml24.rl.skills_theory.difficulty import combined_difficulty
from icml24.rl.skills_theory.reproduce import (
    QL,
    REPRODUCTION,
    SLUG,
    analyze,
    best_ratio,
    build_jobs,
    correlation_decision,
    gain_trend_decision,
    power_of_correlation,
    power_of_gain_trend,
    run_measures,
    run_qlearning,
)

N_VARIANTS = 32


def measures_result(env, seed, j_learn, j_explore, incompress):
    n = len(j_learn)
    metrics = {
        "label": ["base"] + [f"v{i}" for i in range(1, n)], "n_actions": [4] * n, "mean_length": [1.0] * n,
        "max_length": [1.0] * n, "j_learn": list(j_learn), "j_explore": list(j_explore),
        "incompressibility": [incompress] * n, "macros": [[]] * n, "n_states": 10, "n_reachable": 10,
        "diameter": 3.0, "start_entropy": 0.0, "distances_never_increase": True, "build_seconds": 0.0,
        "bfs_seconds": 0.0, "explore_seconds": 0.0,
    }  # fmt: skip
    return JobResult(Job(SLUG, "measures", "x:y", {"env": env}, seed), "ok", metrics)


def ql_result(env, seed, variant, steps):
    return JobResult(Job(SLUG, "qlearning", "x:y", {"env": env, "variant": variant}, seed), "ok",
                     {"steps": list(steps), "label": f"v{variant}", "n_actions": 4})  # fmt: skip


ENVS4 = ("cliff", "compile", "8puzzle", "cube")


def synthetic(rng, *, sign=1.0, gains=(0.1, 0.5, 0.9, 0.97), seeds=(0, 1, 2), noise=0.2, envs=ENVS4):
    """Environments (the first ``len(gains)`` of ``envs``) with I_p 0, 0.2, 0.5, 0.8 whose best J ratios are
    ``gains``; Q-learning steps on the first two follow exp(sign * combined difficulty) with log-normal noise.
    J_learn and J_explore move together (as in the real action spaces), so no choice of lambda turns a negative
    relation into a positive one."""
    results = []
    for env, ip, g in zip(envs, (0.0, 0.2, 0.5, 0.8), gains):
        for s in seeds:
            u = rng.uniform(g, 3.0, N_VARIANTS - 1)  # bigger action spaces are harder both ways
            jl = np.concatenate([[50.0], 50.0 * u])
            jl[1 + s] = 50.0 * g
            je = np.concatenate([[6.0], 6.0 * np.sqrt(u) * rng.uniform(0.9, 1.1, N_VARIANTS - 1)])
            je[2 + s] = 6.0 * g
            results.append(measures_result(env, s, jl, je, ip))
            if env in ("cliff", "compile"):
                x = combined_difficulty(jl, je, 0.5)
                for v in range(N_VARIANTS):
                    y = sign * x[v] + 4 + noise * rng.standard_normal(2)
                    results.append(ql_result(env, s, v, np.exp(y)))
    return results


def by_id(analysis):
    return {c.id: c for c in analysis.checks}


def test_supporting_results_are_supported():
    a = analyze(synthetic(np.random.default_rng(0)), "full")
    checks = by_id(a)
    assert checks["qlearning-correlation-cliff"].verdict == "supported"
    assert checks["qlearning-correlation-compile"].verdict == "supported"
    assert checks["gain-vs-incompressibility-jlearn"].verdict == "supported"
    assert checks["gain-vs-incompressibility-jexplore"].verdict == "supported"
    assert not checks["exploration-gains-more-than-learning"].decisive
    assert a.verdict == "supported"


def test_refuting_results_are_not_supported():
    rng = np.random.default_rng(1)
    a = analyze(synthetic(rng, sign=-1.0, gains=(0.97, 0.9, 0.5, 0.1)), "full")
    checks = by_id(a)
    assert checks["qlearning-correlation-cliff"].verdict == "not_supported"
    assert checks["gain-vs-incompressibility-jlearn"].verdict == "not_supported"
    assert a.verdict == "not_supported"


def test_no_effect_is_rarely_supported():
    # steps unrelated to the difficulties: the leave-one-seed-out rule's false-support rate stays near alpha
    said = []
    for k in range(40):
        rng = np.random.default_rng(100 + k)
        pts = [(s, 50 * u, 6 * np.sqrt(u), rng.standard_normal()) for s in range(2)
               for u in rng.uniform(0.2, 3.0, N_VARIANTS)]  # fmt: skip
        said.append(correlation_decision(pts)[0].verdict)
    assert said.count("supported") <= 6


def test_unsolved_runs_are_dropped_and_counted():
    rng = np.random.default_rng(2)
    res = synthetic(rng)
    res = [r if not (r.job.experiment == "qlearning" and r.job.config["variant"] == 5)
           else ql_result(r.job.config["env"], r.job.seed, 5, [math.nan, 10.0]) for r in res]  # fmt: skip
    check = by_id(analyze(res, "full"))["qlearning-correlation-cliff"]
    assert check.evidence.startswith("93/96")


def test_best_ratio():
    assert best_ratio([10.0, 20.0, 5.0, 8.0]) == 0.5
    assert math.isnan(best_ratio([math.nan, 1.0]))


def _env_points(gains, ips=(0.0, 0.2, 0.5, 0.8), seeds=3, spread=0.0, rng=None):
    rng = rng or np.random.default_rng(0)
    return [(f"env{i}", ip, g * math.exp(spread * rng.standard_normal())) for i, (ip, g) in enumerate(zip(ips, gains))
            for _ in range(seeds)]  # fmt: skip


def test_gain_trend_rule_is_exact_on_the_environment_unit():
    """Claim 2 is about I_p, a property of the environment: the unit is the environment, not the macro seed.
    Four environments in the claimed order give the exact p = 1/4! (supported at 0.05), the reverse order
    refutes with the same strength; three environments cannot decide whatever their seed count (p >= 1/6)."""
    up = gain_trend_decision(_env_points((0.1, 0.5, 0.9, 0.97)), "J_learn")
    assert up.verdict == "supported" and up.p_value == pytest.approx(1 / 24) and up.n == 4
    down = gain_trend_decision(_env_points((0.97, 0.9, 0.5, 0.1)), "J_learn")
    assert down.verdict == "not_supported" and down.p_refute == pytest.approx(1 / 24)
    # three environments, 50 seeds each, perfectly ordered: the seeds are not independent evidence about I_p
    three = gain_trend_decision(_env_points((0.1, 0.5, 0.9), ips=(0.0, 0.2, 0.5), seeds=50, spread=0.01), "J")
    assert three.verdict == "inconclusive" and three.p_value == pytest.approx(1 / 6) and three.n == 3
    # one pair out of order among four: p = 4/24, inconclusive
    mixed = gain_trend_decision(_env_points((0.1, 0.5, 0.97, 0.9)), "J")
    assert mixed.verdict == "inconclusive" and mixed.p_value == pytest.approx(4 / 24)
    # the exact p equals scipy's exact permutation test on the per-environment means
    from scipy import stats

    pts = _env_points((0.2, 0.1, 0.9, 0.97, 0.5), ips=(0.0, 0.1, 0.3, 0.6, 0.8), seeds=2, spread=0.1)
    d = gain_trend_decision(pts, "J")
    xs = np.array([0.0, 0.1, 0.3, 0.6, 0.8])
    ys = np.array([np.mean([math.log(g) for e, _, g in pts if e == f"env{i}"]) for i in range(5)])
    ref = stats.permutation_test((xs, ys), lambda a, b: stats.spearmanr(a, b).statistic, permutation_type="pairings",
                                 alternative="greater", n_resamples=np.inf)  # fmt: skip
    assert d.p_value == pytest.approx(ref.pvalue) and d.effect == pytest.approx(stats.spearmanr(xs, ys).statistic)
    with pytest.raises(ValueError, match="share one I_p"):
        gain_trend_decision([("a", 0.0, 0.5), ("a", 0.1, 0.5), ("b", 0.2, 0.9), ("c", 0.5, 1.0)], "J")


def test_quick_cannot_support_claim_2():
    """With quick's three environments claim 2 is inconclusive (stated in the check) even with the claimed order,
    so the overall quick verdict cannot be supported."""
    res = synthetic(np.random.default_rng(0), gains=(0.1, 0.5, 0.9), envs=("cliff", "compile", "8puzzle"))
    a = analyze(res, "quick")
    checks = by_id(a)
    for cid in ("gain-vs-incompressibility-jlearn", "gain-vs-incompressibility-jexplore"):
        assert checks[cid].verdict == "inconclusive" and checks[cid].decisive
        assert "1/3! = 0.167 > 0.05" in checks[cid].evidence and checks[cid].power == 0.0
    assert checks["qlearning-correlation-cliff"].verdict == "supported"
    assert a.verdict == "inconclusive"


def test_power_at_the_seed_counts_run():
    # quick: 2 seeds x 32 action spaces on CliffWalking (fewer if some runs never solve)
    assert power_of_correlation(50, r=0.7) > 0.95
    assert power_of_correlation(50, r=0.0) < 0.1  # false-support rate at no correlation
    # gain trend at quick's points (CliffWalking and CompILE2 x 2 seeds, 8-puzzle x 1): three environments can
    # never reach p < 0.05; at full's (3 seeds each, the cube 1) under the paper's Figure 1 shape the rule needs
    # the 8-puzzle and the cube (both at ratio 1 there) in the right order, so about half the draws support it
    quick_points = [("cliff", 0.0)] * 2 + [("compile", 0.13)] * 2 + [("8puzzle", 0.52)]
    assert power_of_gain_trend(quick_points, sd=0.3) == 0.0
    full_points = [("cliff", 0.0)] * 3 + [("compile", 0.13)] * 3 + [("8puzzle", 0.52)] * 3 + [("cube", 0.81)]
    assert 0.3 < power_of_gain_trend(full_points, sd=0.3) < 0.8
    assert power_of_gain_trend(full_points, sd=0.3, effect=False) < 0.1


def test_jobs_cover_the_scales():
    quick = build_jobs("quick", None)
    assert sum(j.experiment == "qlearning" for j in quick) == 2 * N_VARIANTS
    measures = [j.config["env"] for j in quick if j.experiment == "measures"]
    assert sorted(measures) == ["8puzzle", "cliff", "cliff", "compile", "compile"]
    full = build_jobs("full", None)
    ql = [j.config["env"] for j in full if j.experiment == "qlearning"]
    assert ql.count("cliff") == 3 * N_VARIANTS and ql.count("compile") == 2 * N_VARIANTS
    cube = [j for j in full if j.experiment == "measures" and j.config["env"] == "cube"]
    assert len(cube) == 1 and cube[0].config["sets_per_size"] == 1
    assert REPRODUCTION.jobs("smoke")


def test_tiny_smoke_run():
    results = []
    for s in (0, 1):
        m = run_measures({"env": "cliff", "epsilon": 0.02, "rtol": 1e-3, "sets_per_size": 1}, s)
        assert m["distances_never_increase"] and len(m["j_learn"]) == 12
        results.append(JobResult(Job(SLUG, "measures", "x:y", {"env": "cliff"}, s), "ok", m))
        for v in (0, 3, 5):
            cfg = {"env": "cliff", "variant": v, "sets_per_size": 1, "budget": 4000, "eval_every": 500,
                   "n_runs": 1, "threshold": 0.95, **QL}  # fmt: skip
            results.append(JobResult(Job(SLUG, "qlearning", "x:y", cfg, s), "ok", run_qlearning(cfg, s)))
    a = analyze(results, "smoke")
    assert a.tables and a.verdict in ("supported", "not_supported", "inconclusive")
    # the full-solution macro (hand-picked 3) solves CliffWalking within the small budget
    assert math.isfinite(results[3]["steps"][0] if isinstance(results[3], dict) else results[3].metrics["steps"][0])


@pytest.mark.parametrize("scale", ["smoke", "quick", "full"])
def test_every_job_config_is_json(scale):
    import json

    for j in build_jobs(scale, 1):
        json.dumps(j.config)
