"""SpikeLM: the shared transformer with spiking neurons in front of every matrix product (Section 3.3).

Placement follows the official ``spike_bert.py``: the inputs of the Q/K/V projections, of the attention
output projection and of both feed-forward projections are spiked, and K and V are spiked again after
their projection (so ``Q K^T`` and ``attention @ V`` see spikes too); softmax, the norms, GELU and the
residual stream stay real-valued. The hidden states are replicated over ``T`` time steps after the
embedding and averaged over them before the final norm; the ``T`` axis is folded into the batch
(``(T * B, L, d)``, time-major), so the shared :class:`~icml24.language.transformer.TransformerLM` runs
unchanged around the neurons (it is built through its ``attention_factory`` and ``mlp_factory`` hooks).

One neuron feeds Q, K and V: the code gives each of the three ``SpikeLinear`` layers its own neuron, but
they see the same input and initialise the same ``alpha`` from it, so with frozen ``alpha`` (the code's
default) they emit identical spikes; sharing one is exact and a third of the work.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from icml24.language.spikelm.neurons import (
    BinaryLIF,
    ElasticBiSpiking,
    SpikingNeuron,
    _check_int,
    _check_positive,
)
from icml24.language.transformer import MLP, Attention, KVCache, TransformerConfig, TransformerLM, _apply_rope

__all__ = [
    "E_AC_PJ",
    "E_MAC_PJ",
    "NEURONS",
    "SpikeLM",
    "SpikeLMConfig",
    "SpikingAttention",
    "SpikingMLP",
    "energy_estimate",
    "firing_rates",
]

NEURONS = ("elastic", "ternary", "binary", "none")
"""``elastic``: SpikeLM's elastic bi-spiking; ``ternary``: {-1, 0, 1} spikes with fixed amplitude 1;
``binary``: {0, 1} leaky integrate-and-fire; ``none``: the full-precision (ANN) model of the same shape."""

E_MAC_PJ = 4.6
"""Energy of one 32-bit floating-point multiply-accumulate in 45 nm CMOS, pJ (Horowitz, ISSCC 2014: 3.7 pJ
multiply + 0.9 pJ add), the constant of the spiking-transformer literature (Spikformer, SpikeBERT, SpikeLM)."""
E_AC_PJ = 0.9
"""Energy of one 32-bit floating-point accumulate (add) in 45 nm CMOS, pJ (Horowitz, ISSCC 2014)."""


@dataclass(frozen=True)
class SpikeLMConfig:
    """The spiking part of a :class:`SpikeLM` (the transformer's shape is a ``TransformerConfig``)."""

    neuron: Literal["elastic", "ternary", "binary", "none"] = "elastic"
    """Spike formulation (see :data:`NEURONS`)."""
    time_steps: int = 4
    """``T``, time steps per forward pass (the paper's 4); ``neuron="none"`` always runs one step."""
    alpha_init_factor: float = 2.0
    """``k`` in ``alpha_t = k * mean|u_t|``, the elastic-frequency knob (code default 2)."""
    learn_alpha: bool = False
    """Train ``alpha_t`` with the LSQ gradient after initialisation (the code freezes it)."""
    lif_beta: float = 0.25
    """Membrane decay of the binary LIF baseline (0.25, SpikeLM's carry factor)."""
    lif_threshold: float | Literal["data"] = 1.0
    """Firing threshold of the binary LIF baseline, or ``"data"`` (``mean|u_1|`` of the first batch, frozen:
    the threshold SpikeLM's rule gives at ``k = 2``)."""
    spike_keys_values: bool = True
    """Spike K and V after their projection (the code does)."""

    def __post_init__(self) -> None:
        if self.neuron not in NEURONS:
            raise ValueError(f"neuron must be one of {', '.join(NEURONS)}, got {self.neuron!r}")
        _check_int("time_steps", self.time_steps)
        _check_positive("alpha_init_factor", self.alpha_init_factor)
        if self.lif_threshold != "data":
            _check_positive("lif_threshold", self.lif_threshold)
        if _check_positive("lif_beta", self.lif_beta, allow_zero=True) > 1:
            raise ValueError(f"lif_beta must be in [0, 1], got {self.lif_beta!r}")
        for name in ("learn_alpha", "spike_keys_values"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.learn_alpha and self.neuron != "elastic":
            raise ValueError("learn_alpha needs neuron='elastic'")

    @property
    def steps(self) -> int:
        """Time steps actually run (1 for the ANN: replicas of one real-valued pass are identical)."""
        return 1 if self.neuron == "none" else self.time_steps

    def to_dict(self) -> dict:
        return asdict(self)


def _check_parts(config, spiking) -> None:
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    if not isinstance(spiking, SpikeLMConfig):
        raise TypeError(f"spiking must be a SpikeLMConfig, got {type(spiking).__name__}")


def _neuron(spiking: SpikeLMConfig, *, dynamics: bool = True) -> nn.Module:
    if spiking.neuron == "none":
        return nn.Identity()
    if spiking.neuron == "binary":
        return BinaryLIF(time_steps=spiking.time_steps, beta=spiking.lif_beta, threshold=spiking.lif_threshold)
    return ElasticBiSpiking(
        time_steps=spiking.time_steps,
        amplitude="elastic" if spiking.neuron == "elastic" else "fixed",
        alpha_init_factor=spiking.alpha_init_factor,
        learn_alpha=spiking.learn_alpha,
        dynamics=dynamics,
    )


class SpikingAttention(Attention):
    """Self-attention whose matrix products all take spikes: input -> Q/K/V, K, V, context -> output."""

    def __init__(self, config: TransformerConfig, layer_index: int = 0, *, spiking: SpikeLMConfig) -> None:
        _check_parts(config, spiking)
        super().__init__(config, layer_index)
        self.input_neuron = _neuron(spiking)
        kv = spiking.spike_keys_values
        # K and V are quantised per step without membrane dynamics, as in the code (act_quantizer_k/v).
        self.key_neuron = _neuron(spiking, dynamics=False) if kv else nn.Identity()
        self.value_neuron = _neuron(spiking, dynamics=False) if kv else nn.Identity()
        self.output_neuron = _neuron(spiking)

    def forward(self, x, mask, rope, cache: KVCache | None = None) -> torch.Tensor:
        c = self.config
        b, t, _ = x.shape
        h = self.input_neuron(x)
        q = self.q_proj(h).view(b, t, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = _apply_rope(q, *rope), _apply_rope(k, *rope)
        # Spiked after RoPE so that Q K^T multiplies real queries by spiking keys (accumulate-only).
        k, v = self.key_neuron(k), self.value_neuron(v)
        if cache is not None:
            k, v = cache.update(self.layer_index, k, v)
        if c.kv_heads != c.n_heads:
            rep = c.n_heads // c.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=c.dropout if self.training else 0.0)
        out = out.transpose(1, 2).reshape(b, t, c.n_heads * c.head_dim)
        return self.o_proj(self.output_neuron(out))


class SpikingMLP(MLP):
    """Feed-forward layer with spiking inputs to both projections: ``down(n2(act(up(n1(x)))))``."""

    def __init__(self, config: TransformerConfig, layer_index: int = 0, *, spiking: SpikeLMConfig) -> None:
        _check_parts(config, spiking)
        super().__init__(config, layer_index)
        self.input_neuron = _neuron(spiking)
        self.hidden_neuron = _neuron(spiking)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.input_neuron(x)
        if self.swiglu:
            a = F.silu(self.gate_proj(h)) * self.up_proj(h)
        else:
            a = F.gelu(self.up_proj(h), approximate="tanh")
        return self.down_proj(self.hidden_neuron(a))


class SpikeLM(TransformerLM):
    """A :class:`TransformerLM` with SpikeLM's spiking neurons (or the baselines' neurons).

    Args:
        config: the transformer's shape; SpikeLM's BERT-style encoder is ``causal=False,
            positions="rope", norm="layernorm", mlp="gelu", bias=True``.
        spiking: the neuron and time steps (:class:`SpikeLMConfig`).

    ``forward(input_ids) -> logits (B, L, vocab)`` as for the parent; internally ``(T * B, L, d)``.
    """

    def __init__(self, config: TransformerConfig, *, spiking: SpikeLMConfig | None = None) -> None:
        spiking = SpikeLMConfig() if spiking is None else spiking
        _check_parts(config, spiking)
        super().__init__(
            config,
            mlp_factory=lambda c, i: SpikingMLP(c, i, spiking=spiking),
            attention_factory=lambda c, i: SpikingAttention(c, i, spiking=spiking),
        )
        self.spiking = spiking

    def hidden_states(self, input_ids, *, attention_mask=None, cache=None, position_ids=None, output_all=False):
        """Final normed hidden states ``(B, L, d)``: the embedding replicated over ``T`` steps, the blocks
        run on ``(T * B, L, d)``, the mean over steps (the code's ``hidden_states.mean(0)``), the norm."""
        x, mask, rope = self._prepare(input_ids, attention_mask, cache, position_ids)
        steps = self.spiking.steps
        b = x.shape[0]
        x = x.repeat(steps, 1, 1)
        if mask is not None and mask.shape[0] > 1:
            mask = mask.repeat(steps, 1, 1, 1)
        if rope is not None:
            rope = (rope[0].repeat(steps, 1, 1), rope[1].repeat(steps, 1, 1))
        outs = []
        for layer in self.layers:
            if output_all:
                outs.append(x.view(steps, b, *x.shape[1:]).mean(0))
            x = layer(x, mask, rope, cache)
        x = self.norm(x.view(steps, b, *x.shape[1:]).mean(0))
        if output_all:
            return outs + [x]
        return x

    def neurons(self) -> dict[str, SpikingNeuron]:
        """The spiking neurons by module name (``layers.0.self_attn.input_neuron``, ...)."""
        return {name: m for name, m in self.named_modules() if isinstance(m, SpikingNeuron)}

    def record_spikes(self, on: bool = True) -> None:
        """Start (and zero) or stop counting spikes in every neuron."""
        for n in self.neurons().values():
            if on:
                n.reset_stats()
            n.recording = on


def firing_rates(model: SpikeLM) -> dict[str, float]:
    """Firing rate of each neuron (fraction of non-zero spikes over neurons, tokens and time steps)
    recorded since :meth:`SpikeLM.record_spikes`; ``{}`` for the ANN."""
    if not isinstance(model, SpikeLM):
        raise TypeError(f"model must be a SpikeLM, got {type(model).__name__}")
    return {name: n.firing_rate for name, n in model.neurons().items()}


def energy_estimate(model: SpikeLM, *, seq_len: int, tokens: int) -> dict[str, float]:
    """Synaptic operations per token of the spike-driven matrix products and their energy (Section 4.4
    style; Horowitz 2014 constants :data:`E_MAC_PJ`, :data:`E_AC_PJ`).

    Counted: the six projections and the two attention products of every block. A non-zero input spike
    of a projection with ``n_out`` outputs costs ``n_out`` accumulates (ACs) per time step; a non-zero key
    (value) spike costs one AC per query attending to it (``seq_len``, or ``(seq_len + 1) / 2`` on average
    with a causal mask). The full-precision model costs ``n_in * n_out`` MACs per token per projection and
    ``seq_len * d`` per attention product (halved with a causal mask, same average). The amplitude
    ``alpha_t`` folds into the weights (one scalar per layer and step) and is not counted; norms, softmax,
    GELU, the embedding and the output head are not counted for either model.

    Args:
        model: a :class:`SpikeLM` whose spikes were recorded over ``tokens`` tokens of length-``seq_len``
            sequences (``record_spikes`` then forward passes).
        seq_len: the sequence length of the recorded batches.
        tokens: the number of tokens (batch x length) the recorded forward passes saw.

    Returns:
        ``ac_per_token`` (the spiking model), ``mac_per_token`` (its full-precision counterpart),
        ``energy_pj_per_token`` (ACs at :data:`E_AC_PJ`; the ANN: MACs at :data:`E_MAC_PJ`),
        ``ann_energy_pj_per_token`` and ``energy_ratio`` (spiking / ANN).
    """
    if not isinstance(model, SpikeLM):
        raise TypeError(f"model must be a SpikeLM, got {type(model).__name__}")
    _check_int("seq_len", seq_len)
    _check_int("tokens", tokens)
    if model.spiking.neuron != "none" and not model.spiking.spike_keys_values:
        raise ValueError("energy_estimate counts spiking keys and values: the model needs spike_keys_values=True")
    c = model.config
    attend = (seq_len + 1) / 2 if c.causal else seq_len
    kv_dim = c.kv_heads * c.head_dim
    qkv_out = c.n_heads * c.head_dim + 2 * kv_dim
    ff_in = c.ff_dim * (2 if c.mlp == "swiglu" else 1)
    per_layer_mac = (c.d_model * qkv_out + c.n_heads * c.head_dim * c.d_model + c.d_model * ff_in
                     + c.ff_dim * c.d_model + 2 * attend * c.n_heads * c.head_dim)  # fmt: skip
    mac = per_layer_mac * c.n_layers
    fan_out = {"self_attn.input_neuron": qkv_out, "self_attn.key_neuron": attend * c.n_heads / c.kv_heads,
               "self_attn.value_neuron": attend * c.n_heads / c.kv_heads, "self_attn.output_neuron": c.d_model,
               "mlp.input_neuron": ff_in, "mlp.hidden_neuron": c.d_model}  # fmt: skip
    neurons = model.neurons()
    if not neurons:
        ac = math.nan
    else:
        ac = 0.0
        for name, n in neurons.items():
            site = name.split(".", 2)[2]
            if n.element_count == 0:
                raise ValueError(f"no spikes were recorded in {name}: call model.record_spikes() and run it first")
            ac += n.spike_count * fan_out[site]
        ac /= tokens
    ann_pj = mac * E_MAC_PJ
    snn_pj = ac * E_AC_PJ
    return {"ac_per_token": ac, "mac_per_token": float(mac), "energy_pj_per_token": snn_pj,
            "ann_energy_pj_per_token": ann_pj, "energy_ratio": snn_pj / ann_pj}  # fmt: skip
