"""Input checks shared by the lp-coreset modules (clear errors naming the argument)."""

from __future__ import annotations

import math

import numpy as np


def check_p(p: float, name: str = "p") -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(p).__name__}")
    p = float(p)
    if not (math.isfinite(p) and p > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {p}")
    return p


def as_float_array(x: object, name: str) -> np.ndarray:
    """``np.asarray(x, dtype=float)`` with an error that names the argument (strings, None, objects)."""
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}")
    if np.iscomplexobj(x):
        raise TypeError(f"{name} must be real, got complex values")
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers ({exc})") from None
    return arr


def check_matrix(A: object, name: str, *, ndim: int = 2) -> np.ndarray:
    arr = as_float_array(A, name)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return arr


def check_responses(B: object, n: int, name: str = "B") -> np.ndarray:
    arr = as_float_array(B, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    arr = check_matrix(arr, name)
    if arr.shape[0] != n:
        raise ValueError(f"{name} must have {n} rows (one per row of A), got shape {arr.shape}")
    return arr


def check_k(k: object, n: int, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(k).__name__}")
    if not 1 <= int(k) <= n:
        raise ValueError(f"{name} must be in [1, n={n}], got {k}")
    return int(k)


def check_real(
    x: object,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """A finite real number in ``[lo, hi]`` (open ends where asked)."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    v = float(x)
    lo_ok = lo is None or (v > lo if lo_open else v >= lo)
    hi_ok = hi is None or (v < hi if hi_open else v <= hi)
    if not (math.isfinite(v) and lo_ok and hi_ok):
        left = "(-inf" if lo is None else ("(" if lo_open else "[") + f"{lo:g}"
        right = "inf)" if hi is None else f"{hi:g}" + (")" if hi_open else "]")
        raise ValueError(f"{name} must be a finite number in {left}, {right}, got {v}")
    return v


def check_int(x: object, name: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """An int (not a bool) in ``[lo, hi]``."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(x).__name__}")
    v = int(x)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{name} must be an int in [{lo}, {hi if hi is not None else 'inf'}], got {v}")
    return v


def check_weights(w: object, n: int, name: str = "weights") -> np.ndarray:
    """``n`` finite nonnegative row weights."""
    arr = as_float_array(w, name)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one weight per row), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    return arr


def check_distribution(q: object, name: str = "q") -> np.ndarray:
    """A 1-D array of finite nonnegative numbers with a positive sum."""
    arr = as_float_array(q, name)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0) or not arr.sum() > 0:
        raise ValueError(f"{name} must be a 1-D array of finite, nonnegative numbers with a positive sum")
    return arr


def check_rng(rng: object, name: str = "rng") -> np.random.Generator:
    """``None``, a nonnegative int seed or a ``np.random.Generator``."""
    if rng is None or isinstance(rng, np.random.Generator):
        return np.random.default_rng(rng)
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)):
        raise TypeError(f"{name} must be None, an int seed or a numpy Generator, got {type(rng).__name__}")
    if rng < 0:
        raise ValueError(f"{name} (a seed) must be >= 0, got {rng}")
    return np.random.default_rng(int(rng))


def check_solution(X: object, d: int, m: int, name: str = "X") -> np.ndarray:
    """A finite ``(d, m)`` coefficient matrix (a ``(d,)`` vector is read as ``m = 1``)."""
    arr = as_float_array(X, name)
    if arr.ndim == 1 and m == 1:
        arr = arr[:, None]
    if arr.shape != (d, m):
        raise ValueError(f"{name} must have shape ({d}, {m}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return arr
