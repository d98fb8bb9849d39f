"""Miniature reproduction of Bloop (Hsieh et al., ICML 2024): Bloop with an EMA dominates the mixed sum.

Two experiments, as in the official repository's examples:

* ``quadratic``: an over-parameterised least-squares training loss with ``L_aux = ||theta - theta*||^2 / 2``.
  The exact bilevel solution (the interpolator nearest to ``theta*``) is known in closed form, so we
  measure each method's distance to it and its training loss, against ``lambda``, with mini-batch SGD.
* ``digits``: an MLP on scikit-learn's digits with a Lipschitz upper bound (log of the product of squared
  spectral norms of the weight matrices) or the weight norm as auxiliary loss, trained with Adam; the
  Pareto front of test cross-entropy against the auxiliary value as ``lambda`` varies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
    ClaimCheck,
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
from icml24.optim.bloop.surgery import GradientSurgery

SLUG = "bloop"
DEFAULT_SEEDS = {"smoke": 1, "quick": 4, "full": 3}

# (label, method, ema): the official smooth-MNIST script runs Bloop with ema=0.01 and the others with 1.
METHOD_SPECS: tuple[tuple[str, str, float], ...] = (
    ("mixed", "mixed", 1.0),
    ("pcgrad", "pcgrad", 1.0),
    ("dynamic_barrier", "dynamic_barrier", 1.0),
    ("bloop_no_ema", "bloop", 1.0),
    ("bloop_ema", "bloop", 0.01),
    (
        "bloop_ema_0.1",
        "bloop",
        0.1,
    ),  # ablation: a shorter EMA horizon for our short runs (not in the verdict)
)
LABELS = [m[0] for m in METHOD_SPECS]

QUAD_SCALES = {
    "smoke": {"n": 64, "dim": 80, "epochs": 30, "lams": [0.1, 1.0]},
    "quick": {"n": 256, "dim": 300, "epochs": 150, "lams": [0.01, 0.1, 1.0, 10.0]},
    "full": {"n": 256, "dim": 300, "epochs": 1000, "lams": [0.01, 0.1, 1.0, 10.0]},
}
DIGITS_SCALES = {
    "smoke": {"epochs": 1, "lams": [0.01, 1.0], "aux": ["lipschitz"], "hidden": [32, 16]},
    "quick": {"epochs": 8, "lams": [1e-3, 1e-2, 1e-1, 1.0], "aux": ["lipschitz"], "hidden": [256, 128]},
    "full": {
        "epochs": 30,
        "lams": [float(x) for x in np.logspace(-4, 0, 9)],
        "aux": ["lipschitz", "weight_norm"],
        "hidden": [256, 128],
    },
}


# ---------------------------------------------------------------------------------------------- quadratic
def make_quadratic(n: int, dim: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The repository's toy bilevel quadratic: ``L_main = ||X theta - y||^2 / (2n)``, ``L_aux = ||theta - t*||^2/2``.

    With ``dim > n`` the minimisers of ``L_main`` form an affine set; the bilevel solution is the point of
    it nearest to ``t*``: ``theta_bl = t* - X^+ (X t* - y)``.
    """
    scales = np.linspace(1.0, 10.0, dim)
    X = rng.standard_normal((n, dim)) * scales / np.sqrt(dim)
    theta_true = rng.standard_normal(dim)
    y = X @ theta_true + 0.05 * rng.standard_normal(n)
    theta_star = 10.0 * rng.standard_normal(dim)
    theta_bl = theta_star - np.linalg.pinv(X) @ (X @ theta_star - y)
    return {"X": X, "y": y, "theta_star": theta_star, "theta_bl": theta_bl}


