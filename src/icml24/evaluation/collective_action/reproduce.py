"""Miniature reproduction of *The Role of Learning Algorithms in Collective Action* (Ben-Dov et al., ICML 2024).

https://arxiv.org/abs/2405.06582. Data: scikit-learn's bundled 8x8 digits (pixels / 16), target class
``y* = 0``, signal ``g`` = the 2x2 bottom-right patch set to 1 (the maximum intensity).

Experiments:

* ``crossover`` (classical): S(alpha) for ERM (logistic regression), JTT, CVaR-DRO and LfF over a grid of
  collective sizes, with signal overlap xi in {0, 0.05}; alpha_eff from each learner's final weights, JTT's
  e_C and e_0. The claim: re-weighting amplifies small collectives and dilutes large ones (a crossover).
* ``validation`` (classical): CVaR-DRO's rho (decisive: the claim names CVaR-type methods) and JTT's lambda_up
  and stage-1 strength (reported) chosen by worst-class validation accuracy, with a clean validation set or one
  where the collective takes part too.
* ``mlp`` (full): the same learners as SGD-trained MLPs (64-128-10), with the final-epoch model and the epoch
  chosen by worst-class validation accuracy (clean or with the collective).
* ``dominoes`` (full): inputs ``[easy label code | digit pixels]``; the signal planted in the easy block or
  in the pixels, S(alpha) of an SGD-trained MLP (and of logistic regression, for reference). Reported only: the
  easy-block signal sits in pure-noise columns, so the design cannot isolate SGD's simplicity bias.

The measured success is compared with the theoretical reference of Hardt et al. (ICML 2023) for a Bayes-optimal
learner, ``S >= 1 - (1 - alpha) / alpha * xi`` (:func:`hardt_success_bound`), evaluated at alpha and, as the
paper's effective-size prediction, at each re-weighting learner's measured alpha_eff.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from icml24.common import decide
from icml24.common.experiment import (
    Analysis,
    ClaimCheck,
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

SLUG = "collective-action"
TARGET = 0
"""The collective's target class y*."""
ALPHAS = (0.002, 0.004, 0.008, 0.015, 0.03, 0.06, 0.1, 0.2)
SMALL_ALPHAS = (0.002, 0.004, 0.008, 0.015)
"""Pre-registered 'small collectives': the claim is amplification here (our bar; the paper gives no cut)."""
LARGE_ALPHAS = (0.1, 0.2)
"""Pre-registered 'large collectives': the claim is dilution here when the signal overlaps clean data."""
DECISIVE_OVERLAP = 0.05
"""The crossover needs signal overlap xi > 0 (our CPU probe: with xi = 0 JTT ties ERM at large alpha)."""
ALPHA = 0.05
LEARNER_NAMES = {"erm": "ERM", "jtt": "JTT", "cvar": "CVaR-DRO", "lff": "LfF"}
LEARNER_COLORS = {"erm": "tab:blue", "jtt": "tab:orange", "cvar": "tab:green", "lff": "tab:red"}
"""One colour per learner in every figure."""
VALIDATION_EFFECT = 0.03
"""The validation-leverage gain the power statement assumes: the gain measured for JTT's selection in this
reproduction (+0.026 at full, +0.037 at quick scale, the only validation effect of this design we measured), not
the crossover's 0.18."""
VALIDATION_EQ = 0.02
"""A validation-leverage gain within +-0.02 of success is evidence of no leverage (not_supported by TOST)."""
PAPER_GAIN_SMALL = 0.18
"""The success gain of JTT over ERM at alpha = 0.4%, xi = 0.05 in the notes' CPU probe (the paper's numbers
were not retrievable): the effect the amplification rule must detect."""
PAPER_LOSS_LARGE = -0.19
"""JTT minus ERM at alpha = 10%, xi = 0.05 in the same probe: the dilution the rule must detect."""
PLACEMENT_EFFECT = 0.2
"""The success difference between signal placements the simplicity-bias rule must detect (our bar)."""

CLASSICAL = {"C": 1.0, "stage1_C": 0.05, "upweight": 20.0, "rho": 0.2, "cvar_rounds": 5, "lff_q": 0.7,
             "lff_biased_C": 0.05, "lff_rounds": 3}  # fmt: skip
JTT_GRID = [[1.0, 0.05]] + [[lam, c1] for lam in (5.0, 20.0, 50.0) for c1 in (0.02, 0.05, 0.2)]
"""(lambda_up, stage1_C) pairs that validation selects from; lambda_up = 1 is ERM."""
CVAR_GRID = [1.0, 0.5, 0.2, 0.1]
MLP = {"hidden": [128], "epochs": 30, "lr": 0.05, "batch_size": 64, "upweight": 20.0, "stage1_epochs": 2,
       "rho": 0.2, "q": 0.7}  # fmt: skip

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {"crossover": {"alphas": [0.004, 0.1], "overlaps": [0.05], "learners": ["erm", "jtt"]},
              "validation": {"alphas": [0.015], "cvar": True},
              "mlp": {"alphas": [0.015], "methods": ["erm", "jtt"], "epochs": 3},
              "dominoes": {"alphas": [0.015], "epochs": 3}},
    "quick": {"crossover": {"alphas": list(ALPHAS), "overlaps": [0.0, 0.05], "learners": ["erm", "jtt", "cvar", "lff"]},
              "validation": {"alphas": [0.008, 0.015, 0.03], "cvar": True}},
    "full": {"crossover": {"alphas": list(ALPHAS), "overlaps": [0.0, 0.05], "learners": ["erm", "jtt", "cvar", "lff"]},
             "validation": {"alphas": [0.008, 0.015, 0.03], "cvar": True},
             "mlp": {"alphas": [0.004, 0.008, 0.015, 0.06, 0.1, 0.2], "methods": ["erm", "jtt", "cvar", "lff"],
                     "epochs": 30},
             "dominoes": {"alphas": [0.002, 0.004, 0.008, 0.015, 0.03, 0.06], "epochs": 30}},
}  # fmt: skip
DEFAULT_SEEDS = {"smoke": 1, "quick": 5, "full": 10}


def _akey(a: float) -> str:
    return f"{a:g}"


