"""The size-invariant training loss (Li et al., ICML 2024, Sec. 5, "SIOpt").

Paper: *Size-invariance Matters: Rethinking Metrics and Losses for Imbalanced Multi-object Salient Object
Detection*, ICML 2024. https://arxiv.org/abs/2405.09782 · code https://github.com/Ferry-Li/SI-SOD

The loss mirrors SI-MAE: the backbone's own loss ``l`` is applied inside every object frame separately
and summed, and the background frame contributes a squared error weighted by ``alpha``:

    L_SI = sum_{k=1..K} l(P|F_k, G|F_k) + alpha * mean_{p in F_0} (P(p) - G(p))^2,
    alpha = |F_0| / (HW - |F_0|),

per image; images without a salient object use ``l`` on the whole image, and the batch loss is the mean
over images. A small object thus weighs as much as a large one. Frame means are read off summed-area
tables (``cumsum``), so the loss is one vectorised, differentiable expression for the whole batch.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_bool, check_int
from .frames import Frames, object_frames

__all__ = ["SizeInvariantLoss", "frame_box_means"]

BaseLoss = Literal["bce", "mse", "l1", "bce+dice", "bce+iou"]


def _sat(x: torch.Tensor) -> torch.Tensor:
    """Summed-area table of ``(B, H, W)`` with a zero first row and column: ``(B, H+1, W+1)``."""
    return F.pad(x.cumsum(1).cumsum(2), (1, 0, 1, 0))


def frame_box_means(x: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Mean of ``x[i]`` over each box ``(i, y0, y1, x0, x1)`` (half-open), differentiable: ``(M,)``."""
    s = _sat(x)
    i, y0, y1, x0, x1 = boxes.unbind(1)
    tot = s[i, y1, x1] - s[i, y0, x1] - s[i, y1, x0] + s[i, y0, x0]
    return tot / ((y1 - y0) * (x1 - x0)).to(x.dtype)


class SizeInvariantLoss(nn.Module):
    """Size-invariant loss ``L_SI`` (Sec. 5) around a pixel-level base loss, on logits.

    Args:
        base: the backbone's loss inside each frame: ``"bce"`` (PoolNet), ``"mse"``, ``"l1"``,
            ``"bce+dice"`` (EDN) or ``"bce+iou"`` (ICON-style).
        size_invariant: ``False`` gives the base loss on the whole image (the "original loss" baseline).
        min_area: components smaller than this are not object frames.

    ``forward(logits, target, frames=None)``: ``logits`` and ``target`` are ``(B, H, W)`` or
    ``(B, 1, H, W)``; ``logits`` may also be a list of side outputs (deep supervision), whose losses are
    summed. ``frames`` defaults to :func:`object_frames` of ``target``.
    """

    def __init__(self, *, base: BaseLoss = "bce", size_invariant: bool = True, min_area: int = 0) -> None:
        super().__init__()
        if not isinstance(base, str) or base not in ("bce", "mse", "l1", "bce+dice", "bce+iou"):
            raise ValueError(f"base must be one of bce, mse, l1, bce+dice, bce+iou; got {base!r}")
        check_int("min_area", min_area, 0)
        check_bool("size_invariant", size_invariant)
        self.base = base
        self.size_invariant = size_invariant
        self.min_area = min_area

    def _frame_losses(self, logits: torch.Tensor, target: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        """The base loss restricted to each box: ``(M,)``."""
        prob = torch.sigmoid(logits)
        if self.base == "mse":
            return frame_box_means((prob - target) ** 2, boxes)
        if self.base == "l1":
            return frame_box_means((prob - target).abs(), boxes)
        bce = frame_box_means(F.binary_cross_entropy_with_logits(logits, target, reduction="none"), boxes)
        if self.base == "bce":
            return bce
        # Region terms need sums, not means; a mean times the box area is the sum.
        inter = frame_box_means(prob * target, boxes)
        sp = frame_box_means(prob, boxes)
        sg = frame_box_means(target, boxes)
        area = ((boxes[:, 2] - boxes[:, 1]) * (boxes[:, 4] - boxes[:, 3])).to(logits.dtype)
        inter, sp, sg = inter * area, sp * area, sg * area
        if self.base == "bce+dice":
            return bce + 1.0 - (2.0 * inter + 1.0) / (sp + sg + 1.0)
        return bce + 1.0 - (inter + 1.0) / (sp + sg - inter + 1.0)

    def forward(
        self, logits: torch.Tensor | list[torch.Tensor], target: torch.Tensor, frames: Frames | None = None
    ) -> torch.Tensor:
        outputs = list(logits) if isinstance(logits, (list, tuple)) else [logits]
        if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
            raise TypeError("logits must be a torch.Tensor or a non-empty list of them")
        if frames is not None and not isinstance(frames, Frames):
            raise TypeError(f"frames must be a Frames (from object_frames) or None, got {type(frames).__name__}")
        tgt = self._squeeze(target, "target")
        if not tgt.is_floating_point():
            tgt = tgt.float()
        if not torch.isfinite(tgt).all() or tgt.min() < 0 or tgt.max() > 1:
            raise ValueError("target must be a finite binary mask with values in [0, 1]")
        tgt = (tgt > 0.5).to(outputs[0].dtype)
        bsz, h, w = tgt.shape
        whole = torch.tensor([[i, 0, h, 0, w] for i in range(bsz)], dtype=torch.long, device=tgt.device)
        if not self.size_invariant:
            return sum(self._frame_losses(self._squeeze(o, "logits", tgt.shape), tgt, whole).mean() for o in outputs)
        if frames is None:
            frames = object_frames(tgt.detach().cpu().numpy(), min_area=self.min_area)
        if tuple(frames.shape) != (bsz, h, w):
            raise ValueError(f"frames were built for shape {frames.shape}, target has {(bsz, h, w)}")
        nobj = frames.n_objects
        # Images without an object keep the base loss on the whole image (one frame = the image).
        empty = np.flatnonzero(nobj == 0)
        boxes_np = np.concatenate([frames.boxes, whole.cpu().numpy()[empty]], 0)
        boxes = torch.as_tensor(boxes_np, dtype=torch.long, device=tgt.device)
        bg = torch.as_tensor(frames.coverage() == 0, device=tgt.device)
        bg_area = bg.sum((1, 2)).to(tgt.dtype)
        has_obj = torch.as_tensor(nobj > 0, device=tgt.device)
        alpha = torch.where(has_obj, bg_area / (h * w - bg_area).clamp_min(1), torch.zeros_like(bg_area))
        total = tgt.new_zeros(())
        for o in outputs:
            lo = self._squeeze(o, "logits", tgt.shape)
            per_frame = self._frame_losses(lo, tgt, boxes)
            img_loss = tgt.new_zeros(bsz).index_add(0, boxes[:, 0], per_frame)
            sq = (torch.sigmoid(lo) - tgt) ** 2 * bg
            bg_term = sq.sum((1, 2)) / bg_area.clamp_min(1)
            total = total + (img_loss + alpha * bg_term).mean()
        return total

    @staticmethod
    def _squeeze(x: torch.Tensor, name: str, shape: torch.Size | None = None) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim == 4 and x.shape[1] == 1:
            x = x[:, 0]
        if x.ndim != 3:
            raise ValueError(f"{name} must be (B, H, W) or (B, 1, H, W), got {tuple(x.shape)}")
        if shape is not None and x.shape != shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but target has {tuple(shape)}")
        if name == "logits" and not torch.isfinite(x).all():
            raise ValueError("logits contain non-finite values")
        return x
