"""Miniature reproduction of KEP-SVGP (Chen et al., ICML 2024, arXiv:2402.01476) on sklearn digits.

Claim: replacing softmax attention by KEP-SVGP attention keeps accuracy and improves uncertainty (NLL, ECE,
AURC, failure-detection AUROC) in distribution and under distribution shift, and is competitive for OOD
detection; the cost grows linearly in the number of tokens.

A tiny ViT (2x2 patches -> 16 tokens, depth 2, width 32, 4 heads) whose last block's attention is KEP-SVGP
(as in the official ViT, ``ksvd_layers=1``), against the same ViT with softmax attention: its maximum softmax
probability (MSP, one pass), temperature scaling fitted on the validation split, MC dropout (10 passes) and a
deep ensemble of softmax ViTs. KEP-SVGP is scored with one posterior sample (the official test) against the
one-pass baselines and with 10 samples against MC dropout, so that passes are matched. Shifts (a CIFAR-10-C analogue): Gaussian noise, rotations of up to
30 degrees, pixel dropout. OOD: train on classes 0-4, the digits 5-9 are out of distribution.
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
    mean_std,
    new_figure,
    seeds_for,
)

SLUG = "kep-svgp"
_FN = "icml24.gp.kep_svgp.reproduce:"
DEFAULT_SEEDS = {"smoke": 1, "quick": 5, "full": 5}
SPLITS = ("clean", "noise", "rotate", "dropout")
METRICS = ("acc", "nll", "ece", "aurc", "fauroc")
LOWER_BETTER = {"nll", "ece", "aurc"}
VARIANTS = ("softmax", "temp_scaled", "mc_dropout", "ensemble", "kep_sum_1pass", "kep_sum", "kep_sum_mean",
            "kep_sum_kl1", "kep_concat_1pass", "kep_concat", "kep_concat_mean")  # fmt: skip
LABELS = {
    "softmax": "softmax attention (MSP, 1 pass)",
    "temp_scaled": "softmax + temperature scaling (1 pass)",
    "mc_dropout": "MC dropout (10 passes)",
    "ensemble": "deep ensemble (3 softmax ViTs)",
    "kep_sum_1pass": "KEP-SVGP sum (1 sample)",
    "kep_sum": "KEP-SVGP sum (10 samples)",
    "kep_sum_mean": "KEP-SVGP sum, posterior-mean path",
    "kep_sum_kl1": "KEP-SVGP sum, official KL weight 1 (10 samples)",
    "kep_concat_1pass": "KEP-SVGP concat (1 sample)",
    "kep_concat": "KEP-SVGP concat (10 samples)",
    "kep_concat_mean": "KEP-SVGP concat, posterior-mean path",
}
COMPARISONS = (
    # (KEP-SVGP variant, baseline, why the pair is matched)
    ("kep_sum_1pass", "softmax", "one forward pass each"),
    ("kep_sum_1pass", "temp_scaled", "one forward pass each; the baseline is recalibrated on the validation split"),
    ("kep_sum", "mc_dropout", "ten stochastic forward passes each"),
)
"""The decisive uncertainty comparisons: KEP-SVGP against each baseline at the same number of passes."""

LR = 3e-3
"""Peak Adam learning rate for every method (the paper: 1e-3 over 300 epochs; 1e-3 over 40 epochs left both
softmax and KEP-SVGP ViTs under-trained here, see the README)."""

_SCALE_CFG = {
    "smoke": {"epochs": 1, "n_train": 200, "methods": ["softmax", "kep_sum"], "ood_methods": ["kep_sum"],
              "timing": False},
    "quick": {"epochs": 40, "n_train": None, "methods": ["softmax", "kep_sum", "kep_sum_kl1"],
              "ood_methods": [], "timing": False},
    "full": {"epochs": 60, "n_train": None, "methods": ["softmax", "kep_sum", "kep_sum_kl1", "kep_concat", "ensemble"],
             "ood_methods": ["softmax", "kep_sum", "kep_concat", "ensemble"], "timing": True},
}  # fmt: skip


# ---------------------------------------------------------------------------------------------- data
def load_digit_splits(seed: int, classes: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Digits as ``(n, 1, 8, 8)`` images in [0, 1], split 60/20/20 (train/val/test) with a seeded shuffle."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 1, 8, 8).astype(np.float32)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_tr, n_va = int(0.6 * len(x)), int(0.2 * len(x))
    parts = {"train": perm[:n_tr], "val": perm[n_tr : n_tr + n_va], "test": perm[n_tr + n_va :]}
    out = {}
    for name, idx in parts.items():
        out[f"x_{name}"], out[f"y_{name}"] = x[idx], y[idx]
    if classes is not None:
        keep = set(classes)
        for name in parts:
            mask = np.isin(out[f"y_{name}"], list(keep))
            out[f"x_{name}_out"], out[f"y_{name}_out"] = out[f"x_{name}"][~mask], out[f"y_{name}"][~mask]
            out[f"x_{name}"], out[f"y_{name}"] = out[f"x_{name}"][mask], out[f"y_{name}"][mask]
    return out


def shift(x: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Corrupt images: ``noise`` (Gaussian, σ=0.3), ``rotate`` (uniform ±30°), ``dropout`` (30% of pixels)."""
    if kind == "clean":
        return x
    if kind == "noise":
        return np.clip(x + rng.normal(0.0, 0.3, x.shape), 0.0, 1.0).astype(np.float32)
    if kind == "dropout":
        return (x * (rng.random(x.shape) >= 0.3)).astype(np.float32)
    if kind == "rotate":
        ang = np.deg2rad(rng.uniform(-30.0, 30.0, len(x)))
        theta = np.zeros((len(x), 2, 3))
        theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = np.cos(ang), -np.sin(ang), np.sin(ang), np.cos(ang)
        t = torch.as_tensor(x)
        grid = torch.nn.functional.affine_grid(torch.as_tensor(theta, dtype=t.dtype), list(t.shape), align_corners=False)
        return torch.nn.functional.grid_sample(t, grid, align_corners=False).numpy()
    raise ValueError(f"unknown shift {kind!r}")


