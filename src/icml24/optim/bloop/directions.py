"""Update directions of Bloop and of the gradient-surgery baselines, as pure functions on gradient lists.

Paper: *Careful with that Scalpel: Improving Gradient Surgery with an EMA*, Y.-G. Hsieh, J. Thornton,
E. Ndiaye, M. Klein, M. Cuturi, P. Ablin. ICML 2024 (PMLR 235). https://arxiv.org/abs/2402.02998

Bloop solves the *bilevel* problem "minimise the auxiliary loss among the minimisers of the training
loss" with the direction

    e   <- e + rho (g_main - e)                      (EMA of training gradients, updated before use)
    c   =  <g_aux, e> / (||e||^2 + eps)              (ONE inner product over all parameters)
    d   =  g_main + lam (g_aux - c e)                (Bloop direction)

so that, to first order, the auxiliary term does not slow the training loss down. With mini-batches the
projection is taken against the EMA ``e`` rather than the noisy batch gradient: the EMA estimates the
direction of the full training gradient and is nearly uncorrelated with the current batch noise.

A "gradient" here is a sequence of tensors (one per parameter). Every inner product is *global*: it sums
over all tensors, which is what makes the projection orthogonal to the whole EMA (a per-tensor projection
is a different, block-diagonal operator and does not give ``<d - g_main, e> = 0`` in general).

The EMA weight ``rho`` is the weight of the *new* gradient (the official code calls it ``ema``): ``rho = 1``
means no averaging (the EMA is the latest gradient), ``rho = 0`` freezes it; the usual decay is
``beta = 1 - rho``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real

import torch

Grads = Sequence[torch.Tensor]

EPS = 1e-7
"""Added to ``||e||^2`` in the projection ratio (the official code's value)."""


# ---------------------------------------------------------------------------------------------- checks
def check_grads(g: object, name: str) -> Grads:
    """``g`` must be a non-empty list/tuple of floating tensors (one per parameter)."""
    if isinstance(g, torch.Tensor) or not isinstance(g, Sequence) or isinstance(g, (str, bytes)):
        raise TypeError(f"{name} must be a list of tensors (one per parameter), got {type(g).__name__}")
    if len(g) == 0:
        raise ValueError(f"{name} must hold at least one tensor, got an empty sequence")
    for i, t in enumerate(g):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}[{i}] must be a torch.Tensor, got {type(t).__name__}")
        if not (t.is_floating_point() or t.is_complex()):
            raise TypeError(f"{name}[{i}] must be a floating-point tensor, got dtype {t.dtype}")
    return g


def check_finite(g: Grads, name: str) -> None:
    """Raise if any entry of the tensors in ``g`` is nan or inf (one fused reduction, then a search)."""
    if not bool(torch.isfinite(torch.stack([t.sum() for t in g])).all()):
        # a sum can also overflow with finite entries: only then look tensor by tensor
        bad = next((i for i, t in enumerate(g) if not bool(torch.isfinite(t).all())), None)
        if bad is not None:
            raise ValueError(f"{name}[{bad}] has non-finite entries (nan or inf)")


def _check_real(x: object, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, Real):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    return float(x)


def check_lam(lam: object, name: str = "lam") -> float:
    """The auxiliary weight: a finite number >= 0."""
    v = _check_real(lam, name)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {v}")
    return v


def check_rho(rho: object, name: str = "rho") -> float:
    """The EMA weight of the new gradient: a number in [0, 1]."""
    v = _check_real(rho, name)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} (weight of the new gradient in the EMA) must be in [0, 1], got {v}")
    return v


def check_eps(eps: object, name: str = "eps") -> float:
    """The ratio's regulariser: a finite number >= 0."""
    v = _check_real(eps, name)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {v}")
    return v


def _check_bound(upper_bound: object) -> float | None:
    if upper_bound is None:
        return None
    v = _check_real(upper_bound, "upper_bound")
    if math.isnan(v):
        raise ValueError("upper_bound must be a number or None, got nan")
    return v


def _check_pair(a: object, b: object, name_a: str, name_b: str, *, finite: bool = True) -> None:
    check_grads(a, name_a)
    check_grads(b, name_b)
    _check_same_structure(a, b, name_a, name_b)  # type: ignore[arg-type]
    if finite:
        check_finite(a, name_a)  # type: ignore[arg-type]
        check_finite(b, name_b)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- maths
def tree_dot(a: Grads, b: Grads) -> torch.Tensor:
    """The global inner product ``sum_t <a_t, b_t>`` over all tensors (a 0-d tensor)."""
    _check_pair(a, b, "a", "b")
    return _tree_dot(a, b)


def _tree_dot(a: Grads, b: Grads) -> torch.Tensor:
    return torch.stack([torch.vdot(x.reshape(-1), y.reshape(-1)) for x, y in zip(a, b)]).sum()


def projection_ratio(
    onto: Grads, g: Grads, *, upper_bound: float | None = None, eps: float = EPS
) -> torch.Tensor:
    """``c = <g, onto> / (||onto||^2 + eps)``, optionally clipped from above: ``min(c, upper_bound)``."""
    _check_pair(onto, g, "onto", "g")
    return _ratio(onto, g, _check_bound(upper_bound), check_eps(eps))


