"""LEVI: Generalizable Fine-tuning via Layer-wise Ensemble of Different Views (Roh et al., ICML 2024).

https://arxiv.org/abs/2402.04644 (PMLR 235:42500-42520); no official code (the paper used TensorFlow,
JAX and Flax internally).

Fine-tuned foundation models generalise poorly out of distribution when the fine-tuning data carry
spurious shortcuts *and* the pre-trained representation lacks features the new task needs. LEVI
(Section 4, Figure 3) keeps the pre-trained model fixed and ensembles it, layer by layer, with a small
task-specific model trained from scratch: the intermediate outputs of several pre-trained layers and the
output of the small model are the "views"; adapting layers take their concatenation and predict, and the
small model, the adapting layers and the prediction head are trained together with one task loss, so
each view can make up for what the other lacks instead of both leaning on the shortcut:

    views  = [h_l(x) for l in S] + [G_phi(x)]                # S: a few pre-trained layers incl. the last
    a_v    = W_v LayerNorm(view_v) + b_v                     # adapting layer of each view (our reading)
    logits = Head(Dropout(concat(a_1, ..., a_V)))            # one-hidden-layer MLP
    loss   = CE(logits, y)                                   # a single shared loss

What the public text fixes: the pre-trained model is fixed (optionally LoRA-tuned), the small model is
trained from scratch, adapting layers take the concatenated intermediate outputs of both, and one loss
trains everything. What it leaves open, and we chose (listed as deviations in the README): the
per-view LayerNorm and linear map before the concatenation, their widths, the head's depth, dropout, and
mean pooling of the token states.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from icml24.common.validation import positive_int

__all__ = [
    "LEVI",
    "SmallMLP",
    "TrainConfig",
    "TrainedClassifier",
    "accuracy",
    "hashed_bag_of_words",
    "pooled_layer_features",
    "predict_logits",
    "train_classifier",
]


def _rate(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= float(value) < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------- views
def pooled_layer_features(
    encoder: nn.Module,
    tokenizer: Callable,
    texts: Sequence[str],
    *,
    layers: Sequence[int],
    batch_size: int = 128,
    max_length: int = 64,
) -> list[np.ndarray]:
    """Mean-pooled token states of the chosen layers of a ``transformers`` encoder (the pre-trained views).

    ``layers`` index ``hidden_states`` (0 is the embedding output, ``L`` the last block). The encoder is
    frozen in LEVI, so these are computed once per dataset and cached (Section 4's efficiency argument).

    Returns:
        one float32 array ``(len(texts), hidden)`` per entry of ``layers``.
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a non-empty sequence of strings")
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or not layers:
        raise TypeError(f"layers must be a non-empty sequence of ints, got {layers!r}")
    n_hidden = int(getattr(getattr(encoder, "config", None), "num_hidden_layers", 10**9))
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= int(layer) <= n_hidden:
            raise ValueError(f"layers must hold ints in [0, {n_hidden}], got {layers!r}")
    batch_size = positive_int(batch_size, "batch_size")
    max_length = positive_int(max_length, "max_length")
    out: list[list[np.ndarray]] = [[] for _ in layers]
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            for s in range(0, len(texts), batch_size):
                enc = tokenizer(list(texts[s : s + batch_size]), padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt")  # fmt: skip
                hidden = encoder(**enc, output_hidden_states=True).hidden_states
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden[0].dtype)
                for acc, layer in zip(out, layers):
                    acc.append(((hidden[int(layer)] * mask).sum(1) / mask.sum(1)).float().numpy())
    finally:
        encoder.train(was_training)
    return [np.concatenate(a) for a in out]


def hashed_bag_of_words(texts: Sequence[str], *, n_features: int = 4096) -> np.ndarray:
    """Hashed, L2-normalised word counts (unigrams and bigrams): the small model's raw input.

    A model trained from scratch on these knows exactly the words of the fine-tuning data and nothing
    else, the opposite of the pre-trained view.
    """
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a non-empty sequence of strings")
    n_features = positive_int(n_features, "n_features")
    from sklearn.feature_extraction.text import HashingVectorizer

    vec = HashingVectorizer(n_features=n_features, ngram_range=(1, 2), alternate_sign=False, norm="l2")
    return vec.transform(list(texts)).toarray().astype(np.float32)


# --------------------------------------------------------------------------------------------- models
class SmallMLP(nn.Module):
    """The small task-specific model trained from scratch: ``Linear -> ReLU -> Dropout -> Linear``.

    Its output is a representation (the small model's view), or logits when ``out_dim`` is the number of
    classes and it is trained alone (the "small model alone" baseline).
    """

    def __init__(self, *, in_features: int, hidden: int = 64, out_dim: int = 64, dropout: float = 0.1):
        super().__init__()
        in_features = positive_int(in_features, "in_features")
        hidden = positive_int(hidden, "hidden")
        out_dim = positive_int(out_dim, "out_dim")
        self.out_dim = out_dim
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(),
                                 nn.Dropout(_rate("dropout", dropout)), nn.Linear(hidden, out_dim))  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LEVI(nn.Module):
    """LEVI's layer-wise ensemble head (Section 4, Figure 3): pre-trained layer views + a small model.

    Args:
        view_dims: width of each pre-trained view (e.g. ``[384, 384, 384]`` for three MiniLM layers); may be
            empty (then LEVI is the small model with an MLP head).
        small_model: the model trained from scratch, or ``None`` (then LEVI is an MLP probe on the views).
            Its output width is ``small_model.out_dim`` (or ``small_dim``).
        n_classes: number of classes.
        adapter_dim: width of each view's adapting map (``None``: no map, the LayerNormed view is used as is).
        head_hidden: hidden width of the prediction head (0: a linear head).
        dropout: dropout on the concatenated adapted views.
        small_dim: the small model's output width when it has no ``out_dim`` attribute.

    ``forward(views, small_input)`` takes the list of pre-trained views (one ``(B, d_v)`` tensor each, in
    the order of ``view_dims``) and the small model's input, and returns logits ``(B, n_classes)``.
    """

    def __init__(
        self,
        *,
        view_dims: Sequence[int],
        small_model: nn.Module | None,
        n_classes: int,
        adapter_dim: int | None = 128,
        head_hidden: int = 256,
        dropout: float = 0.1,
        small_dim: int | None = None,
    ):
        super().__init__()
        if isinstance(view_dims, (str, bytes)) or not isinstance(view_dims, Sequence):
            raise TypeError(f"view_dims must be a sequence of positive ints, got {view_dims!r}")
        dims = [positive_int(d, "view_dims") for d in view_dims]
        if small_model is not None and not isinstance(small_model, nn.Module):
            raise TypeError(f"small_model must be a torch.nn.Module or None, got {type(small_model).__name__}")
        n_classes = positive_int(n_classes, "n_classes")
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        if adapter_dim is not None:
            adapter_dim = positive_int(adapter_dim, "adapter_dim")
        if isinstance(head_hidden, bool) or not isinstance(head_hidden, int) or head_hidden < 0:
            raise ValueError(f"head_hidden must be a non-negative int, got {head_hidden!r}")
        if small_model is not None:
            sd = small_dim if small_dim is not None else getattr(small_model, "out_dim", None)
            if sd is None:
                raise ValueError("small_dim must be given when small_model has no out_dim attribute")
            dims.append(positive_int(sd, "small_dim"))
        if not dims:
            raise ValueError("LEVI needs at least one view: give view_dims or a small_model")
        self.n_pretrained_views = len(dims) - (small_model is not None)
        self.small_model = small_model
        self.norms = nn.ModuleList(nn.LayerNorm(d) for d in dims)
        self.adapters = nn.ModuleList(
            nn.Linear(d, adapter_dim) if adapter_dim is not None else nn.Identity() for d in dims
        )
        self.slice_widths = [adapter_dim if adapter_dim is not None else d for d in dims]
        width = sum(self.slice_widths)
        self.dropout = nn.Dropout(_rate("dropout", dropout))
        self.head = (nn.Sequential(nn.Linear(width, head_hidden), nn.ReLU(), nn.Linear(head_hidden, n_classes))
                     if head_hidden else nn.Linear(width, n_classes))  # fmt: skip

    def fused(self, views: Sequence[torch.Tensor], small_input: torch.Tensor | None = None) -> torch.Tensor:
        """The concatenation of the adapted views (the head's input), ``(B, sum of slice widths)``."""
        views = list(views)
        if len(views) != self.n_pretrained_views:
            raise ValueError(f"views must hold {self.n_pretrained_views} tensors, got {len(views)}")
        if self.small_model is not None:
            if small_input is None:
                raise ValueError("small_input is required: this LEVI has a small model")
            views.append(self.small_model(small_input))
        parts = [adapt(norm(v)) for v, norm, adapt in zip(views, self.norms, self.adapters)]
        return torch.cat(parts, dim=-1)

    def forward(self, views: Sequence[torch.Tensor], small_input: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.dropout(self.fused(views, small_input)))


