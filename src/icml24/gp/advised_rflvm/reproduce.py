"""Miniature reproduction of advisedRFLVM (Li et al., ICML 2024, arXiv:2404.01697).

Claim: a fixed, too-large projection variance collapses GPLVM latents (linear theory and RFLVM practice);
learning it jointly (advisedRFLVM) prevents the collapse, and the SM-kernel RFLVM gives latents at least as
informative as PCA / Isomap / Kernel PCA and imputes missing data better than a mean baseline.

Experiments:
* ``s_curve``: the official S-curve generator in miniature (2-D S-curve coordinates -> D GP draws of
  0.5 RBF + 0.5 periodic, plus N(5, 0.5²) noise); R² of the affine-aligned latent against the true coordinates,
  5-fold 1-NN accuracy on 5 bins of the curve parameter, latent spread ``tr Cov(latent)``.
* ``digits``: sklearn digits (a subset at quick scale), 5-fold 1-NN accuracy of the 2-D latents.
* ``imputation``: digits with 60 % of the pixels missing; MSE of the posterior mean vs column-mean imputation.
* ``linear_sweep``: the linear-GPLVM closed form: latent norm against a fixed σ² swept across the spectrum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    group_results,
    mean_std,
    metric_values,
    new_figure,
    seeds_for,
)

SLUG = "advised-rflvm"
_FN = "icml24.gp.advised_rflvm.reproduce:"
DEFAULT_SEEDS = {"smoke": 1, "quick": 3, "full": 3}

GP_METHODS = {
    "sm_learned": {"kernel": "sm", "learn_noise": True},
    "rbf_learned": {"kernel": "rbf", "learn_noise": True},
    "rbf_fixed_large": {"kernel": "rbf", "learn_noise": False, "noise_variance": 10.0},
    # Ablation: the official code's loss (its √σ² noise term, log|A| not multiplied by D, KL / (50 N² Q)).
    "sm_official": {"kernel": "sm", "learn_noise": True, "objective": "official"},
    "rbf_official": {"kernel": "rbf", "learn_noise": True, "objective": "official"},
}
SK_METHODS = ("pca", "isomap", "kpca")
METHODS = (*GP_METHODS, *SK_METHODS)
LABELS = {
    "sm_learned": "advisedRFLVM (SM, learned σ²)",
    "rbf_learned": "RBF-RFLVM, learned σ²",
    "rbf_fixed_large": "RBF-RFLVM, σ² fixed at 10·var(Y)",
    "sm_official": "advisedRFLVM, official code's loss",
    "rbf_official": "RBF-RFLVM, official code's loss",
    "pca": "PCA",
    "isomap": "Isomap",
    "kpca": "Kernel PCA (RBF)",
}

_SCALE_CFG = {
    "smoke": {"s_n": 80, "s_iter": 60, "d_n": 100, "d_iter": 40, "i_n": 60, "i_iter": 30, "n_freq": 8},
    "quick": {"s_n": 300, "s_iter": 800, "d_n": 400, "d_iter": 600, "i_n": 200, "i_iter": 300, "n_freq": 25},
    "full": {"s_n": 300, "s_iter": 3000, "d_n": 1797, "d_iter": 3000, "i_n": 400, "i_iter": 1500, "n_freq": 25},
}


# ---------------------------------------------------------------------------------------------- data
def make_s_curve_gp(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The official S-curve data (``dataset_mine/loader.py: gen_s_curve_torch``) at our size.

    Latent: the S-shaped ``(x, z)`` coordinates of ``sklearn.datasets.make_s_curve`` (the height dropped, as
    the official ``np.delete(X, 1, axis=1)``), each divided by its std, rows sorted by the curve parameter t.
    Outputs: ``d`` GP draws with kernel ``0.5·RBF(l=1) + 0.5·Periodic(l=1, period 4.5)`` (GPyTorch's forms:
    ``exp(-||τ||²/2)`` and ``exp(-2 Σ_q sin²(π τ_q / 4.5))``, each with jitter 1e-5) plus N(5, 0.5²) noise.
    The official sizes are N=500, D=100.

    Returns ``(Y, Z, t)``: data ``(n, d)``, the true 2-D coordinates, the curve parameter.
    """
    from sklearn.datasets import make_s_curve

    pts, t = make_s_curve(n, random_state=int(rng.integers(2**31)))
    z = np.delete(pts, 1, axis=1)
    z = z / z.std(0)
    order = np.argsort(t)
    z, t = z[order], t[order]
    diff = z[:, None, :] - z[None, :, :]
    rbf = np.exp(-0.5 * (diff**2).sum(-1))
    periodic = np.exp(-2.0 * (np.sin(np.pi * np.abs(diff) / 4.5) ** 2).sum(-1))
    k = 0.5 * rbf + 0.5 * periodic + 2e-5 * np.eye(n)  # a sum of PSD kernels: a Cholesky factor exists
    f = np.linalg.cholesky(k) @ rng.standard_normal((n, d))
    return f + rng.normal(5.0, 0.5, size=(n, d)), z, t


