"""The training loop shared by the language reproductions.

AdamW with linear warm-up then cosine decay (the schedule of GPT-2/Llama training and of the official
case-or-rule ``train.py``), global gradient-norm clipping, a next-token loss that counts only the target
tokens a mask selects (answer-only training), and periodic evaluation. Data come from a
``sample_batch(generator) -> (input_ids, labels)`` callable, so the same loop trains on generated
arithmetic, masked characters or a fixed corpus.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from icml24.common.validation import integer, positive_int

__all__ = [
    "IGNORE_INDEX",
    "TrainConfig",
    "causal_lm_labels",
    "cosine_with_warmup",
    "lm_loss",
    "mask_tokens",
    "train_lm",
    "warmup_times_cosine",
]

IGNORE_INDEX = -100
"""Label of a position that does not count in the loss (PyTorch's and ``transformers``' convention)."""


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of :func:`train_lm`."""

    steps: int = 1000
    """Optimiser steps."""
    lr: float = 1e-3
    """Peak learning rate (after warm-up)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay, applied to weight matrices only (not to norms, biases, embeddings)."""
    betas: tuple[float, float] = (0.9, 0.95)
    """AdamW betas."""
    warmup_steps: int = 0
    """Linear warm-up steps from 0 to ``lr``."""
    min_lr_ratio: float = 0.0
    """Cosine decay ends at ``min_lr_ratio * lr``."""
    grad_clip: float | None = 1.0
    """Clip the global gradient norm to this value (``None``: no clipping)."""
    eval_every: int = 0
    """Call ``evaluate`` every this many steps (0: only at the end)."""

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive int, got {self.steps!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not (isinstance(self.warmup_steps, int) and 0 <= self.warmup_steps <= self.steps):
            raise ValueError(f"warmup_steps must be an int in [0, steps], got {self.warmup_steps!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        if self.grad_clip is not None and not (math.isfinite(self.grad_clip) and self.grad_clip > 0):
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip!r}")
        if not (isinstance(self.eval_every, int) and self.eval_every >= 0):
            raise ValueError(f"eval_every must be a non-negative int, got {self.eval_every!r}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def cosine_with_warmup(
    optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up to the optimizer's lr over ``warmup_steps``, then cosine decay to
    ``min_lr_ratio`` of it at ``total_steps`` (the ``get_cosine_schedule_with_warmup`` shape of
    ``transformers``, with a floor)."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def warmup_times_cosine(
    optimizer: torch.optim.Optimizer, *, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A linear warm-up *multiplied into* a cosine over all ``total_steps``:
    ``min(1, (t + 1) / max(1, warmup_steps)) * 0.5 (1 + cos(pi t / total_steps))``.

    Unlike :func:`cosine_with_warmup` the cosine starts at step 0, not after the warm-up (the two differ by
    the cosine's decay during the warm-up); crossget's CLIP training and uni-med's encoder pretraining use this
    one. The expression is evaluated in this order so that those papers' numbers are unchanged.
    """
    warmup_steps = integer(warmup_steps, "warmup_steps", low=0)
    total_steps = positive_int(total_steps, "total_steps")

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / max(1, warmup_steps)) * 0.5 * (1 + math.cos(math.pi * step / total_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def causal_lm_labels(
    input_ids: torch.Tensor, *, attention_mask: torch.Tensor | None = None, loss_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Next-token labels: ``labels[:, t] = input_ids[:, t + 1]``, with ``IGNORE_INDEX`` where the target is
    padding (``attention_mask == 0``), outside ``loss_mask`` (1 = this *target token* counts, e.g. the
    answer tokens), or past the end."""
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, :-1] = input_ids[:, 1:]
    keep = torch.ones_like(input_ids, dtype=torch.bool)
    keep[:, -1] = False
    if attention_mask is not None:
        keep[:, :-1] &= attention_mask[:, 1:].bool()
    if loss_mask is not None:
        if loss_mask.shape != input_ids.shape:
            raise ValueError(f"loss_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                             f"got {tuple(loss_mask.shape)}")  # fmt: skip
        keep[:, :-1] &= loss_mask[:, 1:].bool()
    return labels.masked_fill(~keep, IGNORE_INDEX)


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    first_regular_id: int = 5,
    attention_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption (Devlin et al., 2019, Section 3.1): ``(corrupted_ids, labels)``.

    Each real token is chosen with probability ``mask_prob``; a chosen token becomes ``mask_id`` with
    probability 0.8, a random regular token (ids ``first_regular_id .. vocab_size - 1``, i.e. not a special
    token) with 0.1, and stays with 0.1. ``labels`` hold the original id at chosen positions and
    ``IGNORE_INDEX`` elsewhere (padding, ``attention_mask == 0``, is never chosen).
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError("input_ids must be an integer torch.Tensor")
    if not (isinstance(mask_prob, (int, float)) and 0.0 < mask_prob < 1.0):
        raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob!r}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
    if isinstance(first_regular_id, bool) or not isinstance(first_regular_id, int) or not 0 <= first_regular_id < vocab_size:
        raise ValueError(f"first_regular_id must be an int in [0, vocab_size), got {first_regular_id!r}")
    if isinstance(mask_id, bool) or not isinstance(mask_id, int) or not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id must be an int in [0, vocab_size), got {mask_id!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    shape = input_ids.shape
    chosen = torch.rand(shape, generator=generator) < mask_prob
    if attention_mask is not None:
        if attention_mask.shape != shape:
            raise ValueError(f"attention_mask must have the shape of input_ids {tuple(shape)}, "
                             f"got {tuple(attention_mask.shape)}")  # fmt: skip
        chosen &= attention_mask.bool()
    action = torch.rand(shape, generator=generator)
    random_ids = torch.randint(first_regular_id, vocab_size, shape, generator=generator, dtype=input_ids.dtype)
    corrupted = input_ids.clone()
    corrupted[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    corrupted[swap] = random_ids[swap]
    labels = input_ids.masked_fill(~chosen, IGNORE_INDEX)
    return corrupted, labels


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose label is not ``IGNORE_INDEX`` (0 when none is)."""
    flat = labels.reshape(-1)
    if not bool((flat != IGNORE_INDEX).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), flat, ignore_index=IGNORE_INDEX)


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    # Decay matrices only: norms, biases and embeddings are left alone (GPT-2/nanoGPT practice).
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for _name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            if p.dim() >= 2 and not isinstance(module, nn.Embedding):
                decay.append(p)
            else:
                no_decay.append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def train_lm(
    model: nn.Module,
    sample_batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    config: TrainConfig,
    *,
    seed: int = 0,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` for ``config.steps`` steps and return the history.

    Args:
        model: maps ``input_ids`` to logits ``(B, T, V)`` (any :class:`torch.nn.Module`).
        sample_batch: ``generator -> (input_ids, labels)``; labels use ``IGNORE_INDEX`` for positions that
            do not count (see :func:`causal_lm_labels`).
        config: the optimisation settings.
        seed: seeds the batch generator (the model's initialisation is the caller's).
        evaluate: ``model -> metrics`` called every ``config.eval_every`` steps and at the end, in eval
            mode and without gradients.
        loss_fn: ``(model, input_ids, labels) -> loss``; default ``lm_loss(model(input_ids), labels)``.
        optimizer: a ready optimizer (then ``lr``, ``betas`` and ``weight_decay`` of ``config`` are unused
            except the schedule); default AdamW over the trainable parameters.

    Returns:
        One dict per logged step: ``step``, ``loss`` (mean training loss since the last log), ``lr``,
        ``seconds`` and the ``evaluate`` metrics; the last entry is the final evaluation.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    gen = torch.Generator().manual_seed(int(seed))
    if optimizer is None:
        optimizer = torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas)
    scheduler = cosine_with_warmup(optimizer, warmup_steps=config.warmup_steps, total_steps=config.steps,
                                   min_lr_ratio=config.min_lr_ratio)  # fmt: skip
    params = [p for g in optimizer.param_groups for p in g["params"]]
    history: list[dict[str, float]] = []
    running, count = 0.0, 0
    start = time.perf_counter()
    model.train()
    for step in range(1, config.steps + 1):
        input_ids, labels = sample_batch(gen)
        loss = loss_fn(model, input_ids, labels) if loss_fn is not None else lm_loss(model(input_ids), labels)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"training loss became {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        scheduler.step()
        running += float(loss.detach())
        count += 1
        last = step == config.steps
        if last or (config.eval_every and step % config.eval_every == 0):
            entry = {"step": step, "loss": running / count, "lr": optimizer.param_groups[0]["lr"],
                     "seconds": time.perf_counter() - start}  # fmt: skip
            if evaluate is not None:
                model.eval()
                with torch.no_grad():
                    entry.update(evaluate(model))
                model.train()
            history.append(entry)
            running, count = 0.0, 0
    model.eval()
    return history
