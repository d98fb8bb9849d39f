"""FLOPs of a forward pass, counted from the matrix products that actually run.

Token-reduction papers (CrossGET, ICML 2024, arXiv:2305.17455, Tables 1-6: "GFLOPs") report cost as the
floating-point operations of the matrix products of a forward pass: a product of an ``(n, k)`` and a
``(k, m)`` matrix costs ``2 n k m`` FLOPs (one multiply and one add per term), the convention of fvcore,
``torch.utils.flop_counter`` and the papers. Element-wise work (norms, activations, softmax, the merging
arithmetic) is not counted, as in those tools.

:class:`MatmulFlopCounter` is a :class:`torch.overrides.TorchFunctionMode`: while it is active it sees every
call of ``F.linear``, ``matmul``/``@``/``mm``/``bmm``, ``addmm``/``addbmm``/``baddbmm``/``addmv``/``mv``/``dot``,
``einsum`` (any number of operands), ``F.conv*d``/``conv_transpose*d``, ``F.scaled_dot_product_attention`` and
``F.multi_head_attention_forward`` (``nn.MultiheadAttention``, ``nn.Transformer*Layer``) and adds that call's
FLOPs from the operands' shapes, so a data-dependent forward (token merging shrinks the sequence layer by
layer) is measured as it ran. An op that does matrix products it has no formula for raises
:class:`UncountedOpError` (or, with ``strict=False``, is listed in ``uncounted`` with a warning): it never
counts 0 silently. It works at the Python function level, independently of
``torch.utils.flop_counter.FlopCounterMode`` (ATen dispatch level), which the tests use as the reference.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["MatmulFlopCounter", "UncountedOpError", "count_flops"]


def _matmul_flops(a: torch.Tensor, b: torch.Tensor) -> int:
    """``2 · batch · n · k · m`` for ``torch.matmul(a, b)`` with broadcasting (1-D operands as in matmul)."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) == 1:
        sa = (1, *sa)
    if len(sb) == 1:
        sb = (*sb, 1)
    batch = torch.broadcast_shapes(sa[:-2], sb[:-2])
    return 2 * math.prod(batch) * sa[-2] * sa[-1] * sb[-1]


def _linear_flops(x: torch.Tensor, weight: torch.Tensor) -> int:
    return 2 * math.prod(x.shape[:-1]) * weight.shape[0] * weight.shape[1]


def _conv_flops(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> int:
    # each output element is a dot product of length (in_channels / groups) · prod(kernel)
    return 2 * out.numel() * math.prod(weight.shape[1:])


def _einsum_labels(equation: str, shapes: list[tuple[int, ...]]) -> tuple[list[dict[str, int]], set[str]]:
    """Each operand's labels with their sizes (a repeated label is one diagonal), and the output's labels.

    An ellipsis stands for the broadcast dims, right-aligned across operands, labelled ``"0"``, ``"1"``, ...;
    without ``->`` the output is the ellipsis dims and the labels that occur once, as in ``torch.einsum``.
    """
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum equation {equation!r} has {len(terms)} operands, got {len(shapes)} tensors")
    n_ell = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes, strict=True) if "..." in t),
                default=0)  # fmt: skip
    ellipsis = [str(i) for i in range(n_ell)]
    operands = []
    for term, shape in zip(terms, shapes, strict=True):
        head, dots, tail = term.partition("...")
        n_here = len(shape) - len(head) - len(tail) if dots else 0
        labels = [*head, *ellipsis[n_ell - n_here :], *tail]
        operands.append({label: size for label, size in zip(labels, shape, strict=True)})
    if arrow:
        head, _, tail = rhs.partition("...")
        output = {*head, *tail, *(ellipsis if "..." in rhs else ())}
    else:
        letters = [ch for term in terms for ch in term.replace("...", "")]
        output = {ch for ch in letters if letters.count(ch) == 1} | set(ellipsis)
    return operands, output


def _einsum_path(equation: str, operands: tuple[torch.Tensor, ...]) -> list[tuple[int, int]] | None:
    """The contraction order ``torch.einsum`` uses: opt_einsum's path for three or more operands when that
    backend is enabled and installed (as in ``torch.functional.einsum``), otherwise ``None`` (left to right)."""
    from torch.backends import opt_einsum

    if len(operands) <= 2 or not opt_einsum.enabled or not opt_einsum.is_available():
        return None
    path = opt_einsum.get_opt_einsum().contract_path(equation, *operands, optimize=opt_einsum.strategy)[0]
    return [tuple(step) for step in path]


