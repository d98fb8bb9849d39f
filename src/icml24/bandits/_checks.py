"""Argument checks shared by the bandit papers (each error names its argument); ``positive_int`` is the
project-wide one of :mod:`icml24.common.validation`."""

from __future__ import annotations

import numbers

import numpy as np

from icml24.common.validation import positive_int

__all__ = [
    "actions_array",
    "integer_array",
    "means_array",
    "non_negative_float",
    "observations_array",
    "positive_float",
    "positive_int",
    "seed_like",
    "unit_interval",
]


def non_negative_float(value: object, name: str) -> float:
    """``value`` as a finite ``float`` >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number >= 0, got {type(value).__name__} {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def positive_float(value: object, name: str) -> float:
    """``value`` as a finite ``float`` > 0."""
    value = non_negative_float(value, name)
    if value == 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def unit_interval(value: object, name: str) -> float:
    """``value`` as a ``float`` in [0, 1]."""
    value = non_negative_float(value, name)
    if value > 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def means_array(means: object, name: str = "means") -> np.ndarray:
    """Per-factor arm means as a float array of shape (n_factors, n_arms), all finite and > 0.

    The reward is a product of the factors' outcomes, so the optimal action vector is the per-factor argmax
    only when every mean is positive (the paper's problem setting); zero or negative means are refused.
    """
    arr = np.asarray(means, dtype=float)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (n_factors, n_arms) with both >= 1, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0 (the reward is a product of positive factors)")
    return arr


def actions_array(actions: object, n_trials: int, n_factors: int, n_arms: int, name: str = "actions") -> np.ndarray:
    """Action vectors as an int array of shape (n_trials, n_factors) with entries in [0, n_arms)."""
    arr = np.asarray(actions)
    if arr.shape != (n_trials, n_factors):
        raise ValueError(f"{name} must have shape (n_trials, n_factors) = {(n_trials, n_factors)}, got {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= n_arms):
        raise ValueError(f"{name} must lie in [0, {n_arms}), got values in [{arr.min()}, {arr.max()}]")
    return arr.astype(np.intp, copy=False)


def observations_array(observations: object, n_trials: int, n_factors: int, name: str = "observations") -> np.ndarray:
    """Intermediate observations as a float array of shape (n_trials, n_factors)."""
    arr = np.asarray(observations, dtype=float)
    if arr.shape != (n_trials, n_factors):
        raise ValueError(f"{name} must have shape (n_trials, n_factors) = {(n_trials, n_factors)}, got {arr.shape}")
    return arr


def integer_array(values: object, name: str) -> np.ndarray:
    """``values`` as an int64 array: integer dtype, or finite integer-valued floats; anything else raises."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must hold finite integers, got NaN or infinite values")
        if not np.array_equal(arr, np.round(arr)):
            raise ValueError(f"{name} must hold integers, got non-integer values")
    return arr.astype(np.int64)


def seed_like(seed: object, name: str = "seed") -> object:
    """``None``, an int or a numpy Generator (what ``np.random.default_rng`` accepts here)."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be None, an int or a numpy Generator, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be >= 0, got {seed}")
    return int(seed)
