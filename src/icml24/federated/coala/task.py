"""Task level of COALA: what a client trains and how it is evaluated.

"COALA: A Practical and Vision-Centric Federated Learning Platform" (Zhuang et al., ICML 2024,
https://arxiv.org/abs/2407.16560), Section 3 (task level) and the client hooks of Section 4 (``load_loss_fn``,
``load_optimizer``, ``train``, ``test``). The task object owns the model factory, the loss and the local
training loop; the task-level customisation is a subclass that overrides :meth:`ClassificationTask.loss`
(or :meth:`~ClassificationTask.build_model`, :meth:`~ClassificationTask.fit`, :meth:`~ClassificationTask.evaluate`).

Local objective of client ``k`` (COALA's Eq. 1 summand ``F_k``), with the options the scenarios use:

    L = CE(f(x), y)                                           supervised (FedAvg, FedBN)
      + mu / 2 * ||w - w_global||^2                           FedProx (Li et al., MLSys 2020)
      + kd_alpha * T^2 * KL(p_old^T || p^T) on old classes    class-incremental KD (LwF-style; COALA's FCCL
                                                              distils the previous global model)

and, for unlabeled clients (semi-supervised, label-in-server), ``y`` are the received global model's
predictions whose softmax confidence is at least ``pseudo_label_threshold`` (other samples are skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml24.federated.coala._checks import finite_float, int_at_least
from icml24.federated.coala.models import LeNetTiny

__all__ = ["ClassificationTask", "LocalTraining"]


@dataclass(frozen=True)
class LocalTraining:
    """The settings of one client's local update (sent by the server in each round's ConfigRecord)."""

    local_epoch: int = 1
    """Local epochs E."""
    batch_size: int = 32
    """Mini-batch size."""
    lr: float = 0.05
    """SGD learning rate."""
    momentum: float = 0.9
    """SGD momentum."""
    weight_decay: float = 0.0
    """SGD weight decay."""
    proximal_mu: float = 0.0
    """FedProx proximal weight (0: plain local SGD)."""
    kd_alpha: float = 0.0
    """Weight of the distillation term toward the teacher on old classes (0: none)."""
    kd_temperature: float = 2.0
    """Softmax temperature T of the distillation term."""
    pseudo_label_threshold: float = 0.9
    """Confidence a pseudo-label needs (unlabeled clients only)."""

    def __post_init__(self) -> None:
        int_at_least(self.local_epoch, "local_epoch", 1)
        int_at_least(self.batch_size, "batch_size", 1)
        finite_float(self.lr, "lr", low=0.0, low_open=True)
        finite_float(self.momentum, "momentum", low=0.0, high=1.0)
        finite_float(self.weight_decay, "weight_decay", low=0.0)
        finite_float(self.proximal_mu, "proximal_mu", low=0.0)
        finite_float(self.kd_alpha, "kd_alpha", low=0.0)
        finite_float(self.kd_temperature, "kd_temperature", low=0.0, low_open=True)
        finite_float(self.pseudo_label_threshold, "pseudo_label_threshold", low=0.0, high=1.0)


def _as_tensor(x: np.ndarray | torch.Tensor, name: str, dtype: torch.dtype) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    if t.ndim == 0 or t.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty array, got shape {tuple(t.shape)}")
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite")
    return t.to(dtype)


class ClassificationTask:
    """Image classification: a model factory, cross-entropy and an SGD local loop.

    Args:
        model_fn: builds a fresh ``torch.nn.Module`` (the model-level component); default
            :class:`~icml24.federated.coala.models.LeNetTiny` for 8x8 digits.
        num_classes: number of classes (for the class masks of continual learning).
    """

    def __init__(self, model_fn: Callable[[], nn.Module] = LeNetTiny, *, num_classes: int = 10) -> None:
        if not callable(model_fn):
            raise TypeError(f"model_fn must be a callable returning a torch.nn.Module, got {model_fn!r}")
        self.model_fn = model_fn
        self.num_classes = int_at_least(num_classes, "num_classes", 2)

    # -- components a subclass may replace --------------------------------------------------------------
    def build_model(self) -> nn.Module:
        """A fresh model from ``model_fn`` (COALA's ``register_model``)."""
        model = self.model_fn()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model_fn must return a torch.nn.Module, got {type(model).__name__}")
        return model

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The supervised loss (COALA's ``load_loss_fn``): mean cross-entropy."""
        return F.cross_entropy(logits, targets)

    def optimizer(self, model: nn.Module, settings: LocalTraining) -> torch.optim.Optimizer:
        """COALA's ``load_optimizer``: SGD with momentum."""
        return torch.optim.SGD(model.parameters(), lr=settings.lr, momentum=settings.momentum,
                               weight_decay=settings.weight_decay)  # fmt: skip

    # -- the local update ------------------------------------------------------------------------------
    def pseudo_labels(self, model: nn.Module, x: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Indices and predicted labels of the samples whose softmax confidence is >= ``threshold``."""
        model.eval()
        with torch.no_grad():
            prob = torch.softmax(model(x), dim=1)
        conf, pred = prob.max(dim=1)
        keep = torch.nonzero(conf >= threshold).flatten()
        return keep, pred[keep]

    def fit(
        self,
        model: nn.Module,
        x: np.ndarray | torch.Tensor,
        y: np.ndarray | torch.Tensor | None,
        settings: LocalTraining,
        *,
        seed: int,
        teacher: nn.Module | None = None,
        old_classes: Sequence[int] = (),
        seen_classes: Sequence[int] | None = None,
    ) -> dict[str, float]:
        """Train ``model`` in place on one client's data; returns ``{"num-examples", "train-loss"}``.

        Args:
            model: the received global model (loaded already); its entries at the start are ``w_global``
                of the proximal term.
            x: inputs; y: labels, or None for an unlabeled client (pseudo-labels, see the module docstring).
            settings: the round's local-training settings.
            seed: seeds the batch order (numpy) and torch, so a round is reproducible.
            teacher: the previous global model for the distillation term (with ``settings.kd_alpha > 0``).
            old_classes: classes of earlier tasks, where the teacher's predictions are distilled.
            seen_classes: classes the cross-entropy ranges over (None: all outputs).
        """
        if not isinstance(settings, LocalTraining):
            raise TypeError(f"settings must be a LocalTraining, got {type(settings).__name__}")
        xt = _as_tensor(x, "x", torch.float32)
        torch.manual_seed(int(seed))
        rng = np.random.default_rng(int(seed))
        if y is None:
            keep, yt = self.pseudo_labels(model, xt, settings.pseudo_label_threshold)
            xt = xt[keep]
        else:
            yt = _as_tensor(y, "y", torch.int64)
            if yt.shape[0] != xt.shape[0]:
                raise ValueError(f"x and y must have the same length, got {xt.shape[0]} and {yt.shape[0]}")
        n = int(xt.shape[0])
        if n == 0:
            return {"num-examples": 0, "train-loss": float("nan")}
        anchor = [p.detach().clone() for p in model.parameters()] if settings.proximal_mu > 0 else None
        old = torch.as_tensor(sorted(int(c) for c in old_classes), dtype=torch.int64)
        use_kd = teacher is not None and settings.kd_alpha > 0 and old.numel() > 0
        if use_kd:
            teacher.eval()
        mask = None
        if seen_classes is not None:
            mask = torch.full((self.num_classes,), float("-inf"))
            mask[torch.as_tensor(sorted(int(c) for c in seen_classes), dtype=torch.int64)] = 0.0
        opt = self.optimizer(model, settings)
        model.train()
        total, count = 0.0, 0
        for _ in range(settings.local_epoch):
            order = torch.as_tensor(rng.permutation(n))
            for start in range(0, n, settings.batch_size):
                idx = order[start : start + settings.batch_size]
                if idx.numel() < 2 and n >= 2:  # a one-sample batch breaks batch-norm statistics
                    continue
                xb, yb = xt[idx], yt[idx]
                logits = model(xb)
                loss = self.loss(logits if mask is None else logits + mask, yb)
                if anchor is not None:
                    prox = sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True))
                    loss = loss + 0.5 * settings.proximal_mu * prox
                if use_kd:
                    t = settings.kd_temperature
                    with torch.no_grad():
                        target = torch.softmax(teacher(xb)[:, old] / t, dim=1)
                    log_p = torch.log_softmax(logits[:, old] / t, dim=1)
                    loss = loss + settings.kd_alpha * t * t * F.kl_div(log_p, target, reduction="batchmean")
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * idx.numel()
                count += idx.numel()
        return {"num-examples": n, "train-loss": total / max(count, 1)}

    def evaluate(
        self,
        model: nn.Module,
        x: np.ndarray | torch.Tensor,
        y: np.ndarray | torch.Tensor,
        *,
        classes: Sequence[int] | None = None,
    ) -> dict[str, float]:
        """Accuracy and loss of ``model`` on ``(x, y)`` (COALA's ``test``); with ``classes``, predictions are
        restricted to those classes (class-incremental evaluation over the classes seen so far)."""
        xt = _as_tensor(x, "x", torch.float32)
        yt = _as_tensor(y, "y", torch.int64)
        if yt.shape[0] != xt.shape[0]:
            raise ValueError(f"x and y must have the same length, got {xt.shape[0]} and {yt.shape[0]}")
        model.eval()
        with torch.no_grad():
            logits = model(xt)
        if classes is not None:
            mask = torch.full((logits.shape[1],), float("-inf"))
            mask[torch.as_tensor(sorted(int(c) for c in classes), dtype=torch.int64)] = 0.0
            logits = logits + mask
        loss = F.cross_entropy(logits, yt).item() if classes is None else float("nan")
        acc = (logits.argmax(dim=1) == yt).double().mean().item()
        return {"num-examples": int(yt.shape[0]), "accuracy": acc, "loss": loss}
