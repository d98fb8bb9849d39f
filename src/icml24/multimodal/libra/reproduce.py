"""Miniature reproduction of Libra (Xu, Yang, Song, Xu; ICML 2024).

The paper's claims (abstract, Sections 3-4): a routed visual expert with a cross-modal bridge inside a
*frozen* pre-trained LLM, trained with next-token prediction on text and on discrete visual codes from hybrid
(discrete + continuous) visual input, captions and answers better than coupling vision into the LLM's own
weights (the LLaVA family), the bridge and the hybrid input each helping (ablations); and with the LLM frozen,
text-only behaviour cannot change, while fine-tuning the LLM forgets.

Here, on the shared scene world (:mod:`icml24.multimodal.scenes`, 32×32 images, 2×2 grid, one or two objects,
captions with synonyms and several templates), inside one frozen tiny Llama-style LM pre-trained in-run on
scene text only (:func:`icml24.multimodal.frozen_lm.pretrain_scene_lm`) and with the patch features of one
frozen tiny ViT pre-trained in-run on the scenes' attributes as the continuous visual signal (the stand-in for
CLIP; :func:`icml24.multimodal.frozen_lm.pretrain_scene_encoder`), discrete codes from residual k-means on
those features. Variants, all trained on the same data from the same initialisation of their shared parts:

* ``llava``: the LLaVA-style baseline, a 2-layer MLP projector into the frozen LM, its width set so that its
  trainable parameters match Libra's;
* ``libra-no-bridge``: Libra without the cross-modal bridge;
* ``libra``: the full model;
* ``full-ft``: the LLaVA-style model with the LM fine-tuned too (the forgetting baseline);
* full scale also: ``libra-discrete`` and ``libra-continuous`` (one source of visual input each) and
  ``libra-caption-loss`` (trained on the caption loss alone, without the visual next-code term).

Metrics on held-out scenes: attribute exact-match of greedy captions (F1 of the stated
``(cell, attribute, value)`` facts against the truth; :func:`icml24.multimodal.libra.caption_scores`), and the
text-only held-out LM loss before and after training.
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

SLUG = "libra"
DEFAULT_SEEDS = {"smoke": 2, "quick": 3, "full": 5}
ABLATION_SEEDS = 3
"""At full scale the input and loss ablations run on the first three seeds only (the 12-minute budget)."""
ABLATIONS = ("libra-discrete", "libra-continuous", "libra-caption-loss")
VARIANT_NAMES = {
    "llava": "LLaVA-style projector (frozen LM)",
    "libra-no-bridge": "Libra without bridge",
    "libra": "Libra (full)",
    "full-ft": "LLaVA-style, LM fine-tuned",
    "libra-discrete": "Libra, discrete codes only",
    "libra-continuous": "Libra, continuous features only",
    "libra-caption-loss": "Libra, caption loss only",
}
VARIANTS = {
    "smoke": ("llava", "libra-no-bridge", "libra", "full-ft"),
    "quick": ("llava", "libra-no-bridge", "libra", "full-ft"),
    "full": ("llava", "libra-no-bridge", "libra", "full-ft", "libra-discrete", "libra-continuous",
             "libra-caption-loss"),
}
SETTINGS = {
    # The scene world, the frozen backbones (one LM and one encoder for every seed: seed 0), the data and the
    # training of the vision system. Quick's jobs are a subset of full's only where the settings agree.
    "smoke": {"n_train": 64, "n_test": 16, "n_heldout_text": 32, "steps": 3, "batch_size": 8, "lr": 5e-3,
              "lm": {"n_layers": 1, "steps": 5, "pool": 64}, "encoder": {"steps": 3, "patch_size": 16},
              "n_codes": 8, "max_new_tokens": 4},
    "quick": {"n_train": 4000, "n_test": 300, "n_heldout_text": 500, "steps": 200, "batch_size": 32, "lr": 5e-3,
              "lm": {"n_layers": 2, "steps": 300, "pool": 4096}, "encoder": {"steps": 300, "patch_size": 8},
              "n_codes": 64, "max_new_tokens": 24},
    "full": {"n_train": 4000, "n_test": 400, "n_heldout_text": 500, "steps": 400, "batch_size": 32, "lr": 5e-3,
             "lm": {"n_layers": 2, "steps": 300, "pool": 4096}, "encoder": {"steps": 300, "patch_size": 8},
             "n_codes": 64, "max_new_tokens": 24},
}  # fmt: skip
SCENE = {"image_size": 32, "grid": 2, "max_objects": 2}
GAIN = 0.05
"""The caption gain (attribute F1) at which each comparison's power is reported: five points, a modest
ablation-sized effect (the paper reports its ablations on benchmark scores that do not transfer to this metric)."""
EQUIVALENCE = 0.02
"""A paired F1 difference within +-0.02 counts as no effect (TOST): the refuting evidence of "best"."""
ALPHA = 0.05
METRICS = ("attribute_f1", "attribute_precision", "attribute_recall", "caption_exact", "count_accuracy",
           "trainable_parameters", "text_loss", "text_loss_base", "text_loss_change", "lm_unchanged")  # fmt: skip
METRIC_NAMES = {"attribute_f1": "attribute F1", "attribute_precision": "attribute precision",
                "attribute_recall": "attribute recall", "caption_exact": "caption exact match",
                "count_accuracy": "object-count accuracy", "trainable_parameters": "trainable parameters",
                "text_loss": "text-only held-out loss (nats/token)", "text_loss_change": "text-only loss change"}  # fmt: skip


# ---------------------------------------------------------------------------------------------- jobs
def _backbones(config: dict):
    """The frozen LM and encoder of a run (memoised per process by :mod:`icml24.multimodal.frozen_lm`)."""
    from icml24.multimodal.frozen_lm import (
        SceneEncoderConfig,
        SceneLMConfig,
        pretrain_scene_encoder,
        pretrain_scene_lm,
    )
    from icml24.multimodal.scenes import SceneConfig

    scenes = SceneConfig(**config["scene"])
    lm_cfg = SceneLMConfig(scenes=scenes, max_seq_len=64, **config["lm"])
    lm, tok = pretrain_scene_lm(lm_cfg, seed=0)
    encoder = pretrain_scene_encoder(SceneEncoderConfig(scenes=scenes, **config["encoder"]), seed=0)
    return scenes, lm_cfg, lm, tok, encoder


def build_model(variant: str, lm, libra_config, *, match_parameters: int | None = None):
    """The model of one variant around ``lm`` (``match_parameters``: the LLaVA projector's width is set so that
    its trainable parameter count is closest to this)."""
    import dataclasses

    import torch

    from icml24.multimodal.libra import LibraModel, LLaVAStyleModel

    if variant in ("llava", "full-ft"):
        d = lm.config.d_model
        hidden = 0
        if match_parameters:
            # The probe runs on a forked RNG: it must not consume the draws of the model built below, which then
            # initialises its visual input embedding (drawn first, as in LibraModel) exactly as Libra's of the seed.
            with torch.random.fork_rng(devices=[]):
                probe = LLaVAStyleModel(lm, config=libra_config, projector_hidden=1)
            per_unit = 2 * d + 1  # each hidden unit: d in, d out, one bias
            hidden = max(1, round((match_parameters - probe.num_parameters(trainable_only=True)) / per_unit) + 1)
        return LLaVAStyleModel(lm, config=libra_config, projector_hidden=hidden,
                               freeze_language_model=variant == "llava")  # fmt: skip
    cfg = {"libra": libra_config,
           "libra-no-bridge": dataclasses.replace(libra_config, use_bridge=False),
           "libra-discrete": dataclasses.replace(libra_config, use_features=False),
           "libra-continuous": dataclasses.replace(libra_config, use_codes=False),
           "libra-caption-loss": libra_config}[variant]  # fmt: skip
    return LibraModel(lm, config=cfg)


def run_variant(config: dict, seed: int) -> dict:
    """Train one variant on seeded scenes and score its captions and its text-only loss on held-out data."""
    import copy
    import time

    import torch

    from icml24.multimodal.frozen_lm import scene_lm_documents
    from icml24.multimodal.libra import (
        CaptionTrainConfig,
        LibraConfig,
        LibraModel,
        PatchTokenizer,
        evaluate_captions,
        prepare_caption_data,
        text_only_loss,
        train_captioner,
    )
    from icml24.multimodal.scenes import generate_scenes

    scenes, _lm_cfg, lm, tok, encoder = _backbones(config)
    train = generate_scenes(int(config["n_train"]), config=scenes, seed=1_000 + seed)
    test = generate_scenes(int(config["n_test"]), config=scenes, seed=500_000 + seed)
    heldout_text = scene_lm_documents(generate_scenes(int(config["n_heldout_text"]), config=scenes, seed=900_000 + seed),
                                      seed=seed)  # fmt: skip
    with torch.no_grad():
        f_train = encoder(torch.from_numpy(train.images)).numpy()
        f_test = encoder(torch.from_numpy(test.images)).numpy()
    codes = PatchTokenizer(n_codes=int(config["n_codes"]), n_codebooks=2, random_state=seed,
                           max_fit_vectors=8000).fit(f_train)  # fmt: skip
    d_train = prepare_caption_data(train, f_train, codes, tok)
    d_test = prepare_caption_data(test, f_test, codes, tok)
    libra_cfg = LibraConfig(codebook_size=int(config["n_codes"]), feature_dim=int(f_train.shape[-1]),
                            max_vision_tokens=1 + int(f_train.shape[1]))  # fmt: skip
    base_loss = text_only_loss(lm, tok, heldout_text)
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    # The same initialisation of the shared parts for every variant of a seed: paired comparisons.
    torch.manual_seed(seed)
    reference = LibraModel(copy.deepcopy(lm), config=libra_cfg).num_parameters(trainable_only=True)
    torch.manual_seed(seed)
    model = build_model(config["variant"], lm, libra_cfg, match_parameters=reference)
    t0 = time.perf_counter()
    # The joint loss of the paper (text + visual next-code), except the caption-loss-only ablation.
    vision_weight = 0.0 if config["variant"] == "libra-caption-loss" else 1.0
    losses = train_captioner(model, d_train, CaptionTrainConfig(steps=int(config["steps"]),
                             batch_size=int(config["batch_size"]), lr=float(config["lr"]),
                             vision_loss_weight=vision_weight), seed=seed)  # fmt: skip
    train_s = time.perf_counter() - t0
    out = evaluate_captions(model, d_test, tok, max_new_tokens=int(config["max_new_tokens"]))
    text_loss = text_only_loss(model, tok, heldout_text)
    out.update({
        "trainable_parameters": model.num_parameters(trainable_only=True),
        "text_loss": text_loss, "text_loss_base": base_loss, "text_loss_change": text_loss - base_loss,
        "lm_unchanged": all(torch.equal(before[k], v) for k, v in lm.state_dict().items()),
        "final_train_loss": float(np.mean(losses[-20:])), "train_seconds": train_s,
        "lm_pretrain_loss": float(lm.pretrain_loss), "encoder_pretrain_loss": float(encoder.pretrain_loss),
    })  # fmt: skip
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    common = {**SETTINGS[scale], "scene": SCENE}
    jobs = []
    for v in VARIANTS[scale]:
        seeds_v = seed_list[:ABLATION_SEEDS] if scale == "full" and v in ABLATIONS and seeds is None else seed_list
        jobs += [Job(SLUG, "captioning", f"{__name__}:run_variant", {**common, "variant": v}, s) for s in seeds_v]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _paired(groups: dict, a: str, b: str, metric: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    ra = {r.job.seed: float(r.metrics[metric]) for r in groups.get(a, [])}
    rb = {r.job.seed: float(r.metrics[metric]) for r in groups.get(b, [])}
    seeds = sorted(set(ra) & set(rb))
    return np.array([ra[s] for s in seeds]), np.array([rb[s] for s in seeds]), seeds


def _power(diff: np.ndarray, effect: float) -> float | None:
    """Power of the one-sided paired t-test at this seed count for a true gain ``effect`` given the observed sd
    of the paired differences (None below two pairs or with no spread); the analyze test checks it by
    simulation."""
    from statsmodels.stats.power import TTestPower

    if diff.size < 2 or not np.std(diff, ddof=1) > 0:
        return None
    return float(TTestPower().power(effect_size=effect / float(np.std(diff, ddof=1)), nobs=int(diff.size),
                                    alpha=ALPHA, alternative="larger"))  # fmt: skip


def beats_check(groups: dict, method: str, baseline: str, *, id: str, decisive: bool) -> object:
    """``method`` captions better than ``baseline`` (attribute F1): one-sided paired t-test over seeds; TOST
    within +-EQUIVALENCE for "no better"."""
    a, b, seeds = _paired(groups, method, baseline, "attribute_f1")
    d = decide.compare(a, b, paired=True, alternative="greater", equivalence_margin=EQUIVALENCE, alpha=ALPHA,
                       effect_name=f"mean paired difference in attribute F1 ({VARIANT_NAMES[method]} - "
                                   f"{VARIANT_NAMES[baseline]})")  # fmt: skip
    power = _power(a - b, GAIN)
    pa, pb = _paired(groups, method, baseline, "trainable_parameters")[:2]
    params = f"; trainable parameters {int(pa.mean()) if pa.size else 0} vs {int(pb.mean()) if pb.size else 0}"
    return d.to_check(
        id=id, claim=f"{VARIANT_NAMES[method]} captions better (attribute F1) than {VARIANT_NAMES[baseline]}",
        evidence=f"{len(seeds)} seeds, {fmt_mean_std(a)} vs {fmt_mean_std(b)}{params}"
        + (f"; power {power:.2f} for a true gain of {GAIN:g}" if power is not None else ""),
        decisive=decisive, power=power)  # fmt: skip


def forgetting_check(groups: dict) -> object:
    """Full fine-tuning raises the text-only held-out loss above the frozen LM's (paired over seeds)."""
    rs = sorted(groups.get("full-ft", []), key=lambda r: r.job.seed)
    a = np.array([float(r.metrics["text_loss"]) for r in rs])
    base = np.array([float(r.metrics["text_loss_base"]) for r in rs])
    seeds = [r.job.seed for r in rs]
    d = decide.compare(a, base, paired=True, alternative="greater", alpha=ALPHA,
                       effect_name="mean increase of the text-only held-out loss (nats/token), fine-tuned LM - "
                                   "frozen LM")  # fmt: skip
    # Reported only: the paper's stage 2 unfreezes the LLM, so "fine-tuning degrades text" is not its claim.
    return d.to_check(id="full-finetuning-degrades-text", decisive=False,
                      claim="fine-tuning the LM with the vision task raises its text-only held-out loss",
                      evidence=f"{len(seeds)} seeds, after {fmt_mean_std(a)} vs before {fmt_mean_std(base)} nats/token")  # fmt: skip


