"""The Med-VQA transformer with intent-guided attention (Uni-Med, Wu et al., ICML 2024, Section 3).

Uni-Med builds on MedVInT: a vision encoder turns the image into visual tokens that are prepended to the
question tokens of a language model. Here, at CPU scale, the shared tiny ViT
(:class:`icml24.vision.tiny_vit.TinyViT`, its patch embedding and ``image_layers`` blocks) encodes the scan
into ``P`` visual tokens, and ``fusion_layers`` pre-norm transformer blocks run over ``[CLS; visual tokens;
question tokens]``; a linear head on the CLS token scores the answer vocabulary (classification instead of
LLM generation).

Intent-guided attention (the paper's "intention-guided attention"; its formula is not in the released code,
so this is the PASTA-style steering the paper's README credits, Zhang et al. 2023): in every head of every
fusion layer, the attention probability of each query on a key outside the intent span of the question is
multiplied by ``alpha`` and each row is renormalised,

    A'_ij = s_j A_ij / sum_k s_k A_ik,   s_j = alpha for non-intent question tokens, 1 otherwise,

which equals adding ``log s_j`` to the attention logits. ``alpha = 1`` is vanilla attention; ``alpha = 0``
makes the CLS output independent of the non-intent words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from icml24.multimodal.uni_med.data import ANSWERS, question_tokenizer
from icml24.vision.tiny_vit import TinyViT

__all__ = ["IntentGuidedAttention", "MedVQAConfig", "MedVQATransformer", "intent_key_scale"]


def _pos_int(name: str, v: object, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
    return v


@dataclass(frozen=True)
class MedVQAConfig:
    """Shape of :class:`MedVQATransformer` (defaults: the CPU miniature of the notes)."""

    image_size: int = 16
    """Side of the square input scan."""
    patch_size: int = 4
    """Side of a patch; ``(image_size / patch_size)**2`` visual tokens."""
    in_channels: int = 1
    """Image channels."""
    dim: int = 48
    """Token width."""
    num_heads: int = 4
    """Attention heads."""
    image_layers: int = 1
    """Blocks of the tiny-ViT image encoder (before the visual tokens meet the question)."""
    fusion_layers: int = 2
    """Joint blocks over ``[CLS; visual; question]`` tokens."""
    mlp_dim: int = 96
    """Hidden width of each MLP."""
    dropout: float = 0.0
    """Dropout in the blocks."""
    vocab_size: int = question_tokenizer().vocab_size
    """Question vocabulary size (``<pad>`` = 0 is never attended to)."""
    max_question_len: int = 32
    """Longest question (learned text positions)."""
    num_answers: int = len(ANSWERS)
    """Answer classes."""
    intent_alpha: float | None = None
    """Intent-guided attention: the factor on non-intent question keys (PASTA's default 0.01); ``None``
    turns it off (vanilla attention, the baseline)."""
    intent_feature: bool = False
    """Give the intent tags as an input feature instead: a learned embedding of each question word's tag
    (intent / not) added to its word embedding, vanilla attention. The information-matched baseline of
    intent-guided attention: the same oracle tags, without the attention mechanism."""

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "in_channels", "dim", "num_heads", "image_layers", "mlp_dim",
                     "vocab_size", "max_question_len", "num_answers"):  # fmt: skip
            _pos_int(name, getattr(self, name))
        _pos_int("fusion_layers", self.fusion_layers)
        if self.image_size % self.patch_size:
            raise ValueError(f"patch_size ({self.patch_size}) must divide image_size ({self.image_size})")
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        a = self.intent_alpha
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a <= 1):
            raise ValueError(f"intent_alpha must be None or a number in [0, 1], got {a!r}")
        if not isinstance(self.intent_feature, bool):
            raise TypeError(f"intent_feature must be True or False, got {self.intent_feature!r}")

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def intent_key_scale(questions: torch.Tensor, intent_mask: torch.Tensor | None, alpha: float | None,
                     num_prefix: int) -> torch.Tensor:  # fmt: skip
    """Per-key attention factors ``s_j`` of ``[prefix; question]`` keys, ``(B, num_prefix + L)``.

    Prefix keys (CLS and visual tokens) and intent words get 1, non-intent words ``alpha`` (1 when ``alpha``
    or ``intent_mask`` is None), padding (id 0) gets 0 (never attended to).
    """
    if not isinstance(questions, torch.Tensor) or questions.dim() != 2:
        raise ValueError("questions must be a (B, L) tensor of word ids")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1):
        raise ValueError(f"alpha must be None or a number in [0, 1], got {alpha!r}")
    _pos_int("num_prefix", num_prefix, minimum=0)
    text = torch.ones(questions.shape, dtype=torch.float32, device=questions.device)
    if alpha is not None and intent_mask is not None:
        if not isinstance(intent_mask, torch.Tensor) or intent_mask.shape != questions.shape:
            raise ValueError(f"intent_mask must be a bool tensor of shape {tuple(questions.shape)}")
        text = torch.where(intent_mask.bool(), text, torch.full_like(text, float(alpha)))
    text = text * (questions != 0)
    prefix = torch.ones(questions.shape[0], num_prefix, dtype=torch.float32, device=questions.device)
    return torch.cat([prefix, text], dim=1)


class IntentGuidedAttention(nn.Module):
    """Multi-head self-attention whose probabilities on each key are rescaled by ``key_scale`` and renormalised.

    ``forward(x, key_scale)`` with ``x`` of shape ``(B, N, C)`` and ``key_scale`` ``(B, N)`` in ``[0, 1]``
    (``None``: all ones, vanilla softmax attention). Set ``record = True`` to keep the last attention
    probabilities ``(B, heads, N, N)`` in ``last_attention`` (for grounding metrics).
    """

    def __init__(self, *, dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        _pos_int("dim", dim)
        _pos_int("num_heads", num_heads)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if dim % num_heads:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.record = False
        self.last_attention: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, key_scale: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            raise ValueError(f"x must be a (B, N, C) tensor, got {getattr(x, 'shape', type(x).__name__)}")
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        logits = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        if key_scale is not None:
            if key_scale.shape != (b, n):
                raise ValueError(f"key_scale must have shape ({b}, {n}), got {tuple(key_scale.shape)}")
            # s_j A_ij / sum_k s_k A_ik == softmax(logits + log s): log 0 = -inf drops the key exactly.
            logits = logits + torch.log(key_scale.to(logits.dtype))[:, None, None, :]
        attn = logits.softmax(-1)
        if self.record:
            self.last_attention = attn.detach()
        out = (self.drop(attn) @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(out)


class _FusionBlock(nn.Module):
    def __init__(self, cfg: MedVQAConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = IntentGuidedAttention(dim=cfg.dim, num_heads=cfg.num_heads, dropout=cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, cfg.mlp_dim), nn.GELU(), nn.Dropout(cfg.dropout),
                                 nn.Linear(cfg.mlp_dim, cfg.dim), nn.Dropout(cfg.dropout))  # fmt: skip

    def forward(self, x: torch.Tensor, key_scale: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), key_scale)
        return x + self.mlp(self.norm2(x))


class MedVQATransformer(nn.Module):
    """Image encoder (shared tiny ViT) + fusion transformer + answer head; see the module docstring.

    ``forward(images, questions, intent_mask=None)`` returns answer logits ``(B, num_answers)``; it is
    ``fuse(encode_tokens(embed_image(images)), questions, intent_mask)``, split so that token-level cut-mix
    (:func:`icml24.multimodal.uni_med.token_cutmix`) can act on the patch tokens in between.
    """

    def __init__(self, *, config: MedVQAConfig | None = None, **overrides: object):
        super().__init__()
        cfg = MedVQAConfig() if config is None else config
        if not isinstance(cfg, MedVQAConfig):
            raise TypeError(f"config must be a MedVQAConfig, got {type(cfg).__name__}")
        cfg = replace(cfg, **overrides) if overrides else cfg
        self.config = cfg
        self.image_encoder = TinyViT(image_size=cfg.image_size, patch_size=cfg.patch_size,
                                     in_channels=cfg.in_channels, num_classes=1, dim=cfg.dim, depth=cfg.image_layers,
                                     num_heads=cfg.num_heads, mlp_dim=cfg.mlp_dim, dropout=cfg.dropout)  # fmt: skip
        self.image_encoder.head = nn.Identity()  # the ViT's classifier is not used: its tokens are
        self.word_embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=0)
        self.text_pos = nn.Parameter(torch.zeros(1, cfg.max_question_len, cfg.dim))
        self.type_embed = nn.Parameter(torch.zeros(1, 3, cfg.dim))  # CLS, visual, text
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        for p in (self.text_pos, self.type_embed, self.cls):
            nn.init.trunc_normal_(p, std=0.02)
        self.blocks = nn.ModuleList(_FusionBlock(cfg) for _ in range(cfg.fusion_layers))
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_answers)
        if cfg.intent_feature:  # built last and zero-initialised: every other parameter as in the baseline
            self.intent_embed = nn.Embedding(2, cfg.dim)
            nn.init.zeros_(self.intent_embed.weight)

    def embed_image(self, images: torch.Tensor) -> torch.Tensor:
        """Patch tokens ``(B, P, dim)``: the tiny ViT's patch embedding plus positions (where cut-mix acts)."""
        return self.image_encoder.tokens(images)

    def encode_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Visual tokens ``(B, P, dim)``: the tiny-ViT blocks over patch tokens."""
        for block in self.image_encoder.blocks:
            tokens = block(tokens)
        return tokens

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Visual tokens ``(B, P, dim)`` of the tiny-ViT encoder: ``encode_tokens(embed_image(images))``."""
        return self.encode_tokens(self.embed_image(images))

    def fuse(self, visual: torch.Tensor, questions: torch.Tensor, intent_mask: torch.Tensor | None = None,
             *, record_attention: bool = False) -> torch.Tensor:  # fmt: skip
        """Answer logits from visual tokens and question word ids ``(B, L)`` (0 = padding).

        ``intent_mask`` ``(B, L)`` marks the intent words; it only matters when ``config.intent_alpha`` is set
        (attention) or ``config.intent_feature`` (an input feature; then it is required).
        With ``record_attention`` each fusion layer keeps its attention probabilities (``blocks[i].attn.
        last_attention``; token order ``[CLS, visual..., question...]``).
        """
        cfg = self.config
        if not isinstance(questions, torch.Tensor) or questions.dim() != 2 or questions.dtype != torch.long:
            raise ValueError("questions must be a (B, L) int64 tensor of word ids")
        if questions.shape[1] > cfg.max_question_len:
            raise ValueError(f"questions must have at most max_question_len={cfg.max_question_len} words, "
                             f"got {questions.shape[1]}")  # fmt: skip
        if questions.numel() and (int(questions.min()) < 0 or int(questions.max()) >= cfg.vocab_size):
            raise ValueError(f"questions must hold word ids in [0, {cfg.vocab_size})")
        if not isinstance(visual, torch.Tensor) or visual.dim() != 3 or visual.shape[0] != questions.shape[0] \
                or visual.shape[2] != cfg.dim:  # fmt: skip
            raise ValueError(f"visual must be a (B, P, {cfg.dim}) tensor with the questions' batch size")
        b, length = questions.shape
        text = self.word_embed(questions) + self.text_pos[:, :length] + self.type_embed[:, 2:3]
        if cfg.intent_feature:
            if not isinstance(intent_mask, torch.Tensor) or intent_mask.shape != questions.shape:
                raise ValueError(f"intent_mask must be a bool tensor of shape {tuple(questions.shape)} when "
                                 "config.intent_feature is set")  # fmt: skip
            text = text + self.intent_embed(intent_mask.long())
        x = torch.cat([self.cls.expand(b, -1, -1) + self.type_embed[:, 0:1], visual + self.type_embed[:, 1:2], text], 1)
        scale = intent_key_scale(questions, intent_mask, cfg.intent_alpha, 1 + visual.shape[1])
        for block in self.blocks:
            block.attn.record = record_attention
            x = block(x, scale)
        return self.head(self.norm(x[:, 0]))

    def forward(self, images: torch.Tensor, questions: torch.Tensor,
                intent_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        return self.fuse(self.encode_image(images), questions, intent_mask)
