"""FLOPs of a forward pass, counted from the matrix products that actually run.

Token-reduction papers (CrossGET, ICML 2024, arXiv:2305.17455, Tables 1-6: "GFLOPs") report cost as the
floating-point operations of the matrix products of a forward pass: a product of an ``(n, k)`` and a
``(k, m)`` matrix costs ``2 n k m`` FLOPs (one multiply and one add per term), the convention of fvcore,
``torch.utils.flop_counter`` and the papers. Element-wise work (norms, activations, softmax, the merging
arithmetic) is not counted, as in those tools.

:class:`MatmulFlopCounter` is a :class:`torch.overrides.TorchFunctionMode`: while it is active it sees every
call of ``F.linear``, ``matmul``/``@``/``mm``/``bmm``, ``einsum`` (two operands), ``F.conv1d``/``conv2d`` and
``F.scaled_dot_product_attention`` and adds that call's FLOPs from the operands' shapes, so a data-dependent
forward (token merging shrinks the sequence layer by layer) is measured as it ran. It works at the Python
function level, independently of ``torch.utils.flop_counter.FlopCounterMode`` (ATen dispatch level), which
the tests use as the reference.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["MatmulFlopCounter", "count_flops"]


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


def _einsum_flops(equation: str, operands: tuple[torch.Tensor, ...]) -> int | None:
    """Two-operand einsum: ``2 · prod(size of every distinct index)``; ``None`` otherwise (not counted)."""
    if len(operands) != 2 or "..." in equation:
        return None
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for letters, t in zip(inputs, operands, strict=True):
        for ch, n in zip(letters, t.shape, strict=True):
            sizes[ch] = n
    return 2 * math.prod(sizes.values())


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


_MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm,
            torch.bmm, torch.Tensor.bmm}  # fmt: skip
_RMATMUL = {torch.Tensor.__rmatmul__}


class MatmulFlopCounter(TorchFunctionMode):
    """Context manager adding up the matmul FLOPs of everything run inside it.

    Example::

        with MatmulFlopCounter() as counter:
            model(images)
        counter.total, counter.by_op  # 2·n·k·m summed over the products, and per kind of op

    Attributes:
        total: FLOPs counted so far.
        by_op: FLOPs per op kind (``"linear"``, ``"matmul"``, ``"conv"``, ``"einsum"``, ``"sdpa"``).
        uncounted: names of matmul-like calls it saw but could not count (einsum of more than two operands).
    """

    def __init__(self) -> None:
        super().__init__()
        self.by_op: dict[str, int] = defaultdict(int)
        self.uncounted: list[str] = []

    @property
    def total(self) -> int:
        return int(sum(self.by_op.values()))

    def reset(self) -> None:
        """Forget the counts (to reuse one counter)."""
        self.by_op.clear()
        self.uncounted.clear()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is F.linear:
            x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            self.by_op["linear"] += _linear_flops(x, weight)
        elif func in _MATMULS:
            other = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
            self.by_op["matmul"] += _matmul_flops(args[0], other)
        elif func in _RMATMUL:
            self.by_op["matmul"] += _matmul_flops(args[1], args[0])
        elif func in (F.conv1d, F.conv2d, F.conv3d):
            weight = args[1] if len(args) > 1 else kwargs["weight"]
            self.by_op["conv"] += _conv_flops(args[0], weight, out)
        elif func is torch.einsum:
            equation, operands = args[0], args[1:]
            if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
                operands = tuple(operands[0])
            flops = _einsum_flops(equation, operands)
            if flops is None:
                self.uncounted.append(f"einsum({equation})")
            else:
                self.by_op["einsum"] += flops
        elif func is F.scaled_dot_product_attention:
            q, k, v = (args + tuple(kwargs[n] for n in ("query", "key", "value")[len(args):]))[:3]
            self.by_op["sdpa"] += _sdpa_flops(q, k, v, out)
        return out


def count_flops(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> int:
    """Matmul FLOPs of one call ``fn(*args, **kwargs)`` (run under ``torch.no_grad``).

    Args:
        fn: a callable, e.g. an ``nn.Module`` or its ``encode_image`` method.
        *args, **kwargs: passed to ``fn``.

    Returns:
        The FLOPs (``2 n k m`` per product) of the call, as counted by :class:`MatmulFlopCounter`.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with torch.no_grad(), MatmulFlopCounter() as counter:
        fn(*args, **kwargs)
    return counter.total
