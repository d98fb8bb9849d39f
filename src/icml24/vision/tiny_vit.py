"""A tiny Vision Transformer with a pluggable attention module, for CPU-scale reproductions.

Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021 (https://arxiv.org/abs/2010.11929): an image is
cut into patches, each patch is linearly embedded, learned positional embeddings are added, and a stack of
pre-norm transformer blocks ``x + Attn(LN(x))``, ``x + MLP(LN(x))`` is followed by mean pooling (no CLS token,
as in the ViT of KEP-SVGP's CIFAR code) and a linear head.

Every attention module takes ``(B, N, C)`` and returns ``(B, N, C)``; ``attention_factory(layer_index)``
chooses the module of each block, so a paper's attention (e.g. KEP-SVGP) replaces softmax attention in any
subset of the blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["SoftmaxAttention", "TinyViT", "TransformerBlock"]


class SoftmaxAttention(nn.Module):
    """Standard multi-head scaled dot-product attention ``softmax(QKᵀ/√d_h) V`` (Vaswani et al., 2017)."""

    def __init__(self, *, dim: int, num_heads: int, attn_drop: float = 0.0, proj_drop: float = 0.0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        attn = self.attn_drop(attn.softmax(-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(out))


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + attn(LN(x))`` then ``x + MLP(LN(x))``."""

    def __init__(self, *, dim: int, mlp_dim: int, attention: nn.Module, dropout: float = 0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = attention
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(mlp_dim, dim), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """A small ViT classifier for ``(B, in_channels, image_size, image_size)`` images.

    Args:
        image_size: side of the square input image.
        patch_size: side of a square patch (must divide ``image_size``); tokens ``N = (image_size/patch_size)²``.
        in_channels: input channels.
        num_classes: output classes.
        dim: token width ``C``.
        depth: number of blocks.
        num_heads: attention heads (used by the default softmax attention).
        mlp_dim: hidden width of the MLP.
        dropout: dropout in the embedding, MLPs and default attention output.
        attention_factory: ``layer_index -> nn.Module`` mapping ``(B, N, C) -> (B, N, C)``; ``None`` uses
            :class:`SoftmaxAttention` everywhere.
    """

    def __init__(
        self,
        *,
        image_size: int = 8,
        patch_size: int = 2,
        in_channels: int = 1,
        num_classes: int = 10,
        dim: int = 32,
        depth: int = 2,
        num_heads: int = 4,
        mlp_dim: int = 64,
        dropout: float = 0.1,
        attention_factory: Callable[[int], nn.Module] | None = None,
    ):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"patch_size ({patch_size}) must divide image_size ({image_size})")
        if depth < 1 or dim < 1 or num_classes < 1:
            raise ValueError(f"depth, dim and num_classes must be >= 1, got {depth}, {dim}, {num_classes}")
        self.image_size = image_size
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.num_tokens = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_tokens, dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.drop = nn.Dropout(dropout)

        def default(_: int) -> nn.Module:
            return SoftmaxAttention(dim=dim, num_heads=num_heads, proj_drop=dropout)

        factory = attention_factory or default
        self.blocks = nn.ModuleList(
            TransformerBlock(dim=dim, mlp_dim=mlp_dim, attention=factory(i), dropout=dropout) for i in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """Patch tokens with positional embeddings, ``(B, N, C)``."""
        expected = (self.in_channels, self.image_size, self.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"images must have shape (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        return self.drop(self.patch_embed(images).flatten(2).transpose(1, 2) + self.pos_embed)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.tokens(images)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(1))
