"""Input checks shared by the conformal core: every public function validates its arguments here so that
bad input fails early with a ``ValueError``/``TypeError`` that names the argument and what was expected."""

from __future__ import annotations

import math
import numbers

import numpy as np

PROBS_ATOL: float = 1e-4
"""Default tolerance on ``|sum_k p_k - 1|`` per row: wide enough for float32 softmax outputs over
thousands of classes, narrow enough to catch unnormalised scores or logits passed by mistake."""


BLOCK_ELEMENTS: int = 1 << 18
"""Elements per row block (2 MiB of float64) in the blocked loops: small enough to stay in cache between the
check and the computation, large enough that the Python overhead per block is small (measured best of
2^16..2^20 on the 100,000 x 100 benchmark)."""


def block_rows(n_classes: int) -> int:
    """Rows per block for a matrix with ``n_classes`` columns."""
    return max(1, BLOCK_ELEMENTS // max(1, n_classes))


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """Return ``alpha`` as a float after checking that it is a real number strictly inside (0, 1)."""
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1), got {type(alpha).__name__}")
    value = float(alpha)
    if not math.isfinite(value) or not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1), got {alpha!r}")
    return value


def check_probs(probs: object, *, name: str = "probs", atol: float = PROBS_ATOL) -> np.ndarray:
    """Return ``probs`` as a floating 2-D array of shape (n, K) whose rows are probability vectors.

    Raises ``ValueError`` for a wrong shape, NaN or infinite entries, negative entries, or rows whose sum
    differs from 1 by more than ``atol``. float32 and float64 inputs keep their dtype (no copy); other
    numeric inputs are converted to float64.
    """
    if isinstance(atol, (bool, np.bool_)) or not isinstance(atol, numbers.Real) or not math.isfinite(atol) or atol < 0:
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    arr = as_probs_array(probs, name=name)
    step = block_rows(arr.shape[1])
    for start in range(0, arr.shape[0], step):
        check_probs_block(arr[start : start + step], start, name=name, atol=atol)
    return arr


def as_probs_array(probs: object, *, name: str = "probs") -> np.ndarray:
    """Dtype and shape checks of :func:`check_probs` only (the values are checked block by block)."""
    arr = np.asarray(probs)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must be a numeric array of shape (n_samples, n_classes), got dtype {arr.dtype}")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_classes), got shape {arr.shape}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one class column, got shape {arr.shape}")
    return arr


def check_probs_block(blk: np.ndarray, start: int, *, name: str = "probs", atol: float = PROBS_ATOL) -> None:
    """Value checks of :func:`check_probs` on a block of rows that begins at row ``start``.

    Callers loop over cache-sized blocks and compute on each block right after checking it, so the data
    is read from RAM once. NaN and +-inf propagate into the row sums, so one test catches them.
    """
    if blk.shape[0] == 0:
        return
    # einsum row sums: faster than sum(axis=1) on short rows, and no BLAS threads (gemv oversubscribes a
    # loaded machine and was 20x slower in our benchmark)
    row_sums = np.einsum("ij->i", blk)
    if not np.isfinite(row_sums).all():
        bad = start + int(np.flatnonzero(~np.isfinite(row_sums))[0])
        raise ValueError(f"{name} contains NaN or infinite values (first in row {bad})")
    if blk.min() < 0:
        bad = start + int(np.flatnonzero((blk < 0).any(axis=1))[0])
        raise ValueError(f"{name} contains negative probabilities (first in row {bad})")
    dev = np.abs(row_sums - 1.0)
    worst = int(np.argmax(dev))
    if dev[worst] > atol:
        raise ValueError(
            f"rows of {name} must sum to 1 (tolerance {atol:g}); row {start + worst} sums to "
            f"{float(row_sums[worst]):.6g}"
        )


def check_labels(
    labels: object, n_classes: int, *, n_samples: int | None = None, name: str = "labels"
) -> np.ndarray:
    """Return ``labels`` as a 1-D int64 array of class indices in ``[0, n_classes)``.

    Integer-valued floats are accepted (e.g. labels read from a CSV); anything else raises.
    """
    if isinstance(n_classes, (bool, np.bool_)) or not isinstance(n_classes, numbers.Integral) or n_classes < 1:
        raise ValueError(f"n_classes must be an integer >= 1, got {n_classes!r}")
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,), got shape {arr.shape}")
    if n_samples is not None and arr.shape[0] != n_samples:
        raise ValueError(f"{name} has {arr.shape[0]} entries but there are {n_samples} samples")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be integer class indices, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.isfinite(arr).all() or not np.array_equal(arr, np.round(arr)):
            raise ValueError(f"{name} must be integer class indices, got non-integer values")
    out = arr.astype(np.int64)
    lo, hi = int(out.min()), int(out.max())
    if lo < 0 or hi >= n_classes:
        raise ValueError(f"{name} must be class indices in [0, {n_classes}), got values in [{lo}, {hi}]")
    return out


def check_rng(rng: object) -> np.random.Generator:
    """A numpy Generator from ``None``, an int seed or a Generator."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")
