"""Miniature reproduction of Uni-Med (Wu et al., ICML 2024).

The paper's claim (abstract, Section 4): token-level cut-mix and intention-guided attention, trained on data
annotated with intent spans and visual evidence, make a Med-VQA model more accurate (SLAKE: +1.22 closed,
+0.92 overall over MedVInT) and its answers traceable to the visual evidence. Here, on Toy-Med-VQA (exact
intent spans and evidence patches from the generator, :mod:`icml24.multimodal.uni_med.data`), four variants
of one small transformer are trained from scratch on the same data with the same initialisation per seed:

* ``base`` (MedVInT-style: no cut-mix, vanilla attention), ``cutmix`` (token-level cut-mix, p = 0.5),
  ``intent`` (intent-guided attention, alpha = 0.01), ``uni-med`` (both).

Experiments: ``main`` (the low-data regime with distractor text: all four variants); ``data`` (a larger
training set, base and Uni-Med, for "larger gains in the low-data regime"); ``distractor`` (no and long
distractors, base and intent, for "larger gains with more non-core words"). Every comparison is paired over
seeds (same data, same initialisation); accuracy on a held-out test set, evidence attention share and the
deletion test as grounding.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
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

SLUG = "uni-med"
VARIANTS = {"base": (None, 0.0, False), "base-tags": (None, 0.0, True), "cutmix": (None, 0.5, False),
            "intent": (0.01, 0.0, False), "uni-med": (0.01, 0.5, False)}  # fmt: skip
"""variant -> (intent_alpha, cutmix_p, intent_feature): PASTA's alpha = 0.01; cut-mix on half of the samples;
``base-tags`` gets the same oracle intent tags as intent-guided attention, as an input feature."""
VARIANT_NAMES = {"base": "baseline (no cut-mix, vanilla attention)",
                 "base-tags": "baseline given the intent tags as an input feature",
                 "cutmix": "+ token-level cut-mix", "intent": "+ intent-guided attention",
                 "uni-med": "Uni-Med (both)"}  # fmt: skip
TAGGED_BASELINE = "base-tags"
"""The baseline of the decisive accuracy checks of the tag-using variants (intent, Uni-Med): it receives the
same test-time oracle intent tags, so the comparison is of the mechanism, not of the information."""
DEFAULT_SEEDS = {"smoke": 2, "quick": 5, "full": 6}
TRAIN = {
    # The image encoder is pretrained first (the paper's comes pretrained: PMC-CLIP) on a separate set of scans
    # with image-level findings, the same for every variant of a seed. Then VQA training, about the same number
    # of optimiser steps in both regimes (batch 32: 320 and 314): the low-data regime repeats its 1000 samples
    # 10 times (the paper's 10 epochs), the larger training set its 5000 twice. Quick's jobs are full's main
    # jobs (the store reuses them).
    "smoke": {"n_train": 48, "n_train_high": 96, "epochs": 1, "epochs_high": 1, "n_test": 64,
              "pretrain_samples": 64, "pretrain_steps": 3},
    "quick": {"n_train": 1000, "n_train_high": 5000, "epochs": 10, "epochs_high": 2, "n_test": 2000,
              "pretrain_samples": 4000, "pretrain_steps": 400},
    "full": {"n_train": 1000, "n_train_high": 5000, "epochs": 10, "epochs_high": 2, "n_test": 2000,
             "pretrain_samples": 4000, "pretrain_steps": 400},
}  # fmt: skip
MAIN_DISTRACTORS = 5
SWEEP_DISTRACTORS = (0, 15)
EXPERIMENTS = {
    # experiment -> (variants, seeds: None = the scale's default, or the first that many)
    "smoke": {"main": (("base", "uni-med"), None), "data": (("base", "uni-med"), None),
              "distractor": (("base", "intent"), None)},
    "quick": {"main": (("base", "base-tags", "uni-med"), None)},
    "full": {"main": (tuple(VARIANTS), None), "data": (("base", "uni-med"), None),
             "distractor": (("base", "intent"), 4)},
}  # fmt: skip
DELETION_POWER_EFFECT = 0.02
"""The deletion-gap gain at which the (reported) grounding check's power is stated: two points."""
PAPER_GAIN = 0.0092
"""Uni-Med - MedVInT overall accuracy on SLAKE (86.12 vs about 85.20): the power of each accuracy check is
reported for a true gain of this size."""
EQUIVALENCE = 0.005
"""A gain within +-0.5 accuracy points (half the paper's) counts as no effect (TOST)."""
SHARE_EQUIVALENCE = 0.005
"""An evidence-attention-share change within +-0.005 counts as no effect."""
ALPHA = 0.05
METRICS = ("accuracy", "closed_accuracy", "open_accuracy", "evidence_attention_share", "deletion_gap")
METRIC_NAMES = {"accuracy": "overall accuracy", "closed_accuracy": "closed accuracy", "open_accuracy": "open accuracy",
                "evidence_attention_share": "evidence attention share", "deletion_gap": "deletion gap"}  # fmt: skip