def _digits_subset(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    idx = np.sort(rng.permutation(len(x))[: min(n, len(x))])
    return x[idx] / 16.0, y[idx]


# ---------------------------------------------------------------------------------------------- metrics
def knn_accuracy(latent: np.ndarray, labels: np.ndarray, seed: int) -> float:
    """5-fold 1-NN accuracy of the latents (the paper's latent-quality metric)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    cv = StratifiedKFold(5, shuffle=True, random_state=seed)
    return float(cross_val_score(KNeighborsClassifier(1), latent, labels, cv=cv).mean())


def aligned_r2(latent: np.ndarray, truth: np.ndarray) -> float:
    """R² of the best affine map from the latent to the true coordinates."""
    from sklearn.linear_model import LinearRegression

    return float(LinearRegression().fit(latent, truth).score(latent, truth))


def _embed(method: str, y: np.ndarray, cfg: dict, seed: int) -> tuple[np.ndarray, dict]:
    extra: dict = {}
    if method in GP_METHODS:
        from icml24.gp.advised_rflvm.model import AdvisedRFLVM

        model = AdvisedRFLVM(
            2, n_iter=cfg["n_iter"], n_frequencies=cfg["n_frequencies"], random_state=seed, **GP_METHODS[method]
        ).fit(y)
        extra["noise_variance_rel"] = model.noise_variance_ / float(np.mean(model._y.numpy() ** 2))
        extra["final_loss"] = float(np.mean(model.loss_curve_[-50:]))
        return model.embedding_, extra
    from sklearn.decomposition import PCA, KernelPCA
    from sklearn.manifold import Isomap

    if method == "pca":
        return PCA(2, random_state=seed).fit_transform(y), extra
    if method == "isomap":
        return Isomap(n_components=2, n_neighbors=10).fit_transform(y), extra
    if method == "kpca":
        return KernelPCA(2, kernel="rbf", random_state=seed).fit_transform(y), extra
    raise ValueError(f"unknown method {method!r}")


# ---------------------------------------------------------------------------------------------- jobs
def run_s_curve(config: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    y, z, t = make_s_curve_gp(config["n"], config["d"], rng)
    latent, extra = _embed(config["method"], y, config, seed)
    bins = np.digitize(t, np.quantile(t, [0.2, 0.4, 0.6, 0.8]))
    return {
        "r2": aligned_r2(latent, z),
        "knn_acc": knn_accuracy(latent, bins, seed),
        "spread": float(np.trace(np.cov(latent.T))),
        **extra,
    }


def run_digits(config: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    x, labels = _digits_subset(config["n"], rng)
    latent, extra = _embed(config["method"], x, config, seed)
    return {
        "knn_acc": knn_accuracy(latent, labels, seed),
        "spread": float(np.trace(np.cov(latent.T))),
        **extra,
    }


def run_imputation(config: dict, seed: int) -> dict:
    from icml24.gp.advised_rflvm.model import AdvisedRFLVM

    rng = np.random.default_rng(seed)
    x, _ = _digits_subset(config["n"], rng)
    missing = rng.random(x.shape) < config["missing_frac"]
    # Keep every row and column with at least one observed entry (the estimator requires it).
    missing[np.arange(x.shape[0]), rng.integers(0, x.shape[1], x.shape[0])] = False
    missing[rng.integers(0, x.shape[0], x.shape[1]), np.arange(x.shape[1])] = False
    x_obs = np.where(missing, np.nan, x)
    col_mean = np.nanmean(x_obs, axis=0)
    mse_mean = float(((np.broadcast_to(col_mean, x.shape) - x)[missing] ** 2).mean())
    out = {"mse_mean_imputation": mse_mean}
    for method in config["methods"]:
        model = AdvisedRFLVM(
            2,
            n_iter=config["n_iter"],
            n_frequencies=config["n_frequencies"],
            scaling="none",
            random_state=seed,
            **GP_METHODS[method],
        ).fit(x_obs)
        out[f"mse_{method}"] = float(((model.impute() - x)[missing] ** 2).mean())
    return out


def run_linear_sweep(config: dict, seed: int) -> dict:
    from icml24.gp.advised_rflvm.linear import linear_gplvm_closed_form

    rng = np.random.default_rng(seed)
    x, _ = _digits_subset(config["n"], rng)
    y = x - x.mean(0)
    _, sigma_hat, lam = linear_gplvm_closed_form(y, config["q"])
    ratios = np.geomspace(1e-2, 1e1, config["n_points"])
    # ||X||_F of the maximiser is sqrt(Σ_{i<=Q} max(λ_i - σ², 0)) since U_Q is orthonormal.
    top = lam[: config["q"]]
    norms = np.sqrt(np.clip(top[None, :] - ratios[:, None] * lam[0], 0.0, None).sum(1)).tolist()
    return {
        "sigma2_over_lambda1": ratios.tolist(),
        "latent_norm": norms,
        "lambda1": float(lam[0]),
        "lambdaQ": float(lam[config["q"] - 1]),
        "learned_sigma2": sigma_hat,
        "learned_latent_norm": float(np.linalg.norm(linear_gplvm_closed_form(y, config["q"])[0])),
    }


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    cfg = _SCALE_CFG["quick" if scale == "gpu" else scale]
    jobs: list[Job] = []
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    for s in seed_list:
        for method in METHODS:
            jobs.append(
                Job(SLUG, "s_curve", _FN + "run_s_curve",
                    {"method": method, "n": cfg["s_n"], "d": 30, "n_iter": cfg["s_iter"],
                     "n_frequencies": cfg["n_freq"]}, s)
            )  # fmt: skip
            jobs.append(
                Job(SLUG, "digits", _FN + "run_digits",
                    {"method": method, "n": cfg["d_n"], "n_iter": cfg["d_iter"], "n_frequencies": cfg["n_freq"]}, s)
            )  # fmt: skip
        jobs.append(
            Job(SLUG, "imputation", _FN + "run_imputation",
                {"methods": ["sm_learned", "rbf_learned"], "n": cfg["i_n"], "missing_frac": 0.6,
                 "n_iter": cfg["i_iter"], "n_frequencies": max(5, cfg["n_freq"] // 2)}, s)
        )  # fmt: skip
    jobs.append(Job(SLUG, "linear_sweep", _FN + "run_linear_sweep", {"n": cfg["d_n"], "q": 2, "n_points": 60}, 0))
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _by_method(results: Sequence[JobResult], experiment: str) -> dict[str, list[JobResult]]:
    return {k[0]: v for k, v in group_results(results, experiment, by=("method",)).items()}


def _m(groups: dict[str, list[JobResult]], method: str, metric: str) -> float:
    return mean_std(metric_values(groups.get(method, []), metric))[0]


def _better(a: float, b: float) -> bool:
    return not (math.isnan(a) or math.isnan(b)) and a > b


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    tables: list[Table] = []
    figures: list[Figure] = []
    checks: list[ClaimCheck] = []
    sc = _by_method(results, "s_curve")
    dg = _by_method(results, "digits")
    rows = []
    for method in METHODS:
        rows.append([
            LABELS[method],
            fmt_mean_std(metric_values(sc.get(method, []), "r2")),
            fmt_mean_std(metric_values(sc.get(method, []), "knn_acc")),
            fmt_mean_std(metric_values(sc.get(method, []), "spread")),
            fmt_mean_std(metric_values(dg.get(method, []), "knn_acc")),
            fmt_mean_std(metric_values(dg.get(method, []), "spread")),
        ])  # fmt: skip
    tables.append(Table(
        "Latent quality (mean ± std over seeds)",
        ["method", "S-curve R²", "S-curve 1-NN acc", "S-curve spread", "digits 1-NN acc", "digits spread"],
        rows,
        note="spread = trace of the latent covariance; a collapsed latent has spread ~ 0.",
    ))  # fmt: skip

    # C1: collapse with a fixed large σ², none with a learned one.
    spread_fixed, spread_learned = _m(sc, "rbf_fixed_large", "spread"), _m(sc, "rbf_learned", "spread")
    if math.isnan(spread_fixed) or math.isnan(spread_learned):
        c1 = "inconclusive"
    else:
        c1 = "supported" if spread_fixed < 0.05 * spread_learned else "not_supported"
    checks.append(ClaimCheck(
        "A fixed large projection variance collapses the RFLVM latent; a learned one does not (S-curve)",
        c1, f"spread fixed σ²={spread_fixed:.3g} vs learned σ²={spread_learned:.3g} (rule: fixed < 5% of learned)",
    ))  # fmt: skip

    # C2: learned σ² beats fixed large σ² on latent quality (S-curve R² and digits 1-NN).
    pairs = [(_m(sc, "rbf_learned", "r2"), _m(sc, "rbf_fixed_large", "r2")),
             (_m(dg, "rbf_learned", "knn_acc"), _m(dg, "rbf_fixed_large", "knn_acc"))]  # fmt: skip
    have = [p for p in pairs if not any(math.isnan(v) for v in p)]
    c2 = "inconclusive" if not have else ("supported" if all(a > b for a, b in have) else "not_supported")
    checks.append(ClaimCheck(
        "Learning σ² gives more informative latents than a fixed large σ²",
        c2, f"S-curve R² {pairs[0][0]:.3f} vs {pairs[0][1]:.3f}; digits 1-NN {pairs[1][0]:.3f} vs {pairs[1][1]:.3f}",
    ))  # fmt: skip

    # C3: SM kernel at least as good as RBF (within one pooled std).
    def _not_worse(groups: dict, metric: str) -> tuple[bool | None, str]:
        a, b = metric_values(groups.get("sm_learned", []), metric), metric_values(groups.get("rbf_learned", []), metric)
        if not a or not b:
            return None, "n/a"
        ma, sa, _ = mean_std(a)
        mb, sb, _ = mean_std(b)
        tol = max(sa, sb, 0.01)
        return ma >= mb - tol, f"{ma:.3f} vs {mb:.3f} (tol {tol:.3f})"

    sm_sc, ev_sc = _not_worse(sc, "r2")
    sm_dg, ev_dg = _not_worse(dg, "knn_acc")
    got = [v for v in (sm_sc, sm_dg) if v is not None]
    c3 = "inconclusive" if not got else ("supported" if all(got) else "not_supported")
    checks.append(ClaimCheck(
        "The SM kernel is at least as good as RBF (SM >= RBF - one std)",
        c3, f"S-curve R² SM vs RBF {ev_sc}; digits 1-NN {ev_dg}",
    ))  # fmt: skip

    # C4: advisedRFLVM at least as informative as PCA, Isomap and Kernel PCA on digits 1-NN and S-curve R².
    sm_dg_acc, sm_sc_r2 = _m(dg, "sm_learned", "knn_acc"), _m(sc, "sm_learned", "r2")
    base = {b: (_m(dg, b, "knn_acc"), _m(sc, b, "r2")) for b in SK_METHODS}
    comps = [(sm_dg_acc, v[0]) for v in base.values()] + [(sm_sc_r2, v[1]) for v in base.values()]
    comps = [c for c in comps if not any(math.isnan(v) for v in c)]
    wins = sum(a >= b for a, b in comps)
    c4 = "inconclusive" if not comps else ("supported" if wins == len(comps) else "not_supported")
    checks.append(ClaimCheck(
        "advisedRFLVM's latents are at least as informative as PCA, Isomap and Kernel PCA",
        c4, f"wins {wins}/{len(comps)}; digits 1-NN SM {sm_dg_acc:.3f} vs "
        + ", ".join(f"{b} {v[0]:.3f}" for b, v in base.items())
        + f"; S-curve R² SM {sm_sc_r2:.3f} vs " + ", ".join(f"{b} {v[1]:.3f}" for b, v in base.items()),
    ))  # fmt: skip

    # C5: imputation.
    imp = [r for r in results if r.job.experiment == "imputation"]
    c5 = "inconclusive"
    if imp:
        mse_sm, mse_rbf = metric_values(imp, "mse_sm_learned"), metric_values(imp, "mse_rbf_learned")
        mse_mean = metric_values(imp, "mse_mean_imputation")
        tables.append(Table(
            "Imputation of digits with 60% of pixels missing (MSE on missing pixels, pixels in [0, 1])",
            ["method", "MSE"],
            [["advisedRFLVM (SM)", fmt_mean_std(mse_sm, 4)], ["RBF-RFLVM", fmt_mean_std(mse_rbf, 4)],
             ["column-mean imputation", fmt_mean_std(mse_mean, 4)]],
        ))  # fmt: skip
        if mse_sm and mse_mean:
            c5 = "supported" if mean_std(mse_sm)[0] < mean_std(mse_mean)[0] else "not_supported"
        checks.append(ClaimCheck(
            "advisedRFLVM imputes missing entries better than the mean baseline",
            c5, f"MSE SM {mean_std(mse_sm)[0]:.4f} vs mean imputation {mean_std(mse_mean)[0]:.4f}",
        ))  # fmt: skip

    # C6: linear-GPLVM sweep.
    lin = [r for r in results if r.job.experiment == "linear_sweep"]
    c6 = "inconclusive"
    if lin:
        mt = lin[0].metrics
        ratio, norm = np.asarray(mt["sigma2_over_lambda1"]), np.asarray(mt["latent_norm"])
        vanish = bool(np.all(norm[ratio >= 1.0] < 1e-9)) and bool(np.all(norm[ratio < 1.0] > 0))
        ok_learned = mt["learned_sigma2"] <= mt["lambdaQ"] and mt["learned_latent_norm"] > 0
        c6 = "supported" if vanish and ok_learned else "not_supported"
        checks.append(ClaimCheck(
            "Linear GPLVM: the latent vanishes exactly when σ² >= λ1; the learned σ² is <= λ_Q (no collapse)",
            c6, f"λ1={mt['lambda1']:.4g}, λ_Q={mt['lambdaQ']:.4g}, learned σ²={mt['learned_sigma2']:.4g}; "
            f"norm zero past λ1: {vanish}",
        ))  # fmt: skip
        fig, ax = new_figure()
        ax[0][0].semilogx(ratio, norm, marker=".")
        ax[0][0].axvline(1.0, color="k", ls="--", lw=0.8, label="σ² = λ1")
        ax[0][0].axvline(mt["learned_sigma2"] / mt["lambda1"], color="g", ls=":", label="learned σ²")
        ax[0][0].set_xlabel("fixed σ² / λ1")
        ax[0][0].set_ylabel("||X||_F of the maximiser")
        ax[0][0].legend()
        figures.append(Figure("Linear GPLVM: latent norm vs fixed projection variance", figure_png(fig),
                              "Closed-form maximiser on digits; the latent vanishes for σ² >= λ1."))  # fmt: skip

    statuses = {"C1": c1, "C2": c2, "C4": c4, "C5": c5, "C6": c6}
    if c1 == "not_supported" or c2 == "not_supported":
        verdict = "not_supported"
    elif all(v == "supported" for v in statuses.values()):
        verdict = "supported"
    else:
        verdict = "inconclusive"
    n_seeds = len({r.job.seed for r in results if r.job.experiment == "s_curve"})
    summary = (
        f"{scale} scale, {n_seeds} seed(s). Collapse with fixed large σ² (spread {spread_fixed:.3g} vs "
        f"{spread_learned:.3g} learned): {c1}. Learned σ² better than fixed: {c2}. SM >= RBF: {c3}. "
        f"advisedRFLVM >= PCA/Isomap/KPCA: {c4} (digits 1-NN {sm_dg_acc:.3f}, S-curve R² {sm_sc_r2:.3f}). "
        f"Imputation better than mean: {c5}. Linear-GPLVM collapse past λ1: {c6}. Verdict rule: not_supported "
        "if the collapse/learned-σ² checks fail; supported if collapse, learned σ², baselines, imputation and "
        "linear checks all hold; else inconclusive (SM >= RBF is reported, not required)."
    )
    return Analysis(verdict, summary, tables, figures, checks)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "A fixed, too-large projection variance collapses GPLVM latents; learning it (advisedRFLVM, SM kernel "
        "with differentiable RFF) prevents collapse, gives latents at least as informative as PCA/Isomap/KPCA "
        "and imputes missing data better than a simple baseline."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Small data: S-curve N=300, D=30; digits subset of 400 (quick) / 1797 (full) instead of the paper's "
        "datasets (Bridges, MNIST, CIFAR, Yale, ...); 800-3000 Adam steps instead of 10,000.",
        "The ELBO is the paper's (KL weight 1); the official code down-weights the KL to ~0 and has a log-det "
        "bug in its N <= M branch; we do not copy either.",
        "Data are centred (the model has zero mean); the official demo only Frobenius-scales.",
        "Kernel initialisation is ours: signal variance 0.9·var(Y), lengthscale 1 in the unit-variance PCA "
        "latent, SM means 0 and U(0, 0.5).",
        "Imputation baseline is column-mean imputation (the paper compares to VAEs and GPLVM variants).",
        "No VAE, Bayesian GPLVM or MCMC RFLVM baselines (budget).",
    ),
)
