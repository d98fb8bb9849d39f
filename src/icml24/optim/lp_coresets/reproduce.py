"""Miniature reproduction of *Coresets for Multiple lp Regression* (Woodruff & Yasuda, ICML 2024).

Two experiments:

* ``regression``: heavy-tailed multiple lp regression (n rows, d features, m responses). For coreset sizes
  k and m in {1, 16, 256} we measure the strong-coreset error ``max |cost_S(X)/f(X) - 1|`` over random and
  column-concentrated queries X, and the weak-coreset error ``f(X_S)/f(X*) - 1``, for the m-free sampling
  scheme (Lewis weights + residual mass), uniform sampling and the union of per-column coresets with the
  same budget. The claim: the m-free scheme's error against k does not grow with m.
* ``power_means``: uniform samples for lp Euclidean power means, error ``f(x_S)/f(x*) - 1`` against k on a
  benign Gaussian mixture and on hard instances; the claimed tight rates are k^-1/2 (p = 1), k^-1
  (1 < p < 2) and k^-1/(p-1) (p > 2).
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
    new_figure,
    seeds_for,
)
from icml24.optim.lp_coresets.coreset import (
    coreset_probabilities,
    p2_worst_case_error,
    sample_coreset,
    uniform_probabilities,
    union_of_column_coresets,
)
from icml24.optim.lp_coresets.lewis import lewis_weights
from icml24.optim.lp_coresets.power_means import (
    power_mean_excess,
    power_mean_rate,
    solve_power_mean,
)
from icml24.optim.lp_coresets.regression import lp_cost, solve_multi_lp

SLUG = "lp-coresets"
DEFAULT_SEEDS = {"smoke": 1, "quick": 3, "full": 3}
METHODS = ("mfree", "uniform", "union")

REG_SCALES = {
    "smoke": {"n": 1000, "d": 4, "ms": [1, 8], "ps": [1.5], "ks": [100, 400]},
    "quick": {"n": 5000, "d": 5, "ms": [1, 16, 256], "ps": [1.5, 3.0], "ks": [100, 400, 1600]},
    "full": {"n": 20000, "d": 10, "ms": [1, 16, 256], "ps": [1.0, 1.5, 2.0, 3.0], "ks": [200, 800, 3200]},
}
PM_SCALES = {
    "smoke": {"n": 2000, "ps": [1.5], "ks": [30, 300], "reps": 4, "instances": ["benign"]},
    "quick": {"n": 20000, "ps": [1.0, 1.5, 3.0], "ks": [30, 100, 300, 1000], "reps": 12,
              "instances": ["benign", "hard"]},
    "full": {"n": 100000, "ps": [1.0, 1.5, 3.0, 4.0], "ks": [30, 100, 300, 1000, 3000], "reps": 40,
             "instances": ["benign", "hard"]},
}  # fmt: skip


def _single_thread():
    from threadpoolctl import threadpool_limits

    # one BLAS thread: bit-identical numbers in any worker, and no oversubscription on a shared machine
    return threadpool_limits(1)


# ---------------------------------------------------------------------------------------------- regression
def make_regression(n: int, d: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows with log-normal scales (a few high-leverage rows) and Student-t(2) noise (heavy-tailed)."""
    A = rng.standard_normal((n, d)) * np.exp(1.5 * rng.standard_normal((n, 1)))
    B = A @ rng.standard_normal((d, m)) + rng.standard_t(2.0, (n, m))
    return A, B