def frozen_check(groups: dict) -> object:
    """With the LM frozen the text-only held-out loss is exactly the base LM's: every change is 0 (TOST at a
    1e-9 margin, which a bit-exact equality passes by construction and any real change fails)."""
    vals = np.array([float(r.metrics["text_loss_change"]) for v in ("libra", "libra-no-bridge", "llava")
                     for r in groups.get(v, [])])  # fmt: skip
    d = decide.equivalence(vals, 0.0, margin=1e-9, alpha=ALPHA,
                           effect_name="mean change of the text-only held-out loss with the LM frozen (nats/token)")  # fmt: skip
    unchanged = sum(bool(r.metrics["lm_unchanged"]) for v in ("libra", "libra-no-bridge", "llava")
                    for r in groups.get(v, []))  # fmt: skip
    # Reported only: with requires_grad off the weights cannot move, so this checks the code, not the paper.
    return d.to_check(id="frozen-lm-text-unchanged", decisive=False,
                      claim="with the LM frozen (Libra, Libra without bridge, LLaVA-style) the text-only held-out "
                            "loss is exactly unchanged",
                      evidence=f"{vals.size} jobs; largest |change| {np.abs(vals).max() if vals.size else float('nan'):.3g}; "
                               f"LM weights bit-identical after training in {unchanged} of {vals.size}")  # fmt: skip