def _single_thread():
    import sklearn.linear_model  # noqa: F401 - load the BLAS before limiting it (limits reach loaded libraries only)
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y.astype(np.int64)


def _signal():
    from icml24.evaluation.collective_action.signals import PatchSignal

    return PatchSignal.corner(8, 8, size=2, value=1.0)


def _split(y: np.ndarray, seed: int, parts: Sequence[float]) -> list[np.ndarray]:
    """Stratified index split into ``parts`` fractions (they sum to 1)."""
    rng = np.random.default_rng([seed, 7])
    out: list[list[int]] = [[] for _ in parts]
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        cuts = np.round(np.cumsum(parts)[:-1] * idx.size).astype(int)
        for j, chunk in enumerate(np.split(idx, cuts)):
            out[j] += chunk.tolist()
    return [np.sort(np.asarray(o)) for o in out]


def _learner(name: str, cfg: dict):
    from sklearn.linear_model import LogisticRegression

    from icml24.evaluation.collective_action.learners import CVaRDROClassifier, JTTClassifier, LfFClassifier

    if name == "erm":
        return LogisticRegression(C=cfg["C"], max_iter=1000)
    if name == "jtt":
        return JTTClassifier(C=cfg["C"], stage1_C=cfg["stage1_C"], upweight=cfg["upweight"])
    if name == "cvar":
        return CVaRDROClassifier(C=cfg["C"], rho=cfg["rho"], n_rounds=cfg["cvar_rounds"])
    if name == "lff":
        return LfFClassifier(C=cfg["C"], biased_C=cfg["lff_biased_C"], q=cfg["lff_q"], n_rounds=cfg["lff_rounds"])
    raise ValueError(f"learner must be one of {tuple(LEARNER_NAMES)}, got {name!r}")


# ---------------------------------------------------------------------------------------------- jobs
def run_crossover(config: dict, seed: int) -> dict:
    """S(alpha), alpha_eff and clean accuracy of each classical learner for one overlap xi and one seed."""
    from icml24.evaluation.collective_action.signals import (
        effective_collective_size,
        plant_collective,
        success_rate,
    )

    with _single_thread():
        X, y = _digits()
        tr, te = _split(y, seed, (0.8, 0.2))
        g = _signal()
        xi = float(config["overlap"])
        out: dict = {}
        clean = _learner("erm", config).fit(X[tr], y[tr])
        out["erm@0:success"] = success_rate(clean, X[te], y[te], g, TARGET)
        out["erm@0:accuracy"] = float(np.mean(clean.predict(X[te]) == y[te]))
        for i, a in enumerate(config["alphas"]):
            data = plant_collective(X[tr], y[tr], g, alpha=a, target=TARGET, overlap=xi,
                                    random_state=np.random.default_rng([seed, i, 11]))  # fmt: skip
            for name in config["learners"]:
                model = _learner(name, config).fit(data.X, data.y)
                key = f"{name}@{_akey(a)}"
                out[f"{key}:success"] = success_rate(model, X[te], y[te], g, TARGET)
                out[f"{key}:accuracy"] = float(np.mean(model.predict(X[te]) == y[te]))
                w = getattr(model, "weights_", np.ones(len(data.y)))
                out[f"{key}:alpha_eff"] = effective_collective_size(w, data.collective)
                if data.overlap.any():  # the weight share of the clean points that carry the signal
                    out[f"{key}:overlap_weight_ratio"] = (effective_collective_size(w, data.overlap)
                                                          / float(data.overlap.mean()))  # fmt: skip
                if name == "jtt":
                    e = model.error_set_
                    out[f"{key}:e_collective"] = float(e[data.collective].mean()) if data.collective.any() else math.nan
                    out[f"{key}:e_rest"] = float(e[~data.collective].mean())
            out[f"alpha@{_akey(a)}"] = data.alpha
        return out


def _worst_class_accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return float(min(np.mean(pred[y == c] == c) for c in np.unique(y)))


def _select(preds_val: list[np.ndarray], y_val: np.ndarray) -> int:
    """The index of the candidate with the best worst-class validation accuracy (ties: the better mean
    accuracy, then the earlier candidate)."""
    scores = [(_worst_class_accuracy(p, y_val), float(np.mean(p == y_val))) for p in preds_val]
    return max(range(len(scores)), key=lambda i: (scores[i][0], scores[i][1], -i))


def _validation_sets(X, y, va, g, a, xi, seed, i):
    """The clean validation set (natural overlap only) and the one the collective also joined."""
    from icml24.evaluation.collective_action.signals import plant_collective

    clean = plant_collective(X[va], y[va], g, alpha=0.0, target=TARGET, overlap=xi,
                             random_state=np.random.default_rng([seed, i, 23]))  # fmt: skip
    joined = plant_collective(X[va], y[va], g, alpha=a, target=TARGET, overlap=xi,
                              random_state=np.random.default_rng([seed, i, 23]))  # fmt: skip
    return {"clean": (clean.X, clean.y), "collective": (joined.X, joined.y)}


def run_validation(config: dict, seed: int) -> dict:
    """Hyperparameters chosen by worst-class validation accuracy, with and without the collective in the
    validation set: the success and accuracy of the selected model."""
    from icml24.evaluation.collective_action.learners import CVaRDROClassifier, JTTClassifier
    from icml24.evaluation.collective_action.signals import plant_collective, success_rate

    with _single_thread():
        X, y = _digits()
        tr, va, te = _split(y, seed, (0.6, 0.2, 0.2))
        g = _signal()
        xi = float(config["overlap"])
        out: dict = {}
        for i, a in enumerate(config["alphas"]):
            data = plant_collective(X[tr], y[tr], g, alpha=a, target=TARGET, overlap=xi,
                                    random_state=np.random.default_rng([seed, i, 11]))  # fmt: skip
            vals = _validation_sets(X, y, va, g, a, xi, seed, i)
            families = {"jtt": [JTTClassifier(C=config["C"], stage1_C=c1, upweight=lam) for lam, c1 in JTT_GRID]}
            if config["cvar"]:
                families["cvar"] = [CVaRDROClassifier(C=config["C"], rho=r, n_rounds=config["cvar_rounds"])
                                    for r in CVAR_GRID]  # fmt: skip
            for fam, models in families.items():
                for m in models:
                    m.fit(data.X, data.y)
                succ = [success_rate(m, X[te], y[te], g, TARGET) for m in models]
                acc = [float(np.mean(m.predict(X[te]) == y[te])) for m in models]
                for vname, (Xv, yv) in vals.items():
                    j = _select([m.predict(Xv) for m in models], yv)
                    key = f"{fam}@{_akey(a)}:{vname}"
                    out[f"{key}:success"] = succ[j]
                    out[f"{key}:accuracy"] = acc[j]
                    out[f"{key}:choice"] = j
        return out


