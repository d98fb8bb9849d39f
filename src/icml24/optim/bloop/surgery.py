"""Gradient surgery as a ``torch.optim.Optimizer`` that wraps any other one (Bloop and its baselines).

Paper: *Careful with that Scalpel: Improving Gradient Surgery with an EMA*, Hsieh et al., ICML 2024.
https://arxiv.org/abs/2402.02998

:class:`GradientSurgery` is a real :class:`torch.optim.Optimizer` (so ``StepLR(Bloop(...))``,
``ReduceLROnPlateau``, ``add_param_group`` and checkpointing work as with any optimizer). It shares the
wrapped optimizer's ``param_groups`` (a scheduler that changes ``lr`` on the wrapper changes it on the
wrapped optimizer), keeps the EMA of the training gradients in its **per-parameter** ``state`` (a frozen
parameter keeps its EMA, a parameter added later gets a fresh one), computes the two gradients (from two
losses, a closure that returns them, or gradients given directly), combines them into one direction
(:mod:`icml24.optim.bloop.directions`), writes it into ``p.grad`` and calls the wrapped optimizer's
``step``. The optimizer consumes the direction as if it were a gradient: with SGD the step is the
direction, with Adam or momentum the *step* is no longer orthogonal to the EMA (only the direction is).

Example:
    >>> import torch
    >>> from icml24.optim.bloop import Bloop
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> opt = Bloop(torch.optim.SGD([w], lr=0.1), lam=0.5)
    >>> sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
    >>> main, aux = ((w - 2) ** 2).sum(), (w ** 2).sum()
    >>> _ = opt.step(main, aux)
    >>> sched.step()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from icml24.optim.bloop import directions as D

Method = Literal["bloop", "mixed", "pcgrad", "dynamic_barrier"]
METHODS: tuple[str, ...] = ("bloop", "mixed", "pcgrad", "dynamic_barrier")
INITS: tuple[str, ...] = ("grad", "zeros", "random")

DEFAULT_EMA = 0.1
"""Weight ``rho`` of the new gradient in the EMA: the official library's default (``BloopState``,
``init_bloop`` and the getting-started of apple/ml-bloop). The official smooth-MNIST script runs Bloop with
0.01 (a longer horizon for ~6k steps); the reproduction runs both."""

DEFAULT_LAM = 0.1
"""Weight ``lambda`` of the auxiliary term: the official library's default."""

_HYPER = ("method", "lam", "ema", "init", "eps", "rescale", "seed")