def _einsum_flops(equation: str, operands: tuple[torch.Tensor, ...]) -> int:
    """The matmul FLOPs of ``torch.einsum(equation, *operands)``: the pairwise products ATen runs.

    ATen contracts two operands at a time (along :func:`_einsum_path`, else left to right); before each
    pair it sums out, in either operand, the labels no other operand and not the output has (additions, not
    counted), and then multiplies the pair with one ``bmm`` over every label left in either operand:
    ``2 · prod(sizes)`` FLOPs when some label is contracted, 0 when none is (that is an element-wise product).
    A label of size 1 is no dimension (broadcast), as in ATen. One operand (a trace, sum or permutation): 0.
    """
    ops, output = _einsum_labels(equation, [tuple(t.shape) for t in operands])
    ops = [{label: n for label, n in op.items() if n != 1} for op in ops]
    counts: dict[str, int] = defaultdict(int)
    for op in ops:
        for label in op:
            counts[label] += 1
    path = _einsum_path(equation, operands)
    flops = 0
    step = 0
    while len(ops) > 1:
        i, j = path[step] if path is not None else (0, 1)
        step += 1
        i, j = sorted((i, j))
        b, a = ops.pop(j), ops.pop(i)
        contracted = set()
        for label in sorted((a.keys() | b.keys()) - output):
            if label in a and label in b:
                counts[label] -= 1
                if counts[label] == 1:
                    contracted.add(label)
                    counts[label] = 0
            elif counts[label] == 1:
                (a if label in a else b).pop(label)
                counts[label] = 0
        merged = {**a, **b}
        if contracted:
            flops += 2 * math.prod(merged.values())
        result = {label: n for label, n in merged.items() if label not in contracted}
        if path is not None:
            ops.append(result)
        else:
            ops.insert(0, result)
    return flops


def _sdpa_flops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> int:
    """``2 · B · L · S · (E + Ev)``: QKᵀ (``2·B·L·S·E``) then (attention) V (``2·B·L·S·Ev``).

    ``B`` is the number of attention maps, one per query head: the product of the output's leading dims,
    which is q's leading dims broadcast against k's and v's. Under grouped-query attention
    (``enable_gqa=True``, e.g. 9 query heads sharing 3 key/value heads) k and v have fewer heads than q,
    yet every query head still multiplies its own ``L × S`` map, the same products as the eager path that
    repeats k and v to q's head count; reading ``B`` off the output covers that and every other argument
    layout (``enable_gqa`` as a keyword or positionally) without parsing the flags.
    """
    batch = math.prod(out.shape[:-2])
    return 2 * batch * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])


def _mha_flops(bound: inspect.BoundArguments) -> int:
    """Matmul FLOPs of ``F.multi_head_attention_forward`` (what ``nn.MultiheadAttention`` runs), closed form.

    With query ``(L, N, E)``, key ``(S, N, kdim)``, value ``(S, N, vdim)`` and ``H`` heads of ``E / H``:
    the in-projections ``2·L·N·E·E + 2·S·N·kdim·E + 2·S·N·vdim·E`` (a ``static_k``/``static_v`` is not
    projected), QKᵀ and (attention) V ``2 · 2·N·H·L·S'·(E/H)`` over ``S'`` keys (``S``, or ``static_k``'s
    length, plus one for ``bias_k`` and one for ``add_zero_attn``), and the out-projection ``2·L·N·E·E``.
    The same products whichever path runs inside (``need_weights`` selects ``bmm``/``baddbmm`` or
    ``scaled_dot_product_attention``); an unbatched ``(L, E)`` query has ``N = 1``.
    """
    a = bound.arguments
    q, k, v = a["query"], a["key"], a["value"]
    e = int(a["embed_dim_to_check"])
    length, n = q.shape[0], (q.shape[1] if q.dim() == 3 else 1)
    source = k.shape[0]
    flops = 2 * length * n * e * e  # q projection
    static_k, static_v = a.get("static_k"), a.get("static_v")
    if static_k is None:
        flops += 2 * source * n * k.shape[-1] * e
    else:
        source = static_k.shape[1]
    if static_v is None:
        flops += 2 * v.shape[0] * n * v.shape[-1] * e
    keys = source + (a.get("bias_k") is not None) + bool(a.get("add_zero_attn"))
    flops += 2 * 2 * n * length * keys * e  # QKᵀ and AV over all heads: H · (E / H) = E
    flops += 2 * length * n * e * a["out_proj_weight"].shape[0]  # out projection
    return flops


