"""Evaluation metrics for prediction sets (boolean (n, K) matrices).

Marginal coverage and mean set size are the two numbers every conformal paper reports. Size-stratified
coverage and its worst-case violation (SSCV) come from "Uncertainty Sets for Image Classifiers using
Conformal Prediction" (Angelopoulos et al., ICLR 2021, https://arxiv.org/abs/2009.14193, Section 4):
a method that is adaptive should cover about ``1 - alpha`` within every set-size stratum, not just on
average. Class-conditional coverage shows which classes pay for the marginal guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icml24.conformal._validation import check_alpha, check_labels

__all__ = [
    "StratifiedCoverage",
    "class_conditional_coverage",
    "covered",
    "marginal_coverage",
    "mean_set_size",
    "set_sizes",
    "size_stratified_coverage",
    "size_stratified_coverage_violation",
]


def _check_sets(sets: np.ndarray, name: str = "sets") -> np.ndarray:
    s = np.asarray(sets)
    if s.ndim != 2:
        raise ValueError(f"{name} must be a 2-D boolean array (n_samples, n_classes), got shape {s.shape}")
    if s.dtype != np.bool_:
        if not np.issubdtype(s.dtype, np.number) or not np.isin(s, (0, 1)).all():
            raise TypeError(f"{name} must be boolean (or 0/1), got dtype {s.dtype}")
        s = s.astype(bool)
    return s


def _label_indices(labels: object, classes: object | None, n_classes: int, n_samples: int) -> np.ndarray:
    """Class indices of ``labels``: the labels themselves (``classes=None``), or their positions in ``classes``
    (the column order of the sets, e.g. ``SplitConformalClassifier.classes_``), for labels of any type."""
    if classes is None:
        return check_labels(labels, n_classes, n_samples=n_samples)
    cls = np.asarray(classes)
    if cls.ndim != 1 or cls.shape[0] != n_classes:
        raise ValueError(f"classes must be 1-D with one entry per column of sets ({n_classes}), got shape {cls.shape}")
    index = {c: i for i, c in enumerate(cls.tolist())}
    if len(index) != n_classes:
        raise ValueError("classes must not repeat a class")
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be 1-D (n_samples,), got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(f"labels has {arr.shape[0]} entries but there are {n_samples} samples")
    values = arr.tolist()
    unknown = [v for v in values if v not in index]
    if unknown:
        raise ValueError(f"labels contains labels not in classes: {sorted(set(map(str, unknown)))[:5]}")
    return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))


def covered(sets: np.ndarray, labels: np.ndarray, *, classes: object | None = None) -> np.ndarray:
    """(n,) booleans: does each set contain its true label?

    ``labels`` are class indices (the columns of ``sets``), or, with ``classes`` (the label of each column,
    e.g. a fitted ``SplitConformalClassifier``'s ``classes_``), labels of any type such as strings.
    """
    s = _check_sets(sets)
    y = _label_indices(labels, classes, s.shape[1], s.shape[0])
    return s[np.arange(s.shape[0]), y]


def marginal_coverage(sets: np.ndarray, labels: np.ndarray, *, classes: object | None = None) -> float:
    """Fraction of samples whose set contains the true label (NaN for zero samples).

    ``classes``: the label of each column of ``sets`` (``SplitConformalClassifier.classes_``), so that
    ``labels`` may be the original labels (strings, say) instead of class indices.
    """
    c = covered(sets, labels, classes=classes)
    return float(c.mean()) if c.size else float("nan")


def set_sizes(sets: np.ndarray) -> np.ndarray:
    """(n,) number of labels in each set."""
    return _check_sets(sets).sum(axis=1)


def mean_set_size(sets: np.ndarray) -> float:
    """Average number of labels per set (NaN for zero samples)."""
    sizes = set_sizes(sets)
    return float(sizes.mean()) if sizes.size else float("nan")


@dataclass(frozen=True)
class StratifiedCoverage:
    """Coverage within groups of samples (set-size bins or classes)."""

    groups: tuple[str, ...]
    """Group names, e.g. ``"1"``, ``"2-3"``, ``"4+"`` for set-size bins."""
    coverage: np.ndarray
    """Coverage per group (NaN for an empty group)."""
    count: np.ndarray
    """Number of samples per group."""

    def as_dict(self) -> dict[str, tuple[float, int]]:
        return {g: (float(c), int(n)) for g, c, n in zip(self.groups, self.coverage, self.count)}


def size_stratified_coverage(
    sets: np.ndarray, labels: np.ndarray, *, bins: Sequence[int] | None = None
) -> StratifiedCoverage:
    """Coverage by set size.

    Args:
        sets: (n, K) boolean prediction sets.
        labels: (n,) true class indices.
        bins: increasing lower edges of the size bins, e.g. ``(0, 1, 2, 4, 11)`` gives the bins 0, 1,
            2-3, 4-10, 11+ (the RAPS paper's grouping for ImageNet). Default: one bin per observed size.
    """
    s = _check_sets(sets)
    cov = covered(s, labels)
    sizes = s.sum(axis=1)
    if bins is None:
        edges = np.unique(sizes)
    else:
        try:
            edges = np.asarray(bins, dtype=np.int64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bins must be a non-empty increasing sequence of integers, got {bins!r}") from exc
        if edges.ndim != 1 or edges.size == 0 or np.any(np.diff(edges) <= 0):
            raise ValueError(f"bins must be a non-empty increasing sequence of integers, got {bins!r}")
    which = np.searchsorted(edges, sizes, side="right") - 1
    keep = which >= 0
    n_groups = edges.size
    count = np.bincount(which[keep], minlength=n_groups)
    hits = np.bincount(which[keep], weights=cov[keep], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        coverage = np.where(count > 0, hits / np.maximum(count, 1), np.nan)
    names = []
    for i, lo in enumerate(edges):
        hi = edges[i + 1] - 1 if i + 1 < n_groups else None
        if bins is None or hi == lo:
            names.append(str(int(lo)))
        elif hi is None:
            names.append(f"{int(lo)}+")
        else:
            names.append(f"{int(lo)}-{int(hi)}")
    return StratifiedCoverage(tuple(names), coverage, count)


def size_stratified_coverage_violation(
    sets: np.ndarray, labels: np.ndarray, alpha: float, *, bins: Sequence[int] | None = None
) -> float:
    """SSCV (Angelopoulos et al., 2021): ``max over non-empty size bins |coverage - (1 - alpha)|``."""
    alpha = check_alpha(alpha)
    strat = size_stratified_coverage(sets, labels, bins=bins)
    cov = strat.coverage[strat.count > 0]
    return float(np.max(np.abs(cov - (1 - alpha)))) if cov.size else float("nan")


def class_conditional_coverage(
    sets: np.ndarray, labels: np.ndarray, *, classes: object | None = None
) -> np.ndarray:
    """(K,) coverage among the samples of each class (NaN for a class with no samples); ``classes`` as in
    :func:`marginal_coverage`."""
    s = _check_sets(sets)
    y = _label_indices(labels, classes, s.shape[1], s.shape[0])
    cov = s[np.arange(s.shape[0]), y]
    count = np.bincount(y, minlength=s.shape[1])
    hits = np.bincount(y, weights=cov, minlength=s.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, hits / np.maximum(count, 1), np.nan)
