"""Fine-tuning baselines of LEVI's comparison: LoRA fine-tuning, LP-FT and WiSE-FT of a pre-trained encoder.

* LoRA (Hu et al., ICLR 2022, https://arxiv.org/abs/2106.09685) through ``peft``: low-rank updates of the
  attention query/value maps, trained with a classification head on the mean-pooled last layer.
* LP-FT (Kumar et al., ICLR 2022, https://arxiv.org/abs/2202.10054): fine-tune starting from a head
  already fitted by linear probing, so the first steps do not distort the features through a random head.
* WiSE-FT (Wortsman et al., CVPR 2022, https://arxiv.org/abs/2109.01903): interpolate the weights of the
  starting model and the fine-tuned one, ``theta(alpha) = (1 - alpha) theta_0 + alpha theta_ft``. With
  LoRA, ``theta_ft - theta_0`` is the low-rank update ``B A`` times its scale, so scaling ``B`` by
  ``alpha`` is exactly the interpolation of the adapted weights; the head is interpolated linearly.

``peft`` is an optional dependency (the ``language`` extra); importing this module does not import it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn

__all__ = ["PooledEncoderClassifier", "lora_encoder", "tokenize", "wise_ft"]


class PooledEncoderClassifier(nn.Module):
    """``head(mean-pool(encoder(tokens).hidden_states[layer]))``: a fine-tunable text classifier.

    ``forward(input_ids, attention_mask)`` returns logits. The tokenisation is done once, outside.
    """

    def __init__(self, *, encoder: nn.Module, head: nn.Module, layer: int = -1):
        super().__init__()
        if not isinstance(encoder, nn.Module):
            raise TypeError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
        if not isinstance(head, nn.Module):
            raise TypeError(f"head must be a torch.nn.Module, got {type(head).__name__}")
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int, got {layer!r}")
        self.encoder = encoder
        self.head = head
        self.layer = layer

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        hidden = out.hidden_states[self.layer]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return self.head([(hidden * mask).sum(1) / mask.sum(1)])


def lora_encoder(
    encoder: nn.Module, *, rank: int = 8, alpha: float = 16.0, dropout: float = 0.1,
    target_modules: Sequence[str] = ("query", "value"), seed: int = 0,
) -> nn.Module:
    """A copy of ``encoder`` with LoRA adapters (``peft``); only the adapters require gradients."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be a positive int, got {rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0 < alpha < float("inf")):
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    if isinstance(target_modules, str) or not target_modules:
        raise TypeError(f"target_modules must be a non-empty sequence of module names, got {target_modules!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not isinstance(encoder, nn.Module):
        raise TypeError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
    from peft import LoraConfig, get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = get_peft_model(copy.deepcopy(encoder),
                               LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout,
                                          target_modules=list(target_modules)))  # fmt: skip
    return model


def wise_ft(start: PooledEncoderClassifier, finetuned: PooledEncoderClassifier, alpha: float) -> PooledEncoderClassifier:
    """WiSE-FT: ``(1 - alpha) theta_start + alpha theta_finetuned`` for the head and every LoRA update.

    ``start`` is the model fine-tuning began from (its LoRA ``B`` matrices are zero, as ``peft``
    initialises them; its head is the probe head for LP-FT), ``finetuned`` the result. The encoder's
    frozen weights are shared by both, so interpolating them is the identity.
    """
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be a number in [0, 1], got {alpha!r}")
    for name, m in (("start", start), ("finetuned", finetuned)):
        if not isinstance(m, PooledEncoderClassifier):
            raise TypeError(f"{name} must be a PooledEncoderClassifier, got {type(m).__name__}")
    mixed = copy.deepcopy(finetuned)
    s_state, f_state = start.state_dict(), finetuned.state_dict()
    if s_state.keys() != f_state.keys():
        raise ValueError("start and finetuned must have the same parameters (the same LoRA layout and head)")
    new_state = {}
    for k, v in f_state.items():
        if "lora_A" in k:
            # The update is B A: keeping the fine-tuned A and scaling B by alpha scales the update exactly.
            new_state[k] = v
        elif "lora_B" in k:
            if torch.count_nonzero(s_state[k]):
                raise ValueError("start must be the model before fine-tuning: its LoRA B matrices must be zero")
            new_state[k] = alpha * v
        elif v.is_floating_point():
            new_state[k] = (1 - alpha) * s_state[k] + alpha * v
        else:
            new_state[k] = v
    mixed.load_state_dict(new_state)
    return mixed


def tokenize(tokenizer: Callable, texts: Sequence[str], *, max_length: int = 48) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of ``texts``, padded to the longest, truncated at ``max_length``."""
    if isinstance(texts, str) or not texts or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a non-empty sequence of strings")
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
        raise ValueError(f"max_length must be an int >= 2, got {max_length!r}")
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]
