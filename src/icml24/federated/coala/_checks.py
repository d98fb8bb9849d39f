"""Argument checks shared by the COALA modules: each error names the argument and what was expected."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def int_at_least(value: object, name: str, low: int) -> int:
    """``value`` as an int >= ``low`` (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= {low}, got {value!r}")
    if int(value) < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def finite_float(value: object, name: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False) -> float:  # fmt: skip
    """``value`` as a finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value!r}")
    if high is not None and v > high:
        raise ValueError(f"{name} must be <= {high:g}, got {value!r}")
    return v


def one_of(value: object, name: str, options: Sequence[str]) -> str:
    """``value`` as one of the strings ``options``."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {', '.join(repr(o) for o in options)}, got {value!r}")
    return value


def labels_1d(labels: object, name: str = "labels") -> np.ndarray:
    """``labels`` as a non-empty 1-D array of non-negative integers."""
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{name} must be a non-empty 1-D integer array, got shape {y.shape}, dtype {y.dtype}")
    if y.min() < 0:
        raise ValueError(f"{name} must be non-negative class indices, got min {int(y.min())}")
    return y


def rng_of(rng: object, name: str = "rng") -> np.random.Generator:
    """A numpy Generator from a seed (int), a Generator, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)) or int(rng) < 0:
        raise TypeError(f"{name} must be a non-negative int seed, a numpy Generator or None, got {rng!r}")
    return np.random.default_rng(int(rng))