# --------------------------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainConfig:
    """How every trainable model of the reproduction is trained (the same budget for method and baselines)."""

    lr: float = 1e-3
    """AdamW learning rate."""
    weight_decay: float = 1e-2
    """AdamW weight decay."""
    epochs: int = 20
    """Maximum passes over the training data."""
    batch_size: int = 64
    """Minibatch size."""
    patience: int = 4
    """Stop after this many epochs without a better ID-validation accuracy (the best epoch is kept)."""
    seed: int = 0
    """Seed of the initialisation and the minibatch order."""

    def __post_init__(self) -> None:
        for name in ("lr", "weight_decay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (name == "lr" and v == 0):
                raise ValueError(f"{name} must be a {'positive' if name == 'lr' else 'non-negative'} number, got {v!r}")
        for name in ("epochs", "batch_size", "patience"):
            positive_int(getattr(self, name), name)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")


@dataclass
class TrainedClassifier:
    """A trained model with its best ID-validation accuracy and per-epoch history."""

    model: nn.Module
    val_accuracy: float
    best_epoch: int
    history: list[dict[str, float]] = field(default_factory=list)


Inputs = tuple
"""The positional arguments of a model's forward, as tensors whose first dimension indexes examples."""


def _index(inputs: Inputs, idx: torch.Tensor) -> Inputs:
    return tuple(_index(x, idx) if isinstance(x, (list, tuple)) else x[idx] for x in inputs)


def _n_examples(inputs: Inputs) -> int:
    first = inputs[0]
    while isinstance(first, (list, tuple)):
        first = first[0]
    return int(first.shape[0])


def predict_logits(model: nn.Module, inputs: Inputs, *, batch_size: int = 512) -> torch.Tensor:
    """``model(*inputs)`` in eval mode, batched, without gradients."""
    batch_size = positive_int(batch_size, "batch_size")
    model.eval()
    n = _n_examples(inputs)
    with torch.no_grad():
        return torch.cat([model(*_index(inputs, torch.arange(s, min(n, s + batch_size))))
                          for s in range(0, n, batch_size)])  # fmt: skip


def accuracy(logits: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray) -> float:
    """Fraction of rows whose argmax equals the label."""
    lg = torch.as_tensor(logits)
    lb = torch.as_tensor(labels)
    if lg.is_floating_point() and not bool(torch.isfinite(lg).all()):
        raise ValueError("logits must be finite (got NaN or inf)")
    if lb.is_floating_point() or lb.dtype == torch.bool:
        raise TypeError(f"labels must hold integer class indices, got dtype {lb.dtype}")
    if lg.ndim != 2 or lb.ndim != 1 or lg.shape[0] != lb.shape[0] or lb.numel() == 0:
        raise ValueError(f"logits must be (n, classes) and labels (n,) with n >= 1, got {tuple(lg.shape)} and {tuple(lb.shape)}")
    return float((lg.argmax(-1) == lb).float().mean())


def train_classifier(
    model: nn.Module,
    inputs: Inputs,
    labels: torch.Tensor,
    *,
    val_inputs: Inputs,
    val_labels: torch.Tensor,
    config: TrainConfig = TrainConfig(),
    parameters: Sequence[nn.Parameter] | None = None,
) -> TrainedClassifier:
    """Minimise cross-entropy of ``model(*inputs)`` with AdamW; keep the epoch best on ID validation.

    Model selection sees only ID validation data, never OOD data (as in the paper). ``parameters``
    restricts what is trained (default: every parameter that requires a gradient).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not isinstance(inputs, tuple) or not inputs:
        raise TypeError("inputs must be a non-empty tuple of the model's forward arguments")
    if not isinstance(val_inputs, tuple) or not val_inputs:
        raise TypeError("val_inputs must be a non-empty tuple of the model's forward arguments")
    labels = torch.as_tensor(labels, dtype=torch.long)
    val_labels = torch.as_tensor(val_labels, dtype=torch.long)
    n = _n_examples(inputs)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},), got {tuple(labels.shape)}")
    if val_labels.ndim != 1 or val_labels.shape[0] != _n_examples(val_inputs):
        raise ValueError("val_labels must have one label per validation example")
    params = [p for p in (model.parameters() if parameters is None else parameters) if p.requires_grad]
    if not params:
        raise ValueError("parameters: nothing to train (no parameter requires a gradient)")
    gen = torch.Generator().manual_seed(config.seed)
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    best_state, best_acc, best_epoch, since, history = None, -1.0, 0, 0, []
    for epoch in range(1, config.epochs + 1):
        model.train()
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for s in range(0, n, config.batch_size):
            idx = order[s : s + config.batch_size]
            loss = loss_fn(model(*_index(inputs, idx)), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * idx.numel()
        val_acc = accuracy(predict_logits(model, val_inputs), val_labels)
        history.append({"epoch": epoch, "train_loss": total / n, "val_accuracy": val_acc})
        if val_acc > best_acc:
            best_acc, best_epoch, since = val_acc, epoch, 0
            best_state = copy.deepcopy({k: v.detach().clone() for k, v in model.state_dict().items()})
        else:
            since += 1
            if since >= config.patience:
                break
    assert best_state is not None
    model.load_state_dict(best_state)
    model.eval()
    return TrainedClassifier(model, best_acc, best_epoch, history)