def _ratio(onto: Grads, g: Grads, upper_bound: float | None, eps: float) -> torch.Tensor:
    ratio = _tree_dot(onto, g) / (_tree_dot(onto, onto) + eps)
    if upper_bound is not None:
        ratio = torch.clamp(ratio, max=upper_bound)
    return ratio


def project_out(
    onto: Grads, g: Grads, *, upper_bound: float | None = None, eps: float = EPS, check: bool = True
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Remove from ``g`` its component along ``onto`` (global inner product): ``g - c * onto``.

    Returns the projected gradient and the ratio ``c`` actually used (after clipping). ``check=False``
    skips the input checks (the optimizer's hot path, whose inputs are already checked).
    """
    if check:
        _check_pair(onto, g, "onto", "g")
        upper_bound, eps = _check_bound(upper_bound), check_eps(eps)
    c = _ratio(onto, g, upper_bound, eps)
    return [x - c * o for x, o in zip(g, onto)], c


def update_ema(ema: Grads, g: Grads, rho: float) -> list[torch.Tensor]:
    """``e + rho (g - e)``: ``rho = 1`` returns ``g`` exactly, ``rho = 0`` returns ``e`` unchanged."""
    _check_pair(ema, g, "ema", "g")
    rho = check_rho(rho)
    if rho == 1.0:  # exact, not e + (g - e) which can differ in the last bit
        return [x.clone() for x in g]
    if rho == 0.0:
        return [x.clone() for x in ema]
    return [e + rho * (x - e) for e, x in zip(ema, g)]


def mixed_direction(g_main: Grads, g_aux: Grads, lam: float) -> list[torch.Tensor]:
    """The plain weighted sum ``g_main + lam g_aux`` (gradient of ``L_main + lam L_aux``)."""
    _check_pair(g_main, g_aux, "g_main", "g_aux")
    lam = check_lam(lam)
    return [a + lam * b for a, b in zip(g_main, g_aux)]


def bloop_direction(
    g_main: Grads, g_aux: Grads, ema: Grads, lam: float, *, eps: float = EPS
) -> list[torch.Tensor]:
    """Bloop (Sec. 3 of the paper): ``g_main + lam (g_aux - c e)`` with ``c = <g_aux, e>/(||e||^2 + eps)``.

    ``ema`` must already include the current gradient (the official order: update, then project).
    """
    _check_pair(g_main, g_aux, "g_main", "g_aux")
    _check_pair(g_main, ema, "g_main", "ema")
    lam, eps = check_lam(lam), check_eps(eps)
    proj, _ = project_out(ema, g_aux, eps=eps, check=False)
    return [a + lam * b for a, b in zip(g_main, proj)]


def dynamic_barrier_direction(
    g_main: Grads, g_aux: Grads, ema: Grads, lam: float, *, eps: float = EPS
) -> list[torch.Tensor]:
    """Dynamic barrier (Gong & Liu, 2021) in Bloop's form: the ratio is clipped, ``c <- min(c, 1/lam)``.

    When ``c <= 1/lam`` this equals Bloop; otherwise ``d = g_main - e + lam g_aux``, i.e. at most the whole
    (EMA) main term is cancelled.
    """
    _check_pair(g_main, g_aux, "g_main", "g_aux")
    _check_pair(g_main, ema, "g_main", "ema")
    lam, eps = check_lam(lam), check_eps(eps)
    bound = 1.0 / lam if lam > 0 else None
    proj, _ = project_out(ema, g_aux, upper_bound=bound, eps=eps, check=False)
    return [a + lam * b for a, b in zip(g_main, proj)]


def pcgrad_direction(
    g_main: Grads,
    g_aux: Grads,
    ema_main: Grads,
    ema_aux: Grads,
    lam: float,
    *,
    eps: float = EPS,
    check: bool = True,
) -> list[torch.Tensor]:
    """PCGrad (Yu et al., 2020) in the EMA form of the official code.

    Each gradient is projected off the *other* task's EMA only when they conflict (negative inner product:
    the ratio is clipped at 0 from above), then ``d = proj(g_main) + lam proj(g_aux)``. Non-conflicting
    gradients give the mixed sum.
    """
    if check:
        _check_pair(g_main, g_aux, "g_main", "g_aux")
        _check_pair(g_main, ema_main, "g_main", "ema_main")
        _check_pair(g_main, ema_aux, "g_main", "ema_aux")
        lam, eps = check_lam(lam), check_eps(eps)
    aux_proj, _ = project_out(ema_main, g_aux, upper_bound=0.0, eps=eps, check=False)
    main_proj, _ = project_out(ema_aux, g_main, upper_bound=0.0, eps=eps, check=False)
    return [a + lam * b for a, b in zip(main_proj, aux_proj)]


def _check_same_structure(a: Grads, b: Grads, name_a: str, name_b: str) -> None:
    if len(a) != len(b):
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of tensors, got {len(a)} and {len(b)}"
        )
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            raise ValueError(
                f"{name_a}[{i}] and {name_b}[{i}] must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}"
            )
