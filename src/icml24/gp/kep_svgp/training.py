"""Training and prediction with KEP-SVGP attention inside a transformer (Chen et al., ICML 2024, Sec. 4.3).

The loss of the official code (``CIFAR/train.py``): ``CE + η_ksvd Σ_layers J + η_kl Σ_layers KL``, with the KL
not divided by the dataset size (``η_kl`` absorbs the scale). Prediction averages the softmax of ``S``
stochastic forward passes (posterior samples of the SVGP outputs; for MC dropout, dropout masks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from icml24.gp.kep_svgp.attention import KEPSVGPAttention
from icml24.gp.linalg import check_bool, check_int, check_scalar

__all__ = ["KEPSVGPConfig", "TrainConfig", "kep_layers", "kep_svgp_loss", "predict_proba", "train_classifier"]


@dataclass(frozen=True)
class KEPSVGPConfig:
    """Hyperparameters of KEP-SVGP attention and its loss (official CIFAR-10 defaults unless noted)."""

    rank: int = 10
    """Number of KSVD eigen-pairs ``s`` (``--low-rank``)."""
    rank_multi: int = 10
    """``N' = min(N, s·r)`` landmark tokens (``--rank-multi``)."""
    concat: bool = False
    """Concatenation variant instead of the sum variant."""
    eta_ksvd: float = 1.0
    """Weight of the KSVD regulariser (1 for the sum variant, 10 for concat in the scripts)."""
    eta_kl: float = 1.0
    """Weight of the KL term."""
    n_samples: int = 10
    """Stochastic forward passes averaged at prediction (the official test uses 1; averaging is our choice)."""

    def __post_init__(self) -> None:
        for name in ("rank", "rank_multi", "n_samples"):
            check_int(name, getattr(self, name))
        check_bool("concat", self.concat)
        for name in ("eta_ksvd", "eta_kl"):
            check_scalar(name, getattr(self, name), low=0.0, strict=False, allow_tensor=False)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation (official: Adam 1e-3, weight decay 5e-5, 5-epoch warm-up then cosine to 1e-5, batch 128)."""

    epochs: int = 30
    """Training epochs."""
    batch_size: int = 64
    """Mini-batch size."""
    lr: float = 1e-3
    """Peak Adam learning rate."""
    weight_decay: float = 5e-5
    """Adam weight decay."""
    warmup_epochs: int = 2
    """Linear warm-up epochs before the cosine decay."""
    min_lr: float = 1e-5
    """Final learning rate of the cosine schedule."""

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs)
        check_int("batch_size", self.batch_size)
        check_int("warmup_epochs", self.warmup_epochs, minimum=0)
        check_scalar("lr", self.lr, low=0.0, allow_tensor=False)
        check_scalar("weight_decay", self.weight_decay, low=0.0, strict=False, allow_tensor=False)
        check_scalar("min_lr", self.min_lr, low=0.0, strict=False, allow_tensor=False)


def kep_layers(model: nn.Module) -> list[KEPSVGPAttention]:
    """All KEP-SVGP attention layers inside ``model``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [m for m in model.modules() if isinstance(m, KEPSVGPAttention)]