_MHA_SIGNATURE = inspect.signature(F.multi_head_attention_forward)


def _arg(args: tuple, kwargs: dict, index: int, *names: str) -> Any:
    """The argument at ``index`` positionally, or the first of ``names`` given as a keyword."""
    if len(args) > index:
        return args[index]
    for name in names:
        if name in kwargs:
            return kwargs[name]
    raise TypeError(f"missing argument {names[0]!r}")


def _product_flops(name: str, args: tuple, kwargs: dict, out: Any) -> int | None:
    """FLOPs of one call of a counted op ``name`` (in-place ``_`` stripped), or ``None`` if it is not one."""
    if name == "linear":
        return _linear_flops(args[0], _arg(args, kwargs, 1, "weight"))
    if name in ("matmul", "mm", "bmm", "__matmul__"):
        return _matmul_flops(args[0], _arg(args, kwargs, 1, "other", "mat2"))
    if name == "__rmatmul__":
        return _matmul_flops(args[1], args[0])
    if name in ("addmm", "addbmm", "baddbmm"):  # input + a @ b: the product is what costs
        return _matmul_flops(_arg(args, kwargs, 1, "mat1", "batch1"), _arg(args, kwargs, 2, "mat2", "batch2"))
    if name == "addmv":
        return _matmul_flops(_arg(args, kwargs, 1, "mat"), _arg(args, kwargs, 2, "vec"))
    if name == "mv":
        return _matmul_flops(args[0], _arg(args, kwargs, 1, "vec"))
    if name in ("dot", "vdot"):
        return 2 * args[0].numel()
    if name in ("conv1d", "conv2d", "conv3d"):
        return _conv_flops(args[0], _arg(args, kwargs, 1, "weight"), out)
    if name in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        # each input element is scattered through (out_channels / groups) · prod(kernel) weights
        return 2 * args[0].numel() * math.prod(_arg(args, kwargs, 1, "weight").shape[1:])
    if name == "einsum":
        equation, operands = args[0], args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        return _einsum_flops(equation, tuple(operands))
    if name == "scaled_dot_product_attention":
        q, k, v = (args + tuple(kwargs[n] for n in ("query", "key", "value")[len(args) :]))[:3]
        return _sdpa_flops(q, k, v, out)
    if name == "multi_head_attention_forward":
        return _mha_flops(_MHA_SIGNATURE.bind(*args, **kwargs))
    return None


_KIND = {"linear": "linear", "matmul": "matmul", "mm": "matmul", "bmm": "matmul", "__matmul__": "matmul",
         "__rmatmul__": "matmul", "addmm": "matmul", "addbmm": "matmul", "baddbmm": "matmul", "addmv": "matmul",
         "mv": "matmul", "dot": "matmul", "vdot": "matmul", "conv1d": "conv", "conv2d": "conv", "conv3d": "conv",
         "conv_transpose1d": "conv", "conv_transpose2d": "conv", "conv_transpose3d": "conv", "einsum": "einsum",
         "scaled_dot_product_attention": "sdpa", "multi_head_attention_forward": "attention"}  # fmt: skip

# Word pieces (of a function's name split at "_") that mark a matrix product, a factorisation or another
# reduction of products that this counter has no formula for: such a call raises (or, lenient, is listed in
# ``uncounted``) instead of silently counting 0. Fused kernels (``_transformer_encoder_layer_fwd``,
# ``_native_multi_head_attention``), recurrent cells, ``bilinear``, ``tensordot``, ``inner``, ``cdist``,
# ``kron``, linear algebra and FFTs are among them.
_PRODUCT_WORDS = frozenset(
    "matmul conv convolution tbc attention attn einsum bilinear trilinear linear lstm gru rnn tensordot dot vdot "
    "vecdot inner mv cdist transformer det logdet slogdet solve cholesky inverse inv pinv pinverse svd svdvals "
    "qr lstsq eig eigh eigvals eigvalsh lu kron multi_dot ldl householder".split()
)
_NOT_PRODUCTS = frozenset(
    {"fftfreq", "rfftfreq", "fftshift", "ifftshift", "inverse"}
)  # slice_inverse: a view


