"""The fusion operator of Deep Fusion (Mazzawi et al., ICML 2024), for MLPs and for the shared transformer.

Deep Fusion trains two (or more) small networks, then *fuses* them into one wider network that starts
from their combined function and trains on. For two L-layer MLPs ``f`` and ``g`` with the same input and
output spaces (hidden widths ``h_f``, ``h_g``) the fused network ``F`` has hidden widths ``h_f + h_g``::

    layer 1:        W1 = [W1_f ; W1_g]                  b1 = [b1_f ; b1_g]     (rows stacked)
    layers 2..L-1:  Wl = [[Wl_f, C_fg], [C_gf, Wl_g]]   bl = [bl_f ; bl_g]     (cross blocks C = 0)
    output layer:   WL = [w_f WL_f, w_g WL_g]           bL = w_f bL_f + w_g bL_g

so that ``F(x) = w_f f(x) + w_g g(x)`` exactly for any elementwise activation (``w = (1/2, 1/2)``: the
average). The cross blocks ``C`` are zero at fusion but trainable, so the two halves start to interact:
this is what separates a fused network from an ensemble. Self-fusion (``g = f``) doubles the width of one
network function-preservingly; because the two halves then receive identical gradients forever, a small
noise on the cross blocks breaks the symmetry (:func:`self_fuse`).

The transformer is fused the same way along every width (residual stream ``d_f + d_g``, attention heads
``H_f + H_g`` with the head dimension kept, feed-forward units ``ff_f + ff_g``, token embeddings
``[E_f, E_g]``); the normalisation layers either normalise each parent's slice of the residual stream
on its own (``TransformerConfig.norm_groups``; exact) or over the whole fused stream (a plain norm;
approximate). The output logits are ``w_f logits_f + w_g logits_g``, the weights folded into the final
norm's gain so that tied embeddings stay tied.

The paper body was not available to us (see the README): this operator is the construction that makes the
fused network compute the parents' average at fusion time, not a transcription of the paper's equations.
:func:`net2wider_mlp` is the Net2WiderNet widening of Chen, Goodfellow & Shlens (ICLR 2016), a growth
baseline that starts from one network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from icml24.language.transformer import TransformerConfig, TransformerLM

__all__ = [
    "ACTIVATIONS",
    "DeepMLP",
    "fuse_mlps",
    "fuse_transformers",
    "net2wider_mlp",
    "self_fuse",
]

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh}
"""The elementwise activations :class:`DeepMLP` accepts (the fusion identity holds for any of them)."""


def _finite_nonneg(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _weights(weights: object) -> tuple[float, float]:
    if not isinstance(weights, (tuple, list)) or len(weights) != 2:
        raise ValueError(f"weights must be a pair (w_f, w_g) of finite numbers, got {weights!r}")
    out = []
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise ValueError(f"weights must be a pair (w_f, w_g) of finite numbers, got {weights!r}")
        out.append(float(w))
    return out[0], out[1]


class DeepMLP(nn.Module):
    """A fully connected network ``sizes[0] -> sizes[1] -> ... -> sizes[-1]`` with an elementwise activation
    between layers (none after the last).

    Args:
        sizes: the layer widths, input first and output last (at least two).
        activation: ``"relu"``, ``"gelu"`` or ``"tanh"``.
    """

    def __init__(self, sizes: Sequence[int], *, activation: str = "relu") -> None:
        super().__init__()
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) < 2:
            raise ValueError(f"sizes must be a sequence of at least two positive ints, got {sizes!r}")
        for s in sizes:
            if isinstance(s, bool) or not isinstance(s, int) or s < 1:
                raise ValueError(f"sizes must be a sequence of at least two positive ints, got {sizes!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.sizes = tuple(int(s) for s in sizes)
        self.activation = activation
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(self.sizes[:-1], self.sizes[1:], strict=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = ACTIVATIONS[self.activation]
        for i, layer in enumerate(self.linears):
            x = layer(x)
            if i < len(self.linears) - 1:
                x = act(x)
        return x

    def macs_per_example(self) -> int:
        """Multiply-accumulates of one forward pass (the weight matrices; biases and activations not counted)."""
        return sum(a * b for a, b in zip(self.sizes[:-1], self.sizes[1:], strict=True))


def _cross(rows: int, cols: int, std: float, gen: torch.Generator | None, like: torch.Tensor) -> torch.Tensor:
    if std == 0.0:
        return torch.zeros(rows, cols, dtype=like.dtype)
    return std * torch.randn(rows, cols, generator=gen, dtype=like.dtype)


def _block_diag(a: torch.Tensor, b: torch.Tensor, std: float, gen: torch.Generator | None) -> torch.Tensor:
    """``[[a, C], [C', b]]`` with cross blocks ``C, C'`` drawn from N(0, std^2) (zero when ``std == 0``)."""
    top = torch.cat([a, _cross(a.shape[0], b.shape[1], std, gen, a)], dim=1)
    bottom = torch.cat([_cross(b.shape[0], a.shape[1], std, gen, a), b], dim=1)
    return torch.cat([top, bottom], dim=0)


def _generator(seed: int | None) -> torch.Generator | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    return torch.Generator().manual_seed(seed)


@torch.no_grad()
def fuse_mlps(
    f: DeepMLP,
    g: DeepMLP,
    *,
    weights: tuple[float, float] = (0.5, 0.5),
    cross_noise: float = 0.0,
    seed: int | None = None,
) -> DeepMLP:
    """Fuse two MLPs into one with the hidden widths added, computing ``w_f f(x) + w_g g(x)`` at fusion.

    The hidden-to-hidden layers are block-diagonal with trainable cross blocks set to zero (or drawn from
    ``N(0, cross_noise^2)``, which breaks the exact identity by an amount of that order). The module
    docstring gives the construction.

    Args:
        f, g: the parents; same depth, input and output width and activation.
        weights: ``(w_f, w_g)``, the output combination; ``(0.5, 0.5)`` averages.
        cross_noise: standard deviation of the cross blocks (0: exact fusion).
        seed: seeds the cross-block noise.
    """
    for name, m in (("f", f), ("g", g)):
        if not isinstance(m, DeepMLP):
            raise TypeError(f"{name} must be a DeepMLP, got {type(m).__name__}")
    if len(f.sizes) != len(g.sizes) or f.sizes[0] != g.sizes[0] or f.sizes[-1] != g.sizes[-1]:
        raise ValueError(f"g must have the depth, input and output width of f: f is {f.sizes}, g is {g.sizes}")
    if f.activation != g.activation:
        raise ValueError(f"g must use the activation of f ({f.activation!r}), got {g.activation!r}")
    w_f, w_g = _weights(weights)
    std = _finite_nonneg("cross_noise", cross_noise)
    gen = _generator(seed)
    sizes = [f.sizes[0]] + [a + b for a, b in zip(f.sizes[1:-1], g.sizes[1:-1], strict=True)] + [f.sizes[-1]]
    fused = DeepMLP(sizes, activation=f.activation).to(f.linears[0].weight.dtype)
    last = len(f.linears) - 1
    for i, (lf, lg, out) in enumerate(zip(f.linears, g.linears, fused.linears, strict=True)):
        if i == 0 and i == last:  # no hidden layer: a linear model, the combination is the weighted sum
            out.weight.copy_(w_f * lf.weight + w_g * lg.weight)
            out.bias.copy_(w_f * lf.bias + w_g * lg.bias)
        elif i == 0:  # shared input: stack the output rows
            out.weight.copy_(torch.cat([lf.weight, lg.weight], dim=0))
            out.bias.copy_(torch.cat([lf.bias, lg.bias]))
        elif i == last:  # shared output: weighted concatenation of the columns
            out.weight.copy_(torch.cat([w_f * lf.weight, w_g * lg.weight], dim=1))
            out.bias.copy_(w_f * lf.bias + w_g * lg.bias)
        else:
            out.weight.copy_(_block_diag(lf.weight, lg.weight, std, gen))
            out.bias.copy_(torch.cat([lf.bias, lg.bias]))
    return fused


@torch.no_grad()
def net2wider_mlp(f: DeepMLP, widths: Sequence[int], *, noise: float = 0.0, seed: int = 0) -> DeepMLP:
    """Net2WiderNet (Chen et al., ICLR 2016, Section 3.2): widen every hidden layer of ``f`` to ``widths``.

    New unit ``j`` copies the incoming weights of a randomly chosen old unit ``r(j)`` (the first units map to
    themselves); the outgoing weights of every copy are divided by the number of copies of its source, so
    the widened network computes ``f`` exactly. ``noise`` (relative to each weight matrix's standard
    deviation) is added to the outgoing weights to break the copies' symmetry, as the paper recommends.

    Args:
        f: the network to widen.
        widths: the new hidden widths, one per hidden layer, each at least the old one.
        noise: relative standard deviation of the symmetry-breaking noise (0: exact).
        seed: seeds the unit mapping and the noise.
    """
    if not isinstance(f, DeepMLP):
        raise TypeError(f"f must be a DeepMLP, got {type(f).__name__}")
    hidden = f.sizes[1:-1]
    if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence) or len(widths) != len(hidden):
        raise ValueError(f"widths must give one width per hidden layer ({len(hidden)}), got {widths!r}")
    for w, h in zip(widths, hidden, strict=True):
        if isinstance(w, bool) or not isinstance(w, int) or w < h:
            raise ValueError(f"widths must be ints at least the old hidden widths {hidden}, got {widths!r}")
    rel = _finite_nonneg("noise", noise)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    gen = torch.Generator().manual_seed(seed)
    maps = []
    for w, h in zip(widths, hidden, strict=True):
        maps.append(torch.cat([torch.arange(h), torch.randint(0, h, (w - h,), generator=gen)]))
    wide = DeepMLP([f.sizes[0], *widths, f.sizes[-1]], activation=f.activation).to(f.linears[0].weight.dtype)
    for i, (old, new) in enumerate(zip(f.linears, wide.linears, strict=True)):
        weight, bias = old.weight.clone(), old.bias.clone()
        if i > 0:  # inputs come from a widened layer: split the outgoing weights among the copies
            m = maps[i - 1]
            counts = torch.bincount(m, minlength=f.sizes[i]).to(weight.dtype)
            weight = weight[:, m] / counts[m]
            if rel > 0:
                weight = weight + rel * float(old.weight.std()) * torch.randn(weight.shape, generator=gen,
                                                                               dtype=weight.dtype)  # fmt: skip
        if i < len(maps):  # outputs feed a widened layer: copy the incoming weights of the source units
            weight, bias = weight[maps[i]], bias[maps[i]]
        new.weight.copy_(weight)
        new.bias.copy_(bias)
    return wide


_SAME_FIELDS = ("vocab_size", "n_layers", "max_seq_len", "causal", "positions", "rope_theta", "norm", "norm_eps",
                "mlp", "bias", "tie_embeddings")  # fmt: skip


def _fused_config(cf: TransformerConfig, cg: TransformerConfig, exact_norm: bool) -> TransformerConfig:
    diff = [k for k in _SAME_FIELDS if getattr(cf, k) != getattr(cg, k)]
    if diff:
        raise ValueError(f"g must share these config fields with f: {', '.join(diff)}")
    if cf.head_dim != cg.head_dim:
        raise ValueError(f"g must have the head dimension of f ({cf.head_dim}), got {cg.head_dim}")
    if cf.n_heads // cf.kv_heads != cg.n_heads // cg.kv_heads:
        raise ValueError("g must have the query-per-key/value-head ratio of f (grouped-query attention)")
    if exact_norm and cf.d_model // cf.norm_groups != cg.d_model // cg.norm_groups:
        raise ValueError("exact_norm needs parents whose norm groups have the same width "
                         f"(f: {cf.d_model // cf.norm_groups}, g: {cg.d_model // cg.norm_groups})")  # fmt: skip
    kv = None if cf.n_kv_heads is None and cg.n_kv_heads is None else cf.kv_heads + cg.kv_heads
    return replace(cf, d_model=cf.d_model + cg.d_model, n_heads=cf.n_heads + cg.n_heads, n_kv_heads=kv,
                   d_ff=cf.ff_dim + cg.ff_dim, norm_groups=cf.norm_groups + cg.norm_groups if exact_norm else 1)  # fmt: skip


@torch.no_grad()
def fuse_transformers(
    f: TransformerLM,
    g: TransformerLM,
    *,
    weights: tuple[float, float] = (0.5, 0.5),
    exact_norm: bool = True,
    cross_noise: float = 0.0,
    seed: int | None = None,
) -> TransformerLM:
    """Fuse two :class:`TransformerLM` s into one of the summed width whose logits are
    ``w_f logits_f + w_g logits_g`` at fusion (exactly with ``exact_norm``).

    Every width is concatenated (residual stream, heads with the head dimension kept, feed-forward units);
    every projection is block-diagonal between the parents' slices with zero (or ``N(0, cross_noise^2)``)
    trainable cross blocks; token (and learned position) embeddings are concatenated along the width. The
    output weights go into the final norm's gain (and bias), so tied embeddings stay tied.

    Args:
        f, g: the parents; same depth, vocabulary, positions, norm and MLP type, and head dimension.
        weights: ``(w_f, w_g)``, the combination of the logits; ``(0.5, 0.5)`` averages.
        exact_norm: normalise each parent's slice separately (``norm_groups`` of the fused config is the sum
            of the parents'); ``False`` uses one norm over the fused stream, which is not function-preserving.
        cross_noise: standard deviation of the cross blocks (0: zero cross blocks).
        seed: seeds the cross-block noise.
    """
    for name, m in (("f", f), ("g", g)):
        if not isinstance(m, TransformerLM):
            raise TypeError(f"{name} must be a TransformerLM, got {type(m).__name__}")
    if not isinstance(exact_norm, bool):
        raise TypeError(f"exact_norm must be True or False, got {exact_norm!r}")
    w_f, w_g = _weights(weights)
    std = _finite_nonneg("cross_noise", cross_noise)
    gen = _generator(seed)
    cf, cg = f.config, g.config
    config = _fused_config(cf, cg, exact_norm)
    fused = TransformerLM(config).to(f.embed_tokens.weight.dtype)
    sf, sg = f.state_dict(), g.state_dict()
    state = {}
    for key, target in fused.state_dict().items():
        a, b = sf[key], sg[key]
        if key.endswith("layernorm.weight") or key.endswith("layernorm.bias"):
            state[key] = torch.cat([a, b])  # per-parent gains: exact with norm groups
        elif key in ("norm.weight", "norm.bias"):
            state[key] = torch.cat([w_f * a, w_g * b])  # the output combination, folded into the final gain
        elif key in ("embed_tokens.weight", "embed_positions.weight"):
            state[key] = torch.cat([a, b], dim=1)
        elif key == "lm_head.weight":
            state[key] = torch.cat([a, b], dim=1)  # tied: the same tensor as embed_tokens
        elif a.dim() == 2:
            state[key] = _block_diag(a, b, std, gen)
        elif a.dim() == 1:
            state[key] = torch.cat([a, b])
        else:  # pragma: no cover - every parameter of TransformerLM is one of the above
            raise RuntimeError(f"no fusion rule for {key}")
        if state[key].shape != target.shape:  # pragma: no cover - a layout bug, not a user error
            raise RuntimeError(f"fused {key} has shape {tuple(state[key].shape)}, expected {tuple(target.shape)}")
    fused.load_state_dict(state)
    if config.tie_embeddings:
        fused.lm_head.weight = fused.embed_tokens.weight
    return fused


def self_fuse(
    model: DeepMLP | TransformerLM, *, cross_noise: float = 0.0, seed: int | None = None, **kwargs
) -> DeepMLP | TransformerLM:
    """Self-fusion: ``fuse(model, model)``, the same function at twice the width.

    With ``cross_noise == 0`` the two halves receive identical gradients and stay identical under any
    deterministic training (the tests show it), so the doubled network never uses its extra width; a small
    ``cross_noise`` breaks the symmetry. ``kwargs`` go to :func:`fuse_transformers` (``exact_norm``).
    """
    if isinstance(model, DeepMLP):
        if kwargs:
            raise TypeError(f"self_fuse of a DeepMLP takes no {', '.join(sorted(kwargs))}")
        return fuse_mlps(model, model, cross_noise=cross_noise, seed=seed)
    if isinstance(model, TransformerLM):
        return fuse_transformers(model, model, cross_noise=cross_noise, seed=seed, **kwargs)
    raise TypeError(f"model must be a DeepMLP or a TransformerLM, got {type(model).__name__}")
