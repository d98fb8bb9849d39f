"""PEG: Probabilistic Expansion from LearnGene (Wang, Yang, Chen, Geng, ICML 2024, PMLR 235:52019-52032,
https://proceedings.mlr.press/v235/wang24cf.html; code https://github.com/BruceQFWang/ICML2024-PEG).

A trained "ancestry" ViT is compressed into a *learngene*: each learngene attention head is a convex
combination of the ancestry's heads of that layer, ``W_g = Q·W`` with ``Q ∈ R^{H_g×H}``, and each learngene
FFN layer is a convex combination of the ancestry's FFN layers, ``F_g = P·F`` with ``P ∈ R^{L_g×L}``; the rows
of ``P`` and ``Q`` are ``softmax`` of standard-normal logits ("Gaussian" mixture sampling, the abstract's
"probabilistic mixture"). The learngene is then *expanded* to a descendant of any head count ``H_d`` and depth
``L_d`` by small non-linear maps ``φ = Linear∘ReLU∘Linear`` acting on the head axis (on the attention logits
``QKᵀ/√d_h`` and on the values, per layer) and on the layer axis (on every scalar of the stacked FFN weights).

This module is the method, with no I/O: :func:`mixture_matrix`, :func:`mix`, :class:`ExpansionMap`,
:class:`LearngeneAttention`, :class:`ExpandedFFNStack`, :func:`build_descendant` and :func:`descendant_parameter_count`.
The paper's body was not available to us; the shapes follow the official code (``models/vision_transformer.py``:
``Attention_Learngene``, ``transform_attn``, ``transform_mlp``, ``DeiT_mixture_learngene``) and every departure is
listed in the package README.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from icml24.vision.tiny_vit import SoftmaxAttention, TinyViT

__all__ = [
    "METHODS",
    "DescendantSpec",
    "ExpandedFFNStack",
    "ExpansionMap",
    "LearngeneAttention",
    "build_descendant",
    "descendant_parameter_count",
    "mix",
    "mixture_matrix",
]

MixtureKind = Literal["gaussian", "uniform", "first"]
Method = Literal["random", "peg", "peg_tied", "peg_uniform", "peg_random_maps", "peg_released", "direct", "tleg",
                 "ancestry"]  # fmt: skip
METHODS: tuple[str, ...] = ("random", "peg", "peg_tied", "peg_uniform", "peg_random_maps", "peg_released", "direct",
                            "tleg", "ancestry")  # fmt: skip
"""Initialisations :func:`build_descendant` knows (see its docstring)."""


def _pos_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _generator(name: str, value: object) -> torch.Generator | None:
    if value is not None and not isinstance(value, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator or None, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------- mixtures
def mixture_matrix(
    n_out: int, n_in: int, *, kind: MixtureKind = "gaussian", generator: torch.Generator | None = None
) -> torch.Tensor:
    """A row-stochastic mixture matrix ``(n_out, n_in)`` (the sampling step of PEG, Sec. 3 of the paper).

    - ``"gaussian"``: rows ``softmax(z)``, ``z ~ N(0, I)`` (the code's ``'Gaussian-Layer'`` distribution);
    - ``"uniform"``: every entry ``1/n_in`` (the code's other distribution: each row is the plain average);
    - ``"first"``: one-hot rows selecting the first ``n_out`` inputs (what the released code actually uses
      for the heads, and "direct inheritance"); needs ``n_out <= n_in``.
    """
    n_out, n_in = _pos_int("n_out", n_out), _pos_int("n_in", n_in)
    generator = _generator("generator", generator)
    if kind == "gaussian":
        return torch.softmax(torch.randn(n_out, n_in, generator=generator), dim=1)
    if kind == "uniform":
        return torch.full((n_out, n_in), 1.0 / n_in)
    if kind == "first":
        if n_out > n_in:
            raise ValueError(f"n_out ({n_out}) must be <= n_in ({n_in}) for kind='first'")
        return torch.eye(n_in)[:n_out].clone()
    raise ValueError(f"kind must be 'gaussian', 'uniform' or 'first', got {kind!r}")


def mix(weights: torch.Tensor, mixture: torch.Tensor, *, dim: int = 0) -> torch.Tensor:
    """Contract the axis ``dim`` of ``weights`` (size ``n_in``) with ``mixture`` ``(n_out, n_in)``: output
    index ``i`` along ``dim`` is ``Σ_j mixture[i, j] · weights[j]`` (the code's ``einsum('ij,jkl->ikl')``)."""
    if not isinstance(weights, torch.Tensor) or not isinstance(mixture, torch.Tensor):
        raise TypeError("weights and mixture must be torch tensors")
    if mixture.dim() != 2:
        raise ValueError(f"mixture must be 2-D (n_out, n_in), got shape {tuple(mixture.shape)}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    for name, t in (("weights", weights), ("mixture", mixture)):
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} must be finite (no NaN or inf)")
    if not -weights.dim() <= dim < weights.dim():
        raise ValueError(f"dim must index an axis of weights ({weights.dim()}-D), got {dim}")
    if weights.shape[dim] != mixture.shape[1]:
        raise ValueError(f"mixture has {mixture.shape[1]} columns but weights has {weights.shape[dim]} along dim {dim}")
    moved = weights.movedim(dim, 0)
    out = torch.tensordot(mixture.to(weights.dtype), moved, dims=([1], [0]))
    return out.movedim(0, dim)


# ---------------------------------------------------------------------------------------------- expansion
def _source(i: int, n_in: int, n_out: int, how: str) -> int:
    # "cyclic" for heads (head j copies learngene head j mod H_g), "stretch" for layers (layer i copies the
    # learngene layer at the same relative depth).
    return i % n_in if how == "cyclic" else min(n_in - 1, (i * n_in) // n_out)


class ExpansionMap(nn.Module):
    """``φ: R^{n_in} → R^{n_out}``, ``Linear → ReLU → Linear`` applied along one axis of a tensor (the code's
    ``transform_attn`` / ``transform_mlp``: the "non-linear mapping" of the abstract).

    Args:
        n_in: learngene size along the axis (``H_g`` heads or ``L_g`` layers).
        n_out: descendant size (``H_d`` or ``L_d``).
        init: ``"designed"``: ``φ(x) = [S, −S]·ReLU([I; −I]·x) = S·x`` exactly, with ``S`` the copy matrix of
            ``copy`` (so the descendant starts as the copied learngene and the map is then trained);
            ``"random"``: PyTorch's default Linear initialisation with hidden width ``n_out`` (the code's
            ``HDP_RATIOS = [1.5, 1]`` give ``H_g → H_d → H_d``; ``transform_mlp`` is ``L_g → L_d → L_d``).
        copy: ``"cyclic"`` (output ``j`` copies input ``j mod n_in``) or ``"stretch"`` (output ``i`` copies
            input ``⌊i·n_in/n_out⌋``); used by ``init="designed"``.
        bias: whether both Linears have a bias (the code: yes, with ``NON_LINEAR``).
        generator: draws of ``init="random"``.
    """

    def __init__(
        self,
        *,
        n_in: int,
        n_out: int,
        init: Literal["designed", "random"] = "designed",
        copy: Literal["cyclic", "stretch"] = "cyclic",
        bias: bool = True,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.n_in, self.n_out = _pos_int("n_in", n_in), _pos_int("n_out", n_out)
        if init not in ("designed", "random"):
            raise ValueError(f"init must be 'designed' or 'random', got {init!r}")
        if copy not in ("cyclic", "stretch"):
            raise ValueError(f"copy must be 'cyclic' or 'stretch', got {copy!r}")
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be True or False, got {bias!r}")
        generator = _generator("generator", generator)
        hidden = 2 * n_in if init == "designed" else n_out
        self.fc1 = nn.Linear(n_in, hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, n_out, bias=bias)
        with torch.no_grad():
            if init == "designed":
                eye = torch.eye(n_in)
                self.fc1.weight.copy_(torch.cat([eye, -eye], 0))
                sel = torch.zeros(n_out, n_in)
                for i in range(n_out):
                    sel[i, _source(i, n_in, n_out, copy)] = 1.0
                self.fc2.weight.copy_(torch.cat([sel, -sel], 1))
                for lin in (self.fc1, self.fc2):
                    if lin.bias is not None:
                        lin.bias.zero_()
            else:
                for lin in (self.fc1, self.fc2):  # nn.Linear's default (Kaiming-uniform) init, but seeded
                    bound = 1.0 / math.sqrt(lin.in_features)
                    lin.weight.copy_(torch.rand(lin.weight.shape, generator=generator) * 2 * bound - bound)
                    if lin.bias is not None:
                        lin.bias.copy_(torch.rand(lin.bias.shape, generator=generator) * 2 * bound - bound)

    def forward(self, x: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """Apply φ along axis ``dim`` of ``x`` (its size must be ``n_in``)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch tensor, got {type(x).__name__}")
        if x.dim() == 0 or not -x.dim() <= dim < x.dim() or x.shape[dim] != self.n_in:
            raise ValueError(f"x must have size {self.n_in} along dim {dim}, got shape {tuple(x.shape)}")
        return self.fc2(F.relu(self.fc1(x.movedim(dim, -1)))).movedim(-1, dim)


# ---------------------------------------------------------------------------------------------- attention
class LearngeneAttention(nn.Module):
    """Multi-head attention computed from ``H_g`` learngene heads and expanded to ``H_d`` descendant heads
    (the code's ``Attention_Learngene``; PEG's head expansion).

    ``q, k, v`` come from the learngene heads; the logits ``S = q kᵀ/√d_h ∈ R^{B×H_g×N×N}`` and the values are
    mapped along the head axis, ``S' = φ_qk(S)``, ``v' = φ_v(v)``; then ``softmax`` over keys per descendant
    head and an output projection from ``H_d·d_h`` to ``dim``. Without expansion (``expand=False``, needs
    ``H_g = H_d``) this is standard multi-head attention with ``H_d`` heads of width ``head_dim``.

    Args:
        dim: token width ``D``.
        head_dim: per-head width ``d_h``.
        learngene_heads: ``H_g``.
        descendant_heads: ``H_d``.
        expand: use the expansion maps φ_qk and φ_v.
        map_init: ``init`` of both maps (:class:`ExpansionMap`).
        proj_drop: dropout after the output projection.
        generator: draws of random maps.
    """

    def __init__(
        self,
        *,
        dim: int,
        head_dim: int,
        learngene_heads: int,
        descendant_heads: int,
        expand: bool = True,
        map_init: Literal["designed", "random"] = "designed",
        proj_drop: float = 0.0,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.dim, self.head_dim = _pos_int("dim", dim), _pos_int("head_dim", head_dim)
        self.learngene_heads = _pos_int("learngene_heads", learngene_heads)
        self.descendant_heads = _pos_int("descendant_heads", descendant_heads)
        if not isinstance(expand, bool):
            raise TypeError(f"expand must be True or False, got {expand!r}")
        if not expand and learngene_heads != descendant_heads:
            raise ValueError(f"expand=False needs learngene_heads == descendant_heads, got {learngene_heads} and "
                             f"{descendant_heads}")  # fmt: skip
        if isinstance(proj_drop, bool) or not isinstance(proj_drop, (int, float)) or not 0.0 <= proj_drop < 1.0:
            raise ValueError(f"proj_drop must be a number in [0, 1), got {proj_drop!r}")
        if map_init not in ("designed", "random"):
            raise ValueError(f"map_init must be 'designed' or 'random', got {map_init!r}")
        generator = _generator("generator", generator)
        scale = dim**-0.5
        self.qkv_weight = nn.Parameter(torch.empty(3, learngene_heads, head_dim, dim).uniform_(-scale, scale))
        self.qkv_bias = nn.Parameter(torch.zeros(3, learngene_heads, head_dim))
        self.proj = nn.Linear(descendant_heads * head_dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.expand = expand
        if expand:
            self.qk_map = ExpansionMap(n_in=learngene_heads, n_out=descendant_heads, init=map_init, generator=generator)
            self.v_map = ExpansionMap(n_in=learngene_heads, n_out=descendant_heads, init=map_init, generator=generator)
        self.last_attention: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch tensor, got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, {self.dim}), got {tuple(x.shape)}")
        b, n, _ = x.shape
        # (3, B, H_g, N, d_h): the learngene heads' queries, keys and values.
        qkv = torch.einsum("bnc,thdc->tbhnd", x, self.qkv_weight) + self.qkv_bias[:, None, :, None, :]
        q, k, v = qkv[0], qkv[1], qkv[2]
        logits = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        if self.expand:  # head expansion on the head axis (dim 1), as the code's hdp='qkv'
            logits, v = self.qk_map(logits, dim=1), self.v_map(v, dim=1)
        attn = logits.softmax(-1)
        self.last_attention = attn.detach()
        out = (attn @ v).transpose(1, 2).reshape(b, n, self.descendant_heads * self.head_dim)
        return self.proj_drop(self.proj(out))


# ---------------------------------------------------------------------------------------------- FFN depth expansion
class ExpandedFFNStack(nn.Module):
    """The learngene FFN layers (``L_g`` stacked copies of ``fc1``/``fc2``) and the depth map
    ``φ_depth: R^{L_g} → R^{L_d}`` applied to every scalar position; descendant layer ``i``'s FFN is output
    ``i`` (the code's ``transform_mlp`` over ``learngene_fc*``). Kept as a module only by the tied ablation
    (``"peg_tied"``), where the learngene and φ are trained and every descendant layer stays a function of the
    ``L_g`` learngene layers; PEG itself writes the expanded weights into independent layers once.

    :meth:`layer` computes φ afresh; inside a model's forward pass the descendant's layers read
    :meth:`cached_layer`, which maps the whole stack once per pass (:meth:`clear_cache` starts a new one)."""

    def __init__(self, *, fc1_weight: torch.Tensor, fc1_bias: torch.Tensor, fc2_weight: torch.Tensor,
                 fc2_bias: torch.Tensor, depth_map: ExpansionMap):  # fmt: skip
        super().__init__()
        named = (("fc1_weight", fc1_weight), ("fc1_bias", fc1_bias), ("fc2_weight", fc2_weight), ("fc2_bias", fc2_bias))
        for name, t in named:
            if not isinstance(t, torch.Tensor) or t.dim() == 0:
                raise TypeError(f"{name} must be a torch tensor stacking the learngene layers")
            if not torch.isfinite(t).all():
                raise ValueError(f"{name} must be finite (no NaN or inf)")
        if not isinstance(depth_map, ExpansionMap):
            raise TypeError(f"depth_map must be an ExpansionMap, got {type(depth_map).__name__}")
        lg = fc1_weight.shape[0]
        for name, t in named[1:]:
            if t.shape[0] != lg:
                raise ValueError(f"{name} must stack {lg} layers like fc1_weight, got shape {tuple(t.shape)}")
        if depth_map.n_in != lg:
            raise ValueError(f"depth_map must map {lg} learngene layers, got n_in={depth_map.n_in}")
        self.fc1_weight, self.fc1_bias = nn.Parameter(fc1_weight.clone()), nn.Parameter(fc1_bias.clone())
        self.fc2_weight, self.fc2_bias = nn.Parameter(fc2_weight.clone()), nn.Parameter(fc2_bias.clone())
        self.depth_map = depth_map
        self._cache: tuple[torch.Tensor, ...] | None = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"] = None  # a pass's graph is not copied with the module
        return state

    def expanded(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """All ``L_d`` layers at once: φ applied to each stacked tensor, ``(L_d, ...)`` each."""
        return tuple(self.depth_map(t, dim=0) for t in (self.fc1_weight, self.fc1_bias, self.fc2_weight,
                                                        self.fc2_bias))  # type: ignore[return-value]  # fmt: skip

    def clear_cache(self) -> None:
        """Forget the mapped stack (called before every forward pass of the descendant)."""
        self._cache = None

    def cached_layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`layer` from a stack mapped once per forward pass (one φ evaluation for all ``L_d`` layers)."""
        if not 0 <= i < self.depth_map.n_out:
            raise ValueError(f"i must be in [0, {self.depth_map.n_out}), got {i}")
        if self._cache is None:
            self._cache = self.expanded()
        return tuple(t[i] for t in self._cache)  # type: ignore[return-value]

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(fc1.weight, fc1.bias, fc2.weight, fc2.bias)`` of descendant layer ``i``."""
        if not 0 <= i < self.depth_map.n_out:
            raise ValueError(f"i must be in [0, {self.depth_map.n_out}), got {i}")
        return tuple(self.depth_map(t, dim=0)[i] for t in (self.fc1_weight, self.fc1_bias, self.fc2_weight,
                                                           self.fc2_bias))  # type: ignore[return-value]  # fmt: skip


class _ExpandedMLP(nn.Module):
    """Descendant layer ``index``'s FFN, its weights read from a shared :class:`ExpandedFFNStack`."""

    def __init__(self, stack: ExpandedFFNStack, index: int, dropout: float):
        super().__init__()
        self._stack = [stack]  # a list, so that the shared stack is registered once (on the model), not per block
        self.index = index
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = self._stack[0].cached_layer(self.index)
        return self.drop(F.linear(self.drop(F.gelu(F.linear(x, w1, b1))), w2, b2))


# ---------------------------------------------------------------------------------------------- descendants
@dataclass(frozen=True)
class DescendantSpec:
    """Sizes of the learngene and of a descendant (defaults: the notes' digits miniature of DeiT-S's 6→4→6
    heads, 12→6→12 layers; here an ancestry of 4 heads and 6 layers)."""

    learngene_heads: int = 2
    """``H_g``, heads per learngene layer (the code's ``NUM_HEADS_LEARNGENE``)."""
    learngene_layers: int = 3
    """``L_g``, learngene FFN layers (``12 / FFN_RATIOS`` in the code)."""
    descendant_heads: int = 4
    """``H_d``, heads per descendant layer."""
    descendant_layers: int = 6
    """``L_d``, descendant depth (``L_g · DESCENDANT_FFN_RATIOS``)."""

    def __post_init__(self) -> None:
        for name in ("learngene_heads", "learngene_layers", "descendant_heads", "descendant_layers"):
            _pos_int(name, getattr(self, name))


def _ancestry_parts(ancestry: TinyViT) -> tuple[int, int, int, int]:
    if not isinstance(ancestry, TinyViT):
        raise TypeError(f"ancestry must be an icml24.vision.tiny_vit.TinyViT, got {type(ancestry).__name__}")
    attn = ancestry.blocks[0].attn
    if not isinstance(attn, SoftmaxAttention):
        raise TypeError("ancestry must use SoftmaxAttention in its blocks")
    dim = ancestry.head.in_features
    return dim, attn.num_heads, attn.head_dim, len(ancestry.blocks)


def _head_tensors(block: nn.Module, heads: int, head_dim: int) -> tuple[torch.Tensor, ...]:
    """An ancestry block's attention split per head: qkv weight ``(3, H, d_h, D)``, bias ``(3, H, d_h)`` and the
    output projection's columns ``(H, D, d_h)``."""
    dim = block.attn.qkv.in_features
    w = block.attn.qkv.weight.detach().reshape(3, heads, head_dim, dim)
    b = block.attn.qkv.bias.detach().reshape(3, heads, head_dim)
    proj_cols = block.attn.proj.weight.detach().reshape(dim, heads, head_dim).permute(1, 0, 2)
    return w, b, proj_cols


def descendant_parameter_count(*, dim: int, head_dim: int, mlp_dim: int, patch_size: int, in_channels: int,
                               num_tokens: int, num_classes: int, spec: DescendantSpec, expanded: bool,
                               map_hidden: int | None = None, depth_hidden: int | None = None,
                               tied_ffn: bool = False) -> int:  # fmt: skip
    """The descendant's parameter count in closed form (invariant 5 of the notes).

    ``expanded=True`` is PEG's descendant (learngene heads + head maps per layer; ``L_d`` FFNs of its own, or with
    ``tied_ffn`` the ablation's shared learngene FFN stack + depth map); ``False`` a standard ViT with ``H_d`` heads of
    width ``head_dim`` and ``L_d`` layers. ``map_hidden`` and ``depth_hidden`` are the maps' hidden widths (default
    ``2·H_g`` and ``2·L_g``, the designed init).
    """
    if not isinstance(tied_ffn, bool):
        raise TypeError(f"tied_ffn must be True or False, got {tied_ffn!r}")
    for name, value in (("dim", dim), ("head_dim", head_dim), ("mlp_dim", mlp_dim), ("patch_size", patch_size),
                        ("in_channels", in_channels), ("num_tokens", num_tokens), ("num_classes", num_classes)):
        _pos_int(name, value)
    for name, value in (("map_hidden", map_hidden), ("depth_hidden", depth_hidden)):
        if value is not None:
            _pos_int(name, value)
    if not isinstance(spec, DescendantSpec):
        raise TypeError(f"spec must be a DescendantSpec, got {type(spec).__name__}")
    if not isinstance(expanded, bool):
        raise TypeError(f"expanded must be True or False, got {expanded!r}")
    hg, lg, hd, ld = spec.learngene_heads, spec.learngene_layers, spec.descendant_heads, spec.descendant_layers
    embed = in_channels * patch_size**2 * dim + dim + num_tokens * dim
    final = 2 * dim + dim * num_classes + num_classes
    ffn = dim * mlp_dim + mlp_dim + mlp_dim * dim + dim
    proj = hd * head_dim * dim + dim
    norms = 4 * dim
    if not expanded:
        per_block = norms + 3 * hd * head_dim * (dim + 1) + proj + ffn
        return embed + final + ld * per_block
    h = map_hidden or 2 * hg
    hmap = (hg * h + h) + (h * hd + hd)
    per_block = norms + 3 * hg * head_dim * (dim + 1) + proj + 2 * hmap
    if not tied_ffn:
        return embed + final + ld * (per_block + ffn)
    dh = depth_hidden or 2 * lg
    dmap = (lg * dh + dh) + (dh * ld + ld)
    return embed + final + ld * per_block + lg * ffn + dmap


def build_descendant(
    ancestry: TinyViT,
    spec: DescendantSpec,
    method: Method,
    *,
    num_classes: int,
    generator: torch.Generator | None = None,
    dropout: float = 0.0,
    mixture_kind: MixtureKind | None = None,
) -> TinyViT:
    """A descendant ViT of ``spec``'s size for a ``num_classes``-way task, initialised by ``method``.

    Methods (ancestry of ``H`` heads, ``L`` layers; ancestry block ``a(i) = ⌊i·L/L_d⌋`` gives descendant layer
    ``i`` its LayerNorms and the heads it mixes):

    - ``"random"``: a fresh standard ViT (nothing inherited).
    - ``"peg"``: PEG. Learngene heads ``Q_i·heads(a(i))`` and FFN layers ``P·FFN`` with Gaussian-softmax mixtures,
      expanded by trainable head maps with the designed (copy) initialisation; the FFN depth expansion is applied
      once and its ``L_d`` outputs written into independent per-layer FFN weights, as the official code's
      ``TransMlp`` does (``fc1.weight.data = descendant_fc1_weights``), so each descendant layer has an FFN of its
      own to train.
    - ``"peg_tied"``: the tied ablation: as ``"peg"``, but every descendant FFN stays ``φ_depth`` of the ``L_g``
      learngene layers for the whole training (:class:`ExpandedFFNStack`, fewer trainable parameters).
    - ``"peg_uniform"``: PEG with uniform mixtures (every learngene head / layer is the plain average).
    - ``"peg_random_maps"``: PEG with randomly initialised expansion maps (the code's ``nn.Linear`` defaults).
      Both untie the FFNs like ``"peg"``.
    - ``"peg_released"``: the released code's behaviour: the head mixture replaced by the first ``H_g`` heads,
      random maps, then every Linear re-drawn ``N(0, 0.02²)`` truncated with zero bias, every LayerNorm reset and
      the positional embedding re-drawn; only the learngene qkv and the patch embedding survive.
    - ``"direct"``: direct inheritance: the learngene is the first ``H_g`` heads and first ``L_g`` FFN layers,
      copied into a standard ViT (head ``j`` ← learngene head ``j mod H_g``, layer ``i`` ← ``⌊i·L_g/L_d⌋``).
    - ``"tleg"``: TLEG-style linear expansion (Wang et al., AAAI 2024) with ancestry layers ``0`` and ``L-1`` as
      anchors: every block parameter ``θ_i = θ_0 + t_i·(θ_{L-1} − θ_0)``, ``t_i = i/(L_d−1)``; heads cycled.
    - ``"ancestry"``: the ancestry itself with a new head (needs ``H_d = H`` and ``L_d = L``).

    ``mixture_kind`` overrides the mixture of the ``peg*`` methods (``"first"`` makes PEG's learngene a
    selection, e.g. to check that a one-hot mixture with identity maps reproduces the ancestry).

    All inheriting methods copy the patch embedding, positional embedding and final norm; the classifier is new,
    drawn from a generator of its own seeded by the first draw of ``generator``, so every method called with the
    same generator state gets the same classifier initialisation (the random baseline's other fresh weights come
    from the global RNG seeded by that draw too).
    In the descendant, the output projection's columns of head ``j`` are the same mixture of the ancestry heads'
    columns, divided by the number of copies of its learngene head, so copying heads keeps the function.
    """
    dim, heads, head_dim, depth = _ancestry_parts(ancestry)
    if not isinstance(spec, DescendantSpec):
        raise TypeError(f"spec must be a DescendantSpec, got {type(spec).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    _pos_int("num_classes", num_classes)
    if mixture_kind not in (None, "gaussian", "uniform", "first"):
        raise ValueError(f"mixture_kind must be None, 'gaussian', 'uniform' or 'first', got {mixture_kind!r}")
    generator = _generator("generator", generator)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
    hg, lg, hd, ld = spec.learngene_heads, spec.learngene_layers, spec.descendant_heads, spec.descendant_layers
    if method in ("peg", "peg_uniform", "peg_random_maps", "peg_released", "direct"):
        if hg > heads:
            raise ValueError(f"spec.learngene_heads ({hg}) must be <= the ancestry's heads ({heads})")
        if lg > depth:
            raise ValueError(f"spec.learngene_layers ({lg}) must be <= the ancestry's depth ({depth})")
    if method == "ancestry" and (hd != heads or ld != depth):
        raise ValueError(f"method 'ancestry' needs spec of the ancestry's size ({heads} heads, {depth} layers)")
    expanded = method.startswith("peg")
    mlp_dim = ancestry.blocks[0].mlp[0].out_features
    map_init = "random" if method in ("peg_random_maps", "peg_released") else "designed"
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
    torch.manual_seed(seed)  # the fresh parts (classifier, random baseline) come from the caller's generator

    def factory(_: int) -> nn.Module:
        return LearngeneAttention(dim=dim, head_dim=head_dim, learngene_heads=hg if expanded else hd,
                                  descendant_heads=hd, expand=expanded, map_init=map_init, proj_drop=dropout,
                                  generator=generator)  # fmt: skip

    model = TinyViT(image_size=ancestry.image_size, patch_size=ancestry.patch_size, in_channels=ancestry.in_channels,
                    num_classes=num_classes, dim=dim, depth=ld, num_heads=hd, mlp_dim=mlp_dim, dropout=dropout,
                    attention_factory=factory)  # fmt: skip
    _init_classifier(model.head, torch.Generator().manual_seed(seed))
    if method == "random":
        return model
    with torch.no_grad():
        model.patch_embed.load_state_dict(ancestry.patch_embed.state_dict())
        model.pos_embed.copy_(ancestry.pos_embed)
        model.norm.load_state_dict(ancestry.norm.state_dict())
        anc = list(ancestry.blocks)
        if method in ("tleg", "ancestry"):
            _linear_expansion(model, anc, heads, head_dim, hd, ld, anchors_only=method == "tleg")
            return model
        kind = {"peg": "gaussian", "peg_tied": "gaussian", "peg_random_maps": "gaussian",
                "peg_uniform": "uniform"}.get(method, "first")  # fmt: skip
        if mixture_kind is not None and expanded:
            kind = mixture_kind
        for i, block in enumerate(model.blocks):
            a = anc[(i * depth) // ld]
            block.norm1.load_state_dict(a.norm1.state_dict())
            block.norm2.load_state_dict(a.norm2.state_dict())
            w, b, cols = _head_tensors(a, heads, head_dim)
            q = mixture_matrix(hg, heads, kind=kind, generator=generator)  # Q_i: H_g × H
            gw, gb, gcols = mix(w, q, dim=1), mix(b, q, dim=1), mix(cols, q, dim=0)
            copies = torch.bincount(torch.arange(hd) % hg, minlength=hg).float()
            src = torch.arange(hd) % hg
            out_cols = gcols[src] / copies[src][:, None, None]  # (H_d, D, d_h)
            block.attn.proj.weight.copy_(out_cols.permute(1, 0, 2).reshape(dim, hd * head_dim))
            block.attn.proj.bias.copy_(a.attn.proj.bias)
            if expanded:
                block.attn.qkv_weight.copy_(gw)
                block.attn.qkv_bias.copy_(gb)
            else:
                block.attn.qkv_weight.copy_(gw[:, src])
                block.attn.qkv_bias.copy_(gb[:, src])
        fc1w = torch.stack([blk.mlp[0].weight.detach() for blk in anc])
        fc1b = torch.stack([blk.mlp[0].bias.detach() for blk in anc])
        fc2w = torch.stack([blk.mlp[3].weight.detach() for blk in anc])
        fc2b = torch.stack([blk.mlp[3].bias.detach() for blk in anc])
        p = mixture_matrix(lg, depth, kind=kind, generator=generator)  # P: L_g × L
        learngene = [mix(t, p, dim=0) for t in (fc1w, fc1b, fc2w, fc2b)]
        if expanded and method != "peg_released":
            depth_map = ExpansionMap(n_in=lg, n_out=ld, init=map_init, copy="stretch", generator=generator)
            stack = ExpandedFFNStack(fc1_weight=learngene[0], fc1_bias=learngene[1], fc2_weight=learngene[2],
                                     fc2_bias=learngene[3], depth_map=depth_map)  # fmt: skip
            if method == "peg_tied":
                model.ffn_learngene = stack
                for i, block in enumerate(model.blocks):
                    block.mlp = _ExpandedMLP(stack, i, dropout)
                model.register_forward_pre_hook(_clear_ffn_cache)
            else:  # untie: the expanded weights, computed once, become each layer's own FFN (official TransMlp)
                w1, b1, w2, b2 = stack.expanded()
                for i, block in enumerate(model.blocks):
                    block.mlp[0].weight.copy_(w1[i])
                    block.mlp[0].bias.copy_(b1[i])
                    block.mlp[3].weight.copy_(w2[i])
                    block.mlp[3].bias.copy_(b2[i])
        else:
            for i, block in enumerate(model.blocks):
                s = min(lg - 1, (i * lg) // ld)
                block.mlp[0].weight.copy_(learngene[0][s])
                block.mlp[0].bias.copy_(learngene[1][s])
                block.mlp[3].weight.copy_(learngene[2][s])
                block.mlp[3].bias.copy_(learngene[3][s])
        if method == "peg_released":
            _released_reinit(model, generator)
    return model


def _clear_ffn_cache(model: nn.Module, _args: object) -> None:
    """Forward pre-hook of a tied descendant: map its FFN stack afresh in this pass (a module-level function, so a
    deep copy of the model clears its own stack)."""
    model.ffn_learngene.clear_cache()


def _init_classifier(head: nn.Linear, generator: torch.Generator) -> None:
    """``nn.Linear``'s default initialisation (uniform in ``±1/√fan_in``) drawn from ``generator``."""
    bound = 1.0 / math.sqrt(head.in_features)
    with torch.no_grad():
        head.weight.copy_(torch.rand(head.weight.shape, generator=generator) * 2 * bound - bound)
        head.bias.copy_(torch.rand(head.bias.shape, generator=generator) * 2 * bound - bound)


def _linear_expansion(model: TinyViT, anc: Sequence[nn.Module], heads: int, head_dim: int, hd: int, ld: int,
                      *, anchors_only: bool) -> None:  # fmt: skip
    """TLEG (``anchors_only``): ``θ_i = θ_0 + t_i (θ_{L-1} − θ_0)``; else block ``i`` ← ancestry block ``i``."""
    dim = model.head.in_features
    src = torch.arange(hd) % heads
    copies = torch.bincount(src, minlength=heads).float()

    def block_params(a: nn.Module) -> dict[str, torch.Tensor]:
        w, b, cols = _head_tensors(a, heads, head_dim)
        return {
            "qkv_w": w[:, src], "qkv_b": b[:, src],
            "proj_w": (cols[src] / copies[src][:, None, None]).permute(1, 0, 2).reshape(dim, hd * head_dim),
            "proj_b": a.attn.proj.bias.detach(),
            **{f"n1.{k}": v.detach() for k, v in a.norm1.state_dict().items()},
            **{f"n2.{k}": v.detach() for k, v in a.norm2.state_dict().items()},
            **{f"mlp.{k}": v.detach() for k, v in a.mlp.state_dict().items()},
        }  # fmt: skip

    first, last = block_params(anc[0]), block_params(anc[-1])
    for i, block in enumerate(model.blocks):
        if anchors_only:
            t = i / (ld - 1) if ld > 1 else 0.0
            p = {k: first[k] + t * (last[k] - first[k]) for k in first}
        else:
            p = block_params(anc[i])
        block.attn.qkv_weight.copy_(p["qkv_w"])
        block.attn.qkv_bias.copy_(p["qkv_b"])
        block.attn.proj.weight.copy_(p["proj_w"])
        block.attn.proj.bias.copy_(p["proj_b"])
        block.norm1.load_state_dict({k[3:]: v for k, v in p.items() if k.startswith("n1.")})
        block.norm2.load_state_dict({k[3:]: v for k, v in p.items() if k.startswith("n2.")})
        block.mlp.load_state_dict({k[4:]: v for k, v in p.items() if k.startswith("mlp.")})


def _released_reinit(model: TinyViT, generator: torch.Generator | None) -> None:
    """``DeiT_mixture_learngene.__init__``'s closing ``trunc_normal_(pos_embed)`` and ``apply(_init_weights)``:
    every Linear (output projections, maps, classifier) ``N(0, 0.02²)`` truncated at ±2 with zero bias, every
    LayerNorm reset. The expanded FFN weights, computed once in the code, sit in re-initialised Linears
    (``TransMlp.fc1/fc2``), so the descendant's FFNs are plain ``N(0, 0.02²)`` draws: here too."""

    def trunc(t: torch.Tensor) -> None:
        t.copy_((torch.randn(t.shape, generator=generator) * 0.02).clamp(-2.0, 2.0))

    trunc(model.pos_embed)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            trunc(m.weight)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.LayerNorm):
            m.weight.fill_(1.0)
            m.bias.zero_()
