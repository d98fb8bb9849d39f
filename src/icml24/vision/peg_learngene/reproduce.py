"""Miniature reproduction of PEG (Wang et al., ICML 2024, https://proceedings.mlr.press/v235/wang24cf.html).

Claim (abstract): a learngene sampled from an ancestry ViT by probabilistic mixture and expanded non-linearly
initialises descendant ViTs of elastic sizes better than traditional initialisations; inherited initialisations
converge faster (the repository's convergence figure).

Setting (notes section 6): an ancestry ViT (width 64, 4 heads, 6 layers, 2x2 patches of 8x8 digits) is trained
on the digits 0-4, once per seed; descendants of ``(H_d, L_d)`` heads and layers are initialised from a learngene
of 2 heads and 3 FFN layers and trained on a few-shot task (the digits 5-9, 20 images per class), against
random initialisation, direct inheritance (first heads and layers), the uniform mixture, TLEG-style linear
expansion and (at the ancestry's size) the ancestry itself. Every method trains for the same epochs with the same
optimiser, data order and classifier initialisation (paired by seed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

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
    new_figure,
    seeds_for,
)

SLUG = "peg-learngene"
_FN = "icml24.vision.peg_learngene.reproduce:"
DEFAULT_SEEDS = {"smoke": 1, "quick": 4, "full": 6}
LABELS = {
    "random": "random initialisation",
    "peg": "PEG (Gaussian mixture, trained maps, FFNs untied after expansion)",
    "peg_tied": "PEG with FFNs tied to the learngene (ablation)",
    "direct": "direct inheritance (first heads/layers)",
    "peg_uniform": "PEG with uniform mixture",
    "tleg": "TLEG-style linear expansion",
    "ancestry": "ancestry fine-tuning",
    "peg_random_maps": "PEG with randomly initialised maps",
    "peg_released": "PEG as released (mixture dropped, Linears re-drawn)",
}
EARLY_EPOCH = 5
"""'Accuracy after few epochs': test accuracy after this many epochs (of 20)."""

_SCALE_CFG = {
    "smoke": {"ancestry_epochs": 2, "epochs": 2, "sizes": [[4, 6]], "methods": ["random", "peg", "direct"],
              "extra": [], "eval_subset": 100},
    "quick": {"ancestry_epochs": 12, "epochs": 20, "sizes": [[4, 6]],
              "methods": ["random", "peg", "direct", "peg_uniform", "peg_tied"], "extra": [], "eval_subset": 250},
    "full": {"ancestry_epochs": 15, "epochs": 20, "sizes": [[2, 3], [4, 6], [6, 9]],
             "methods": ["random", "peg", "direct", "tleg"],
             "extra": ["peg_uniform", "peg_tied", "ancestry", "peg_random_maps", "peg_released"], "eval_subset": 250},
}  # fmt: skip
ANCESTRY = {"dim": 64, "heads": 4, "depth": 6, "mlp_dim": 256, "lr": 2e-3, "batch_size": 32}
"""The ancestry ViT of the notes (D=64, H=4, L=6, MLP ratio 4); AdamW."""
LEARNGENE = {"heads": 2, "layers": 3}
"""H_g and L_g of the notes."""


def _key(size: Sequence[int], method: str) -> str:
    return f"{size[0]}x{size[1]}/{method}"


def run_seed(config: dict, seed: int) -> dict:
    """Train the ancestry once, then every (descendant size, method) of the config on the few-shot task."""
    from icml24.vision.peg_learngene.learngene import DescendantSpec, build_descendant
    from icml24.vision.peg_learngene.training import TrainConfig, accuracy, digits_split, train_classifier
    from icml24.vision.tiny_vit import TinyViT

    data = digits_split(seed, shots=config.get("shots", 20))
    torch.manual_seed(seed)
    a = ANCESTRY
    ancestry = TinyViT(image_size=8, patch_size=2, num_classes=5, dim=a["dim"], depth=a["depth"],
                       num_heads=a["heads"], mlp_dim=a["mlp_dim"], dropout=0.0)  # fmt: skip
    train_classifier(ancestry, data["x_ancestry"], data["y_ancestry"], generator=torch.Generator().manual_seed(seed),
                     config=TrainConfig(epochs=config["ancestry_epochs"], batch_size=a["batch_size"], lr=a["lr"]))  # fmt: skip
    out: dict = {"ancestry_acc": accuracy(ancestry, data["x_ancestry_test"], data["y_ancestry_test"])}
    # The accuracy-vs-epoch curve is measured on a fixed random subset of the test set (to keep 20 evaluations
    # cheap); the final accuracy on the whole test set.
    sub = torch.as_tensor(np.random.default_rng(seed + 99).permutation(len(data["x_test"]))[: config["eval_subset"]])
    xs, ys = data["x_test"][sub], data["y_test"][sub]
    tcfg = TrainConfig(epochs=config["epochs"])
    runs = [(s, m) for s in config["sizes"] for m in config["methods"]]
    runs += [(s, m) for s in config["sizes"] for m in config["extra"] if tuple(s) == (a["heads"], a["depth"])]
    for size, method in runs:
        spec = DescendantSpec(learngene_heads=LEARNGENE["heads"], learngene_layers=LEARNGENE["layers"],
                              descendant_heads=size[0], descendant_layers=size[1])  # fmt: skip
        # One generator per (seed, size) shared by all methods: the same classifier init and data order (paired).
        gen = torch.Generator().manual_seed(seed * 1000 + size[0] * 10 + size[1])
        model = build_descendant(ancestry, spec, method, num_classes=5, generator=gen)
        order = torch.Generator().manual_seed(seed * 7 + 1)
        start = time.perf_counter()
        curve = train_classifier(model, data["x_train"], data["y_train"], config=tcfg, x_test=xs, y_test=ys,
                                 generator=order)  # fmt: skip
        k = _key(size, method)
        out[f"{k}/train_seconds"] = time.perf_counter() - start  # wall clock (with the per-epoch evaluations)
        out[f"{k}/acc"] = accuracy(model, data["x_test"], data["y_test"])
        out[f"{k}/acc_early"] = curve[min(EARLY_EPOCH, len(curve)) - 1]
        out[f"{k}/auc"] = float(np.mean(curve))
        out[f"{k}/curve"] = curve
        out[f"{k}/params"] = sum(p.numel() for p in model.parameters())
    return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = _SCALE_CFG["quick" if scale == "gpu" else scale]
    return [Job(SLUG, "descendants", _FN + "run_seed", dict(cfg), s) for s in seeds_for(scale, seeds, DEFAULT_SEEDS)]


# ---------------------------------------------------------------------------------------------- analysis
ALPHA = 0.05
"""Family-wise level of the four decisive tests (Holm-corrected)."""
EQUIV_MARGIN = 0.02
"""A paired accuracy (or AUC) difference shown within ±0.02 (TOST) counts as "no gain", refuting a claimed one."""
POWER_GAIN_RANDOM = 0.10
"""Gain over random initialisation at which power is reported (an assumption: the paper's tables were not readable
here; ten accuracy points is a modest gain for inheritance at few-shot scale)."""
POWER_GAIN_DIRECT = 0.05
"""Gain of PEG over direct inheritance at which power is reported (assumed, as above)."""


def collect_metrics(results: Sequence[JobResult]) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, list]]]:
    scal: dict[str, dict[int, float]] = {}
    curves: dict[str, dict[int, list]] = {}
    for r in results:
        if r.status != "ok" or r.job.experiment != "descendants":
            continue
        for k, v in r.metrics.items():
            if isinstance(v, list):
                curves.setdefault(k, {})[r.job.seed] = v
            elif isinstance(v, (int, float)):
                scal.setdefault(k, {})[r.job.seed] = float(v)
    return scal, curves


def epochs_to_reach(curve: Sequence[float], target: float) -> int:
    """The first epoch (1-based) at which ``curve`` reaches ``target``; ``len(curve)`` if it never does."""
    for i, v in enumerate(curve):
        if v >= target:
            return i + 1
    return len(curve)


def _sizes(col: dict) -> list[str]:
    return sorted({k.split("/")[0] for k in col if k.count("/") == 2}, key=lambda s: tuple(map(int, s.split("x"))))


def size_averaged(col: dict[str, dict[int, float]], method: str, metric: str) -> dict[int, float]:
    """Per seed, the metric of ``method`` averaged over the descendant sizes run (the sizes every seed has)."""
    keys = [f"{s}/{method}/{metric}" for s in _sizes(col) if f"{s}/{method}/{metric}" in col]
    if not keys:
        return {}
    seeds = set.intersection(*(set(col[k]) for k in keys))
    return {s: float(np.mean([col[k][s] for k in keys])) for s in sorted(seeds)}


def _pair(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def _power(a: Sequence[float], b: Sequence[float], gain: float, alpha: float) -> float | None:
    """Power of a one-sided paired t-test at ``alpha`` for a true gain ``gain`` with the observed spread of the
    paired differences (noncentral t, statsmodels ``TTestPower``; ``alpha`` is Holm's strictest level, so this
    is a lower bound for the decisive rule; tests simulate the whole rule)."""
    from statsmodels.stats.power import TTestPower

    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size < 2:
        return None
    sd = max(float(d.std(ddof=1)), 1e-3)
    return float(TTestPower().power(effect_size=gain / sd, nobs=int(d.size), alpha=alpha, alternative="larger"))


def decisive_checks(col: dict[str, dict[int, float]], *, with_power: bool = True) -> list[ClaimCheck]:
    """The four decisive checks on per-seed metrics ``{metric key: {seed: value}}`` (Holm-corrected)."""
    from icml24.common.decide import compare, holm

    decisions, meta = [], []
    for cid, m, b, metric, claim, gain in DECISIVE:
        x, y = _pair(size_averaged(col, m, metric), size_averaged(col, b, metric))
        decisions.append(compare(x, y, paired=True, alternative="greater", equivalence_margin=EQUIV_MARGIN,
                                 alpha=ALPHA, effect_name=f"mean paired difference in {metric} ({LABELS[m]} - "
                                 f"{LABELS[b]}), averaged over the descendant sizes"))  # fmt: skip
        meta.append((cid, claim, _power(x, y, gain, ALPHA / len(DECISIVE)) if with_power else None))
    checks = [dec.to_check(id=cid, claim=claim, power=pw) for dec, (cid, claim, pw) in zip(holm(decisions), meta)]
    return [_note_equivalence_reach(c, *_pair(size_averaged(col, m, metric), size_averaged(col, b, metric)))
            for c, (_, m, b, metric, _, _) in zip(checks, DECISIVE)]  # fmt: skip


def equivalence_reach(a: Sequence[float], b: Sequence[float]) -> float:
    """The largest |mean paired difference| at which the refuting TOST within ±EQUIV_MARGIN can still fire with
    this many seeds and this spread: ``EQUIV_MARGIN - t_{1-ALPHA, n-1} sd / sqrt(n)``; at or below 0 the equivalence
    route cannot refute at all (only a significantly negative difference can). NaN below 2 pairs."""
    from scipy.stats import t as student_t

    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size < 2:
        return float("nan")
    return float(EQUIV_MARGIN - student_t.ppf(1 - ALPHA, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))


def _note_equivalence_reach(check: ClaimCheck, a: Sequence[float], b: Sequence[float]) -> ClaimCheck:
    from dataclasses import replace

    reach = equivalence_reach(a, b)
    if not np.isfinite(reach):
        return check
    note = (f"; the TOST within ±{EQUIV_MARGIN:g} cannot fire at {len(a)} seeds with this spread" if reach <= 0 else
            f"; the TOST within ±{EQUIV_MARGIN:g} would need |mean difference| < {reach:.3f} at {len(a)} seeds")  # fmt: skip
    return replace(check, evidence=check.evidence + note)


DECISIVE = (
    # (id, method, baseline, metric, claim, power gain)
    ("peg-beats-random-final", "peg", "random", "acc",
     "PEG's descendants reach a higher few-shot test accuracy than randomly initialised ones", POWER_GAIN_RANDOM),
    ("peg-faster-early", "peg", "random", "acc_early",
     f"PEG's descendants are more accurate than random ones after {EARLY_EPOCH} epochs (faster convergence)",
     POWER_GAIN_RANDOM),
    ("peg-faster-auc", "peg", "random", "auc",
     "PEG's accuracy-vs-epoch curve has a larger area than random initialisation's (faster convergence)",
     POWER_GAIN_RANDOM),
    ("peg-beats-direct", "peg", "direct", "acc",
     "PEG's descendants reach a higher test accuracy than direct inheritance of the first heads and layers",
     POWER_GAIN_DIRECT),
)  # fmt: skip


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import analysis, compare

    col, curves = collect_metrics(results)
    sizes = _sizes(col)
    methods = [m for m in LABELS if any(f"{s}/{m}/acc" in col for s in sizes)]
    tables, figures, checks = [], [], []
    for s in sizes:
        rows = []
        for m in methods:
            if f"{s}/{m}/acc" not in col:
                continue
            rows.append([LABELS[m], *(fmt_mean_std(list(col[f"{s}/{m}/{x}"].values())) for x in
                                      ("acc", "acc_early", "auc")), int(np.mean(list(col[f"{s}/{m}/params"].values())))])  # fmt: skip
        h, d = s.split("x")
        tables.append(Table(f"Descendant with {h} heads and {d} layers, digits 5-9 with 20 shots per class "
                            "(mean ± std over seeds)",
                            ["initialisation", "test accuracy (20 epochs)", f"accuracy after {EARLY_EPOCH} epochs",
                             "area under the accuracy curve", "parameters"], rows,
                            note="Accuracy after 5 epochs and the curve's area (mean accuracy over the 20 epochs) "
                                 "are measured on a fixed 250-image subset of the test set; the final accuracy on "
                                 "all of it."))  # fmt: skip
    for s in sizes:
        target = curves.get(f"{s}/random/curve", {})
        rows = []
        for m in methods:
            c = curves.get(f"{s}/{m}/curve", {})
            seeds = sorted(set(c) & set(target))
            if not seeds or m == "random":
                continue
            ep = [epochs_to_reach(c[k], target[k][-1]) for k in seeds]
            secs = [col[f"{s}/{m}/train_seconds"][k] / col[f"{s}/random/train_seconds"][k] for k in seeds
                    if k in col.get(f"{s}/{m}/train_seconds", {}) and k in col.get(f"{s}/random/train_seconds", {})]
            rows.append([LABELS[m], fmt_mean_std(ep), fmt_mean_std([len(target[k]) / e for k, e in zip(seeds, ep)]),
                         fmt_mean_std(secs) if secs else "n/a"])  # fmt: skip
        if rows:
            h, d = s.split("x")
            tables.append(Table(f"Convergence, {h} heads and {d} layers: epochs to reach the accuracy random "
                                "initialisation has after all its epochs (mean ± std over seeds)",
                                ["initialisation", "epochs to reach it", "speed-up in epochs (vs random)",
                                 "training wall time / random's (same run, one core)"], rows,
                                note="A run that never reaches the target counts as needing all its epochs; wall "
                                     "times are measured side by side in the same job and include the "
                                     "per-epoch evaluations."))  # fmt: skip
    anc = list(col.get("ancestry_acc", {}).values())
    if anc:
        tables.append(Table("Ancestry (trained on digits 0-4) held-out accuracy", ["ancestry", "accuracy"],
                            [["ViT, width 64, 4 heads, 6 layers", fmt_mean_std(anc)]]))  # fmt: skip
    main = "4x6" if "4x6" in sizes else (sizes[0] if sizes else None)
    if main:
        fig, ax = new_figure()
        for m in methods:
            c = curves.get(f"{main}/{m}/curve", {})
            if not c:
                continue
            arr = np.asarray(list(c.values()), float)
            ep = np.arange(1, arr.shape[1] + 1)
            mu, sd = arr.mean(0), (arr.std(0, ddof=1) if len(arr) > 1 else np.zeros(arr.shape[1]))
            ax[0][0].plot(ep, mu, label=LABELS[m])
            ax[0][0].fill_between(ep, mu - sd, mu + sd, alpha=0.15)
        ax[0][0].set_xlabel("training epoch on the few-shot task")
        ax[0][0].set_ylabel("test accuracy (250-image subset)")
        ax[0][0].legend(fontsize=7)
        h, d = main.split("x")
        figures.append(Figure(f"Accuracy vs epoch, descendant of {h} heads and {d} layers (mean, band: ± std over "
                              "seeds)", figure_png(fig)))  # fmt: skip

    checks.extend(decisive_checks(col))

    # Reported, not decisive: every other inherited initialisation against random, PEG against each baseline,
    # and PEG against direct inheritance at each size.
    for m in methods:
        if m in ("random", "peg"):
            continue
        for metric in ("acc", "auc"):
            x, y = _pair(size_averaged(col, m, metric), size_averaged(col, "random", metric))
            if len(x) >= 2 and m not in ("ancestry", "peg_random_maps", "peg_released"):
                checks.append(compare(x, y, paired=True, alternative="greater", equivalence_margin=EQUIV_MARGIN,
                                      alpha=ALPHA, effect_name=f"mean paired {metric} difference ({LABELS[m]} - random)"
                                      ).to_check(id=f"{m}-vs-random-{metric}", decisive=False,
                                                 claim=f"{LABELS[m]} beats random initialisation ({metric})"))  # fmt: skip
    for s in sizes:
        for b in methods:
            if b == "peg" or f"{s}/{b}/acc" not in col:
                continue
            x, y = _pair(col.get(f"{s}/peg/acc", {}), col[f"{s}/{b}/acc"])
            if len(x) >= 2:
                checks.append(compare(x, y, paired=True, alternative="greater", equivalence_margin=EQUIV_MARGIN,
                                      alpha=ALPHA, effect_name=f"mean paired accuracy difference (PEG - {LABELS[b]})"
                                      ).to_check(id=f"peg-vs-{b}-{s}", decisive=False,
                                                 claim=f"PEG beats {LABELS[b]} at {s} (heads x layers)"))  # fmt: skip

    out = analysis(checks, summary="", rule="all", tables=tables, figures=figures)
    by = {c.id: c for c in checks}
    n = len({r.job.seed for r in results if r.status == "ok"})

    def eff(cid: str) -> str:
        c = by.get(cid)
        return f"{c.verdict.replace('_', ' ')} ({c.effect:+.3f})" if c and c.effect is not None else "missing"

    out.summary = (
        f"{scale} scale, {n} seed(s), descendant sizes {', '.join(sizes)} (heads x layers). PEG vs random: final "
        f"accuracy {eff('peg-beats-random-final')}, after {EARLY_EPOCH} epochs {eff('peg-faster-early')}, curve "
        f"area {eff('peg-faster-auc')}; PEG vs direct inheritance: {eff('peg-beats-direct')}. Rule: supported iff "
        "all four one-sided paired t-tests (Holm-corrected at family level 0.05) are supported; not_supported if "
        "any is refuted (significantly worse, or TOST-equivalent within ±0.02)."
    )
    return out


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Descendant ViTs initialised from a learngene sampled by Gaussian-softmax mixtures and expanded by "
        "non-linear maps (PEG) beat random initialisation at low data, converge faster, and beat direct "
        "inheritance of the ancestry's first heads and layers."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    required_metrics={"descendants": ("ancestry_acc",)},
    deviations=(
        "Data and scale: an ancestry ViT (width 64, 4 heads, 6 layers) trained on scikit-learn's digits 0-4 "
        "instead of a pretrained DeiT on ImageNet-1K; descendants fine-tuned on digits 5-9 with 20 images per "
        "class for 20 epochs, instead of 100 ImageNet epochs then CIFAR transfer.",
        "Learngene of 2 heads and 3 FFN layers; descendants (heads, layers) = (4, 6) at quick, (2, 3), (4, 6), "
        "(6, 9) at full (the code has 6 -> 4 -> 6 heads and 12 -> 6 -> 12 layers).",
        "The head mixture is used (the released code computes it, then overwrites it with the first heads), and "
        "inherited weights are kept (the code's closing re-initialisation of every Linear and LayerNorm is not "
        "applied); the released behaviour is an ablation at full scale.",
        "Expansion maps start as an exact copy, phi(x) = [S, -S] ReLU([I; -I] x) (the code draws them at random; "
        "random maps are an ablation); the head maps are trained with the descendant, the depth map is applied "
        "once and its outputs written into independent per-layer FFNs, as the code's TransMlp does; FFNs tied to "
        "the learngene for the whole training are an ablation (peg_tied).",
        "Mean pooling instead of a CLS token (the shared tiny ViT); the output projection's columns are mixed "
        "like the heads (the code keeps the first columns); descendant layer i takes its LayerNorms and attention "
        "heads from ancestry layer floor(i L / L_d).",
        "TLEG is emulated by linear interpolation between the ancestry's first and last layers (TLEG trains its "
        "two-layer learngene with an auxiliary model); no Heur-LG, Auto-LG, SWS or weight selection baselines.",
        "No augmentation (DeiT's RandAugment, mixup, cutmix, random erase), no warm-up; AdamW 1e-3 with cosine "
        "decay for every method.",
    ),
)
