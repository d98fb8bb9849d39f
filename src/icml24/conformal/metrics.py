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


def covered(sets: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(n,) booleans: does each set contain its true label?"""
    s = _check_sets(sets)
    y = check_labels(labels, s.shape[1], n_samples=s.shape[0])
    return s[np.arange(s.shape[0]), y]


def marginal_coverage(sets: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of samples whose set contains the true label (NaN for zero samples)."""
    c = covered(sets, labels)
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


def class_conditional_coverage(sets: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(K,) coverage among the samples of each class (NaN for a class with no samples)."""
    s = _check_sets(sets)
    cov = covered(s, labels)
    y = check_labels(labels, s.shape[1], n_samples=s.shape[0])
    count = np.bincount(y, minlength=s.shape[1])
    hits = np.bincount(y, weights=cov, minlength=s.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, hits / np.maximum(count, 1), np.nan)
