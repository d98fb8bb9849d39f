"""Miniature reproduction of COALA (Zhuang et al., ICML 2024, https://arxiv.org/abs/2407.16560).

Claim (Sections 5.2-5.4, as directions; the paper's tables were not retrieved): on the platform's practical
scenarios, FedAvg's accuracy falls as label skew grows (IID above Dirichlet 0.5 above Dirichlet 0.1 and two
classes per client); under feature shift FedBN's local batch norm beats FedAvg; label-in-server
semi-supervised FL beats training on the server's labels alone; class-incremental FL forgets, and the
distillation (KD) variant forgets less.

Setting (CPU): scikit-learn digits (8x8) as the miniature dataset, LeNetTiny, every scenario as a Flower
experiment (Message API) in Flower's simulation engine. One job per seed runs *all* scenarios inside one
simulation start (Ray's start-up and actor warm-up cost several seconds on the shared 2-core machine; one
start per seed instead of one per scenario): label shift (20 SuperNodes, 5 per round), Digits-4 feature
shift (8 clients, 2 per domain, all per round; FedAvg, FedBN, FedProx), label-in-server semi-FL (5 labels per
class on the server) against the server-only model trained with the same server epochs, and 5-task
class-incremental FL with and without KD. A throughput job measures rounds per second of the simulation at
20 and 100 SuperNodes against the in-process Grid (same strategy, same ClientApp, no Ray).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from icml24.common.experiment import (
    Analysis,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    metric_values,
    new_figure,
    numeric_cell,
    seeds_for,
)

SLUG = "coala"
DEFAULT_SEEDS = {"smoke": 2, "quick": 3, "full": 10}
"""Seeds per scale. Full runs 10 (5 left IID vs Dirichlet 0.5 undecided at power 0.4 for a 3-point gap);
the README's "Could this have failed?" states each decisive check's power and the all-rule's at 10 seeds."""
LABEL_SCENARIOS: dict[str, dict] = {
    "iid": {"split-type": "iid"},
    "dir0.5": {"split-type": "dir", "alpha": 0.5},
    "dir0.1": {"split-type": "dir", "alpha": 0.1},
    "class2": {"split-type": "class", "classes-per-client": 2},
}
LABEL_NAMES = {
    "iid": "IID",
    "dir0.5": "Dirichlet 0.5",
    "dir0.1": "Dirichlet 0.1",
    "class2": "2 classes/client",
}
FEATURE_ALGOS = ("fedavg", "fedbn", "fedprox")
FEATURE_NAMES = {"fedavg": "FedAvg", "fedbn": "FedBN", "fedprox": "FedProx"}
DOMAINS = ("original", "inverted", "rotated", "noisy")

EFFECT_OF_INTEREST = 0.03
"""Accuracy gap (3 points) at which the power of the ordering, FedBN and semi-FL checks is stated: the
paper's own numbers were not retrieved, so the power is given for an effect we would call a clear ordering."""
FORGETTING_OF_INTEREST = 0.10
"""Forgetting (and reduction of forgetting) at which the power of the continual checks is stated."""
EQUIVALENCE = 0.01
"""not_supported also follows from a TOST showing the gap within +-1 accuracy point (no effect)."""


@dataclass(frozen=True)
class ScaleSpec:
    """The size of one seed's federation; presets in :data:`SCALES`."""

    label_rounds: int
    """Rounds of each label-shift run (20 clients, ``label_clients_per_round`` per round)."""
    label_clients_per_round: int
    """Clients per round of the label-shift and semi-supervised runs."""
    feature_rounds: int
    """Rounds of each feature-shift run (8 clients, all per round)."""
    semi_rounds: int
    """Rounds of the semi-supervised run (and server epochs-blocks of the server-only baseline)."""
    continual_rounds_per_task: int
    """FedAvg rounds per class-incremental task (5 tasks of 2 classes)."""
    continual_clients_per_round: int
    """Clients per round of the continual runs."""
    throughput_rounds: int
    """Rounds timed per driver and federation size in the throughput job (0: no throughput job)."""


