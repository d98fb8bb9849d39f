"""Visual question answering on the scene world: data, answer-only fine-tuning, accuracy, and cost timing.

The task of MemVP's ScienceQA experiments in miniature (§4.2, prompt format ``QCM → A``): given an image and
a question, produce the answer; the loss is the cross-entropy of the answer token only (the official
``train.py`` masks the prompt with label 0). Here every answer of :mod:`icml24.multimodal.scenes` is one
word, so accuracy is exact match of the next-token argmax after the question.

Cost (§4.4, Table 5 and Figure 1): training step time (forward, backward and optimizer step) and generation
latency, measured for every (method, n) in interleaved rounds so that load drifts hit all of them alike.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from icml24.common.validation import integer, positive_int
from icml24.language.tokenizers import WordTokenizer
from icml24.language.training import IGNORE_INDEX, TrainConfig, lm_loss, train_lm
from icml24.multimodal.frozen_lm import qa_prompt
from icml24.multimodal.scenes import SceneBatch

__all__ = [
    "FineTuneConfig",
    "VQAData",
    "evaluate_vqa",
    "finetune_vqa",
    "make_vqa_data",
    "time_generation",
    "time_train_step",
]


@dataclass(frozen=True)
class FineTuneConfig:
    """Answer-only fine-tuning (AdamW, warm-up then cosine, as the official ``train.py``)."""

    steps: int = 300
    """Optimiser steps."""
    batch_size: int = 32
    """Questions per step."""
    lr: float = 3e-3
    """Peak learning rate (the official base lr 9e-3 is scaled by batch / 256 and tuned for LLaMA; ours is
    the same for every method)."""
    weight_decay: float = 0.02
    """AdamW weight decay on matrices (``--weight_decay 0.02``)."""
    warmup_fraction: float = 0.1
    """Warm-up steps as a fraction of ``steps`` (2 of 20 epochs in the official script)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            positive_int(getattr(self, name), name)
        for name, hi in (("lr", math.inf), ("weight_decay", math.inf), ("warmup_fraction", 1.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and 0 <= v <= hi):
                raise ValueError(f"{name} must be a finite number in [0, {hi:g}], got {v!r}")
        if self.lr == 0:
            raise ValueError("lr must be > 0")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class VQAData:
    """Tokenised questions with their answer, and the images' patch features.

    ``input_ids`` are right-padded ``<bos> question answer``; ``answer_pos[i]`` is the position whose
    next-token prediction is the answer (the last question token), ``answer_id[i]`` the answer's id.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    answer_pos: torch.Tensor
    answer_id: torch.Tensor
    features: torch.Tensor
    question_types: list[str]

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def rows(self, idx: torch.Tensor) -> VQAData:
        """The sub-dataset of rows ``idx``, cut to its longest row."""
        width = int(self.attention_mask[idx].sum(1).max())
        return VQAData(self.input_ids[idx, :width], self.attention_mask[idx, :width], self.answer_pos[idx],
                       self.answer_id[idx], self.features[idx], [self.question_types[int(i)] for i in idx])  # fmt: skip

    def labels(self) -> torch.Tensor:
        """Labels for :func:`~icml24.language.training.lm_loss`: the answer at ``answer_pos``, ignored elsewhere."""
        labels = torch.full_like(self.input_ids, IGNORE_INDEX)
        labels[torch.arange(len(self)), self.answer_pos] = self.answer_id
        return labels


@torch.no_grad()
def make_vqa_data(batch: SceneBatch, tokenizer: WordTokenizer, encoder: nn.Module | Callable | None,
                  *, chunk: int = 512) -> VQAData:  # fmt: skip
    """Tokenise ``batch``'s questions and answers and encode its images with the frozen ``encoder``
    (``images -> (B, n, C)``; ``None``: no features, for the text-only model)."""
    if not isinstance(batch, SceneBatch):
        raise TypeError(f"batch must be a SceneBatch, got {type(batch).__name__}")
    if not isinstance(tokenizer, WordTokenizer):
        raise TypeError(f"tokenizer must be a WordTokenizer, got {type(tokenizer).__name__}")
    if encoder is not None and not callable(encoder):
        raise TypeError(f"encoder must be callable (images -> features) or None, got {type(encoder).__name__}")
    positive_int(chunk, "chunk")
    texts = [f"{qa_prompt(q)} {a}" for q, a in zip(batch.questions, batch.answers, strict=True)]
    ids, mask = tokenizer.batch(texts, bos=True)
    answer_pos = mask.sum(1) - 2
    answer_id = ids[torch.arange(len(texts)), answer_pos + 1]
    if encoder is None:
        feats = torch.zeros(len(texts), 0, 0)
    else:
        images = torch.from_numpy(batch.images)
        feats = torch.cat([encoder(images[i:i + chunk]) for i in range(0, len(texts), chunk)])
    return VQAData(ids, mask, answer_pos, answer_id, feats, list(batch.question_types))


def _check_model(model: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (MemVP or InputSpacePrompting), got {type(model).__name__}")


def _check_ids(name: str, value: object) -> None:
    if not isinstance(value, torch.Tensor) or value.dtype not in (torch.int64, torch.int32) or value.dim() != 2:
        raise TypeError(f"{name} must be an integer tensor of shape (batch, seq)")


def _features(data: VQAData, use_images: bool) -> torch.Tensor | None:
    return data.features if use_images else None


def finetune_vqa(model: nn.Module, data: VQAData, config: FineTuneConfig, *, seed: int = 0,
                 use_images: bool = True) -> list[dict[str, float]]:  # fmt: skip
    """Train ``model``'s trainable parameters on answer-only cross-entropy; returns the loss history.

    ``model(input_ids, features, attention_mask=...)`` gives logits; ``use_images=False`` trains the
    text-only model (features ``None``).
    """
    _check_model(model)
    if not isinstance(config, FineTuneConfig):
        raise TypeError(f"config must be a FineTuneConfig, got {type(config).__name__}")
    if not isinstance(data, VQAData):
        raise TypeError(f"data must be a VQAData, got {type(data).__name__}")
    integer(seed, "seed", low=0)
    if not isinstance(use_images, bool):
        raise TypeError(f"use_images must be True or False, got {use_images!r}")

    def sample(gen: torch.Generator):
        part = data.rows(torch.randint(0, len(data), (config.batch_size,), generator=gen))
        return (part.input_ids, part.attention_mask, _features(part, use_images)), part.labels()

    def loss_fn(m: nn.Module, inputs, labels: torch.Tensor) -> torch.Tensor:
        ids, mask, feats = inputs
        return lm_loss(m(ids, feats, attention_mask=mask), labels)

    tc = TrainConfig(steps=config.steps, lr=config.lr, weight_decay=config.weight_decay,
                     warmup_steps=int(round(config.warmup_fraction * config.steps)), betas=(0.9, 0.999),
                     eval_every=max(1, config.steps // 5))  # fmt: skip
    return train_lm(model, sample, tc, seed=seed, loss_fn=loss_fn)


@torch.no_grad()
def evaluate_vqa(model: nn.Module, data: VQAData, *, use_images: bool = True, batch_size: int = 256) -> dict[str, float]:
    """Exact-match answer accuracy overall and per question type (``acc``, ``acc/colour``, ...)."""
    _check_model(model)
    if not isinstance(data, VQAData):
        raise TypeError(f"data must be a VQAData, got {type(data).__name__}")
    positive_int(batch_size, "batch_size")
    was = model.training
    model.eval()
    correct = []
    try:
        for start in range(0, len(data), batch_size):
            part = data.rows(torch.arange(start, min(len(data), start + batch_size)))
            logits = model(part.input_ids, _features(part, use_images), attention_mask=part.attention_mask)
            pred = logits[torch.arange(len(part)), part.answer_pos].argmax(-1)
            correct.append((pred == part.answer_id).numpy())
    finally:
        model.train(was)
    hit = np.concatenate(correct)
    out = {"acc": float(hit.mean())}
    types = np.asarray(data.question_types)
    for t in sorted(set(data.question_types)):
        out[f"acc/{t}"] = float(hit[types == t].mean())
    return out


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def time_train_step(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    features: torch.Tensor | None, labels: torch.Tensor, *, repeats: int = 5) -> float:  # fmt: skip
    """Median seconds of one training step (forward, answer loss, backward, AdamW step) over ``repeats``."""
    _check_model(model)
    _check_ids("input_ids", input_ids)
    positive_int(repeats, "repeats")
    if not isinstance(labels, torch.Tensor) or labels.shape != input_ids.shape:
        raise ValueError(f"labels must be a tensor of the shape of input_ids {tuple(input_ids.shape)}")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-6)
    model.train()

    def step() -> None:
        loss = lm_loss(model(input_ids, features, attention_mask=attention_mask), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # warm-up (allocations, optimizer state)
    return _median_time(step, repeats)


def time_generation(model: nn.Module, input_ids: torch.Tensor, features: torch.Tensor | None, *,
                    max_new_tokens: int = 4, repeats: int = 5) -> float:  # fmt: skip
    """Median seconds of greedy generation of ``max_new_tokens`` tokens (prompt + cached decoding)."""
    _check_model(model)
    _check_ids("input_ids", input_ids)
    positive_int(max_new_tokens, "max_new_tokens")
    positive_int(repeats, "repeats")
    model.generate(input_ids, features, max_new_tokens=max_new_tokens)  # warm-up
    return _median_time(lambda: model.generate(input_ids, features, max_new_tokens=max_new_tokens), repeats)


def interleaved(fns: Sequence[Callable[[], float]], rounds: int) -> list[list[float]]:
    """Run every timing function once per round, in a rotating order; returns ``[fn][round]``."""
    out: list[list[float]] = [[] for _ in fns]
    for r in range(rounds):
        order = list(range(len(fns)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            out[i].append(fns[i]())
    return out
