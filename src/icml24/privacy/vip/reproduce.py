"""Miniature reproduction of ViP (Yu et al., ICML 2024, arXiv:2306.08842) on synthetic images and digits.

Claim (Sec. 3-4): pre-training the MAE on synthetic images and then training it with DP-SGD on the private
data (the ViP recipe) gives better features than DP training from scratch and than the synthetic model
alone, at the same privacy budget (epsilon = 8); and larger batches help at a fixed epsilon.

Runs per seed (the notes' R0-R4), all probed the same way (10-shot linear probes on frozen mean-pooled
encoder features of held-out digits, averaged over random draws of the shots):

* R0 the randomly initialised MAE; R1 (Syn)-ViP: non-private MAE on 10,000 synthetic images;
* R2 DP-MAE from scratch on the private set (epsilon 8, delta 1/(2N)); R3 ViP: R1 then DP-MAE (same budget);
* R4 R1 then non-private MAE on the private set (the no-privacy upper bound);
* full scale: R3 at expected batch sizes 64-512 with the same number of steps and the same epsilon
  (sigma recalibrated for each), for the batch-size claim.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

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
    mean_std,
    new_figure,
    seeds_for,
)

SLUG = "vip"
_FN = "icml24.privacy.vip.reproduce:run_vip"
DEFAULT_SEEDS = {"smoke": 1, "quick": 3, "full": 5}
RUNS = ("R0", "R1", "R2", "R3", "R4")
LABELS = {
    "R0": "random init (no training)",
    "R1": "(Syn)-ViP: synthetic pre-training only",
    "R2": "DP-MAE from scratch (epsilon 8)",
    "R3": "ViP: synthetic pre-training + DP-MAE (epsilon 8)",
    "R4": "synthetic + non-private MAE on the private set",
}
TARGET_EPSILON = 8.0
"""The paper's budget."""
MODEL = {"dim": 32, "depth": 2, "num_heads": 4, "decoder_dim": 32, "decoder_depth": 1, "decoder_heads": 4}
"""ViT-B/16 with a 512-d, 4-block decoder in the paper; a 2-block, 32-wide encoder on 16 tokens here."""
LR = 3e-3
"""Peak AdamW learning rate of every stage."""
_SCALE_CFG = {
    "smoke": {"n_syn": 256, "syn_steps": 4, "syn_batch": 64, "dp_steps": 3, "dp_batch": 64, "n_private": 300,
              "jitters": 2, "draws": 2, "batches": [], "warmup": 1},
    "quick": {"n_syn": 10_000, "syn_steps": 800, "syn_batch": 128, "dp_steps": 60, "dp_batch": 256,
              "n_private": 1000, "jitters": 15, "draws": 10, "batches": [], "warmup": 5},
    "full": {"n_syn": 10_000, "syn_steps": 2000, "syn_batch": 128, "dp_steps": 100, "dp_batch": 256,
             "n_private": 1000, "jitters": 15, "draws": 10, "batches": [64, 128, 256, 512], "warmup": 10},
}  # fmt: skip
SHOTS = 10
"""Labelled digits per class in the decisive few-shot probe (the paper reports 10- and 25-shot ImageNet too)."""


# ---------------------------------------------------------------------------------------------- the job
def _reconstruction_loss(model, images: np.ndarray, seed: int) -> float:
    """Mean masked-patch MAE loss on held-out images under fixed seeded masks."""
    import torch

    from icml24.privacy.vip.mae import random_masking

    x = torch.as_tensor(images)
    c = model.config
    masks = random_masking(
        len(x), c.num_patches, c.num_visible, generator=torch.Generator().manual_seed(seed)
    )
    model.eval()
    with torch.no_grad():
        loss = float(model(x, masks).mean())
    model.train()
    return loss


