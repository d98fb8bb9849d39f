"""A tiny CLIP with learnable cross tokens and on-the-fly token merging in its image encoder.

Shi et al., "CrossGET: Cross-Guided Ensemble of Tokens for Accelerating Vision-Language Transformers",
ICML 2024 (https://arxiv.org/abs/2305.17455), applied to CLIP (Radford et al., 2021) as in the official
``CLIP/clip/model.py``:

- **Image encoder**: :class:`icml24.vision.tiny_vit.TinyViT` blocks (patch embedding, pre-norm blocks) with a
  CLS token in front and, with ``cross_tokens``, a *cross token* at the end. In every block the cross
  token's input is ``stopgrad(its previous state) + c_l`` with a learnable, zero-initialised ``c_l``
  (§3.1, "Cross Tokens"). After each block's attention the tokens are merged by the chosen rule
  (:class:`MergeConfig`), using the layer's keys and, for CrossGET, the cross token's query; attention uses
  the token sizes (proportional attention, ``+ log s_j``).
- **Text encoder**: :class:`icml24.language.TransformerLM` layers (bidirectional, learned positions) over
  word tokens; the pooled token is ``<bos>`` (index 0). Its cross token is ``stopgrad(pooled state) + c_l``
  at every layer (as the code builds it from the EOT token), attends to every real token and is hidden from
  them, so it never changes the text features. Text tokens are not merged (the headline CLIP run uses
  ``--rl 0``).
- **Losses** (``model.py``, ``train_retrieval_clip.py``): the symmetric contrastive loss
  :func:`contrastive_loss` (scenes with the same content are all positives, as the code's ``idx`` targets)
  and the cross-token alignment :func:`js_alignment_loss` on the per-layer cross tokens, layer-normed and
  projected with *frozen* copies of the final norm and projection; total ``(1 - w) L_itc + w L_JS``, ``w=0.5``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from icml24.language import TransformerConfig, TransformerLM
from icml24.multimodal.crossget.merging import (
    MergePlan,
    bipartite_soft_matching,
    check_tensor,
    complete_graph_soft_matching,
    cross_guided_importance,
    merge_tokens,
    random_drop,
)
from icml24.vision.tiny_vit import TinyViT

__all__ = ["MergeConfig", "TinyCLIP", "TinyCLIPConfig", "contrastive_loss", "js_alignment_loss"]

MergeMethod = Literal["none", "random", "tome", "complete", "crossget"]
METHODS: tuple[str, ...] = ("none", "random", "tome", "complete", "crossget")


@dataclass(frozen=True)
class TinyCLIPConfig:
    """Shape of :class:`TinyCLIP`. Defaults: the miniature of the notes (§6): 32×32 images, patch 4
    (64 patches), width 64, 4 image and 4 text layers."""

    vocab_size: int = 64
    """Text token ids (the tokenizer's ``vocab_size``)."""
    image_size: int = 32
    """Side of the square input images."""
    patch_size: int = 4
    """Side of a square patch: ``(image_size / patch_size)²`` patch tokens."""
    in_channels: int = 3
    """Image channels."""
    vision_width: int = 64
    """Token width of the image encoder."""
    vision_layers: int = 4
    """Image encoder blocks."""
    vision_heads: int = 4
    """Image attention heads."""
    vision_mlp: int = 128
    """Hidden width of the image MLPs."""
    text_width: int = 64
    """Token width of the text encoder."""
    text_layers: int = 4
    """Text encoder blocks (with ``cross_tokens``, as many as image blocks: the alignment loss pairs the
    cross tokens layer by layer, as CLIP ViT-B/16's 12 and 12)."""
    text_heads: int = 4
    """Text attention heads."""
    max_text_len: int = 48
    """Longest tokenised caption (with ``<bos>``/``<eos>``)."""
    embed_dim: int = 64
    """Joint embedding dimension."""
    cross_tokens: bool = True
    """Add the learnable cross tokens (CrossGET §3.1); ``False`` gives a plain CLIP."""
    pixel_mean: float = 0.5
    """Images are standardised as ``(x - pixel_mean) / pixel_std`` before the patch embedding (CLIP's
    preprocessing normalises by dataset statistics too; unnormalised ``[0, 1]`` scenes left a 4-block CLIP
    stuck at chance in pilots)."""
    pixel_std: float = 0.25
    """See ``pixel_mean``."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "image_size", "patch_size", "in_channels", "vision_width", "vision_layers",
                     "vision_heads", "vision_mlp", "text_width", "text_layers", "text_heads", "max_text_len",
                     "embed_dim"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if not (isinstance(self.pixel_std, (int, float)) and self.pixel_std > 0 and math.isfinite(self.pixel_std)):
            raise ValueError(f"pixel_std must be a finite number > 0, got {self.pixel_std!r}")
        if not (isinstance(self.pixel_mean, (int, float)) and math.isfinite(self.pixel_mean)):
            raise ValueError(f"pixel_mean must be a finite number, got {self.pixel_mean!r}")
        if self.image_size % self.patch_size:
            raise ValueError(f"patch_size ({self.patch_size}) must divide image_size ({self.image_size})")
        if self.vision_width % self.vision_heads:
            raise ValueError(f"vision_width ({self.vision_width}) must be divisible by vision_heads")
        if self.text_width % self.text_heads:
            raise ValueError(f"text_width ({self.text_width}) must be divisible by text_heads")
        if self.cross_tokens and self.text_layers != self.vision_layers:
            raise ValueError(f"with cross_tokens, text_layers ({self.text_layers}) must equal vision_layers "
                             f"({self.vision_layers})")  # fmt: skip

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class MergeConfig:
    """How the image encoder merges tokens at inference (and during merging-aware fine-tuning)."""

    method: MergeMethod = "crossget"
    """``"none"`` (unmerged), ``"random"`` (drop random tokens), ``"tome"`` (bipartite soft matching,
    size-weighted mean), ``"complete"`` (complete-graph matching without cross-guided importance) or
    ``"crossget"`` (complete-graph matching with cross-guided importance and ensemble)."""
    r: int = 8
    """Tokens removed in every image-encoder block (the paper's ``--rv``; capped at half the mergeable
    tokens of a block)."""
    weighted_ensemble: bool = True
    """CrossGET: merge with the importance weights ``2 softmax(I_a, I_b)``; ``False`` is the size-weighted
    mean (the "w/o cross-guided ensemble" ablation)."""
    proportional_attention: bool = True
    """Add ``log size`` to the attention logits (ToMe §3; CrossGET keeps it)."""
    tome_metric: Literal["head_mean", "keys"] = "head_mean"
    """ToMe's similarity features: keys averaged over heads (ToMe's code) or the full keys."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 0:
            raise ValueError(f"r must be an int >= 0, got {self.r!r}")
        if self.tome_metric not in ("head_mean", "keys"):
            raise ValueError(f"tome_metric must be 'head_mean' or 'keys', got {self.tome_metric!r}")

    @property
    def active(self) -> bool:
        return self.method != "none" and self.r > 0


