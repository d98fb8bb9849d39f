"""SGD-trained MLPs with the re-weighting objectives of Ben-Dov et al. (ICML 2024, https://arxiv.org/abs/2405.06582).

:func:`train_mlp` trains a ReLU MLP by minibatch SGD with one of four objectives:

* ``"erm"``: the mean cross-entropy of the minibatch.
* ``"jtt"`` (Liu et al. 2021): an ERM model trained for ``stage1_epochs`` gives the error set E; a fresh
  model is trained on the weighted loss ``sum_i w_i CE_i / (b mean(w))`` with ``w = upweight`` on E and 1
  elsewhere (the division by the dataset's mean weight keeps the step size of ERM; ``upweight = 1`` is ERM
  bit for bit).
* ``"cvar"``: minibatch CVaR-DRO at level ``rho``: the mean of the worst ``ceil(rho b)`` losses of each
  minibatch (the minibatch estimator of Levy et al. 2020); ``rho = 1`` is ERM.
* ``"lff"`` (Nam et al. 2020): a biased model trained with the generalised cross-entropy
  ``(1 - p_y^q)/q`` alongside the debiased model, trained on ``w_i CE_d(i)`` with the relative difficulty
  ``w_i = EMA(CE_b)(i) / (EMA(CE_b)(i) + EMA(CE_d)(i))`` from per-point moving averages of both losses.

The run's final per-point weights (``MLPRun.weights``; for CVaR the best-response weights of the final
model's losses) give the collective's effective size. Predictions on named evaluation sets after every
epoch (``MLPRun.history``) serve model selection (early stopping on a validation set).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from icml24.evaluation.collective_action._validation import (
    check_int,
    check_labels,
    check_matrix,
    check_real,
)
from icml24.evaluation.collective_action.learners import cvar_weights

__all__ = ["MLP_METHODS", "MLPRun", "train_mlp"]

MLP_METHODS = ("erm", "jtt", "cvar", "lff")


class _MLP(nn.Module):
    def __init__(self, *, d_in: int, hidden: tuple[int, ...], n_classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        width = d_in
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@dataclass
class MLPRun:
    """The outcome of :func:`train_mlp`.

    Attributes:
        model: the trained network (eval mode); ``predict`` applies it.
        weights: the final per-point training weights (ones for ERM).
        error_set: JTT's stage-1 error set (``None`` for the other methods).
        history: for each evaluation set name, the predicted labels after each epoch (``epochs`` arrays).
    """

    model: nn.Module
    weights: np.ndarray
    error_set: np.ndarray | None = None
    history: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels for the rows of ``X``."""
        X = check_matrix(X)
        with torch.no_grad():
            return self.model(torch.as_tensor(X, dtype=torch.float32)).argmax(1).numpy()


def _sgd_epochs(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, epochs: int, lr: float, momentum: float,
                weight_decay: float, batch_size: int, gen: torch.Generator, loss_fn, on_epoch=None) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    n = X.shape[0]
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            loss = loss_fn(idx)
            loss.backward()
            opt.step()
        if on_epoch is not None:
            model.eval()
            on_epoch(epoch)