def run_mlp(config: dict, seed: int) -> dict:
    """SGD-trained MLPs: final-epoch S(alpha), alpha_eff and accuracy, and S at the epoch chosen by worst-class
    validation accuracy on a clean validation set and on one the collective joined."""
    import torch

    from icml24.evaluation.collective_action.mlp import train_mlp
    from icml24.evaluation.collective_action.signals import effective_collective_size, plant_collective

    torch.set_num_threads(1)
    with _single_thread():
        X, y = _digits()
        tr, va, te = _split(y, seed, (0.6, 0.2, 0.2))
        g = _signal()
        xi = float(config["overlap"])
        keep = y[te] != TARGET
        out: dict = {}
        for i, a in enumerate(config["alphas"]):
            data = plant_collective(X[tr], y[tr], g, alpha=a, target=TARGET, overlap=xi,
                                    random_state=np.random.default_rng([seed, i, 11]))  # fmt: skip
            vals = _validation_sets(X, y, va, g, a, xi, seed, i)
            evals = {"signal": g(X[te][keep]), "test": X[te], "val_clean": vals["clean"][0],
                     "val_collective": vals["collective"][0]}  # fmt: skip
            for method in config["methods"]:
                run = train_mlp(data.X, data.y, method=method, n_classes=10, hidden=tuple(config["hidden"]),
                                epochs=int(config["epochs"]), lr=config["lr"], batch_size=config["batch_size"],
                                upweight=config["upweight"], stage1_epochs=config["stage1_epochs"],
                                rho=config["rho"], q=config["q"], eval_sets=evals, seed=seed)  # fmt: skip
                h = run.history
                key = f"{method}@{_akey(a)}"
                out[f"{key}:success"] = float(np.mean(h["signal"][-1] == TARGET))
                out[f"{key}:accuracy"] = float(np.mean(h["test"][-1] == y[te]))
                out[f"{key}:alpha_eff"] = effective_collective_size(run.weights, data.collective)
                for vname in ("clean", "collective"):
                    j = _select(h[f"val_{vname}"], vals[vname][1])
                    out[f"{key}:{vname}:success"] = float(np.mean(h["signal"][j] == TARGET))
                    out[f"{key}:{vname}:epoch"] = j + 1
        return out


def run_dominoes(config: dict, seed: int) -> dict:
    """Dominoes: S(alpha) of an SGD-trained MLP (and of logistic regression) with the signal in the easy block
    or in the pixels; the MLP's accuracy with the easy code shuffled (its reliance on the easy block)."""
    import torch

    from icml24.evaluation.collective_action.dominoes import make_dominoes
    from icml24.evaluation.collective_action.mlp import train_mlp
    from icml24.evaluation.collective_action.signals import plant_collective, success_rate

    torch.set_num_threads(1)
    with _single_thread():
        X, y = _digits()
        dom = make_dominoes(X, y, image_shape=(8, 8), margin=config["margin"], noise=config["noise"],
                            random_state=np.random.default_rng([seed, 31]))  # fmt: skip
        tr, te = _split(y, seed, (0.8, 0.2))
        shuffled = dom.without_easy_code(np.random.default_rng([seed, 37]))
        out: dict = {}
        for place in ("easy", "hard"):
            g = dom.easy_signal(size=4) if place == "easy" else dom.hard_signal(size=2)
            for i, a in enumerate(config["alphas"]):
                data = plant_collective(dom.X[tr], y[tr], g, alpha=a, target=TARGET,
                                        random_state=np.random.default_rng([seed, i, 41]))  # fmt: skip
                run = train_mlp(data.X, data.y, method="erm", n_classes=10, hidden=tuple(config["hidden"]),
                                epochs=int(config["epochs"]), lr=config["lr"], batch_size=config["batch_size"],
                                seed=seed)  # fmt: skip
                key = f"{place}@{_akey(a)}"
                out[f"mlp:{key}:success"] = success_rate(run.predict, dom.X[te], y[te], g, TARGET)
                out[f"mlp:{key}:accuracy"] = float(np.mean(run.predict(dom.X[te]) == y[te]))
                out[f"mlp:{key}:accuracy_easy_shuffled"] = float(np.mean(run.predict(shuffled[te]) == y[te]))
                lr = _learner("erm", CLASSICAL).fit(data.X, data.y)
                out[f"logistic:{key}:success"] = success_rate(lr, dom.X[te], y[te], g, TARGET)
        return out


def build_jobs(scale: str, seeds: int | None) -> list[Job]:
    seed_list = seeds_for(scale, seeds, DEFAULT_SEEDS)
    s = SCALES[scale]
    jobs: list[Job] = []
    c = s["crossover"]
    for xi in c["overlaps"]:
        cfg = {**CLASSICAL, "alphas": c["alphas"], "overlap": xi, "learners": c["learners"]}
        jobs += [Job(SLUG, "crossover", f"{__name__}:run_crossover", cfg, sd) for sd in seed_list]
    v = s["validation"]
    cfg = {**CLASSICAL, "alphas": v["alphas"], "overlap": DECISIVE_OVERLAP, "cvar": v["cvar"]}
    jobs += [Job(SLUG, "validation", f"{__name__}:run_validation", cfg, sd) for sd in seed_list]
    if "mlp" in s:
        m = s["mlp"]
        cfg = {**MLP, "alphas": m["alphas"], "overlap": DECISIVE_OVERLAP, "methods": m["methods"],
               "epochs": m["epochs"]}  # fmt: skip
        jobs += [Job(SLUG, "mlp", f"{__name__}:run_mlp", cfg, sd) for sd in seed_list]
    if "dominoes" in s:
        d = s["dominoes"]
        cfg = {**MLP, "alphas": d["alphas"], "epochs": d["epochs"], "margin": 3.0, "noise": 0.1}
        jobs += [Job(SLUG, "dominoes", f"{__name__}:run_dominoes", cfg, sd) for sd in seed_list]
    return jobs


