"""Dense linear algebra for GP code: a jittered Cholesky that fails loudly, and input checks.

GP algebra is run in float64 by default (``DEFAULT_DTYPE``): a kernel matrix of a few hundred points is
already too ill-conditioned for float32 Cholesky. Jitter is an explicit argument, never added silently
in a retry loop, so that the number that was added is always the number the caller asked for.
"""

from __future__ import annotations

import math

import numpy as np
import torch

DEFAULT_DTYPE = torch.float64
"""dtype of the GP module's parameters and of arrays converted from numpy."""

DEFAULT_JITTER = 1e-8
"""Absolute value added to the diagonal before a Cholesky factorisation."""


class NotPSDError(ValueError):
    """A matrix that must be symmetric positive (semi-)definite is not, even after jitter."""


def check_finite(name: str, value: torch.Tensor) -> None:
    """Raise ``ValueError`` naming ``name`` if ``value`` holds NaN or inf."""
    if not bool(torch.isfinite(value).all()):
        n_bad = int((~torch.isfinite(value)).sum())
        raise ValueError(f"{name} must be finite, got {n_bad} non-finite entries (NaN or inf)")


def psd_cholesky(matrix: torch.Tensor, *, jitter: float = DEFAULT_JITTER, name: str = "matrix") -> torch.Tensor:
    """Lower Cholesky factor of ``matrix + jitter * I`` (batched over leading dimensions).

    Raises:
        NotPSDError: the matrix is not positive definite after adding ``jitter`` (its smallest
            eigenvalue is reported), instead of returning NaNs.
        ValueError: the matrix is not square, holds non-finite values, or ``jitter`` is negative.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    check_tensor(name if name != "matrix" else "matrix", matrix)
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(f"{name} must be a (batch of) square matrices, got shape {tuple(matrix.shape)}")
    check_scalar("jitter", jitter, low=0.0, strict=False, allow_tensor=False)
    eye = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    chol, info = torch.linalg.cholesky_ex(matrix + jitter * eye)
    if bool((info > 0).any()):
        sym = 0.5 * (matrix + matrix.transpose(-1, -2))
        min_eig = float(torch.linalg.eigvalsh(sym.detach()).min())
        raise NotPSDError(
            f"{name} is not positive definite after adding jitter={jitter:g} to its diagonal "
            f"(smallest eigenvalue {min_eig:.3e}, dtype {matrix.dtype}); increase the jitter, use float64, "
            "or check the kernel hyperparameters"
        )
    return chol


def as_tensor(name: str, value: object, *, ndim: int | None = None, dtype: torch.dtype = DEFAULT_DTYPE) -> torch.Tensor:
    """Convert array-likes to a tensor of ``dtype`` and check its number of dimensions."""
    if isinstance(value, torch.Tensor):
        out = value.to(dtype)
    else:
        try:
            out = torch.as_tensor(value, dtype=dtype)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"{name} must be array-like of numbers, got {type(value).__name__}") from exc
    if ndim is not None and out.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(out.shape)}")
    return out


def check_tensor(name: str, value: object, *, ndim: int | None = None, finite: bool = True) -> torch.Tensor:
    """Require a floating-point ``torch.Tensor`` (of ``ndim`` dimensions, finite unless ``finite=False``)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if ndim is not None and value.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}")
    if finite:
        check_finite(name, value)
    return value


def check_scalar(
    name: str, value: object, *, low: float | None = None, strict: bool = True, allow_tensor: bool = True
) -> object:
    """Require a finite real number (or, with ``allow_tensor``, a real tensor whose entries all are) above
    ``low`` (``> low`` when ``strict``, else ``>=``). Returns ``value`` unchanged, so tensors keep their
    gradients. ``bool`` is refused: ``True`` is not a number here."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise TypeError(f"{name} must be a real number, got a bool")
    if isinstance(value, torch.Tensor):
        if not allow_tensor:
            raise TypeError(f"{name} must be a real number, got a tensor")
        if value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{name} must be real, got dtype {value.dtype}")
        arr = value.detach().to(torch.float64)
        if not bool(torch.isfinite(arr).all()):
            raise ValueError(f"{name} must be finite, got {value}")
        if low is not None and arr.numel() and (bool((arr <= low).any()) if strict else bool((arr < low).any())):
            raise ValueError(f"{name} must be {'>' if strict else '>='} {low:g}, got {value}")
        return value
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (v <= low if strict else v < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low:g}, got {value!r}")
    return value


def check_int(name: str, value: object, *, minimum: int = 1) -> int:
    """Require an ``int`` (not ``bool``) of at least ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    """Require ``True`` or ``False``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)
