"""COALA's reproduction: each analyze rule on hand-made results (supporting, refuting, undecided), the power
of the rule at the run's seed counts, the forgetting metric, and one real Flower simulation start (a
module-scoped fixture) that must give the same numbers as the in-process Grid."""

from dataclasses import asdict

import numpy as np
import pytest

from icml24.common.decide import power_of_compare
from icml24.common.experiment import Job, JobResult
from icml24.federated.coala import reproduce as rp

GOOD = {"label_iid_accuracy": 0.95, "label_dir0.5_accuracy": 0.92, "label_dir0.1_accuracy": 0.70,
        "label_class2_accuracy": 0.80, "feature_fedavg_accuracy": 0.75, "feature_fedbn_accuracy": 0.82,
        "feature_fedprox_accuracy": 0.75, "semi_accuracy": 0.90, "server_only_accuracy": 0.86,
        "continual_forgetting": 0.80, "continual_kd_forgetting": 0.40, "continual_final_accuracy": 0.15,
        "continual_kd_final_accuracy": 0.35}  # fmt: skip


def _results(n=5, noise=0.005, **shift):
    rng = np.random.default_rng(0)
    out = []
    for s in range(n):
        m = {k: v + shift.get(k, 0.0) + noise * rng.standard_normal() for k, v in GOOD.items()}
        for a in rp.FEATURE_ALGOS:
            for d in rp.DOMAINS:
                m[f"feature_{a}_{d}_accuracy"] = m[f"feature_{a}_accuracy"]
        job = Job(rp.SLUG, "scenarios", "icml24.federated.coala.reproduce:run_scenarios",
                  {"spec": asdict(rp.SCALES["quick"]), "engine": "simulation"}, s)  # fmt: skip
        out.append(JobResult(job, "ok", m))
    return out


def _verdicts(analysis):
    return {c.id: c.verdict for c in analysis.checks}


def test_supporting_results_give_supported():
    a = rp.analyze(_results(), "quick")
    assert a.verdict == "supported", _verdicts(a)
    assert set(_verdicts(a)) == {c[0] for c in rp.CHECKS} | {"forgetting-positive"}
    assert len(a.tables) == 3 and a.figures


def test_fedavg_beating_fedbn_refutes():
    a = rp.analyze(_results(feature_fedbn_accuracy=-0.15), "quick")
    assert _verdicts(a)["fedbn-above-fedavg"] == "not_supported"
    assert a.verdict == "not_supported" and "fedbn-above-fedavg" in a.decided_by


def test_semi_fl_is_reported_only_and_cannot_decide_the_verdict():
    """Withdrawn from the verdict (issue 42: our semi-FL lacks COALA's augmentation and mixup): a refuted semi-FL
    check leaves the verdict to the other six, and a supported one cannot carry an undecided rest."""
    a = rp.analyze(_results(noise=0.001, semi_accuracy=-0.10), "quick")
    checks = {c.id: c for c in a.checks}
    assert (
        checks["semi-above-server-only"].verdict == "not_supported"
        and not checks["semi-above-server-only"].decisive
    )
    assert (
        "Reported only" in checks["semi-above-server-only"].claim
        and "augmentation" in checks["semi-above-server-only"].claim
    )
    assert a.verdict == "supported" and "semi-above-server-only" not in a.decided_by
    assert sum(c.decisive for c in a.checks) == 6


def test_no_semi_gain_is_refuted_by_equivalence_not_by_absence():
    # Semi-FL equal to server-only within 0.3 points on every seed: TOST shows no effect -> not_supported.
    a = rp.analyze(_results(noise=0.001, semi_accuracy=-0.04), "quick")
    assert _verdicts(a)["semi-above-server-only"] == "not_supported"
    # The same mean gap with seed-to-seed noise far above the margin: undecided, not refuted.
    b = rp.analyze(_results(n=3, noise=0.05, semi_accuracy=-0.04), "quick")
    assert _verdicts(b)["semi-above-server-only"] == "inconclusive"


def test_kd_forgetting_more_refutes_and_no_forgetting_refutes():
    a = rp.analyze(_results(continual_kd_forgetting=0.5), "quick")
    assert _verdicts(a)["kd-reduces-forgetting"] == "not_supported"
    b = rp.analyze(_results(noise=0.001, continual_forgetting=-0.80, continual_kd_forgetting=-0.40), "quick")
    assert _verdicts(b)["forgetting-positive"] == "not_supported"


def test_label_ordering_reversed_refutes():
    a = rp.analyze(_results(**{"label_dir0.1_accuracy": 0.30}), "quick")
    assert _verdicts(a)["dir0.5-above-dir0.1"] == "not_supported"