# ---------------------------------------------------------------------------------------------- analysis
def _per_seed(rs: Sequence[JobResult], key: str) -> list[float]:
    return [float(r.metrics[key]) if r.metrics.get(key) is not None else math.nan for r in rs]


def _seed_mean(rs: Sequence[JobResult], keys: Sequence[str]) -> np.ndarray:
    """Per seed, the mean of the metrics ``keys`` (NaN-aware)."""
    vals = np.array([_per_seed(rs, k) for k in keys], dtype=float)
    if vals.size == 0:
        return np.array([])
    with np.errstate(all="ignore"):
        return np.nanmean(vals, axis=0) if np.isfinite(vals).any() else np.full(len(rs), math.nan)


def _paired_power(effect: float, diffs: np.ndarray, alternative: str,
                  equivalence_margin: float | None = None) -> float | None:
    d = diffs[np.isfinite(diffs)]
    if d.size < 2:
        return None
    sd = float(np.std(d, ddof=1)) or 1e-3
    return decide.power_of_compare(effect, sd, int(d.size), paired=True, alternative=alternative, alpha=ALPHA,
                                   equivalence_margin=equivalence_margin, n_sims=400).supported  # fmt: skip


def amplification_decision(rs: Sequence[JobResult], learner: str, alphas: Sequence[float], *,
                           alternative: str, prefix: str = "") -> tuple[decide.Decision, np.ndarray]:
    """Paired over seeds: the mean over ``alphas`` of S(learner) - S(ERM); ``greater`` (amplification of
    small collectives) or ``less`` (dilution of large ones)."""
    a = _seed_mean(rs, [f"{prefix}{learner}@{_akey(x)}:success" for x in alphas])
    b = _seed_mean(rs, [f"{prefix}erm@{_akey(x)}:success" for x in alphas])
    name = f"success {LEARNER_NAMES[learner]} - ERM, mean over alpha in {_alist(alphas)}"
    return decide.compare(a, b, paired=True, alternative=alternative, alpha=ALPHA, effect_name=name), a - b


ALPHA_EFF_EFFECT = math.log(2.0)
"""The change of effective size the alpha_eff rules must detect: a factor 2 (log ratio +-0.69; our bar)."""


def _one_sample_power(effect: float, values: Sequence[float], alternative: str) -> float | None:
    """Power of the one-sample rule at this run's n and spread when the true mean is ``effect``."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return None
    sd = float(np.std(v, ddof=1)) or 1e-3

    def simulate(rng: np.random.Generator) -> np.ndarray:
        return effect + sd * rng.standard_normal(v.size)

    return decide.power(lambda x: decide.compare_to_value(x, 0.0, alternative=alternative, alpha=ALPHA), simulate,
                        n_sims=400, seed=0).supported  # fmt: skip


def _log_ratios(rs: Sequence[JobResult], learner: str, alphas: Sequence[float]) -> list[float]:
    """Per seed, the mean over ``alphas`` of log(alpha_eff / alpha)."""
    vals = []
    for r in rs:
        logs = [math.log(r.metrics[f"{learner}@{_akey(x)}:alpha_eff"] / r.metrics[f"alpha@{_akey(x)}"])
                for x in alphas if r.metrics.get(f"{learner}@{_akey(x)}:alpha_eff")]  # fmt: skip
        vals.append(float(np.mean(logs)) if logs else math.nan)
    return vals


def effective_size_decision(rs: Sequence[JobResult], learner: str, alphas: Sequence[float], *,
                            alternative: str) -> decide.Decision:
    """One sample over seeds: the mean over ``alphas`` of log(alpha_eff / alpha) against 0."""
    vals = _log_ratios(rs, learner, alphas)
    return decide.compare_to_value(vals, 0.0, alternative=alternative, alpha=ALPHA,
                                   effect_name=f"mean log(alpha_eff / alpha) of {LEARNER_NAMES[learner]} over "
                                               f"alpha in {_alist(alphas)}")  # fmt: skip


def _percent_ticks(ax: Any, alphas: Sequence[float]) -> None:
    """Ticks at the grid's alphas, labelled in percent, and no minor labels (they overlap on a short log axis)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(list(alphas))
    ax.set_xticklabels([f"{100 * a:g}" for a in alphas])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _alist(alphas: Sequence[float]) -> str:
    return "{" + ", ".join(f"{100 * a:g}%" for a in alphas) + "}"


def hardt_success_bound(alpha: float | Sequence[float], xi: float) -> np.ndarray:
    """The success a collective of size ``alpha`` is guaranteed against a Bayes-optimal learner when a share ``xi``
    of the clean data carries the signal with its own label: ``max(0, 1 - (1 - alpha) / alpha * xi)`` (the
    feature-label signal-planting bound of Hardt et al., ICML 2023, with suboptimality epsilon = 0). With
    ``alpha`` replaced by a learner's effective size alpha_eff (Ben-Dov et al., Sec. 3) it is the paper's
    prediction for a re-weighting learner. ``xi = 0`` gives 1 for every ``alpha > 0``."""
    a = np.asarray(alpha, dtype=float)
    if np.any(~np.isfinite(a)) or np.any((a <= 0) | (a > 1)):
        raise ValueError(f"alpha must lie in (0, 1], got {alpha!r}")
    if isinstance(xi, bool) or not isinstance(xi, (int, float, np.floating)) or not 0 <= xi <= 1:
        raise ValueError(f"xi must be a share in [0, 1], got {xi!r}")
    return np.maximum(0.0, 1.0 - (1.0 - a) / a * float(xi))