def run_quadratic(config: dict, seed: int) -> dict:
    """Mini-batch SGD on the bilevel quadratic with one gradient-surgery method and one ``lambda``."""
    rng = np.random.default_rng(seed)
    prob = make_quadratic(int(config["n"]), int(config["dim"]), rng)
    X = torch.as_tensor(prob["X"])
    y = torch.as_tensor(prob["y"])
    t_star = torch.as_tensor(prob["theta_star"])
    t_bl = torch.as_tensor(prob["theta_bl"])
    n = X.shape[0]
    batch, lam = int(config["batch"]), float(config["lam"])
    lr = 0.3 / (float((X**2).sum(1).max()) + lam)
    theta = torch.nn.Parameter(torch.zeros(X.shape[1], dtype=torch.float64))
    opt = GradientSurgery(
        torch.optim.SGD([theta], lr=lr), method=config["method"], lam=lam, ema=float(config["ema"])
    )
    perm_rng = np.random.default_rng(seed + 10_000)
    curve = []
    for epoch in range(int(config["epochs"])):
        perm = perm_rng.permutation(n)
        for s in range(0, n - batch + 1, batch):
            idx = torch.as_tensor(perm[s : s + batch])
            Xb, yb = X[idx], y[idx]
            th = theta.detach()
            g_main = Xb.T @ (Xb @ th - yb) / batch
            g_aux = th - t_star
            opt.step_grads([g_main], [g_aux])
        if epoch % max(1, int(config["epochs"]) // 50) == 0:
            curve.append(_quad_main(X, y, theta.detach()))
    th = theta.detach()
    return {
        "main_loss": _quad_main(X, y, th),
        "aux_loss": float(0.5 * ((th - t_star) ** 2).sum()),
        "dist_bilevel": float(torch.linalg.norm(th - t_bl) / torch.linalg.norm(t_bl)),
        "aux_loss_bilevel": float(0.5 * ((t_bl - t_star) ** 2).sum()),
        "main_curve": curve,
    }


def _quad_main(X: torch.Tensor, y: torch.Tensor, th: torch.Tensor) -> float:
    return float(0.5 * ((X @ th - y) ** 2).mean())


# ---------------------------------------------------------------------------------------------- digits
def lipschitz_bound(model: torch.nn.Module) -> torch.Tensor:
    """``log prod_l ||W_l||_2^2``: the log of a squared Lipschitz upper bound of a ReLU MLP (as in the repo)."""
    terms = [2.0 * torch.log(torch.linalg.matrix_norm(p, ord=2)) for p in model.parameters() if p.ndim > 1]
    return torch.stack(terms).sum()


def weight_norm(model: torch.nn.Module) -> torch.Tensor:
    """``||W||^2 / 2`` over the weight matrices (weight decay as an auxiliary loss)."""
    return 0.5 * torch.stack([(p**2).sum() for p in model.parameters() if p.ndim > 1]).sum()


AUX_LOSSES = {"lipschitz": lipschitz_bound, "weight_norm": weight_norm}


def _digits_data(seed: int) -> tuple[torch.Tensor, ...]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.3, random_state=seed, stratify=y)
    mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-3
    f = lambda a: torch.as_tensor((a - mu) / sd, dtype=torch.float32)  # noqa: E731
    return f(Xtr), torch.as_tensor(ytr), f(Xte), torch.as_tensor(yte)


def run_digits(config: dict, seed: int) -> dict:
    """Train an MLP on digits with cross-entropy (main) and a Lipschitz / weight-norm auxiliary loss."""
    Xtr, ytr, Xte, yte = _digits_data(seed)
    gen = torch.Generator().manual_seed(seed)
    sizes = [64, *config["hidden"], 10]
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        lin = torch.nn.Linear(sizes[i], sizes[i + 1])
        bound = 1.0 / math.sqrt(sizes[i])
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound, generator=gen)
            lin.bias.uniform_(-bound, bound, generator=gen)
        layers += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    aux_fn = AUX_LOSSES[config["aux"]]
    opt = GradientSurgery(
        torch.optim.Adam(model.parameters(), lr=float(config["lr"])),
        method=config["method"],
        lam=float(config["lam"]),
        ema=float(config["ema"]),
    )
    batch = int(config["batch"])
    n = Xtr.shape[0]
    for _ in range(int(config["epochs"])):
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n - batch + 1, batch):
            idx = perm[s : s + batch]
            main = torch.nn.functional.cross_entropy(model(Xtr[idx]), ytr[idx])
            opt.step(main, aux_fn(model))
    with torch.no_grad():
        logits = model(Xte)
        return {
            "test_loss": float(torch.nn.functional.cross_entropy(logits, yte)),
            "test_acc": float((logits.argmax(1) == yte).float().mean()),
            "train_loss": float(torch.nn.functional.cross_entropy(model(Xtr), ytr)),
            "aux_value": float(aux_fn(model)),
        }


