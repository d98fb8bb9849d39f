"""Libra's decoupled vision system inside a frozen causal LM, and the LLaVA-style baseline.

Xu, Yang, Song, Xu, "Libra: Building Decoupled Vision System on Large Language Models", ICML 2024
(PMLR 235:55371-55388), https://arxiv.org/abs/2405.10140, code https://github.com/YifanXu74/Libra.

Every position ``i`` of a sequence carries a modality flag ``v_i`` (``True`` for a visual token). In every
decoder layer of a pre-trained LM the text tokens go through the LM's own (frozen) norms, ``q/k/v/o``
projections and MLP, and the visual tokens through a parallel, separately parameterised *routed visual
expert* of the same shapes whose linear maps are low rank (:class:`LibraLinear`, ``W = B A`` with inner
width ``out / down_ratio``, the paper's ``down_ratio = 4``). The two streams meet only in attention, where a
*cross-modal bridge* (rank-8 :class:`LibraLinear` maps with a zero-initialised up-projection, so the model
starts as if it had none) adds a modality-specific correction to the keys and values of the *other*
modality (Section 3.2 of the paper; ``LibraAttention`` in the official ``modeling_libra.py``):

.. math::

    k^{\\text{vis-view}}_j = k_j + [v_j = 0]\\, B^k_{\\text{lang}}(h_j), \\qquad
    k^{\\text{txt-view}}_j = k_j + [v_j = 1]\\, B^k_{\\text{vis}}(h_j)

(the same two views for the values), and a query of modality ``v_i`` attends over the view of its own
modality: ``o_i = O_{v_i}(softmax_j(q_i k^{view(v_i)}_j / sqrt(d_h) + causal) val^{view(v_i)}_j)``.
A visual position's input embedding fuses its discrete codes (one embedding of width ``d / C`` per codebook)
with its continuous feature: ``Linear(RMSNorm([e_1(c_1); ...; e_C(c_C); f]))``; its output goes through a
separate final norm and a multi-codebook vision head that predicts the next position's codes, so the model
trains with next-token prediction on text *and* on visual codes (Section 3.3).

With every flag off the model is the frozen LM, bit for bit (tested), so text-only behaviour cannot change
while the LM is frozen. Decoding keeps both key/value views in :class:`LibraKVCache` (a text query reads the
text view of every earlier token, a visual query the visual view), as the official code does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from icml24.common.validation import positive_int
from icml24.language.training import IGNORE_INDEX
from icml24.language.transformer import KVCache, TransformerLM, _apply_rope, rope_cos_sin

__all__ = [
    "LLaVAKVCache",
    "LLaVAStyleModel",
    "LibraConfig",
    "LibraKVCache",
    "LibraLinear",
    "LibraModel",
    "LibraOutput",
    "VisualInputEmbedding",
    "libra_loss",
    "route",
]


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraConfig:
    """The decoupled vision system. Defaults: the paper's (``configuration_libra.py``) where they apply at this
    scale; ``codebook_size`` and ``feature_dim`` follow the k-means patch tokenizer used here."""

    down_ratio: int = 4
    """Inner width of every visual-expert :class:`LibraLinear` is ``out_features // down_ratio`` (paper: 4)."""
    use_bridge: bool = True
    """Add the cross-modal bridge to the keys and values (Section 3.2); ``False``: the "w/o bridge" ablation."""
    bridge_rank: int = 8
    """Rank of each bridge map (paper: 8)."""
    n_codebooks: int = 2
    """Discrete codes per visual position (paper: 2 codebooks of 514 ids)."""
    codebook_size: int = 64
    """Codes per codebook (k of the k-means tokenizer); one more id, ``codebook_size``, is the
    begin-of-image token."""
    feature_dim: int = 192
    """Width of the continuous feature of a visual position (paper: 2048-d CLIP features; here a flattened
    8×8×3 patch)."""
    use_codes: bool = True
    """Feed the discrete codes' embeddings (hybrid input with ``use_features``; Section 3.3)."""
    use_features: bool = True
    """Feed the continuous features."""
    vision_loss_weight: float = 1.0
    """Weight of the visual next-code loss next to the text loss (the paper's joint loss: 1)."""
    max_vision_tokens: int = 17
    """Visual positions per image, the begin-of-image token included (paper: 578 = 24² + 2); the size of the
    learned visual position embedding."""
    use_position_embedding: bool = True
    """Add a learned embedding of the visual position inside the image (the official
    ``use_vision_position_embedding``; here on, as raw patches carry no position, unlike CLIP features)."""

    def __post_init__(self) -> None:
        for name in ("down_ratio", "bridge_rank", "n_codebooks", "codebook_size", "feature_dim", "max_vision_tokens"):
            positive_int(getattr(self, name), name)
        for name in ("use_bridge", "use_codes", "use_features", "use_position_embedding"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not (self.use_codes or self.use_features):
            raise ValueError("use_codes and use_features cannot both be False: a visual token needs an input")
        w = self.vision_loss_weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ValueError(f"vision_loss_weight must be a finite number >= 0, got {w!r}")

    @property
    def boi_id(self) -> int:
        """The begin-of-image code id (in every codebook)."""
        return self.codebook_size

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------


class LibraLinear(nn.Module):
    """A low-rank linear map ``y = B (A x)`` (Section 3.2; ``LibraLinear`` of the official code).

    ``A`` is ``(inner, in_features)`` and ``B`` is ``(out_features, inner)`` with ``inner = rank`` when given
    (the bridges) and ``out_features // down_ratio`` otherwise (the visual experts). Initialisation follows the
    official ``_init_weights``: both factors ``N(0, 0.02)``, except that ``B`` is zero for a given ``rank``
    (the bridge starts at zero). No bias (the official code asserts ``bias=False``).

    Args:
        in_features, out_features: sizes of ``x`` and ``y``.
        down_ratio: ``inner = out_features // down_ratio`` when ``rank`` is None.
        rank: the inner width (the bridge's rank), overriding ``down_ratio``; ``B`` starts at zero.
    """

    def __init__(self, in_features: int, out_features: int, *, down_ratio: int = 4, rank: int | None = None) -> None:
        super().__init__()
        positive_int(in_features, "in_features")
        positive_int(out_features, "out_features")
        positive_int(down_ratio, "down_ratio")
        if rank is not None:
            positive_int(rank, "rank")
        inner = rank if rank is not None else out_features // down_ratio
        if inner < 1:
            raise ValueError(f"down_ratio ({down_ratio}) must not exceed out_features ({out_features})")
        self.in_features, self.out_features, self.inner, self.rank = in_features, out_features, inner, rank
        self.weight_A = nn.Parameter(torch.empty(inner, in_features))
        self.weight_B = nn.Parameter(torch.empty(out_features, inner))
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        nn.init.normal_(self.weight_A, std=std)
        if self.rank is not None:
            nn.init.zeros_(self.weight_B)
        else:
            nn.init.normal_(self.weight_B, std=std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(x, self.weight_A), self.weight_B)

    @property
    def weight(self) -> torch.Tensor:
        """The dense ``(out_features, in_features)`` matrix ``B A``."""
        return self.weight_B @ self.weight_A

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, inner={self.inner}"


class _Routing:
    """Where the visual tokens of a batch are, computed once per forward (one ``nonzero`` instead of one per
    routed module): flat indices of the text and the visual positions, and the ``(B, T)`` flag itself."""

    def __init__(self, flag: torch.Tensor) -> None:
        flat = flag.reshape(-1)
        self.flag = flag
        self.all_vision = bool(flat.all())
        self.vision_index = flat.nonzero().squeeze(1)
        self.text_index = (~flat).nonzero().squeeze(1)

    @staticmethod
    def of(flag: torch.Tensor | None) -> _Routing | None:
        """``None`` when there is no visual token (every module is then called on the whole input)."""
        return None if flag is None or not bool(flag.any()) else _Routing(flag)


def _route(x: torch.Tensor, routing: _Routing | None, text_fn, vision_fn) -> torch.Tensor:
    if routing is None:
        return text_fn(x)
    if routing.all_vision:
        return vision_fn(x)
    flat = x.reshape(-1, x.shape[-1])
    text = text_fn(flat.index_select(0, routing.text_index))
    vision = vision_fn(flat.index_select(0, routing.vision_index)).to(text.dtype)
    out = text.new_empty(flat.shape[0], text.shape[-1])
    out.index_copy_(0, routing.text_index, text)
    out.index_copy_(0, routing.vision_index, vision)
    return out.view(*x.shape[:-1], text.shape[-1])


def route(x: torch.Tensor, flag: torch.Tensor | None, text_fn: Callable[[torch.Tensor], torch.Tensor],
          vision_fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:  # fmt: skip
    """Per-token modality routing (``cal_language_vision`` of the official code): ``text_fn`` on the positions
    whose ``flag`` is False, ``vision_fn`` on the others; each module sees only its own tokens.

    Args:
        x: ``(B, T, d)``.
        flag: ``(B, T)`` bool, True at visual positions; ``None`` means all text.
        text_fn, vision_fn: maps ``(N, d) -> (N, d')`` applied to the gathered rows of their modality.

    A batch of one modality calls that module on ``x`` itself (no gather), which keeps a text-only forward
    bit-identical to the base LM's.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise TypeError("x must be a torch.Tensor of shape (B, T, d)")
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite")
    if flag is not None and (not isinstance(flag, torch.Tensor) or flag.dtype != torch.bool
                             or flag.shape != x.shape[:-1]):  # fmt: skip
        raise TypeError(f"flag must be None or a bool tensor of shape {tuple(x.shape[:-1])}")
    return _route(x, _Routing.of(flag), text_fn, vision_fn)


class LibraKVCache:
    """Keys and values of the tokens seen so far, per layer, in both views (``key/value_states_for_vision`` and
    ``_for_language`` of the official cache): ``(B, H_kv, T, Dh)`` each, keys after RoPE. Without a bridge the
    two views coincide and only the text view is kept."""

    def __init__(self, n_layers: int) -> None:
        positive_int(n_layers, "n_layers")
        self.text: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layers
        self.vision: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layers
        self.vision_run: torch.Tensor | None = None
        """``(B,)`` visual tokens at the end of the cached sequence (the next visual token's index in its image)."""

    @property
    def length(self) -> int:
        first = self.text[0]
        return 0 if first is None else int(first[0].shape[2])

    @staticmethod
    def _cat(old, new):
        if old is None:
            return new
        return torch.cat([old[0], new[0]], dim=2), torch.cat([old[1], new[1]], dim=2)

    def update(self, layer: int, text_kv, vision_kv=None):
        self.text[layer] = self._cat(self.text[layer], text_kv)
        if vision_kv is not None:
            self.vision[layer] = self._cat(self.vision[layer], vision_kv)
        return self.text[layer], (self.vision[layer] if vision_kv is not None else self.text[layer])


class LLaVAKVCache(KVCache):
    """The LM's :class:`icml24.language.KVCache`, plus the running visual-token count of each row."""

    def __init__(self, n_layers: int) -> None:
        super().__init__(n_layers)
        self.vision_run: torch.Tensor | None = None


def _rms_norm(dim: int, eps: float) -> nn.RMSNorm:
    return nn.RMSNorm(dim, eps=eps)


class VisualInputEmbedding(nn.Module):
    """The hybrid input of a visual position (Section 3.3; ``get_inputs_embeds_from_multicodebook``):
    ``Linear(RMSNorm([e_1(c_1); ...; e_C(c_C); f]))`` with one embedding table of width ``d_model / C`` per
    codebook (``codebook_size + 1`` ids, the last the begin-of-image token) and the continuous feature ``f``.
    ``use_codes=False`` / ``use_features=False`` drop one source (the discrete-only / continuous-only
    ablations)."""

    def __init__(self, d_model: int, config: LibraConfig, *, eps: float = 1e-5) -> None:
        super().__init__()
        if not isinstance(config, LibraConfig):
            raise TypeError(f"config must be a LibraConfig, got {type(config).__name__}")
        positive_int(d_model, "d_model")
        if config.use_codes and d_model % config.n_codebooks:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_codebooks ({config.n_codebooks})")
        self.config = config
        width = 0
        if config.use_codes:
            self.vision_embed_tokens = nn.ModuleList(
                nn.Embedding(config.codebook_size + 1, d_model // config.n_codebooks) for _ in range(config.n_codebooks))
            for e in self.vision_embed_tokens:
                nn.init.normal_(e.weight, std=0.02)
            width += d_model
        if config.use_features:
            width += config.feature_dim
        if config.use_position_embedding:
            self.vision_position_embedding = nn.Embedding(config.max_vision_tokens, width)
            nn.init.normal_(self.vision_position_embedding.weight, std=0.02)
        self.vision_signal_norm = _rms_norm(width, eps)
        self.vision_signal_processor = nn.Linear(width, d_model, bias=False)
        nn.init.normal_(self.vision_signal_processor.weight, std=0.02)

    def forward(self, codes: torch.Tensor, features: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """``codes (..., C)`` int64, ``features (..., feature_dim)`` float and ``positions (...)`` (the index of
        each visual token inside its image, 0 for the begin-of-image token) -> ``(..., d_model)``."""
        parts = []
        if self.config.use_codes:
            parts += [emb(codes[..., i]) for i, emb in enumerate(self.vision_embed_tokens)]
        if self.config.use_features:
            parts.append(features.to(self.vision_signal_processor.weight.dtype))
        x = torch.cat(parts, dim=-1)
        if self.config.use_position_embedding:
            if positions is None:
                raise ValueError("positions are needed with config.use_position_embedding")
            x = x + self.vision_position_embedding(positions.clamp_max(self.config.max_vision_tokens - 1))
        return self.vision_signal_processor(self.vision_signal_norm(x))


class LibraAttention(nn.Module):
    """The visual expert's attention projections and the cross-modal bridge of one layer; the text projections
    are the frozen LM's (passed to :meth:`forward`, not owned, so they appear once in ``named_parameters``)."""

    def __init__(self, lm_attention: nn.Module, config: LibraConfig) -> None:
        super().__init__()
        c = lm_attention.config
        d, q_out, kv_out = c.d_model, c.n_heads * c.head_dim, c.kv_heads * c.head_dim
        r = config.down_ratio
        self.vision_q_proj = LibraLinear(d, q_out, down_ratio=r)
        self.vision_k_proj = LibraLinear(d, kv_out, down_ratio=r)
        self.vision_v_proj = LibraLinear(d, kv_out, down_ratio=r)
        self.vision_o_proj = LibraLinear(q_out, d, down_ratio=r)
        self.use_bridge = config.use_bridge
        if config.use_bridge:
            rank = config.bridge_rank
            # "on_language" maps text tokens (their keys/values as seen by visual queries), "on_vision" the other way.
            self.vision_k_bridge_on_language = LibraLinear(d, kv_out, rank=rank)
            self.vision_k_bridge_on_vision = LibraLinear(d, kv_out, rank=rank)
            self.vision_v_bridge_on_language = LibraLinear(d, kv_out, rank=rank)
            self.vision_v_bridge_on_vision = LibraLinear(d, kv_out, rank=rank)

    def forward(self, lm_attention: nn.Module, h: torch.Tensor, routing: _Routing | None, mask: torch.Tensor,
                rope: tuple[torch.Tensor, torch.Tensor] | None, cache: LibraKVCache | None) -> torch.Tensor:  # fmt: skip
        c = lm_attention.config
        b, t, _ = h.shape
        any_vision = routing is not None
        f = routing

        def heads(x: torch.Tensor, n: int) -> torch.Tensor:
            return x.view(b, t, n, c.head_dim).transpose(1, 2)

        q = _route(h, f, lm_attention.q_proj, self.vision_q_proj)
        k = _route(h, f, lm_attention.k_proj, self.vision_k_proj)
        v = _route(h, f, lm_attention.v_proj, self.vision_v_proj)
        # Two views are needed whenever a visual query may read these keys: now (visual tokens in the input) or
        # later (a cache, which may receive visual tokens after these).
        two_views = self.use_bridge and (any_vision or cache is not None)
        if two_views:
            kb = _route(h, f, self.vision_k_bridge_on_language, self.vision_k_bridge_on_vision)
            vb = _route(h, f, self.vision_v_bridge_on_language, self.vision_v_bridge_on_vision)
            is_vis = (f.flag if f is not None else torch.zeros(b, t, dtype=torch.bool, device=h.device))[..., None]
            k_txt, v_txt = torch.where(is_vis, k + kb, k), torch.where(is_vis, v + vb, v)
            k_vis, v_vis = torch.where(is_vis, k, k + kb), torch.where(is_vis, v, v + vb)
        else:
            k_txt, v_txt, k_vis, v_vis = k, v, k, v
        q = heads(q, c.n_heads)
        k_txt, v_txt = heads(k_txt, c.kv_heads), heads(v_txt, c.kv_heads)
        k_vis, v_vis = (k_txt, v_txt) if not two_views else (heads(k_vis, c.kv_heads), heads(v_vis, c.kv_heads))
        if rope is not None:
            q, k_txt = _apply_rope(q, *rope), _apply_rope(k_txt, *rope)
            k_vis = _apply_rope(k_vis, *rope) if two_views else k_txt
        if cache is not None:
            (k_txt, v_txt), (k_vis, v_vis) = cache.update(lm_attention.layer_index, (k_txt, v_txt),
                                                          (k_vis, v_vis) if two_views else None)  # fmt: skip
        if c.kv_heads != c.n_heads:
            rep = c.n_heads // c.kv_heads
            k_txt, v_txt = k_txt.repeat_interleave(rep, dim=1), v_txt.repeat_interleave(rep, dim=1)
            k_vis, v_vis = k_vis.repeat_interleave(rep, dim=1), v_vis.repeat_interleave(rep, dim=1)
        # Each query row reads its own modality's view: one attention per view, then a per-row choice (the
        # official code mixes the score rows, then the value rows: the same thing).
        any_text = f is None or not f.all_vision
        out_t = F.scaled_dot_product_attention(q, k_txt, v_txt, attn_mask=mask) if any_text else None
        if any_vision:
            out_v = F.scaled_dot_product_attention(q, k_vis, v_vis, attn_mask=mask)
            out = out_v if out_t is None else torch.where(f.flag[:, None, :, None], out_v, out_t)
        else:
            out = out_t
        out = out.transpose(1, 2).reshape(b, t, c.n_heads * c.head_dim)
        return _route(out, f, lm_attention.o_proj, self.vision_o_proj)


class LibraMLP(nn.Module):
    """The visual expert's SwiGLU MLP, ``down(silu(gate x) * up x)`` with :class:`LibraLinear` maps."""

    def __init__(self, d_model: int, d_ff: int, config: LibraConfig, *, swiglu: bool = True) -> None:
        super().__init__()
        r = config.down_ratio
        self.swiglu = swiglu
        if swiglu:
            self.vision_gate_proj = LibraLinear(d_model, d_ff, down_ratio=r)
        self.vision_up_proj = LibraLinear(d_model, d_ff, down_ratio=r)
        self.vision_down_proj = LibraLinear(d_ff, d_model, down_ratio=r)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.swiglu:
            return self.vision_down_proj(F.silu(self.vision_gate_proj(x)) * self.vision_up_proj(x))
        return self.vision_down_proj(F.gelu(self.vision_up_proj(x), approximate="tanh"))


class LibraDecoderLayer(nn.Module):
    """The visual half of one decoder layer: its own two norms, attention expert with bridge, and MLP expert."""

    def __init__(self, lm_block: nn.Module, config: LibraConfig) -> None:
        super().__init__()
        c = lm_block.self_attn.config
        self.vision_input_layernorm = _rms_norm(c.d_model, c.norm_eps)
        self.vision_post_attention_layernorm = _rms_norm(c.d_model, c.norm_eps)
        self.self_attn = LibraAttention(lm_block.self_attn, config)
        self.mlp = LibraMLP(c.d_model, c.ff_dim, config, swiglu=c.mlp == "swiglu")

    def forward(self, lm_block: nn.Module, x, routing, mask, rope, cache):
        h = _route(x, routing, lm_block.input_layernorm, self.vision_input_layernorm)
        x = x + self.self_attn(lm_block.self_attn, h, routing, mask, rope, cache)
        h = _route(x, routing, lm_block.post_attention_layernorm, self.vision_post_attention_layernorm)
        return x + _route(h, routing, lm_block.mlp, self.mlp)


# --------------------------------------------------------------------------------------------------
# The models
# --------------------------------------------------------------------------------------------------


class LibraOutput(NamedTuple):
    """What :class:`LibraModel` and :class:`LLaVAStyleModel` return."""

    text_logits: torch.Tensor
    """``(B, T, vocab)``: next text token at text positions (0 at visual positions for Libra, which scores text
    only where the token is text)."""
    vision_logits: torch.Tensor | None
    """``(B, T, C, codebook_size)``: the next position's codes at visual positions (0 elsewhere); ``None`` for
    a model without a vision head."""


def _check_lm(language_model: object) -> TransformerLM:
    if not isinstance(language_model, TransformerLM):
        raise TypeError(f"language_model must be an icml24.language.TransformerLM, got {type(language_model).__name__}")
    c = language_model.config
    if not c.causal:
        raise ValueError("language_model must be causal (config.causal=True)")
    if c.norm_groups != 1 or c.norm != "rmsnorm":
        raise ValueError("language_model must use ungrouped RMSNorm (a Llama-style config)")
    return language_model


def _check_inputs(model: nn.Module, input_ids, vision_flag, vision_codes, vision_features, cache, cache_type):
    lm: TransformerLM = model.language_model
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError("input_ids must be an integer torch.Tensor of shape (batch, seq)")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (batch, seq), got {tuple(input_ids.shape)}")
    b, t = input_ids.shape
    if vision_flag is not None:
        if not isinstance(vision_flag, torch.Tensor) or vision_flag.dtype != torch.bool or vision_flag.shape != (b, t):
            raise TypeError(f"vision_flag must be a bool tensor of shape {(b, t)}")
    if cache is not None and not isinstance(cache, cache_type):
        raise TypeError(f"cache must be a {cache_type.__name__} or None, got {type(cache).__name__}")
    past = cache.length if cache is not None else 0
    if past + t > lm.config.max_seq_len:
        raise ValueError(f"sequence length {past + t} exceeds the LM's max_seq_len {lm.config.max_seq_len}")
    text = ~vision_flag if vision_flag is not None else torch.ones_like(input_ids, dtype=torch.bool)
    ids = input_ids[text]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= lm.config.vocab_size):
        raise ValueError(f"input_ids at text positions must lie in [0, {lm.config.vocab_size})")
    has_vision = vision_flag is not None and bool(vision_flag.any())
    if has_vision:
        cfg: LibraConfig = model.config
        if cfg.use_codes:
            if not isinstance(vision_codes, torch.Tensor) or vision_codes.shape != (b, t, cfg.n_codebooks) \
                    or vision_codes.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"vision_codes must be an integer tensor of shape {(b, t, cfg.n_codebooks)}")
            vc = vision_codes[vision_flag]
            if int(vc.min()) < 0 or int(vc.max()) > cfg.codebook_size:
                raise ValueError(f"vision_codes at visual positions must lie in [0, {cfg.codebook_size}]")
        if cfg.use_features:
            if not isinstance(vision_features, torch.Tensor) or vision_features.shape != (b, t, cfg.feature_dim):
                raise ValueError(f"vision_features must be a float tensor of shape {(b, t, cfg.feature_dim)}")
            if not bool(torch.isfinite(vision_features[vision_flag]).all()):
                raise ValueError("vision_features must be finite at visual positions")
    return b, t, past, has_vision


def _positions(lm: TransformerLM, b: int, t: int, past: int, device: torch.device):
    pos = torch.arange(past, past + t, device=device).expand(b, t)
    rope = rope_cos_sin(pos, lm.config.head_dim, lm.config.rope_theta) if lm.config.positions == "rope" else None
    keys = torch.arange(past + t, device=device)
    queries = torch.arange(past, past + t, device=device)
    mask = (keys[None, :] <= queries[:, None])[None, None]
    return pos, rope, mask


def _embed(model: nn.Module, input_ids, vision_flag, vision_codes, vision_features, pos, has_vision,
           cache=None) -> torch.Tensor:  # fmt: skip
    lm: TransformerLM = model.language_model
    b, t = input_ids.shape
    offset = cache.vision_run if cache is not None and cache.vision_run is not None else None
    if offset is None:
        offset = torch.zeros(b, dtype=torch.long, device=input_ids.device)
    if has_vision:
        # The index of each visual token inside its image: visual tokens counted since the last text token,
        # continuing the cached sequence's count.
        run = torch.cumsum(vision_flag.long(), dim=1) + offset[:, None]
        last_text = torch.cummax(torch.where(vision_flag, 0, run), dim=1).values
        vis_index = run - last_text - 1
    if cache is not None:
        cache.vision_run = (run[:, -1] - last_text[:, -1]) if has_vision else torch.zeros_like(offset)
    if not has_vision:
        x = lm.embed_tokens(input_ids)
    else:
        cfg = model.config
        codes = vision_codes[vision_flag] if vision_codes is not None else None
        feats = vision_features[vision_flag] if vision_features is not None else None
        if codes is None:
            codes = torch.zeros(int(vision_flag.sum()), cfg.n_codebooks, dtype=torch.long, device=input_ids.device)
        if feats is None:
            feats = torch.zeros(int(vision_flag.sum()), cfg.feature_dim, device=input_ids.device)
        vis_pos = vis_index[vision_flag]
        text_emb = lm.embed_tokens(input_ids[~vision_flag])
        x = text_emb.new_empty(b, t, lm.config.d_model)
        x[~vision_flag] = text_emb
        x[vision_flag] = model.visual_tokens(codes, feats, vis_pos).to(text_emb.dtype)
    if lm.embed_positions is not None:
        x = x + lm.embed_positions(pos)
    return x


class LibraModel(nn.Module):
    """Libra: a frozen causal LM with a routed visual expert and cross-modal bridge in every layer.

    Args:
        language_model: the pre-trained :class:`icml24.language.TransformerLM` (Llama style). It is held as
            ``self.language_model``; with ``freeze_language_model`` every parameter of it is frozen
            (the paper's ``frozen_language: True``: only modules named ``vision_*`` train).
        config: the vision system (:class:`LibraConfig`).
        freeze_language_model: set ``requires_grad=False`` on the LM's parameters.

    ``forward(input_ids, vision_flag=, vision_codes=, vision_features=, cache=)`` returns a
    :class:`LibraOutput`. ``input_ids`` is read at text positions, ``vision_codes`` ``(B, T, C)`` and
    ``vision_features`` ``(B, T, feature_dim)`` at visual ones; sequences of a batch are aligned (causal mask
    only: pad on the right).
    """

    def __init__(self, language_model: TransformerLM, *, config: LibraConfig | None = None,
                 freeze_language_model: bool = True) -> None:  # fmt: skip
        super().__init__()
        lm = _check_lm(language_model)
        config = LibraConfig() if config is None else config
        if not isinstance(config, LibraConfig):
            raise TypeError(f"config must be a LibraConfig, got {type(config).__name__}")
        if not isinstance(freeze_language_model, bool):
            raise TypeError(f"freeze_language_model must be True or False, got {freeze_language_model!r}")
        c = lm.config
        if config.use_codes and c.d_model % config.n_codebooks:
            raise ValueError(f"config.n_codebooks ({config.n_codebooks}) must divide the LM's d_model ({c.d_model})")
        if min(c.d_model, c.kv_heads * c.head_dim) < config.down_ratio:
            raise ValueError(f"config.down_ratio ({config.down_ratio}) exceeds the LM's projection widths")
        self.config = config
        self.language_model = lm
        if freeze_language_model:
            lm.requires_grad_(False)
        self.visual_tokens = VisualInputEmbedding(c.d_model, config, eps=c.norm_eps)
        self.layers = nn.ModuleList(LibraDecoderLayer(block, config) for block in lm.layers)
        self.vision_norm = _rms_norm(c.d_model, c.norm_eps)
        self.vision_lm_head = nn.ModuleList(nn.Linear(c.d_model, config.codebook_size, bias=False)
                                            for _ in range(config.n_codebooks))  # fmt: skip
        for head in self.vision_lm_head:
            nn.init.normal_(head.weight, std=0.02)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Parameter count (shared tensors once); ``trainable_only`` counts those with ``requires_grad``."""
        seen = {id(p): p for p in self.parameters() if p.requires_grad or not trainable_only}
        return sum(p.numel() for p in seen.values())

    def new_cache(self) -> LibraKVCache:
        """An empty two-view :class:`LibraKVCache` for decoding."""
        return LibraKVCache(self.language_model.config.n_layers)

    def forward(self, input_ids: torch.Tensor, *, vision_flag: torch.Tensor | None = None,
                vision_codes: torch.Tensor | None = None, vision_features: torch.Tensor | None = None,
                cache: LibraKVCache | None = None) -> LibraOutput:  # fmt: skip
        b, t, past, has_vision = _check_inputs(self, input_ids, vision_flag, vision_codes, vision_features, cache,
                                               LibraKVCache)  # fmt: skip
        lm = self.language_model
        flag = vision_flag if has_vision else None
        pos, rope, mask = _positions(lm, b, t, past, input_ids.device)
        x = _embed(self, input_ids, flag, vision_codes, vision_features, pos, has_vision, cache)
        x = lm.dropout(x)
        routing = _Routing.of(flag)
        for block, layer in zip(lm.layers, self.layers):
            x = layer(block, x, routing, mask, rope, cache)
        x = _route(x, routing, lm.norm, self.vision_norm)
        if routing is None:
            return LibraOutput(lm.lm_head(x), None)
        flat = x.reshape(b * t, -1)
        cfg = self.config
        text_logits = x.new_zeros(b * t, lm.config.vocab_size)
        if routing.text_index.numel():
            text_logits.index_copy_(0, routing.text_index, lm.lm_head(flat.index_select(0, routing.text_index)))
        xv = flat.index_select(0, routing.vision_index)
        vision_logits = x.new_zeros(b * t, cfg.n_codebooks, cfg.codebook_size)
        vision_logits.index_copy_(0, routing.vision_index, torch.stack([head(xv) for head in self.vision_lm_head], 1))
        return LibraOutput(text_logits.view(b, t, -1), vision_logits.view(b, t, cfg.n_codebooks, cfg.codebook_size))


class LLaVAStyleModel(nn.Module):
    """The LLaVA-style baseline: the same visual input embedding, then an MLP projector, and the projected
    visual tokens go through the *shared* LM weights like text (Liu et al., 2023/2024: a linear or 2-layer MLP
    projector into a frozen LLM's input space).

    Args:
        language_model: the pre-trained :class:`icml24.language.TransformerLM`.
        config: the visual input (codes/features; the Libra-only fields are unused).
        projector_hidden: hidden width of the 2-layer GELU MLP projector; ``0`` means one linear layer (set it to
            match another model's trainable parameter count).
        freeze_language_model: freeze the LM (``False``: the full fine-tuning baseline).
    """

    def __init__(self, language_model: TransformerLM, *, config: LibraConfig | None = None, projector_hidden: int = 0,
                 freeze_language_model: bool = True) -> None:  # fmt: skip
        super().__init__()
        lm = _check_lm(language_model)
        config = LibraConfig() if config is None else config
        if not isinstance(config, LibraConfig):
            raise TypeError(f"config must be a LibraConfig, got {type(config).__name__}")
        if isinstance(projector_hidden, bool) or not isinstance(projector_hidden, int) or projector_hidden < 0:
            raise ValueError(f"projector_hidden must be an int >= 0, got {projector_hidden!r}")
        if not isinstance(freeze_language_model, bool):
            raise TypeError(f"freeze_language_model must be True or False, got {freeze_language_model!r}")
        d = lm.config.d_model
        self.config = config
        self.language_model = lm
        lm.requires_grad_(not freeze_language_model)
        self.visual_tokens_embed = VisualInputEmbedding(d, config, eps=lm.config.norm_eps)
        if projector_hidden:
            self.projector = nn.Sequential(nn.Linear(d, projector_hidden), nn.GELU(), nn.Linear(projector_hidden, d))
        else:
            self.projector = nn.Linear(d, d)

    def visual_tokens(self, codes: torch.Tensor, features: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        return self.projector(self.visual_tokens_embed(codes, features, positions))

    num_parameters = LibraModel.num_parameters

    def new_cache(self) -> LLaVAKVCache:
        """An empty :class:`LLaVAKVCache` for decoding."""
        return LLaVAKVCache(self.language_model.config.n_layers)

    def forward(self, input_ids: torch.Tensor, *, vision_flag: torch.Tensor | None = None,
                vision_codes: torch.Tensor | None = None, vision_features: torch.Tensor | None = None,
                cache: LLaVAKVCache | None = None) -> LibraOutput:  # fmt: skip
        b, t, past, has_vision = _check_inputs(self, input_ids, vision_flag, vision_codes, vision_features, cache,
                                               LLaVAKVCache)  # fmt: skip
        lm = self.language_model
        pos, rope, mask = _positions(lm, b, t, past, input_ids.device)
        x = lm.dropout(_embed(self, input_ids, vision_flag if has_vision else None, vision_codes, vision_features,
                              pos, has_vision, cache))  # fmt: skip
        for block in lm.layers:
            x = block(x, mask, rope, cache)
        return LibraOutput(lm.lm_head(lm.norm(x)), None)


# --------------------------------------------------------------------------------------------------
# The joint loss
# --------------------------------------------------------------------------------------------------


def libra_loss(output: LibraOutput, text_labels: torch.Tensor, vision_labels: torch.Tensor | None = None, *,
               vision_loss_weight: float = 1.0) -> torch.Tensor:  # fmt: skip
    """The joint next-token loss (Section 3.3): cross-entropy of the text head on ``text_labels`` plus
    ``vision_loss_weight`` times the mean over codebooks of the vision heads' cross-entropy on
    ``vision_labels``.

    Args:
        output: a model's :class:`LibraOutput`.
        text_labels: ``(B, T)`` next text token per position, ``IGNORE_INDEX`` where none counts (every visual
            position: their text logits are not scores).
        vision_labels: ``(B, T, C)`` next codes per position, ``IGNORE_INDEX`` where none counts (every text
            position); ``None`` or a model without a vision head: text loss only.
        vision_loss_weight: weight of the visual term (finite, >= 0).
    """
    if not isinstance(output, LibraOutput):
        raise TypeError(f"output must be a LibraOutput, got {type(output).__name__}")
    if not isinstance(text_labels, torch.Tensor) or text_labels.shape != output.text_logits.shape[:2]:
        raise ValueError(f"text_labels must be a tensor of shape {tuple(output.text_logits.shape[:2])}")
    w = vision_loss_weight
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
        raise ValueError(f"vision_loss_weight must be a finite number >= 0, got {w!r}")
    logits = output.text_logits
    if not bool((text_labels != IGNORE_INDEX).any()):
        loss = logits.sum() * 0.0
    else:
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), text_labels.reshape(-1),
                               ignore_index=IGNORE_INDEX)
    if vision_labels is None or output.vision_logits is None or w == 0:
        return loss
    vl = output.vision_logits
    if not isinstance(vision_labels, torch.Tensor) or vision_labels.shape != vl.shape[:3]:
        raise ValueError(f"vision_labels must be a tensor of shape {tuple(vl.shape[:3])}")
    if not bool((vision_labels != IGNORE_INDEX).any()):
        return loss
    per_codebook = [F.cross_entropy(vl[:, :, i].reshape(-1, vl.shape[-1]), vision_labels[:, :, i].reshape(-1),
                                    ignore_index=IGNORE_INDEX) for i in range(vl.shape[2])]  # fmt: skip
    return loss + w * torch.stack(per_codebook).mean()
