"""The baselines of MemVP: input-space visual prompting with LoRA, and its text-only lower bound.

Input-space prompting (LLaVA, LaVIN, VL-Adapter, VL-PET; the paradigm of MemVP's Figure 3a and §2): the
projected patch features become ``n`` extra tokens prepended to the text, and the frozen LM is adapted
with parameter-efficient fine-tuning, here LoRA (Hu et al., 2022) of rank ``r`` on the attention's query
and value projections through ``peft``. Every sequence the LM processes is ``n`` tokens longer, which is
the cost MemVP removes. Without features the same module is the text-only model (LoRA alone), the lower
bound that answers from the question's priors.

The prefix enters through the LM's ``embed_tokens`` (wrapped, so it works for the project's
:class:`~icml24.language.TransformerLM` and for ``transformers`` Llama models alike): the token ids get
``n`` placeholder columns in front, whose embeddings are replaced by the projected features.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from icml24.common.validation import integer, positive_int
from icml24.multimodal.memvp.backends import LMBackend, greedy_generate
from icml24.multimodal.memvp.memory import VisualProjector, _check_ids

__all__ = ["InputSpaceConfig", "InputSpacePrompting"]


@dataclass(frozen=True)
class InputSpaceConfig:
    """Hyper-parameters of the input-space baseline (projector as MemVP's, LoRA r = 4 on q and v)."""

    feature_dim: int = 1024
    """Width ``C`` of the visual patch features."""
    projector_hidden: int = 128
    """Hidden width of the projector (the same ``Linear → SiLU → Linear`` as MemVP's)."""
    lora_rank: int = 4
    """LoRA rank on the attention projections (0: no LoRA, projector only)."""
    lora_alpha: float = 8.0
    """LoRA scaling numerator (the update is ``alpha / r · B A``)."""
    lora_dropout: float = 0.0
    """Dropout on LoRA's input."""
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    """Module names LoRA adapts (Llama naming)."""

    def __post_init__(self) -> None:
        positive_int(self.feature_dim, "feature_dim")
        positive_int(self.projector_hidden, "projector_hidden")
        integer(self.lora_rank, "lora_rank", low=0)
        a = self.lora_alpha
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not (math.isfinite(a) and a > 0):
            raise ValueError(f"lora_alpha must be a positive finite number, got {a!r}")
        d = self.lora_dropout
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 <= d < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {d!r}")
        if isinstance(self.lora_targets, str) or not self.lora_targets or \
                not all(isinstance(t, str) and t for t in self.lora_targets):
            raise TypeError(f"lora_targets must be a non-empty tuple of module names, got {self.lora_targets!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class _PrefixEmbedding(nn.Module):
    """``embed_tokens`` whose first ``n`` output positions are replaced by a pending prefix, once."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.base = base
        self.pending: torch.Tensor | None = None

    @property
    def weight(self) -> torch.Tensor:  # transformers' tie_weights / get_input_embeddings look for it
        return self.base.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        e = self.base(input_ids)
        prefix, self.pending = self.pending, None
        if prefix is None:
            return e
        return torch.cat([prefix.to(e.dtype), e[:, prefix.shape[1]:]], dim=1)


class InputSpacePrompting(nn.Module):
    """A frozen causal LM reading ``n`` projected visual tokens prepended to its input, with LoRA.

    Args:
        lm: a :class:`~icml24.language.TransformerLM` or a ``transformers`` Llama-style causal LM; frozen,
            patched in place (its ``embed_tokens`` is wrapped and LoRA is injected by ``peft``).
        config: the hyper-parameters.
    """

    def __init__(self, lm: nn.Module, *, config: InputSpaceConfig) -> None:
        super().__init__()
        if not isinstance(config, InputSpaceConfig):
            raise TypeError(f"config must be an InputSpaceConfig, got {type(config).__name__}")
        backend = LMBackend(lm)
        for p in lm.parameters():
            p.requires_grad_(False)
        if config.lora_rank > 0:
            from peft import LoraConfig, inject_adapter_in_model

            inject_adapter_in_model(LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,
                                               lora_dropout=config.lora_dropout,
                                               target_modules=list(config.lora_targets)), lm)  # fmt: skip
        self.config = config
        self.lm = lm
        self._backend = backend
        self.hidden_size = backend.hidden_size
        self.projector = VisualProjector(in_features=config.feature_dim, hidden=config.projector_hidden,
                                         out_features=backend.hidden_size)  # fmt: skip
        self._embed = _PrefixEmbedding(backend.embed_tokens)
        backend.embed_tokens = self._embed

    def visual_tokens(self, features: torch.Tensor, batch_size: int) -> torch.Tensor:
        """The ``(B, n, d)`` prefix: ``Projector(features)``."""
        if not isinstance(features, torch.Tensor) or not features.is_floating_point():
            raise TypeError(f"features must be a float tensor of shape (batch, n, {self.config.feature_dim}) or None")
        if features.dim() != 3 or features.shape[0] != batch_size or features.shape[2] != self.config.feature_dim:
            raise ValueError(f"features must have shape ({batch_size}, n, {self.config.feature_dim}), "
                             f"got {tuple(features.shape)}")  # fmt: skip
        if not bool(torch.isfinite(features).all()):
            raise ValueError("features must be finite (no NaN or inf)")
        return self.projector(features)

    def _step(self, input_ids: torch.Tensor, features: torch.Tensor | None, attention_mask: torch.Tensor | None,
              cache: Any) -> torch.Tensor:  # fmt: skip
        if features is None:
            return self._backend(input_ids, attention_mask, cache)
        b = input_ids.shape[0]
        prefix = self.visual_tokens(features, b)
        n = prefix.shape[1]
        ids = torch.cat([input_ids.new_zeros(b, n), input_ids], dim=1)
        if attention_mask is not None and attention_mask.shape[1] == input_ids.shape[1]:
            attention_mask = torch.cat([attention_mask.new_ones(b, n), attention_mask], dim=1)
        self._embed.pending = prefix
        try:
            # the LM head only on the text positions: the n prefix positions' logits are never used
            return self._backend(ids, attention_mask, cache, logits_to_keep=input_ids.shape[1])
        finally:
            self._embed.pending = None

    def forward(
        self,
        input_ids: torch.Tensor,
        features: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        cache: Any = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, vocab)`` of the text positions; the LM runs on ``n + T`` tokens (``T`` without
        features: the text-only model). ``attention_mask`` covers the text (the prefix is always real)."""
        _check_ids(input_ids)
        return self._step(input_ids, features, attention_mask, cache)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, features: torch.Tensor | None = None, *, max_new_tokens: int,
                 attention_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Greedy continuation of equal-length prompts with a KV cache (which holds the ``n`` visual tokens
        too); returns ``(B, max_new_tokens)`` ids."""
        _check_ids(input_ids)
        positive_int(max_new_tokens, "max_new_tokens")
        b = input_ids.shape[0]
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        n = 0 if features is None else features.shape[1]
        mask = torch.cat([mask.new_ones(b, n), mask], dim=1)
        first = [True]

        def step(ids: torch.Tensor, m: torch.Tensor, cache: Any) -> torch.Tensor:
            if first[0]:
                first[0] = False
                return self._step(ids, features, m, cache)
            return self._backend(ids, m, cache)

        was = self.training
        self.eval()
        try:
            return greedy_generate(step, input_ids, mask, self._backend.new_cache(), max_new_tokens)
        finally:
            self.train(was)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters this baseline trains (projector and LoRA)."""
        return [p for p in self.parameters() if p.requires_grad]
