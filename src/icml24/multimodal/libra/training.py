"""Training and captioning with a vision system on a (frozen) scene LM: the joint next-token objective of
Libra (Section 3.3: text and visual codes), greedy caption decoding with a KV cache, and the scores.

The paper's stage 1 trains on image-caption pairs, image first (``i2t_prob: 1``), LM frozen, AdamW with a
cosine schedule; the same recipe here on scene images and their captions (:mod:`.data` for the layout).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from icml24.common.validation import positive_int
from icml24.language.tokenizers import WordTokenizer
from icml24.language.training import cosine_with_warmup
from icml24.multimodal.libra.data import PatchTokenizer, build_caption_batch, caption_scores
from icml24.multimodal.libra.model import LibraModel, LLaVAStyleModel, libra_loss
from icml24.multimodal.scenes import SceneBatch

__all__ = ["CaptionData", "CaptionTrainConfig", "evaluate_captions", "generate_captions", "prepare_caption_data",
           "text_only_loss", "train_captioner"]  # fmt: skip


@dataclass
class CaptionData:
    """Scenes as model inputs: patch codes and features, caption ids with ``<bos>``/``<eos>``."""

    codes: torch.Tensor
    """``(n, P, C)`` int64."""
    features: torch.Tensor
    """``(n, P, F)`` float32."""
    text_ids: torch.Tensor
    """``(n, L)`` int64, right-padded."""
    text_mask: torch.Tensor
    """``(n, L)`` 1 for real tokens."""
    scenes: SceneBatch
    """The scenes (ground truth for scoring)."""

    def __len__(self) -> int:
        return int(self.codes.shape[0])


def prepare_caption_data(scenes: SceneBatch, features: np.ndarray | torch.Tensor, patch_tokenizer: PatchTokenizer,
                         tokenizer: WordTokenizer) -> CaptionData:  # fmt: skip
    """Model inputs of ``scenes``: their visual ``features`` ``(n, P, D)`` (a frozen encoder's patch features or
    raw patches), the codes of a fitted :class:`PatchTokenizer`, and the captions tokenised by ``tokenizer``."""
    if not isinstance(scenes, SceneBatch):
        raise TypeError(f"scenes must be a SceneBatch, got {type(scenes).__name__}")
    if not isinstance(patch_tokenizer, PatchTokenizer):
        raise TypeError(f"patch_tokenizer must be a PatchTokenizer, got {type(patch_tokenizer).__name__}")
    if not isinstance(tokenizer, WordTokenizer):
        raise TypeError(f"tokenizer must be a WordTokenizer, got {type(tokenizer).__name__}")
    feats = features.detach().cpu().numpy() if isinstance(features, torch.Tensor) else features
    if not isinstance(feats, np.ndarray) or feats.ndim != 3 or feats.shape[0] != len(scenes):
        raise ValueError(f"features must be an array of shape ({len(scenes)}, P, D)")
    codes = patch_tokenizer.transform(feats)
    ids, mask = tokenizer.batch(scenes.captions, bos=True, eos=True)
    return CaptionData(torch.from_numpy(codes), torch.from_numpy(np.ascontiguousarray(feats, dtype=np.float32)),
                       ids, mask, scenes)  # fmt: skip


@dataclass(frozen=True)
class CaptionTrainConfig:
    """Optimisation of a captioner (AdamW, linear warm-up then cosine decay to 10%, gradient clipping)."""

    steps: int = 300
    """Optimiser steps."""
    batch_size: int = 32
    """Image-caption pairs per step."""
    lr: float = 2e-3
    """Peak learning rate."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay on the trainable matrices."""
    warmup_fraction: float = 0.05
    """Linear warm-up over this fraction of the steps."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    vision_loss_weight: float = 1.0
    """Weight of the visual next-code loss (Libra's joint objective; models without a vision head ignore it)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            positive_int(getattr(self, name), name)
        w = self.warmup_fraction
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (math.isfinite(w) and 0 <= w <= 1):
            raise ValueError(f"warmup_fraction must be a number in [0, 1], got {w!r}")
        for name in ("lr", "grad_clip"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        for name in ("weight_decay", "vision_loss_weight"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def _check_model(model: object) -> nn.Module:
    if not isinstance(model, (LibraModel, LLaVAStyleModel)):
        raise TypeError(f"model must be a LibraModel or LLaVAStyleModel, got {type(model).__name__}")
    return model


def _batch(model: nn.Module, data: CaptionData, idx: torch.Tensor):
    mask = data.text_mask[idx]
    width = int(mask.sum(1).max())
    return build_caption_batch(data.codes[idx], data.features[idx], data.text_ids[idx, :width], mask[:, :width],
                               boi_id=model.config.boi_id)  # fmt: skip


def train_captioner(model: nn.Module, data: CaptionData, config: CaptionTrainConfig | None = None, *,
                    seed: int = 0) -> list[float]:  # fmt: skip
    """Train the trainable parameters of ``model`` on ``data`` with the joint loss (:func:`libra_loss`).

    Returns the training loss of every step. Batches are drawn with replacement by a generator seeded with
    ``seed``; the model's initialisation is the caller's.
    """
    model = _check_model(model)
    if not isinstance(data, CaptionData):
        raise TypeError(f"data must be a CaptionData, got {type(data).__name__}")
    config = CaptionTrainConfig() if config is None else config
    if not isinstance(config, CaptionTrainConfig):
        raise TypeError(f"config must be a CaptionTrainConfig, got {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [g for g in ({"params": decay, "weight_decay": config.weight_decay}, {"params": rest, "weight_decay": 0.0})
              if g["params"]]  # fmt: skip
    opt = torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95))
    sched = cosine_with_warmup(opt, warmup_steps=int(config.warmup_fraction * config.steps), total_steps=config.steps,
                               min_lr_ratio=0.1)  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    weight = config.vision_loss_weight if isinstance(model, LibraModel) else 0.0
    losses = []
    model.train()
    for step in range(config.steps):
        idx = torch.randint(0, len(data), (config.batch_size,), generator=gen)
        b = _batch(model, data, idx)
        out = model(b.input_ids, vision_flag=b.vision_flag, vision_codes=b.vision_codes,
                    vision_features=b.vision_features)  # fmt: skip
        loss = libra_loss(out, b.text_labels, b.vision_labels, vision_loss_weight=weight)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"training loss became {loss.item()} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def generate_captions(model: nn.Module, data: CaptionData, tokenizer: WordTokenizer, *, max_new_tokens: int = 24,
                      batch_size: int = 256, use_cache: bool = True) -> list[str]:  # fmt: skip
    """Greedy captions of ``data``'s images: the prompt ``[<boi>, patches, <bos>]``, then one text token at a time
    (with the model's KV cache, Libra's holding both key/value views) until ``<eos>`` or ``max_new_tokens``."""
    model = _check_model(model)
    if not isinstance(data, CaptionData):
        raise TypeError(f"data must be a CaptionData, got {type(data).__name__}")
    for name, v in (("max_new_tokens", max_new_tokens), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    was_training = model.training
    model.eval()
    out: list[str] = []
    eos = tokenizer.eos_id
    try:
        for start in range(0, len(data), batch_size):
            idx = torch.arange(start, min(start + batch_size, len(data)))
            n = idx.numel()
            bos = torch.full((n, 1), tokenizer.bos_id, dtype=torch.long)
            prompt = build_caption_batch(data.codes[idx], data.features[idx], bos, boi_id=model.config.boi_id)
            seq = dict(input_ids=prompt.input_ids, vision_flag=prompt.vision_flag, vision_codes=prompt.vision_codes,
                       vision_features=prompt.vision_features)  # fmt: skip
            cache = model.new_cache() if use_cache else None
            generated = torch.zeros(n, 0, dtype=torch.long)
            done = torch.zeros(n, dtype=torch.bool)
            step_inputs = seq
            for _ in range(max_new_tokens):
                logits = model(**step_inputs, cache=cache).text_logits[:, -1]
                nxt = logits.argmax(-1)
                nxt = torch.where(done, torch.full_like(nxt, tokenizer.pad_id), nxt)
                done |= nxt == eos
                generated = torch.cat([generated, nxt[:, None]], dim=1)
                if bool(done.all()):
                    break
                if use_cache:
                    step_inputs = dict(input_ids=nxt[:, None], vision_flag=torch.zeros(n, 1, dtype=torch.bool))
                else:
                    c, f = seq["vision_codes"], seq["vision_features"]
                    seq = dict(input_ids=torch.cat([seq["input_ids"], nxt[:, None]], 1),
                               vision_flag=torch.cat([seq["vision_flag"], torch.zeros(n, 1, dtype=torch.bool)], 1),
                               vision_codes=torch.cat([c, torch.zeros_like(c[:, :1])], 1),
                               vision_features=torch.cat([f, torch.zeros_like(f[:, :1])], 1))  # fmt: skip
                    step_inputs = seq
            for row in generated.tolist():
                words = row[: row.index(eos)] if eos in row else row
                out.append(tokenizer.decode(words))
    finally:
        model.train(was_training)
    return out


def evaluate_captions(model: nn.Module, data: CaptionData, tokenizer: WordTokenizer, *,
                      max_new_tokens: int = 24) -> dict[str, float]:  # fmt: skip
    """:func:`caption_scores` of greedy captions of ``data`` plus ``caption_seconds`` (decoding time)."""
    t0 = time.perf_counter()
    captions = generate_captions(model, data, tokenizer, max_new_tokens=max_new_tokens)
    scores = caption_scores(captions, data.scenes)
    scores["caption_seconds"] = time.perf_counter() - t0
    return scores


@torch.no_grad()
def text_only_loss(model: nn.Module, tokenizer: WordTokenizer, texts: list[str], *, batch_size: int = 256) -> float:
    """Mean next-token cross-entropy (nats per token, ``<eos>`` included, padding not) of ``model`` on text-only
    ``texts``: the held-out language-modelling loss that a frozen LM keeps exactly (Libra, LLaVA frozen) and
    full fine-tuning may lose. ``model`` is a :class:`TransformerLM` or a multimodal model called on text alone.
    """
    from icml24.language.training import causal_lm_labels, lm_loss

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(tokenizer, WordTokenizer):
        raise TypeError(f"tokenizer must be a WordTokenizer, got {type(tokenizer).__name__}")
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
        raise ValueError("texts must be a non-empty list of str")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for start in range(0, len(texts), batch_size):
            ids, mask = tokenizer.batch(list(texts[start:start + batch_size]), bos=True, eos=True)
            labels = causal_lm_labels(ids, attention_mask=mask)
            out = model(ids)
            logits = out.text_logits if isinstance(out, tuple) else out
            n = int((labels != -100).sum())
            total += float(lm_loss(logits, labels)) * n
            count += n
    finally:
        model.train(was_training)
    return total / count
