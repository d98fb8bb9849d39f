"""Argument checks shared by syflow's public functions: clear errors that name the argument."""

from __future__ import annotations

import math

import numpy as np
import torch


def finite_number(name: str, value: object, *, positive: bool = False, nonnegative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v!r}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {v!r}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {v!r}")
    return v


def int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def finite_tensor(name: str, value: object, *, ndim: int | None = None) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(value.shape)}")
    if not torch.isfinite(value).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return value


def finite_array(name: str, value: object, *, ndim: int | None = None, min_rows: int = 1) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array: {exc}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.shape[0] < min_rows if arr.ndim else True:
        raise ValueError(f"{name} must have at least {min_rows} rows, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return arr