def _crossover(results: Sequence[JobResult]) -> tuple[list[Table], list[ClaimCheck], list[Figure]]:
    groups = group_results(results, "crossover", by=("overlap",))
    tables, checks, figures = [], [], []
    if not groups:
        return tables, checks, figures
    fig, axes = new_figure(2, len(groups), width=4.2, height=3.2)
    for j, ((xi,), rs) in enumerate(groups.items()):
        cfg = rs[0].job.config
        alphas, learners = cfg["alphas"], cfg["learners"]
        rows = []
        for a in alphas:
            row: list = [f"{100 * a:g}%"]
            row += [numeric_cell(_per_seed(rs, f"{m}@{_akey(a)}:success")) for m in learners]
            row += [numeric_cell([v / a for v in _per_seed(rs, f"{m}@{_akey(a)}:alpha_eff")], 2)
                    for m in learners if m != "erm"]  # fmt: skip
            if xi > 0:
                row += [numeric_cell(_per_seed(rs, f"{m}@{_akey(a)}:overlap_weight_ratio"), 2)
                        for m in learners if m != "erm"]  # fmt: skip
            if "jtt" in learners:
                row += [numeric_cell(_per_seed(rs, f"jtt@{_akey(a)}:e_collective"), 2),
                        numeric_cell(_per_seed(rs, f"jtt@{_akey(a)}:e_rest"), 2)]  # fmt: skip
            row.append(f"{float(hardt_success_bound(a, xi)):.3f}")
            row += [numeric_cell(_effective_bound(rs, m, a, xi)) for m in learners if m != "erm"]
            rows.append(row)
        cols = (["alpha"] + [f"S, {LEARNER_NAMES[m]}" for m in learners]
                + [f"alpha_eff/alpha, {LEARNER_NAMES[m]}" for m in learners if m != "erm"]
                + ([f"overlap weight share / xi, {LEARNER_NAMES[m]}" for m in learners if m != "erm"] if xi > 0 else [])
                + (["JTT e_C", "JTT e_0"] if "jtt" in learners else [])
                + ["Hardt bound at alpha (Bayes-optimal learner)"]
                + [f"bound at alpha_eff, {LEARNER_NAMES[m]}" for m in learners if m != "erm"])  # fmt: skip
        s0 = numeric_cell(_per_seed(rs, "erm@0:success"))
        acc0 = numeric_cell(_per_seed(rs, "erm@0:accuracy"))
        tables.append(Table(
            f"Success S(alpha) = P[f(g(x)) = 0 | y != 0] and effective size, logistic-regression learners, signal "
            f"overlap xi = {xi:g}", cols, rows,
            f"mean ± std over seeds. Without a collective ERM gives S(0) = {s0} and clean accuracy {acc0}. Overlap "
            "weight share / xi: the training-weight share of the clean points that carry the signal with their own "
            "label, over their count share (1 = not re-weighted). e_C, e_0: shares of the collective and of the "
            "other points in JTT's stage-1 error set. Hardt bound: the success guaranteed against a Bayes-optimal "
            "learner, max(0, 1 - (1 - alpha)/alpha * xi) (Hardt et al. 2023); at alpha_eff: the same bound at the "
            "learner's measured effective size, the paper's effective-size prediction (reference curves, not "
            "decisive)"))  # fmt: skip
        for m in learners:
            axes[0, j].errorbar(alphas, [np.mean(_per_seed(rs, f"{m}@{_akey(a)}:success")) for a in alphas],
                                yerr=[np.std(_per_seed(rs, f"{m}@{_akey(a)}:success"), ddof=1) if len(rs) > 1 else 0
                                      for a in alphas], marker="o", capsize=2, label=LEARNER_NAMES[m],
                                color=LEARNER_COLORS[m])  # fmt: skip
            if m != "erm":
                ratio = [[v / a for v in _per_seed(rs, f"{m}@{_akey(a)}:alpha_eff")] for a in alphas]
                axes[1, j].errorbar(alphas, [np.mean(r) for r in ratio],
                                    yerr=[np.std(r, ddof=1) if len(r) > 1 else 0 for r in ratio], marker="o",
                                    capsize=2, label=LEARNER_NAMES[m], color=LEARNER_COLORS[m])  # fmt: skip
        fine = np.geomspace(min(alphas), max(alphas), 60)
        axes[0, j].plot(fine, hardt_success_bound(fine, xi), color="black", ls="--", lw=1,
                        label="Hardt bound (Bayes-optimal)")  # fmt: skip
        if "jtt" in learners:
            axes[0, j].plot(alphas, [np.nanmean(_effective_bound(rs, "jtt", a, xi)) for a in alphas], color="black",
                            ls=":", lw=1, label="bound at JTT's alpha_eff")  # fmt: skip
        axes[0, j].set(xscale="log", xlabel="collective size alpha (fraction of training set)",
                       ylabel="success S(alpha)", title=f"overlap xi = {xi:g}")  # fmt: skip
        axes[1, j].axhline(1.0, color="grey", lw=0.8)
        axes[1, j].set(xscale="log", yscale="log", xlabel="collective size alpha (fraction of training set)",
                       ylabel="alpha_eff / alpha")  # fmt: skip
        axes[0, j].legend(fontsize=6)
        axes[1, j].legend(fontsize=6)
        decisive_xi = xi == DECISIVE_OVERLAP
        small = [a for a in SMALL_ALPHAS if a in alphas]
        large = [a for a in LARGE_ALPHAS if a in alphas]
        for m in [x for x in learners if x != "erm"]:
            decisive = decisive_xi and m == "jtt"
            if small:
                dec, diffs = amplification_decision(rs, m, small, alternative="greater")
                checks.append(dec.to_check(
                    id=f"{m}-amplifies-small-xi{xi:g}", decisive=decisive,
                    power=_paired_power(PAPER_GAIN_SMALL, diffs, "greater"),
                    claim=f"{LEARNER_NAMES[m]} makes a small collective (alpha <= {100 * max(small):g}%) more "
                          f"successful than ERM does (overlap xi = {xi:g})"))  # fmt: skip
                eff = effective_size_decision(rs, m, small, alternative="greater")
                checks.append(eff.to_check(
                    id=f"{m}-alpha-eff-up-small-xi{xi:g}", decisive=decisive,
                    power=_one_sample_power(ALPHA_EFF_EFFECT, _log_ratios(rs, m, small), "greater"),
                    claim=f"{LEARNER_NAMES[m]} gives a small collective an effective size alpha_eff above alpha "
                          f"(xi = {xi:g})"))  # fmt: skip
            if large:
                dec, diffs = amplification_decision(rs, m, large, alternative="less")
                checks.append(dec.to_check(
                    id=f"{m}-dilutes-large-xi{xi:g}", decisive=decisive,
                    power=_paired_power(PAPER_LOSS_LARGE, diffs, "less"),
                    claim=f"{LEARNER_NAMES[m]} makes a large collective (alpha >= {100 * min(large):g}%) less "
                          f"successful than ERM does (overlap xi = {xi:g})"))  # fmt: skip
                eff = effective_size_decision(rs, m, large, alternative="less")
                checks.append(eff.to_check(
                    id=f"{m}-alpha-eff-down-large-xi{xi:g}", decisive=decisive,
                    power=_one_sample_power(-ALPHA_EFF_EFFECT, _log_ratios(rs, m, large), "less"),
                    claim=f"{LEARNER_NAMES[m]} gives a large collective an effective size alpha_eff below alpha "
                          f"(xi = {xi:g})"))  # fmt: skip
        xs = [a for r in rs for a in alphas]
        ys = [r.metrics.get(f"erm@{_akey(a)}:success", math.nan) for r in rs for a in alphas]
        mono = decide.trend(np.log(xs), ys, claim="increasing", method="spearman", alpha=ALPHA,
                            effect_name="Spearman rho of ERM's success in log alpha")  # fmt: skip
        checks.append(mono.to_check(id=f"erm-monotone-xi{xi:g}", decisive=False,
                                    claim=f"Under ERM, success grows with the collective's size (xi = {xi:g})"))
    return tables, checks, [Figure(
        "Success and effective collective size against alpha, logistic-regression learners",
        figure_png(fig), "Top: S(alpha); bottom: alpha_eff / alpha (1 = no change; the grey line). Error bars: "
        "± one std over seeds.")]  # fmt: skip


