"""One small transformer for every language (and text-side multimodal) reproduction.

A pre-LN transformer (Xiong et al., 2020, "On Layer Normalization in the Transformer Architecture") with
either a causal mask (decoder, GPT/Llama style) or none (bidirectional encoder, BERT style), learned,
rotary (RoPE; Su et al., 2021, arXiv:2104.09864, eq. 34) or no positions, and a KV cache for decoding.

The module names follow ``transformers``' Llama implementation (``embed_tokens``, ``layers.{i}.self_attn.
{q,k,v,o}_proj``, ``layers.{i}.mlp.{gate,up,down}_proj``, ``input_layernorm``,
``post_attention_layernorm``, ``norm``, ``lm_head``), so that a Llama-style config (RMSNorm, SwiGLU, RoPE,
no biases) maps weight for weight onto ``transformers.LlamaForCausalLM``: :func:`to_hf_llama` and
:func:`from_hf_llama` do it, and a test checks that both give the same logits. GPT-2-style options
(LayerNorm, GELU MLP with ``up_proj``/``down_proj`` only, learned positions) use the same names.

Papers replace parts through plain module surgery: every block is a :class:`Block` with ``self_attn`` and
``mlp`` attributes; ``mlp_factory(config, layer_index)`` builds each block's feed-forward module (SpikeLM
puts spiking neurons there, memvp extra key-value memory slots), and ``attention_factory(config,
layer_index)`` builds each block's self-attention (SpikeLM spikes its inputs, keys and values).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "Attention",
    "Block",
    "GroupedNorm",
    "KVCache",
    "MLP",
    "TransformerConfig",
    "TransformerLM",
    "from_hf_llama",
    "rope_cos_sin",
    "to_hf_llama",
]

Positions = Literal["learned", "rope", "none"]


@dataclass(frozen=True)
class TransformerConfig:
    """The shape of a :class:`TransformerLM`. Defaults: the ~0.8 M-parameter toy LM of the notes."""

    vocab_size: int = 64
    """Number of token ids (the tokenizer's ``vocab_size``)."""
    d_model: int = 128
    """Width of the residual stream."""
    n_layers: int = 4
    """Number of transformer blocks."""
    n_heads: int = 4
    """Attention heads; ``d_model`` must be divisible by it."""
    n_kv_heads: int | None = None
    """Key/value heads for grouped-query attention (Llama); ``None`` means ``n_heads``."""
    d_ff: int | None = None
    """Hidden width of the feed-forward layer; ``None`` means ``4 * d_model`` (GELU) or the Llama rule
    ``256 * ceil(8 d_model / 3 / 256)`` (SwiGLU)."""
    max_seq_len: int = 256
    """Longest sequence (learned positions and the RoPE table are this long)."""
    causal: bool = True
    """Causal (decoder) mask; ``False`` gives a bidirectional encoder."""
    positions: Positions = "rope"
    """``"learned"`` absolute embeddings, ``"rope"`` rotary, or ``"none"`` (NoPE; causal models only)."""
    rope_theta: float = 10000.0
    """RoPE base."""
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    """Normalisation of the pre-LN blocks and the final norm."""
    norm_eps: float = 1e-5
    """Epsilon of the norms."""
    norm_groups: int = 1
    """Normalise each of this many equal, contiguous slices of the residual stream on its own (1: the usual
    norm over all of ``d_model``). Deep Fusion's exact fusion of two models keeps one group per parent."""
    mlp: Literal["swiglu", "gelu"] = "swiglu"
    """Feed-forward type: Llama's SwiGLU ``down(silu(gate x) * up x)`` or GPT's ``down(gelu(up x))``."""
    bias: bool = False
    """Biases in the linear layers (GPT-2 has them, Llama not)."""
    dropout: float = 0.0
    """Dropout on attention weights and residual branches (training only)."""
    tie_embeddings: bool = True
    """Share the input embedding and the output projection."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        kv = self.kv_heads
        if not isinstance(kv, int) or kv < 1 or self.n_heads % kv:
            raise ValueError(f"n_kv_heads must divide n_heads ({self.n_heads}), got {self.n_kv_heads!r}")
        if self.positions not in ("learned", "rope", "none"):
            raise ValueError(f"positions must be 'learned', 'rope' or 'none', got {self.positions!r}")
        if self.positions == "none" and not self.causal:
            raise ValueError("positions='none' needs causal=True: a bidirectional encoder without positions "
                             "is permutation-invariant")  # fmt: skip
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head dimension, got {self.head_dim}")
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {self.norm!r}")
        if self.mlp not in ("swiglu", "gelu"):
            raise ValueError(f"mlp must be 'swiglu' or 'gelu', got {self.mlp!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.d_ff is not None and (isinstance(self.d_ff, bool) or not isinstance(self.d_ff, int) or self.d_ff < 1):
            raise ValueError(f"d_ff must be a positive int or None, got {self.d_ff!r}")
        g = self.norm_groups
        if isinstance(g, bool) or not isinstance(g, int) or g < 1 or self.d_model % g:
            raise ValueError(f"norm_groups must be a positive int dividing d_model ({self.d_model}), got {g!r}")
        if not (self.rope_theta > 0 and self.norm_eps > 0):
            raise ValueError("rope_theta and norm_eps must be > 0")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def ff_dim(self) -> int:
        if self.d_ff is not None:
            return self.d_ff
        if self.mlp == "gelu":
            return 4 * self.d_model
        return 256 * math.ceil(8 * self.d_model / 3 / 256)

    def to_dict(self) -> dict:
        return asdict(self)


class GroupedNorm(nn.Module):
    """RMSNorm or LayerNorm computed separately over ``groups`` equal slices of the last dimension, with
    one gain (and bias) vector over the whole of it, so its parameters have the shapes of the ungrouped norm.

    With ``groups=1`` it equals ``nn.RMSNorm`` / ``nn.LayerNorm``; a fused model of Deep Fusion uses one
    group per parent, which makes the fused norm act on each parent's half exactly as the parent's norm did.
    """

    def __init__(self, dim: int, groups: int, *, kind: str, eps: float, bias: bool) -> None:
        super().__init__()
        if dim % groups:
            raise ValueError(f"groups ({groups}) must divide dim ({dim})")
        self.groups, self.kind, self.eps = groups, kind, eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias and kind == "layernorm" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        h = x.reshape(*shape[:-1], self.groups, shape[-1] // self.groups)
        if self.kind == "layernorm":
            h = h - h.mean(-1, keepdim=True)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        out = h.reshape(shape) * self.weight
        return out if self.bias is None else out + self.bias


def _norm(config: TransformerConfig, dim: int) -> nn.Module:
    if config.norm_groups != 1:
        return GroupedNorm(dim, config.norm_groups, kind=config.norm, eps=config.norm_eps, bias=config.bias)
    if config.norm == "rmsnorm":
        return nn.RMSNorm(dim, eps=config.norm_eps)
    return nn.LayerNorm(dim, eps=config.norm_eps, bias=config.bias)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of RoPE for integer ``positions`` of any shape: ``(..., head_dim)`` each.

    Frequencies ``theta^(-2i/d)`` (Su et al., eq. 15), in the "rotate half" layout of GPT-NeoX/Llama:
    dimension ``i`` pairs with ``i + d/2``.
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    angles = positions.to(torch.float32)[..., None] * inv_freq
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (B, H, T, Dh); cos/sin: (B, T, Dh) -> broadcast over heads.
    return x * cos[:, None] + _rotate_half(x) * sin[:, None]


class KVCache:
    """Keys and values of the tokens seen so far, one ``(B, H_kv, T, Dh)`` pair per layer."""

    def __init__(self, n_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers

    @property
    def length(self) -> int:
        k = self.keys[0]
        return 0 if k is None else int(k.shape[2])

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=2)
            v = torch.cat([self.values[layer], v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


class Attention(nn.Module):
    """Multi-head (grouped-query) self-attention with optional RoPE and KV cache."""

    def __init__(self, config: TransformerConfig, layer_index: int = 0) -> None:
        super().__init__()
        self.config = config
        self.layer_index = layer_index
        c = config
        self.q_proj = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=c.bias)
        self.k_proj = nn.Linear(c.d_model, c.kv_heads * c.head_dim, bias=c.bias)
        self.v_proj = nn.Linear(c.d_model, c.kv_heads * c.head_dim, bias=c.bias)
        self.o_proj = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=c.bias)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        c = self.config
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = _apply_rope(q, *rope), _apply_rope(k, *rope)
        if cache is not None:
            k, v = cache.update(self.layer_index, k, v)
        if c.kv_heads != c.n_heads:
            rep = c.n_heads // c.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=c.dropout if self.training else 0.0
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, t, c.n_heads * c.head_dim))


class MLP(nn.Module):
    """The feed-forward layer: SwiGLU ``down(silu(gate x) * up x)`` (Llama) or ``down(gelu(up x))`` (GPT)."""

    def __init__(self, config: TransformerConfig, layer_index: int = 0) -> None:
        super().__init__()
        self.swiglu = config.mlp == "swiglu"
        if self.swiglu:
            self.gate_proj = nn.Linear(config.d_model, config.ff_dim, bias=config.bias)
        self.up_proj = nn.Linear(config.d_model, config.ff_dim, bias=config.bias)
        self.down_proj = nn.Linear(config.ff_dim, config.d_model, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x), approximate="tanh"))


MLPFactory = Callable[[TransformerConfig, int], nn.Module]
AttentionFactory = Callable[[TransformerConfig, int], nn.Module]
"""``(config, layer_index) -> module`` with :class:`Attention`'s ``forward(x, mask, rope, cache)``."""


class Block(nn.Module):
    """Pre-LN block: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``."""

    def __init__(
        self,
        config: TransformerConfig,
        layer_index: int,
        mlp_factory: MLPFactory | None = None,
        attention_factory: AttentionFactory | None = None,
    ) -> None:
        super().__init__()
        self.input_layernorm = _norm(config, config.d_model)
        self.self_attn = (attention_factory or Attention)(config, layer_index)
        self.post_attention_layernorm = _norm(config, config.d_model)
        self.mlp = (mlp_factory or MLP)(config, layer_index)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, mask, rope, cache=None):
        x = x + self.dropout(self.self_attn(self.input_layernorm(x), mask, rope, cache))
        return x + self.dropout(self.mlp(self.post_attention_layernorm(x)))