# ---------------------------------------------------------------------------------------------- jobs
def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    jobs = []
    q = QUAD_SCALES[scale]
    g = DIGITS_SCALES[scale]
    for label, method, ema in METHOD_SPECS:
        for lam in q["lams"]:
            cfg = {"label": label, "method": method, "ema": ema, "lam": lam, "batch": 16,
                   "n": q["n"], "dim": q["dim"], "epochs": q["epochs"]}  # fmt: skip
            jobs += [Job(SLUG, "quadratic", f"{__name__}:run_quadratic", cfg, s) for s in seed_list]
        for aux in g["aux"]:
            for lam in g["lams"]:
                cfg = {"label": label, "method": method, "ema": ema, "lam": lam, "aux": aux, "lr": 3e-4,
                       "batch": 64, "epochs": g["epochs"], "hidden": g["hidden"]}  # fmt: skip
                jobs += [Job(SLUG, "digits", f"{__name__}:run_digits", cfg, s) for s in seed_list]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def hypervolume_2d(points: np.ndarray, ref: np.ndarray) -> float:
    """Area dominated by ``points`` (both coordinates minimised) inside the box below ``ref``."""
    pts = points[np.all(points < ref, axis=1)]
    if len(pts) == 0:
        return 0.0
    pts = pts[np.argsort(pts[:, 0])]
    area, best_y = 0.0, ref[1]
    xs = np.append(pts[1:, 0], ref[0])
    for (x, yv), x_next in zip(pts, xs):
        best_y = min(best_y, yv)
        area += (x_next - x) * (ref[1] - best_y)
    return float(area)


ALPHA = 0.05
BASELINES = ("mixed", "pcgrad", "dynamic_barrier", "bloop_no_ema")
"""Every baseline the paper claims to beat (mixed sum, PCGrad, dynamic barrier) and its no-EMA ablation."""
NAMES = {"mixed": "mixed sum", "pcgrad": "PCGrad", "dynamic_barrier": "dynamic barrier",
         "bloop_no_ema": "Bloop without EMA (rho = 1)", "bloop_ema": "Bloop (rho = 0.01)",
         "bloop_ema_0.1": "Bloop (rho = 0.1)"}  # fmt: skip
QUAD_TARGET = -math.log(2.0)
"""The effect the quadratic rule must detect: Bloop halves the distance / the training loss (log ratio)."""
HV_TARGET = 0.02
"""The effect the digits rule must detect: +0.02 hypervolume (5% of the front's ~0.4)."""
QUAD_METRICS = {"dist_bilevel": "relative distance to the bilevel solution", "main_loss": "training loss"}


def _log(x: float | None) -> float:
    return math.log(x) if x is not None and x > 0 and math.isfinite(x) else math.nan


def _power(target: float, diffs: np.ndarray, alternative: str, m: int) -> float | None:
    """Power of the paired test at the Bonferroni level alpha/m (conservative for Holm) when the true mean
    difference is ``target``, with this run's spread of the differences."""
    d = diffs[np.isfinite(diffs)]
    if len(d) < 2:
        return None
    sd = float(np.std(d, ddof=1)) or abs(target) / 10
    return decide.power_of_compare(target, sd, len(d), paired=True, alternative=alternative, alpha=ALPHA / m,
                                   n_sims=200).supported  # fmt: skip


def quadratic_decisions(results: Sequence[JobResult]) -> list[tuple[str, str, decide.Decision, np.ndarray]]:
    """Per baseline and metric: paired (lambda >= 0.1, seed) log ratios Bloop-EMA / baseline < 0, Holm."""
    res = [r for r in results if r.job.experiment == "quadratic"]
    by = {(r.job.config["label"], r.job.config["lam"], r.job.seed): r.metrics for r in res}
    cells = sorted({(lam, s) for (_, lam, s) in by if lam >= 0.1})
    out = []
    for other in BASELINES:
        for metric in QUAD_METRICS:
            a = [_log(by.get(("bloop_ema", lam, s), {}).get(metric)) for lam, s in cells]
            b = [_log(by.get((other, lam, s), {}).get(metric)) for lam, s in cells]
            if not any(math.isfinite(x) for x in a) or not any(math.isfinite(x) for x in b):
                continue
            dec = decide.compare(a, b, paired=True, alternative="less", alpha=ALPHA,
                                 effect_name=f"mean log ratio of the {QUAD_METRICS[metric]}, Bloop / {NAMES[other]}")  # fmt: skip
            out.append((other, metric, dec, np.asarray(a) - np.asarray(b)))
    holm = decide.holm([d for _, _, d, _ in out])
    return [(o, m, h, diff) for (o, m, _, diff), h in zip(out, holm)]


