"""Argument checks shared by every package: each error names the argument, what was expected and what came.

A wrong *kind* of value (a bool or a float where an int is expected, a string, a complex number) raises
``TypeError``; a value of the right kind outside its range raises ``ValueError``. Numpy scalars count as the
Python number they hold (``np.int64(3)`` is an int, ``np.float32(0.5)`` a real), ``bool`` never counts as a
number, and complex input is refused outright instead of being cast to its real part with only a numpy
``ComplexWarning``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["finite_real_array", "integer", "positive_int", "probability", "real", "real_array"]


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def integer(value: Any, name: str, *, low: int | None = None) -> int:
    """``value`` as a Python ``int`` (not a bool) that is ``>= low`` when ``low`` is given.

    Example:
        >>> integer(np.int64(0), "warmup", low=0)
        0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        expected = "an int" if low is None else f"an int >= {low}"
        raise TypeError(f"{name} must be {expected}, got {_kind(value)}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {int(value)}")
    return int(value)


def positive_int(value: Any, name: str) -> int:
    """``value`` as a Python ``int`` >= 1 (a bool or a float is refused with a ``TypeError``).

    Example:
        >>> positive_int(3, "steps")
        3
    """
    return integer(value, name, low=1)


def real(value: Any, name: str, *, low: float | None = None, high: float | None = None, low_open: bool = False,
         high_open: bool = False) -> float:  # fmt: skip
    """``value`` as a finite Python ``float`` in the given range (each end closed unless ``*_open``).

    Example:
        >>> real(2, "lr", low=0.0, low_open=True)
        2.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        what = "a complex number" if isinstance(value, numbers.Complex) else _kind(value)
        raise TypeError(f"{name} must be a real number, got {what}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {v}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {v}")
    return v


def probability(value: Any, name: str, *, open_interval: bool = False) -> float:
    """``value`` as a float in [0, 1], or in (0, 1) when ``open_interval`` (e.g. a miscoverage level).

    Example:
        >>> probability(0.1, "alpha", open_interval=True)
        0.1
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        what = "a complex number" if isinstance(value, numbers.Complex) else _kind(value)
        raise TypeError(f"{name} must be a probability (a real number), got {what}")
    v = float(value)
    inside = 0.0 < v < 1.0 if open_interval else 0.0 <= v <= 1.0
    if not inside:  # NaN fails both comparisons
        raise ValueError(f"{name} must lie in {'(0, 1)' if open_interval else '[0, 1]'}, got {v}")
    return v


def real_array(x: Any, name: str, *, ndim: int | None = None) -> np.ndarray:
    """``x`` as a float64 array (a new array only when a conversion is needed); infinities and NaN pass.

    Refused with a ``TypeError``: complex input (numpy would keep only the real part and warn), strings, and
    objects that do not convert to floats. ``ndim`` (when given) is checked with a ``ValueError``.

    Example:
        >>> real_array([1, 2.5], "scores", ndim=1)
        array([1. , 2.5])
    """
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind == "c" or (kind == "O" and any(isinstance(v, complex) for v in arr.flat)):
        raise TypeError(f"{name} must hold real numbers, got complex values (dtype {arr.dtype})")
    if kind not in "biuf":
        if kind != "O":
            raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must hold real numbers, got objects that are not ({exc})") from None
    arr = np.asarray(arr, dtype=np.float64)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    return arr


def finite_real_array(x: Any, name: str, *, ndim: int | None = None) -> np.ndarray:
    """:func:`real_array` whose entries are all finite (no NaN, no infinity), else a ``ValueError``.

    Example:
        >>> finite_real_array([[0.0, 1.0]], "x", ndim=2).shape
        (1, 2)
    """
    arr = real_array(x, name, ndim=ndim)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got NaN or infinite entries")
    return arr
