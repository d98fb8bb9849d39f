"""Miniature reproduction of SpikeLM (Xing et al., ICML 2024).

A BERT-style character encoder (the shared transformer: bidirectional, RoPE, LayerNorm, GELU)
is trained from scratch with BERT's masked-LM objective on the standard library's docstrings, in four
forms with identical shape, data, steps and optimiser (matched training budget):

* full precision (ANN), the upper bound;
* binary LIF spikes {0, 1}, with the fixed threshold 1 of the notes and with the threshold ``mean|u_1|``
  of the first batch (the stronger of the two, by mean accuracy, is the baseline of the decisive test);
* ternary spikes {-1, 0, 1} with fixed amplitude 1;
* SpikeLM's elastic bi-spiking (the code's defaults: ``alpha_t = 2 mean|u_t|``, T = 4).

Claim 1 (the abstract: "SpikeLM greatly bridges the performance gap between SNNs and ANNs"): on held-out
masked-character accuracy SpikeLM closes most (more than half) of the gap between binary spikes and the
ANN. Claim 2 (elastic frequency, "a strategy to control spike firing rate"): the amplitude factor ``k``
trades accuracy against firing rate: a larger ``k`` fires less and scores lower (full scale, k in 1, 2, 4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
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
from icml24.language.spikelm import encoder_config
from icml24.language.spikelm.mlm import MaskedCharCorpus, evaluate_masked_lm, train_masked_lm
from icml24.language.spikelm.model import SpikeLM, SpikeLMConfig, energy_estimate, firing_rates
from icml24.language.training import TrainConfig

SLUG = "spikelm"
DEFAULT_SEEDS = {"smoke": 1, "quick": 3, "full": 8}
"""Seeds (paired across variants: a seed fixes the initialisation and the batch order). Full: 8, not 4
(4 gave the gap rule 25% power at a 75% closed gap with seed-to-seed std 0.02)."""
VAL_EVERY = 9
"""Every 9th training document is a validation document (about 10% of them): the better binary baseline and
the plateau criterion are read on it, never on the test windows."""
PLATEAU_GAP = 0.03
"""Past the plateau: in every seed the ANN's validation accuracy is at least this far above both the better
binary baseline's and the unigram accuracy. Below it the ANN has not learnt beyond what binary spikes learn
at this budget (at quick it sits on the unigram plateau), so there is no gap to close and ``gap-closed``
is inconclusive (headroom)."""

SETUP = {
    "smoke": {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "seq_len": 16, "batch_size": 8, "steps": 4,
              "lr": 2e-3, "eval_windows": 8},
    "quick": {"d_model": 48, "n_layers": 2, "n_heads": 4, "d_ff": 192, "seq_len": 32, "batch_size": 32,
              "steps": 150, "lr": 3e-3, "eval_windows": 256},
    "full": {"d_model": 48, "n_layers": 2, "n_heads": 4, "d_ff": 192, "seq_len": 32, "batch_size": 32,
             "steps": 300, "lr": 3e-3, "eval_windows": 256},
}  # fmt: skip
VARIANTS = {
    "ann": {"neuron": "none"},
    "binary": {"neuron": "binary", "lif_threshold": 1.0},
    "binary_data": {"neuron": "binary", "lif_threshold": "data"},
    "ternary": {"neuron": "ternary"},
    "elastic": {"neuron": "elastic", "alpha_init_factor": 2.0},
}
KNOB = {"smoke": (), "quick": (), "full": (1.0, 4.0)}
"""Extra amplitude factors ``k`` of the frequency sweep (k = 2 is the ``elastic`` variant)."""
NAMES = {
    "ann": "full precision (ANN)",
    "binary": "binary LIF {0,1}, threshold 1",
    "binary_data": "binary LIF {0,1}, data threshold",
    "ternary": "ternary {-1,0,1}, amplitude 1",
    "elastic": "SpikeLM elastic bi-spiking (k=2)",
}
TIME_STEPS = 4


# ---------------------------------------------------------------------------------------------- jobs
def run_variant(config: dict, seed: int) -> dict:
    """Train one encoder variant on masked characters and score it on the fixed held-out set."""
    torch.manual_seed(seed)
    s = config["setup"]
    corpus = MaskedCharCorpus(seq_len=s["seq_len"], val_every=VAL_EVERY)
    model_cfg = encoder_config(corpus.vocab_size, d_model=s["d_model"], n_layers=s["n_layers"],
                               n_heads=s["n_heads"], d_ff=s["d_ff"], max_seq_len=s["seq_len"])  # fmt: skip
    spiking = SpikeLMConfig(time_steps=TIME_STEPS, **config["spiking"])
    model = SpikeLM(model_cfg, spiking=spiking)
    train = TrainConfig(steps=s["steps"], lr=s["lr"], warmup_steps=max(1, s["steps"] // 10), weight_decay=0.01,
                        min_lr_ratio=0.1)  # fmt: skip
    history = train_masked_lm(model, corpus, train, batch_size=s["batch_size"], seed=seed)
    eval_ids, eval_labels = corpus.eval_set(s["eval_windows"])
    val_ids, val_labels = corpus.val_set(s["eval_windows"])
    val = evaluate_masked_lm(model, val_ids, val_labels)
    model.record_spikes()
    scores = evaluate_masked_lm(model, eval_ids, eval_labels)
    model.record_spikes(False)
    out = {
        "accuracy": scores["accuracy"],
        "correct": scores["correct"],
        "n": scores["n"],
        "loss": scores["loss"],
        "unigram_accuracy": corpus.unigram_accuracy(eval_labels),
        "val_accuracy": val["accuracy"],
        "val_unigram_accuracy": corpus.unigram_accuracy(val_labels),
        "final_train_loss": history[-1]["loss"],
        "train_seconds": history[-1]["seconds"],
    }
    rates = firing_rates(model)
    if rates:
        out["firing_rate"] = float(np.mean(list(rates.values())))
        out["firing_rates"] = {k.removeprefix("layers."): v for k, v in rates.items()}
        out["layer_firing_rate"] = [
            float(np.mean([v for k, v in rates.items() if k.startswith(f"layers.{i}.")])) for i in range(s["n_layers"])
        ]
        energy = energy_estimate(model, seq_len=s["seq_len"], tokens=int(eval_ids.numel()))
        out.update({k: energy[k] for k in ("ac_per_token", "mac_per_token", "energy_ratio")})
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    jobs = []
    for name, spiking in VARIANTS.items():
        cfg = {"variant": name, "spiking": spiking, "setup": SETUP[scale]}
        jobs += [Job(SLUG, "variants", f"{__name__}:run_variant", cfg, s) for s in seed_list]
    for k in KNOB[scale]:
        cfg = {"k": k, "spiking": {"neuron": "elastic", "alpha_init_factor": k}, "setup": SETUP[scale]}
        jobs += [Job(SLUG, "knob", f"{__name__}:run_variant", cfg, s) for s in seed_list]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _by_seed(rs: Sequence[JobResult], metric: str) -> dict[int, float]:
    return {r.job.seed: float(r.metrics[metric]) for r in rs}


def gap_fractions(ann: dict[int, float], binary: dict[int, float], elastic: dict[int, float]) -> list[float]:
    """Per seed, ``(elastic - binary) / (ann - binary)``: the share of the binary-to-ANN gap SpikeLM closes
    (NaN where the ANN does not beat binary spikes, so the gap is undefined)."""
    out = []
    for s in sorted(set(ann) & set(binary) & set(elastic)):
        gap = ann[s] - binary[s]
        out.append((elastic[s] - binary[s]) / gap if gap > 0 else math.nan)
    return out


def _sd(v: np.ndarray) -> float:
    return float(v.std(ddof=1)) if v.size > 1 else 0.0


def gap_contrasts(ann: dict[int, float], binary: dict[int, float], elastic: dict[int, float]) -> list[float]:
    """Per seed, ``elastic - (ann + binary) / 2``: positive exactly when SpikeLM closes more than half of the
    binary-to-ANN gap (for a positive gap)."""
    return [elastic[s] - (ann[s] + binary[s]) / 2 for s in sorted(set(ann) & set(binary) & set(elastic))]


def plateau_headroom(ann_val: dict[int, float], binary_val: dict[int, float],
                     unigram_val: dict[int, float]) -> decide.Headroom:  # fmt: skip
    """The gap ``gap-closed`` has to work with, read on validation: on the seed where the ANN leads least, the
    ANN's accuracy over the better of the binary baseline and the unigram accuracy; the check can decide only
    when that is at least :data:`PLATEAU_GAP` (the ANN has left the plateau in every seed)."""
    seeds = sorted(set(ann_val) & set(binary_val) & set(unigram_val))
    if not seeds:
        raise ValueError("ann_val, binary_val and unigram_val share no seed")
    floor = {s: max(binary_val[s], unigram_val[s]) for s in seeds}
    worst = min(seeds, key=lambda s: ann_val[s] - floor[s])
    return decide.headroom(baseline_best=floor[worst], ceiling=max(ann_val[worst], floor[worst]),
                           paper_effect=PLATEAU_GAP,
                           what=f"validation accuracy of the better binary baseline or the unigram, seed {worst}, "
                                "where the ANN (the ceiling) leads least; the effect needed is the past-the-plateau "
                                "gap, not a number of the paper")  # fmt: skip


def _paired(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    groups = {k[0]: v for k, v in group_results(results, "variants", by=("variant",)).items()}
    acc = {name: _by_seed(rs, "accuracy") for name, rs in groups.items()}
    checks = []
    rows = []
    for name in VARIANTS:
        rs = groups.get(name, [])
        if not rs:
            continue
        fr = [r.metrics.get("firing_rate", math.nan) for r in rs]
        er = [r.metrics.get("energy_ratio", math.nan) for r in rs]
        rows.append([NAMES[name], numeric_cell([r.metrics["accuracy"] for r in rs]),
                     numeric_cell([r.metrics["loss"] for r in rs]),
                     numeric_cell(fr) if name != "ann" else "1 (real-valued)",
                     numeric_cell(er) if name != "ann" else "1", len(rs)])  # fmt: skip
    unigram = next((r.metrics["unigram_accuracy"] for r in results), math.nan)
    tables = []
    if rows:
        tables.append(Table(
            f"Held-out masked-character accuracy, {scale} scale (mean ± std over seeds)",
            ["model", "accuracy", "held-out loss (nats/char)", "mean firing rate", "energy / ANN energy", "seeds"],
            rows,
            note=f"Unigram baseline (always the most frequent character): {unigram:.3f}. Energy: ACs at 0.9 pJ vs "
                 "MACs at 4.6 pJ (Horowitz 2014) over the six projections and two attention products per block.",
        ))  # fmt: skip
    binaries = [n for n in ("binary", "binary_data") if n in acc]
    val = {name: _by_seed(rs, "val_accuracy") for name, rs in groups.items()}
    # Baselines get the same care as the method: the gap is measured from the better binary baseline, the
    # better one chosen on the validation windows (choosing it on the test windows would bias the test).
    best = max(binaries, key=lambda n: np.mean(list(val[n].values()))) if binaries else None
    if best is not None and "ann" in acc and "elastic" in acc:
        # "Closes more than half of the gap": elastic - binary > (ann - binary) / 2, i.e. the paired contrast
        # elastic - (ann + binary) / 2 > 0 per seed. A contrast, not the per-seed ratio, so that a seed with a
        # small gap cannot blow the statistic up; the ratio of the mean gaps is reported beside it.
        contrast = gap_contrasts(acc["ann"], acc[best], acc["elastic"])
        fractions = gap_fractions(acc["ann"], acc[best], acc["elastic"])
        e, b, a = (np.mean(list(acc[k].values())) for k in ("elastic", best, "ann"))
        ratio = (e - b) / (a - b) if a > b else math.nan
        d = decide.compare_to_value(contrast, 0.0, alternative="greater",
                                    effect_name="accuracy of SpikeLM - midpoint of the binary and ANN accuracies")  # fmt: skip
        val_unigram = {r.job.seed: float(r.metrics["val_unigram_accuracy"]) for r in groups["ann"]}
        room = plateau_headroom(val["ann"], val[best], val_unigram)
        checks.append(d.to_check(
            id="gap-closed",
            claim="SpikeLM closes most (more than half) of the accuracy gap between binary spikes and the "
                  "full-precision model",
            evidence=f"binary baseline: {NAMES[best]} (the better of {len(binaries)} on validation); share of the "
                     f"mean gap closed {ratio:.2f}; per-seed shares {np.round(fractions, 2).tolist()}; decided only "
                     f"past the plateau (the ANN >= {PLATEAU_GAP:g} above the binary baseline and the unigram "
                     "accuracy on validation in every seed)",
            headroom=room,
        ))  # fmt: skip
        pairs = [("ann", best, "ann-beats-binary", "the gap exists: the ANN beats the better binary baseline", False)]
        pairs += [("elastic", n, f"elastic-beats-{n.replace('_', '-')}", f"SpikeLM beats the {NAMES[n]}", False)
                  for n in binaries]  # fmt: skip
        pairs += [("ann", "elastic", "ann-beats-elastic", "the ANN stays above SpikeLM (spiking still costs accuracy)", False)]
        for a, b, cid, claim, decisive in pairs:
            x, y = _paired(acc[a], acc[b])
            d = decide.compare(x, y, paired=True, alternative="greater",
                               effect_name=f"accuracy: {NAMES[a]} - {NAMES[b]} (paired by seed)")  # fmt: skip
            checks.append(d.to_check(id=cid, claim=claim, evidence=f"{len(x)} seeds", decisive=decisive))
    if "elastic" in acc and "ternary" in acc:
        x, y = _paired(acc["elastic"], acc["ternary"])
        d = decide.compare(x, y, paired=True, alternative="greater",
                           effect_name="accuracy: elastic amplitude - fixed amplitude 1 (paired by seed)")  # fmt: skip
        checks.append(d.to_check(id="elastic-beats-ternary", claim="the elastic amplitude beats a fixed amplitude of 1",
                                 evidence=f"{len(x)} seeds", decisive=False))  # fmt: skip
    if "ann" in groups:
        d = decide.compare_to_value(list(acc["ann"].values()), unigram, alternative="greater",
                                    effect_name="ANN held-out accuracy")  # fmt: skip
        checks.append(d.to_check(id="ann-learns", claim="harness sanity: the ANN beats the unigram baseline",
                                 evidence=f"unigram {unigram:.3f}", decisive=False))  # fmt: skip

    figures = []
    knob = [r for r in results if r.job.experiment == "knob"] + list(groups.get("elastic", []))
    ks = sorted({float(r.job.config["spiking"]["alpha_init_factor"]) for r in knob})
    if len(ks) >= 3:
        x = [math.log2(float(r.job.config["spiking"]["alpha_init_factor"])) for r in knob]
        d = decide.trend(x, [r.metrics["firing_rate"] for r in knob], claim="decreasing",
                         effect_name="OLS slope of the mean firing rate in log2 k")  # fmt: skip
        # Reported, not decisive: the threshold is alpha/2 = (k/2) mean|u|, so a larger k fires less almost by
        # construction; the claim's content is what that costs in accuracy (knob-accuracy).
        checks.append(d.to_check(id="knob-firing-rate", claim="a larger amplitude factor k fires less",
                                 evidence=f"k in {ks}, {len(knob)} runs; reported only: with the threshold "
                                          "(k/2) mean|u| this holds almost by construction",
                                 decisive=False))  # fmt: skip
        d = decide.trend(x, [r.metrics["accuracy"] for r in knob], claim="decreasing",
                         effect_name="OLS slope of held-out accuracy in log2 k")  # fmt: skip
        checks.append(d.to_check(id="knob-accuracy", claim="... and scores lower: the knob trades accuracy for "
                                 "firing rate", evidence=f"k in {ks}, {len(knob)} runs"))  # fmt: skip
        krows = []
        fig, ax = new_figure()
        for k in ks:
            rs = [r for r in knob if float(r.job.config["spiking"]["alpha_init_factor"]) == k]
            a = np.array([r.metrics["accuracy"] for r in rs])
            f = np.array([r.metrics["firing_rate"] for r in rs])
            krows.append([f"{k:g}", numeric_cell(a), numeric_cell(f),
                          numeric_cell([r.metrics["energy_ratio"] for r in rs]), len(rs)])  # fmt: skip
            ax[0, 0].errorbar(f.mean(), a.mean(), xerr=_sd(f), yerr=_sd(a), marker="o", capsize=3)
            ax[0, 0].annotate(f"k={k:g}", (f.mean(), a.mean()), textcoords="offset points", xytext=(6, 4), fontsize=8)
        ax[0, 0].set(xlabel="mean firing rate (fraction of neuron-steps spiking)", ylabel="held-out masked-char accuracy",
                     title="Elastic frequency: accuracy vs firing rate (mean ± std over seeds)")  # fmt: skip
        figures.append(Figure("Frequency knob", figure_png(fig), "SpikeLM with amplitude factor k in alpha = k mean|u|."))
        tables.append(Table("Frequency knob k (mean ± std over seeds)",
                            ["k", "accuracy", "mean firing rate", "energy / ANN energy", "seeds"], krows))  # fmt: skip
    if "elastic" in groups:
        rs = groups["elastic"]
        sites = list(rs[0].metrics["firing_rates"])
        tables.append(Table("SpikeLM firing rate per layer and site (mean ± std over seeds)", ["neuron", "firing rate"],
                            [[site, numeric_cell([r.metrics["firing_rates"][site] for r in rs])] for site in sites]))  # fmt: skip
    summary = [f"Scale {scale}."]
    for c in checks:
        effect = "n/a" if c.effect is None else f"{c.effect:.3f}"
        summary.append(f"{c.id}: {c.verdict.replace('_', ' ')} ({c.effect_name} {effect}).")
    return decide.analysis(checks, summary=" ".join(summary), rule="all", tables=tables, figures=figures)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "At a matched training budget, SpikeLM's elastic bi-spiking closes most of the masked-language-model "
        "accuracy gap between binary spikes and the full-precision model, and its amplitude factor trades "
        "accuracy against firing rate."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "A 2-layer, d=48 character encoder (~60 k parameters) trained from scratch for 150 (quick) / 300 (full) "
        "AdamW steps on ~0.5 M characters of Python standard-library docstrings, not BERT-base pretrained on "
        "Wikipedia+BookCorpus and fine-tuned on GLUE; no generative (BART) experiment.",
        "Pre-LN blocks of the shared transformer (BERT is post-LN) with rotary positions (BERT learns absolute "
        "ones; in a pilot the full-precision encoder reached 31% held-out accuracy after 300 steps with RoPE "
        "and 22% with learned positions); keys are spiked after the rotation. Spikes are placed as in the official "
        "spike_bert.py (inputs of Q/K/V, output, FFN up and down projections; K and V after projection). One "
        "neuron feeds Q, K and V (the code's three neurons emit identical spikes with frozen alpha).",
        "Two binary LIF baselines: the notes' threshold 1, and a threshold mean|u_1| of the first batch (frozen: "
        "SpikeLM's rule at k = 2); the gap is measured from the better one on validation documents. Membrane "
        "decay 0.25 (SpikeLM's carry factor), hard reset.",
        "'gap-closed' decides only once the ANN has left the plateau (>= 0.03 above the better binary baseline and "
        "the unigram accuracy on validation in every seed); the firing-rate trend of the amplitude factor is "
        "reported, not decisive (the threshold (k/2) mean|u| makes it nearly true by construction).",
        "'Most of the gap' is read as more than half; the paper states no number for it.",
        "Matched compute means the same architecture, data, steps and optimiser; the spiking models run T = 4 "
        "time steps per forward pass, so they spend about 4x the training FLOPs of the ANN.",
        "Energy counts only the matrix products of the blocks (ACs for spiking inputs, MACs for the ANN), "
        "the amplitude alpha_t folded into the weights; the paper's energy table is not reproduced.",
    ),
    scales=("smoke", "quick", "full"),
    required_metrics={"variants": ("accuracy", "correct", "n", "loss", "unigram_accuracy", "val_accuracy",
                                   "val_unigram_accuracy"),
                      "knob": ("accuracy", "firing_rate", "energy_ratio", "firing_rates")},  # fmt: skip
)