def _quadratic_tables(results: Sequence[JobResult]) -> tuple[list[Table], dict, list[ClaimCheck]]:
    groups = group_results(results, "quadratic", by=("label", "lam"))
    if not groups:
        return [], {}, []
    lams = sorted({k[1] for k in groups})
    stats: dict = {}
    rows = []
    for metric in QUAD_METRICS:
        for lam in lams:
            row: list = [QUAD_METRICS[metric], lam]
            for label in LABELS:
                vals = [r.metrics[metric] for r in groups.get((label, lam), [])]
                stats[(metric, label, lam)] = mean_std(vals)[0]
                row.append(fmt_mean_std(vals))
            rows.append(row)
    table = Table("Bilevel quadratic: relative distance to the bilevel solution and training loss",
                  ["metric", "lambda", *[NAMES[x] for x in LABELS]], rows,
                  "mini-batch SGD (batch 16), mean ± std over seeds")  # fmt: skip
    decs = quadratic_decisions(results)
    checks = [dec.to_check(
        id=f"quadratic-{metric}-vs-{other}",
        claim=f"Quadratic: Bloop (rho = 0.01) has a lower {QUAD_METRICS[metric]} than {NAMES[other]} (lambda >= 0.1)",
        evidence="pairs over lambda in {0.1, 1, 10} and seeds", power=_power(QUAD_TARGET, diff, "less", len(decs)))
        for other, metric, dec, diff in decs]  # fmt: skip
    return [table], stats, checks


def hypervolumes(results: Sequence[JobResult], aux: str) -> tuple[dict[str, list[float]], list[int], list]:
    """Per method, the per-seed hypervolume of the (aux value, test loss) front over lambda (NaN if incomplete)."""
    res = [r for r in results if r.job.experiment == "digits" and r.job.config.get("aux") == aux]
    lams = sorted({r.job.config["lam"] for r in res})
    seeds = sorted({r.job.seed for r in res})
    hv: dict[str, list[float]] = {label: [] for label in LABELS}
    for s in seeds:
        pts = {label: np.array([[r.metrics["aux_value"], r.metrics["test_loss"]] for r in res
                                if r.job.seed == s and r.job.config["label"] == label]) for label in LABELS}  # fmt: skip
        allp = np.concatenate([p for p in pts.values() if len(p)])
        lo, hi = allp.min(0), allp.max(0)
        span = np.where(hi > lo, hi - lo, 1.0)
        ref = np.array([1.05, 1.05])
        for label, p in pts.items():  # only complete fronts are comparable
            hv[label].append(hypervolume_2d((p - lo) / span, ref) if len(p) == len(lams) else math.nan)
    return hv, seeds, lams


def digits_decisions(results: Sequence[JobResult], aux: str) -> list[tuple[str, decide.Decision, np.ndarray]]:
    """Per baseline: paired (seed) hypervolume difference Bloop-EMA - baseline > 0, Holm across baselines."""
    hv, _, _ = hypervolumes(results, aux)
    out = []
    for other in BASELINES:
        a, b = np.array(hv["bloop_ema"]), np.array(hv[other])
        if len(a) == 0 or np.all(np.isnan(a)) or np.all(np.isnan(b)):
            continue
        dec = decide.compare(a, b, paired=True, alternative="greater", alpha=ALPHA,
                             effect_name=f"mean hypervolume difference, Bloop - {NAMES[other]}")  # fmt: skip
        out.append((other, dec, a - b))
    holm = decide.holm([d for _, d, _ in out])
    return [(o, h, diff) for (o, _, diff), h in zip(out, holm)]