def train_mlp(
    X: Any,
    y: Any,
    *,
    method: str = "erm",
    n_classes: int | None = None,
    hidden: tuple[int, ...] = (128,),
    epochs: int = 30,
    lr: float = 0.05,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    batch_size: int = 64,
    upweight: float = 20.0,
    stage1_epochs: int = 2,
    rho: float = 0.2,
    q: float = 0.7,
    ema: float = 0.7,
    eval_sets: dict[str, Any] | None = None,
    seed: int = 0,
) -> MLPRun:
    """Train a ReLU MLP by minibatch SGD with the objective ``method`` (see the module docstring).

    Args:
        X, y: training data (n x d floats, n integer labels in ``0..n_classes-1``).
        method: ``"erm"``, ``"jtt"``, ``"cvar"`` or ``"lff"``.
        n_classes: the number of classes (default ``max(y) + 1``).
        hidden: hidden layer widths.
        epochs, lr, momentum, weight_decay, batch_size: SGD settings (of JTT's stage 2 too).
        upweight: JTT's lambda_up.
        stage1_epochs: epochs of JTT's stage-1 ERM model.
        rho: the CVaR level in (0, 1].
        q: LfF's generalised cross-entropy exponent in (0, 1].
        ema: LfF's per-point loss moving-average factor in [0, 1).
        eval_sets: ``{name: X_eval}``: predictions on each after every epoch go to ``MLPRun.history``.
        seed: seeds the initialisation and the minibatch order (same seed, same run).
    """
    X = check_matrix(X)
    y = check_labels(y, X.shape[0])
    if method not in MLP_METHODS:
        raise ValueError(f"method must be one of {MLP_METHODS}, got {method!r}")
    k = int(y.max()) + 1 if n_classes is None else check_int(n_classes, "n_classes", lo=2)
    if y.min() < 0 or y.max() >= k:
        raise ValueError(f"y must hold labels in 0..{k - 1} (n_classes = {k}), got range [{y.min()}, {y.max()}]")
    if isinstance(hidden, (str, bytes)) or not hasattr(hidden, "__iter__"):
        raise TypeError(f"hidden must be a tuple of positive ints, got {type(hidden).__name__}")
    hidden = tuple(check_int(h, "hidden", lo=1) for h in hidden)
    epochs = check_int(epochs, "epochs", lo=1)
    lr = check_real(lr, "lr", lo=0.0, lo_open=True)
    momentum = check_real(momentum, "momentum", lo=0.0, hi=1.0, hi_open=True)
    weight_decay = check_real(weight_decay, "weight_decay", lo=0.0)
    batch_size = check_int(batch_size, "batch_size", lo=1)
    upweight = check_real(upweight, "upweight", lo=0.0, lo_open=True)
    stage1_epochs = check_int(stage1_epochs, "stage1_epochs", lo=1)
    rho = check_real(rho, "rho", lo=0.0, hi=1.0, lo_open=True)
    q = check_real(q, "q", lo=0.0, hi=1.0, lo_open=True)
    ema = check_real(ema, "ema", lo=0.0, hi=1.0, hi_open=True)
    seed = check_int(seed, "seed", lo=0)
    evals = {}
    if eval_sets is not None:
        if not isinstance(eval_sets, dict):
            raise TypeError(f"eval_sets must be a dict of name -> 2-D array, got {type(eval_sets).__name__}")
        for name, Xe in eval_sets.items():
            Xe = check_matrix(Xe, f"eval_sets[{name!r}]")
            if Xe.shape[1] != X.shape[1]:
                raise ValueError(f"eval_sets[{name!r}] has {Xe.shape[1]} features, X has {X.shape[1]}")
            evals[str(name)] = torch.as_tensor(Xe, dtype=torch.float32)

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.long)
    n = X.shape[0]
    kw = dict(epochs=epochs, lr=lr, momentum=momentum, weight_decay=weight_decay, batch_size=batch_size, gen=gen)
    ce = nn.CrossEntropyLoss(reduction="none")

    def new_model() -> nn.Module:
        return _MLP(d_in=X.shape[1], hidden=hidden, n_classes=k)

    history: dict[str, list[np.ndarray]] = {name: [] for name in evals}

    def record(model: nn.Module):
        def on_epoch(_epoch: int) -> None:
            with torch.no_grad():
                for name, Xe in evals.items():
                    history[name].append(model(Xe).argmax(1).numpy())
        return on_epoch

    error_set = None
    weights = np.ones(n)
    if method == "jtt" and upweight != 1.0:
        stage1 = new_model()
        _sgd_epochs(stage1, Xt, yt, loss_fn=lambda idx: ce(stage1(Xt[idx]), yt[idx]).mean(),
                    **{**kw, "epochs": stage1_epochs})  # fmt: skip
        with torch.no_grad():
            error_set = (stage1(Xt).argmax(1) != yt).numpy()
        weights = np.where(error_set, upweight, 1.0)
    elif method == "jtt":
        error_set = np.zeros(n, dtype=bool)
    model = new_model()
    if method in ("erm", "jtt") or (method == "cvar" and rho == 1.0):
        w_rel = torch.as_tensor(weights / weights.mean(), dtype=torch.float32)
        plain = bool(np.all(weights == 1.0))

        def loss_fn(idx):
            losses = ce(model(Xt[idx]), yt[idx])
            return losses.mean() if plain else (w_rel[idx] * losses).mean()

        _sgd_epochs(model, Xt, yt, loss_fn=loss_fn, on_epoch=record(model), **kw)
    elif method == "cvar":
        def loss_fn(idx):
            losses = ce(model(Xt[idx]), yt[idx])
            top = max(1, math.ceil(rho * losses.numel()))
            return torch.topk(losses, top).values.mean()

        _sgd_epochs(model, Xt, yt, loss_fn=loss_fn, on_epoch=record(model), **kw)
        with torch.no_grad():
            weights = cvar_weights(ce(model(Xt), yt).numpy().astype(np.float64), rho)
    else:  # lff
        biased = new_model()
        ema_b = torch.zeros(n)
        ema_d = torch.zeros(n)
        seen = torch.zeros(n, dtype=torch.bool)
        opt_b = torch.optim.SGD(biased.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)

        def loss_fn(idx):
            logits_b, logits_d = biased(Xt[idx]), model(Xt[idx])
            with torch.no_grad():
                lb, ld = ce(logits_b, yt[idx]), ce(logits_d, yt[idx])
                first = ~seen[idx]
                ema_b[idx] = torch.where(first, lb, ema * ema_b[idx] + (1 - ema) * lb)
                ema_d[idx] = torch.where(first, ld, ema * ema_d[idx] + (1 - ema) * ld)
                seen[idx] = True
                w = ema_b[idx] / (ema_b[idx] + ema_d[idx] + 1e-8)
            p_y = torch.softmax(logits_b, 1).gather(1, yt[idx, None]).squeeze(1).clamp_min(1e-8)
            gce = ((1 - p_y**q) / q).mean()
            opt_b.zero_grad()
            gce.backward()
            opt_b.step()
            return (w * ce(logits_d, yt[idx])).mean()

        _sgd_epochs(model, Xt, yt, loss_fn=loss_fn, on_epoch=record(model), **kw)
        weights = (ema_b / (ema_b + ema_d + 1e-8)).numpy().astype(np.float64)
    model.eval()
    return MLPRun(model, np.asarray(weights, dtype=np.float64), error_set, history)
