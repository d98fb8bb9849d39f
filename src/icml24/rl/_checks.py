"""Argument checks shared by the RL packages: each error names the argument and what was expected."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch


def real(name: str, value: Any, *, low: float | None = None, high: float | None = None, low_open: bool = False,
         high_open: bool = False) -> float:  # fmt: skip
    """``value`` as a finite float in the given range, or a ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {v}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {v}")
    return v


def integer(name: str, value: Any, *, low: int | None = None) -> int:
    """``value`` as an int (not a bool) >= ``low``, or a ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value}")
    return int(value)


def tensor(name: str, value: Any) -> torch.Tensor:
    """``value`` if it is a floating-point or bool ``torch.Tensor``, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def finite_tensor(name: str, value: Any) -> torch.Tensor:
    """A tensor without NaN/inf entries (one reduction), else a ``ValueError`` naming ``name``."""
    t = tensor(name, value)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite; got NaN or inf entries")
    return t