# ---------------------------------------------------------------------------------------------- jobs
def run_variant(config: dict, seed: int) -> dict:
    """Train one variant on a seeded Toy-Med-VQA split and measure accuracy and grounding on a test split."""
    import time

    import torch

    from icml24.multimodal.uni_med import (
        MedVQATransformer,
        ToyMedVQAConfig,
        TrainConfig,
        deletion_test,
        evaluate_vqa,
        make_toy_med_vqa,
        pretrain_image_encoder,
        train_vqa,
    )

    data_cfg = ToyMedVQAConfig(distractor_words=int(config["distractor_words"]))
    train = make_toy_med_vqa(int(config["n_train"]), config=data_cfg, seed=seed)
    test = make_toy_med_vqa(int(config["n_test"]), config=data_cfg, seed=100_000 + seed)
    alpha, p, tags = VARIANTS[config["variant"]]
    torch.manual_seed(seed)  # the same initialisation for every variant of a seed: paired comparisons
    model = MedVQATransformer(intent_alpha=alpha, intent_feature=tags, max_question_len=train.questions.shape[1],
                              **config["model"])  # fmt: skip
    t0 = time.perf_counter()
    scans = make_toy_med_vqa(int(config["pretrain_samples"]), config=data_cfg, seed=200_000 + seed)
    pre = pretrain_image_encoder(model, scans, steps=int(config["pretrain_steps"]), seed=seed)
    history = train_vqa(model, train, config=TrainConfig(epochs=int(config["epochs"]), batch_size=int(config["batch_size"]),
                                                         lr=float(config["lr"]), cutmix_p=p), seed=seed)  # fmt: skip
    train_s = time.perf_counter() - t0
    out = evaluate_vqa(model, test)
    out.update(deletion_test(model, test, seed=seed))
    out["final_loss"] = history[-1]
    out["pretrain_final_loss"] = float(np.mean(pre[-20:]))
    out["train_seconds"] = train_s
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    t = TRAIN[scale]
    common = {"n_test": t["n_test"], "batch_size": 32, "lr": 3e-3, "model": {},
              "pretrain_samples": t["pretrain_samples"], "pretrain_steps": t["pretrain_steps"]}  # fmt: skip
    jobs = []
    for experiment, (variants, n_seeds) in EXPERIMENTS[scale].items():
        exp_seeds = seed_list if n_seeds is None or seeds is not None else seed_list[:n_seeds]
        if experiment == "main":
            settings = [(t["n_train"], t["epochs"], MAIN_DISTRACTORS)]
        elif experiment == "data":
            settings = [(t["n_train_high"], t["epochs_high"], MAIN_DISTRACTORS)]
        else:
            settings = [(t["n_train"], t["epochs"], d) for d in SWEEP_DISTRACTORS]
        for n_train, epochs, d in settings:
            for v in variants:
                cfg = {**common, "variant": v, "n_train": n_train, "epochs": epochs, "distractor_words": d}
                jobs += [Job(SLUG, experiment, f"{__name__}:run_variant", cfg, s) for s in exp_seeds]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _paired(groups: dict, a: str, b: str, metric: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Per-seed values of ``metric`` for variants ``a`` and ``b`` over the seeds both have."""
    ra = {r.job.seed: float(r.metrics[metric]) for r in groups.get(a, [])}
    rb = {r.job.seed: float(r.metrics[metric]) for r in groups.get(b, [])}
    seeds = sorted(set(ra) & set(rb))
    return np.array([ra[s] for s in seeds]), np.array([rb[s] for s in seeds]), seeds


def _power(diff: np.ndarray, effect: float) -> float | None:
    """Power of the one-sided paired t-test at this seed count for a true gain ``effect``, with the observed sd
    of the paired differences (None below two pairs or with no spread)."""
    from statsmodels.stats.power import TTestPower

    if diff.size < 2 or not np.std(diff, ddof=1) > 0:
        return None
    # The noncentral-t power of the one-sided paired t-test (tests/.../test_uni_med_reproduce.py checks the
    # rule's power by simulation).
    return float(TTestPower().power(effect_size=effect / float(np.std(diff, ddof=1)), nobs=int(diff.size),
                                    alpha=ALPHA, alternative="larger"))  # fmt: skip


def gain_check(groups: dict, method: str, metric: str, *, setting: str, id: str, decisive: bool,
               power_effect: float | None = None, baseline: str = "base") -> object:  # fmt: skip
    """``method`` beats ``baseline`` on ``metric``: a one-sided paired t-test over seeds, TOST for "no effect"."""
    a, b, seeds = _paired(groups, method, baseline, metric)
    eq = EQUIVALENCE if metric != "evidence_attention_share" else SHARE_EQUIVALENCE
    d = decide.compare(a, b, paired=True, alternative="greater", equivalence_margin=eq, alpha=ALPHA,
                       effect_name=f"mean paired difference in {METRIC_NAMES[metric]} ({VARIANT_NAMES[method]} - "
                                   f"{'baseline' if baseline == 'base' else VARIANT_NAMES[baseline]})")  # fmt: skip
    power = _power(a - b, power_effect) if power_effect is not None else None
    base_name = "the baseline" if baseline == "base" else f"the {VARIANT_NAMES[baseline]}"
    return d.to_check(
        id=id,
        claim=f"{setting}: {VARIANT_NAMES[method]} has a higher {METRIC_NAMES[metric]} than {base_name}",
        evidence=f"{len(seeds)} seeds, {VARIANT_NAMES[method]} {fmt_mean_std(a)}, {base_name} {fmt_mean_std(b)}"
        + (f"; power {power:.2f} for a true gain of {power_effect:g}" if power is not None else ""),
        decisive=decisive,
        power=power,
    )


def _gain_difference_check(g1: dict, g2: dict, method: str, *, id: str, claim: str, names: tuple[str, str]):
    """Is ``method``'s paired accuracy gain larger in setting 1 than in setting 2 (same seeds)?"""
    a1, b1, s1 = _paired(g1, method, "base", "accuracy")
    a2, b2, s2 = _paired(g2, method, "base", "accuracy")
    common = sorted(set(s1) & set(s2))
    d1 = {s: x - y for s, x, y in zip(s1, a1, b1)}
    d2 = {s: x - y for s, x, y in zip(s2, a2, b2)}
    x, y = np.array([d1[s] for s in common]), np.array([d2[s] for s in common])
    d = decide.compare(x, y, paired=True, alternative="greater", alpha=ALPHA,
                       effect_name=f"mean difference of the accuracy gains ({names[0]} - {names[1]})")  # fmt: skip
    return d.to_check(id=id, claim=claim, decisive=False,
                      evidence=f"{len(common)} seeds; gain {names[0]} {fmt_mean_std(x)}, {names[1]} {fmt_mean_std(y)}")  # fmt: skip


def _table(title: str, groups: dict) -> Table:
    rows = []
    for v in VARIANTS:
        rs = groups.get(v, [])
        if rs:
            rows.append([VARIANT_NAMES[v], str(len(rs))] + [fmt_mean_std([float(r.metrics[m]) for r in rs]) for m in METRICS])
    return Table(title + " (mean ± std over seeds)", ["variant", "seeds"] + [METRIC_NAMES[m] for m in METRICS], rows)


def _by_variant(results: Sequence[JobResult], experiment: str, **where: object) -> dict:
    out: dict[str, list[JobResult]] = {}
    for (v,), rs in group_results(results, experiment, by=("variant",)).items():
        keep = [r for r in rs if all(r.job.config.get(k) == val for k, val in where.items())]
        if keep:
            out[str(v)] = keep
    return out


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    checks, tables, figures = [], [], []
    main = _by_variant(results, "main")
    if main:
        n_train = next(iter(main.values()))[0].job.config["n_train"]
        setting = f"low-data regime ({n_train} training samples, {MAIN_DISTRACTORS} distractor words)"
        tables.append(_table(f"Main setting: {setting}", main))
        tagged = TAGGED_BASELINE in main
        # Accuracy decides, against the baseline that gets the same oracle intent tags when it ran (the mechanism,
        # not the information); against the plain baseline it is reported. Without the tagged arm the check
        # against the plain baseline decides, and says so in its claim.
        if tagged:
            checks.append(gain_check(main, "uni-med", "accuracy", setting=setting, id="uni-med-accuracy-vs-tagged",
                                     decisive=True, power_effect=PAPER_GAIN, baseline=TAGGED_BASELINE))  # fmt: skip
            checks.append(gain_check(main, TAGGED_BASELINE, "accuracy", setting=setting, id="tags-as-feature-accuracy",
                                     decisive=False, power_effect=PAPER_GAIN))  # fmt: skip
        checks.append(gain_check(main, "uni-med", "accuracy", setting=setting, id="uni-med-accuracy",
                                 decisive=not tagged, power_effect=PAPER_GAIN))  # fmt: skip
        # Grounding is reported apart from accuracy: the deletion test's power at these seeds is about 0.1, so as a
        # decisive check it would leave every verdict inconclusive whatever the accuracy showed.
        checks.append(gain_check(main, "uni-med", "deletion_gap", setting=setting, id="uni-med-grounding-deletion",
                                 decisive=False, power_effect=DELETION_POWER_EFFECT))  # fmt: skip
        checks.append(gain_check(main, "uni-med", "evidence_attention_share", setting=setting,
                                 id="uni-med-grounding-attention", decisive=False))  # fmt: skip
        for m in ("closed_accuracy", "open_accuracy"):
            checks.append(gain_check(main, "uni-med", m, setting=setting, id=f"uni-med-{m.replace('_', '-')}",
                                     decisive=False))  # fmt: skip
        for v in ("cutmix", "intent"):
            if v in main:
                vs_tagged = v == "intent" and tagged
                checks.append(gain_check(main, v, "accuracy", setting=setting, id=f"{v}-accuracy", decisive=not vs_tagged,
                                         power_effect=PAPER_GAIN))  # fmt: skip
                if vs_tagged:
                    checks.append(gain_check(main, v, "accuracy", setting=setting, id=f"{v}-accuracy-vs-tagged",
                                             decisive=True, power_effect=PAPER_GAIN, baseline=TAGGED_BASELINE))  # fmt: skip
                checks.append(gain_check(main, v, "evidence_attention_share", setting=setting,
                                         id=f"{v}-grounding-attention", decisive=False))  # fmt: skip
        figures.append(_bar_figure(main, setting))
    high = _by_variant(results, "data")
    if high:
        n_high = next(iter(high.values()))[0].job.config["n_train"]
        setting = f"larger training set ({n_high} samples, {MAIN_DISTRACTORS} distractor words)"
        tables.append(_table(f"Data experiment: {setting}", high))
        checks.append(gain_check(high, "uni-med", "accuracy", setting=setting, id="uni-med-accuracy-large-data",
                                 decisive=False))  # fmt: skip
        if main:
            checks.append(_gain_difference_check(
                main, high, "uni-med", id="gain-larger-in-low-data",
                claim="Uni-Med's accuracy gain over the baseline is larger in the low-data regime than with more data",
                names=("low data", "more data")))  # fmt: skip
    sweep = {d: _by_variant(results, "distractor", distractor_words=d) for d in SWEEP_DISTRACTORS}
    sweep = {d: g for d, g in sweep.items() if g}
    for d, g in sweep.items():
        n_train = next(iter(g.values()))[0].job.config["n_train"]
        tables.append(_table(f"Distractor sweep: {d} distractor words, {n_train} training samples", g))
        checks.append(gain_check(g, "intent", "accuracy", setting=f"{d} distractor words", id=f"intent-accuracy-{d}-words",
                                 decisive=False))  # fmt: skip
    if len(sweep) == 2:
        lo, hi = sorted(sweep)
        checks.append(_gain_difference_check(
            sweep[hi], sweep[lo], "intent", id="intent-gain-larger-with-long-distractors",
            claim=f"intent-guided attention gains more accuracy with {hi} distractor words than with {lo}",
            names=(f"{hi} words", f"{lo} words")))  # fmt: skip
        figures.append(_sweep_figure(sweep, main))
    verdicts = "; ".join(f"{c.id}: {c.verdict.replace('_', ' ')}" for c in checks if c.decisive)
    grounding = "; ".join(f"{c.id}: {c.verdict.replace('_', ' ')}" + (f" (power {c.power:.2f})" if c.power else "")
                          for c in checks if "grounding" in c.id)  # fmt: skip
    summary = (f"Scale {scale}. Paired over seeds (same data and initialisation per seed). Decisive (accuracy): "
               f"{verdicts or 'none (no results)'}. Grounding, reported apart: {grounding or 'not run'}. "
               "A gain smaller than the seed-to-seed noise is reported inconclusive, not as a refutation.")  # fmt: skip
    return decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


def _bar_figure(groups: dict, setting: str) -> Figure:
    fig, ax = new_figure(1, 2, width=4.6)
    names = [v for v in VARIANTS if v in groups]
    for k, (metric, label) in enumerate((("accuracy", "test accuracy"),
                                         ("evidence_attention_share", "evidence attention share"))):  # fmt: skip
        vals = [np.array([float(r.metrics[metric]) for r in groups[v]]) for v in names]
        ax[0, k].bar(range(len(names)), [x.mean() for x in vals],
                     yerr=[x.std(ddof=1) if x.size > 1 else 0 for x in vals], capsize=3, color="tab:blue")  # fmt: skip
        ax[0, k].set_xticks(range(len(names)), [v for v in names], rotation=20)
        ax[0, k].set(ylabel=f"{label} (fraction)", title=label)
        if metric == "evidence_attention_share":
            chance = float(np.mean([r.metrics["evidence_patch_share"] for r in groups[names[0]]]))
            ax[0, k].axhline(chance, color="grey", ls=":", label="chance (evidence share of patches)")
            ax[0, k].legend(fontsize=7)
    return Figure("Accuracy and grounding by variant", figure_png(fig),
                  f"{setting}; bars: mean over seeds, error bars: std over seeds.")


def _sweep_figure(sweep: dict, main: dict) -> Figure:
    fig, ax = new_figure()
    points = dict(sweep)
    if main and "intent" in main:
        points[MAIN_DISTRACTORS] = main
    xs = sorted(points)
    for v in ("base", "intent"):
        m = [np.mean([float(r.metrics["accuracy"]) for r in points[d].get(v, [])]) for d in xs]
        s = [np.std([float(r.metrics["accuracy"]) for r in points[d].get(v, [])], ddof=1) for d in xs]
        ax[0, 0].errorbar(xs, m, yerr=s, marker="o", capsize=3, label=VARIANT_NAMES[v])
    ax[0, 0].set(xlabel="distractor words per question", ylabel="test accuracy (fraction)",
                 title="Accuracy against distractor length")  # fmt: skip
    ax[0, 0].set_xticks(xs)
    ax[0, 0].legend(fontsize=8)
    return Figure("Distractor sweep", figure_png(fig), "Mean over seeds; error bars: std over seeds.")


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Token-level cut-mix and intention-guided attention, trained with intent spans and visual-evidence "
        "annotations, make a Med-VQA model more accurate than the same model without them (more so with little "
        "data and many non-core question words) and make its answers rest more on the visual evidence."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    required_metrics={e: METRICS + ("evidence_patch_share",) for e in ("main", "data", "distractor")},
    deviations=(
        "Toy-Med-VQA (16 x 16 synthetic scans, two organs, 0-1 lesion each; four question templates with "
        "distractor text) instead of SLAKE / VQA-RAD; the intent spans and evidence patches come from the "
        "generator, not from GPT-4V (the IAI annotations), and the evidence is a patch set, not an explanation "
        "sentence; no SLAKE or VQA-RAD number is reproduced.",
        "The model is small: the shared tiny ViT (patch embedding + one block, width 48) and two fusion blocks over "
        "[CLS; visual; question] with an answer classifier, instead of PMC-CLIP + a query decoder + PMC-LLaMA "
        "with LoRA and generation; hence no closest-candidate matching (closest_candidate is provided for "
        "generative models) and no loss masking of question tokens (a classifier has none). The image encoder "
        "is pretrained per seed on 4000 other scans with image-level findings per organ (400 steps; a stand-in "
        "for PMC-CLIP's figure-caption pretraining), the fusion blocks and the word embeddings from scratch.",
        "Token-level cut-mix is our reading (the released module is a placeholder and visual_cutmix is "
        "unfinished): a sample's evidence tokens are kept and its other patch tokens come from a random batch "
        "partner (p = 0.5), the label kept; tokens are mixed after the patch embedding, before the image encoder "
        "block (the released stub mixes the query-decoder outputs, where every token carries the whole image); "
        "the evidence is the ground-truth patch set, not the released code's top-5 cosine-similarity patches "
        "(similarity_evidence implements those).",
        "Intention-guided attention is our reading (no released code): PASTA-style scaling of the attention to "
        "non-intent question tokens by 0.01 in all heads of both fusion layers (PASTA selects heads by "
        "profiling); the intent tags are given at test time too, as the released test loader passes tagged "
        "questions; so the decisive accuracy comparison of the tag-using variants is with a baseline given the same "
        "tags as an input embedding (ours: the paper compares with MedVInT, which has no tags).",
        "Optimisation: AdamW lr 3e-3, weight decay 0.01, batch 32, 10 epochs of 1000 samples, every parameter "
        "trained (the paper: lr 2e-5, no weight decay, batch 1, 10 epochs, LoRA on the LLM); no image "
        "augmentation (the paper: random resized crop and RandAugment).",
        "Grounding is measured by a deletion test and an attention-rollout share against the generator's "
        "evidence; the paper shows its visual explanations qualitatively and reports accuracy only.",
        "The 'more data' arm has 5000 samples for 2 epochs, about the steps of the low-data arm (a fixed "
        "budget); the distractor sweep (0 and 15 words) runs 4 seeds, the main setting 6 (quick: 5, baseline "
        "and Uni-Med only).",
    ),
    scales=("smoke", "quick", "full"),
)
