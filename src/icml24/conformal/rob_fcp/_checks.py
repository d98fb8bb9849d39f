"""Argument checks shared by the Rob-FCP modules: each error names its argument."""

from __future__ import annotations

import math
import numbers

import numpy as np

from icml24.common.validation import integer


def int_at_least(value: object, name: str, low: int) -> int:
    """``value`` as an int >= ``low`` (bools and floats refused; :func:`icml24.common.validation.integer`)."""
    return integer(value, name, low=low)


def finite_real(value: object, name: str, *, low: float | None = None) -> float:
    """``value`` as a finite float (>= ``low`` when given)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or (low is not None and v < low):
        raise ValueError(f"{name} must be a finite number{'' if low is None else f' >= {low:g}'}, got {value!r}")
    return v


def flag(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def index_array(values: object, name: str, size: int) -> np.ndarray:
    """Client indices in ``[0, size)`` as int64 (integer dtype required; empty allowed)."""
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integer client indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64).ravel()
    if arr.min() < 0 or arr.max() >= size:
        raise ValueError(f"{name} must be client indices in [0, {size}), got {sorted(set(arr.tolist()))}")
    return arr
