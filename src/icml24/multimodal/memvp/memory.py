"""Memory-space visual prompting (MemVP): visual features as extra key-value slots of a frozen LM's FFNs.

Jie, Tang, Ding, Deng, Han, Wang, "Memory-Space Visual Prompting for Efficient Vision-Language Fine-Tuning",
ICML 2024 (PMLR 235:22062-22074), https://arxiv.org/abs/2405.05615, code https://github.com/JieShibo/MemVP.

The FFN of a transformer block, ``FFN(u) = φ(u W_1ᵀ) W_2``, reads as a key-value memory (Geva et al., 2021):
the rows of ``W_1`` are keys, the rows of ``W_2ᵀ`` values. Instead of prepending projected visual tokens to
the LM's input (which lengthens every sequence by ``n``), MemVP (§3 of the paper) appends the projected
visual features ``Z`` to the FFN's memory of every block: text tokens look visual knowledge up through the
FFN and the input length never grows. As in the official code (``memvp/adapter.py``, ``memvp/model.py``),
the visual slots form a separate branch with their own activation, dropout and scale ``s``:

    Z   = 0.01 · Projector(V)          (V: n patch features; Projector: Linear → SiLU → Linear)
    Z   ← Z padded with zero rows to m slots, times the image indicator (0: no image)
    out = h + FFN(u) + s · Dropout(SiLU(u (Z + P)ᵀ)) (Z + E),       u = norm2(h)

with ``P`` (key position embedding, init N(0, 0.02²)) and ``E`` (value offset, init 0), both ``m × d`` and
shared by every block, ``s = 0.1``, ``m = 320`` for 256 CLIP patches. Only the projector, ``P`` and ``E``
are trained; the LM is frozen. The extra cost is two ``(T × d)·(d × m)`` products per block: ``4 m d``
FLOPs (``2 m d`` multiply-adds) per token per layer, independent of the sequence length.

:class:`MemVP` wraps a frozen :class:`~icml24.language.TransformerLM` or a ``transformers`` Llama causal LM
by replacing each block's ``mlp`` with a :class:`MemoryFFN` around it (module surgery, in place).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from icml24.common.validation import positive_int
from icml24.multimodal.memvp.backends import LMBackend, greedy_generate

__all__ = ["MemVP", "MemVPConfig", "MemoryFFN", "VisualProjector", "memory_flops_per_token"]

Activation = Literal["silu", "relu", "gelu"]
_ACTIVATIONS = {"silu": F.silu, "relu": F.relu, "gelu": F.gelu}


def _check_real(name: str, value: object, *, low: float = 0.0, high: float = math.inf, open_high: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or value > high or (open_high and value == high):
        raise ValueError(f"{name} must be a finite number in [{low:g}, {high:g}{')' if open_high else ']'}, "
                         f"got {value!r}")  # fmt: skip


@dataclass(frozen=True)
class MemVPConfig:
    """Hyper-parameters of MemVP; defaults are the official LLaMA/ScienceQA setting (``memvp/model.py``,
    ``scripts/finetuning_sqa_7b.sh``)."""

    feature_dim: int = 1024
    """Width ``C`` of the visual patch features (1024: CLIP ViT-L/14)."""
    num_slots: int = 320
    """Memory slots ``m`` per FFN (``--emb 320`` for 256 patches: the rest are zero-padded slots)."""
    projector_hidden: int = 128
    """Hidden width of the projector (``--hidden_proj 128``)."""
    scale: float = 0.1
    """``s``, the scale of the memory branch (``--adapter_scale 0.1``)."""
    feature_scale: float = 0.01
    """Projected features are multiplied by this before they enter the memory (``* 0.01`` in the code)."""
    dropout: float = 0.1
    """Dropout on the memory branch's activations (the code's ``Adapter.dropout``)."""
    activation: Activation = "silu"
    """Activation of the memory branch (SiLU in the code; ``"relu"`` for the concatenated-FFN identity)."""
    position_embedding: bool = True
    """Learn the key position embedding ``P`` (``False``: the "no P" ablation, ``P = 0``)."""
    value_offset: bool = True
    """Learn the value offset ``E`` (``False``: the "no E" ablation, ``E = 0``)."""
    position_init_std: float = 0.02
    """Standard deviation of ``P``'s initialisation."""

    def __post_init__(self) -> None:
        positive_int(self.feature_dim, "feature_dim")
        positive_int(self.num_slots, "num_slots")
        positive_int(self.projector_hidden, "projector_hidden")
        _check_real("scale", self.scale)
        _check_real("feature_scale", self.feature_scale)
        _check_real("dropout", self.dropout, high=1.0, open_high=True)
        _check_real("position_init_std", self.position_init_std)
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(_ACTIVATIONS)}, got {self.activation!r}")
        for name in ("position_embedding", "value_offset"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class VisualProjector(nn.Module):
    """``Linear(C → h) → SiLU → Linear(h → d)``, Xavier-uniform weights and zero biases (the code's
    ``Projector``)."""

    def __init__(self, *, in_features: int, hidden: int, out_features: int) -> None:
        super().__init__()
        for name, v in (("in_features", in_features), ("hidden", hidden), ("out_features", out_features)):
            positive_int(v, name)
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)
        for fc in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(fc.weight)
            nn.init.zeros_(fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(x)))


