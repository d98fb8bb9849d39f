"""Training and evaluating :class:`~icml24.multimodal.crossget.model.TinyCLIP` on the scene world.

Training draws a fresh batch of ``split="train"`` scenes at every step (so there is no finite training set
to overfit) and minimises ``(1 - w) L_itc + w L_JS`` (``train_retrieval_clip.py``: AdamW, weight decay
0.05, cosine schedule; ``w = 0.5``). Merging-aware fine-tuning passes a :class:`MergeConfig`, as the
official script trains with ``--rv`` set. Evaluation is image↔text retrieval on held-out scenes, with the
matmul FLOPs of one image's forward pass (:mod:`icml24.vision.flops`) and the CPU throughput of the image
encoder.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from icml24.common.validation import integer, positive_int, probability, real
from icml24.language.training import warmup_times_cosine
from icml24.multimodal.crossget.model import MergeConfig, TinyCLIP
from icml24.multimodal.crossget.retrieval import SceneTextEncoder, content_ids, retrieval_recall
from icml24.multimodal.scenes import SceneBatch, SceneConfig, generate_scenes
from icml24.vision.flops import count_flops

__all__ = ["CLIPTrainConfig", "evaluate_retrieval", "train_clip"]


@dataclass(frozen=True)
class CLIPTrainConfig:
    """Optimisation of :func:`train_clip` (the paper fine-tunes CLIP with lr 1e-5 for 12 epochs; a model
    trained from scratch needs a larger rate)."""

    steps: int = 400
    """Optimiser steps."""
    batch_size: int = 64
    """Image-caption pairs per step."""
    lr: float = 3e-3
    """Peak AdamW learning rate (linear warm-up, then cosine decay to 0)."""
    warmup: int = 30
    """Warm-up steps."""
    weight_decay: float = 0.05
    """AdamW weight decay (the official config)."""
    js_weight: float = 0.5
    """``w`` of ``(1 - w) L_itc + w L_JS`` (the official ``w``); 0 turns the alignment loss off."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            positive_int(getattr(self, name), name)
        integer(self.warmup, "warmup", low=0)
        real(self.lr, "lr", low=0.0, low_open=True)
        real(self.weight_decay, "weight_decay", low=0.0)
        probability(self.js_weight, "js_weight")


def train_clip(
    model: TinyCLIP,
    *,
    scenes: SceneConfig,
    text: SceneTextEncoder,
    config: CLIPTrainConfig,
    seed: int,
    merge: MergeConfig | None = None,
) -> list[float]:
    """Train ``model`` in place on fresh scene batches; returns the loss of every step.

    Args:
        model: the CLIP to train.
        scenes: the scene world.
        text: tokenizer of the captions.
        config: optimisation settings.
        seed: batch ``i`` is ``generate_scenes(batch_size, seed=seed * 100003 + i)``; also seeds random drop.
        merge: merging during training (merging-aware fine-tuning); ``None`` trains unmerged.
    """
    if not isinstance(model, TinyCLIP):
        raise TypeError(f"model must be a TinyCLIP, got {type(model).__name__}")
    if not isinstance(config, CLIPTrainConfig):
        raise TypeError(f"config must be a CLIPTrainConfig, got {type(config).__name__}")
    if not isinstance(scenes, SceneConfig):
        raise TypeError(f"scenes must be a SceneConfig, got {type(scenes).__name__}")
    if not isinstance(text, SceneTextEncoder):
        raise TypeError(f"text must be a SceneTextEncoder, got {type(text).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if merge is not None and not isinstance(merge, MergeConfig):
        raise TypeError(f"merge must be a MergeConfig or None, got {type(merge).__name__}")
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sched = warmup_times_cosine(opt, warmup_steps=config.warmup, total_steps=config.steps)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    for step in range(config.steps):
        batch = generate_scenes(config.batch_size, config=scenes, seed=seed * 100003 + step)
        ids, mask = text.encode(batch.captions)
        out = model(torch.from_numpy(batch.images), ids, attention_mask=mask, content_ids=content_ids(batch),
                    merge=merge, js_weight=config.js_weight, generator=generator)  # fmt: skip
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()
        sched.step()
        losses.append(float(out["loss"].detach()))
    model.eval()
    return losses


@torch.no_grad()
def evaluate_retrieval(
    model: TinyCLIP,
    batch: SceneBatch,
    text: SceneTextEncoder,
    merge: MergeConfig | None = None,
    *,
    seed: int = 0,
    timing_repeats: int = 0,
    text_features: torch.Tensor | None = None,
) -> dict[str, float]:
    """Retrieval recall on ``batch`` with the image encoder merging by ``merge``, plus its cost.

    Returns ``i2t_r1``, ``t2i_r1``, ``i2t_r5``, ``t2i_r5``, ``mean_r1`` (percent), ``mflops`` (matmul MFLOPs of
    one image's forward pass, as measured) and, with ``timing_repeats > 0``, ``img_per_s`` (best of the
    repeats of encoding the whole batch on the current torch threads).
    """
    if not isinstance(model, TinyCLIP):
        raise TypeError(f"model must be a TinyCLIP, got {type(model).__name__}")
    if not isinstance(batch, SceneBatch):
        raise TypeError(f"batch must be a SceneBatch, got {type(batch).__name__}")
    if not isinstance(text, SceneTextEncoder):
        raise TypeError(f"text must be a SceneTextEncoder, got {type(text).__name__}")
    if isinstance(timing_repeats, bool) or not isinstance(timing_repeats, int) or timing_repeats < 0:
        raise ValueError(f"timing_repeats must be an int >= 0, got {timing_repeats!r}")
    model.eval()
    images = torch.from_numpy(batch.images)
    if text_features is None:
        ids, mask = text.encode(batch.captions)
        text_features = model.encode_text(ids, attention_mask=mask)
    image_features = model.encode_image(images, merge=merge, generator=torch.Generator().manual_seed(seed))
    out = retrieval_recall(image_features, text_features, content_ids(batch))
    out["mflops"] = count_flops(model.encode_image, images[:1], merge=merge,
                                generator=torch.Generator().manual_seed(seed)) / 1e6  # fmt: skip
    if timing_repeats > 0:
        best = math.inf
        for _ in range(timing_repeats):
            start = time.perf_counter()
            model.encode_image(images, merge=merge, generator=torch.Generator().manual_seed(seed))
            best = min(best, time.perf_counter() - start)
        out["img_per_s"] = len(batch) / best
    return out