SCALES: dict[str, ScaleSpec] = {
    "smoke": ScaleSpec(2, 2, 1, 1, 1, 2, 0),
    "quick": ScaleSpec(15, 5, 10, 10, 2, 5, 5),
    "full": ScaleSpec(25, 5, 15, 15, 4, 10, 10),
}
"""``smoke`` runs on the in-process Grid (the contract tests run it in the default suite; Ray's start-up
would dominate), ``quick`` and ``full`` in Flower's simulation engine."""
NUM_SUPERNODES = 20
FEATURE_CLIENTS = 8
LOCAL = {"local-epoch": 1, "batch-size": 32, "lr": 0.05, "momentum": 0.9}
SEMI = {"labels-per-class": 5, "pseudo-label-threshold": 0.8, "local-epoch": 2, "server-epochs": 2}
CONTINUAL = {"local-epoch": 2, "kd-alpha": 1.0, "kd-temperature": 2.0}
PROXIMAL_MU = 0.01


# ------------------------------------------------------------------------------------------------------
# Jobs
# ------------------------------------------------------------------------------------------------------


def forgetting(accuracy: Sequence[Sequence[float]]) -> float:
    """Average forgetting of a class-incremental run: ``mean_{j < T} max_{j <= t < T} a[t][j] - a[T][j]``
    over the tasks before the last (``a[t][j]``: accuracy on task ``j`` after training task ``t``)."""
    a = [list(row) for row in accuracy]
    t_last = len(a) - 1
    if t_last < 1:
        raise ValueError("accuracy must hold at least two tasks' rows")
    return float(np.mean([max(a[t][j] for t in range(j, t_last)) - a[t_last][j] for j in range(t_last)]))


def _experiments(spec: ScaleSpec, seed: int, federation, task):
    from flwr.app import MetricRecord

    from icml24.federated.coala.data import task_splits
    from icml24.federated.coala.flower import (
        CoalaFedAvg,
        CoalaFedProx,
        ContinualRun,
        FederatedRun,
        SemiSupervisedFedAvg,
        _load_state,
    )
    from icml24.federated.coala.models import bn_state_keys
    from icml24.federated.coala.task import LocalTraining

    def server_eval(scenario, rounds):
        sd = federation.server_data(scenario, NUM_SUPERNODES)

        def ev(r, arrays):
            if r != rounds:  # test in server after the last round only
                return None
            m = task.build_model()
            _load_state(m, arrays)
            return MetricRecord({"accuracy": task.evaluate(m, sd.x_test, sd.y_test)["accuracy"]})

        return ev

    data = {"data-seed": seed}
    exps = []
    for name, sc in LABEL_SCENARIOS.items():
        scenario = {**data, **sc}
        exps.append(FederatedRun(f"label-{name}", CoalaFedAvg(clients_per_round=spec.label_clients_per_round,
                                                              seed=seed), spec.label_rounds,
                                 {**LOCAL, **scenario}, evaluate_fn=server_eval(scenario, spec.label_rounds), seed=seed))  # fmt: skip
    keys = bn_state_keys(task.build_model())
    fs = {**LOCAL, **data, "feature-shift": True}
    common = {"clients_per_round": FEATURE_CLIENTS, "evaluate_clients": True, "num_partitions": FEATURE_CLIENTS,
              "seed": seed}  # fmt: skip
    exps += [FederatedRun("feature-fedavg", CoalaFedAvg(**common), spec.feature_rounds, fs, seed=seed),
             FederatedRun("feature-fedbn", CoalaFedAvg(local_keys=keys, **common), spec.feature_rounds, fs, seed=seed),
             FederatedRun("feature-fedprox", CoalaFedProx(proximal_mu=PROXIMAL_MU, **common), spec.feature_rounds, fs,
                          seed=seed)]  # fmt: skip
    semi_sc = {**data, "labels-per-class": SEMI["labels-per-class"]}
    sd = federation.server_data(semi_sc, NUM_SUPERNODES)
    server_training = LocalTraining(local_epoch=SEMI["server-epochs"])
    exps.append(FederatedRun("semi", SemiSupervisedFedAvg(task=task, x_labeled=sd.x_labeled, y_labeled=sd.y_labeled,
                                                          server_training=server_training,
                                                          clients_per_round=spec.label_clients_per_round, seed=seed),
                             spec.semi_rounds, {**LOCAL, **semi_sc, "local-epoch": SEMI["local-epoch"],
                                                "pseudo-label-threshold": SEMI["pseudo-label-threshold"]},
                             evaluate_fn=server_eval(semi_sc, spec.semi_rounds), seed=seed))  # fmt: skip
    test = federation.server_data(data, NUM_SUPERNODES)

    def task_eval(classes, seen, arrays):
        m = task.build_model()
        _load_state(m, arrays)
        keep = np.isin(test.y_test, classes)
        return task.evaluate(m, test.x_test[keep], test.y_test[keep], classes=seen)["accuracy"]

    cl = {
        **LOCAL,
        **data,
        "local-epoch": CONTINUAL["local-epoch"],
        "kd-temperature": CONTINUAL["kd-temperature"],
    }
    for name, kd in (("continual", 0.0), ("continual-kd", CONTINUAL["kd-alpha"])):
        exps.append(ContinualRun(name, CoalaFedAvg(clients_per_round=spec.continual_clients_per_round, seed=seed),
                                 task_splits(), spec.continual_rounds_per_task, dict(cl), task_eval, kd_alpha=kd,
                                 seed=seed))  # fmt: skip
    return exps, sd, server_training