def _table(groups: dict, variants: Sequence[str]) -> Table:
    cols = ("attribute_f1", "attribute_precision", "attribute_recall", "caption_exact", "count_accuracy",
            "text_loss_change")  # fmt: skip
    rows = []
    for v in variants:
        rs = groups.get(v, [])
        if rs:
            params = int(np.mean([float(r.metrics["trainable_parameters"]) for r in rs]))
            rows.append([VARIANT_NAMES[v], str(len(rs)), f"{params:,}"]
                        + [fmt_mean_std([float(r.metrics[m]) for r in rs]) for m in cols])  # fmt: skip
    return Table("Captioning on held-out scenes (mean ± std over seeds)",
                 ["variant", "seeds", "trainable parameters"] + [METRIC_NAMES[c] for c in cols], rows)  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    groups = {str(v): rs for (v,), rs in group_results(results, "captioning", by=("variant",)).items()}
    checks, tables, figures = [], [], []
    variants = [v for v in VARIANT_NAMES if v in groups]
    if groups:
        tables.append(_table(groups, variants))
        figures.append(_figure(groups, variants))
    if "libra" in groups and "llava" in groups:
        checks.append(beats_check(groups, "libra", "llava", id="libra-beats-llava", decisive=True))
    if "libra" in groups and "libra-no-bridge" in groups:
        checks.append(beats_check(groups, "libra", "libra-no-bridge", id="bridge-helps", decisive=True))
    if "libra-no-bridge" in groups and "llava" in groups:
        checks.append(beats_check(groups, "libra-no-bridge", "llava", id="routed-expert-beats-llava", decisive=False))
    for single in ("libra-discrete", "libra-continuous"):
        if "libra" in groups and single in groups:
            checks.append(beats_check(groups, "libra", single, id=f"hybrid-beats-{single.split('-')[1]}",
                                      decisive=False))  # fmt: skip
    if "libra" in groups and "libra-caption-loss" in groups:
        checks.append(beats_check(groups, "libra", "libra-caption-loss", id="visual-loss-helps", decisive=False))
    if "full-ft" in groups:
        checks.append(forgetting_check(groups))
        if "libra" in groups:
            checks.append(beats_check(groups, "libra", "full-ft", id="libra-vs-full-finetuning", decisive=False))
    if any(v in groups for v in ("libra", "libra-no-bridge", "llava")):
        checks.append(frozen_check(groups))
    verdicts = "; ".join(f"{c.id}: {c.verdict.replace('_', ' ')}" for c in checks if c.decisive)
    summary = (f"Scale {scale}. Paired over seeds (same data, same frozen LM and encoder, same initialisation of "
               f"the shared parts). Decisive: {verdicts or 'none (no results)'}. A caption gain smaller than the "
               "seed-to-seed noise is inconclusive, not a refutation; 'no better' needs a TOST within "
               f"+-{EQUIVALENCE:g} F1 or a significant loss.")  # fmt: skip
    return decide.analysis(checks, summary=summary, rule="all", tables=tables, figures=figures)


