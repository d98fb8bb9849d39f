"""Frozen backbones for the vision-inside-a-frozen-LM papers (issue 18: memvp, libra), pre-trained in-run.

Shared helper, landed early by the memvp helper for memvp and libra (reuse it rather than writing a second
copy). Both papers start from a *frozen* pre-trained language model and a *frozen* pre-trained vision
encoder and train only small bridging modules. At CPU scale neither backbone can be downloaded, so both are
pre-trained in-run on the shared scene world (:mod:`icml24.multimodal.scenes`), once per process:

- :func:`pretrain_scene_lm`: a Llama-style :class:`~icml24.language.TransformerLM` trained by next-token
  prediction on scene *text only* (captions, question-answer pairs, and captions followed by a question and
  its answer). It knows the words, the answer vocabulary and how to read a description in its context, but
  has never seen an image: the visual information has to come from the method under test.
- :func:`pretrain_scene_encoder`: a :class:`~icml24.vision.tiny_vit.TinyViT` trained to predict the colour
  and shape of the object in every grid cell (or "empty") from its patch tokens; :class:`SceneEncoder`
  returns the ``(B, n, C)`` patch features of its last block (``n = (image_size / patch_size)²``), the
  stand-in for the frozen CLIP ViT-L/14 patch features of the papers.

Both functions are memoised per process on ``(config, seed)`` and return a fresh deep copy with every
parameter frozen (``requires_grad=False``) and in eval mode, so the variants of one job share one
pre-training and may patch their copy freely.

Example::

    from icml24.multimodal.frozen_lm import SceneLMConfig, pretrain_scene_lm
    lm, tokenizer = pretrain_scene_lm(SceneLMConfig(steps=50), seed=0)
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml24.language.tokenizers import WordTokenizer
from icml24.language.training import TrainConfig, causal_lm_labels, train_lm
from icml24.language.transformer import TransformerConfig, TransformerLM
from icml24.multimodal.scenes import SceneBatch, SceneConfig, generate_scenes, scene_vocabulary
from icml24.vision.tiny_vit import TinyViT

__all__ = [
    "PretrainedSceneLM",
    "SceneEncoder",
    "SceneEncoderConfig",
    "SceneLMConfig",
    "pretrain_scene_encoder",
    "pretrain_scene_lm",
    "qa_prompt",
    "scene_lm_documents",
    "scene_tokenizer",
]


def _check_int(name: str, value: object, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def _check_pos(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


@dataclass(frozen=True)
class SceneLMConfig:
    """The tiny frozen language model of the scene papers and its text-only pre-training."""

    d_model: int = 64
    """Width of the residual stream."""
    n_layers: int = 4
    """Transformer blocks (Llama-style: RMSNorm, SwiGLU, RoPE, tied embeddings)."""
    n_heads: int = 4
    """Attention heads."""
    max_seq_len: int = 320
    """Longest sequence the model accepts (room for 256 prepended visual tokens plus the text)."""
    steps: int = 400
    """Pre-training steps."""
    batch_size: int = 32
    """Documents per step."""
    lr: float = 3e-3
    """Peak AdamW learning rate (linear warm-up over 5% of the steps, cosine decay to 10%)."""
    pool: int = 4096
    """Distinct scenes whose texts make the pre-training corpus."""
    scenes: SceneConfig = field(default_factory=SceneConfig)
    """The scene world the texts describe."""

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "max_seq_len", "steps", "batch_size", "pool"):
            _check_int(name, getattr(self, name))
        _check_pos("lr", self.lr)
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}) into an even "
                             "head dimension (RoPE)")  # fmt: skip
        if not isinstance(self.scenes, SceneConfig):
            raise TypeError(f"scenes must be a SceneConfig, got {type(self.scenes).__name__}")

    def transformer_config(self, vocab_size: int) -> TransformerConfig:
        """The :class:`TransformerConfig` of the model (Llama-compatible, so ``to_hf_llama`` maps it)."""
        return TransformerConfig(vocab_size=vocab_size, d_model=self.d_model, n_layers=self.n_layers,
                                 n_heads=self.n_heads, max_seq_len=self.max_seq_len)  # fmt: skip


def scene_tokenizer(scenes: SceneConfig | None = None) -> WordTokenizer:
    """A :class:`WordTokenizer` over every word of the scene world's captions, questions and answers."""
    if scenes is not None and not isinstance(scenes, SceneConfig):
        raise TypeError(f"scenes must be a SceneConfig or None, got {type(scenes).__name__}")
    return WordTokenizer(scene_vocabulary(scenes))


