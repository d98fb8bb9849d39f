"""Miniature reproduction of Farzam, Tannenbaum, Sapiro (ICML 2024, PMLR 235:13086-13108): Ricci curvature and the
reliability of causal inference on networks.

Claims: (i) a GNN effect estimator errs more on units in negatively curved regions of the network, so node
Ollivier-Ricci curvature predicts the error without ground truth; (ii) Ricci-flow preprocessing of the network
lowers the effect-estimation error.

Per (graph family, seed) one job: draw the graph (SBM with bridges, Barabási-Albert, random 6-regular, Watts-Strogatz),
the NetDeconf-style semi-synthetic treatment data, train the GCN estimator on 60% of the nodes' factual outcomes and
score the held-out 40%: the Spearman rho of node curvature against |tau_hat - tau|, and the PEHE of the curvature
terciles. Then run 10 steps of Ricci flow, retrain with message weights ``exp(-w)`` (normalised to mean 1) and
compare PEHE, beside two controls with the same multiset of weights: randomly permuted over the edges, and assigned
by endpoint degree (the lightest messages on the edges with the largest degree sum). A separate job times our
curvature against GraphRicciCurvature on a 10^4-edge graph.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from icml24.common.experiment import (
    Analysis,
    Figure,
    Job,
    JobResult,
    Reproduction,
    Table,
    figure_png,
    new_figure,
    numeric_cell,
    seeds_for,
)

SLUG = "ricci-causal"
_FN = "icml24.graphs.ricci_causal.reproduce:"
FAMILIES = ("sbm", "ba", "regular", "ws")
FAMILY_LABELS = {
    "sbm": "SBM, 4 blocks with sparse bridges",
    "ba": "Barabási-Albert (m = 2)",
    "regular": "random 6-regular",
    "ws": "Watts-Strogatz (k = 6, p = 0.1)",
}
DEFAULT_SEEDS = {"smoke": 1, "quick": 3, "full": 8}
_SCALE_CFG = {
    "smoke": {"n": 120, "epochs": 30, "flow_iterations": 2, "families": ["sbm"], "speed_edges": 0},
    "quick": {"n": 400, "epochs": 300, "flow_iterations": 10, "families": list(FAMILIES), "speed_edges": 0},
    "full": {"n": 800, "epochs": 300, "flow_iterations": 10, "families": list(FAMILIES), "speed_edges": 10_000},
}
TRAIN_FRACTION = 0.6
"""Share of nodes whose factual outcome the estimator sees (NetDeconf's split is 60/20/20 train/val/test; our
estimator takes its validation nodes out of this 60%)."""


def make_graph(family: str, n: int, seed: int):
    """One graph of the notes' families on ``n`` nodes (labels 0..n-1), mean degree about 4-15."""
    import networkx as nx

    if family == "sbm":
        # 4 dense blocks (expected degree 0.15 * n/4) joined by sparse bridges (p_out = 0.005), at n = 400 as in
        # the notes; at other n, p_in and p_out are scaled to keep the expected degrees.
        p_in, p_out = 0.15 * 400 / n, 0.005 * 400 / n
        g = nx.stochastic_block_model([n // 4] * 4, [[p_in if i == j else p_out for j in range(4)] for i in range(4)],
                                      seed=seed)  # fmt: skip
    elif family == "ba":
        g = nx.barabasi_albert_graph(n, 2, seed=seed)
    elif family == "regular":
        g = nx.random_regular_graph(6, n, seed=seed)
    elif family == "ws":
        g = nx.connected_watts_strogatz_graph(n, 6, 0.1, seed=seed)
    else:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    g = nx.Graph(g)
    g.remove_edges_from(nx.selfloop_edges(g))
    return nx.convert_node_labels_to_integers(g)


def _rank_residual_spearman(x: np.ndarray, y: np.ndarray, control: np.ndarray) -> float:
    """Partial Spearman correlation of ``x`` and ``y`` given ``control``: Pearson of the rank residuals."""
    from scipy.stats import rankdata

    rx, ry, rc = rankdata(x), rankdata(y), rankdata(control)
    design = np.column_stack([np.ones_like(rc), rc])
    res_x = rx - design @ np.linalg.lstsq(design, rx, rcond=None)[0]
    res_y = ry - design @ np.linalg.lstsq(design, ry, rcond=None)[0]
    denom = np.linalg.norm(res_x) * np.linalg.norm(res_y)
    return float(res_x @ res_y / denom) if denom > 0 else float("nan")


def run_network(config: dict, seed: int) -> dict:
    """One graph, one data draw: the curvature-error diagnostic and the Ricci-flow retraining (module docstring)."""
    import torch
    from scipy.stats import spearmanr

    from icml24.graphs.ricci_causal.curvature import (
        as_edge_array,
        forman_curvature,
        node_curvature,
        ollivier_ricci,
        ricci_flow,
    )
    from icml24.graphs.ricci_causal.data import ate_error, pehe, simulate_networked_treatment, tercile_pehe
    from icml24.graphs.ricci_causal.estimator import GCNEffectEstimator

    torch.set_num_threads(1)
    edges, n = as_edge_array(make_graph(config["family"], config["n"], seed))
    t0 = time.perf_counter()
    kappa_edge = ollivier_ricci(edges, num_nodes=n, alpha=0.5)
    curvature_seconds = time.perf_counter() - t0
    kappa = node_curvature(edges, kappa_edge, num_nodes=n)
    forman = node_curvature(edges, forman_curvature(edges, num_nodes=n, augmented=True), num_nodes=n)
    deg = np.bincount(edges.ravel(), minlength=n)
    data = simulate_networked_treatment(edges, num_nodes=n, seed=seed)
    rng = np.random.default_rng(10_000 + seed)
    train = rng.random(n) < TRAIN_FRACTION
    test = ~train

    def fit(weights: np.ndarray | None) -> np.ndarray:
        est = GCNEffectEstimator(epochs=config["epochs"], seed=seed)
        return est.fit(data.x, data.t, data.y, edges, num_nodes=n, edge_weight=weights, train_mask=train).predict_ite()

    tau = data.tau
    tau_hat = fit(None)
    err = np.abs(tau_hat - tau)
    low, mid, high = tercile_pehe(kappa[test], tau_hat[test], tau[test])
    t0 = time.perf_counter()
    flow = ricci_flow(edges, num_nodes=n, iterations=config["flow_iterations"])
    flow_seconds = time.perf_counter() - t0
    # Flowed lengths w enter as message weights exp(-w), normalised to mean 1 so that only their spread over the
    # edges differs from the unweighted graph (GCN's self-loop weight stays comparable).
    message = np.exp(-flow.weights)
    message = message / message.mean()
    tau_flow = fit(message)
    random_weights = message[rng.permutation(len(message))]
    degree_weights = np.empty_like(message)
    degree_weights[np.argsort(-(deg[edges[:, 0]] + deg[edges[:, 1]]), kind="stable")] = np.sort(message)
    tau_random, tau_degree = fit(random_weights), fit(degree_weights)
    rho = float(spearmanr(kappa[test], err[test]).statistic) if np.ptp(kappa[test]) > 0 else float("nan")
    out = {
        "rho": rho,
        "rho_given_degree": _rank_residual_spearman(kappa[test], err[test], deg[test]),
        "rho_forman": float(spearmanr(forman[test], err[test]).statistic) if np.ptp(forman[test]) > 0 else float("nan"),
        "rho_degree": float(spearmanr(deg[test], err[test]).statistic) if np.ptp(deg[test]) > 0 else float("nan"),
        "pehe_low": low,
        "pehe_mid": mid,
        "pehe_high": high,
        "pehe_original": pehe(tau_hat[test], tau[test]),
        "pehe_flow": pehe(tau_flow[test], tau[test]),
        "pehe_random": pehe(tau_random[test], tau[test]),
        "pehe_degree": pehe(tau_degree[test], tau[test]),
        "pehe_constant": pehe(np.full(int(test.sum()), tau[train].mean()), tau[test]),
        "ate_original": ate_error(tau_hat[test], tau[test]),
        "ate_flow": ate_error(tau_flow[test], tau[test]),
        "kappa_mean": float(kappa_edge.mean()),
        "kappa_min": float(kappa_edge.min()),
        "kappa_max": float(kappa_edge.max()),
        "flow_weight_cv": float(flow.weights.std() / flow.weights.mean()),
        "flow_kappa_spread": float(np.ptp(flow.curvature)),
        "edges": len(edges),
        "curvature_seconds": curvature_seconds,
        "flow_seconds": flow_seconds,
    }
    return out


def run_speed(config: dict, seed: int) -> dict:
    """Exact Ollivier-Ricci curvature (alpha 0.5) of one Barabási-Albert graph with about ``edges`` edges, ours and
    GraphRicciCurvature's (``method="OTD"``, ``proc=1``), timed one after the other in this process."""
    import networkx as nx
    from GraphRicciCurvature.OllivierRicci import OllivierRicci

    from icml24.graphs.ricci_causal.curvature import ollivier_ricci

    g = nx.barabasi_albert_graph(config["edges"] // 2, 2, seed=seed)
    ollivier_ricci(nx.path_graph(3))  # imports and first-call costs out of the timing
    t0 = time.perf_counter()
    ours = ollivier_ricci(g, alpha=0.5)
    ours_s = time.perf_counter() - t0
    ref_graph = g.copy()
    t0 = time.perf_counter()
    orc = OllivierRicci(ref_graph, alpha=0.5, method="OTD", proc=1, verbose="ERROR")
    orc.compute_ricci_curvature()
    grc_s = time.perf_counter() - t0
    ref = np.array([orc.G[u][v]["ricciCurvature"] for u, v in g.edges()])
    return {"edges": g.number_of_edges(), "nodes": g.number_of_nodes(), "max_abs_difference": float(np.max(np.abs(ours - ref))),
            "ours_seconds": ours_s, "grc_seconds": grc_s, "grc_over_ours_time": grc_s / ours_s}  # fmt: skip


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = _SCALE_CFG["quick" if scale == "gpu" else scale]
    jobs = []
    for s in seeds_for(scale, seeds, DEFAULT_SEEDS):
        for family in cfg["families"]:
            jobs.append(Job(SLUG, "network", _FN + "run_network", {"family": family, "n": cfg["n"],
                                                                    "epochs": cfg["epochs"],
                                                                    "flow_iterations": cfg["flow_iterations"]}, s))  # fmt: skip
    if cfg["speed_edges"]:
        jobs.append(Job(SLUG, "speed", _FN + "run_speed", {"edges": cfg["speed_edges"]}, 0))
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
ALPHA = 0.05
"""Level of each one-sided test (and of each side of the TOST)."""
RHO_EQUIV = 0.05
"""A mean per-run Spearman rho shown within ±0.05 of 0 counts as "no association" (refutes claim i)."""
TERCILE_EQUIV = 0.05
"""(PEHE of the most negatively curved tercile - PEHE of the most positive) / PEHE shown within ±5%: no difference."""
FLOW_EQUIV = 0.02
"""Relative PEHE change with the flow shown within ±2%: the flow has no effect (refutes claim ii)."""
POWER_EFFECT = {"rho": -0.1, "tercile": 0.1, "flow": -0.05}
"""Effects at which the power is reported: the paper's numbers were not readable, so a weak node-level correlation
(rho = -0.1), a 10% higher PEHE in the negative tercile and a 5% PEHE reduction by the flow."""


def _values(results: Sequence[JobResult], family: str | None = None) -> dict[str, np.ndarray]:
    rows = [r for r in results if r.status == "ok" and r.job.experiment == "network"
            and (family is None or r.job.config.get("family") == family)]  # fmt: skip
    keys = ("rho", "rho_given_degree", "rho_forman", "rho_degree", "pehe_low", "pehe_mid", "pehe_high",
            "pehe_original", "pehe_flow", "pehe_random", "pehe_degree", "pehe_constant", "ate_original", "ate_flow",
            "kappa_mean", "kappa_min", "kappa_max", "flow_weight_cv")  # fmt: skip
    out = {k: np.array([float(r.metrics.get(k, math.nan)) for r in rows], float) for k in keys}
    out["tercile_gap"] = (out["pehe_low"] - out["pehe_high"]) / out["pehe_original"]
    out["flow_change"] = out["pehe_flow"] / out["pehe_original"] - 1
    out["flow_vs_random"] = out["pehe_flow"] / out["pehe_random"] - 1
    out["flow_vs_degree"] = out["pehe_flow"] / out["pehe_degree"] - 1
    return out


def _power(values: np.ndarray, effect: float, alternative: str, eq: float) -> float | None:
    """Power of the one-sided one-sample t-test at ``ALPHA`` for a true mean ``effect`` with the observed spread of
    the per-run values (noncentral t, statsmodels ``TTestPower``; ``eq`` plays no part in saying supported)."""
    from statsmodels.stats.power import TTestPower

    v = values[np.isfinite(values)]
    if v.size < 2 or not np.std(v, ddof=1) > 0:
        return None
    d = abs(effect) / float(np.std(v, ddof=1))
    return float(TTestPower().power(effect_size=d, nobs=int(v.size), alpha=ALPHA, alternative="larger"))


def _checks(v: dict[str, np.ndarray], where: str, suffix: str, decisive: bool) -> list:
    from icml24.common.decide import compare

    zeros = np.zeros_like(v["rho"])
    rho = compare(v["rho"], zeros, paired=True, alternative="less", equivalence_margin=RHO_EQUIV, alpha=ALPHA,
                  effect_name="mean Spearman rho (node curvature vs |tau_hat - tau|)")  # fmt: skip
    gap = compare(v["tercile_gap"], zeros, paired=True, alternative="greater", equivalence_margin=TERCILE_EQUIV,
                  alpha=ALPHA, effect_name="mean (PEHE lowest tercile - PEHE highest tercile) / PEHE")  # fmt: skip
    flow = compare(v["flow_change"], zeros, paired=True, alternative="less", equivalence_margin=FLOW_EQUIV,
                   alpha=ALPHA, effect_name="mean relative PEHE change with Ricci flow (flow / original - 1)")  # fmt: skip
    return [
        rho.to_check(id=f"curvature-error{suffix}", decisive=decisive,
                     claim=f"Estimation error is higher where curvature is lower: Spearman rho < 0 ({where})",
                     power=_power(v["rho"], POWER_EFFECT["rho"], "less", RHO_EQUIV)),
        gap.to_check(id=f"tercile-pehe{suffix}", decisive=decisive,
                     claim=f"PEHE of the most negatively curved tercile exceeds that of the most positive ({where})",
                     power=_power(v["tercile_gap"], POWER_EFFECT["tercile"], "greater", TERCILE_EQUIV)),
        flow.to_check(id=f"flow-reduces-pehe{suffix}", decisive=decisive,
                      claim=f"Ricci-flow preprocessing lowers PEHE ({where})",
                      power=_power(v["flow_change"], POWER_EFFECT["flow"], "less", FLOW_EQUIV)),
    ]  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import analysis, compare

    pooled = _values(results)
    families = [f for f in FAMILIES if len(_values(results, f)["rho"])]
    checks = _checks(pooled, "pooled over every graph family and seed", "", True)
    for f in families:
        checks.extend(_checks(_values(results, f), FAMILY_LABELS[f], f"-{f}", False))
    zeros = np.zeros_like(pooled["rho"])
    checks.append(compare(pooled["rho_given_degree"], zeros, paired=True, alternative="less", alpha=ALPHA,
                          effect_name="mean partial Spearman rho given degree").to_check(
        id="curvature-error-given-degree", decisive=False,
        claim="Curvature predicts the error beyond degree (partial Spearman rho given degree < 0, pooled)"))  # fmt: skip
    for control, label in (("random", "the same weights permuted at random"),
                           ("degree", "the same weights assigned by endpoint degree")):
        checks.append(compare(pooled[f"flow_vs_{control}"], zeros, paired=True, alternative="less", alpha=ALPHA,
                              effect_name=f"mean relative PEHE (flow / {control} control - 1)").to_check(
            id=f"flow-beats-{control}-control", decisive=False,
            claim=f"Ricci-flow weights give lower PEHE than {label} (pooled)"))  # fmt: skip

    rows = []
    for f in families:
        v = _values(results, f)
        rows.append([FAMILY_LABELS[f]] + [numeric_cell(list(v[k])) for k in (
            "kappa_mean", "rho", "rho_given_degree", "rho_degree", "pehe_low", "pehe_mid", "pehe_high")])  # fmt: skip
    tables = [Table("Curvature against estimation error, held-out nodes (mean ± std over seeds)",
                    ["graph family", "mean edge curvature", "Spearman rho", "partial rho given degree",
                     "Spearman rho of degree", "PEHE, lowest-curvature tercile", "PEHE, middle tercile",
                     "PEHE, highest-curvature tercile"], rows,
                    note="rho: Spearman correlation of node Ollivier-Ricci curvature (alpha 0.5) with |tau_hat - "
                    "tau| over the held-out 40% of nodes, one value per seed.")]  # fmt: skip
    rows = []
    for f in families:
        v = _values(results, f)
        rows.append([FAMILY_LABELS[f]] + [numeric_cell(list(v[k])) for k in (
            "pehe_constant", "pehe_original", "pehe_flow", "pehe_random", "pehe_degree", "ate_original", "ate_flow",
            "flow_weight_cv")])  # fmt: skip
    tables.append(Table("Ricci-flow preprocessing, held-out PEHE (mean ± std over seeds)",
                        ["graph family", "constant effect (train ATE)", "GCN, original graph", "GCN, Ricci flow",
                         "GCN, random reweighting", "GCN, degree reweighting", "ATE error, original",
                         "ATE error, Ricci flow", "flowed length CV"], rows,
                        note="Ricci flow: 10 steps at quick and full scale (step 1, alpha 0.5), message weights exp(-w) normalised to mean 1; "
                        "the controls use the same multiset of weights. CV: std / mean of the flowed lengths."))  # fmt: skip
    speed = [r for r in results if r.status == "ok" and r.job.experiment == "speed"]
    for r in speed:
        m = r.metrics
        tables.append(Table("Curvature of one graph, ours vs GraphRicciCurvature (exact OT, one process, one run)",
                            ["graph", "edges", "ours (s)", "GraphRicciCurvature (s)", "ratio", "max |difference|"],
                            [[f"Barabási-Albert, {m['nodes']} nodes", m["edges"], f"{m['ours_seconds']:.2f}",
                              f"{m['grc_seconds']:.2f}", f"{m['grc_over_ours_time']:.1f}x",
                              f"{m['max_abs_difference']:.1e}"]]))  # fmt: skip
    figures = []
    if families:
        fig, axes = new_figure(1, 1, width=6.0)
        ax = axes[0][0]
        from icml24.common.plotting import label_axes, plot_mean_errorbar, spread_caption

        for i, (key, label) in enumerate((("pehe_low", "lowest-curvature tercile"), ("pehe_mid", "middle tercile"),
                                          ("pehe_high", "highest-curvature tercile"))):  # fmt: skip
            per = [list(_values(results, f)[key]) for f in families]
            plot_mean_errorbar(ax, [x + 0.15 * (i - 1) for x in range(len(families))], per, label)
        ax.set_xticks(range(len(families)))
        ax.set_xticklabels(families)
        label_axes(ax, "graph family", "held-out PEHE", yunit="outcome units")
        ax.legend()
        figures.append(Figure("PEHE by node-curvature tercile", figure_png(fig),
                              caption=spread_caption("std", len(pooled["rho"]) // max(len(families), 1),
                                                     kind="error bars")))  # fmt: skip

    out = analysis(checks, summary="", rule="all", tables=tables, figures=figures)
    by = {c.id: c for c in checks}

    def said(cid: str) -> str:
        c = by[cid]
        eff = f"{c.effect:+.3f}" if c.effect is not None else "n/a"
        return f"{c.verdict.replace('_', ' ')} ({eff})"

    n_runs = int(np.isfinite(pooled["rho"]).sum())
    out.summary = (
        f"{scale} scale, {n_runs} runs ({len(families)} graph families x seeds). Pooled: curvature vs error "
        f"rho {said('curvature-error')}; tercile PEHE gap {said('tercile-pehe')}; Ricci flow relative PEHE change "
        f"{said('flow-reduces-pehe')}. Rule: supported iff all three pooled checks are supported (one-sided paired "
        f"t-tests at alpha {ALPHA:g} across runs); not_supported if any is refuted (significant the other way, or "
        f"TOST-equivalent to no effect within rho ±{RHO_EQUIV:g}, tercile gap ±{TERCILE_EQUIV:.0%}, flow change "
        f"±{FLOW_EQUIV:.0%})."
    )
    return out


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "A GCN effect estimator errs more on units in negatively curved regions of the network (node Ollivier-Ricci "
        "curvature is negatively correlated with the error), and Ricci-flow preprocessing lowers its PEHE."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Data: the paper's BlogCatalog and Flickr benchmarks are not available offline; semi-synthetic NetDeconf-style "
        "data on four generated graph families (SBM with bridges, Barabási-Albert, random 6-regular, Watts-Strogatz) "
        "of 400 (quick) / 800 (full) nodes instead.",
        "Estimator: a 2-layer GCN (torch-geometric GCNConv, width 16) with a root skip of the own covariates and two "
        "outcome heads (TARNet on a graph), Adam 1e-3, weight decay 1e-2, 300 epochs with the epoch chosen on the "
        "factual MSE of a validation fifth of the training nodes; no representation-balancing penalty (NetDeconf has "
        "one); the paper's estimators were not readable.",
        "Ricci flow: our implementation of GraphRicciCurvature's flow (equal to it to 1e-9 in the tests), 10 steps, "
        "no surgery; the flowed lengths enter as message weights exp(-w) normalised to mean 1 (how the paper injects "
        "the flowed geometry was not readable).",
        "Claims are decided pooled over the four families (each family's checks are reported, not decisive).",
        "The paper's theorem is not checked; the direction of the effect depends on our data-generating process.",
        "Timing of the curvature (ours vs GraphRicciCurvature) runs at full scale only.",
    ),
    required_metrics={"network": ("rho", "pehe_low", "pehe_high", "pehe_original", "pehe_flow"),
                      "speed": ("ours_seconds", "grc_seconds", "max_abs_difference")},  # fmt: skip
)
