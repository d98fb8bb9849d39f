"""Dense linear algebra for GP code: a jittered Cholesky that fails loudly, and input checks.

GP algebra is run in float64 by default (``DEFAULT_DTYPE``): a kernel matrix of a few hundred points is
already too ill-conditioned for float32 Cholesky. Jitter is an explicit argument, never added silently
in a retry loop, so that the number that was added is always the number the caller asked for.
"""

from __future__ import annotations

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
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(f"{name} must be a (batch of) square matrices, got shape {tuple(matrix.shape)}")
    if jitter < 0:
        raise ValueError(f"jitter must be >= 0, got {jitter}")
    check_finite(name, matrix)
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