# ---------------------------------------------------------------------------------------------- models
def build_model(method: str, *, num_classes: int, patch_size: int = 2, rank: int = 4, seed: int = 0) -> torch.nn.Module:
    """The tiny ViT with softmax attention everywhere, or with KEP-SVGP attention in its last block."""
    from icml24.gp.kep_svgp.attention import KEPSVGPAttention
    from icml24.vision.tiny_vit import SoftmaxAttention, TinyViT

    torch.manual_seed(seed)
    dim, heads, depth = 32, 4, 2
    seq_len = (8 // patch_size) ** 2

    def factory(i: int) -> torch.nn.Module:
        if method.startswith("kep") and i == depth - 1:
            return KEPSVGPAttention(
                dim=dim, num_heads=heads, seq_len=seq_len, rank=rank, rank_multi=rank, concat=method == "kep_concat",
                proj_drop=0.1,
            )
        return SoftmaxAttention(dim=dim, num_heads=heads, proj_drop=0.1)

    return TinyViT(image_size=8, patch_size=patch_size, num_classes=num_classes, dim=dim, depth=depth,
                   num_heads=heads, mlp_dim=64, dropout=0.1, attention_factory=factory)  # fmt: skip


def _kep_cfg(method: str, n_train: int):
    from icml24.gp.kep_svgp.training import KEPSVGPConfig

    # KL weight 1/N_train makes CE (a per-example mean) + KL a per-example ELBO; "kep_sum_kl1" uses the official
    # code's weight 1 on the undivided KL (an ablation). η_ksvd 0.1 is the code's option default.
    eta_kl = 1.0 if method.endswith("_kl1") else 1.0 / n_train
    return KEPSVGPConfig(rank=4, rank_multi=4, concat=method == "kep_concat", eta_ksvd=0.1, eta_kl=eta_kl)


def _train_and_predict(method: str, data: dict, inputs: dict[str, np.ndarray], cfg: dict, seed: int,
                       num_classes: int) -> dict[str, dict[str, np.ndarray]]:  # fmt: skip
    """Train ``method`` and return ``{variant: {split: probs}}``."""
    from icml24.gp.kep_svgp import metrics as M
    from icml24.gp.kep_svgp.training import TrainConfig, kep_layers, predict_proba, train_classifier

    x_tr, y_tr = data["x_train"], data["y_train"]
    if cfg.get("n_train"):
        x_tr, y_tr = x_tr[: cfg["n_train"]], y_tr[: cfg["n_train"]]
    xt, yt = torch.as_tensor(x_tr), torch.as_tensor(y_tr, dtype=torch.long)
    tcfg = TrainConfig(epochs=cfg["epochs"], warmup_epochs=min(2, cfg["epochs"]), lr=cfg.get("lr", 1e-3))
    members = 3 if method == "ensemble" else 1
    probs: dict[str, dict[str, list[np.ndarray]]] = {}

    def add(variant: str, split: str, p: np.ndarray) -> None:
        probs.setdefault(variant, {}).setdefault(split, []).append(p)

    for k in range(members):
        gen = torch.Generator().manual_seed(seed * 1000 + k)
        model = build_model(method, num_classes=num_classes, seed=seed * 1000 + k)
        kcfg = _kep_cfg(method, len(xt)) if method.startswith("kep") else None
        train_classifier(model, xt, yt, config=tcfg, generator=gen, kep=kcfg)
        torch.manual_seed(seed * 1000 + k + 7)  # the draws of MC dropout and of the SVGP posterior
        if method == "softmax":
            # Temperature scaling (Guo et al. 2017): T fitted by NLL on the validation split, never on test data.
            temperature = M.fit_temperature(predict_proba(model, torch.as_tensor(data["x_val"])), data["y_val"])
        for split, x in inputs.items():
            xs = torch.as_tensor(x)
            if method == "softmax":
                p1 = predict_proba(model, xs)
                add("softmax", split, p1)
                add("temp_scaled", split, M.apply_temperature(p1, temperature))
                add("mc_dropout", split, predict_proba(model, xs, n_samples=10, mc_dropout=True))
            elif method == "ensemble":
                add("ensemble", split, predict_proba(model, xs))
            else:
                layers = kep_layers(model)
                add(method, split, predict_proba(model, xs, n_samples=10))
                if method.endswith("_kl1"):
                    continue  # the KL-weight ablation is scored with 10 samples only
                add(f"{method}_1pass", split, predict_proba(model, xs, n_samples=1))
                for layer in layers:
                    layer.sample = False
                add(f"{method}_mean", split, predict_proba(model, xs))
                for layer in layers:
                    layer.sample = True
    return {v: {s: np.mean(p, axis=0) for s, p in d.items()} for v, d in probs.items()}


# ---------------------------------------------------------------------------------------------- jobs
def run_uq(config: dict, seed: int) -> dict:
    """In-distribution and shifted-data metrics of one method (all its variants)."""
    from icml24.gp.kep_svgp import metrics as M

    data = load_digit_splits(seed)
    rng = np.random.default_rng(seed + 12345)
    inputs = {s: shift(data["x_test"], s, rng) for s in SPLITS}
    probs = _train_and_predict(config["method"], data, inputs, config, seed, 10)
    out: dict = {}
    y = data["y_test"]
    for variant, by_split in probs.items():
        for split, p in by_split.items():
            out[f"{variant}/{split}/acc"] = M.accuracy(p, y)
            out[f"{variant}/{split}/nll"] = M.nll(p, y)
            out[f"{variant}/{split}/ece"] = M.ece(p, y)
            out[f"{variant}/{split}/aurc"] = M.aurc(p, y)
            out[f"{variant}/{split}/fauroc"] = M.failure_auroc(p, y)
    return out


def run_ood(config: dict, seed: int) -> dict:
    """Train on digits 0-4; MSP AUROC for telling the test digits 0-4 from the digits 5-9."""
    from icml24.gp.kep_svgp import metrics as M

    data = load_digit_splits(seed, classes=range(5))
    inputs = {"in": data["x_test"], "out": data["x_test_out"]}
    probs = _train_and_predict(config["method"], data, inputs, config, seed, 5)
    out = {}
    for variant, by_split in probs.items():
        out[f"{variant}/ood_auroc"] = M.ood_auroc(by_split["in"], by_split["out"])
        out[f"{variant}/id_acc"] = M.accuracy(by_split["in"], data["y_test"])
    return out


def run_timing(config: dict, seed: int) -> dict:
    """Seconds per training epoch (wall clock, so not deterministic) for 16 or 64 tokens."""
    from icml24.gp.kep_svgp.training import TrainConfig, train_classifier

    data = load_digit_splits(seed)
    xt, yt = torch.as_tensor(data["x_train"]), torch.as_tensor(data["y_train"], dtype=torch.long)
    model = build_model(config["method"], num_classes=10, patch_size=config["patch_size"], seed=seed)
    kcfg = _kep_cfg(config["method"], len(xt)) if config["method"].startswith("kep") else None
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    train_classifier(model, xt, yt, config=TrainConfig(epochs=config["epochs"], warmup_epochs=1), generator=gen,
                     kep=kcfg)  # fmt: skip
    return {"sec_per_epoch": (time.perf_counter() - start) / config["epochs"], "tokens": (8 // config["patch_size"]) ** 2}


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = _SCALE_CFG["quick" if scale == "gpu" else scale]
    jobs = []
    for s in seeds_for(scale, seeds, DEFAULT_SEEDS):
        for method in cfg["methods"]:
            jobs.append(Job(SLUG, "uq", _FN + "run_uq", {"method": method, "epochs": cfg["epochs"],
                                                          "n_train": cfg["n_train"], "lr": LR}, s))  # fmt: skip
        for method in cfg["ood_methods"]:
            jobs.append(Job(SLUG, "ood", _FN + "run_ood", {"method": method, "epochs": cfg["epochs"],
                                                            "n_train": cfg["n_train"], "lr": LR}, s))  # fmt: skip
    if cfg["timing"]:
        for method in ("softmax", "kep_sum"):
            for patch in (2, 1):
                jobs.append(Job(SLUG, "timing", _FN + "run_timing", {"method": method, "patch_size": patch,
                                                                      "epochs": 2}, 0))  # fmt: skip
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _collect(results: Sequence[JobResult], experiment: str) -> dict[str, dict[int, float]]:
    """``{metric key: {seed: value}}`` merged over the experiment's jobs."""
    out: dict[str, dict[int, float]] = {}
    for r in results:
        if r.status == "ok" and r.job.experiment == experiment:
            for k, v in r.metrics.items():
                if isinstance(v, (int, float)):
                    out.setdefault(k, {})[r.job.seed] = float(v)
    return out


def _paired(a: dict[int, float], b: dict[int, float]) -> np.ndarray:
    seeds = sorted(set(a) & set(b))
    return np.asarray([a[s] - b[s] for s in seeds])


def _shift_avg(col: dict[str, dict[int, float]], variant: str, metric: str) -> dict[int, float]:
    keys = [f"{variant}/{s}/{metric}" for s in SPLITS[1:] if f"{variant}/{s}/{metric}" in col]
    if not keys:
        return {}
    seeds = set.intersection(*(set(col[k]) for k in keys))
    return {s: float(np.mean([col[k][s] for k in keys])) for s in seeds}


ALPHA = 0.05
"""Level of the accuracy and ablation tests, and the bound on each compound check's false verdicts."""
METRIC_ALPHA = 0.025
"""Level of each of the four per-metric tests inside a compound "at least 3 of 4" check. By Markov's inequality
a false "supported" (3 false rejections among 4) has probability <= 4·0.025/3 = 0.033 and a false
"not_supported" (2 false refutations) <= 4·0.025/2 = 0.05, however the metrics are correlated; so no Holm
correction is needed inside the compound."""
UQ_METRICS = ("nll", "ece", "aurc", "fauroc")
EQUIV = {"nll": 0.01, "ece": 0.005, "aurc": 0.001, "fauroc": 0.01}
"""A paired difference within ± these counts as "no improvement" (TOST), which refutes a claimed one."""
POWER_EFFECT = {"nll": 0.03, "ece": 0.01, "aurc": 0.002, "fauroc": 0.02}
"""Improvements at which each metric's power is reported (the paper's tables were not readable here; these
are modest gains at digits scale, about a third of what the full run measured under shift)."""
ACC_MARGIN = 0.02
"""Equal accuracy: KEP-SVGP's clean accuracy is shown above softmax's minus 0.02 (non-inferiority)."""


def _seed_values(col: dict, variant: str, metric: str, where: str) -> dict[int, float]:
    if where == "clean":
        return col.get(f"{variant}/clean/{metric}", {})
    return _shift_avg(col, variant, metric)


def _pair(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def _t_power(a: Sequence[float], b: Sequence[float], gain: float, alpha: float = ALPHA) -> float | None:
    """Power of the one-sided paired t-test for a true improvement ``gain`` (in the claimed direction) with
    the spread of the observed paired differences (noncentral t, statsmodels ``TTestPower``)."""
    from statsmodels.stats.power import TTestPower

    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size < 2 or not np.isfinite(d).all():
        return None
    sd = max(float(d.std(ddof=1)), 1e-9)
    return float(TTestPower().power(effect_size=gain / sd, nobs=int(d.size), alpha=alpha, alternative="larger"))


def _at_least(k: int, probs: Sequence[float]) -> float:
    """P(at least ``k`` of independent events with probabilities ``probs``) (Poisson-binomial)."""
    dist = np.zeros(len(probs) + 1)
    dist[0] = 1.0
    for p in probs:
        dist[1:] = dist[1:] * (1 - p) + dist[:-1] * p
        dist[0] *= 1 - p
    return float(dist[k:].sum())


def _uq_check(col: dict, kep: str, base: str, where: str, why: str) -> tuple[ClaimCheck, list[ClaimCheck]]:
    """KEP-SVGP vs one baseline in one setting: the four metrics each a paired one-sided test at
    ``METRIC_ALPHA``, combined as "at least 3 of 4"."""
    from icml24.common.decide import combine, compare

    decisions, powers = [], []
    for metric in UQ_METRICS:
        a, b = _pair(_seed_values(col, kep, metric, where), _seed_values(col, base, metric, where))
        alt = "less" if metric in LOWER_BETTER else "greater"
        decisions.append(compare(a, b, paired=True, alternative=alt, equivalence_margin=EQUIV[metric], alpha=METRIC_ALPHA,
                                 effect_name=f"mean {metric} difference ({LABELS[kep]} - {LABELS[base]})"))  # fmt: skip
        # Power for an improvement of POWER_EFFECT[metric]: the differences in the claimed direction.
        x, y = (b, a) if alt == "less" else (a, b)
        powers.append(_t_power(x, y, POWER_EFFECT[metric], METRIC_ALPHA))
    setting = "in distribution" if where == "clean" else "averaged over the three shifts"
    subs = [
        dec.to_check(id=f"{kep}-vs-{base}-{where}-{metric}", claim=f"{LABELS[kep]} has better {metric} than "
                     f"{LABELS[base]} ({setting})", decisive=False, power=pw)
        for metric, dec, pw in zip(UQ_METRICS, decisions, powers)
    ]  # fmt: skip
    verdict, _, rule = combine([ClaimCheck(c.claim, c.verdict, "", id=c.id) for c in subs], 3)
    n = min((c.n or 0) for c in subs)
    pw = _at_least(3, powers) if all(p is not None for p in powers) else None
    summary = "; ".join(f"{m} {c.verdict.replace('_', ' ')} (effect {c.effect:+.4f})" if c.effect is not None
                        else f"{m} no data" for m, c in zip(UQ_METRICS, subs))  # fmt: skip
    check = ClaimCheck(
        f"KEP-SVGP improves uncertainty over {LABELS[base]} ({setting}; {why})",
        verdict,
        summary,
        id=f"uq-vs-{base}-{where}",
        rule=f"each of NLL, ECE, AURC, failure AUROC: one-sided paired t-test at alpha {METRIC_ALPHA:g} (no Holm: "
        "a false verdict of the 3-of-4 rule then has probability <= 0.05 by Markov's inequality); "
        "not_supported per metric needs significance the other way or TOST equivalence within "
        + ", ".join(f"{m} ±{EQUIV[m]:g}" for m in UQ_METRICS) + "; combined: " + rule,
        n=n,
        power=pw,
    )
    return check, subs


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import analysis, compare

    col = _collect(results, "uq")
    tables, figures, checks = [], [], []
    present = [v for v in VARIANTS if f"{v}/clean/acc" in col]
    for split in SPLITS:
        rows = [[LABELS[v]] + [fmt_mean_std(list(col.get(f"{v}/{split}/{m}", {}).values())) for m in METRICS]
                for v in present]  # fmt: skip
        tables.append(Table(f"Digits test set, {split} (mean ± std over seeds)", ["method", *METRICS], rows,
                            note="fauroc = failure-detection AUROC of the MSP; AURC lower is better."))  # fmt: skip
    ood = _collect(results, "ood")
    ood_rows = [[LABELS[v], fmt_mean_std(list(ood.get(f"{v}/ood_auroc", {}).values())),
                 fmt_mean_std(list(ood.get(f"{v}/id_acc", {}).values()))]
                for v in VARIANTS if f"{v}/ood_auroc" in ood]  # fmt: skip
    if ood_rows:
        tables.append(Table("OOD: trained on digits 0-4, digits 5-9 out of distribution (mean ± std over seeds)",
                            ["method", "OOD AUROC (MSP)", "ID accuracy"], ood_rows))  # fmt: skip
    timing = [r for r in results if r.status == "ok" and r.job.experiment == "timing"]
    if timing:
        by = {(r.job.config["method"], r.metrics["tokens"]): r.metrics["sec_per_epoch"] for r in timing}
        trows = [[LABELS.get(m, m), t, f"{by[(m, t)]:.3f}"] for (m, t) in sorted(by)]
        tables.append(Table("Seconds per training epoch (2-core shared CPU, one run each)",
                            ["method", "tokens", "s/epoch"], trows))  # fmt: skip
        fig, ax = new_figure()
        for m in sorted({k[0] for k in by}):
            ts = sorted(t for (mm, t) in by if mm == m)
            ax[0][0].plot(ts, [by[(m, t)] for t in ts], marker="o", label=LABELS.get(m, m))
        ax[0][0].set_xlabel("tokens N")
        ax[0][0].set_ylabel("training time per epoch (s)")
        ax[0][0].legend()
        figures.append(Figure("Time per epoch vs token count (one run per point, no spread)", figure_png(fig)))

    # Equal accuracy: non-inferiority of KEP-SVGP (sum, 10 samples) against softmax within 0.02.
    a, b = _pair(col.get("kep_sum/clean/acc", {}), col.get("softmax/clean/acc", {}))
    acc = compare(a, b, paired=True, alternative="greater", margin=-ACC_MARGIN, alpha=ALPHA,
                  effect_name="mean clean accuracy difference (KEP-SVGP - softmax)")  # fmt: skip
    checks.append(acc.to_check(id="accuracy-kept", claim="KEP-SVGP keeps the accuracy of softmax attention "
                               "(not more than 0.02 below it)", power=_t_power(a, b, ACC_MARGIN)))  # fmt: skip
    subs_all: list[ClaimCheck] = []
    for kep, base, why in COMPARISONS:
        for where in ("clean", "shift"):
            if f"{kep}/clean/acc" not in col or f"{base}/clean/acc" not in col:
                continue
            check, subs = _uq_check(col, kep, base, where, why)
            checks.append(check)
            subs_all.extend(subs)
    checks.extend(subs_all)

    # Reported, not decisive: OOD detection, the official KL weight, the posterior-mean path.
    d_ood = _pair(ood.get("kep_sum/ood_auroc", {}), ood.get("softmax/ood_auroc", {}))
    if d_ood[0]:
        checks.append(compare(*d_ood, paired=True, alternative="greater", margin=-0.02, alpha=ALPHA,
                              effect_name="mean OOD AUROC difference (KEP-SVGP - softmax)").to_check(
            id="ood-competitive", claim="KEP-SVGP is competitive for OOD detection (AUROC not more than 0.02 below "
            "softmax)", decisive=False))  # fmt: skip
    for metric in ("acc", "nll"):
        a, b = _pair(col.get(f"kep_sum_kl1/clean/{metric}", {}), col.get(f"kep_sum/clean/{metric}", {}))
        if a:
            checks.append(compare(a, b, paired=True, alternative="greater" if metric == "acc" else "less",
                                  alpha=ALPHA, effect_name=f"mean clean {metric} difference (KL weight 1 - 1/N)"
                                  ).to_check(id=f"official-kl-weight-{metric}", decisive=False,
                                             claim=f"Ablation: the official KL weight 1 gives better clean {metric} "
                                             "than our 1/N"))  # fmt: skip

    out = analysis(checks, summary="", rule="all", tables=tables, figures=figures)
    n_seeds = len({r.job.seed for r in results if r.job.experiment == "uq"})
    by_id = {c.id: c for c in checks}

    def cell(v: str, split: str, m: str) -> str:
        return f"{mean_std(list(col.get(f'{v}/{split}/{m}', {}).values()))[0]:.3f}"

    def verdict_of(cid: str) -> str:
        return by_id[cid].verdict if cid in by_id else "missing"

    out.summary = (
        f"{scale} scale, {n_seeds} seed(s). Clean accuracy KEP-SVGP {cell('kep_sum', 'clean', 'acc')} vs softmax "
        f"{cell('softmax', 'clean', 'acc')} ({verdict_of('accuracy-kept')}). Uncertainty, in distribution / under "
        "shift: vs softmax (1 pass each) "
        f"{verdict_of('uq-vs-softmax-clean')} / {verdict_of('uq-vs-softmax-shift')}; vs temperature scaling "
        f"{verdict_of('uq-vs-temp_scaled-clean')} / {verdict_of('uq-vs-temp_scaled-shift')}; vs MC dropout "
        f"(10 passes each) {verdict_of('uq-vs-mc_dropout-clean')} / {verdict_of('uq-vs-mc_dropout-shift')}. "
        f"Official KL weight 1: clean accuracy {cell('kep_sum_kl1', 'clean', 'acc')} vs {cell('kep_sum', 'clean', 'acc')} "
        "with our 1/N (reported). Rule: supported iff accuracy is kept and, against every baseline and in both "
        "settings, at least 3 of the 4 uncertainty metrics improve (one-sided paired t-tests at alpha "
        f"{METRIC_ALPHA:g} each); not_supported if any of these is refuted (2 of 4 metrics shown worse or equal)."
    )
    return out


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Replacing softmax attention by KEP-SVGP attention keeps accuracy and improves calibration and failure "
        "prediction (NLL, ECE, AURC, AUROC) in distribution and under shift."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Data: sklearn digits (8x8, 16 tokens of 2x2 patches) instead of CIFAR-10/100, CoLA and IMDB; shifts are "
        "noise / rotation / pixel dropout instead of CIFAR-10-C; OOD is held-out classes 5-9.",
        "Model: a 2-block ViT of width 32, 4 heads, s=4, r=4, KEP-SVGP in the last block; 40 (quick) / 60 (full) "
        "epochs instead of 300, with a peak learning rate of 3e-3 instead of 1e-3 for every method.",
        "Loss weights: η_kl = 1/N_train (the code uses 1 with an undivided KL, which swamps the cross-entropy "
        "in a short CPU run; reported beside ours as an ablation); η_ksvd = 0.1 (the code's option default).",
        "Each channel's variational factor is a true lower-triangular Cholesky factor; the official code mixes "
        "indices so that its log-determinant in the KL does not match its covariance.",
        "Prediction averages 10 posterior samples (the official test uses one pass); the posterior-mean path is "
        "reported too.",
        "Baselines: softmax (MSP), temperature scaling (fitted on the validation split), MC dropout and a 3-member "
        "deep ensemble (full scale); no SGPA, SV-DKL or Laplace.",
        "At quick scale: no ensemble, OOD or timing jobs (5 seeds of 3 trainings fit the 2-minute budget).",
        "Timing is measured only at quick/full scale (wall time is not deterministic).",
    ),
)