def _server_only(task, sd, server_training, rounds: int, seed: int) -> float:
    """The server-only baseline: the same server epochs on the same labels, from the same initial model."""
    import torch

    torch.manual_seed(seed)
    model = task.build_model()
    for r in range(1, rounds + 1):  # SemiSupervisedFedAvg's server seed of round r
        task.fit(model, sd.x_labeled, sd.y_labeled, server_training, seed=seed * 7919 + r)
    return task.evaluate(model, sd.x_test, sd.y_test)["accuracy"]


def run_scenarios(config: dict, seed: int) -> dict:
    """All scenarios of one seed in one Flower federation (``engine``: ``simulation`` or ``in_process``)."""
    import torch

    from icml24.federated.coala.data import DigitsFederation
    from icml24.federated.coala.flower import run_coala_simulation, run_in_process
    from icml24.federated.coala.task import ClassificationTask

    torch.set_num_threads(1)
    spec = ScaleSpec(**config["spec"])
    federation, task = DigitsFederation(), ClassificationTask()
    exps, sd, server_training = _experiments(spec, seed, federation, task)
    t0 = time.perf_counter()
    if config.get("engine", "simulation") == "simulation":
        out = run_coala_simulation(exps, num_supernodes=NUM_SUPERNODES, task=task, federation=federation)
    else:
        out = run_in_process(exps, num_supernodes=NUM_SUPERNODES, task=task, federation=federation)
    metrics: dict = {"wall_seconds": time.perf_counter() - t0}
    for name in LABEL_SCENARIOS:
        metrics[f"label_{name}_accuracy"] = out[f"label-{name}"]["server"][spec.label_rounds]["accuracy"]
    for algo in FEATURE_ALGOS:
        per_client = out[f"feature-{algo}"]["clients"][spec.feature_rounds]
        per_domain = [float(np.mean([per_client[k]["accuracy"] for k in range(FEATURE_CLIENTS)
                                     if k * len(DOMAINS) // FEATURE_CLIENTS == d])) for d in range(len(DOMAINS))]  # fmt: skip
        metrics[f"feature_{algo}_accuracy"] = float(np.mean(per_domain))
        for d, dom in enumerate(DOMAINS):
            metrics[f"feature_{algo}_{dom}_accuracy"] = per_domain[d]
    metrics["semi_accuracy"] = out["semi"]["server"][spec.semi_rounds]["accuracy"]
    metrics["server_only_accuracy"] = _server_only(task, sd, server_training, spec.semi_rounds, seed)
    for name, key in (("continual", "continual"), ("continual-kd", "continual_kd")):
        acc = out[name]["accuracy"]
        metrics[f"{key}_forgetting"] = forgetting(acc)
        metrics[f"{key}_final_accuracy"] = float(np.mean(acc[-1]))
    # The defences against bad clients (issue 42) must leave honest runs alone: count what they did.
    metrics["clients_dropped"] = sum(len(v) for e in exps for v in e.strategy.rejected_.values())
    metrics["clients_capped"] = sum(len(v) for e in exps for v in e.strategy.capped_.values())
    ratios = [x for e in exps for v in e.strategy.update_ratios_.values() for x in v]
    metrics["max_update_norm_ratio"] = max(ratios) if ratios else math.nan
    rounds = sum(int(out[e.name]["rounds"]) for e in exps)
    sim_seconds = sum(float(out[e.name]["seconds"]) for e in exps)
    metrics["rounds_total"] = rounds
    metrics["all_scenarios_rounds_per_s"] = rounds / sim_seconds if sim_seconds > 0 else math.nan
    return metrics


def run_throughput(config: dict, seed: int) -> dict:
    """Rounds per second of FedAvg (25% of the SuperNodes per round, one local epoch on IID digits) in
    Flower's simulation engine and on the in-process Grid, at ``config["num_supernodes"]`` SuperNodes, after
    a one-round warm-up in the same federation."""
    import torch

    from icml24.federated.coala.flower import CoalaFedAvg, FederatedRun, run_coala_simulation, run_in_process

    torch.set_num_threads(1)
    n, rounds = int(config["num_supernodes"]), int(config["rounds"])
    out: dict = {"cpu_count": os.cpu_count() or 0, "load_1min": os.getloadavg()[0]}
    for engine, fn in (("sim", run_coala_simulation), ("inproc", run_in_process)):
        # A one-round warm-up in the same federation first (Ray actors, imports, data caches), then the
        # timed run: rounds per second of a warm federation; the start-up shows in the total.
        exps = [FederatedRun(name, CoalaFedAvg(clients_per_round=max(n // 4, 1), seed=seed), r,
                             {**LOCAL, "split-type": "iid", "data-seed": seed}, seed=seed)
                for name, r in (("warmup", 1), ("fedavg", rounds))]  # fmt: skip
        t0 = time.perf_counter()
        res = fn(exps, num_supernodes=n)
        out[f"{engine}_total_seconds"] = time.perf_counter() - t0
        out[f"{engine}_rounds_per_s"] = rounds / res["fedavg"]["seconds"]
    out["sim_slowdown_ratio_seconds"] = out["inproc_rounds_per_s"] / out["sim_rounds_per_s"]
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    spec = SCALES[scale]
    engine = "in_process" if scale == "smoke" else "simulation"
    jobs = [Job(SLUG, "scenarios", f"{__name__}:run_scenarios", {"spec": asdict(spec), "engine": engine}, s)
            for s in seeds_for(scale, seeds, DEFAULT_SEEDS)]  # fmt: skip
    if spec.throughput_rounds:
        jobs += [Job(SLUG, "throughput", f"{__name__}:run_throughput",
                     {"num_supernodes": n, "rounds": spec.throughput_rounds}, 0) for n in (20, 100)]  # fmt: skip
    return jobs


# ------------------------------------------------------------------------------------------------------
# Analysis
# ------------------------------------------------------------------------------------------------------

CHECKS: tuple[tuple[str, str, str, str, str], ...] = (
    # id, claim, method metric, baseline metric, alternative
    ("iid-above-dir0.5", "FedAvg: IID above Dirichlet 0.5", "label_iid_accuracy", "label_dir0.5_accuracy", "greater"),
    ("dir0.5-above-dir0.1", "FedAvg: Dirichlet 0.5 above Dirichlet 0.1", "label_dir0.5_accuracy",
     "label_dir0.1_accuracy", "greater"),
    ("dir0.5-above-class2", "FedAvg: Dirichlet 0.5 above 2 classes per client", "label_dir0.5_accuracy",
     "label_class2_accuracy", "greater"),
    ("fedbn-above-fedavg", "Feature shift: FedBN above FedAvg (mean per-domain accuracy)", "feature_fedbn_accuracy",
     "feature_fedavg_accuracy", "greater"),
    ("semi-above-server-only", "Label-in-server semi-supervised FL above the server-only model", "semi_accuracy",
     "server_only_accuracy", "greater"),
    ("kd-reduces-forgetting", "Class-incremental FL: the KD variant forgets less", "continual_kd_forgetting",
     "continual_forgetting", "less"),
)  # fmt: skip


REPORTED_ONLY = {
    "semi-above-server-only": "withdrawn from the verdict: our label-in-server client pseudo-labels without "
    "COALA's SemiFL ingredients (strong augmentation, mixup, static batch norm), so it does not test the "
    "paper's semi-supervised method",
}
"""Checks that are computed and reported but do not decide the verdict, with the reason."""


def _paired(results: Sequence[JobResult], a: str, b: str) -> tuple[list[float], list[float]]:
    rows = [r for r in results if a in r.metrics and b in r.metrics]
    return [float(r.metrics[a]) for r in rows], [float(r.metrics[b]) for r in rows]


def check_power(effect: float, sd: float, n: int, alternative: str) -> float | None:
    """Power of a decisive check: the chance that the one-sided paired t-test at alpha 0.05 says supported
    at ``n`` seeds when the true gap is ``effect`` (in the claimed direction) and the per-seed gaps have
    standard deviation ``sd``: ``1 - F_nct(t_crit; n - 1, effect sqrt(n) / sd)``, exact for normal gaps (the
    TOST refutation cannot turn a supported call; tests check this against :func:`power_of_compare`)."""
    from scipy import stats

    if n < 2 or not (math.isfinite(sd) and sd > 0):
        return None
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    t_crit = stats.t.ppf(0.95, n - 1)
    return float(stats.nct.sf(t_crit, n - 1, abs(effect) * math.sqrt(n) / sd))


def decide_checks(results: Sequence[JobResult]) -> list:
    """The decisive sub-claims: one paired comparison over seeds per ordering, plus forgetting > 0."""
    from icml24.common.decide import compare

    checks = []
    for cid, claim, a, b, alt in CHECKS:
        x, y = _paired(results, a, b)
        d = compare(x, y, paired=True, alternative=alt, equivalence_margin=EQUIVALENCE,
                    effect_name=f"mean per-seed difference ({a} - {b})")  # fmt: skip
        gaps = np.asarray(x) - np.asarray(y)
        sd = float(np.std(gaps, ddof=1)) if gaps.size > 1 else math.nan
        size = FORGETTING_OF_INTEREST if "forgetting" in a else EFFECT_OF_INTEREST
        pw = check_power(size, sd, gaps.size, alt)
        check = d.to_check(id=cid, claim=claim, power=pw,
                           evidence=f"{gaps.size} seeds; power at a true gap of {size:g} with the observed "
                                    f"sd {sd:.3f}: {'n/a' if pw is None else f'{pw:.2f}'}")  # fmt: skip
        if cid in REPORTED_ONLY:
            check = replace(check, decisive=False, claim=f"Reported only: {claim} ({REPORTED_ONLY[cid]})")
        checks.append(check)
    f = metric_values(list(results), "continual_forgetting")
    # Forgetting against zero, with the TOST refutation (no forgetting within +-0.01) kept symmetric.
    d = compare(f, [0.0] * len(f), paired=True, alternative="greater", equivalence_margin=EQUIVALENCE,
                effect_name="mean forgetting of plain FedAvg (accuracy lost, 0-1)")  # fmt: skip
    sd = float(np.std(f, ddof=1)) if len(f) > 1 else math.nan
    pw = check_power(FORGETTING_OF_INTEREST, sd, len(f), "greater")
    checks.insert(len(CHECKS) - 1, d.to_check(id="forgetting-positive", claim="Class-incremental FL forgets "
                                              "(average forgetting > 0)", power=pw))  # fmt: skip
    return checks


def _cell(results, key):
    return numeric_cell(metric_values(list(results), key))


def _figure(results: Sequence[JobResult]) -> Figure:
    from icml24.common.plotting import label_axes, plot_mean_errorbar, spread_caption

    fig, ax = new_figure(1, 2, width=4.6, height=3.4)
    label = [metric_values(list(results), f"label_{k}_accuracy") for k in LABEL_SCENARIOS]
    plot_mean_errorbar(ax[0][0], [LABEL_NAMES[k] for k in LABEL_SCENARIOS], np.asarray(label), "FedAvg")
    label_axes(ax[0][0], "label split", "test accuracy", title="Label shift")
    feat = [metric_values(list(results), f"feature_{k}_accuracy") for k in FEATURE_ALGOS]
    plot_mean_errorbar(ax[0][1], [FEATURE_NAMES[k] for k in FEATURE_ALGOS], np.asarray(feat), "Digits-4")
    label_axes(ax[0][1], "algorithm", "mean per-domain accuracy", title="Feature shift")
    n = len(label[0])
    return Figure("Label shift and feature shift", figure_png(fig),
                  f"Accuracy after the last round; {spread_caption('std', n, kind='error bars')}.")  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import analysis

    scen = [r for r in results if r.job.experiment == "scenarios" and r.status == "ok"]
    thr = sorted((r for r in results if r.job.experiment == "throughput" and r.status == "ok"),
                 key=lambda r: r.job.config["num_supernodes"])  # fmt: skip
    checks = decide_checks(scen)
    tables = [
        Table("Label shift (FedAvg, 20 clients, 5 per round): test accuracy",
              ["split", "accuracy"], [[LABEL_NAMES[k], _cell(scen, f"label_{k}_accuracy")] for k in LABEL_SCENARIOS],
              note="after the last round, on the central test set (test in server)"),
        Table("Feature shift (Digits-4, 8 clients, 2 per domain): accuracy per domain",
              ["algorithm", "mean", *DOMAINS],
              [[FEATURE_NAMES[a], _cell(scen, f"feature_{a}_accuracy"),
                *[_cell(scen, f"feature_{a}_{d}_accuracy") for d in DOMAINS]] for a in FEATURE_ALGOS],
              note="each client tests on its domain's test share with its own model (FedBN: its local batch "
                   "norm)"),
        Table("Semi-supervised (label in server, 5 labels per class) and class-incremental FL (5 tasks)",
              ["setting", "value"],
              [["semi-supervised FL accuracy", _cell(scen, "semi_accuracy")],
               ["server-only accuracy", _cell(scen, "server_only_accuracy")],
               ["forgetting, FedAvg", _cell(scen, "continual_forgetting")],
               ["forgetting, FedAvg + KD", _cell(scen, "continual_kd_forgetting")],
               ["final average accuracy, FedAvg", _cell(scen, "continual_final_accuracy")],
               ["final average accuracy, FedAvg + KD", _cell(scen, "continual_kd_final_accuracy")]],
              note="forgetting = mean over the first 4 tasks of (best earlier accuracy - final accuracy) on that "
                   "task; accuracies over the classes seen so far"),
    ]  # fmt: skip
    if any("clients_dropped" in r.metrics for r in scen):
        tables.append(Table("Reply checks on honest clients (per seed, every scenario)", ["seed", "clients dropped",
                            "weights capped", "largest update norm / round median"],
                            [[r.job.seed, r.metrics.get("clients_dropped", "-"), r.metrics.get("clients_capped", "-"),
                              f"{r.metrics.get('max_update_norm_ratio', math.nan):.2f}"] for r in scen],
                            note="the server drops a reply with a bad model or count, caps a weight at 10x the "
                                 "round's median count and drops an update above 100x the round's median norm; "
                                 "on honest clients it should do nothing"))  # fmt: skip
    if thr:
        rows = [[r.job.config["num_supernodes"], f"{r.metrics['sim_rounds_per_s']:.2f}",
                 f"{r.metrics['inproc_rounds_per_s']:.2f}", f"{r.metrics['sim_slowdown_ratio_seconds']:.1f}x",
                 f"{r.metrics['sim_total_seconds']:.1f}", f"{r.metrics['load_1min']:.1f}"] for r in thr]  # fmt: skip
        tables.append(Table("Throughput: FedAvg rounds per second (25% of SuperNodes per round)",
                            ["SuperNodes", "simulation (Ray)", "in-process Grid", "simulation time / in-process",
                             "simulation incl. start (s)", "load (1 min)"], rows,
                            note="one run each, side by side in one job, Ray with one CPU; load is the machine's "
                                 "1-minute load average at the start"))  # fmt: skip
    figures = [_figure(scen)] if scen else []
    verdicts = "; ".join(f"{c.id}: {c.verdict}" for c in checks)
    engines = {r.job.config.get("engine", "simulation") for r in scen}
    where = ("one Flower simulation start per seed" if engines == {"simulation"}
             else "the in-process Grid (no Ray)" if engines == {"in_process"} else "mixed drivers")  # fmt: skip
    summary = (
        f"{len(scen)} seeds at scale {scale}, every scenario of a seed in {where}. Sub-claims: {verdicts}."
    )
    return analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "On COALA's practical scenarios: FedAvg's accuracy falls with label skew (IID > Dirichlet 0.5 > "
        "Dirichlet 0.1 and 2 classes per client); FedBN beats FedAvg under feature shift; label-in-server "
        "semi-supervised FL beats the server-only model; class-incremental FL forgets and KD reduces it."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Dataset and model: scikit-learn digits (8x8, 1,797 images) and a 14k-parameter LeNet with batch norm "
        "instead of CIFAR-10/100, Digits-5, Office-Caltech and DomainNet with ResNets; 20 clients.",
        "Feature shift: 'Digits-4' made from one dataset by four deterministic domain transforms (original, "
        "inverted, rotated, salt-and-pepper + blur), 8 clients (2 per domain), all selected every round.",
        "Semi-supervised: label-in-server pseudo-labelling (confidence >= 0.8, no augmentation) with server "
        "fine-tuning after aggregation, 5 labels per class; the notes' 10 labels per class and 0.9 threshold "
        "left the server-only model at ~92% and pseudo-labels with nothing to add in a pilot. COALA's SemiFL "
        "client also uses strong augmentation, mixup and static batch norm (not implemented), so the semi-FL "
        "comparison is reported only and does not decide the verdict (withdrawn, issue 42).",
        "The server checks every client reply (keys, shapes, dtypes, finite floats, a bounded integer example "
        "count), caps a client's weight at 10x the round's median count (Rob-FCP's cap) and drops an update "
        "whose norm exceeds 100x the round's median; COALA trusts its clients.",
        "Continual: LwF-style distillation of the previous global model on the old classes' logits of the "
        "current data (kd_alpha 1, T 2, cross-entropy over the current task's classes) instead of COALA's FCCL "
        "with synthetic data from a generator (kd_alpha 25, which diverged at our learning rate).",
        "Directional claims only: the paper's benchmark tables were not retrieved; powers are stated at a 3-point "
        "accuracy gap (0.1 forgetting) rather than at the paper's effect sizes.",
        "Not reproduced: the 15 vision tasks, multi-task FL, unsupervised FL, split / heterogeneous models, PEFT, "
        "system heterogeneity, gRPC/etcd deployment (Flower's SuperLink/SuperNodes take that role).",
    ),
    scales=("smoke", "quick", "full"),
    required_metrics={
        "scenarios": (
            "label_iid_accuracy",
            "label_dir0.5_accuracy",
            "label_dir0.1_accuracy",
            "label_class2_accuracy",
            "feature_fedavg_accuracy",
            "feature_fedbn_accuracy",
            "feature_fedprox_accuracy",
            "semi_accuracy",
            "server_only_accuracy",
            "continual_forgetting",
            "continual_kd_forgetting",
        ),
        "throughput": ("sim_rounds_per_s", "inproc_rounds_per_s"),
    },  # fmt: skip
)