def test_analyze_copes_with_no_results():
    a = rp.analyze([], "quick")
    assert a.verdict == "inconclusive"


@pytest.mark.parametrize("scale", ["quick", "full"])
def test_power_at_the_runs_seed_count(scale):
    """A 3-point gap with a 1-point seed-to-seed sd of the paired gaps (what the pilots showed for the label
    orderings and FedBN) is detected at the run's seed count; with no gap the rule rarely says supported."""
    n = rp.DEFAULT_SEEDS[scale]
    p = power_of_compare(rp.EFFECT_OF_INTEREST, 0.01, n, paired=True, alternative="greater",
                         equivalence_margin=rp.EQUIVALENCE, n_sims=500, seed=1)  # fmt: skip
    assert p.supported >= 0.8, p.describe()
    null = power_of_compare(0.0, 0.01, n, paired=True, alternative="greater",
                            equivalence_margin=rp.EQUIVALENCE, n_sims=500, seed=2)  # fmt: skip
    assert null.supported <= 0.07, null.describe()
    # The closed form analyze reports agrees with the simulation of the rule itself (500 runs: sd <= 0.022).
    assert rp.check_power(rp.EFFECT_OF_INTEREST, 0.01, n, "greater") == pytest.approx(p.supported, abs=0.07)
    sim_less = power_of_compare(-0.02, 0.02, n, paired=True, alternative="less", equivalence_margin=rp.EQUIVALENCE,
                                n_sims=500, seed=3)  # fmt: skip
    assert rp.check_power(0.02, 0.02, n, "less") == pytest.approx(sim_less.supported, abs=0.07)


def test_forgetting_closed_form():
    a = [[1.0], [0.6, 0.9], [0.2, 0.5, 0.8]]
    # task 0: max(1.0, 0.6) - 0.2 = 0.8; task 1: 0.9 - 0.5 = 0.4
    assert rp.forgetting(a) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="accuracy"):
        rp.forgetting([[1.0]])


def test_jobs_per_scale():
    quick = rp.REPRODUCTION.jobs("quick")
    assert [j.experiment for j in quick].count("scenarios") == 3
    assert sorted(j.config["num_supernodes"] for j in quick if j.experiment == "throughput") == [20, 100]
    assert all(j.config["engine"] == "in_process" for j in rp.REPRODUCTION.jobs("smoke"))


pytest.importorskip("flwr")
pytest.importorskip("ray")


@pytest.fixture(scope="module")
def simulated_and_in_process():
    """The one Flower simulation start of this module: the smoke scenarios of seed 0 in the simulation
    engine, and the same in process."""
    cfg = {"spec": asdict(rp.SCALES["smoke"])}
    sim = rp.run_scenarios({**cfg, "engine": "simulation"}, 0)
    local = rp.run_scenarios({**cfg, "engine": "in_process"}, 0)
    return sim, local


@pytest.mark.slow
def test_simulation_engine_gives_the_in_process_numbers(simulated_and_in_process):
    from icml24.common.experiment import deterministic_metrics

    sim, local = simulated_and_in_process
    det_sim, det_local = deterministic_metrics(sim), deterministic_metrics(local)
    assert set(det_sim) == set(det_local) and "label_iid_accuracy" in det_sim
    for k, v in det_local.items():
        assert det_sim[k] == pytest.approx(v, abs=1e-12), k


# ------------------------------------------------------------------------------------------------------
# Power of each decisive check and of the whole "all" rule at the full scale's seed count, by simulating
# analyze's own checks (rp.decide_checks + decide.combine) on synthetic per-seed results. The sds are the
# seed-to-seed sds of the per-seed gaps in the full-scale run the README reports (10 seeds); the README's
# "Could this have failed?" line quotes the powers asserted here.
# ------------------------------------------------------------------------------------------------------

FULL_GAP_SD = {"iid-above-dir0.5": 0.050, "dir0.5-above-dir0.1": 0.231, "dir0.5-above-class2": 0.118,
               "fedbn-above-fedavg": 0.031, "semi-above-server-only": 0.077, "forgetting-positive": 0.099,
               "kd-reduces-forgetting": 0.132}  # fmt: skip
"""Seed-to-seed sd of each check's per-seed gap (forgetting-positive: of the forgetting itself)."""
OF_INTEREST = {cid: (rp.FORGETTING_OF_INTEREST if "forgetting" in cid else rp.EFFECT_OF_INTEREST)
               for cid in FULL_GAP_SD}  # fmt: skip
