"""Model level of COALA: the client model and which of its entries are batch-norm state.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Section 3 (model level; ``register_model``). The miniature uses a
LeNet-style CNN with batch norm for 8x8 images (two 3x3 conv + BN + ReLU + 2x2 max-pool blocks, two linear
layers, about 14k parameters); the model-level customisation is any other ``torch.nn.Module`` factory
handed to the task (see :class:`~icml24.federated.coala.task.ClassificationTask`).

:func:`bn_state_keys` names every ``state_dict`` entry that belongs to a batch-norm module (weight, bias,
running mean, running variance, batches tracked): FedBN (Li et al., ICLR 2021) keeps exactly these local.
"""

from __future__ import annotations

import torch
from torch import nn

from icml24.federated.coala._checks import int_at_least

__all__ = ["LeNetTiny", "bn_state_keys"]


class LeNetTiny(nn.Module):
    """A small CNN for ``(n, in_channels, image_size, image_size)`` images.

    Args:
        in_channels: image channels (1 for digits).
        num_classes: outputs (logits).
        width: channels of the first conv block (the second has ``2 * width``).
        image_size: side of the (square) input; must be divisible by 4.
    """

    def __init__(self, *, in_channels: int = 1, num_classes: int = 10, width: int = 16, image_size: int = 8) -> None:
        super().__init__()
        in_channels = int_at_least(in_channels, "in_channels", 1)
        num_classes = int_at_least(num_classes, "num_classes", 2)
        width = int_at_least(width, "width", 1)
        image_size = int_at_least(image_size, "image_size", 4)
        if image_size % 4:
            raise ValueError(f"image_size must be divisible by 4 (two 2x2 pools), got {image_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        flat = 2 * width * (image_size // 4) ** 2
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(flat, 64), nn.ReLU(), nn.Linear(64, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def bn_state_keys(model: nn.Module) -> frozenset[str]:
    """Every ``state_dict`` key owned by a batch-norm module of ``model`` (parameters and buffers)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    keys: set[str] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            prefix = f"{name}." if name else ""
            keys.update(prefix + k for k in module.state_dict())
    return frozenset(keys)