def _figure(groups: dict, variants: Sequence[str]) -> Figure:
    fig, ax = new_figure(1, 2, width=5.0)
    vals = [np.array([float(r.metrics["attribute_f1"]) for r in groups[v]]) for v in variants]
    ax[0, 0].bar(range(len(variants)), [x.mean() for x in vals],
                 yerr=[x.std(ddof=1) if x.size > 1 else 0 for x in vals], capsize=3, color="tab:blue")  # fmt: skip
    ax[0, 0].set_xticks(range(len(variants)), [VARIANT_NAMES[v] for v in variants], rotation=30, ha="right", fontsize=7)
    ax[0, 0].set(ylabel="attribute F1 of greedy captions (fraction)", title="Captioning")
    ch = [np.array([float(r.metrics["text_loss_change"]) for r in groups[v]]) for v in variants]
    ax[0, 1].bar(range(len(variants)), [x.mean() for x in ch],
                 yerr=[x.std(ddof=1) if x.size > 1 else 0 for x in ch], capsize=3, color="tab:red")  # fmt: skip
    ax[0, 1].set_xticks(range(len(variants)), [VARIANT_NAMES[v] for v in variants], rotation=30, ha="right", fontsize=7)
    ax[0, 1].set(ylabel="text-only held-out loss change (nats/token)", title="Forgetting of text")
    return Figure("Caption quality and text forgetting by variant", figure_png(fig),
                  "Bars: mean over seeds; error bars: std over seeds.")


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "A routed visual expert with a cross-modal bridge inside a frozen pre-trained LM, trained by next-token "
        "prediction on text and visual codes from hybrid visual input, captions better than a LLaVA-style "
        "projector into the same frozen LM at a similar trainable parameter count and better than itself without "
        "the bridge."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    required_metrics={"captioning": METRICS},
    deviations=(
        "Scale: a 2-layer, width-64 Llama-style LM (about 0.1 M parameters) pre-trained in-run for 300 steps on "
        "scene captions and questions, instead of LLaMA-2-7B-chat; image-caption training on 4000 synthetic "
        "scenes (32 x 32, 2 x 2 grid, one or two objects) instead of 50 M LAION pairs; no instruction tuning "
        "(stage 2), no VQA benchmarks.",
        "Vision tokenizer: residual k-means (scikit-learn KMeans, two codebooks of 64 codes) on the patch features "
        "of a tiny ViT pre-trained in-run on the scenes' per-cell colours and shapes, instead of lookup-free "
        "quantisation on CLIP ViT-L/14 features; 16 visual positions plus a begin-of-image token instead of "
        "24 x 24 + 2; the continuous signal is that ViT's 48-d feature instead of 2048-d CLIP; a learned visual "
        "position embedding is on (the official option use_vision_position_embedding, off there).",
        "Image-to-text order only (the pre-training config's i2t_prob 1); the joint loss is the text loss plus the "
        "mean over the two codebooks of the next-code loss, 1d prediction mode (the official default).",
        "The LLaVA-style baseline gets the same hybrid visual input embedding as Libra and a 2-layer MLP projector "
        "sized to Libra's trainable parameter count (LLaVA-1.5 uses a 2-layer MLP on CLIP features alone).",
        "Optimisation: AdamW lr 5e-3 (betas 0.9/0.95), batch 32, 5% warm-up and cosine decay to 10%, gradient "
        "clip 1, short runs (quick 200, full 400 steps); the paper trains for far longer on far more data. Full "
        "runs 5 seeds for the four main variants and 3 for the three ablations.",
        "The claim is scored by attribute exact-match of greedy captions (colour, shape, size per object cell), "
        "not CIDEr/VQA accuracy; one frozen LM and one encoder (seed 0) serve every seed, so seeds vary the "
        "training data, k-means and the vision system's initialisation.",
    ),
    scales=("smoke", "quick", "full"),
)
