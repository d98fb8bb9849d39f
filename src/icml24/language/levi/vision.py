"""The vision arm of LEVI's miniature reproduction: a small CNN "pre-trained" in-run on digits 0-4.

The paper's vision experiments fine-tune ViTs pre-trained on ImageNet (Section 5); here the pre-trained
model is a two-block CNN trained on digits 0-4 of scikit-learn's bundled 8x8 digits (with its own
corner-pixel artefact), frozen, and the fine-tuning task is digits 5-9 in another subdomain
(contrast-inverted, see :func:`icml24.language.levi.data.make_digit_task`). Its views for LEVI are the
globally average-pooled outputs of each block and its penultimate layer.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["DigitCNN", "interpolate_weights"]


class DigitCNN(nn.Module):
    """``conv(1->c1) -> ReLU -> conv(c1->c2, stride 2) -> ReLU -> flatten -> Linear(hidden) -> ReLU -> Linear``.

    :meth:`layer_features` returns the three views: the global average of each block's feature maps and
    the hidden layer.
    """

    def __init__(self, *, n_classes: int = 5, channels: tuple[int, int] = (16, 32), hidden: int = 64, side: int = 10):
        super().__init__()
        for name, v in (("n_classes", n_classes), ("hidden", hidden), ("side", side)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if len(channels) != 2 or not all(isinstance(c, int) and c >= 1 for c in channels):
            raise ValueError(f"channels must be two positive ints, got {channels!r}")
        c1, c2 = channels
        self.block1 = nn.Sequential(nn.Conv2d(1, c1, 3, padding=1), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(c1, c2, 3, stride=2, padding=1), nn.ReLU())
        side2 = (side + 1) // 2
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(c2 * side2 * side2, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, n_classes)
        self.view_dims = [c1, c2, hidden]

    def layer_features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``[mean over space of block 1, mean over space of block 2, hidden layer]``."""
        h1 = self.block1(x)
        h2 = self.block2(h1)
        return [h1.mean((2, 3)), h2.mean((2, 3)), self.fc(h2)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.fc(self.block2(self.block1(x))))


def interpolate_weights(start: nn.Module, finetuned: nn.Module, alpha: float) -> nn.Module:
    """WiSE-FT (Wortsman et al., CVPR 2022): a copy of ``finetuned`` with ``(1 - alpha) theta_0 + alpha theta_ft``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be a number in [0, 1], got {alpha!r}")
    s, f = start.state_dict(), finetuned.state_dict()
    if s.keys() != f.keys() or any(s[k].shape != f[k].shape for k in s):
        raise ValueError("start and finetuned must have the same parameters")
    out = copy.deepcopy(finetuned)
    out.load_state_dict({k: (1 - alpha) * s[k] + alpha * f[k] if f[k].is_floating_point() else f[k] for k in f})
    return out