def qa_prompt(question: str) -> str:
    """The text prompt of a visual question: the question itself (the answer is the next word)."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    return question


def scene_lm_documents(batch: SceneBatch, seed: int = 0) -> list[str]:
    """The text-only pre-training documents of ``batch``: per scene, one of (with probabilities 1/2, 1/4, 1/4)
    ``"caption question answer"`` (reading a description in context), the caption alone, or
    ``"question answer"`` alone (the answer prior a text-only model can learn)."""
    if not isinstance(batch, SceneBatch):
        raise TypeError(f"batch must be a SceneBatch, got {type(batch).__name__}")
    _check_int("seed", seed, low=0)
    u = np.random.default_rng(seed).random(len(batch))
    docs = []
    for i in range(len(batch)):
        qa = f"{qa_prompt(batch.questions[i])} {batch.answers[i]}"
        docs.append(f"{batch.captions[i]} {qa}" if u[i] < 0.5 else batch.captions[i] if u[i] < 0.75 else qa)
    return docs


class PretrainedSceneLM(NamedTuple):
    """What :func:`pretrain_scene_lm` returns: unpack as ``lm, tokenizer = pretrain_scene_lm(...)``."""

    model: TransformerLM
    """The frozen language model (eval mode, no parameter requires gradients)."""
    tokenizer: WordTokenizer
    """Its word tokenizer (:func:`scene_tokenizer`)."""


def _freeze(module: nn.Module) -> nn.Module:
    for p in module.parameters():
        p.requires_grad_(False)
    return module.eval()


@functools.lru_cache(maxsize=8)
def _pretrain_lm(config: SceneLMConfig, seed: int) -> tuple[TransformerLM, WordTokenizer, float]:
    tok = scene_tokenizer(config.scenes)
    batch = generate_scenes(config.pool, config=config.scenes, seed=10_000 + seed)
    ids, mask = tok.batch(scene_lm_documents(batch, seed=seed), bos=True, eos=True)
    labels = causal_lm_labels(ids, attention_mask=mask)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TransformerLM(config.transformer_config(tok.vocab_size))

    def sample(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.randint(0, ids.shape[0], (config.batch_size,), generator=gen)
        width = int(mask[rows].sum(1).max())
        return ids[rows, :width], labels[rows, :width]

    warm = max(1, config.steps // 20)
    history = train_lm(model, sample, TrainConfig(steps=config.steps, lr=config.lr, warmup_steps=warm,
                                                  min_lr_ratio=0.1, weight_decay=0.01), seed=seed)  # fmt: skip
    return _freeze(model), tok, float(history[-1]["loss"])


def pretrain_scene_lm(config: SceneLMConfig | None = None, *, seed: int = 0) -> PretrainedSceneLM:
    """A tiny causal LM pre-trained on scene text only (:func:`scene_lm_documents`), frozen.

    Memoised per process on ``(config, seed)``; each call returns a deep copy (patch it freely). The final
    pre-training loss is in ``model.pretrain_loss``.
    """
    config = SceneLMConfig() if config is None else config
    if not isinstance(config, SceneLMConfig):
        raise TypeError(f"config must be a SceneLMConfig, got {type(config).__name__}")
    _check_int("seed", seed, low=0)
    model, tok, loss = _pretrain_lm(config, int(seed))
    out = copy.deepcopy(model)
    out.pretrain_loss = loss
    return PretrainedSceneLM(out, tok)


@dataclass(frozen=True)
class SceneEncoderConfig:
    """The tiny frozen vision encoder of the scene papers and its attribute pre-training."""

    patch_size: int = 8
    """Side of a patch: ``n = (image_size / patch_size)²`` patch features (8 on 32×32 images: 16)."""
    dim: int = 48
    """Token width ``C`` (the feature dimension the bridging modules see)."""
    depth: int = 2
    """ViT blocks."""
    num_heads: int = 4
    """Attention heads."""
    mlp_dim: int = 96
    """Hidden width of the ViT MLPs."""
    steps: int = 300
    """Pre-training steps."""
    batch_size: int = 64
    """Images per step."""
    lr: float = 2e-3
    """AdamW learning rate."""
    scenes: SceneConfig = field(default_factory=SceneConfig)
    """The scene world."""

    def __post_init__(self) -> None:
        for name in ("patch_size", "dim", "depth", "num_heads", "mlp_dim", "steps", "batch_size"):
            _check_int(name, getattr(self, name))
        _check_pos("lr", self.lr)
        if not isinstance(self.scenes, SceneConfig):
            raise TypeError(f"scenes must be a SceneConfig, got {type(self.scenes).__name__}")
        if self.scenes.image_size % self.patch_size:
            raise ValueError(f"patch_size ({self.patch_size}) must divide the scenes' image_size "
                             f"({self.scenes.image_size})")  # fmt: skip
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")

    @property
    def num_patches(self) -> int:
        return (self.scenes.image_size // self.patch_size) ** 2


class SceneEncoder(nn.Module):
    """Patch features ``(B, n, C)`` of a :class:`TinyViT` (its last block's tokens after the final norm)."""

    def __init__(self, vit: TinyViT) -> None:
        super().__init__()
        if not isinstance(vit, TinyViT):
            raise TypeError(f"vit must be a TinyViT, got {type(vit).__name__}")
        self.vit = vit

    @property
    def num_patches(self) -> int:
        return self.vit.num_tokens

    @property
    def feature_dim(self) -> int:
        return self.vit.norm.normalized_shape[0]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.vit.tokens(images)
        for block in self.vit.blocks:
            x = block(x)
        return self.vit.norm(x)


@functools.lru_cache(maxsize=8)
def _pretrain_encoder(config: SceneEncoderConfig, seed: int) -> SceneEncoder:
    sc = config.scenes
    cells = sc.grid**2
    n_col, n_shp = len(sc.colours) + 1, len(sc.shapes) + 1  # class 0: empty cell
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vit = TinyViT(image_size=sc.image_size, patch_size=config.patch_size, in_channels=3, num_classes=1,
                      dim=config.dim, depth=config.depth, num_heads=config.num_heads, mlp_dim=config.mlp_dim,
                      dropout=0.0)  # fmt: skip
        encoder = SceneEncoder(vit)
        head = nn.Linear(vit.num_tokens * config.dim, cells * (n_col + n_shp))
    params = list(encoder.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.01)
    for step in range(config.steps):
        b = generate_scenes(config.batch_size, config=sc, seed=20_000_000 + 1000 * seed + step)
        col = np.zeros((len(b), cells), np.int64)
        shp = np.zeros((len(b), cells), np.int64)
        rows, slots = np.nonzero(b.present)
        col[rows, b.cell[rows, slots]] = b.colour[rows, slots] + 1
        shp[rows, b.cell[rows, slots]] = b.shape[rows, slots] + 1
        logits = head(encoder(torch.from_numpy(b.images)).flatten(1)).view(len(b), cells, n_col + n_shp)
        loss = F.cross_entropy(logits[..., :n_col].reshape(-1, n_col), torch.from_numpy(col).view(-1)) + \
            F.cross_entropy(logits[..., n_col:].reshape(-1, n_shp), torch.from_numpy(shp).view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    encoder.pretrain_loss = float(loss.detach())
    return _freeze(encoder)


def pretrain_scene_encoder(config: SceneEncoderConfig | None = None, *, seed: int = 0) -> SceneEncoder:
    """A tiny ViT pre-trained to name the colour and shape in every grid cell, frozen; returns patch features.

    Memoised per process on ``(config, seed)``; each call returns a deep copy. The final pre-training loss
    (sum of the colour and shape cross-entropies, per cell) is in ``encoder.pretrain_loss``.
    """
    config = SceneEncoderConfig() if config is None else config
    if not isinstance(config, SceneEncoderConfig):
        raise TypeError(f"config must be a SceneEncoderConfig, got {type(config).__name__}")
    _check_int("seed", seed, low=0)
    encoder = _pretrain_encoder(config, int(seed))
    out = copy.deepcopy(encoder)
    out.pretrain_loss = encoder.pretrain_loss
    return out