class TransformerLM(nn.Module):
    """A token-level transformer: ``forward(input_ids) -> logits (B, T, vocab)``.

    Args:
        config: the shape (see :class:`TransformerConfig`).
        mlp_factory: optional ``(config, layer_index) -> nn.Module`` replacing :class:`MLP` in each block.
        attention_factory: optional ``(config, layer_index) -> nn.Module`` replacing :class:`Attention`.
    """

    def __init__(
        self,
        config: TransformerConfig,
        *,
        mlp_factory: MLPFactory | None = None,
        attention_factory: AttentionFactory | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.embed_positions = (
            nn.Embedding(config.max_seq_len, config.d_model) if config.positions == "learned" else None
        )
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(Block(config, i, mlp_factory, attention_factory) for i in range(config.n_layers))
        self.norm = _norm(config, config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # GPT-2 / Llama initialisation: N(0, 0.02) weights, zero biases.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Parameter count (tied weights counted once)."""
        seen = {id(p): p for p in self.parameters() if p.requires_grad or not trainable_only}
        return sum(p.numel() for p in seen.values())

    def hidden_states(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        position_ids: torch.Tensor | None = None,
        output_all: bool = False,
    ) -> torch.Tensor | list[torch.Tensor]:
        """The final normed hidden states ``(B, T, d)``, or with ``output_all`` the input of every block
        and the final normed output (``n_layers + 1`` tensors)."""
        x, mask, rope = self._prepare(input_ids, attention_mask, cache, position_ids)
        outs = []
        for layer in self.layers:
            if output_all:
                outs.append(x)
            x = layer(x, mask, rope, cache)
        x = self.norm(x)
        if output_all:
            outs.append(x)
            return outs
        return x

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, vocab)``.

        Args:
            input_ids: ``(B, T)`` int64 token ids.
            attention_mask: ``(B, T_total)`` with 1 for real tokens and 0 for padding, over the cached
                tokens and the new ones; ``None`` means no padding.
            cache: a :class:`KVCache` to read the previous tokens' keys/values from and append to.
            position_ids: ``(B, T)`` positions; by default counted from the cache length, skipping
                left padding when ``attention_mask`` is given.
        """
        return self.lm_head(self.hidden_states(input_ids, attention_mask=attention_mask, cache=cache,
                                               position_ids=position_ids))  # fmt: skip

    def _prepare(self, input_ids, attention_mask, cache, position_ids):
        c = self.config
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
            raise TypeError("input_ids must be an integer torch.Tensor of shape (batch, seq)")
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (batch, seq), got {tuple(input_ids.shape)}")
        b, t = input_ids.shape
        past = cache.length if cache is not None else 0
        if past + t > c.max_seq_len:
            raise ValueError(f"sequence length {past + t} exceeds max_seq_len {c.max_seq_len}")
        if t and (int(input_ids.min()) < 0 or int(input_ids.max()) >= c.vocab_size):
            raise ValueError(f"input_ids must lie in [0, {c.vocab_size}), got range "
                             f"[{int(input_ids.min())}, {int(input_ids.max())}]")  # fmt: skip
        if attention_mask is not None:
            if attention_mask.shape != (b, past + t):
                raise ValueError(f"attention_mask must have shape {(b, past + t)} (cached + new tokens), "
                                 f"got {tuple(attention_mask.shape)}")  # fmt: skip
            attention_mask = attention_mask.to(torch.bool)
        if position_ids is None:
            if attention_mask is not None:
                # Left padding: a token's position is the number of real tokens before it.
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)[:, past:]
            else:
                position_ids = torch.arange(past, past + t, device=input_ids.device).expand(b, t)
        x = self.embed_tokens(input_ids)
        if self.embed_positions is not None:
            x = x + self.embed_positions(position_ids)
        x = self.dropout(x)
        rope = rope_cos_sin(position_ids, c.head_dim, c.rope_theta) if c.positions == "rope" else None
        # Boolean mask (True = attend), (B, 1, T, past + T): causal over absolute indices, then padding.
        keys = torch.arange(past + t, device=input_ids.device)
        queries = torch.arange(past, past + t, device=input_ids.device)
        mask = None
        if c.causal:
            mask = (keys[None, :] <= queries[:, None])[None, None]
        if attention_mask is not None:
            pad = attention_mask[:, None, None, :]
            mask = pad if mask is None else (mask & pad)
            # A fully padded query row would give NaN: let it attend to itself (its output is ignored).
            diag = keys[None, :] == queries[:, None]
            mask = mask | diag[None, None]
        return x, mask, rope

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        *,
        max_new_tokens: int,
        attention_mask: torch.Tensor | None = None,
        temperature: float = 0.0,
        top_k: int | None = None,
        eos_token_id: int | None = None,
        pad_token_id: int = 0,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue ``input_ids`` (left-padded when lengths differ; pass ``attention_mask``).

        ``temperature=0`` is greedy decoding; otherwise sampling from ``softmax(logits / temperature)``,
        restricted to the ``top_k`` most likely tokens when given. Sequences that produced
        ``eos_token_id`` continue with ``pad_token_id``. Returns ``(B, T + max_new_tokens)`` (fewer
        columns when every sequence has ended). With ``use_cache`` each step feeds only the new token.
        """
        if not self.config.causal:
            raise ValueError("generate needs a causal model (config.causal=True)")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
        was_training = self.training
        self.eval()
        b = input_ids.shape[0]
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        mask = mask.to(torch.long)
        out = input_ids
        done = torch.zeros(b, dtype=torch.bool, device=input_ids.device)
        cache = KVCache(self.config.n_layers) if use_cache else None
        step_input = input_ids
        try:
            for _ in range(max_new_tokens):
                if use_cache:
                    logits = self(step_input, attention_mask=mask, cache=cache)[:, -1]
                else:
                    logits = self(out, attention_mask=mask)[:, -1]
                nxt = self._pick(logits, temperature, top_k, generator)
                if eos_token_id is not None:
                    nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
                    done = done | (nxt == eos_token_id)
                out = torch.cat([out, nxt[:, None]], dim=1)
                mask = torch.cat([mask, torch.ones(b, 1, dtype=mask.dtype, device=mask.device)], dim=1)
                step_input = nxt[:, None]
                if eos_token_id is not None and bool(done.all()):
                    break
        finally:
            self.train(was_training)
        return out

    @staticmethod
    def _pick(logits, temperature, top_k, generator):
        if temperature == 0:
            return logits.argmax(-1)
        logits = logits / temperature
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]


