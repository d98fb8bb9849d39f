"""Issue 13 audit of Bloop/GradientSurgery as torch optimizers, beyond test_bloop_optimizer_contract.py: a
checkpoint written with torch.save loads with torch.load's default ``weights_only=True`` and resumes bit for
bit, and the common LR schedulers (chained and sequential ones included) drive the wrapped optimizer."""

from __future__ import annotations

import io

import pytest
import torch

from icml24.optim.bloop import Bloop, GradientSurgery


def _net() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()


def _losses(net: torch.nn.Module, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(s)
    x, y = torch.randn(8, 3, generator=g, dtype=torch.float64), torch.randn(8, 2, generator=g, dtype=torch.float64)
    return ((net(x) - y) ** 2).mean(), sum((p**2).sum() for p in net.parameters())


MAKERS = {
    "bloop": lambda net: Bloop(torch.optim.Adam(net.parameters(), lr=1e-2), lam=0.3, ema=0.05),
    "pcgrad": lambda net: GradientSurgery(torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), method="pcgrad"),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_torch_save_and_weights_only_load_resume_bit_for_bit(kind):
    net = _net()
    opt = MAKERS[kind](net)
    for s in range(3):
        opt.step(*_losses(net, s))
    buf = io.BytesIO()
    torch.save({"net": net.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf)  # weights_only=True: only tensors and plain containers in the state
    net2 = _net()
    net2.load_state_dict(ckpt["net"])
    opt2 = MAKERS[kind](net2)
    if kind == "bloop":
        opt2.lam, opt2.ema = 9.0, 1.0  # the checkpoint must bring its own hyperparameters back
    opt2.load_state_dict(ckpt["opt"])
    assert (opt2.lam, opt2.ema) == (opt.lam, opt.ema)
    for s in range(3, 6):
        opt.step(*_losses(net, s))
        opt2.step(*_losses(net2, s))
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), net2.parameters()))


SCHEDULERS = {
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4),
    "lambda": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.5**e),
    "sequential": lambda o: torch.optim.lr_scheduler.SequentialLR(
        o, [torch.optim.lr_scheduler.LinearLR(o, 0.5, total_iters=2), torch.optim.lr_scheduler.ExponentialLR(o, 0.5)],
        milestones=[2],
    ),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_schedulers_set_the_wrapped_optimizers_lr(name):
    net = _net()
    opt = MAKERS["bloop"](net)
    sched = SCHEDULERS[name](opt)
    ref = SCHEDULERS[name](torch.optim.Adam(_net().parameters(), lr=1e-2))  # the same schedule on plain Adam
    for s in range(4):
        opt.step(*_losses(net, s))
        ref.optimizer.step()
        sched.step()
        ref.step()
        assert opt.optimizer.param_groups[0]["lr"] == pytest.approx(ref.optimizer.param_groups[0]["lr"])
    assert opt.optimizer.param_groups[0]["lr"] != pytest.approx(1e-2)
