"""Training and evaluation loops shared by the experiments (AdamW, warm-up + cosine, as the official code).

Classification uses cross-entropy; regression the L1 loss of the official PCQM4Mv2 script. Weight decay
is applied to parameters with two or more dimensions only (the official ``configure_optimizers``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch_geometric.loader import DataLoader

TASKS = ("classify", "regress")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of one training run."""

    epochs: int = 50
    """Passes over the training graphs."""
    batch_size: int = 16
    """Graphs per step."""
    lr: float = 1e-3
    """Peak AdamW learning rate (ZINC config of the Edge Transformer: 1e-3)."""
    weight_decay: float = 1e-5
    """AdamW weight decay on matrices and embeddings."""
    warmup_fraction: float = 0.05
    """Fraction of steps of linear warm-up before the cosine decay to 0."""
    grad_clip: float = 1.0
    """Gradient-norm clip (ZINC config: 1.0)."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("lr", "grad_clip"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not (isinstance(self.weight_decay, (int, float)) and math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if not (isinstance(self.warmup_fraction, (int, float)) and 0 <= self.warmup_fraction < 1):
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")


def _check_model(model: nn.Module) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def _check_graphs(graphs: Sequence) -> None:
    from icml24.graphs.wl_transformers.tokens import TokenizedGraph

    if isinstance(graphs, (str, bytes)) or not hasattr(graphs, "__len__") or len(graphs) == 0:
        raise ValueError("graphs must be a non-empty sequence of TokenizedGraph (from tokenize)")
    if not all(isinstance(g, TokenizedGraph) for g in graphs):
        raise TypeError("graphs must hold TokenizedGraph objects (from tokenize)")


def _optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=cfg.lr)  # fmt: skip


def _lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    warm = max(1, int(cfg.warmup_fraction * total))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    return 0.5 * cfg.lr * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total - warm))))


def _loss(out: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    if task == "classify":
        return nn.functional.cross_entropy(out, y.view(-1).long())
    return nn.functional.l1_loss(out, y.view(out.shape))


def fit(model: nn.Module, graphs: Sequence, *, task: str, config: TrainConfig = TrainConfig(), seed: int = 0,
        target_scale: float = 1.0) -> list[float]:  # fmt: skip
    """Train ``model`` in place on tokenized graphs with ``y``; returns the mean loss per epoch.

    ``target_scale`` divides regression targets (so that the L1 loss is on a unit scale).
    """
    _check_model(model)
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    _check_graphs(graphs)
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    scale = torch.as_tensor(target_scale, dtype=torch.float32)
    if not (torch.isfinite(scale).all() and (scale > 0).all()):
        raise ValueError(f"target_scale must be positive and finite, got {target_scale!r}")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(list(graphs), batch_size=config.batch_size, shuffle=True, generator=gen)
    opt = _optimizer(model, config)
    total = config.epochs * len(loader)
    step, history = 0, []
    model.train()
    for _ in range(config.epochs):
        losses = []
        for batch in loader:
            for group in opt.param_groups:
                group["lr"] = _lr_at(step, total, config)
            y = batch.y if task == "classify" else batch.y / scale
            loss = _loss(model(batch), y, task)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            losses.append(float(loss.detach()))
            step += 1
        history.append(float(np.mean(losses)))
    return history


@torch.no_grad()
def predict(model: nn.Module, graphs: Sequence, *, batch_size: int = 32) -> np.ndarray:
    """Model outputs (eval mode) for tokenized graphs, one row per graph."""
    _check_model(model)
    _check_graphs(graphs)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    model.eval()
    outs = [model(b).double().numpy() for b in DataLoader(list(graphs), batch_size=batch_size)]
    return np.concatenate(outs) if outs else np.zeros((0, 0))