def _digits_analysis(results: Sequence[JobResult], aux: str) -> tuple[list[Table], list, list[ClaimCheck]]:
    res = [r for r in results if r.job.experiment == "digits" and r.job.config.get("aux") == aux]
    if not res:
        return [], [], []
    groups = group_results(res, "digits", by=("label", "lam"))
    lams = sorted({k[1] for k in groups})
    rows = []
    for lam in lams:
        for label in LABELS:
            rs = groups.get((label, lam), [])
            if rs:
                rows.append([lam, NAMES[label], fmt_mean_std([r.metrics["test_loss"] for r in rs]),
                             fmt_mean_std([r.metrics["aux_value"] for r in rs]),
                             fmt_mean_std([r.metrics["test_acc"] for r in rs])])  # fmt: skip
    hv, _, _ = hypervolumes(results, aux)
    hv_rows = [[NAMES[label], fmt_mean_std(hv[label])] for label in LABELS]
    tables = [
        Table(f"Digits MLP, aux = {aux}: test cross-entropy and auxiliary value per lambda",
              ["lambda", "method", "test loss", "aux value", "test acc"], rows, "mean ± std over seeds"),
        Table(f"Digits MLP, aux = {aux}: hypervolume of the (aux, test loss) Pareto front (higher is better)",
              ["method", "hypervolume"], hv_rows,
              "mean ± std over seeds; per seed, both axes rescaled to [0, 1] over all methods' points, "
              "reference (1.05, 1.05)"),
    ]  # fmt: skip
    decs = digits_decisions(results, aux)
    checks = [dec.to_check(
        id=f"digits-{aux}-vs-{other}",
        claim=f"Digits ({aux}): Bloop's Pareto front (rho = 0.01) has a larger hypervolume than {NAMES[other]}'s",
        evidence="pairs over seeds", power=_power(HV_TARGET, diff, "greater", len(decs)))
        for other, dec, diff in decs]  # fmt: skip
    return tables, [(aux, groups, lams)], checks


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    tables, checks, figures = [], [], []
    q_tables, q_stats, q_checks = _quadratic_tables(results)
    tables += q_tables
    checks += q_checks
    fronts = []
    for aux in ("lipschitz", "weight_norm"):
        t, f, c = _digits_analysis(results, aux)
        tables += t
        fronts += f
        checks += c
    if q_stats:
        lams = sorted({k[2] for k in q_stats})
        fig, ax = new_figure(1, 2, width=4.5)
        for label in LABELS:
            for j, metric in enumerate(QUAD_METRICS):
                ax[0, j].plot(lams, [q_stats[(metric, label, lam)] for lam in lams], marker="o", label=NAMES[label])
                ax[0, j].set(xscale="log", yscale="log", xlabel="lambda (auxiliary weight)",
                             ylabel=f"{QUAD_METRICS[metric]} (mean over seeds)")  # fmt: skip
        ax[0, 0].legend(fontsize=6)
        figures.append(_figure("Bilevel quadratic against lambda (mean over seeds)", fig))
    for aux, groups, lams in fronts:
        fig, ax = new_figure()
        for label in LABELS:
            pts = [(mean_std([r.metrics["aux_value"] for r in groups.get((label, lam), [])])[0],
                    mean_std([r.metrics["test_loss"] for r in groups.get((label, lam), [])])[0]) for lam in lams]  # fmt: skip
            ax[0, 0].plot(*zip(*pts), marker="o", label=NAMES[label])
        ax[0, 0].set(xlabel=f"auxiliary value ({aux}, mean over seeds)", ylabel="test cross-entropy (nats)",
                     title=f"Digits Pareto fronts ({aux})")  # fmt: skip
        ax[0, 0].legend(fontsize=6)
        figures.append(_figure(f"Digits Pareto front, aux={aux} (mean over seeds per lambda)", fig))
    verdict, decided_by, rule = decide.combine(checks, "all")
    summary = (f"Scale {scale}: {len(checks)} sub-claims (Holm-corrected within each experiment). " +
               " | ".join(f"[{c.verdict}] {c.claim}: {c.evidence}" for c in checks))  # fmt: skip
    return Analysis(verdict, summary, tables, figures, checks, rule=rule, decided_by=decided_by)


def _figure(title: str, fig) -> object:
    from icml24.common.experiment import Figure

    return Figure(title, figure_png(fig))


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "Projecting the auxiliary gradient orthogonally to an EMA of the training gradients (Bloop) gives "
        "better trade-offs than the other gradient-surgery methods (the mixed sum, PCGrad, the dynamic "
        "barrier) and than the same projection without the EMA: closer to the bilevel solution with a lower "
        "training loss on a quadratic, and a dominating Pareto front of test loss against the auxiliary "
        "loss on a classifier."
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "No ImageNet/CIFAR/NLP experiments: the classifier is an MLP on scikit-learn's 8x8 digits "
        "(64-256-128-10 instead of MNIST's 784-256-128-10), Adam lr 3e-4, batch 64.",
        "Fewer epochs than the paper's scripts (quick: 8 on digits, 150 on the quadratic; full: 30 / 1000).",
        "PCGrad's auxiliary EMA is initialised with the first auxiliary gradient (the official code copies "
        "the main-gradient EMA into it).",
        "Pareto dominance is summarised by the 2-D hypervolume of each method's front, per seed.",
    ),
    scales=("smoke", "quick", "full"),
)
