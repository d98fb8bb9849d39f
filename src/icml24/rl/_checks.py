"""Argument checks shared by the RL packages: each error names the argument and what was expected.

The scalar checks are the project-wide ones of :mod:`icml24.common.validation` with the RL packages'
argument order (name first)."""

from __future__ import annotations

from typing import Any

import torch

from icml24.common import validation


def real(name: str, value: Any, *, low: float | None = None, high: float | None = None, low_open: bool = False,
         high_open: bool = False) -> float:  # fmt: skip
    """``value`` as a finite float in the given range (:func:`icml24.common.validation.real`, name first)."""
    return validation.real(value, name, low=low, high=high, low_open=low_open, high_open=high_open)


def integer(name: str, value: Any, *, low: int | None = None) -> int:
    """``value`` as an int (not a bool) >= ``low`` (:func:`icml24.common.validation.integer`, name first)."""
    return validation.integer(value, name, low=low)


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
