"""SpikeLM: Towards General Spike-Driven Language Modeling via Elastic Bi-Spiking Mechanisms (Xing, Zhang,
Ni, Xiao, Ju, Fan, Wang, Zhang, Li; ICML 2024).

https://arxiv.org/abs/2406.03287 · official code https://github.com/Xingrun-Xing/SpikeLM.
Binary {0, 1} spikes carry too little information for language models. SpikeLM's elastic bi-spiking
neuron fires ternary spikes {-1, 0, +1} scaled by a layer-wise amplitude ``alpha_t`` (still
accumulate-only, since ``alpha_t`` folds into the next weights) whose data-driven initialisation
``alpha_t = k * mean|u_t|`` sets the firing rate (elastic frequency). Put in front of every matrix
product of a transformer, it closes much of the gap between spiking and full-precision language models.
"""

from icml24.language.spikelm.mlm import MaskedCharCorpus, evaluate_masked_lm, train_masked_lm
from icml24.language.spikelm.model import (
    E_AC_PJ,
    E_MAC_PJ,
    NEURONS,
    SpikeLM,
    SpikeLMConfig,
    SpikingAttention,
    SpikingMLP,
    energy_estimate,
    firing_rates,
)
from icml24.language.spikelm.neurons import (
    BinaryLIF,
    ElasticBiSpiking,
    SpikingNeuron,
    atan_spike,
    elastic_bi_spike,
)

SLUG = "spikelm"

__all__ = [
    "E_AC_PJ",
    "E_MAC_PJ",
    "NEURONS",
    "SLUG",
    "BinaryLIF",
    "ElasticBiSpiking",
    "MaskedCharCorpus",
    "SpikeLM",
    "SpikeLMConfig",
    "SpikingAttention",
    "SpikingMLP",
    "SpikingNeuron",
    "atan_spike",
    "elastic_bi_spike",
    "encoder_config",
    "energy_estimate",
    "evaluate_masked_lm",
    "firing_rates",
    "train_masked_lm",
]


def encoder_config(vocab_size: int, *, d_model: int = 128, n_layers: int = 2, n_heads: int = 4,
                   d_ff: int | None = None, max_seq_len: int = 64, positions: str = "rope"):  # fmt: skip
    """The BERT-style encoder of the miniature: bidirectional, LayerNorm, GELU, biases; RoPE positions by
    default (BERT's ``"learned"`` ones train slower at our budget: see the README)."""
    from icml24.language.transformer import TransformerConfig

    return TransformerConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                             d_ff=d_ff, max_seq_len=max_seq_len, causal=False, positions=positions,
                             norm="layernorm", mlp="gelu", bias=True, tie_embeddings=True)  # fmt: skip