def _attention(q, k, v, heads: int, bias: torch.Tensor | None) -> torch.Tensor:
    """Multi-head softmax attention of ``(B, T, C)`` projections with an additive ``(B, 1|T, T)`` bias."""
    b, t, c = q.shape
    s = k.shape[1]
    qh, kh, vh = (z.view(b, -1, heads, c // heads).transpose(1, 2) for z in (q, k, v))
    mask = None if bias is None else bias[:, None].expand(b, 1, t, s)
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
    return out.transpose(1, 2).reshape(b, t, c)


class TinyCLIP(nn.Module):
    """A two-tower CLIP whose image encoder merges tokens on the fly.

    Args:
        config: the shape (:class:`TinyCLIPConfig`).

    Example::

        model = TinyCLIP(config=TinyCLIPConfig(vocab_size=tok.vocab_size))
        img = model.encode_image(images, merge=MergeConfig(method="crossget", r=8))   # (B, embed_dim)
        txt = model.encode_text(ids, attention_mask=mask)                             # (B, embed_dim)
    """

    def __init__(self, *, config: TinyCLIPConfig) -> None:
        super().__init__()
        if not isinstance(config, TinyCLIPConfig):
            raise TypeError(f"config must be a TinyCLIPConfig, got {type(config).__name__}")
        self.config = c = config
        self.vision = TinyViT(image_size=c.image_size, patch_size=c.patch_size, in_channels=c.in_channels,
                              num_classes=c.embed_dim, dim=c.vision_width, depth=c.vision_layers,
                              num_heads=c.vision_heads, mlp_dim=c.vision_mlp, dropout=0.0)  # fmt: skip
        self.class_embedding = nn.Parameter(torch.randn(c.vision_width) * c.vision_width**-0.5)
        self.cls_position = nn.Parameter(torch.zeros(c.vision_width))
        self.text = TransformerLM(TransformerConfig(vocab_size=c.vocab_size, d_model=c.text_width,
                                                    n_layers=c.text_layers, n_heads=c.text_heads,
                                                    d_ff=2 * c.text_width, max_seq_len=c.max_text_len,
                                                    causal=False, positions="learned", norm="layernorm",
                                                    mlp="gelu", bias=True, dropout=0.0,
                                                    tie_embeddings=False))  # fmt: skip
        self.text_projection = nn.Linear(c.text_width, c.embed_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        if c.cross_tokens:
            # per-layer learnable cross-token offsets, zero-initialised (model.py: cross_image, cross_text)
            self.cross_image = nn.Parameter(torch.zeros(c.vision_layers, c.vision_width))
            self.cross_text = nn.Parameter(torch.zeros(c.text_layers, c.text_width))

    # ------------------------------------------------------------------ image side
    def _plan(self, merge: MergeConfig, keys, queries, prot, generator) -> MergePlan:
        b, t, c = keys.shape
        if merge.method == "random":
            return random_drop(b, t, merge.r, protected=prot, generator=generator)
        if merge.method == "tome":
            metric = keys
            if merge.tome_metric == "head_mean":
                heads = self.config.vision_heads
                metric = keys.view(b, t, heads, c // heads).mean(2)
            return bipartite_soft_matching(metric, merge.r, protected=prot, check_finite=False)
        if merge.method == "complete":
            return complete_graph_soft_matching(keys, merge.r, protected=prot, check_finite=False)
        if not self.config.cross_tokens:
            raise ValueError("merge method 'crossget' needs a model with cross_tokens=True")
        importance = cross_guided_importance(keys, queries[:, -1], check_finite=False)
        return complete_graph_soft_matching(keys, merge.r, protected=prot, importance=importance,
                                            weighted_ensemble=merge.weighted_ensemble, check_finite=False)  # fmt: skip

    def encode_image(
        self,
        images: torch.Tensor,
        *,
        merge: MergeConfig | None = None,
        return_cross: bool = False,
        return_tokens: bool = False,
        generator: torch.Generator | None = None,
    ):
        """Image features ``(B, embed_dim)`` (not normalised).

        Args:
            images: ``(B, C, H, W)``.
            merge: the merging rule (``None``: no merging).
            return_cross: also return the per-layer cross tokens in the joint space ``(L·B, embed_dim)``
                (for :func:`js_alignment_loss`).
            return_tokens: also return the token count entering each block (a list of ints).
            generator: random source of ``method="random"``.
        """
        merge = merge or MergeConfig(method="none", r=0)
        if not isinstance(merge, MergeConfig):
            raise TypeError(f"merge must be a MergeConfig or None, got {type(merge).__name__}")
        check_tensor("images", images, 4)
        c = self.config
        x = self.vision.tokens((images - c.pixel_mean) / c.pixel_std)
        b = x.shape[0]
        cls = (self.class_embedding + self.cls_position).expand(b, 1, -1)
        x = torch.cat([cls, x], dim=1)
        cross = c.cross_tokens
        if cross:
            x = torch.cat([x, x[:, :1]], dim=1)  # the cross token starts from the CLS embedding (model.py)
        size = torch.ones(x.shape[:2], dtype=x.dtype, device=x.device)
        prot_template = torch.zeros(x.shape[1], dtype=torch.bool, device=x.device)
        prot_template[0] = True
        if cross:
            prot_template[-1] = True
        cross_states, counts = [], []
        for i, block in enumerate(self.vision.blocks):
            if cross:
                state = x[:, -1].detach() + self.cross_image[i]
                cross_states.append(state)
                x = torch.cat([x[:, :-1], state[:, None]], dim=1)
            counts.append(x.shape[1])
            h = block.norm1(x)
            q, k, v = block.attn.qkv(h).chunk(3, dim=-1)
            bias = size.log()[:, None, :] if merge.proportional_attention and merge.active else None
            x = x + block.attn.proj(_attention(q, k, v, c.vision_heads, bias))
            if merge.active:
                t = x.shape[1]
                prot = torch.zeros(t, dtype=torch.bool, device=x.device)
                prot[0] = True
                if cross:
                    prot[-1] = True
                plan = self._plan(merge, k.detach(), q.detach(), prot, generator)
                # the images were checked finite once above: no per-block NaN scans in the timed path
                x, size = merge_tokens(x, size, plan, check_finite=False)
            x = x + block.mlp(block.norm2(x))
        pooled = self.vision.norm(x[:, 0])
        features = self.vision.head(pooled)
        extras = []
        if return_cross:
            extras.append(self._project_cross(cross_states, self.vision.norm, self.vision.head))
        if return_tokens:
            extras.append(counts)
        return (features, *extras) if extras else features

    @staticmethod
    def _project_cross(states: list[torch.Tensor], norm: nn.LayerNorm, proj: nn.Linear) -> torch.Tensor:
        """Per-layer cross tokens through *frozen* copies of the final norm and projection (model.py)."""
        if not states:
            raise ValueError("return_cross needs a model with cross_tokens=True")
        z = F.layer_norm(torch.cat(states), norm.normalized_shape, norm.weight.detach(), norm.bias.detach(),
                         norm.eps)  # fmt: skip
        return F.linear(z, proj.weight.detach(), None if proj.bias is None else proj.bias.detach())

    # ------------------------------------------------------------------ text side
    def encode_text(self, input_ids: torch.Tensor, *, attention_mask: torch.Tensor | None = None,
                    return_cross: bool = False):  # fmt: skip
        """Text features ``(B, embed_dim)`` from the ``<bos>`` token (index 0), not normalised.

        Args:
            input_ids: ``(B, T)`` int64 ids, ``<bos>`` first.
            attention_mask: ``(B, T)`` 1 for real tokens, 0 for padding (``None``: no padding).
            return_cross: also return the per-layer cross tokens in the joint space ``(L·B, embed_dim)``.
        """
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
            raise TypeError("input_ids must be an integer tensor of shape (batch, seq)")
        if input_ids.dim() != 2 or input_ids.shape[1] > self.config.max_text_len:
            raise ValueError(f"input_ids must have shape (batch, seq <= {self.config.max_text_len}), got "
                             f"{tuple(input_ids.shape)}")  # fmt: skip
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size:
            raise ValueError(f"input_ids must lie in [0, {self.config.vocab_size})")
        b, t = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones(b, t, dtype=torch.bool, device=input_ids.device)
        elif attention_mask.shape != (b, t):
            raise ValueError(f"attention_mask must have shape {(b, t)}, got {tuple(attention_mask.shape)}")
        real = attention_mask.to(torch.bool)
        lm = self.text
        pos = torch.arange(t, device=input_ids.device)
        x = lm.embed_tokens(input_ids) + lm.embed_positions(pos)[None]
        cross = self.config.cross_tokens
        neg = torch.tensor(-math.inf, dtype=x.dtype, device=x.device)
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        key_bias = torch.where(real, zero, neg)  # (B, T)
        if cross:
            # the cross token (last) attends to every real token; the text tokens never see it
            bias = torch.cat([key_bias[:, None, :].expand(b, t, t), neg.expand(b, t, 1)], dim=2)
            bias = torch.cat([bias, torch.cat([key_bias, zero.expand(b)[:, None]], dim=1)[:, None]], dim=1)
            x = torch.cat([x, x[:, :1]], dim=1)
        else:
            bias = key_bias[:, None, :].expand(b, t, t)
        cross_states = []
        heads = self.config.text_heads
        for i, layer in enumerate(lm.layers):
            if cross:
                state = x[:, 0].detach() + self.cross_text[i]
                cross_states.append(state)
                x = torch.cat([x[:, :-1], state[:, None]], dim=1)
            h = layer.input_layernorm(x)
            a = layer.self_attn
            x = x + a.o_proj(_attention(a.q_proj(h), a.k_proj(h), a.v_proj(h), heads, bias))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        features = self.text_projection(lm.norm(x[:, 0]))
        if return_cross:
            return features, self._project_cross(cross_states, lm.norm, self.text_projection)
        return features

    def forward(self, images, input_ids, *, attention_mask=None, content_ids=None,
                merge: MergeConfig | None = None, js_weight: float = 0.5,
                generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
        """Training losses: ``{"loss", "contrastive", "js"}`` with ``loss = (1 - w) L_itc + w L_JS``.

        Args:
            images, input_ids, attention_mask: a batch of paired images and captions.
            content_ids: ``(B,)`` ids of the scene content; equal ids are all positives (``None``: diagonal).
            merge: merging during training (merging-aware fine-tuning), ``None``: none.
            js_weight: ``w``; 0 switches the alignment loss off (the "w/o L_JS" ablation); needs
                ``cross_tokens`` when positive.
        """
        if not (isinstance(js_weight, (int, float)) and 0 <= js_weight <= 1):
            raise ValueError(f"js_weight must lie in [0, 1], got {js_weight!r}")
        use_js = js_weight > 0 and self.config.cross_tokens
        img = self.encode_image(images, merge=merge, return_cross=use_js, generator=generator)
        txt = self.encode_text(input_ids, attention_mask=attention_mask, return_cross=use_js)
        if use_js:
            (img, img_cross), (txt, txt_cross) = img, txt
        itc = contrastive_loss(img, txt, self.logit_scale, content_ids=content_ids)
        js = js_alignment_loss(img_cross, txt_cross) if use_js else itc.new_zeros(())
        w = js_weight if use_js else 0.0
        return {"loss": (1 - w) * itc + w * js, "contrastive": itc, "js": js}


def contrastive_loss(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor, *,
                     content_ids: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """CLIP's symmetric InfoNCE on cosine similarities, with every equal-content pair a positive.

    ``L = ½ (CE_i→t + CE_t→i)`` with soft targets ``1[id_i = id_j] / #{j: id_i = id_j}`` (the official
    ``model.py`` ``sim_targets``); ``logit_scale`` is the log temperature, clamped to ``[0, log 100]``.
    """
    check_tensor("image_features", image_features, 2)
    check_tensor("text_features", text_features, 2)
    check_tensor("logit_scale", logit_scale)
    if image_features.shape != text_features.shape:
        raise ValueError(f"image_features and text_features must be equal (B, D) tensors, got "
                         f"{tuple(image_features.shape)} and {tuple(text_features.shape)}")  # fmt: skip
    img = F.normalize(image_features, dim=-1)
    txt = F.normalize(text_features, dim=-1)
    logits = logit_scale.clamp(0, math.log(100)).exp() * img @ txt.T
    b = img.shape[0]
    if content_ids is None:
        targets = torch.eye(b, dtype=logits.dtype, device=logits.device)
    else:
        if content_ids.shape != (b,):
            raise ValueError(f"content_ids must have shape ({b},), got {tuple(content_ids.shape)}")
        same = (content_ids[:, None] == content_ids[None, :]).to(logits.dtype)
        targets = same / same.sum(1, keepdim=True)
    i2t = -(F.log_softmax(logits, dim=1) * targets).sum(1).mean()
    t2i = -(F.log_softmax(logits.T, dim=1) * targets).sum(1).mean()
    return (i2t + t2i) / 2


def js_alignment_loss(image_cross: torch.Tensor, text_cross: torch.Tensor) -> torch.Tensor:
    """Cross-token alignment (CrossGET §3.1, the official ``loss_kd``): softmax each cross token over the
    embedding dimension, ``m = (p + q) / 2``, ``L = ½ (KL(m ‖ p) + KL(m ‖ q))`` averaged over rows.

    ``F.kl_div(log p, m)`` is ``KL(m ‖ p)``, so this is the *reverse* of the Jensen-Shannon divergence's
    ``KL(p ‖ m)`` terms: zero iff ``p = q``, non-negative, symmetric in the two modalities.

    Args:
        image_cross, text_cross: ``(N, D)`` cross tokens of the two modalities in the joint space.
    """
    check_tensor("image_cross", image_cross, 2)
    check_tensor("text_cross", text_cross, 2)
    if image_cross.shape != text_cross.shape:
        raise ValueError(f"image_cross and text_cross must be equal (N, D) tensors, got "
                         f"{tuple(image_cross.shape)} and {tuple(text_cross.shape)}")  # fmt: skip
    mean = (F.softmax(image_cross, dim=-1) + F.softmax(text_cross, dim=-1)) / 2
    kl_img = F.kl_div(F.log_softmax(image_cross, dim=-1), mean, reduction="batchmean")
    kl_txt = F.kl_div(F.log_softmax(text_cross, dim=-1), mean, reduction="batchmean")
    return (kl_img + kl_txt) / 2
