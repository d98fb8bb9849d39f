"""A tiny U-Net saliency network, the miniature stand-in for PoolNet/EDN/ICON/GateNet backbones used
by Li et al. (ICML 2024, https://arxiv.org/abs/2405.09782): an encoder-decoder with skip connections that
outputs one saliency logit per pixel."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_float, check_int

__all__ = ["TinyUNet"]


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )  # fmt: skip


class TinyUNet(nn.Module):
    """U-Net with ``depth`` scales and ``width * 2**s`` channels at scale ``s``; returns ``(B, 1, H, W)``
    logits. ``H`` and ``W`` must be divisible by ``2**(depth-1)``.

    Args:
        in_channels: input channels (3 for RGB).
        width: channels at full resolution.
        depth: number of scales.
        head_bias: initial bias of the output logit (-2 ~ a 12% salient-pixel prior).
    """

    def __init__(self, *, in_channels: int = 3, width: int = 8, depth: int = 3, head_bias: float = -2.0) -> None:
        super().__init__()
        check_int("in_channels", in_channels, 1)
        check_int("width", width, 1)
        check_int("depth", depth, 1)
        check_float("head_bias", head_bias)
        self.in_channels = in_channels
        ch = [width * 2**s for s in range(depth)]
        self.down = nn.ModuleList([_block(in_channels if s == 0 else ch[s - 1], ch[s]) for s in range(depth)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(ch[s + 1], ch[s], 2, stride=2) for s in range(depth - 1)])
        self.dec = nn.ModuleList([_block(2 * ch[s], ch[s]) for s in range(depth - 1)])
        self.head = nn.Conv2d(ch[0], 1, 1)
        # Start from the background prior (most pixels are not salient), as detection heads usually do;
        # from logit 0 the network spends its first epochs only pulling the background down.
        nn.init.constant_(self.head.bias, head_bias)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor (B, C, H, W), got {type(x).__name__}")
        div = 2 ** (len(self.down) - 1)
        if x.ndim != 4 or x.shape[1] != self.in_channels or x.shape[2] % div or x.shape[3] % div:
            raise ValueError(f"x must be (B, {self.in_channels}, H, W) with H and W divisible by {div}, got {tuple(x.shape)}")
        skips = []
        for s, blk in enumerate(self.down):
            x = blk(x if s == 0 else self.pool(x))
            skips.append(x)
        for s in reversed(range(len(self.up))):
            x = self.dec[s](torch.cat([self.up[s](x), skips[s]], 1))
        return self.head(x)
