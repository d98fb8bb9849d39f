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


def kep_layers(model: nn.Module) -> list[KEPSVGPAttention]:
    """All KEP-SVGP attention layers inside ``model``."""
    return [m for m in model.modules() if isinstance(m, KEPSVGPAttention)]


def kep_svgp_loss(
    logits: torch.Tensor, targets: torch.Tensor, layers: Iterable[KEPSVGPAttention], *, eta_ksvd: float, eta_kl: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """``CE + η_ksvd Σ J + η_kl Σ KL`` (official ``compute_loss``); also returns the parts as floats."""
    ce = F.cross_entropy(logits, targets)
    ksvd = logits.new_zeros(())
    kl = logits.new_zeros(())
    for layer in layers:
        ksvd = ksvd + layer.ksvd_loss()
        kl = kl + layer.kl_divergence()
    total = ce + eta_ksvd * ksvd + eta_kl * kl
    return total, {"ce": float(ce.detach()), "ksvd": float(ksvd.detach()), "kl": float(kl.detach())}


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
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
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
            logits = model(x[idx])
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
    model.eval()
    if mc_dropout:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.train()
    out = []
    for start in range(0, x.shape[0], batch_size):
        xb = x[start : start + batch_size]
        probs = torch.stack([F.softmax(model(xb), -1) for _ in range(n_samples)]).mean(0)
        out.append(probs)
    model.eval()
    return torch.cat(out).double().numpy()
