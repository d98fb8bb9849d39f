"""Argument checks shared by the collective-action modules: each error names the argument and what was expected."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def check_real(value: Any, name: str, *, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite real number in ``[lo, hi]`` (open ends on request)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi:g}, got {value!r}")
    return v


def check_int(value: Any, name: str, *, lo: int | None = None) -> int:
    """An int (not a bool) of at least ``lo``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if lo is not None and value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value!r}")
    return int(value)


def check_class(value: Any, name: str) -> int:
    """An int class label."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int class label, got {type(value).__name__}")
    return int(value)


def check_rng(random_state: Any, name: str = "random_state") -> np.random.Generator:
    """A numpy Generator from ``None``, a non-negative int seed or a Generator."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"{name} must be None, a non-negative int or a numpy Generator, got "
                        f"{type(random_state).__name__}")  # fmt: skip
    if random_state < 0:
        raise ValueError(f"{name} must be a non-negative int seed, got {random_state!r}")
    return np.random.default_rng(int(random_state))


def check_matrix(X: Any, name: str = "X") -> np.ndarray:
    """A non-empty, finite 2-D float array."""
    if isinstance(X, (str, bytes)) or X is None:
        raise TypeError(f"{name} must be a 2-D array of numbers, got {type(X).__name__}")
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a 2-D array of numbers: {exc}") from exc
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (n points x d features), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must hold finite numbers only (found NaN or inf)")
    return arr


def check_labels(y: Any, n: int, name: str = "y") -> np.ndarray:
    """``n`` integer class labels (integral floats are accepted)."""
    if isinstance(y, (str, bytes)) or y is None:
        raise TypeError(f"{name} must be a 1-D array of integer class labels, got {type(y).__name__}")
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} labels (one per row), got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.isfinite(arr).all() and np.all(arr == np.round(arr)):
            return arr.astype(np.int64)
        raise TypeError(f"{name} must hold integer class labels, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def check_mask(mask: Any, n: int, name: str) -> np.ndarray:
    """A boolean mask of length ``n``."""
    if isinstance(mask, (str, bytes)) or mask is None:
        raise TypeError(f"{name} must be a boolean mask, got {type(mask).__name__}")
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise TypeError(f"{name} must be a boolean mask, got dtype {arr.dtype}")
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr
