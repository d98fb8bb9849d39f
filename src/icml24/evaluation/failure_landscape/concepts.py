"""Actionable concepts: the Cartesian grid of input perturbations the search agent chooses from.

Sagar, Taparia and Senanayake (ICML 2024, https://arxiv.org/abs/2406.07145), Section 3 ("Discover"): an
action is a combination of *actionable concepts*, one level per concept, and the transformed input is
``x' = g(x, c)``. The official classification setup has 5 rotations x 5 darkening levels x 5 saturation
levels = 125 actions, flattened in mixed radix with the last concept varying fastest. Our digits are
grey-scale, so saturation is replaced by a Gaussian blur (same grid size, 125 cells): rotation ->
blur -> brightness scaling, applied in one batched pass of :func:`torch.nn.functional.grid_sample` and
one convolution per blur level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

__all__ = ["CONCEPT_NAMES", "ConceptGrid", "apply_concepts", "perturb_grid"]

CONCEPT_NAMES = ("rotation (degrees)", "blur sigma (pixels)", "brightness factor")
"""The three concepts in grid order (the last varies fastest in a cell index)."""


def _levels(name: str, values: Sequence[float], *, lo: float, hi: float) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must hold numbers, got {v!r}")
        if not (math.isfinite(float(v)) and lo <= float(v) <= hi):
            raise ValueError(f"{name} levels must lie in [{lo}, {hi}], got {v!r}")
        out.append(float(v))
    if len(out) < 1:
        raise ValueError(f"{name} needs at least one level")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} levels must be distinct, got {out}")
    return tuple(out)


@dataclass(frozen=True)
class ConceptGrid:
    """The concept grid ``C = rotations x blurs x brightness`` (125 cells by default, as the paper's grid).

    A cell index ``i`` maps to level indices ``(r, b, k)`` with ``i = (r * n_blur + b) * n_brightness + k``.
    """

    rotations: tuple[float, ...] = (-16.0, -8.0, 0.0, 8.0, 16.0)
    """Rotation angles in degrees (sign convention of :func:`apply_concepts`); the paper's grid is -10..10."""
    blurs: tuple[float, ...] = (0.0, 0.4, 0.8, 1.2, 1.6)
    """Gaussian blur standard deviations in pixels of the 16x16 image (0 = no blur); replaces saturation."""
    brightness: tuple[float, ...] = (1.0, 0.8, 0.6, 0.45, 0.3)
    """Brightness factors (1 = unchanged); the paper darkens by 0.1..0.5, i.e. factors 0.9..0.5."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rotations", _levels("rotations", self.rotations, lo=-180.0, hi=180.0))
        object.__setattr__(self, "blurs", _levels("blurs", self.blurs, lo=0.0, hi=8.0))
        object.__setattr__(self, "brightness", _levels("brightness", self.brightness, lo=0.0, hi=4.0))

    @property
    def shape(self) -> tuple[int, int, int]:
        """Levels per concept, in grid order."""
        return (len(self.rotations), len(self.blurs), len(self.brightness))

    @property
    def n_cells(self) -> int:
        """The number of actions ``|C|``."""
        return int(np.prod(self.shape))

    def _check_index(self, index: np.ndarray | int, name: str = "index") -> np.ndarray:
        arr = np.asarray(index)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must be an integer cell index (or array of them), got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.n_cells):
            raise ValueError(f"{name} must lie in [0, {self.n_cells}), got min {arr.min()} max {arr.max()}")
        return arr.astype(np.int64)

    def levels(self, index: np.ndarray | int) -> np.ndarray:
        """Level indices ``(..., 3)`` of cell indices (the inverse of :meth:`index`)."""
        i = self._check_index(index)
        return np.stack(np.unravel_index(i, self.shape), axis=-1).astype(np.int64)

    def index(self, levels: np.ndarray | Sequence[int]) -> np.ndarray | int:
        """Cell indices of level-index triples ``(..., 3)``."""
        lv = np.asarray(levels)
        if lv.dtype.kind not in "iu":
            raise TypeError(f"levels must be integer level indices, got dtype {lv.dtype}")
        if lv.shape[-1:] != (3,):
            raise ValueError(f"levels must have last dimension 3, got shape {lv.shape}")
        for d, n in enumerate(self.shape):
            if lv[..., d].size and (lv[..., d].min() < 0 or lv[..., d].max() >= n):
                raise ValueError(f"levels[..., {d}] must lie in [0, {n}), got {lv[..., d].min()}..{lv[..., d].max()}")
        out = np.ravel_multi_index(tuple(np.moveaxis(lv, -1, 0)), self.shape)
        return int(out) if np.ndim(out) == 0 else out.astype(np.int64)

    def values(self, index: np.ndarray | int) -> np.ndarray:
        """Concept values ``(..., 3)`` (rotation degrees, blur sigma, brightness factor) of cell indices."""
        lv = self.levels(index)
        table = [np.asarray(self.rotations), np.asarray(self.blurs), np.asarray(self.brightness)]
        return np.stack([table[d][lv[..., d]] for d in range(3)], axis=-1)

    def coordinates(self) -> np.ndarray:
        """Every cell's level indices scaled to ``[0, 1]`` per concept, shape ``(n_cells, 3)``: the ground
        space of the landscape distances (each concept axis has length 1, whatever its units)."""
        lv = self.levels(np.arange(self.n_cells)).astype(np.float64)
        scale = np.maximum(np.asarray(self.shape, dtype=np.float64) - 1.0, 1.0)
        return lv / scale

    @property
    def identity_cell(self) -> int | None:
        """The cell that leaves an input unchanged (0 degrees, no blur, brightness 1), if the grid has one."""
        try:
            lv = (self.rotations.index(0.0), self.blurs.index(0.0), self.brightness.index(1.0))
        except ValueError:
            return None
        return int(self.index(np.asarray(lv)))


def _as_tensor(name: str, value: object) -> torch.Tensor:
    """``torch.as_tensor(value)``, or a TypeError that names ``name``."""
    if isinstance(value, torch.Tensor):
        return value
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be an array or tensor, got {type(value).__name__}")
    try:
        return torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{name} must be a numeric array or tensor ({exc})") from None


def _check_images(images: torch.Tensor | np.ndarray) -> torch.Tensor:
    x = _as_tensor("images", images)
    if not torch.is_floating_point(x):
        raise TypeError(f"images must be a float tensor, got dtype {x.dtype}")
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"images must have shape (n, 1, height, width), got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("images must be finite")
    return x.float()


def _gaussian_kernel(sigma: float) -> torch.Tensor:
    radius = max(1, math.ceil(3.0 * sigma))
    t = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    return k


def apply_concepts(images: torch.Tensor | np.ndarray, values: torch.Tensor | np.ndarray) -> torch.Tensor:
    """``g(x, c)`` row by row: rotate by ``values[:, 0]`` degrees, blur with sigma ``values[:, 1]``, scale
    the intensity by ``values[:, 2]`` and clip to ``[0, 1]``; batched (one ``grid_sample``, one
    separable convolution per distinct sigma).

    Args:
        images: ``(n, 1, H, W)`` intensities in ``[0, 1]`` (background 0).
        values: ``(n, 3)`` concept values, e.g. ``grid.values(cells)``.
    """
    x = _check_images(images)
    v = _as_tensor("values", values)
    if not (torch.is_floating_point(v) or v.dtype in (torch.int64, torch.int32)):
        raise TypeError(f"values must be numbers, got dtype {v.dtype}")
    v = v.float()
    if v.ndim != 2 or v.shape != (x.shape[0], 3):
        raise ValueError(f"values must have shape ({x.shape[0]}, 3), got {tuple(v.shape)}")
    if not bool(torch.isfinite(v).all()) or bool((v[:, 1] < 0).any()):
        raise ValueError("values must be finite with blur sigma (column 1) >= 0")
    n = x.shape[0]
    if n == 0:
        return x.clone()
    # Rotation about the image centre: grid_sample reads the source pixel for every output pixel, so
    # the sampling grid is the output grid rotated by -angle (affine_grid works in [-1, 1] coordinates).
    theta = torch.deg2rad(v[:, 0])
    cos, sin = torch.cos(theta), torch.sin(theta)
    zero = torch.zeros_like(cos)
    affine = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
    rotate = v[:, 0] != 0
    out = x.clone()
    if bool(rotate.any()):
        sub = x[rotate]
        grid = F.affine_grid(affine[rotate], list(sub.shape), align_corners=False)
        out[rotate] = F.grid_sample(sub, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    for sigma in torch.unique(v[:, 1]).tolist():
        if sigma <= 0:
            continue
        rows = v[:, 1] == sigma
        k = _gaussian_kernel(float(sigma))
        r = (k.numel() - 1) // 2
        sub = out[rows]
        sub = F.conv2d(sub, k.view(1, 1, 1, -1), padding=(0, r))
        sub = F.conv2d(sub, k.view(1, 1, -1, 1), padding=(r, 0))
        out[rows] = sub
    return (out * v[:, 2].view(-1, 1, 1, 1)).clamp(0.0, 1.0)


def perturb_grid(images: torch.Tensor | np.ndarray, grid: ConceptGrid) -> torch.Tensor:
    """Every image under every cell: ``(n_images * n_cells, 1, H, W)``, image-major (row ``i * n_cells + c``
    is image ``i`` under cell ``c``)."""
    if not isinstance(grid, ConceptGrid):
        raise TypeError(f"grid must be a ConceptGrid, got {type(grid).__name__}")
    x = _check_images(images)
    n, c = x.shape[0], grid.n_cells
    vals = torch.as_tensor(grid.values(np.arange(c)), dtype=torch.float32)
    return apply_concepts(x.repeat_interleave(c, dim=0), vals.repeat(n, 1))
