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

from collections.abc import Sequence

import torch

Grads = Sequence[torch.Tensor]

EPS = 1e-7
"""Added to ``||e||^2`` in the projection ratio (the official code's value)."""


def tree_dot(a: Grads, b: Grads) -> torch.Tensor:
    """The global inner product ``sum_t <a_t, b_t>`` over all tensors (a 0-d tensor)."""
    _check_same_structure(a, b, "a", "b")
    return torch.stack([torch.vdot(x.reshape(-1), y.reshape(-1)) for x, y in zip(a, b)]).sum()


def projection_ratio(
    onto: Grads, g: Grads, *, upper_bound: float | None = None, eps: float = EPS
) -> torch.Tensor:
    """``c = <g, onto> / (||onto||^2 + eps)``, optionally clipped from above: ``min(c, upper_bound)``."""
    ratio = tree_dot(onto, g) / (tree_dot(onto, onto) + eps)
    if upper_bound is not None:
        ratio = torch.clamp(ratio, max=upper_bound)
    return ratio


def project_out(
    onto: Grads, g: Grads, *, upper_bound: float | None = None, eps: float = EPS
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Remove from ``g`` its component along ``onto`` (global inner product): ``g - c * onto``.

    Returns the projected gradient and the ratio ``c`` actually used (after clipping).
    """
    c = projection_ratio(onto, g, upper_bound=upper_bound, eps=eps)
    return [x - c * o for x, o in zip(g, onto)], c


def update_ema(ema: Grads, g: Grads, rho: float) -> list[torch.Tensor]:
    """``e + rho (g - e)``: ``rho = 1`` returns ``g`` exactly, ``rho = 0`` returns ``e`` unchanged."""
    _check_same_structure(ema, g, "ema", "g")
    if rho == 1.0:  # exact, not e + (g - e) which can differ in the last bit
        return [x.clone() for x in g]
    if rho == 0.0:
        return [x.clone() for x in ema]
    return [e + rho * (x - e) for e, x in zip(ema, g)]


def mixed_direction(g_main: Grads, g_aux: Grads, lam: float) -> list[torch.Tensor]:
    """The plain weighted sum ``g_main + lam g_aux`` (gradient of ``L_main + lam L_aux``)."""
    _check_same_structure(g_main, g_aux, "g_main", "g_aux")
    return [a + lam * b for a, b in zip(g_main, g_aux)]


def bloop_direction(
    g_main: Grads, g_aux: Grads, ema: Grads, lam: float, *, eps: float = EPS
) -> list[torch.Tensor]:
    """Bloop (Sec. 3 of the paper): ``g_main + lam (g_aux - c e)`` with ``c = <g_aux, e>/(||e||^2 + eps)``.

    ``ema`` must already include the current gradient (the official order: update, then project).
    """
    _check_same_structure(g_main, g_aux, "g_main", "g_aux")
    proj, _ = project_out(ema, g_aux, eps=eps)
    return [a + lam * b for a, b in zip(g_main, proj)]


def dynamic_barrier_direction(
    g_main: Grads, g_aux: Grads, ema: Grads, lam: float, *, eps: float = EPS
) -> list[torch.Tensor]:
    """Dynamic barrier (Gong & Liu, 2021) in Bloop's form: the ratio is clipped, ``c <- min(c, 1/lam)``.

    When ``c <= 1/lam`` this equals Bloop; otherwise ``d = g_main - e + lam g_aux``, i.e. at most the whole
    (EMA) main term is cancelled.
    """
    _check_same_structure(g_main, g_aux, "g_main", "g_aux")
    bound = 1.0 / lam if lam > 0 else None
    proj, _ = project_out(ema, g_aux, upper_bound=bound, eps=eps)
    return [a + lam * b for a, b in zip(g_main, proj)]


def pcgrad_direction(
    g_main: Grads, g_aux: Grads, ema_main: Grads, ema_aux: Grads, lam: float, *, eps: float = EPS
) -> list[torch.Tensor]:
    """PCGrad (Yu et al., 2020) in the EMA form of the official code.

    Each gradient is projected off the *other* task's EMA only when they conflict (negative inner product:
    the ratio is clipped at 0 from above), then ``d = proj(g_main) + lam proj(g_aux)``. Non-conflicting
    gradients give the mixed sum.
    """
    _check_same_structure(g_main, g_aux, "g_main", "g_aux")
    aux_proj, _ = project_out(ema_main, g_aux, upper_bound=0.0, eps=eps)
    main_proj, _ = project_out(ema_aux, g_main, upper_bound=0.0, eps=eps)
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