def _queries(X_star: np.ndarray, rng: np.random.Generator, n_random: int = 10, n_cols: int = 8) -> list:
    """Random perturbations of X* (all columns) and column-concentrated ones (one column moved far)."""
    d, m = X_star.shape
    col_scale = np.linalg.norm(X_star, axis=0).mean() + 1.0
    out = []
    for s in (0.1, 1.0):
        for _ in range(n_random // 2):
            out.append(("random", X_star + s * col_scale * rng.standard_normal((d, m)) / math.sqrt(d)))
    # the same number of queries for every m (a max over more queries is larger): columns are drawn with
    # replacement when m < n_cols
    for j in rng.choice(m, size=n_cols, replace=m < n_cols):
        X = X_star.copy()
        X[:, j] += 3.0 * col_scale * rng.standard_normal(d) / math.sqrt(d)
        out.append(("column", X))
    return out


def run_regression(config: dict, seed: int) -> dict:
    """All methods and coreset sizes for one (p, m) and one data seed."""
    with _single_thread():
        rng = np.random.default_rng(seed)
        n, d, m, p = int(config["n"]), int(config["d"]), int(config["m"]), float(config["p"])
        A, B = make_regression(n, d, m, rng)
        solve_kw = {"max_iter": int(config["max_iter"]), "tol": 1e-8}
        X_star = solve_multi_lp(A, B, p, **solve_kw).X
        f_star = lp_cost(A, B, X_star, p)
        queries = _queries(X_star, rng)
        f_q = np.array([lp_cost(A, B, X, p) for _, X in queries])
        tau = lewis_weights(A, p, tol=1e-6)
        # X0 from a Lewis-sampled pilot set (the construction never needs the full-data solution)
        pilot = sample_coreset(tau / tau.sum(), min(n, 20 * d), rng)
        X0 = solve_multi_lp(A[pilot.indices], B[pilot.indices], p, pilot.weights, max_iter=50, tol=1e-6).X
        q_mfree = coreset_probabilities(A, B, p, X0=X0, lewis=tau)
        out: dict = {"f_star": f_star}
        for k in config["ks"]:
            for method in METHODS:
                if method == "mfree":
                    cs = sample_coreset(q_mfree, k, rng)
                elif method == "uniform":
                    cs = sample_coreset(uniform_probabilities(n), k, rng)
                else:
                    cs = union_of_column_coresets(A, B, p, k, rng, X0=X0, lewis=tau)
                As, Bs = A[cs.indices], B[cs.indices]
                rel = np.array([lp_cost(As, Bs, X, p, cs.weights) for _, X in queries]) / f_q - 1.0
                kinds = np.array([kind for kind, _ in queries])
                X_S = solve_multi_lp(As, Bs, p, cs.weights, **solve_kw).X
                key = f"{method}_k{k}"
                out[f"{key}_strong"] = float(np.abs(rel).max())
                out[f"{key}_random"] = float(np.abs(rel[kinds == "random"]).max())
                out[f"{key}_column"] = float(np.abs(rel[kinds == "column"]).max())
                out[f"{key}_weak"] = float(lp_cost(A, B, X_S, p) / f_star - 1.0)
                out[f"{key}_size"] = len(cs)
                if p == 2.0 and d * m <= 600:  # the exact sup over all X (an eigenproblem of size dm + 1)
                    out[f"{key}_exact"] = p2_worst_case_error(A, B, cs)
        return out


# ---------------------------------------------------------------------------------------------- power means
def make_power_mean_instance(
    kind: str, n: int, p: float, k: int, rng: np.random.Generator, dim: int = 10
) -> np.ndarray:
    """Points for the power-means experiment.

    ``benign``: a mixture of three Gaussians. ``hard`` (a lower-bound-style instance, rebuilt for each k):
    a point mass (tiny noise) at 0 plus a second one at ``e_1``: for ``p = 1`` with masses
    ``1/2 + 1/(2 sqrt k)`` and ``1/2 - 1/(2 sqrt k)`` (a sample flips the median with constant
    probability); for ``1 < p < 2`` balanced halves; for ``p > 2`` a fraction ``1/k`` at ``e_1`` (an
    outlier a sample misses with constant probability).
    """
    if kind == "benign":
        centers = 3.0 * rng.standard_normal((3, dim))
        return centers[rng.integers(0, 3, n)] + rng.standard_normal((n, dim))
    P = 1e-3 * rng.standard_normal((n, dim))
    if p == 1.0:
        frac = 0.5 - 0.5 / math.sqrt(k)
    elif p <= 2.0:
        frac = 0.5
    else:
        frac = 1.0 / k
    P[: max(1, int(round(frac * n))), 0] += 1.0
    return P


def run_power_means(config: dict, seed: int) -> dict:
    """Mean excess cost of uniform-sample power means for each k (``reps`` samples per k)."""
    with _single_thread():
        rng = np.random.default_rng(seed)
        n, p, kind = int(config["n"]), float(config["p"]), config["instance"]
        out: dict = {}
        P = x_star = None
        for k in config["ks"]:
            if P is None or kind == "hard":
                P = make_power_mean_instance(kind, n, p, k, rng)
                x_star = solve_power_mean(P, p)
            errs = [
                power_mean_excess(P, solve_power_mean(P[rng.choice(n, size=k, replace=False)], p), x_star, p)
                for _ in range(int(config["reps"]))
            ]
            out[f"err_k{k}"] = float(np.mean(np.maximum(errs, 0.0)))
        return out


# ---------------------------------------------------------------------------------------------- jobs
def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    r, pm = REG_SCALES[scale], PM_SCALES[scale]
    jobs = []
    for p in r["ps"]:
        for m in r["ms"]:
            cfg = {"n": r["n"], "d": r["d"], "m": m, "p": p, "ks": r["ks"], "max_iter": 100}
            jobs += [Job(SLUG, "regression", f"{__name__}:run_regression", cfg, s) for s in seed_list]
    for kind in pm["instances"]:
        for p in pm["ps"]:
            cfg = {"instance": kind, "n": pm["n"], "p": p, "ks": pm["ks"], "reps": pm["reps"]}
            jobs += [Job(SLUG, "power_means", f"{__name__}:run_power_means", cfg, s) for s in seed_list]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
FLAT_RATIO = 2.0
"""The m-free error may grow by at most this factor from m = 1 to the largest m (noise allowance)."""
RATE_TOL = 0.2
"""Tolerance on fitted log-log slopes of the power-means error."""


def _regression_analysis(results: Sequence[JobResult]) -> tuple[list[Table], list[ClaimCheck], list[Figure]]:
    groups = group_results(results, "regression", by=("p", "m"))
    if not groups:
        return [], [], []
    ps = sorted({k[0] for k in groups})
    ms = sorted({k[1] for k in groups})
    ks = sorted({int(k) for rs in groups.values() for k in rs[0].job.config["ks"]})
    rows = []
    mean = {}
    for p in ps:
        for m in ms:
            rs = groups.get((p, m), [])
            for k in ks:
                row: list = [p, m, k]
                for method in METHODS:
                    for metric in ("strong", "weak"):
                        vals = [r.metrics.get(f"{method}_k{k}_{metric}") for r in rs]
                        vals = [v for v in vals if v is not None]
                        mean[(p, m, k, method, metric)] = mean_std(vals)[0]
                        row.append(fmt_mean_std(vals))
                rows.append(row)
    cols = ["p", "m", "k"] + [f"{meth} {met}" for meth in METHODS for met in ("strong", "weak")]
    table = Table("Multiple lp regression: strong error max|cost_S/f - 1| and weak error f(X_S)/f(X*) - 1",
                  cols, rows, "mean ± std over data seeds; expected coreset size k for every method")  # fmt: skip
    checks = []
    m_lo, m_hi = ms[0], ms[-1]
    ratios, evid = [], []
    for p in ps:
        for k in ks:
            lo, hi = mean[(p, m_lo, k, "mfree", "strong")], mean[(p, m_hi, k, "mfree", "strong")]
            if not (math.isnan(lo) or math.isnan(hi)) and lo > 0:
                ratios.append(hi / lo)
                evid.append(f"p={p:g},k={k}: {lo:.3g} (m={m_lo}) -> {hi:.3g} (m={m_hi})")
    if ratios and m_hi > m_lo:
        ok = max(ratios) <= FLAT_RATIO
        checks.append(ClaimCheck(
            f"The m-free coreset's strong error does not grow with m (ratio m={m_hi} / m={m_lo} <= {FLAT_RATIO} "
            "at every p and k)", "supported" if ok else "not_supported", "; ".join(evid)))  # fmt: skip
    # baselines at the largest m: does the union of per-column coresets degrade, does uniform lose
    wins_u, wins_n, ev2 = [], [], []
    for p in ps:
        for k in ks:
            mf = mean[(p, m_hi, k, "mfree", "strong")]
            un = mean[(p, m_hi, k, "union", "strong")]
            uf = mean[(p, m_hi, k, "uniform", "strong")]
            if any(math.isnan(v) for v in (mf, un, uf)):
                continue
            wins_n.append(mf < un)
            wins_u.append(mf < uf)
            ev2.append(f"p={p:g},k={k}: mfree {mf:.3g}, union {un:.3g}, uniform {uf:.3g}")
    if wins_n and m_hi > 1:
        v = "supported" if all(wins_n) else ("not_supported" if not any(wins_n) else "inconclusive")
        checks.append(ClaimCheck(f"At m={m_hi}, the m-free coreset beats the union of per-column coresets of the "
                                 "same total size (strong error, every p and k)", v, "; ".join(ev2)))  # fmt: skip
    if wins_u:
        v = "supported" if all(wins_u) else ("not_supported" if not any(wins_u) else "inconclusive")
        checks.append(ClaimCheck(f"At m={m_hi}, the m-free coreset beats uniform sampling on heavy-tailed data",
                                 v, f"{sum(wins_u)}/{len(wins_u)} (p, k) cells"))  # fmt: skip
    fig, ax = new_figure(1, len(ps), width=4.0)
    for j, p in enumerate(ps):
        for method, style in zip(METHODS, ("-", "--", ":")):
            for m in ms:
                ax[0, j].plot(ks, [mean[(p, m, k, method, "strong")] for k in ks], style, marker="o",
                              label=f"{method} m={m}")  # fmt: skip
        ax[0, j].set(xscale="log", yscale="log", xlabel="k", ylabel="strong error", title=f"p={p:g}")
    ax[0, 0].legend(fontsize=6)
    return [table], checks, [Figure("Strong-coreset error against k, per m", figure_png(fig))]


def _power_means_analysis(results: Sequence[JobResult]) -> tuple[list[Table], list[ClaimCheck], list[Figure]]:
    groups = group_results(results, "power_means", by=("instance", "p"))
    if not groups:
        return [], [], []
    rows, upper, tight, ev_u, ev_t = [], [], [], [], []
    fig, ax = new_figure()
    for (kind, p), rs in groups.items():
        ks = [int(k) for k in rs[0].job.config["ks"]]
        means = [mean_std([r.metrics.get(f"err_k{k}") for r in rs])[0] for k in ks]
        ok = [i for i, v in enumerate(means) if v > 0 and not math.isnan(v)]
        slope = float(np.polyfit(np.log([ks[i] for i in ok]), np.log([means[i] for i in ok]), 1)[0]) \
            if len(ok) >= 2 else math.nan  # fmt: skip
        rate = power_mean_rate(p)
        rows.append([kind, p, *[f"{v:.3g}" for v in means], f"{slope:.2f}", f"{-rate:.2f}"])
        ax[0, 0].plot(ks, means, marker="o", ls="-" if kind == "hard" else "--", label=f"{kind} p={p:g}")
        if not math.isnan(slope):
            upper.append(slope <= -rate + RATE_TOL)
            ev_u.append(f"{kind} p={p:g}: slope {slope:.2f} vs bound {-rate:.2f}")
            if kind == "hard":
                tight.append(abs(slope + rate) <= RATE_TOL)
                ev_t.append(f"p={p:g}: slope {slope:.2f} vs {-rate:.2f}")
    ax[0, 0].set(xscale="log", yscale="log", xlabel="k (uniform sample size)", ylabel="f(x_S)/f(x*) - 1")
    ax[0, 0].legend(fontsize=6)
    ks_all = [int(k) for k in next(iter(groups.values()))[0].job.config["ks"]]
    table = Table("Power means: mean excess cost f(x_S)/f(x*) - 1 of uniform samples",
                  ["instance", "p", *[f"k={k}" for k in ks_all], "fitted slope", "paper's rate"], rows,
                  "mean over seeds x repetitions; slope of log error vs log k")  # fmt: skip
    checks = []
    if upper:
        v = "supported" if all(upper) else ("not_supported" if not any(upper) else "inconclusive")
        checks.append(ClaimCheck(f"Uniform-sample error decays at least as fast as the paper's rate "
                                 f"(slope <= -a + {RATE_TOL})", v, "; ".join(ev_u)))  # fmt: skip
    if tight:
        v = "supported" if all(tight) else ("not_supported" if not any(tight) else "inconclusive")
        checks.append(ClaimCheck(f"On the hard instances the rate is attained (|slope + a| <= {RATE_TOL})",
                                 v, "; ".join(ev_t)))  # fmt: skip
    return [table], checks, [Figure("Power means: error against k", figure_png(fig))]


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    t1, c1, f1 = _regression_analysis(results)
    t2, c2, f2 = _power_means_analysis(results)
    checks = c1 + c2
    # the headline is m-independence (first regression check); the rest are supporting sub-claims
    head = [c for c in c1 if "does not grow with m" in c.claim]
    if not head:
        verdict = "inconclusive"
    elif head[0].verdict == "not_supported":
        verdict = "not_supported"
    elif all(c.verdict == "supported" for c in checks):
        verdict = "supported"
    else:
        verdict = "inconclusive"
    summary = f"Scale {scale}. " + " | ".join(f"[{c.verdict}] {c.claim}: {c.evidence}" for c in checks)
    return Analysis(verdict, summary, t1 + t2, f1 + f2, checks)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Coresets for multiple lp regression can have a size independent of the number m of responses: "
        "sampling rows by Lewis weights plus residual mass gives an error against k that is flat in m, "
        "and uniform samples for Euclidean power means attain the rates k^-1/2 (p=1), k^-1 (1<p<2), "
        "k^-1/(p-1) (p>2)."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "The paper is theoretical (no experiments); our construction is the practical importance-sampling "
        "scheme its analysis justifies (Lewis weights of A + residual mass over all responses), not its "
        "multi-stage construction with sensitivity partitioning and iterative m-reduction.",
        "The 'for every X' guarantee is probed with finite query families (random and column-concentrated); "
        "only at p = 2 is the worst case over all X computed exactly (in the tests).",
        "Small n, d (quick: n=5000, d=5) and IRLS solves to ~1e-6 relative accuracy at p = 1.",
        "Hard power-mean instances are lower-bound-style point-mass instances rebuilt for each k, in R^10.",
    ),
    scales=("smoke", "quick", "full"),
)
