"""Training-FLOP accounting for Deep Fusion: the fused model's cost includes its parents' training.

A training step costs about three forward passes (the forward, and a backward that computes gradients
with respect to activations and to weights), so ``6 * MACs`` FLOPs per example when a multiply-accumulate
counts as 2 FLOPs (Kaplan et al., 2020, Section 2.1, ``C ~ 6 N`` per token). The transformer's count adds
the attention scores and the weighted sum over the context (``2 * n_layers * T * d`` MACs per token
forward, causal masking not discounted), and the output projection onto the vocabulary; embedding
look-ups, norms, activations and the optimiser step are not counted.

Two totals of a fusion recipe (the paper trains the parents in parallel on separate accelerators, so it
reports both resources and time): ``total`` adds the parents' FLOPs to the fused stage's (the compute
spent), ``critical_path`` counts only the most expensive parent (the compute on the longest chain,
a proxy of wall-clock time when the parents train side by side).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icml24.language.transformer import TransformerConfig

__all__ = ["FusionFlops", "mlp_training_flops", "transformer_training_flops"]


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


def mlp_training_flops(sizes: Sequence[int], examples: int) -> int:
    """FLOPs of training an MLP with layer widths ``sizes`` on ``examples`` examples: ``6 * MACs * examples``."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) < 2:
        raise ValueError(f"sizes must be a sequence of at least two positive ints, got {sizes!r}")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise ValueError(f"sizes must be a sequence of at least two positive ints, got {sizes!r}")
    examples = _count("examples", examples)
    macs = sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    return 6 * macs * examples


def transformer_training_flops(config: TransformerConfig, tokens: int, seq_len: int) -> int:
    """FLOPs of training a :class:`TransformerLM` of ``config`` on ``tokens`` tokens in sequences of
    ``seq_len``: ``6 * (N_matmul + 2 * n_layers * seq_len * d_model) * tokens``, with ``N_matmul`` the
    weights of the attention and feed-forward projections and of the output projection."""
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    tokens = _count("tokens", tokens)
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    c = config
    attn = c.d_model * c.head_dim * (2 * c.n_heads + 2 * c.kv_heads)
    ff = (3 if c.mlp == "swiglu" else 2) * c.d_model * c.ff_dim
    matmul = c.n_layers * (attn + ff) + c.d_model * c.vocab_size
    # Scores q.k and the weighted sum of values: 2 * T * d MACs per token per layer (the average context is
    # T/2 under a causal mask, but the dense kernel computes all T).
    context = 2 * c.n_layers * seq_len * c.d_model
    return 6 * (matmul + context) * tokens


@dataclass(frozen=True)
class FusionFlops:
    """The training FLOPs of a fusion recipe: parents first, then the fused model."""

    parents: tuple[int, ...]
    """FLOPs spent training each parent (empty for a model trained from scratch)."""
    fused: int
    """FLOPs spent training the grown model after fusion."""

    def __post_init__(self) -> None:
        if not isinstance(self.parents, tuple):
            raise TypeError(f"parents must be a tuple of ints, got {type(self.parents).__name__}")
        for p in self.parents:
            _count("parents", p)
        _count("fused", self.fused)

    @property
    def total(self) -> int:
        """All training compute: the parents' plus the fused stage's."""
        return sum(self.parents) + self.fused

    @property
    def critical_path(self) -> int:
        """The compute on the longest chain when the parents train in parallel: the costliest parent plus
        the fused stage."""
        return max(self.parents, default=0) + self.fused