@functools.cache
def _looks_like_product(name: str) -> bool:
    """Whether an op ``name`` the counter has no formula for does matrix products (so counting it 0 would lie)."""
    words = [w for w in name.strip("_").split("_") if w]
    if not words or name.startswith(("upsample", "_upsample")) or words[-1] in _NOT_PRODUCTS:
        return False
    if "matrix" in words and words[-1] in ("power", "exp"):
        return True
    return any(w.endswith("mm") or w in _PRODUCT_WORDS or (w.startswith("conv") and
               w[4:5].isdigit()) or "fft" in w for w in words)  # fmt: skip


class UncountedOpError(NotImplementedError):
    """A matrix-product op ran that :class:`MatmulFlopCounter` has no formula for (its FLOPs would be 0)."""


class MatmulFlopCounter(TorchFunctionMode):
    """Context manager adding up the matmul FLOPs of everything run inside it.

    Counted (closed forms from the operands' shapes): ``F.linear``; ``matmul``/``@``/``mm``/``bmm``;
    ``addmm``/``addbmm``/``baddbmm``/``addmv``/``mv``/``dot`` (the product; the scaled add is element-wise);
    ``conv{1,2,3}d`` and ``conv_transpose{1,2,3}d``; ``einsum`` with any number of operands and ellipses
    (the pairwise products torch runs, along its contraction path); ``F.scaled_dot_product_attention``; and
    ``F.multi_head_attention_forward``, which ``nn.MultiheadAttention`` and the ``nn.Transformer*`` layers
    run (their fused fast paths are off while a torch-function mode is active, so the layers take this path).

    Any other op whose name says it does matrix products (see ``_PRODUCT_WORDS``: fused transformer kernels,
    RNNs, ``bilinear``, ``tensordot``, linear algebra, FFTs) is never counted as 0 silently: with
    ``strict=True`` (the default) it raises :class:`UncountedOpError` before it runs; with ``strict=False`` it
    runs, its name is appended to :attr:`uncounted` and leaving the context warns (``RuntimeWarning``)
    listing them.

    Example::

        with MatmulFlopCounter() as counter:
            model(images)
        counter.total, counter.by_op  # 2·n·k·m summed over the products, and per kind of op

    Attributes:
        total: FLOPs counted so far.
        by_op: FLOPs per op kind (``"linear"``, ``"matmul"``, ``"conv"``, ``"einsum"``, ``"sdpa"``,
            ``"attention"``).
        uncounted: names of the matmul-like calls it saw but could not count (lenient mode only).
    """

    def __init__(self, strict: bool = True) -> None:
        super().__init__()
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
        self.strict = strict
        self.by_op: dict[str, int] = defaultdict(int)
        self.uncounted: list[str] = []

    @property
    def total(self) -> int:
        return int(sum(self.by_op.values()))

    def reset(self) -> None:
        """Forget the counts (to reuse one counter)."""
        self.by_op.clear()
        self.uncounted.clear()

    def __exit__(self, exc_type, exc_value, traceback):
        result = super().__exit__(exc_type, exc_value, traceback)
        if self.uncounted and exc_type is None:
            warnings.warn(f"MatmulFlopCounter: {len(self.uncounted)} matrix-product call(s) not counted, so the "
                          f"total {self.total} is too low: {sorted(set(self.uncounted))}", RuntimeWarning,
                          stacklevel=2)  # fmt: skip
        return result

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name.endswith("_") and not name.endswith("__"):
            name = name[:-1]  # in-place variant (addmm_, baddbmm_)
        kind = _KIND.get(name)
        if kind is None and _looks_like_product(name):
            if self.strict:
                raise UncountedOpError(f"MatmulFlopCounter has no FLOP formula for {name!r}; counting it as 0 "
                                       "would understate the cost (use strict=False to list it in uncounted)")  # fmt: skip
            self.uncounted.append(name)
        out = func(*args, **kwargs)
        if kind is not None:
            self.by_op[kind] += _product_flops(name, args, kwargs, out)
        return out


def count_flops(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> int:
    """Matmul FLOPs of one call ``fn(*args, **kwargs)`` (run under ``torch.no_grad``).

    Args:
        fn: a callable, e.g. an ``nn.Module`` or its ``encode_image`` method.
        *args, **kwargs: passed to ``fn``.

    Returns:
        The FLOPs (``2 n k m`` per product) of the call, as counted by :class:`MatmulFlopCounter`.

    Raises:
        UncountedOpError: the call ran a matrix-product op the counter has no formula for (strict counting).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with torch.no_grad(), MatmulFlopCounter() as counter:
        fn(*args, **kwargs)
    return counter.total
