"""The model under test: a small CNN trained in-run on scikit-learn's bundled digits.

Sagar et al. (ICML 2024, https://arxiv.org/abs/2406.07145) probe pre-trained ImageNet classifiers
(AlexNet, ResNet, EfficientNet); with no downloads allowed, our model under test is a two-convolution
CNN trained in seconds on the 1,797 bundled 8x8 digits, upsampled to 16x16 so that rotations and blurs
have room to act.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from icml24.evaluation.failure_landscape.concepts import _as_tensor

__all__ = ["DigitsCNN", "TrainConfig", "load_digit_images", "predict_proba", "train_classifier"]


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_real(name: str, value: object, *, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        raise ValueError(f"{name} must lie in {'(' if lo_open else '['}{lo}, {hi}], got {value!r}")
    return v


def load_digit_images(size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits as ``(1797, 1, size, size)`` float32 intensities in ``[0, 1]`` (bilinear
    upsampling of the 8x8 originals) and int64 labels."""
    from sklearn.datasets import load_digits

    size = _check_int("size", size, 8)
    X, y = load_digits(return_X_y=True)
    x = torch.as_tensor(X.reshape(-1, 1, 8, 8) / 16.0, dtype=torch.float32)
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return x.clamp(0.0, 1.0).numpy(), y.astype(np.int64)


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions (each ReLU + 2x2 max-pool) and a one-hidden-layer head.

    Args:
        size: input height = width (divisible by 4).
        channels: output channels of the two convolutions.
        hidden: width of the hidden fully connected layer.
        n_classes: number of classes.
    """

    def __init__(self, *, size: int = 16, channels: tuple[int, int] = (16, 32), hidden: int = 64, n_classes: int = 10):
        super().__init__()
        size = _check_int("size", size, 4)
        if size % 4:
            raise ValueError(f"size must be divisible by 4 (two 2x2 pools), got {size}")
        if not (isinstance(channels, (tuple, list)) and len(channels) == 2):
            raise TypeError(f"channels must be a pair of ints, got {channels!r}")
        c1, c2 = (_check_int("channels", c, 1) for c in channels)
        hidden = _check_int("hidden", hidden, 1)
        n_classes = _check_int("n_classes", n_classes, 2)
        self.size = size
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c2 * (size // 4) ** 2, hidden), nn.ReLU(),
                                  nn.Linear(hidden, n_classes))  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, n_classes)`` of images ``(n, 1, size, size)``."""
        if x.ndim != 4 or tuple(x.shape[1:]) != (1, self.size, self.size):
            raise ValueError(f"x must have shape (n, 1, {self.size}, {self.size}), got {tuple(x.shape)}")
        return self.head(self.features(x))


@dataclass(frozen=True)
class TrainConfig:
    """Supervised training of the model under test (Adam on the cross-entropy)."""

    epochs: int = 15
    """Passes over the training set."""
    batch_size: int = 64
    """Minibatch size."""
    lr: float = 2e-3
    """Adam learning rate."""
    weight_decay: float = 0.0
    """Weight decay."""
    optimizer: str = "adam"
    """``"adam"`` or ``"sgd"`` (with ``momentum``; the official fine-tuning uses SGD, momentum 0.9)."""
    momentum: float = 0.9
    """SGD momentum (unused by Adam)."""

    def __post_init__(self) -> None:
        _check_int("epochs", self.epochs, 1)
        _check_int("batch_size", self.batch_size, 1)
        _check_real("lr", self.lr, lo=0.0, hi=10.0, lo_open=True)
        _check_real("weight_decay", self.weight_decay, lo=0.0, hi=10.0)
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        _check_real("momentum", self.momentum, lo=0.0, hi=1.0)


def _as_xy(images: np.ndarray | torch.Tensor, labels: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = _as_tensor("images", images)
    if not torch.is_floating_point(x):
        raise TypeError(f"images must be floating point, got dtype {x.dtype}")
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"images must have shape (n, 1, H, W), got {tuple(x.shape)}")
    y = _as_tensor("labels", labels)
    if y.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"labels must be integer class ids, got dtype {y.dtype}")
    if y.shape != (x.shape[0],):
        raise ValueError(f"labels must have shape ({x.shape[0]},), got {tuple(y.shape)}")
    if x.shape[0] == 0:
        raise ValueError("images must hold at least one image")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("images must be finite")
    return x.float(), y.long()


def train_classifier(
    model: nn.Module,
    images: np.ndarray | torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    *,
    config: TrainConfig = TrainConfig(),  # noqa: B008 - frozen dataclass
    seed: int = 0,
    augment=None,
) -> nn.Module:
    """Train ``model`` in place by minibatch Adam (or SGD) on the cross-entropy and return it (in eval mode).

    ``augment(x, generator) -> x'``, when given, transforms every minibatch (the restructuring step's
    concept augmentation, :func:`icml24.evaluation.failure_landscape.restructure.concept_augmenter`).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    seed = _check_int("seed", seed, 0)
    if augment is not None and not callable(augment):
        raise TypeError(f"augment must be callable or None, got {type(augment).__name__}")
    x, y = _as_xy(images, labels)
    gen = torch.Generator().manual_seed(seed)
    if config.optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum,
                              weight_decay=config.weight_decay)  # fmt: skip
    model.train()
    n = x.shape[0]
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            xb = x[idx] if augment is None else augment(x[idx], gen)
            loss = F.cross_entropy(model(xb), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


@torch.no_grad()
def predict_proba(model: nn.Module, images: np.ndarray | torch.Tensor, *, batch_size: int = 8192) -> np.ndarray:
    """Softmax probabilities ``(n, n_classes)``, evaluated in batches of ``batch_size`` in eval mode."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    batch_size = _check_int("batch_size", batch_size, 1)
    x = _as_tensor("images", images)
    if not torch.is_floating_point(x):
        raise TypeError(f"images must be floating point, got dtype {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("images must be finite")
    was_training = model.training
    model.eval()
    out = [torch.softmax(model(x[i : i + batch_size].float()), dim=1) for i in range(0, x.shape[0], batch_size)]
    model.train(was_training)
    return torch.cat(out).double().numpy() if out else np.zeros((0, 0))