def kep_svgp_loss(
    logits: torch.Tensor, targets: torch.Tensor, layers: Iterable[KEPSVGPAttention], *, eta_ksvd: float, eta_kl: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """``CE + η_ksvd Σ J + η_kl Σ KL`` (official ``compute_loss``); also returns the parts as floats."""
    _check_logits_targets(logits, targets)
    check_scalar("eta_ksvd", eta_ksvd, low=0.0, strict=False, allow_tensor=False)
    check_scalar("eta_kl", eta_kl, low=0.0, strict=False, allow_tensor=False)
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
        raise TypeError(f"layers must be an iterable of KEPSVGPAttention, got {type(layers).__name__}")
    layers = list(layers)
    if not all(isinstance(layer, KEPSVGPAttention) for layer in layers):
        raise TypeError("layers must hold only KEPSVGPAttention modules (see kep_layers(model))")
    ce = F.cross_entropy(logits, targets)
    ksvd = logits.new_zeros(())
    kl = logits.new_zeros(())
    for layer in layers:
        ksvd = ksvd + layer.ksvd_loss()
        kl = kl + layer.kl_divergence()
    total = ce + eta_ksvd * ksvd + eta_kl * kl
    return total, {"ce": float(ce.detach()), "ksvd": float(ksvd.detach()), "kl": float(kl.detach())}


def _check_logits_targets(logits: torch.Tensor, targets: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point torch.Tensor, got {type(logits).__name__}")
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D (batch, classes), got shape {tuple(logits.shape)}")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("logits must be finite (they hold NaN or inf)")
    if isinstance(targets, torch.Tensor) and targets.dim() == 1 and targets.shape[0] != logits.shape[0]:
        raise ValueError(f"logits and targets must have one row per example, got {logits.shape[0]} and {targets.shape[0]}")
    _check_labels("targets", targets, logits.shape[0], logits.shape[1])


def _check_labels(name: str, labels: torch.Tensor, n: int, n_classes: int | None) -> None:
    if not isinstance(labels, torch.Tensor) or labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"{name} must be an integer torch.Tensor of class indices, got "
                        f"{type(labels).__name__}{'' if not isinstance(labels, torch.Tensor) else ' ' + str(labels.dtype)}")  # fmt: skip
    if labels.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {tuple(labels.shape)}")
    if n and (int(labels.min()) < 0 or (n_classes is not None and int(labels.max()) >= n_classes)):
        raise ValueError(f"{name} must be class indices in [0, {n_classes - 1 if n_classes else 'K-1'}]")


def _check_inputs(model: object, x: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {type(x).__name__}")
    if x.dim() < 2:
        raise ValueError(f"x must have a batch dimension, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite (it holds NaN or inf)")


def _forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    try:
        return model(x)
    except ValueError as exc:  # e.g. a shape the model does not take: say which argument
        raise ValueError(f"x does not fit the model: {exc}") from exc


def _lr_at(epoch: int, cfg: TrainConfig) -> float:
    if epoch < cfg.warmup_epochs:
        return cfg.lr * (epoch + 1) / cfg.warmup_epochs
    span = max(1, cfg.epochs - cfg.warmup_epochs)
    t = (epoch - cfg.warmup_epochs) / span
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * t))


def train_classifier(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    config: TrainConfig,
    generator: torch.Generator,
    kep: KEPSVGPConfig | None = None,
) -> list[float]:
    """Train ``model`` on ``(x, y)`` with Adam; KEP-SVGP terms are added when ``model`` has KEP layers.

    Returns the mean training loss of each epoch.
    """
    _check_inputs(model, x)
    if isinstance(y, torch.Tensor) and y.dim() >= 1 and y.shape[0] != x.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    _check_labels("y", y, int(x.shape[0]), None)
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if kep is not None and not isinstance(kep, KEPSVGPConfig):
        raise TypeError(f"kep must be a KEPSVGPConfig or None, got {type(kep).__name__}")
    layers = kep_layers(model)
    kep = kep or KEPSVGPConfig()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    history = []
    n = x.shape[0]
    for epoch in range(config.epochs):
        for group in opt.param_groups:
            group["lr"] = _lr_at(epoch, config)
        model.train()
        perm = torch.randperm(n, generator=generator)
        total = 0.0
        for start in range(0, n, config.batch_size):
            idx = perm[start : start + config.batch_size]
            logits = _forward(model, x[idx])
            if epoch == 0 and start == 0 and int(y.max()) >= logits.shape[-1]:
                raise ValueError(f"y must be class indices in [0, {logits.shape[-1] - 1}], got {int(y.max())}")
            if layers:
                loss, _ = kep_svgp_loss(logits, y[idx], layers, eta_ksvd=kep.eta_ksvd, eta_kl=kep.eta_kl)
            else:
                loss = F.cross_entropy(logits, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        history.append(total / n)
    return history


@torch.no_grad()
def predict_proba(
    model: nn.Module, x: torch.Tensor, *, n_samples: int = 1, mc_dropout: bool = False, batch_size: int = 512
) -> np.ndarray:
    """Mean of the softmax over ``n_samples`` forward passes, ``(n, K)``.

    In eval mode KEP-SVGP layers still sample (their ``sample`` flag), dropout is off unless ``mc_dropout``.
    """
    _check_inputs(model, x)
    check_int("n_samples", n_samples)
    check_bool("mc_dropout", mc_dropout)
    check_int("batch_size", batch_size)
    model.eval()
    if mc_dropout:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.train()
    out = []
    for start in range(0, x.shape[0], batch_size):
        xb = x[start : start + batch_size]
        probs = torch.stack([F.softmax(_forward(model, xb), -1) for _ in range(n_samples)]).mean(0)
        out.append(probs)
    model.eval()
    return torch.cat(out).double().numpy()