def _effective_bound(rs: Sequence[JobResult], learner: str, a: float, xi: float) -> list[float]:
    """Per seed, :func:`hardt_success_bound` at ``learner``'s measured alpha_eff for the collective of size ``a``."""
    effs = _per_seed(rs, f"{learner}@{_akey(a)}:alpha_eff")
    return [float(hardt_success_bound(min(e, 1.0), xi)) if np.isfinite(e) and e > 0 else math.nan for e in effs]


def validation_decision(rs: Sequence[JobResult], family: str, alphas: Sequence[float],
                        prefix: str = "", equivalence_margin: float | None = None) -> tuple[decide.Decision, np.ndarray]:
    """Paired over seeds: success of the model selected on the validation set the collective joined minus
    that of the model selected on the clean one, averaged over ``alphas`` (> 0; with ``equivalence_margin``, a
    gain shown within it is not_supported by TOST)."""
    a = _seed_mean(rs, [f"{prefix}{family}@{_akey(x)}:collective:success" for x in alphas])
    b = _seed_mean(rs, [f"{prefix}{family}@{_akey(x)}:clean:success" for x in alphas])
    return decide.compare(a, b, paired=True, alternative="greater", alpha=ALPHA, equivalence_margin=equivalence_margin,
                          effect_name=f"success (collective in validation - clean validation), {LEARNER_NAMES[family]}"
                                      f" selection, mean over alpha in {_alist(alphas)}"), a - b  # fmt: skip


def _validation(results: Sequence[JobResult]) -> tuple[list[Table], list[ClaimCheck]]:
    groups = group_results(results, "validation", by=())
    if not groups:
        return [], []
    rs = next(iter(groups.values()))
    cfg = rs[0].job.config
    fams = ["jtt"] + (["cvar"] if cfg["cvar"] else [])
    rows = []
    for fam in fams:
        for a in cfg["alphas"]:
            row = [LEARNER_NAMES[fam], f"{100 * a:g}%"]
            for v in ("clean", "collective"):
                row += [numeric_cell(_per_seed(rs, f"{fam}@{_akey(a)}:{v}:success")),
                        numeric_cell(_per_seed(rs, f"{fam}@{_akey(a)}:{v}:accuracy"))]  # fmt: skip
            rows.append(row)
    grid = {"jtt": "(lambda_up, stage-1 C) in " + ", ".join(f"({lam:g}, {c:g})" for lam, c in JTT_GRID),
            "cvar": "rho in " + ", ".join(f"{r:g}" for r in CVAR_GRID)}  # fmt: skip
    table = Table("Model selection by worst-class validation accuracy: clean validation set vs one the collective "
                  "joined (overlap xi = 0.05)",
                  ["learner", "alpha", "S, clean val", "accuracy, clean val", "S, collective in val",
                   "accuracy, collective in val"], rows,
                  "mean ± std over seeds; selection grids: " + "; ".join(grid[f] for f in fams))  # fmt: skip
    checks = []
    for fam in fams:
        dec, diffs = validation_decision(rs, fam, cfg["alphas"], equivalence_margin=VALIDATION_EQ)
        checks.append(dec.to_check(
            id=f"validation-leverage-{fam}", decisive=fam == "cvar",
            power=_paired_power(VALIDATION_EFFECT, diffs, "greater", VALIDATION_EQ),
            claim=("" if fam == "cvar" else "(reported) ")
                  + f"With {LEARNER_NAMES[fam]}'s hyperparameters chosen by worst-class validation accuracy, a "
                  "collective that also joins the validation set is more successful"))  # fmt: skip
    if "cvar" not in fams:
        checks.append(decide.not_run_check(
            "validation-leverage-cvar", "With CVaR-DRO's rho chosen by worst-class validation accuracy, a collective "
            "that also joins the validation set is more successful",
            "these validation rows ran JTT's selection only; the claim names CVaR-type re-weighting"))  # fmt: skip
    return [table], checks


