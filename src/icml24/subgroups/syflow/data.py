"""The synthetic benchmark of SYFLOW (Sec. 5.1): a planted subgroup with an unusual target distribution.

``X`` is uniform on ``[0, 1]^d``. ``c`` features get an interval of width ``0.1^(1/c)`` each, placed uniformly
at random, so that the box they span holds a tenth of the cube. Each row is a subgroup member with
probability 0.1; a member's planted features are drawn inside the intervals, a non-member's are redrawn until
the point lies outside the box, so the rule "inside all intervals" is exactly the subgroup. Outside the
subgroup ``Y ~ U(0, 1)``; inside it follows one of the target distributions below (the paper's seven, plus a
variance-only target with the population's mean, which a mean-shift quality cannot see).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PLANTED_FRACTION = 0.1


def _bimodal(rng: np.random.Generator, n: int) -> np.ndarray:
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return sign * 1.5 + 0.5 * rng.standard_normal(n)


TARGETS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "normal": lambda rng, n: rng.normal(1.5, 0.5, n),
    "bimodal": _bimodal,
    "beta": lambda rng, n: 1.2 * rng.beta(0.2, 0.2, n),
    "rayleigh": lambda rng, n: rng.rayleigh(2.0, n),
    "uniform": lambda rng, n: rng.uniform(0.5, 1.5, n),
    "exponential": lambda rng, n: rng.exponential(0.5, n),
    "cauchy": lambda rng, n: rng.standard_cauchy(n),
    "variance": lambda rng, n: rng.normal(0.5, 1.5, n),
}
"""Subgroup target distributions: N(1.5, 0.5^2); +-1.5 + N(0, 0.5^2) with equal weights; 1.2 Beta(0.2, 0.2);
Rayleigh(2); U(0.5, 1.5); Exp(mean 0.5); standard Cauchy; and N(0.5, 1.5^2) (variance only: the mean equals
the population's U(0, 1) mean)."""
TARGET_NAMES = {
    "normal": "normal N(1.5, 0.5²)",
    "bimodal": "bimodal ±1.5",
    "beta": "beta(0.2, 0.2)·1.2",
    "rayleigh": "Rayleigh(2)",
    "uniform": "uniform U(0.5, 1.5)",
    "exponential": "exponential (mean 0.5)",
    "cauchy": "Cauchy",
    "variance": "variance only N(0.5, 1.5²)",
}


@dataclass(frozen=True)
class PlantedSubgroup:
    """A synthetic data set with its planted subgroup.

    Attributes:
        X: ``(n, d)`` features in ``[0, 1]``.
        y: ``(n,)`` target.
        members: planted membership.
        features: the planted features, sorted.
        intervals: ``(c, 2)`` the planted interval of each planted feature (in ``features`` order).
        target: the target distribution's key in :data:`TARGETS`.
    """

    X: np.ndarray
    y: np.ndarray
    members: np.ndarray
    features: tuple[int, ...]
    intervals: np.ndarray
    target: str


def make_planted_subgroup(
    n_samples: int, n_features: int, n_conditions: int, target: str, *, seed: int = 0
) -> PlantedSubgroup:
    """Draw the synthetic benchmark of Sec. 5.1 (see the module docstring).

    Args:
        n_samples: rows ``n`` (>= 10).
        n_features: features ``d``.
        n_conditions: planted interval conditions ``c`` (1 <= c <= d).
        target: a key of :data:`TARGETS`.
        seed: the data's seed.
    """
    for name, v, lo in (("n_samples", n_samples, 10), ("n_features", n_features, 1), ("n_conditions", n_conditions, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if n_conditions > n_features:
        raise ValueError(f"n_conditions must be <= n_features ({n_features}), got {n_conditions}")
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    rng = np.random.default_rng(seed)
    features = np.sort(rng.choice(n_features, n_conditions, replace=False))
    width = PLANTED_FRACTION ** (1.0 / n_conditions)
    start = rng.uniform(0.0, 1.0 - width, n_conditions)
    intervals = np.stack([start, start + width], axis=1)
    X = rng.uniform(0.0, 1.0, (n_samples, n_features))
    members = rng.random(n_samples) < PLANTED_FRACTION
    inside = rng.uniform(intervals[:, 0], intervals[:, 1], (n_samples, n_conditions))
    outside = rng.uniform(0.0, 1.0, (n_samples, n_conditions))
    in_box = _in_box(outside, intervals)
    while in_box.any():  # rejection: a non-member must lie outside the box
        outside[in_box] = rng.uniform(0.0, 1.0, (int(in_box.sum()), n_conditions))
        in_box = _in_box(outside, intervals)
    X[:, features] = np.where(members[:, None], inside, outside)
    y = rng.uniform(0.0, 1.0, n_samples)
    y[members] = TARGETS[target](rng, int(members.sum()))
    return PlantedSubgroup(X, y, members, tuple(int(f) for f in features), intervals, target)


def _in_box(points: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    return np.all((points >= intervals[:, 0]) & (points < intervals[:, 1]), axis=1)