class GradientSurgery(torch.optim.Optimizer):
    """Combine a main (training) and an auxiliary gradient, then step the wrapped optimizer.

    Args:
        optimizer: any ``torch.optim.Optimizer``; its parameters with ``requires_grad`` at the time of a
            step are the ones differentiated (in the order of its ``param_groups``).
        method: ``"bloop"`` (projection of ``g_aux`` off the EMA of ``g_main``), ``"mixed"`` (plain sum),
            ``"pcgrad"`` (EMA form, projection only on conflict) or ``"dynamic_barrier"`` (Bloop with the
            ratio clipped at ``1/lam``).
        lam: weight ``lambda >= 0`` of the auxiliary term.
        ema: weight ``rho in [0, 1]`` of the *new* gradient in the EMA (``rho = 1``: no averaging, the
            projection uses the current batch gradient; ``beta = 1 - rho`` is the usual decay). Unused by
            ``"mixed"``. Default :data:`DEFAULT_EMA`.
        init: EMA initialisation of a parameter at its first step: ``"grad"`` (its first gradient, the
            official default), ``"zeros"`` or ``"random"`` (standard normal, drawn from ``seed``).
        eps: added to ``||e||^2`` in the projection ratio.
        rescale: multiply the direction by ``1 / (1 + lam)`` (the official code's option; its Bloop branch
            computes ``1 + lam`` by an operator-precedence slip, which we do not reproduce).
        seed: seed of the ``"random"`` initialisation.

    ``state_dict()`` holds the wrapped optimizer's ``state`` and ``param_groups`` unchanged and, under the
    key ``"surgery"``, the hyperparameters above, the step count, the random generator and the EMAs (by
    parameter index, as torch indexes optimizer state); ``load_state_dict`` restores all of them.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        method: Method = "bloop",
        lam: float = DEFAULT_LAM,
        ema: float = DEFAULT_EMA,
        init: Literal["grad", "zeros", "random"] = "grad",
        eps: float = D.EPS,
        rescale: bool = False,
        seed: int = 0,
    ) -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if isinstance(optimizer, GradientSurgery):
            raise TypeError("optimizer must be a plain torch optimizer, not another GradientSurgery")
        hyper = _check_hyper(method=method, lam=lam, ema=ema, init=init, eps=eps, rescale=rescale, seed=seed)
        # Optimizer.__init__ sets up hooks and ``self.state``; it appends the wrapped optimizer's group
        # dicts (the same objects) to a list we then drop: from here on ``param_groups`` IS the wrapped
        # optimizer's list, so schedulers, add_param_group and load_state_dict of either stay in sync.
        super().__init__(optimizer.param_groups, optimizer.defaults)
        self.__dict__.pop("_own_param_groups", None)
        self.optimizer = optimizer
        for k, v in hyper.items():
            setattr(self, k, v)
        self.n_steps = 0
        self.last_ratio: float | None = None
        """The projection ratio ``c`` used at the last step (after the dynamic barrier's clip)."""
        self._generator = torch.Generator().manual_seed(self.seed)

    # ------------------------------------------------------------------ torch.optim.Optimizer plumbing
    @property  # type: ignore[override]
    def param_groups(self) -> list[dict[str, Any]]:
        if "optimizer" in self.__dict__:
            return self.optimizer.param_groups
        return self.__dict__.setdefault("_own_param_groups", [])

    @param_groups.setter
    def param_groups(self, groups: list[dict[str, Any]]) -> None:
        if "optimizer" in self.__dict__:
            self.optimizer.param_groups = groups
        else:
            self.__dict__["_own_param_groups"] = groups

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group to the wrapped optimizer (its parameters get an EMA at their first step)."""
        if "optimizer" in self.__dict__:
            self.optimizer.add_param_group(param_group)
        else:  # during Optimizer.__init__
            super().add_param_group(param_group)

    def params(self) -> list[torch.nn.Parameter]:
        """The differentiated parameters (``requires_grad``), in ``param_groups`` order."""
        return [p for g in self.param_groups for p in g["params"] if p.requires_grad]

    @property
    def ema_main(self) -> list[torch.Tensor] | None:
        """The EMA of the main gradient for each parameter of :meth:`params` (None before the first step)."""
        out = [self.state[p].get("ema_main") for p in self.params()]
        return None if any(t is None for t in out) else out

    @property
    def ema_aux(self) -> list[torch.Tensor] | None:
        """PCGrad's EMA of the auxiliary gradient, as :attr:`ema_main`."""
        out = [self.state[p].get("ema_aux") for p in self.params()]
        return None if any(t is None for t in out) else out

    # ------------------------------------------------------------------ stepping
    def step(  # type: ignore[override]
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
                raise ValueError("pass either main_loss and aux_loss or closure, not both")
            with torch.enable_grad():
                out = closure()
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("closure must return a pair (main_loss, aux_loss) of scalar tensors")
            main_loss, aux_loss = out
        if main_loss is None or aux_loss is None:
            raise ValueError("step needs main_loss and aux_loss (or a closure returning both)")
        params = self.params()
        if not params:
            raise ValueError("optimizer has no parameter with requires_grad=True: nothing to differentiate")
        g_main = self._grad(main_loss, params, "main_loss")
        g_aux = self._grad(aux_loss, params, "aux_loss")
        self._step_checked(params, g_main, g_aux)
        return float(main_loss.detach()), float(aux_loss.detach())

    @torch.no_grad()
    def step_grads(self, g_main: Sequence[torch.Tensor], g_aux: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Combine given gradients (one tensor per parameter of :meth:`params`) and step the optimizer.

        Returns the direction written into ``p.grad``.
        """
        params = self.params()
        for name, g in (("g_main", g_main), ("g_aux", g_aux)):
            D.check_grads(g, name)
            if len(g) != len(params):
                raise ValueError(f"{name} must have one tensor per parameter ({len(params)}), got {len(g)}")
            for i, (t, p) in enumerate(zip(g, params)):
                if not isinstance(t, torch.Tensor) or t.shape != p.shape:
                    shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                    raise ValueError(f"{name}[{i}] must be a tensor of shape {tuple(p.shape)}, got {shape}")
            D.check_finite(g, name)
        return self._step_checked(params, list(g_main), list(g_aux))

    @torch.no_grad()
    def _step_checked(
        self, params: list[torch.nn.Parameter], g_main: list[torch.Tensor], g_aux: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        direction = self._direction(params, g_main, g_aux)
        for p, d in zip(params, direction):
            p.grad = d.to(p.dtype)
        self.optimizer.step()
        return direction

    @torch.no_grad()
    def direction(self, g_main: list[torch.Tensor], g_aux: list[torch.Tensor]) -> list[torch.Tensor]:
        """The combined direction for :meth:`params`; updates the EMA state (call once per step)."""
        return self._direction(self.params(), list(g_main), list(g_aux))

    def _direction(
        self, params: list[torch.nn.Parameter], g_main: list[torch.Tensor], g_aux: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        lam = self.lam
        if self.method == "mixed":
            d = [a + lam * b for a, b in zip(g_main, g_aux)]
        else:
            pc = self.method == "pcgrad"
            e_main, e_aux = [], []
            for p, gm, ga in zip(params, g_main, g_aux):
                st = self.state[p]
                if "ema_main" not in st:  # first step of this parameter (also after add_param_group)
                    st["ema_main"] = self._init_ema(gm)
                if pc and "ema_aux" not in st:
                    st["ema_aux"] = self._init_ema(ga)
                _lerp_(st["ema_main"], gm, self.ema)
                e_main.append(st["ema_main"])
                if pc:
                    _lerp_(st["ema_aux"], ga, self.ema)
                    e_aux.append(st["ema_aux"])
            if pc:
                d = D.pcgrad_direction(g_main, g_aux, e_main, e_aux, lam, eps=self.eps, check=False)
            else:
                bound = 1.0 / lam if (self.method == "dynamic_barrier" and lam > 0) else None
                proj, c = D.project_out(e_main, g_aux, upper_bound=bound, eps=self.eps, check=False)
                self.last_ratio = float(c)
                d = [a + lam * b for a, b in zip(g_main, proj)]
        if self.rescale:
            d = [x / (1.0 + lam) for x in d]
        self.n_steps += 1
        return d

    # ------------------------------------------------------------------ checkpointing
    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's ``state_dict`` plus a ``"surgery"`` entry (hyperparameters, EMAs)."""
        out = self.optimizer.state_dict()
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        ema_state = {
            index[id(p)]: {k: v.clone() for k, v in st.items()}
            for p, st in self.state.items()
            if id(p) in index and st
        }
        out["surgery"] = {
            **{k: getattr(self, k) for k in _HYPER},
            "n_steps": self.n_steps,
            "generator": self._generator.get_state(),
            "state": ema_state,
        }
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the wrapped optimizer, the hyperparameters (method, lam, ema, ...) and the EMAs."""
        if not isinstance(state_dict, dict) or "surgery" not in state_dict:
            raise ValueError(
                "state_dict must come from GradientSurgery.state_dict() (it has no 'surgery' entry); "
                "to load a plain optimizer's state use .optimizer.load_state_dict"
            )
        surgery = state_dict["surgery"]
        hyper = _check_hyper(**{k: surgery[k] for k in _HYPER})
        inner = {k: v for k, v in state_dict.items() if k != "surgery"}
        self.optimizer.load_state_dict(inner)
        for k, v in hyper.items():
            setattr(self, k, v)
        self.n_steps = int(surgery["n_steps"])
        self._generator.set_state(surgery["generator"])
        flat = [p for g in self.param_groups for p in g["params"]]
        self.state.clear()
        for i, st in surgery["state"].items():
            i = int(i)
            if not 0 <= i < len(flat):
                raise ValueError(f"state_dict has an EMA for parameter {i}, the optimizer has {len(flat)}")
            p = flat[i]
            for key, t in st.items():
                if tuple(t.shape) != tuple(p.shape):
                    raise ValueError(
                        f"state_dict's {key} for parameter {i} has shape {tuple(t.shape)}, "
                        f"the parameter has {tuple(p.shape)}"
                    )
            self.state[p] = {k: t.detach().clone().to(device=p.device, dtype=p.dtype) for k, t in st.items()}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(method={self.method!r}, lam={self.lam}, ema={self.ema}, "
            f"init={self.init!r}, optimizer={type(self.optimizer).__name__})"
        )

    # ------------------------------------------------------------------ helpers
    def _init_ema(self, g: torch.Tensor) -> torch.Tensor:
        if self.init == "grad":
            return g.detach().clone()
        if self.init == "zeros":
            return torch.zeros_like(g)
        return torch.randn(g.shape, generator=self._generator, dtype=g.dtype).to(g.device)

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
        out = [torch.zeros_like(p) if g is None else g.detach() for g, p in zip(grads, params)]
        D.check_finite(out, f"the gradient of {name}")
        return out


def _check_hyper(
    *, method: Any, lam: Any, ema: Any, init: Any, eps: Any, rescale: Any, seed: Any
) -> dict[str, Any]:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    lam = D.check_lam(lam)
    ema = D.check_rho(ema, "ema")
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    eps = D.check_eps(eps)
    if not isinstance(rescale, bool):
        raise TypeError(f"rescale must be a bool, got {type(rescale).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must be in [0, 2**63), got {seed}")
    return {"method": method, "lam": lam, "ema": ema, "init": init, "eps": eps, "rescale": rescale, "seed": seed}


def _lerp_(e: torch.Tensor, g: torch.Tensor, rho: float) -> None:
    """In place ``e <- e + rho (g - e)``; exact copy at ``rho = 1`` (and ``rho = 0`` leaves ``e`` as is)."""
    if rho == 1.0:
        e.copy_(g)
    elif rho != 0.0:
        e.lerp_(g, rho)


class Bloop(GradientSurgery):
    """:class:`GradientSurgery` with ``method="bloop"``, the paper's method (same defaults)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        *,
        lam: float = DEFAULT_LAM,
        ema: float = DEFAULT_EMA,
        init: Literal["grad", "zeros", "random"] = "grad",
        eps: float = D.EPS,
        rescale: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__(
            optimizer, method="bloop", lam=lam, ema=ema, init=init, eps=eps, rescale=rescale, seed=seed
        )


