"""Fuzz cases for the Bloop entry points (see tests/test_fuzz_api.py)."""

import torch

from icml24.optim.bloop import (
    Bloop,
    GradientSurgery,
    bloop_direction,
    dynamic_barrier_direction,
    mixed_direction,
    pcgrad_direction,
    project_out,
    projection_ratio,
    tree_dot,
    update_ema,
)


def _grads(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 2, generator=g, dtype=torch.float64), torch.randn(4, generator=g, dtype=torch.float64)]


GM, GA, E, E2 = _grads(0), _grads(1), _grads(2), _grads(3)
NAN = [GM[0].clone(), torch.full((4,), float("nan"), dtype=torch.float64)]
INF = [torch.full((3, 2), float("inf"), dtype=torch.float64), GM[1].clone()]
BAD_GRADS = [NAN, INF, GM[:1], [torch.zeros(2, 3, dtype=torch.float64), GM[1]], GM[0], [], "g", None,
             [GM[0].long(), GM[1]], [1.0, 2.0]]
BAD_LAM = [-0.1, float("nan"), float("inf"), "0.1", None, True]
BAD_EPS = [-1e-7, float("nan"), float("inf"), "eps"]
W = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
SGD = torch.optim.SGD([W], lr=0.1)


def surgery_step_grads(g_main, g_aux, method="bloop", lam=0.1, ema=0.1):
    """GradientSurgery(...).step_grads(g_main, g_aux) on the parameters of GM."""
    params = [torch.nn.Parameter(torch.zeros_like(t)) for t in GM]
    opt = GradientSurgery(torch.optim.SGD(params, lr=0.1), method=method, lam=lam, ema=ema)
    return opt.step_grads(g_main, g_aux)


def surgery_step(main_loss, aux_loss):
    """GradientSurgery(...).step(main_loss, aux_loss) on one parameter w (the losses' defaults use w)."""
    opt = GradientSurgery(torch.optim.SGD([W], lr=0.0))
    return opt.step(main_loss, aux_loss)


def _loss(scale: float) -> torch.Tensor:
    return scale * ((W - 1.0) ** 2).sum()


FUZZ_CASES = [
    dict(fn=tree_dot, args=(GM, GA), invalid={"a": BAD_GRADS, "b": BAD_GRADS}),
    dict(fn=projection_ratio, args=(E, GA),
         invalid={"onto": BAD_GRADS, "g": BAD_GRADS, "upper_bound": [float("nan"), "1"], "eps": BAD_EPS},
         allowed={"upper_bound": "+-inf is a valid (inactive) clip; nan is refused"}),
    dict(fn=project_out, args=(E, GA),
         invalid={"onto": BAD_GRADS, "g": BAD_GRADS, "upper_bound": [float("nan")], "eps": BAD_EPS},
         allowed={"upper_bound": "+-inf is a valid (inactive) clip; nan is refused"}),
    dict(fn=update_ema, args=(E, GM, 0.3),
         invalid={"ema": BAD_GRADS, "g": BAD_GRADS, "rho": [1.5, -0.1, float("nan"), "0.5", None]}),
    dict(fn=mixed_direction, args=(GM, GA, 0.5), invalid={"g_main": BAD_GRADS, "g_aux": BAD_GRADS, "lam": BAD_LAM}),
    dict(fn=bloop_direction, args=(GM, GA, E, 0.5),
         invalid={"g_main": BAD_GRADS, "g_aux": BAD_GRADS, "ema": BAD_GRADS, "lam": BAD_LAM, "eps": BAD_EPS}),
    dict(fn=dynamic_barrier_direction, args=(GM, GA, E, 0.5),
         invalid={"g_main": BAD_GRADS, "g_aux": BAD_GRADS, "ema": BAD_GRADS, "lam": BAD_LAM, "eps": BAD_EPS}),
    dict(fn=pcgrad_direction, args=(GM, GA, E, E2, 0.5),
         invalid={"g_main": BAD_GRADS, "g_aux": BAD_GRADS, "ema_main": BAD_GRADS, "ema_aux": BAD_GRADS,
                  "lam": BAD_LAM, "eps": BAD_EPS}),
    dict(fn=GradientSurgery, args=(SGD,),
         invalid={"optimizer": [[W], None, "sgd", Bloop(SGD)], "method": ["sum", None], "lam": BAD_LAM,
                  "ema": [1.5, -0.2, float("nan"), "0.1"], "init": ["ones", None], "eps": BAD_EPS,
                  "rescale": ["yes", 1], "seed": [-1, 1.5, "0", True]}),
    dict(fn=Bloop, args=(SGD,),
         invalid={"optimizer": [[W], None], "lam": BAD_LAM, "ema": [1.5, -0.2, float("nan")],
                  "init": ["ones"], "eps": BAD_EPS, "seed": [-1, 2.5]}),
    dict(fn=surgery_step_grads, args=(GM, GA),
         invalid={"g_main": BAD_GRADS, "g_aux": BAD_GRADS}),
    dict(fn=surgery_step, args=(_loss(1.0), _loss(0.5)),
         invalid={"main_loss": [_loss(float("nan")), _loss(float("inf")), 1.0, None, W * 2,
                                torch.tensor(1.0)],
                  "aux_loss": [_loss(float("nan")), "aux", (W ** 2), torch.tensor(3.0),
                               (torch.nn.Parameter(torch.ones(1)) ** 2).sum()]}),
]
