"""Fixed 2-D sine-cosine position embeddings for patch tokens (shared by the papers that use
:class:`~icml24.vision.tiny_vit.TinyViT`'s ``pos_embed``).

He et al., "Masked Autoencoders Are Scalable Vision Learners", CVPR 2022 (``get_2d_sincos_pos_embed`` of the
official MAE code): half the channels encode the patch row and half its column, each as
``[sin(pos w_k), cos(pos w_k)]`` with ``w_k = 10000^(-k / (dim / 4))``, ``k = 0 .. dim/4 - 1``.
"""

from __future__ import annotations

import torch

from icml24.common.validation import positive_int

__all__ = ["sincos_2d"]


def sincos_2d(side: int, dim: int) -> torch.Tensor:
    """``(side * side, dim)`` float32 embeddings of a ``side x side`` patch grid, row-major like the patch
    tokens; computed in float64 and rounded once.

    Example:
        >>> sincos_2d(3, 8).shape
        torch.Size([9, 8])
    """
    positive_int(side, "side")
    positive_int(dim, "dim")
    if dim % 4:
        raise ValueError(f"dim must be divisible by 4 for 2-D sine-cosine embeddings, got {dim}")
    quarter = dim // 4
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / quarter)
    pos = torch.arange(side, dtype=torch.float64)
    angles = pos[:, None] * omega[None]  # (side, dim / 4)
    one = torch.cat([torch.sin(angles), torch.cos(angles)], 1)  # (side, dim / 2)
    rows = one[:, None, :].expand(side, side, dim // 2)
    cols = one[None, :, :].expand(side, side, dim // 2)
    return torch.cat([rows, cols], 2).reshape(side * side, dim).float()
