"""The optimizer wrapper's direction equals the pure direction functions for every method, step after step
(the wrapper re-implements the EMA update and the clipped projection inline, so they could drift apart)."""

from __future__ import annotations

import pytest
import torch

from icml24.optim.bloop import (
    GradientSurgery,
    bloop_direction,
    dynamic_barrier_direction,
    mixed_direction,
    pcgrad_direction,
    update_ema,
)

SHAPES = [(3, 2), (4,)]


def _grads(seed: int, scale: float = 1.0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(s, generator=g, dtype=torch.float64) for s in SHAPES]


@pytest.mark.parametrize("method", ["bloop", "mixed", "pcgrad", "dynamic_barrier"])
def test_wrapper_direction_equals_pure_functions(method):
    params = [torch.nn.Parameter(torch.zeros(s, dtype=torch.float64)) for s in SHAPES]
    lam, rho = 2.0, 0.3
    opt = GradientSurgery(torch.optim.SGD(params, lr=0.1), method=method, lam=lam, ema=rho, eps=1e-7)
    e_main = e_aux = None
    ratios = []
    for step in range(4):
        # a large aux gradient aligned with the main one makes the dynamic barrier clip on some steps
        gm = _grads(10 + step)
        ga = [5.0 * a + b for a, b in zip(gm, _grads(20 + step, 0.5))] if step % 2 else _grads(30 + step)
        e_main = [t.clone() for t in gm] if e_main is None else e_main
        e_aux = [t.clone() for t in ga] if e_aux is None else e_aux
        e_main, e_aux = update_ema(e_main, gm, rho), update_ema(e_aux, ga, rho)
        if method == "bloop":
            ref = bloop_direction(gm, ga, e_main, lam, eps=1e-7)
        elif method == "mixed":
            ref = mixed_direction(gm, ga, lam)
        elif method == "pcgrad":
            ref = pcgrad_direction(gm, ga, e_main, e_aux, lam, eps=1e-7)
        else:
            ref = dynamic_barrier_direction(gm, ga, e_main, lam, eps=1e-7)
        got = opt.step_grads(gm, ga)
        ratios.append(opt.last_ratio)
        for a, b in zip(got, ref):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    if method == "dynamic_barrier":  # both branches were exercised
        assert any(r == pytest.approx(1 / lam) for r in ratios) and any(r < 1 / lam - 1e-6 for r in ratios)
