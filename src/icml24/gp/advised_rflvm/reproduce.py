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
DEFAULT_SEEDS = {"smoke": 1, "quick": 5, "full": 5}

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
            if method.endswith("_official") and scale in ("smoke", "quick"):
                continue  # the official-loss ablation runs on digits at full scale only (quick budget)
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
ALPHA = 0.05
"""Level of every one-sided test of the verdict."""
EQUIV_MARGIN = 0.02
"""A difference in R² or 1-NN accuracy within ±0.02 counts as "no gain" (TOST), which refutes a claimed gain."""
POWER_EFFECT = 0.05
"""The gain in R² / 1-NN accuracy at which each comparison's power is reported (the paper's tables were not
readable here, so this is our choice: a modest gain on a [0, 1] scale)."""
COLLAPSE_BAR = 0.05
"""Collapse: the fixed-σ² latent's spread is below 5% of the learned-σ² one (mean of log10 ratios)."""
IMPUTATION_GAIN = 0.10
"""Power of the imputation check is reported for an MSE 10% below mean imputation."""


def _by_method(results: Sequence[JobResult], experiment: str) -> dict[str, list[JobResult]]:
    return {k[0]: v for k, v in group_results(results, experiment, by=("method",)).items()}


def _m(groups: dict[str, list[JobResult]], method: str, metric: str) -> float:
    return mean_std(metric_values(groups.get(method, []), metric))[0]


def _by_seed(groups: dict[str, list[JobResult]], method: str, metric: str) -> dict[int, float]:
    return {r.job.seed: float(r.metrics[metric]) for r in groups.get(method, []) if metric in r.metrics}


def _paired(a: dict[int, float], b: dict[int, float]) -> tuple[list[float], list[float]]:
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def _power(a: Sequence[float], b: Sequence[float], effect: float, alternative: str = "greater") -> float | None:
    """Power of the one-sided paired t-test at a true mean difference ``effect``, with the spread of the
    observed paired differences (noncentral t, statsmodels ``TTestPower``; before the Holm correction)."""
    from statsmodels.stats.power import TTestPower

    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size < 2 or not np.isfinite(d).all():
        return None
    sd = max(float(d.std(ddof=1)), 1e-9)
    size = effect / sd if alternative == "greater" else -effect / sd
    return float(TTestPower().power(effect_size=size, nobs=int(d.size), alpha=ALPHA, alternative="larger"))