def _mlp(results: Sequence[JobResult]) -> tuple[list[Table], list[ClaimCheck], list[Figure]]:
    groups = group_results(results, "mlp", by=())
    if not groups:
        return [], [], []
    rs = next(iter(groups.values()))
    cfg = rs[0].job.config
    alphas, methods = cfg["alphas"], cfg["methods"]
    rows = []
    for a in alphas:
        for m in methods:
            k = f"{m}@{_akey(a)}"
            rows.append([f"{100 * a:g}%", LEARNER_NAMES[m], numeric_cell(_per_seed(rs, f"{k}:success")),
                         numeric_cell([v / a for v in _per_seed(rs, f"{k}:alpha_eff")], 2),
                         numeric_cell(_per_seed(rs, f"{k}:accuracy")), numeric_cell(_per_seed(rs, f"{k}:clean:success")),
                         numeric_cell(_per_seed(rs, f"{k}:collective:success"))])  # fmt: skip
    table = Table("SGD-trained MLPs (64-128-10, 30 epochs): success, effective size and accuracy at the last epoch; "
                  "success at the epoch chosen by worst-class validation accuracy (overlap xi = 0.05)",
                  ["alpha", "learner", "S (last epoch)", "alpha_eff/alpha", "accuracy", "S, epoch chosen on clean val",
                   "S, epoch chosen with collective in val"], rows, "mean ± std over seeds")  # fmt: skip
    checks = []
    small = [a for a in alphas if a in SMALL_ALPHAS]
    large = [a for a in alphas if a in LARGE_ALPHAS]
    for m in [x for x in methods if x != "erm"]:
        if small:
            dec, diffs = amplification_decision(rs, m, small, alternative="greater")
            checks.append(dec.to_check(id=f"mlp-{m}-amplifies-small", decisive=False,
                                       power=_paired_power(PAPER_GAIN_SMALL, diffs, "greater"),
                                       claim=f"SGD-trained MLP: {LEARNER_NAMES[m]} makes a small collective more "
                                             "successful than ERM does"))  # fmt: skip
        if large:
            dec, diffs = amplification_decision(rs, m, large, alternative="less")
            checks.append(dec.to_check(id=f"mlp-{m}-dilutes-large", decisive=False,
                                       power=_paired_power(PAPER_LOSS_LARGE, diffs, "less"),
                                       claim=f"SGD-trained MLP: {LEARNER_NAMES[m]} makes a large collective less "
                                             "successful than ERM does"))  # fmt: skip
        dec, diffs = validation_decision(rs, m, small or alphas)
        checks.append(dec.to_check(id=f"mlp-validation-leverage-{m}", decisive=False,
                                   power=_paired_power(PAPER_GAIN_SMALL, diffs, "greater"),
                                   claim=f"SGD-trained MLP, {LEARNER_NAMES[m]} with early stopping on worst-class "
                                         "validation accuracy: the collective gains by joining the validation set"))  # fmt: skip
    fig, ax = new_figure(1, 1, width=4.6, height=3.4)
    for m in methods:
        vals = [_per_seed(rs, f"{m}@{_akey(a)}:success") for a in alphas]
        ax[0, 0].errorbar(alphas, [np.mean(v) for v in vals], yerr=[np.std(v, ddof=1) if len(v) > 1 else 0 for v in vals],
                          marker="o", capsize=2, label=LEARNER_NAMES[m], color=LEARNER_COLORS[m])  # fmt: skip
    ax[0, 0].set(xscale="log", xlabel="collective size alpha (% of training set)", ylabel="success S(alpha)",
                 title="SGD-trained MLPs, xi = 0.05")  # fmt: skip
    _percent_ticks(ax[0, 0], alphas)
    ax[0, 0].legend(fontsize=6)
    return [table], checks, [Figure("Success against alpha, SGD-trained MLPs", figure_png(fig),
                                    "Error bars: ± one std over seeds.")]


def placement_decision(rs: Sequence[JobResult], alphas: Sequence[float], learner: str = "mlp") -> tuple[decide.Decision, np.ndarray]:
    """Paired over seeds: S(signal in the easy block) - S(signal in the pixels), mean over ``alphas``."""
    a = _seed_mean(rs, [f"{learner}:easy@{_akey(x)}:success" for x in alphas])
    b = _seed_mean(rs, [f"{learner}:hard@{_akey(x)}:success" for x in alphas])
    who = "SGD-trained MLP" if learner == "mlp" else "logistic regression"
    return decide.compare(a, b, paired=True, alternative="greater", alpha=ALPHA,
                          effect_name=f"success (easy-block signal - pixel signal), {who}, mean over alpha in "
                                      f"{_alist(alphas)}"), a - b  # fmt: skip


def placement_interaction_decision(rs: Sequence[JobResult], alphas: Sequence[float]) -> tuple[decide.Decision, np.ndarray]:
    """Paired over seeds: the MLP's placement gap S(easy) - S(pixels) minus logistic regression's on the same data
    and collective (a difference in differences), mean over ``alphas``: what the learner's bias adds to the
    data's own preference for one placement."""
    mlp = (_seed_mean(rs, [f"mlp:easy@{_akey(x)}:success" for x in alphas])
           - _seed_mean(rs, [f"mlp:hard@{_akey(x)}:success" for x in alphas]))  # fmt: skip
    lin = (_seed_mean(rs, [f"logistic:easy@{_akey(x)}:success" for x in alphas])
           - _seed_mean(rs, [f"logistic:hard@{_akey(x)}:success" for x in alphas]))  # fmt: skip
    return decide.compare(mlp, lin, paired=True, alternative="greater", alpha=ALPHA,
                          effect_name=f"placement gap (easy-block - pixel signal) of the SGD-trained MLP - that of "
                                      f"logistic regression, mean over alpha in {_alist(alphas)}"), mlp - lin  # fmt: skip