def run_vip(config: dict, seed: int) -> dict:
    """R0-R4 (and the batch sweep at full scale) for one seed; every model probed the same way."""
    import torch

    from icml24.privacy.vip import (
        DPConfig,
        MAEConfig,
        MAETrainConfig,
        MaskedAutoencoder,
        PrivacyAccount,
        few_shot_probe_accuracy,
        private_digits,
        synthetic_images,
        train_mae,
        train_mae_private,
    )

    data = private_digits(n_private=config["n_private"], jitters=config["jitters"], seed=seed)
    syn = synthetic_images(config["n_syn"], seed=seed + 10_000)
    torch.manual_seed(seed)
    base = MaskedAutoencoder(MAEConfig(**config["model"]))
    privacy = DPConfig(target_epsilon=config["epsilon"], max_grad_norm=config["clip"])
    out: dict = {"n_private": len(data.private)}

    def evaluate(name: str, model) -> None:
        out[f"probe/{name}"] = few_shot_probe_accuracy(model, data.downstream_x, data.downstream_y, shots=SHOTS,
                                                       draws=config["draws"], seed=seed)  # fmt: skip
        out[f"recon/{name}"] = _reconstruction_loss(model, data.downstream_x, seed)

    def private(init, batch: int, tag: str):
        # Each arm is a separate release at epsilon 8, declared by its own account: R2, R3 and the batch sweep
        # are alternatives one would deploy one of (releasing them all would compose their budgets).
        model = copy.deepcopy(init)
        arm = PrivacyAccount(
            privacy.target_epsilon, privacy.delta_for(len(data.private)), accountant=privacy.accountant
        )
        res = train_mae_private(model, data.private, MAETrainConfig(steps=config["dp_steps"], batch_size=batch,
                                lr=config["lr"], warmup_steps=config["warmup"]), privacy, seed=seed,
                                account=arm)  # fmt: skip
        out[f"epsilon/{tag}"], out[f"sigma/{tag}"] = res.epsilon, res.noise_multiplier
        out[f"epsilon_dp_accounting/{tag}"] = res.epsilon_dp_accounting
        out[f"mean_batch/{tag}"] = float(np.mean(res.batch_sizes))
        return model

    evaluate("R0", base)
    syn_model = copy.deepcopy(base)
    train_mae(syn_model, syn, MAETrainConfig(steps=config["syn_steps"], batch_size=config["syn_batch"], lr=config["lr"],
                                             warmup_steps=10 * config["warmup"]), seed=seed)  # fmt: skip
    evaluate("R1", syn_model)
    evaluate("R2", private(base, config["dp_batch"], "R2"))
    r3 = private(syn_model, config["dp_batch"], "R3")
    evaluate("R3", r3)
    r4 = copy.deepcopy(syn_model)
    train_mae(r4, data.private, MAETrainConfig(steps=config["dp_steps"], batch_size=config["dp_batch"],
                                               lr=config["lr"], warmup_steps=config["warmup"]), seed=seed)  # fmt: skip
    evaluate("R4", r4)
    for batch in config["batches"]:
        if batch == config["dp_batch"]:
            model = r3
            for k in ("epsilon", "epsilon_dp_accounting", "sigma", "mean_batch"):
                out[f"{k}/B{batch}"] = out[f"{k}/R3"]
        else:
            model = private(syn_model, batch, f"B{batch}")
        out[f"probe/B{batch}"] = out["probe/R3"] if batch == config["dp_batch"] else \
            few_shot_probe_accuracy(model, data.downstream_x, data.downstream_y, shots=SHOTS, draws=config["draws"],
                                    seed=seed)  # fmt: skip
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = dict(_SCALE_CFG["quick" if scale == "gpu" else scale])
    cfg.update(model=MODEL, lr=LR, epsilon=TARGET_EPSILON, clip=1.0)
    return [Job(SLUG, "recipe", _FN, cfg, s) for s in seeds_for(scale, seeds, DEFAULT_SEEDS)]


# ---------------------------------------------------------------------------------------------- analysis
ALPHA = 0.05
"""Level of each one-sided test."""
EQUIV = 0.01
"""A paired probe-accuracy difference shown (TOST) within +-1 point counts as "no gain", refuting a claimed one."""
PAPER_GAIN = 0.059
"""The paper's gain of ViP over (Syn)-ViP in ImageNet linear probing (55.7% vs 49.8%), the effect at which
the power of both comparisons is reported."""
SLOPE_EFFECT = 0.01
"""The batch-size effect at which that check's power is reported: +1 point of probe accuracy per doubling of
the batch (the paper's batch ablation figure was not readable here; an assumed moderate effect)."""


def _collect(results: Sequence[JobResult]) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for r in results:
        if r.status == "ok" and r.job.experiment == "recipe":
            for k, v in r.metrics.items():
                if isinstance(v, (int, float)):
                    out.setdefault(k, {})[r.job.seed] = float(v)
    return out


