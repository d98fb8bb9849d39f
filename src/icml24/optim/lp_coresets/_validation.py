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


def check_matrix(A: object, name: str, *, ndim: int = 2) -> np.ndarray:
    arr = np.asarray(A, dtype=float)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return arr


def check_responses(B: object, n: int, name: str = "B") -> np.ndarray:
    arr = np.asarray(B, dtype=float)
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