class _MemoryState:
    """The current memory ``(keys, values)``, each ``(B, m, d)``, shared by every :class:`MemoryFFN` of one
    model (a plain holder, not a module, so it adds no parameters and no module cycles)."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None


class MemoryFFN(nn.Module):
    """A frozen FFN plus the memory branch: ``ffn(u) + s · Dropout(φ(u Kᵀ)) V`` (§3; ``forward_llama``).

    ``K = Z + P`` and ``V = Z + E`` come from the model's shared memory state; with no memory set it is the
    frozen FFN unchanged.
    """

    def __init__(self, ffn: nn.Module, state: _MemoryState, *, scale: float, dropout: float,
                 activation: Activation = "silu") -> None:  # fmt: skip
        super().__init__()
        if not isinstance(ffn, nn.Module):
            raise TypeError(f"ffn must be a torch.nn.Module, got {type(ffn).__name__}")
        if not isinstance(state, _MemoryState):
            raise TypeError("state must be the model's memory state")
        _check_real("scale", scale)
        _check_real("dropout", dropout, high=1.0, open_high=True)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(_ACTIVATIONS)}, got {activation!r}")
        self.ffn = ffn
        self._state = state
        self.scale = float(scale)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        out = self.ffn(u)
        keys, values = self._state.keys, self._state.values
        if keys is None:
            return out
        if keys.shape[0] != u.shape[0]:
            raise ValueError(f"the memory holds {keys.shape[0]} images but the batch has {u.shape[0]} rows")
        # (B, T, d) · (B, d, m) -> (B, T, m): every token scores every visual slot, then reads its value.
        act = self.dropout(_ACTIVATIONS[self.activation](torch.matmul(u, keys.to(u.dtype).transpose(1, 2))))
        return out + self.scale * torch.matmul(act, values.to(u.dtype))


def memory_flops_per_token(num_slots: int, hidden_size: int) -> int:
    """Extra matmul FLOPs of the memory branch per token and layer: ``2 · (2 m d)`` (two products of
    ``m d`` multiply-adds each, counted as 2 FLOPs per multiply-add as in :mod:`icml24.vision.flops`)."""
    positive_int(num_slots, "num_slots")
    positive_int(hidden_size, "hidden_size")
    return 4 * num_slots * hidden_size


class MemVP(nn.Module):
    """A frozen causal LM whose FFNs read projected visual features as extra memory slots (§3).

    The LM's parameters are frozen and each block's ``mlp`` is replaced *in place* by a :class:`MemoryFFN`
    around it; the trainable parameters are the projector, ``P`` (``position``) and ``E``
    (``value_offset``), shared by every block.

    Args:
        lm: a :class:`~icml24.language.TransformerLM` or a ``transformers`` Llama-style causal LM.
        config: the hyper-parameters (``feature_dim`` must match the visual features).

    Example::

        model = MemVP(lm, config=MemVPConfig(feature_dim=48, num_slots=20))
        logits = model(input_ids, features)        # (B, T, vocab): the text length is unchanged
    """

    def __init__(self, lm: nn.Module, *, config: MemVPConfig) -> None:
        super().__init__()
        if not isinstance(config, MemVPConfig):
            raise TypeError(f"config must be a MemVPConfig, got {type(config).__name__}")
        backend = LMBackend(lm)
        for p in lm.parameters():
            p.requires_grad_(False)
        self.config = config
        self.lm = lm
        self._backend = backend
        d, m = backend.hidden_size, config.num_slots
        self.hidden_size = d
        self.projector = VisualProjector(in_features=config.feature_dim, hidden=config.projector_hidden,
                                         out_features=d)  # fmt: skip
        if config.position_embedding:
            self.position = nn.Parameter(torch.randn(m, d) * config.position_init_std)
        else:
            self.register_buffer("position", torch.zeros(m, d))
        if config.value_offset:
            self.value_offset = nn.Parameter(torch.zeros(m, d))
        else:
            self.register_buffer("value_offset", torch.zeros(m, d))
        self._state = _MemoryState()
        for layer in backend.layers:
            layer.mlp = MemoryFFN(layer.mlp, self._state, scale=config.scale, dropout=config.dropout,
                                  activation=config.activation)  # fmt: skip

    # ------------------------------------------------------------------------------------------ memory
    def visual_prompts(self, features: torch.Tensor | None, batch_size: int,
                       image_present: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """``Z``: ``feature_scale · Projector(features)`` times the image indicator, zero-padded to ``m`` rows,
        ``(B, m, d)``; all zeros when ``features`` is ``None`` (no image)."""
        m, d = self.config.num_slots, self.hidden_size
        ref = self.position
        if features is None:
            return ref.new_zeros(batch_size, m, d)
        if not isinstance(features, torch.Tensor) or not features.is_floating_point():
            raise TypeError(f"features must be a float tensor of shape (batch, n, {self.config.feature_dim}) or None")
        if features.dim() != 3 or features.shape[0] != batch_size or features.shape[2] != self.config.feature_dim:
            raise ValueError(f"features must have shape ({batch_size}, n, {self.config.feature_dim}), "
                             f"got {tuple(features.shape)}")  # fmt: skip
        if not bool(torch.isfinite(features).all()):
            raise ValueError("features must be finite (no NaN or inf)")
        n = features.shape[1]
        if n > m:
            raise ValueError(f"features hold {n} patches but the memory has only num_slots={m} slots")
        z = self.config.feature_scale * self.projector(features.to(ref.dtype))
        if image_present is not None:
            if not isinstance(image_present, torch.Tensor) or tuple(image_present.shape) != (batch_size,):
                raise ValueError(f"image_present must be a tensor of shape ({batch_size},), "
                                 f"got {getattr(image_present, 'shape', image_present)!r}")  # fmt: skip
            z = z * image_present.to(z.dtype).view(-1, 1, 1)
        if n < m:
            z = torch.cat([z, z.new_zeros(batch_size, m - n, d)], dim=1)
        return z

    @contextlib.contextmanager
    def memory(self, features: torch.Tensor | None, batch_size: int,
               image_present: torch.Tensor | None = None) -> Iterator[None]:  # fmt: skip
        """Within the block, every FFN of the LM reads keys ``Z + P`` and values ``Z + E``."""
        z = self.visual_prompts(features, batch_size, image_present)
        self._state.keys = z + self.position
        self._state.values = z + self.value_offset
        try:
            yield
        finally:
            self._state.keys = self._state.values = None

    # ----------------------------------------------------------------------------------------- forward
    def forward(
        self,
        input_ids: torch.Tensor,
        features: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        image_present: torch.Tensor | None = None,
        cache: Any = None,
    ) -> torch.Tensor:
        """Logits ``(B, T, vocab)`` of the text ``input_ids`` given the images' patch ``features``
        ``(B, n, C)`` (``None``: no image, ``Z = 0``); the sequence is the text alone."""
        _check_ids(input_ids)
        with self.memory(features, input_ids.shape[0], image_present):
            return self._backend(input_ids, attention_mask, cache)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, features: torch.Tensor | None = None, *, max_new_tokens: int,
                 attention_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """Greedy continuation of equal-length prompts with a KV cache; returns ``(B, max_new_tokens)`` ids.
        The memory is computed once per image, as in the official ``generate``."""
        _check_ids(input_ids)
        positive_int(max_new_tokens, "max_new_tokens")
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        was = self.training
        self.eval()
        try:
            with self.memory(features, input_ids.shape[0]):
                return greedy_generate(self._backend, input_ids, mask, self._backend.new_cache(), max_new_tokens)
        finally:
            self.train(was)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters MemVP trains (projector, ``P``, ``E``)."""
        return [p for p in self.parameters() if p.requires_grad]


def _check_ids(input_ids: Any) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError("input_ids must be an integer torch.Tensor of shape (batch, seq)")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must have shape (batch, seq), got {tuple(input_ids.shape)}")