# --------------------------------------------------------------------------------------------------
# The cross-check with transformers' Llama
# --------------------------------------------------------------------------------------------------


def _check_llama_compatible(config: TransformerConfig) -> None:
    bad = []
    if not config.causal:
        bad.append("causal=True")
    if config.positions != "rope":
        bad.append("positions='rope'")
    if config.norm != "rmsnorm":
        bad.append("norm='rmsnorm'")
    if config.mlp != "swiglu":
        bad.append("mlp='swiglu'")
    if config.bias:
        bad.append("bias=False")
    if config.norm_groups != 1:
        bad.append("norm_groups=1")
    if bad:
        raise ValueError(f"only Llama-style configs map onto LlamaForCausalLM; needs {', '.join(bad)}")


def to_hf_llama(model: TransformerLM):
    """A ``transformers.LlamaForCausalLM`` with the same config and weights as ``model``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    c = model.config
    _check_llama_compatible(c)
    hf_config = LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.ff_dim,
        num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.kv_heads,
        max_position_embeddings=c.max_seq_len, rms_norm_eps=c.norm_eps, rope_theta=c.rope_theta,
        tie_word_embeddings=c.tie_embeddings, attention_bias=False, mlp_bias=False, hidden_act="silu",
        attention_dropout=0.0,
    )  # fmt: skip
    hf = LlamaForCausalLM(hf_config)
    state = {("model." + k if not k.startswith("lm_head") else k): v for k, v in model.state_dict().items()}
    missing, unexpected = hf.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("rotary_emb.inv_freq") and m != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"weights do not map onto Llama: missing {missing}, unexpected {unexpected}")
    if c.tie_embeddings:
        hf.tie_weights()
    return hf.eval()


def from_hf_llama(hf_model) -> TransformerLM:
    """A :class:`TransformerLM` with the config and weights of a ``transformers`` Llama causal LM."""
    hc = hf_model.config
    rope_theta = getattr(hc, "rope_theta", None)
    if rope_theta is None:
        rope_theta = (getattr(hc, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    config = TransformerConfig(
        vocab_size=hc.vocab_size, d_model=hc.hidden_size, n_layers=hc.num_hidden_layers,
        n_heads=hc.num_attention_heads, n_kv_heads=hc.num_key_value_heads, d_ff=hc.intermediate_size,
        max_seq_len=hc.max_position_embeddings, causal=True, positions="rope", rope_theta=float(rope_theta),
        norm="rmsnorm", norm_eps=hc.rms_norm_eps, mlp="swiglu", bias=False,
        tie_embeddings=bool(getattr(hc, "tie_word_embeddings", False)),
    )  # fmt: skip
    model = TransformerLM(config)
    state = {}
    for k, v in hf_model.state_dict().items():
        if k.endswith("rotary_emb.inv_freq"):
            continue
        state[k.removeprefix("model.")] = v
    if config.tie_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (config.tie_embeddings and m == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"weights do not map: missing {missing}, unexpected {unexpected}")
    return model
