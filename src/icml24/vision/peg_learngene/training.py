"""Training and evaluation of ancestry and descendant ViTs for PEG (Wang et al., ICML 2024, Sec. 4 of the paper:
the ancestry is trained, the learngene sampled and expanded, and the descendant trained on the target task).

:func:`train_classifier` trains with AdamW on full-batch-free minibatches and records test accuracy after every
epoch, so that one run gives both the final accuracy and the accuracy-vs-epoch curve (the convergence claim).
:func:`digits_split` gives the notes' ancestry (digits 0-4) / few-shot downstream (digits 5-9) split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["TrainConfig", "accuracy", "digits_split", "train_classifier"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation of one training run (AdamW, the code's optimiser; a cosine decay without warm-up)."""

    epochs: int = 20
    """Passes over the training set."""
    batch_size: int = 25
    """Minibatch size."""
    lr: float = 1e-3
    """Peak learning rate (the code: 5e-4 for a batch of 512; our batches are tiny)."""
    weight_decay: float = 0.05
    """AdamW weight decay (DeiT's 0.05)."""
    min_lr: float = 1e-5
    """Learning rate at the end of the cosine decay."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, got {type(v).__name__}")
            if v < 1:
                raise ValueError(f"{name} must be >= 1, got {v}")
        for name, positive in (("lr", True), ("weight_decay", False), ("min_lr", False)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"{name} must be a number, got {type(v).__name__}")
            if not math.isfinite(v) or v < 0 or (positive and v == 0):
                raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {v}")


def _check_xy(x: object, y: object, xname: str, yname: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"{xname} must be a float tensor of shape (n, C, H, W)")
    if not isinstance(y, torch.Tensor) or y.dim() != 1 or y.dtype != torch.long:
        raise ValueError(f"{yname} must be a 1-D long tensor of labels")
    if not torch.isfinite(x).all():
        raise ValueError(f"{xname} must be finite (no NaN or inf)")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"{xname} and {yname} must have the same non-zero length, got {len(x)} and {len(y)}")
    return x, y


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512) -> float:
    """Top-1 accuracy of ``model`` (in eval mode) on ``(x, y)``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    x, y = _check_xy(x, y, "x", "y")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    was = model.training
    model.eval()
    correct = sum(int((model(x[i : i + batch_size]).argmax(-1) == y[i : i + batch_size]).sum())
                  for i in range(0, len(x), batch_size))  # fmt: skip
    model.train(was)
    return correct / len(x)


def train_classifier(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    config: TrainConfig = TrainConfig(),
    x_test: torch.Tensor | None = None,
    y_test: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> list[float]:
    """Train ``model`` by cross-entropy; returns the test accuracy after each epoch (empty without test data).

    Every parameter is trained (the descendant is *initialised* from the learngene, then fine-tuned end to end;
    the expansion maps are trained with it).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    x, y = _check_xy(x, y, "x", "y")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if (x_test is None) != (y_test is None):
        raise ValueError("x_test and y_test must be given together")
    if x_test is not None:
        _check_xy(x_test, y_test, "x_test", "y_test")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = math.ceil(len(x) / config.batch_size)
    total = config.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * s / total))) / config.lr
    )
    curve: list[float] = []
    model.train()
    for _ in range(config.epochs):
        perm = torch.randperm(len(x), generator=generator)
        for i in range(0, len(x), config.batch_size):
            idx = perm[i : i + config.batch_size]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        if x_test is not None:
            curve.append(accuracy(model, x_test, y_test))
    model.eval()
    return curve


def digits_split(seed: int, *, shots: int = 20, ancestry_classes: tuple[int, ...] = (0, 1, 2, 3, 4),
                 ancestry_test_fraction: float = 0.2) -> dict[str, torch.Tensor]:  # fmt: skip
    """scikit-learn's bundled digits (8×8, scaled to [0, 1]) split as in the notes.

    Ancestry task: the ``ancestry_classes`` (train / held-out test). Downstream task: the other classes,
    relabelled ``0..k-1``, ``shots`` training images per class and every other image of them as the test set.
    The split is drawn from ``seed``.
    """
    from sklearn.datasets import load_digits

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if isinstance(shots, bool) or not isinstance(shots, int) or shots < 1:
        raise ValueError(f"shots must be an int >= 1, got {shots!r}")
    if isinstance(ancestry_test_fraction, bool) or not isinstance(ancestry_test_fraction, (int, float)) or not (
        0.0 < ancestry_test_fraction < 1.0
    ):
        raise ValueError(f"ancestry_test_fraction must be in (0, 1), got {ancestry_test_fraction!r}")
    if not ancestry_classes or not set(ancestry_classes) <= set(range(10)) or len(set(ancestry_classes)) == 10:
        raise ValueError(f"ancestry_classes must be a proper non-empty subset of 0..9, got {ancestry_classes!r}")
    xs, ys = load_digits(return_X_y=True)
    xs = (xs / 16.0).reshape(-1, 1, 8, 8).astype(np.float32)
    rng = np.random.default_rng(seed)
    anc = np.flatnonzero(np.isin(ys, ancestry_classes))
    anc = rng.permutation(anc)
    n_test = int(round(ancestry_test_fraction * len(anc)))
    down_classes = [c for c in range(10) if c not in set(ancestry_classes)]
    tr, te = [], []
    for c in down_classes:
        idx = rng.permutation(np.flatnonzero(ys == c))
        if shots >= len(idx):
            raise ValueError(f"shots ({shots}) must be below the {len(idx)} images of class {c}")
        tr.append(idx[:shots])
        te.append(idx[shots:])
    tr_i, te_i = rng.permutation(np.concatenate(tr)), np.concatenate(te)
    relabel = {c: i for i, c in enumerate(down_classes)}
    arelabel = {c: i for i, c in enumerate(sorted(set(ancestry_classes)))}

    def t(idx: np.ndarray, mapping: dict[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.as_tensor(xs[idx]), torch.as_tensor([mapping[int(v)] for v in ys[idx]], dtype=torch.long)

    out = {}
    out["x_ancestry"], out["y_ancestry"] = t(anc[n_test:], arelabel)
    out["x_ancestry_test"], out["y_ancestry_test"] = t(anc[:n_test], arelabel)
    out["x_train"], out["y_train"] = t(tr_i, relabel)
    out["x_test"], out["y_test"] = t(te_i, relabel)
    return out