def _dominoes(results: Sequence[JobResult]) -> tuple[list[Table], list[ClaimCheck], list[Figure]]:
    groups = group_results(results, "dominoes", by=())
    if not groups:
        return [], [], []
    rs = next(iter(groups.values()))
    alphas = rs[0].job.config["alphas"]
    rows = []
    for a in alphas:
        row = [f"{100 * a:g}%"]
        for learner in ("mlp", "logistic"):
            for place in ("easy", "hard"):
                row.append(numeric_cell(_per_seed(rs, f"{learner}:{place}@{_akey(a)}:success")))
        for place in ("easy", "hard"):
            row.append(numeric_cell(_per_seed(rs, f"mlp:{place}@{_akey(a)}:accuracy_easy_shuffled")))
        rows.append(row)
    table = Table("Dominoes [easy label code | digit pixels]: success with the signal in the easy block or in the "
                  "pixels",
                  ["alpha", "S, MLP, easy-block signal", "S, MLP, pixel signal", "S, logistic, easy-block signal",
                   "S, logistic, pixel signal", "MLP accuracy, easy code shuffled (easy signal run)",
                   "MLP accuracy, easy code shuffled (pixel signal run)"], rows,
                  "mean ± std over seeds; a low accuracy with the easy code shuffled means the MLP relies on the "
                  "easy block")  # fmt: skip
    inter, diffs = placement_interaction_decision(rs, alphas)
    checks = [inter.to_check(
        id="simplicity-bias-changes-placement", power=_paired_power(PLACEMENT_EFFECT, diffs, "greater"), decisive=False,
        claim="(reported, not decisive: the easy-block signal sits in pure-noise columns that do not compete with the "
              "task's own features, so this design cannot isolate SGD's simplicity bias) SGD's simplicity bias "
              "changes which signal works: the SGD-trained MLP favours the easy-block signal over the pixel signal by "
              "more than logistic regression does on the same data")]  # fmt: skip
    dec, diffs = placement_decision(rs, alphas)
    checks.append(dec.to_check(
        id="simplicity-bias-placement", decisive=False, power=_paired_power(PLACEMENT_EFFECT, diffs, "greater"),
        claim="Under the SGD-trained MLP a signal in the easy block succeeds more than the same-size signal in the "
              "pixels"))  # fmt: skip
    ref, _ = placement_decision(rs, alphas, "logistic")
    checks.append(ref.to_check(id="placement-logistic-reference", decisive=False,
                               claim="Reference: the same comparison under logistic regression"))
    fig, ax = new_figure(1, 1, width=4.6, height=3.4)
    for learner, style in (("mlp", "-"), ("logistic", "--")):
        for place in ("easy", "hard"):
            vals = [_per_seed(rs, f"{learner}:{place}@{_akey(a)}:success") for a in alphas]
            ax[0, 0].errorbar(alphas, [np.mean(v) for v in vals],
                              yerr=[np.std(v, ddof=1) if len(v) > 1 else 0 for v in vals], ls=style, marker="o",
                              capsize=2, label=f"{'MLP' if learner == 'mlp' else 'logistic'}, "
                                               f"{'easy-block' if place == 'easy' else 'pixel'} signal")  # fmt: skip
    ax[0, 0].set(xscale="log", xlabel="collective size alpha (% of training set)", ylabel="success S(alpha)",
                 title="Dominoes: where the signal goes")  # fmt: skip
    _percent_ticks(ax[0, 0], alphas)
    ax[0, 0].legend(fontsize=6)
    return [table], checks, [Figure("Dominoes: success against alpha by signal placement", figure_png(fig),
                                    "Error bars: ± one std over seeds.")]


def analyze(results: Sequence[JobResult], scale: str) -> Analysis:
    results = [r for r in results if r.status == "ok"]
    t1, c1, f1 = _crossover(results)
    t2, c2 = _validation(results)
    t3, c3, f3 = _mlp(results)
    t4, c4, f4 = _dominoes(results)
    checks = c1 + c2 + c3 + c4
    decisive = [c for c in checks if c.decisive]
    summary = f"Scale {scale}. " + " | ".join(f"[{c.verdict}] {c.claim}: {c.evidence}" for c in decisive)
    return decide.analysis(checks, summary=summary, rule="all", tables=t1 + t2 + t3 + t4, figures=f1 + f3 + f4)


REPRODUCTION = Reproduction(
    slug=SLUG,
    claim=(
        "The learning algorithm changes how much a collective can steer a classifier: re-weighting (JTT) "
        "amplifies small collectives and dilutes large ones (a crossover in success and in effective size), and "
        "choosing CVaR-DRO's hyperparameter on a validation set the collective joins helps the collective. "
        "(SGD's simplicity bias deciding which signal works is reported, not decided: our dominoes cannot isolate it.)"
    ),
    build_jobs=build_jobs,
    analyze=analyze,
    deviations=(
        "Data: scikit-learn's bundled 8x8 digits instead of CIFAR-10, Waterbirds and MNIST-CIFAR (no downloads); "
        "the dominoes are [one-hot label code + noise | digit pixels], not MNIST-CIFAR images.",
        "Learners: logistic regression (classical) and a 64-128-10 MLP (SGD, 30 epochs) instead of ResNets; "
        "CVaR-DRO is iterative re-weighting with averaged best responses (classical) or the minibatch CVaR (MLP).",
        "The paper's numbers were not retrievable; the effect sizes for the power analysis come from the notes' "
        "CPU probe (JTT vs ERM +0.18 at alpha = 0.4%, -0.19 at 10%, xi = 0.05).",
        "Small and large collectives are our pre-registered alpha sets ({0.2, 0.4, 0.8, 1.5}% and {10, 20}%); "
        "the crossover is decided at signal overlap xi = 0.05.",
        "Validation leverage: selection by worst-class validation accuracy over a fixed grid; our reconstruction "
        "of the mechanism, not the paper's protocol.",
        "The classical LfF fits its logistic regressions to convergence, so its relative difficulty saturates near 1 "
        "on every point the debiased model fits and it stays close to ERM; the MLP version has LfF's dynamics.",
        "Simplicity bias is reported, not decided (since issue 42): the dominoes' easy-block signal sits in "
        "pure-noise columns that do not compete with the task's features, so neither the MLP's placement gap nor "
        "its difference from logistic regression's (the rule added after the first full run) isolates SGD's bias.",
        "Validation leverage is decided on CVaR-DRO (the CVaR-type method the claim names; rho in {1, 0.5, 0.2, 0.1}) "
        "at every scale since issue 42; JTT's selection is reported. Power is stated against the +0.03 gain measured "
        "for JTT's selection here, not the crossover's 0.18.",
        "The Hardt et al. bound is drawn with epsilon = 0 (a Bayes-optimal learner) as a reference curve; we could "
        "not read the theorem's text, so its form is our reading of it (the signal-planting bound with signal "
        "overlap xi), and it decides nothing.",
    ),
    scales=("smoke", "quick", "full"),
)