def _pair(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def _t_power(values: Sequence[float], effect: float) -> float | None:
    """Power of the one-sided (paired or one-sample) t-test at ``ALPHA`` for a true mean ``effect``, with the
    spread of the observed ``values`` (noncentral t, statsmodels ``TTestPower``); ``None`` under 2 values."""
    from statsmodels.stats.power import TTestPower

    v = np.asarray(values, float)
    if v.size < 2 or not np.isfinite(v).all():
        return None
    sd = max(float(v.std(ddof=1)), 1e-4)
    return float(
        TTestPower().power(effect_size=effect / sd, nobs=int(v.size), alpha=ALPHA, alternative="larger")
    )


def recipe_check(col: dict, method: str, baseline: str, check_id: str, claim: str) -> ClaimCheck:
    """``method`` has a higher 10-shot probe accuracy than ``baseline`` (paired over seeds)."""
    from icml24.common.decide import compare

    a, b = _pair(col.get(f"probe/{method}", {}), col.get(f"probe/{baseline}", {}))
    dec = compare(a, b, paired=True, alternative="greater", equivalence_margin=EQUIV, alpha=ALPHA,
                  effect_name=f"mean probe accuracy difference ({method} - {baseline})")  # fmt: skip
    return dec.to_check(id=check_id, claim=claim, power=_t_power(np.subtract(a, b), PAPER_GAIN))


def batch_slopes(col: dict) -> tuple[list[int], list[float]]:
    """Per seed, the OLS slope of R3's probe accuracy in log2(batch size); the batch sizes used."""
    batches = sorted(int(k.split("/B")[1]) for k in col if k.startswith("probe/B"))
    if len(batches) < 2:
        return batches, []
    seeds = sorted(set.intersection(*(set(col[f"probe/B{b}"]) for b in batches)))
    x = np.log2(batches)
    slopes = [float(np.polyfit(x, [col[f"probe/B{b}"][s] for b in batches], 1)[0]) for s in seeds]
    return batches, slopes


def batch_check(slopes: Sequence[float]) -> ClaimCheck:
    """Larger batches help at fixed epsilon: the mean per-seed slope of probe accuracy in log2(B) is > 0."""
    from icml24.common.decide import compare_to_value

    dec = compare_to_value(slopes, 0.0, alternative="greater", alpha=ALPHA,
                           effect_name="mean slope of probe accuracy per doubling of the batch")  # fmt: skip
    return dec.to_check(id="larger-batch-helps", power=_t_power(slopes, SLOPE_EFFECT), claim="At a fixed epsilon (8) and number of steps, a "
                        "larger expected batch gives better features (ViP's batch-size ablation)")  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import analysis

    col = _collect(results)
    n_seeds = len({r.job.seed for r in results if r.status == "ok"})
    present = [r for r in RUNS if f"probe/{r}" in col]
    rows = [[LABELS[r], fmt_mean_std(list(col[f"probe/{r}"].values())), fmt_mean_std(list(col.get(f"recon/{r}", {}).values()), 4),
             fmt_mean_std(list(col.get(f"epsilon/{r}", {}).values()), 4) if f"epsilon/{r}" in col else "-",
             fmt_mean_std(list(col[f"epsilon_dp_accounting/{r}"].values()), 4) if f"epsilon_dp_accounting/{r}" in col else "-",
             fmt_mean_std(list(col.get(f"sigma/{r}", {}).values())) if f"sigma/{r}" in col else "-"]
            for r in present]  # fmt: skip
    tables = [Table(f"Runs R0-R4 ({n_seeds} seeds; mean ± std over seeds)",
                    ["run", f"{SHOTS}-shot probe accuracy", "held-out reconstruction loss (MSE)", "epsilon spent",
                     "epsilon by dp-accounting", "noise multiplier sigma"], rows,
                    note="Probe: logistic regression on frozen mean-pooled encoder features of held-out digits, "
                    f"{SHOTS} labelled per class, averaged over random draws. delta = 1/(2N). sigma is calibrated on "
                    "the stricter of Opacus's and dp-accounting's RDP accountants; each private arm is a separate "
                    "release with its own account (releasing several would compose).")]  # fmt: skip
    checks = []
    if present:
        checks.append(recipe_check(col, "R3", "R2", "syn-init-beats-dp-scratch", "Synthetic pre-training then "
                                   "DP-MAE beats DP-MAE from scratch at the same epsilon (8)"))  # fmt: skip
        checks.append(recipe_check(col, "R3", "R1", "dp-stage-beats-syn-only", "Synthetic pre-training then "
                                   "DP-MAE beats the synthetic-only model ((Syn)-ViP)"))  # fmt: skip
        upper = recipe_check(col, "R4", "R3", "non-private-upper-bound", "Reported: the same training without "
                             "privacy (R4) is better than ViP (R3)")  # fmt: skip
        checks.append(replace(upper, decisive=False))
        syn = recipe_check(col, "R1", "R0", "syn-beats-random", "Reported: synthetic pre-training alone beats a "
                           "random encoder")  # fmt: skip
        checks.append(replace(syn, decisive=False))
    batches, slopes = batch_slopes(col)
    figures = []
    if slopes:
        checks.append(batch_check(slopes))
        brows = [[b, fmt_mean_std(list(col.get(f"sigma/B{b}", {}).values())),
                  fmt_mean_std(list(col.get(f"mean_batch/B{b}", {}).values()), 4),
                  fmt_mean_std(list(col.get(f"epsilon/B{b}", {}).values()), 4),
                  fmt_mean_std(list(col[f"probe/B{b}"].values()))] for b in batches]  # fmt: skip
        tables.append(Table(f"ViP (R3) vs expected batch size at epsilon 8, same number of steps ({n_seeds} seeds; "
                            "mean ± std over seeds)", ["batch size B", "sigma", "realised mean batch",
                            "epsilon spent", f"{SHOTS}-shot probe accuracy"], brows))  # fmt: skip
        fig, ax = new_figure()
        means = [mean_std(list(col[f"probe/B{b}"].values())) for b in batches]
        ax[0][0].errorbar(batches, [m[0] for m in means], yerr=[m[1] for m in means], marker="o", capsize=3)
        ax[0][0].set_xscale("log", base=2)
        ax[0][0].set_xticks(batches, [str(b) for b in batches])
        ax[0][0].set_xlabel("expected batch size B (records per step)")
        ax[0][0].set_ylabel(f"{SHOTS}-shot probe accuracy")
        figures.append(Figure("ViP probe accuracy vs batch size at epsilon 8 (error bars: std over seeds)",
                              figure_png(fig)))  # fmt: skip
    out = analysis(checks, summary="", rule="all", tables=tables, figures=figures)
    by_id = {c.id: c for c in checks}

    def m(run: str) -> str:
        v = list(col.get(f"probe/{run}", {}).values())
        return f"{mean_std(v)[0]:.3f}" if v else "n/a"

    def verdict(cid: str) -> str:
        return by_id[cid].verdict.replace("_", " ") if cid in by_id else "not evaluated at this scale"

    out.summary = (
        f"{scale} scale, {n_seeds} seed(s). {SHOTS}-shot probe accuracy: random {m('R0')}, synthetic only "
        f"{m('R1')}, DP from scratch {m('R2')}, ViP {m('R3')}, non-private {m('R4')}. ViP beats DP from "
        f"scratch: {verdict('syn-init-beats-dp-scratch')}; beats synthetic only: {verdict('dp-stage-beats-syn-only')}; "
        f"larger batches help: {verdict('larger-batch-helps')}. Rule: supported iff every decisive comparison "
        f"is supported (one-sided paired t-tests at alpha {ALPHA:g}); not_supported if any is shown the other "
        f"way or equivalent within ±{EQUIV:g} (TOST)."
    )
    return out


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Synthetic pre-training followed by DP-SGD MAE training (the ViP recipe) gives better features than DP "
        "training from scratch and than synthetic pre-training alone at the same epsilon, and larger batches "
        "help at a fixed epsilon."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    required_metrics={"recipe": tuple(f"probe/{r}" for r in RUNS)},
    deviations=(
        "Data: 10,000 procedural 16x16 images (gratings, Gabor blobs, strokes) instead of 1.05M Shaders21k "
        "images; 15,000 private records made of 15 affine jitters of each of 1,000 scikit-learn digits instead of "
        "233M LAION images, each jitter counted as one record (the privacy unit is the jittered image, not the "
        "digit: a digit's 15 copies are protected only by group privacy, epsilon about 15 x 8).",
        "Model: a 2-block, 32-wide ViT encoder on 16 patches of 4x4 pixels and a 1-block, 32-wide decoder (the "
        "shared tiny ViT; no class token, mean pooling) instead of ViT-B/16 with a 512-d, 4-block decoder; fixed "
        "sine-cosine position embeddings as in MAE.",
        "Training: 800 (quick) / 2,000 (full) synthetic steps at batch 128, then 60 / 100 DP steps at expected "
        "batch 256 (q = 1/59), C = 1, AdamW (0.9, 0.95, wd 0.005) at a fixed peak learning rate 3e-3 with warm-up "
        "and cosine decay, instead of ~6,000 steps at batch 98,304 and blr 1.5e-5 x B/256.",
        "DP-SGD by Opacus: the noised sum is divided by the expected batch size qN (the official code divides "
        "by the realised one); q = 1/ceil(N/B) (Opacus's convention); RDP accountant as the official code.",
        "Evaluation: a 10-shot logistic-regression probe on held-out digits (mean over random draws of the "
        "shots) instead of the full ImageNet linear probe (LARS, 90 epochs); no fine-tuning, no other datasets.",
        "Batch-size claim (full scale only): expected batch 64-512 at the same number of steps, sigma "
        "recalibrated to epsilon 8 for each; the learning rate is not scaled with the batch.",
        "Not reproduced: absolute accuracies, the comparisons with TAN, AlexNet and SimCLR, scaling of model and "
        "data size, the epsilon sweep.",
    ),
)
