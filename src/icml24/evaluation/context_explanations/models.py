"""The two vision models of the demonstration: a small CNN and the shared tiny ViT, and their training.

Tomaszewska & Biecek, ICML 2024 (https://arxiv.org/abs/2404.18316), Sec. 3 (architectures that capture
context: CNN receptive fields vs ViT global attention). Capturing the relation in the model does not make
the explanation convey it; both models here solve the relation task, and their explanations are compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml24.vision.positions import sincos_2d
from icml24.vision.tiny_vit import TinyViT


class SmallCNN(nn.Module):
    """Three 3x3 conv layers (two 2x2 max-pools between them) and global average pooling (notes, Sec. 6).

    The last conv layer (:attr:`last_conv`, an 8x8 map for 32x32 inputs) is the Grad-CAM layer. With global
    average pooling and zero padding the features are (almost) translation-equivariant, so the model can only
    tell the classes apart by a local arrangement of A and B, not by an object's absolute column.

    Args:
        in_channels: image channels.
        num_classes: output classes.
        width: channels of the first conv layer (the next two have ``2 * width``).
    """

    def __init__(self, *, in_channels: int = 3, num_classes: int = 2, width: int = 16):
        super().__init__()
        for name, v in (("in_channels", in_channels), ("num_classes", num_classes), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {num_classes}")
        self.in_channels = in_channels
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Linear(2 * width, num_classes)

    @property
    def last_conv(self) -> nn.Module:
        """The layer Grad-CAM explains (the last conv layer, before its ReLU)."""
        return self.features[6]

    @property
    def gradcam_layer(self) -> nn.Module:
        """Alias of :attr:`last_conv`, the common name both models expose."""
        return self.last_conv

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.dim() != 4 or images.shape[1] != self.in_channels:
            raise ValueError(f"images must have shape (B, {self.in_channels}, H, W), got {tuple(images.shape)}")
        return self.head(self.features(images).mean((2, 3)))


class TokenGrid(nn.Module):
    """``(B, N, C)`` patch tokens as a ``(B, C, h, w)`` map: the layer Grad-CAM reads for a ViT (the common
    ViT Grad-CAM: the last block's token outputs on the patch grid)."""

    def __init__(self, *, side: int):
        super().__init__()
        if isinstance(side, bool) or not isinstance(side, int) or side < 1:
            raise ValueError(f"side must be a positive int, got {side!r}")
        self.side = side

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, n, c = tokens.shape
        return tokens.transpose(1, 2).reshape(b, c, self.side, self.side)


class GridViT(nn.Module):
    """The shared :class:`~icml24.vision.tiny_vit.TinyViT` with its last block's tokens routed through a
    :class:`TokenGrid` (:attr:`gradcam_layer`), so Captum's ``LayerGradCam`` sees a spatial map.

    The forward pass is exactly TinyViT's (tokens, blocks, LayerNorm, mean pooling, head). With
    ``sincos_positions`` the learned position embeddings start from fixed 2-D sine-cosine ones (and are then
    trained): from TinyViT's near-zero initialisation the relation of neighbouring patches takes ~1000 steps
    of a plateau to appear, too slow for a CPU run.

    Args:
        image_size: input side; patch_size: patch side (4 in the notes: an 8x8 token grid for 32x32);
        in_channels, num_classes, dim, depth, num_heads, mlp_dim, dropout: as :class:`TinyViT`.
    """

    def __init__(
        self,
        *,
        image_size: int = 32,
        patch_size: int = 4,
        in_channels: int = 3,
        num_classes: int = 2,
        dim: int = 64,
        depth: int = 3,
        num_heads: int = 4,
        mlp_dim: int = 128,
        dropout: float = 0.0,
        sincos_positions: bool = True,
    ):
        super().__init__()
        if not isinstance(sincos_positions, bool):
            raise TypeError(f"sincos_positions must be True or False, got {sincos_positions!r}")
        for name, v in (("image_size", image_size), ("patch_size", patch_size), ("in_channels", in_channels),
                        ("num_classes", num_classes), ("dim", dim), ("depth", depth), ("num_heads", num_heads),
                        ("mlp_dim", mlp_dim)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if image_size % patch_size:
            raise ValueError(f"patch_size ({patch_size}) must divide image_size ({image_size})")
        if dim % num_heads:
            raise ValueError(f"num_heads ({num_heads}) must divide dim ({dim})")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
        self.vit = TinyViT(image_size=image_size, patch_size=patch_size, in_channels=in_channels,
                           num_classes=num_classes, dim=dim, depth=depth, num_heads=num_heads, mlp_dim=mlp_dim,
                           dropout=dropout)  # fmt: skip
        self.token_grid = TokenGrid(side=image_size // patch_size)
        if sincos_positions:
            with torch.no_grad():
                self.vit.pos_embed.copy_(sincos_2d(image_size // patch_size, dim)[None])

    @property
    def gradcam_layer(self) -> nn.Module:
        return self.token_grid

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.vit.tokens(images)
        for block in self.vit.blocks:
            x = block(x)
        x = self.token_grid(x).flatten(2).transpose(1, 2)
        return self.vit.head(self.vit.norm(x).mean(1))


MODELS = ("cnn", "vit")


def build_model(name: str, *, seed: int = 0, **kwargs) -> nn.Module:
    """``"cnn"`` (:class:`SmallCNN`) or ``"vit"`` (:class:`GridViT`), initialised from ``seed``."""
    if name not in MODELS:
        raise ValueError(f"name must be one of {MODELS}, got {name!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    torch.manual_seed(seed)
    return SmallCNN(**kwargs) if name == "cnn" else GridViT(**kwargs)


@dataclass(frozen=True)
class TrainConfig:
    """Adam on cross-entropy, cosine-decayed learning rate."""

    epochs: int = 12
    """Passes over the training scenes."""
    batch_size: int = 128
    """Scenes per step."""
    lr: float = 3e-3
    """Peak learning rate (cosine decay to 0)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup: float = 0.0
    """Fraction of the steps with a linear learning-rate warm-up (a ViT needs one; the CNN does not)."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name, lo, hi in (("lr", 0.0, math.inf), ("weight_decay", 0.0, math.inf), ("warmup", 0.0, 1.0)):
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi
            if not ok or (name == "lr" and v == 0):
                raise ValueError(f"{name} must be a finite number in [{lo}, {hi}]{' above 0' if name == 'lr' else ''}, got {v!r}")


def train_classifier(
    model: nn.Module, images: np.ndarray, labels: np.ndarray, config: TrainConfig | None = None, *, seed: int = 0
) -> list[float]:
    """Fit ``model`` to ``(images, labels)`` in place; returns the mean training loss of each epoch.

    Args:
        model: a classifier ``(B, C, H, W) -> (B, K)`` logits.
        images: ``(n, C, H, W)`` float array.
        labels: ``(n,)`` int array of classes.
        config: the optimiser settings (default :class:`TrainConfig`).
        seed: seeds the batch order.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    x = _images(images)
    y_np = np.asarray(labels)
    if y_np.shape != (x.shape[0],) or not np.issubdtype(y_np.dtype, np.integer):
        raise ValueError(f"labels must be an int array of shape ({x.shape[0]},), got {y_np.dtype} {y_np.shape}")
    if (y_np < 0).any():
        raise ValueError(f"labels must be non-negative class indices, got {int(y_np.min())}")
    # The output width, from one eval-mode forward pass (no batch-norm update, no random numbers drawn).
    model.eval()
    with torch.no_grad():
        n_out = int(model(x[:1]).shape[-1])
    if int(y_np.max()) >= n_out:
        raise ValueError(f"labels must be class indices below {n_out} (the model's outputs), got {int(y_np.max())}")
    y = torch.as_tensor(y_np, dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps = config.epochs * math.ceil(len(x) / config.batch_size)
    warm = max(1, int(config.warmup * steps))

    def schedule(t: int) -> float:
        if config.warmup > 0 and t < warm:
            return (t + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(t, steps) / steps))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    gen = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    history = []
    model.train()
    for _ in range(config.epochs):
        order = torch.randperm(len(x), generator=gen)
        total = 0.0
        for i in range(0, len(x), config.batch_size):
            idx = order[i : i + config.batch_size]
            loss = loss_fn(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        history.append(total / len(x))
    model.eval()
    return history


def _images(images: object) -> torch.Tensor:
    try:
        arr = np.asarray(images, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"images must be an (n, C, H, W) float array, got {type(images).__name__}") from exc
    if arr.ndim != 4 or arr.shape[0] == 0:
        raise ValueError(f"images must be a non-empty (n, C, H, W) array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("images must be finite")
    return torch.as_tensor(arr)


@torch.no_grad()
def predict_logits(model: nn.Module, images: np.ndarray, *, batch_size: int = 512) -> np.ndarray:
    """``(n, K)`` logits of ``model`` (in eval mode) on ``images``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    model.eval()
    x = _images(images)
    return torch.cat([model(x[i : i + batch_size]) for i in range(0, len(x), batch_size)]).numpy()
