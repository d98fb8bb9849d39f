"""GradientSurgery/Bloop behave as a torch.optim.Optimizer (issue 13): schedulers, per-parameter EMA state
that survives freezing and add_param_group, and a state_dict that round-trips every hyperparameter."""

from __future__ import annotations

import copy

import pytest
import torch

from icml24.optim.bloop import DEFAULT_EMA, METHODS, Bloop, GradientSurgery


def model(seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()


def batch(s: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + s)
    return torch.randn(8, 3, generator=g, dtype=torch.float64), torch.randn(8, 2, generator=g, dtype=torch.float64)


def losses(net: torch.nn.Module, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = batch(s)
    main = ((net(x) - y) ** 2).mean()
    aux = sum((p**2).sum() for p in net.parameters() if p.ndim > 1)
    return main, aux


def flat(net: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def test_it_is_an_optimizer_with_one_default_ema():
    net = model()
    for opt in (Bloop(torch.optim.SGD(net.parameters(), lr=0.1)),
                GradientSurgery(torch.optim.SGD(net.parameters(), lr=0.1))):  # fmt: skip
        assert isinstance(opt, torch.optim.Optimizer)
        assert opt.ema == DEFAULT_EMA == 0.1  # the official library's default
        assert opt.param_groups is opt.optimizer.param_groups


def test_steplr_changes_the_wrapped_optimizers_learning_rate():
    net = model()
    opt = Bloop(torch.optim.SGD(net.parameters(), lr=0.1), lam=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for s in range(5):
        opt.step(*losses(net, s))
        sched.step()
        lrs.append(opt.optimizer.param_groups[0]["lr"])
    assert lrs == pytest.approx([0.1, 0.05, 0.05, 0.025, 0.025])
    # the scheduler saw the steps (no "lr_scheduler.step() before optimizer.step()" situation)
    assert sched.last_epoch == 5


def test_reduce_on_plateau_and_onecycle_accept_it():
    net = model()
    opt = GradientSurgery(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), method="pcgrad")
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    for s in range(3):
        opt.step(*losses(net, s))
        plateau.step(1.0)  # a constant metric: the lr halves after each non-improving epoch
    assert opt.optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
    net2 = model()
    opt2 = Bloop(torch.optim.Adam(net2.parameters(), lr=1e-3))
    cyc = torch.optim.lr_scheduler.OneCycleLR(opt2, max_lr=1e-2, total_steps=10)
    for s in range(3):
        opt2.step(*losses(net2, s))
        cyc.step()
    assert opt2.optimizer.param_groups[0]["lr"] == opt2.param_groups[0]["lr"] != 1e-3


def test_freezing_a_layer_keeps_its_ema_and_the_others_follow_the_reference():
    net = model(1)
    first = net[0]
    opt = Bloop(torch.optim.SGD(net.parameters(), lr=0.05), lam=0.3, ema=0.5)
    for s in range(3):
        opt.step(*losses(net, s))
    frozen_ema = [opt.state[p]["ema_main"].clone() for p in first.parameters()]
    for p in first.parameters():
        p.requires_grad_(False)
    # while frozen: the other parameters' EMAs evolve as a fresh reference that only sees them would
    live = [p for p in net.parameters() if p.requires_grad]
    ref = {p: opt.state[p]["ema_main"].clone() for p in live}
    for s in range(3, 6):
        main, aux = losses(net, s)
        gm = torch.autograd.grad(main, live, retain_graph=True)
        for p, g in zip(live, gm):
            ref[p] = ref[p] + 0.5 * (g - ref[p])
        opt.step(main, aux)
    for p in live:
        torch.testing.assert_close(opt.state[p]["ema_main"], ref[p])
    for p, e in zip(first.parameters(), frozen_ema):
        assert torch.equal(opt.state[p]["ema_main"], e)  # untouched while frozen
    # unfreezing resumes with the stored EMA, no shape or index error
    for p in first.parameters():
        p.requires_grad_(True)
    opt.step(*losses(net, 6))
    assert len(opt.ema_main) == len(list(net.parameters()))


def test_add_param_group_mid_training_gives_the_new_parameters_a_fresh_ema():
    net = model(2)
    head, body = net[2], net[0]
    opt = Bloop(torch.optim.SGD(head.parameters(), lr=0.05), lam=0.2, ema=0.25, init="grad")
    for p in body.parameters():
        p.requires_grad_(False)
    for s in range(2):
        opt.step(*losses(net, s))
    before = {p: opt.state[p]["ema_main"].clone() for p in head.parameters()}
    for p in body.parameters():
        p.requires_grad_(True)
    opt.add_param_group({"params": list(body.parameters()), "lr": 0.01})
    assert len(opt.optimizer.param_groups) == 2 and opt.param_groups[1]["lr"] == 0.01
    main, aux = losses(net, 2)
    gm = dict(zip(opt.params(), torch.autograd.grad(main, opt.params(), retain_graph=True)))
    opt.step(main, aux)
    for p in body.parameters():  # init="grad": the EMA of a new parameter starts at its first gradient
        torch.testing.assert_close(opt.state[p]["ema_main"], gm[p])
    for p in head.parameters():  # the old ones continued their average
        torch.testing.assert_close(opt.state[p]["ema_main"], before[p] + 0.25 * (gm[p] - before[p]))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("inner", ["sgd", "adam"])
def test_state_dict_round_trip_resumes_bit_for_bit(method, inner):
    def make(net, **kw):
        base = (torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9) if inner == "sgd"
                else torch.optim.Adam(net.parameters(), lr=1e-2))  # fmt: skip
        return GradientSurgery(base, **kw)

    hyper = {"method": method, "lam": 0.7, "ema": 0.3, "init": "random", "seed": 5, "rescale": True}
    net = model(3)
    opt = make(net, **hyper)
    for s in range(3):
        opt.step(*losses(net, s))
    state = copy.deepcopy(opt.state_dict())
    snapshot = copy.deepcopy(net.state_dict())
    for s in range(3, 6):
        opt.step(*losses(net, s))
    expected = flat(net)

    net2 = model(99)
    net2.load_state_dict(snapshot)
    opt2 = make(net2)  # constructed with every default: the state_dict brings method, lam, ema, ...
    opt2.load_state_dict(state)
    assert (opt2.method, opt2.lam, opt2.ema, opt2.init, opt2.seed, opt2.rescale) == (
        method, 0.7, 0.3, "random", 5, True)  # fmt: skip
    assert opt2.n_steps == 3
    for s in range(3, 6):
        opt2.step(*losses(net2, s))
    assert torch.equal(flat(net2), expected)


def test_load_state_dict_refuses_a_foreign_or_mismatched_state():
    net = model()
    opt = Bloop(torch.optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="surgery"):
        opt.load_state_dict(torch.optim.SGD(net.parameters(), lr=0.1).state_dict())
    opt.step(*losses(net, 0))
    sd = opt.state_dict()
    sd["surgery"]["ema"] = 1.5
    with pytest.raises(ValueError, match="ema"):
        Bloop(torch.optim.SGD(model().parameters(), lr=0.1)).load_state_dict(sd)


def test_zero_grad_and_hooks_work_as_for_any_optimizer():
    net = model()
    opt = Bloop(torch.optim.SGD(net.parameters(), lr=0.1))
    calls = []
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append(type(o).__name__))
    opt.step(*losses(net, 0))
    assert calls == ["Bloop"]
    assert all(p.grad is not None for p in net.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in net.parameters())