def _compare_check(cid: str, claim: str, a: dict[int, float], b: dict[int, float], *, effect_name: str,
                   alternative: str = "greater", eq: float | None = EQUIV_MARGIN, power_effect: float = POWER_EFFECT):  # fmt: skip
    """A paired one-sided comparison (decide.compare) and its power at ``power_effect``."""
    from icml24.common.decide import compare

    xa, xb = _paired(a, b)
    dec = compare(xa, xb, paired=True, alternative=alternative, equivalence_margin=eq, alpha=ALPHA,
                  effect_name=effect_name)  # fmt: skip
    return cid, claim, dec, _power(xa, xb, power_effect if alternative == "greater" else -power_effect, alternative)


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    from icml24.common.decide import analysis, compare_to_value, holm

    tables: list[Table] = []
    figures: list[Figure] = []
    checks: list[ClaimCheck] = []
    sc = _by_method(results, "s_curve")
    dg = _by_method(results, "digits")
    rows = []
    for method in METHODS:
        if method not in sc and method not in dg:
            continue
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
        note="spread = trace of the latent covariance; a collapsed latent has spread ~ 0. The official code's "
        "loss is an ablation (not the paper's ELBO).",
    ))  # fmt: skip

    # C1: a fixed large σ² collapses the latent: log10(spread fixed / spread learned) below log10(0.05).
    sf, sl = _paired(_by_seed(sc, "rbf_fixed_large", "spread"), _by_seed(sc, "rbf_learned", "spread"))
    log_ratio = [math.log10(max(f, 1e-300) / l) for f, l in zip(sf, sl) if l > 0]
    c1 = compare_to_value(log_ratio, math.log10(COLLAPSE_BAR), alternative="less", alpha=ALPHA,
                          effect_name="mean log10(spread fixed σ² / spread learned σ²)")  # fmt: skip
    p1 = None
    if len(log_ratio) >= 2:
        from statsmodels.stats.power import TTestPower

        sd1 = max(float(np.std(log_ratio, ddof=1)), 1e-9)  # power at a true ratio 10x below the bar
        p1 = float(TTestPower().power(effect_size=1.0 / sd1, nobs=len(log_ratio), alpha=ALPHA, alternative="larger"))
    checks.append(c1.to_check(
        id="collapse-fixed-sigma",
        claim="A fixed large projection variance collapses the RFLVM latent; a learned one does not (S-curve)",
        evidence=f"spread fixed σ² {_m(sc, 'rbf_fixed_large', 'spread'):.3g} vs learned {_m(sc, 'rbf_learned', 'spread'):.3g}; "
        "power at a true ratio of 0.005 (10x below the bar)",
        power=p1,
    ))  # fmt: skip

    # Paired comparisons, Holm-corrected within each family of sub-claims.
    families = [
        [_compare_check("learned-vs-fixed-sigma-scurve", "Learning σ² gives a better S-curve latent (R²) than a fixed large σ²",
                        _by_seed(sc, "rbf_learned", "r2"), _by_seed(sc, "rbf_fixed_large", "r2"),
                        effect_name="mean R² difference (learned - fixed σ²)"),
         _compare_check("learned-vs-fixed-sigma-digits", "Learning σ² gives a better digits latent (1-NN) than a fixed large σ²",
                        _by_seed(dg, "rbf_learned", "knn_acc"), _by_seed(dg, "rbf_fixed_large", "knn_acc"),
                        effect_name="mean 1-NN accuracy difference (learned - fixed σ²)")],
        [_compare_check("sm-vs-rbf-scurve", "The SM kernel gives a better S-curve latent (R²) than RBF",
                        _by_seed(sc, "sm_learned", "r2"), _by_seed(sc, "rbf_learned", "r2"),
                        effect_name="mean R² difference (SM - RBF)"),
         _compare_check("sm-vs-rbf-digits", "The SM kernel gives a better digits latent (1-NN) than RBF",
                        _by_seed(dg, "sm_learned", "knn_acc"), _by_seed(dg, "rbf_learned", "knn_acc"),
                        effect_name="mean 1-NN accuracy difference (SM - RBF)")],
        [_compare_check(f"vs-{b}-{ds}", f"advisedRFLVM's {ds} latent is more informative ({name}) than {LABELS[b]}",
                        _by_seed(g, "sm_learned", metric), _by_seed(g, b, metric),
                        effect_name=f"mean {name} difference (advisedRFLVM - {LABELS[b]})")
         for b in SK_METHODS
         for ds, g, metric, name in (("scurve", sc, "r2", "R²"), ("digits", dg, "knn_acc", "1-NN accuracy"))],
    ]  # fmt: skip
    for fam in families:
        corrected = holm([f[2] for f in fam])
        for (cid, claim, _, pw), dec in zip(fam, corrected):
            checks.append(dec.to_check(id=cid, claim=claim, power=pw))

    # C5: imputation beats column-mean imputation (MSE lower).
    imp = [r for r in results if r.job.experiment == "imputation"]
    if imp:
        by = {r.job.seed: r.metrics for r in imp}
        mse_sm = {s: m["mse_sm_learned"] for s, m in by.items() if "mse_sm_learned" in m}
        mse_mean = {s: m["mse_mean_imputation"] for s, m in by.items()}
        tables.append(Table(
            "Imputation of digits with 60% of pixels missing (MSE on missing pixels, pixels in [0, 1]; mean ± std over seeds)",
            ["method", "MSE"],
            [["advisedRFLVM (SM)", fmt_mean_std(metric_values(imp, "mse_sm_learned"), 4)],
             ["RBF-RFLVM", fmt_mean_std(metric_values(imp, "mse_rbf_learned"), 4)],
             ["column-mean imputation", fmt_mean_std(metric_values(imp, "mse_mean_imputation"), 4)]],
        ))  # fmt: skip
        gain = IMPUTATION_GAIN * float(np.mean(list(mse_mean.values())))
        cid, claim, dec, pw = _compare_check(
            "imputation-vs-mean", "advisedRFLVM imputes missing entries better (lower MSE) than column means",
            mse_sm, mse_mean, effect_name="mean MSE difference (advisedRFLVM - column mean)", alternative="less",
            eq=None, power_effect=gain,
        )  # fmt: skip
        checks.append(dec.to_check(id=cid, claim=claim, power=pw,
                                   evidence="power at an MSE 10% below mean imputation"))  # fmt: skip

    # C6: linear-GPLVM sweep (a closed form: exact, no seeds).
    lin = [r for r in results if r.job.experiment == "linear_sweep"]
    if lin:
        mt = lin[0].metrics
        ratio, norm = np.asarray(mt["sigma2_over_lambda1"]), np.asarray(mt["latent_norm"])
        vanish = bool(np.all(norm[ratio >= 1.0] < 1e-9)) and bool(np.all(norm[ratio < 1.0] > 0))
        ok_learned = mt["learned_sigma2"] <= mt["lambdaQ"] and mt["learned_latent_norm"] > 0
        checks.append(ClaimCheck(
            "Linear GPLVM: the latent vanishes exactly when σ² >= λ1; the learned σ² is <= λ_Q (no collapse)",
            "supported" if vanish and ok_learned else "not_supported",
            f"λ1={mt['lambda1']:.4g}, λ_Q={mt['lambdaQ']:.4g}, learned σ²={mt['learned_sigma2']:.4g}; "
            f"norm zero for every σ² >= λ1 and positive below: {'yes' if vanish else 'no'}",
            id="linear-collapse",
            rule="exact closed form (no sampling): supported if the maximiser's norm is 0 for every swept σ² >= λ1, "
            "positive below, and the learned σ² <= λ_Q; otherwise not_supported",
            power=1.0,
        ))  # fmt: skip
        fig, ax = new_figure()
        ax[0][0].semilogx(ratio, norm, marker=".")
        ax[0][0].axvline(1.0, color="k", ls="--", lw=0.8, label="σ² = λ1")
        ax[0][0].axvline(mt["learned_sigma2"] / mt["lambda1"], color="g", ls=":", label="learned σ²")
        ax[0][0].set_xlabel("fixed σ² / λ1 (ratio, no unit)")
        ax[0][0].set_ylabel("||X||_F of the maximiser")
        ax[0][0].legend()
        figures.append(Figure("Linear GPLVM: latent norm vs fixed projection variance", figure_png(fig),
                              "Closed-form maximiser on digits (exact, no spread); the latent vanishes for σ² >= λ1."))  # fmt: skip

    # Ablation (reported, not decisive): the official code's loss against the paper's ELBO, same model.
    for ds, g, metric, name in (("scurve", sc, "r2", "R²"), ("digits", dg, "knn_acc", "1-NN accuracy")):
        if "sm_official" in g:
            from icml24.common.decide import compare

            xa, xb = _paired(_by_seed(g, "sm_official", metric), _by_seed(g, "sm_learned", metric))
            dec = compare(xa, xb, paired=True, alternative="greater", equivalence_margin=EQUIV_MARGIN, alpha=ALPHA,
                          effect_name=f"mean {name} difference (official loss - ELBO)")  # fmt: skip
            checks.append(dec.to_check(
                id=f"official-loss-vs-elbo-{ds}",
                claim=f"Ablation: the official code's loss gives a better {ds} latent ({name}) than the paper's ELBO",
                decisive=False, power=_power(xa, xb, POWER_EFFECT),
            ))  # fmt: skip

    n_seeds = len({r.job.seed for r in results if r.job.experiment == "s_curve"})
    out = analysis(checks, summary="", rule="all", tables=tables, figures=figures)
    by_id = {c.id: c for c in checks}

    def v(cid: str) -> str:
        return by_id[cid].verdict if cid in by_id else "missing"

    out.summary = (
        f"{scale} scale, {n_seeds} seed(s). Collapse with a fixed large σ²: {v('collapse-fixed-sigma')}. "
        f"Learned σ² better than fixed (S-curve, digits): {v('learned-vs-fixed-sigma-scurve')}, "
        f"{v('learned-vs-fixed-sigma-digits')}. SM better than RBF (S-curve R² {_m(sc, 'sm_learned', 'r2'):.3f} vs "
        f"{_m(sc, 'rbf_learned', 'r2'):.3f}; digits 1-NN {_m(dg, 'sm_learned', 'knn_acc'):.3f} vs "
        f"{_m(dg, 'rbf_learned', 'knn_acc'):.3f}): {v('sm-vs-rbf-scurve')}, {v('sm-vs-rbf-digits')}. "
        "advisedRFLVM better than PCA / Isomap / Kernel PCA (S-curve R²; digits 1-NN): "
        + ", ".join(f"{v(f'vs-{b}-scurve')}/{v(f'vs-{b}-digits')}" for b in SK_METHODS)
        + f". Imputation better than column means: {v('imputation-vs-mean')}. Linear-GPLVM collapse past λ1: "
        f"{v('linear-collapse')}. Official-loss ablation (S-curve R² {_m(sc, 'sm_official', 'r2'):.3f} vs ELBO "
        f"{_m(sc, 'sm_learned', 'r2'):.3f}) is reported, not decisive. Each comparison is a one-sided paired t-test "
        f"at alpha {ALPHA:g} (Holm within its family); not_supported needs significance the other way or TOST "
        f"equivalence within ±{EQUIV_MARGIN:g}."
    )
    return out


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
        "Small data: digits subset of 400 (quick) / 1797 (full) instead of the paper's "
        "datasets (Bridges, MNIST, CIFAR, Yale, ...); 800-3000 Adam steps instead of 10,000.",
        "The ELBO is the paper's (KL weight 1); the official code's loss (√σ² noise term, log|A| once, KL/(50N²Q), "
        "log of a sum of the Cholesky diagonal for N <= M) is run as a reported, non-decisive ablation.",
        "S-curve: the official generator's S-shaped (x, z) coordinates at N=300, D=30 (official N=500, D=100).",
        "Data are centred (the model has zero mean); the official demo only Frobenius-scales.",
        "Kernel initialisation is ours: signal variance 0.9·var(Y), lengthscale 1 in the unit-variance PCA "
        "latent, SM means 0 and U(0, 0.5).",
        "Imputation baseline is column-mean imputation (the paper compares to VAEs and GPLVM variants).",
        "No VAE, Bayesian GPLVM or MCMC RFLVM baselines (budget).",
    ),
)
