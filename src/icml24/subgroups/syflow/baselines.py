"""The baselines of SYFLOW's experiments (Sec. 5): classical subgroup discovery by beam search, and PRIM.

* **SD-mu** (:func:`sd_mean`): pysubgroup's beam search with the standard numeric quality
  ``|S|^alpha (mean_S - mean)`` (``ps.StandardQFNumeric``; it rewards a *higher* subgroup mean, as in the
  official runner), over pre-discretised selectors (``nbins`` cut points per feature).
* **SD-KL** (:func:`sd_kl`): the same search with a Gaussian KL quality, ``(|S| / n)^alpha KL(N(mu_S, s_S^2) ||
  N(mu, s^2))`` in nats (the official runner's ``QF_WKL`` mixes a log2 with natural-log terms and drops the
  ``-1/2``; we use the textbook Gaussian KL).
* **BH / PRIM** (:func:`prim_box`): Friedman and Fisher's (1999) patient rule induction, our own short
  implementation of the peeling phase (the paper runs the R package): repeatedly cut the ``peel_alpha``
  fraction of the box's points off the one side of one feature that raises the box's target mean most, until
  the box holds ``min_support`` of the data.

pysubgroup is imported lazily: it declares ``numpy<2`` and has to be installed with ``pip install --no-deps
pysubgroup`` (plus pandas and statsmodels) next to numpy 2. Each function returns a :class:`BaselineSubgroup`
per result, with a readable :class:`~icml24.subgroups.syflow.rule.Rule` and the membership of the rows.

RSD (robust subgroup discovery, MDL rule lists) is not built.
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icml24.subgroups.syflow._validation import finite_array, finite_number
from icml24.subgroups.syflow.rule import Condition, Rule


@dataclass(frozen=True)
class BaselineSubgroup:
    """A subgroup found by a baseline: its rule, the membership of the training rows and its quality."""

    rule: Rule
    members: np.ndarray
    quality: float


def _import_pysubgroup():
    try:
        import pysubgroup as ps
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the SD-mu / SD-KL baselines need pysubgroup: pip install --no-deps pysubgroup "
            "(its numpy<2 pin is too strict; it works with numpy 2)"
        ) from exc
    return ps


def _check(X: object, y: object, n_subgroups: int, alpha: float, beam_width: int, depth: int, nbins: int):
    X = finite_array("X", X, ndim=2, min_rows=2)
    y = finite_array("y", y, ndim=1, min_rows=2)
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] < 2:
        raise ValueError(f"X must be 2-D with one row per target value, got X {X.shape} and y {y.shape}")
    for name, v in (("n_subgroups", n_subgroups), ("beam_width", beam_width), ("depth", depth), ("nbins", nbins)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be a number in [0, 1], got {alpha!r}")
    return X, y


def _beam_search(X, y, qf, *, n_subgroups, beam_width, depth, nbins, feature_names) -> list[BaselineSubgroup]:
    import pandas as pd

    ps = _import_pysubgroup()
    cols = [f"x{j}" for j in range(X.shape[1])]
    names = list(feature_names) if feature_names is not None else cols
    data = pd.DataFrame(X, columns=cols)
    data["__target__"] = y
    selectors = ps.create_selectors(data, nbins=nbins, intervals_only=False, ignore=["__target__"])
    task = ps.SubgroupDiscoveryTask(data, ps.NumericTarget("__target__"), selectors, result_set_size=n_subgroups,
                                    depth=depth, qf=qf)  # fmt: skip
    result = ps.BeamSearch(beam_width=max(beam_width, n_subgroups)).execute(task)
    out = []
    for quality, description, _ in result.results:
        members = np.asarray(description.covers(data), dtype=bool)
        out.append(BaselineSubgroup(_rule_of(description, X, names, cols), members, float(quality)))
    return out


def _rule_of(description, X: np.ndarray, names: Sequence[str], cols: Sequence[str]) -> Rule:
    """pysubgroup's conjunction of interval selectors as a :class:`Rule` (one interval per feature)."""
    bounds: dict[int, list[float]] = {}
    for sel in description.selectors:
        j = cols.index(sel.attribute_name)
        lo, hi = bounds.setdefault(j, [-math.inf, math.inf])
        # An IntervalSelector covers lower <= x < upper.
        bounds[j] = [max(lo, float(sel.lower_bound)), min(hi, float(sel.upper_bound))]
    conditions = []
    for j, (lo, hi) in sorted(bounds.items()):
        # Our Condition is open on both sides; x >= lo is x > lo - tiny for the data (ties are measure zero).
        lower = None if not math.isfinite(lo) else float(np.nextafter(lo, -math.inf))
        upper = None if not math.isfinite(hi) else float(hi)
        conditions.append(Condition(j, str(names[j]), lower, upper))
    return Rule(tuple(conditions))


def sd_mean(
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_subgroups: int = 1,
    alpha: float = 0.5,
    beam_width: int = 20,
    depth: int = 3,
    nbins: int = 20,
    feature_names: Sequence[str] | None = None,
) -> list[BaselineSubgroup]:
    """SD-mu: beam search for the subgroups of highest ``|S|^alpha (mean_S - mean)`` (pysubgroup)."""
    X, y = _check(X, y, n_subgroups, alpha, beam_width, depth, nbins)
    ps = _import_pysubgroup()
    return _beam_search(X, y, ps.StandardQFNumeric(alpha), n_subgroups=n_subgroups, beam_width=beam_width,
                        depth=depth, nbins=nbins, feature_names=feature_names)  # fmt: skip


