"""The two kinds of frozen causal LM the MemVP wrappers patch: the project's :class:`TransformerLM` and a
``transformers`` Llama-style causal LM (``LlamaForCausalLM``, e.g. SmolLM2-135M).

Both name their blocks' feed-forward module ``mlp`` and compute ``h + mlp(post_attention_layernorm(h))``,
and both embed tokens with an ``embed_tokens`` module, so a wrapper only needs to find the blocks, the
embedding, the width, and how to call the model with a KV cache. That is all this module does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from icml24.language.transformer import KVCache, TransformerLM

__all__ = ["LMBackend", "backend_of", "greedy_generate"]


class LMBackend:
    """Uniform access to a frozen causal LM: its blocks, embedding, width, and a cached call."""

    def __init__(self, lm: nn.Module) -> None:
        if not isinstance(lm, nn.Module):
            raise TypeError(f"lm must be a torch.nn.Module (TransformerLM or a transformers causal LM), "
                            f"got {type(lm).__name__}")  # fmt: skip
        self.lm = lm
        if isinstance(lm, TransformerLM):
            self.kind = "icml24"
            self.owner = lm
            self.hidden_size = lm.config.d_model
            self.n_layers = lm.config.n_layers
        else:
            inner = getattr(lm, "model", None)
            layers = getattr(inner, "layers", None)
            config = getattr(lm, "config", None)
            if not isinstance(layers, nn.ModuleList) or not hasattr(inner, "embed_tokens") or config is None:
                raise TypeError("lm must be an icml24 TransformerLM or a transformers Llama-style causal LM "
                                f"(model.layers[i].mlp, model.embed_tokens), got {type(lm).__name__}")  # fmt: skip
            self.kind = "hf"
            self.owner = inner
            self.hidden_size = int(config.hidden_size)
            self.n_layers = int(config.num_hidden_layers)
            # transformers >= 5.2x names the cache argument ``cache`` (``past_key_values`` is deprecated)
            self._cache_kw = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        for i, layer in enumerate(self.layers):
            if not isinstance(getattr(layer, "mlp", None), nn.Module):
                raise TypeError(f"block {i} of lm has no feed-forward module named 'mlp'")

    @property
    def layers(self) -> nn.ModuleList:
        return self.owner.layers

    @property
    def embed_tokens(self) -> nn.Module:
        return self.owner.embed_tokens

    @embed_tokens.setter
    def embed_tokens(self, module: nn.Module) -> None:
        self.owner.embed_tokens = module

    def new_cache(self) -> Any:
        if self.kind == "icml24":
            return KVCache(self.n_layers)
        from transformers import DynamicCache

        return DynamicCache()

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 cache: Any = None, *, logits_to_keep: int = 0) -> torch.Tensor:  # fmt: skip
        """Logits ``(B, T, V)``; ``cache`` (from :meth:`new_cache`) is read and extended when given.

        ``logits_to_keep`` > 0 computes the LM head on the last that many positions only (``(B, k, V)``; the
        ``transformers`` argument of the same name): a prefix whose logits are never used costs no head FLOPs.
        """
        if isinstance(logits_to_keep, bool) or not isinstance(logits_to_keep, int) or logits_to_keep < 0:
            raise ValueError(f"logits_to_keep must be an int >= 0, got {logits_to_keep!r}")
        if self.kind == "icml24":
            if not logits_to_keep:
                return self.lm(input_ids, attention_mask=attention_mask, cache=cache)
            hidden = self.lm.hidden_states(input_ids, attention_mask=attention_mask, cache=cache)
            return self.lm.lm_head(hidden[:, -logits_to_keep:])
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=cache is not None,
                      logits_to_keep=logits_to_keep, **{self._cache_kw: cache})  # fmt: skip
        return out.logits

    @staticmethod
    def cache_shapes(cache: Any) -> list[tuple[int, ...]]:
        """The key tensor shape of every layer of a cache (for the "KV cache unchanged" invariant)."""
        if isinstance(cache, KVCache):
            return [tuple(k.shape) for k in cache.keys if k is not None]
        return [tuple(layer.keys.shape) for layer in cache.layers]


def backend_of(lm: nn.Module) -> LMBackend:
    """The :class:`LMBackend` of ``lm`` (raises ``TypeError`` for an unsupported model)."""
    return LMBackend(lm)


@torch.no_grad()
def greedy_generate(
    step: Callable[[torch.Tensor, torch.Tensor, Any], torch.Tensor],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cache: Any,
    max_new_tokens: int,
) -> torch.Tensor:
    """Greedy decoding with a KV cache: ``step(ids, mask, cache) -> logits`` is called once on the prompt
    (``attention_mask`` covers whatever the step prepends itself) and then once per new token.

    Returns the ``(B, max_new_tokens)`` generated ids.
    """
    out = []
    logits = step(input_ids, attention_mask, cache)
    mask = attention_mask
    for i in range(max_new_tokens):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        out.append(nxt)
        if i + 1 == max_new_tokens:
            break
        mask = torch.cat([mask, torch.ones_like(nxt)], dim=1)
        logits = step(nxt, mask, cache)
    return torch.cat(out, dim=1) if out else input_ids[:, :0]
