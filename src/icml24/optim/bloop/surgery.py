"""Gradient surgery as a wrapper around any ``torch.optim.Optimizer`` (Bloop and its baselines).

Paper: *Careful with that Scalpel: Improving Gradient Surgery with an EMA*, Hsieh et al., ICML 2024.
https://arxiv.org/abs/2402.02998

:class:`GradientSurgery` owns the EMA state, computes the two gradients (from two losses, a closure that
returns them, or gradients given directly), combines them into one direction
(:mod:`icml24.optim.bloop.directions`), writes it into ``p.grad`` and calls the wrapped optimizer's
``step``. The optimizer consumes the direction as if it were a gradient: with SGD the step is the
direction, with Adam or momentum the *step* is no longer orthogonal to the EMA (only the direction is).

Example:
    >>> import torch
    >>> from icml24.optim.bloop import Bloop
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> opt = Bloop(torch.optim.SGD([w], lr=0.1), lam=0.5, ema=0.1)
    >>> main, aux = ((w - 2) ** 2).sum(), (w ** 2).sum()
    >>> _ = opt.step(main, aux)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from icml24.optim.bloop import directions as D

Method = Literal["bloop", "mixed", "pcgrad", "dynamic_barrier"]
METHODS: tuple[str, ...] = ("bloop", "mixed", "pcgrad", "dynamic_barrier")
INITS: tuple[str, ...] = ("grad", "zeros", "random")


class GradientSurgery:
    """Combine a main (training) and an auxiliary gradient, then step the wrapped optimizer.

    Args:
        optimizer: any ``torch.optim.Optimizer``; its parameters with ``requires_grad`` are the ones
            differentiated (in the order of its ``param_groups``).
        method: ``"bloop"`` (projection of ``g_aux`` off the EMA of ``g_main``), ``"mixed"`` (plain sum),
            ``"pcgrad"`` (EMA form, projection only on conflict) or ``"dynamic_barrier"`` (Bloop with the
            ratio clipped at ``1/lam``).
        lam: weight ``lambda >= 0`` of the auxiliary term.
        ema: weight ``rho in [0, 1]`` of the *new* gradient in the EMA (``rho = 1``: no averaging, the
            projection uses the current batch gradient; ``beta = 1 - rho`` is the usual decay). Unused by
            ``"mixed"``.
        init: EMA initialisation at the first step: ``"grad"`` (the first gradient, the official default),
            ``"zeros"`` or ``"random"`` (standard normal, drawn from ``seed``).
        eps: added to ``||e||^2`` in the projection ratio.
        rescale: multiply the direction by ``1 / (1 + lam)`` (the official code's option; its Bloop branch
            computes ``1 + lam`` by an operator-precedence slip, which we do not reproduce).
        seed: seed of the ``"random"`` initialisation.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        method: Method = "bloop",
        lam: float = 0.1,
        ema: float = 0.1,
        init: Literal["grad", "zeros", "random"] = "grad",
        eps: float = D.EPS,
        rescale: bool = False,
        seed: int = 0,
    ) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
        if not (isinstance(ema, (int, float)) and 0.0 <= ema <= 1.0):
            raise ValueError(f"ema (weight of the new gradient) must be in [0, 1], got {ema!r}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        self.optimizer = optimizer
        self.method = method
        self.lam = float(lam)
        self.ema = float(ema)
        self.init = init
        self.eps = float(eps)
        self.rescale = bool(rescale)
        self.seed = int(seed)
        self.ema_main: list[torch.Tensor] | None = None
        self.ema_aux: list[torch.Tensor] | None = None
        self.n_steps = 0
        self.last_ratio: float | None = None
        """The projection ratio ``c`` used at the last step (after the dynamic barrier's clip)."""

    # ------------------------------------------------------------------ public API
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def params(self) -> list[torch.nn.Parameter]:
        """The differentiated parameters, in ``param_groups`` order."""
        return [p for g in self.optimizer.param_groups for p in g["params"] if p.requires_grad]

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(
        self,
        main_loss: torch.Tensor | None = None,
        aux_loss: torch.Tensor | None = None,
        *,
        closure: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> tuple[float, float]:
        """Differentiate both losses, combine the gradients and step the optimizer.

        Pass the two scalar losses, or ``closure`` returning ``(main_loss, aux_loss)`` (evaluated with
        grad enabled). Returns the two loss values as floats.
        """
        if closure is not None:
            if main_loss is not None or aux_loss is not None:
                raise ValueError("pass either the two losses or closure, not both")
            with torch.enable_grad():
                out = closure()
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("closure must return a pair (main_loss, aux_loss) of scalar tensors")
            main_loss, aux_loss = out
        if main_loss is None or aux_loss is None:
            raise ValueError("step needs main_loss and aux_loss (or a closure returning both)")
        params = self.params()
        g_main = self._grad(main_loss, params, "main_loss")
        g_aux = self._grad(aux_loss, params, "aux_loss")
        self.step_grads(g_main, g_aux)
        return float(main_loss.detach()), float(aux_loss.detach())

    @torch.no_grad()
    def step_grads(self, g_main: Sequence[torch.Tensor], g_aux: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Combine given gradients (one tensor per parameter of :meth:`params`) and step the optimizer.

        Returns the direction written into ``p.grad``.
        """
        params = self.params()
        for name, g in (("g_main", g_main), ("g_aux", g_aux)):
            if len(g) != len(params):
                raise ValueError(f"{name} must have one tensor per parameter ({len(params)}), got {len(g)}")
            for i, (t, p) in enumerate(zip(g, params)):
                if not isinstance(t, torch.Tensor) or t.shape != p.shape:
                    shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                    raise ValueError(f"{name}[{i}] must be a tensor of shape {tuple(p.shape)}, got {shape}")
            # one fused check: a nan/inf entry makes its tensor's sum non-finite
            if not bool(torch.isfinite(torch.stack([t.sum() for t in g])).all()):
                # a sum can also overflow with finite entries: only then look tensor by tensor
                bad = next((i for i, t in enumerate(g) if not torch.isfinite(t).all()), None)
                if bad is not None:
                    raise ValueError(f"{name}[{bad}] has non-finite entries")
        direction = self.direction(list(g_main), list(g_aux))
        for p, d in zip(params, direction):
            p.grad = d.to(p.dtype)
        self.optimizer.step()
        return direction

    @torch.no_grad()
    def direction(self, g_main: list[torch.Tensor], g_aux: list[torch.Tensor]) -> list[torch.Tensor]:
        """The combined direction; updates the EMA state (call once per step)."""
        lam = self.lam
        if self.method == "mixed":
            d = D.mixed_direction(g_main, g_aux, lam)
        else:
            if self.ema_main is None:
                self.ema_main = self._init_ema(g_main, offset=0)
                if self.method == "pcgrad":
                    self.ema_aux = self._init_ema(g_aux, offset=1)
            _lerp_(self.ema_main, g_main, self.ema)
            if self.method == "pcgrad":
                assert self.ema_aux is not None
                _lerp_(self.ema_aux, g_aux, self.ema)
                d = D.pcgrad_direction(g_main, g_aux, self.ema_main, self.ema_aux, lam, eps=self.eps)
            else:
                bound = 1.0 / lam if (self.method == "dynamic_barrier" and lam > 0) else None
                proj, c = D.project_out(self.ema_main, g_aux, upper_bound=bound, eps=self.eps)
                self.last_ratio = float(c)
                d = [a + lam * b for a, b in zip(g_main, proj)]
        if self.rescale:
            d = [x / (1.0 + lam) for x in d]
        self.n_steps += 1
        return d

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "ema_main": None if self.ema_main is None else [t.clone() for t in self.ema_main],
            "ema_aux": None if self.ema_aux is None else [t.clone() for t in self.ema_aux],
            "n_steps": self.n_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.ema_main = None if state["ema_main"] is None else [t.clone() for t in state["ema_main"]]
        self.ema_aux = None if state["ema_aux"] is None else [t.clone() for t in state["ema_aux"]]
        self.n_steps = int(state["n_steps"])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(method={self.method!r}, lam={self.lam}, ema={self.ema}, "
            f"init={self.init!r}, optimizer={type(self.optimizer).__name__})"
        )

    # ------------------------------------------------------------------ helpers
    def _init_ema(self, g: list[torch.Tensor], offset: int) -> list[torch.Tensor]:
        if self.init == "grad":
            return [t.detach().clone() for t in g]
        if self.init == "zeros":
            return [torch.zeros_like(t) for t in g]
        gen = torch.Generator().manual_seed(self.seed + offset)
        return [torch.randn(t.shape, generator=gen, dtype=t.dtype).to(t.device) for t in g]

    @staticmethod
    def _grad(loss: torch.Tensor, params: list[torch.nn.Parameter], name: str) -> list[torch.Tensor]:
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError(f"{name} must be a scalar tensor, got {type(loss).__name__}")
        if not torch.isfinite(loss.detach()).all():
            raise ValueError(f"{name} is not finite ({float(loss.detach())})")
        if not loss.requires_grad:
            raise ValueError(f"{name} does not depend on the optimizer's parameters: it has no gradient")
        grads = torch.autograd.grad(loss.reshape(()), params, allow_unused=True, retain_graph=True)
        if all(g is None for g in grads):
            raise ValueError(f"{name} does not depend on any of the optimizer's parameters: no gradient")
        # a parameter a loss does not touch (e.g. biases for a weight-norm penalty) has a zero gradient
        return [torch.zeros_like(p) if g is None else g.detach() for g, p in zip(grads, params)]


def _lerp_(ema: list[torch.Tensor], g: Sequence[torch.Tensor], rho: float) -> None:
    """In place ``e <- e + rho (g - e)``; exact copies at ``rho = 1`` (and ``rho = 0`` leaves ``e`` as is)."""
    if rho == 1.0:
        for e, x in zip(ema, g):
            e.copy_(x)
    elif rho != 0.0:
        for e, x in zip(ema, g):
            e.lerp_(x, rho)


class Bloop(GradientSurgery):
    """:class:`GradientSurgery` with ``method="bloop"`` (the paper's method; ``ema=0.01`` as in its scripts)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        lam: float = 0.1,
        ema: float = 0.01,
        init: Literal["grad", "zeros", "random"] = "grad",
        eps: float = D.EPS,
        rescale: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__(
            optimizer, method="bloop", lam=lam, ema=ema, init=init, eps=eps, rescale=rescale, seed=seed
        )