def gaussian_kl(mean_p: float, sd_p: float, mean_q: float, sd_q: float) -> float:
    """``KL(N(mean_p, sd_p^2) || N(mean_q, sd_q^2))`` in nats."""
    mean_p, mean_q = finite_number("mean_p", mean_p), finite_number("mean_q", mean_q)
    sd_p, sd_q = finite_number("sd_p", sd_p, positive=True), finite_number("sd_q", sd_q, positive=True)
    return math.log(sd_q / sd_p) + (sd_p**2 + (mean_p - mean_q) ** 2) / (2 * sd_q**2) - 0.5


def _gaussian_kl_quality(alpha: float):
    """A pysubgroup quality function ``(|S|/n)^alpha KL(N_S || N_population)``."""
    ps = _import_pysubgroup()
    stats_tpl = namedtuple("GaussianKLStatistics", ("size_sg", "mean", "std"))

    class GaussianKLQuality(ps.BoundedInterestingnessMeasure):
        def __init__(self) -> None:
            self.alpha = alpha
            self.required_stat_attrs = ("size_sg", "mean", "std")
            self.dataset_statistics = None
            self.all_target_values = None
            self.has_constant_statistics = False

        def calculate_constant_statistics(self, data, target):
            self.all_target_values = data[target.target_variable].to_numpy()
            v = self.all_target_values
            self.dataset_statistics = stats_tpl(len(v), float(v.mean()), float(v.std()))
            self.has_constant_statistics = True

        def calculate_statistics(self, subgroup, target, data, statistics=None):
            cover, size = ps.get_cover_array_and_size(subgroup, len(self.all_target_values), data)
            if size < 2:
                return stats_tpl(size, 0.0, 0.0)
            v = self.all_target_values[cover]
            return stats_tpl(size, float(v.mean()), float(v.std()))

        def evaluate(self, subgroup, target, data, statistics=None):
            s = self.ensure_statistics(subgroup, target, data, statistics)
            pop = self.dataset_statistics
            if s.size_sg < 2 or pop.std <= 0:
                return 0.0
            kl = gaussian_kl(s.mean, s.std + 1e-7, pop.mean, pop.std)
            return (s.size_sg / pop.size_sg) ** self.alpha * kl

        def optimistic_estimate(self, subgroup, target, data, statistics=None):
            return math.inf

    return GaussianKLQuality()


def sd_kl(
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_subgroups: int = 1,
    alpha: float = 0.5,
    beam_width: int = 20,
    depth: int = 3,
    nbins: int = 20,
    feature_names: Sequence[str] | None = None,
) -> list[BaselineSubgroup]:
    """SD-KL: beam search for the subgroups of highest ``(|S|/n)^alpha`` Gaussian KL to the population."""
    X, y = _check(X, y, n_subgroups, alpha, beam_width, depth, nbins)
    return _beam_search(X, y, _gaussian_kl_quality(float(alpha)), n_subgroups=n_subgroups, beam_width=beam_width,
                        depth=depth, nbins=nbins, feature_names=feature_names)  # fmt: skip


def prim_box(
    X: np.ndarray,
    y: np.ndarray,
    *,
    peel_alpha: float = 0.05,
    min_support: float = 0.1,
    feature_names: Sequence[str] | None = None,
) -> BaselineSubgroup:
    """PRIM's peeling (bump hunting): the box of highest target mean with support about ``min_support``.

    Each step removes, from the current box, the ``peel_alpha`` fraction of its points below a lower quantile
    or above an upper quantile of one feature, whichever of the ``2 d`` candidate peels leaves the highest
    mean; it stops before the support falls under ``min_support``. The quality is the box's mean shift.
    """
    X = finite_array("X", X, ndim=2, min_rows=2)
    y = finite_array("y", y, ndim=1, min_rows=2)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X must have one row per target value in y, got X {X.shape} and y {y.shape}")
    for name, v in (("peel_alpha", peel_alpha), ("min_support", min_support)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            raise ValueError(f"{name} must be a number in (0, 1), got {v!r}")
    n, d = X.shape
    lower, upper = np.full(d, -math.inf), np.full(d, math.inf)
    inside = np.ones(n, dtype=bool)
    while True:
        best = None
        xb, yb = X[inside], y[inside]
        for j in range(d):
            for side in (0, 1):
                q = np.quantile(xb[:, j], peel_alpha if side == 0 else 1 - peel_alpha)
                keep = xb[:, j] > q if side == 0 else xb[:, j] < q
                if keep.sum() < min_support * n or keep.all() or not keep.any():
                    continue
                m = float(yb[keep].mean())
                if best is None or m > best[0]:
                    best = (m, j, side, q)
        if best is None:
            break
        _, j, side, q = best
        if side == 0:
            lower[j] = q
        else:
            upper[j] = q
        inside = np.all((X > lower) & (X < upper), axis=1)
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
    conditions = tuple(
        Condition(j, str(names[j]), None if not math.isfinite(lower[j]) else float(lower[j]),
                  None if not math.isfinite(upper[j]) else float(upper[j]))
        for j in range(d) if math.isfinite(lower[j]) or math.isfinite(upper[j])
    )  # fmt: skip
    rule = Rule(conditions)
    members = rule.covers(X)
    return BaselineSubgroup(rule, members, float(y[members].mean() - y.mean()) if members.any() else 0.0)