MEASURED = {"iid-above-dir0.5": 0.056, "dir0.5-above-dir0.1": 0.327, "dir0.5-above-class2": 0.126,
            "fedbn-above-fedavg": 0.078, "semi-above-server-only": rp.EFFECT_OF_INTEREST, "forgetting-positive": 0.884,
            "kd-reduces-forgetting": 0.426}  # fmt: skip
"""The mean gaps of that run, except semi-FL's (measured -0.041: the claim's side is set to a 3-point gain)."""
README_POWER = {"iid-above-dir0.5": 0.54, "dir0.5-above-dir0.1": 0.10, "dir0.5-above-class2": 0.18,
                "fedbn-above-fedavg": 0.88, "semi-above-server-only": 0.31, "forgetting-positive": 0.90,
                "kd-reduces-forgetting": 0.71}  # fmt: skip
"""The README's per-check powers at a 3-point gap (0.1 forgetting) at 10 seeds."""


def _gap_results(effects: dict, sds: dict, n: int, rng: np.random.Generator) -> list[JobResult]:
    """n seeds whose check gaps are independent normals (effect in the claimed direction, sd as given)."""
    out = []
    for s in range(n):
        g = {cid: effects[cid] + sds[cid] * rng.standard_normal() for cid in sds}
        m = {"label_dir0.5_accuracy": 0.9, "label_iid_accuracy": 0.9 + g["iid-above-dir0.5"],
             "label_dir0.1_accuracy": 0.9 - g["dir0.5-above-dir0.1"],
             "label_class2_accuracy": 0.9 - g["dir0.5-above-class2"],
             "feature_fedavg_accuracy": 0.7, "feature_fedbn_accuracy": 0.7 + g["fedbn-above-fedavg"],
             "server_only_accuracy": 0.85, "semi_accuracy": 0.85 + g["semi-above-server-only"],
             "continual_forgetting": g["forgetting-positive"],
             "continual_kd_forgetting": g["forgetting-positive"] - g["kd-reduces-forgetting"]}  # fmt: skip
        job = Job(rp.SLUG, "scenarios", "icml24.federated.coala.reproduce:run_scenarios", {}, s)
        out.append(JobResult(job, "ok", m))
    return out


DECISIVE = [cid for cid in FULL_GAP_SD if cid not in rp.REPORTED_ONLY]


def _simulated_power(effects: dict, n: int, n_sims: int, seed: int) -> tuple[dict, float]:
    """Share of simulated runs in which each check, and the all-rule, says supported."""
    from icml24.common.decide import combine

    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(FULL_GAP_SD, 0)
    all_hits = 0
    for _ in range(n_sims):
        checks = rp.decide_checks(_gap_results(effects, FULL_GAP_SD, n, rng))
        for c in checks:
            hits[c.id] += c.verdict == "supported"
        all_hits += combine(checks, "all")[0] == "supported"
    return {cid: h / n_sims for cid, h in hits.items()}, all_hits / n_sims


def test_power_of_each_check_and_of_the_all_rule_at_full_scale():
    n = rp.DEFAULT_SEEDS["full"]
    assert n == 10  # the README's powers are stated at 10 seeds
    per_check, all_rule = _simulated_power(OF_INTEREST, n, n_sims=300, seed=7)
    closed = {cid: rp.check_power(OF_INTEREST[cid], FULL_GAP_SD[cid], n, "greater") for cid in FULL_GAP_SD}
    for cid in FULL_GAP_SD:  # 300 runs: sd of a simulated power <= 0.03
        assert closed[cid] == pytest.approx(README_POWER[cid], abs=0.006), cid
        assert per_check[cid] == pytest.approx(closed[cid], abs=0.08), (cid, per_check[cid], closed[cid])
    # Independent gaps: the all-rule's power is the product of the decisive checks' (semi-FL is reported only;
    # README: about 0.006 at 3 points).
    assert all_rule == pytest.approx(float(np.prod([closed[c] for c in DECISIVE])), abs=0.03)
    assert all_rule < 0.04
    # At the measured gaps the all-rule's power is about 0.87.
    _, at_measured = _simulated_power(MEASURED, n, n_sims=300, seed=9)
    closed_measured = [rp.check_power(MEASURED[cid], FULL_GAP_SD[cid], n, "greater") for cid in DECISIVE]
    assert float(np.prod(closed_measured)) == pytest.approx(0.87, abs=0.01)
    assert at_measured == pytest.approx(0.87, abs=0.08)
    # With no effect anywhere the rule never says supported (false support of one check <= alpha).
    _, null_all = _simulated_power(dict.fromkeys(FULL_GAP_SD, 0.0), n, n_sims=50, seed=8)
    assert null_all == 0.0
