"""``warmup_times_cosine``: the warm-up multiplied into a cosine over all steps (crossget, uni-med)."""

from __future__ import annotations

import math

import pytest
import torch

from icml24.language.training import cosine_with_warmup, warmup_times_cosine


def _lrs(make, steps):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("warmup,steps", [(0, 1), (1, 7), (3, 30), (30, 400), (13, 400), (50, 40)])
def test_equals_the_hand_written_schedules_bit_for_bit(warmup, steps):
    got = _lrs(lambda o: warmup_times_cosine(o, warmup_steps=warmup, total_steps=steps), steps)
    # crossget's CLIPTrainConfig schedule and uni-med's pretrain_image_encoder lambda, as they were written
    crossget = [2.0 * (min(1.0, (t + 1) / max(1, warmup)) * 0.5 * (1 + math.cos(math.pi * t / steps)))
                for t in range(steps)]  # fmt: skip
    assert got == crossget


def test_shape_warms_up_then_decays_to_zero():
    lrs = _lrs(lambda o: warmup_times_cosine(o, warmup_steps=4, total_steps=100), 100)
    assert lrs[0] == pytest.approx(0.5) and lrs[3] == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi * 3 / 100)))
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:])) and lrs[-1] < 1e-3
    # not the same schedule as cosine_with_warmup, whose cosine starts after the warm-up
    other = _lrs(lambda o: cosine_with_warmup(o, warmup_steps=4, total_steps=100), 100)
    assert other[3] == 2.0 and lrs[3] < 2.0


def test_bad_arguments_name_themselves():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_times_cosine(opt, warmup_steps=-1, total_steps=10)
    with pytest.raises(TypeError, match="total_steps"):
        warmup_times_cosine(opt, warmup_steps=1, total_steps=10.0)
    with pytest.raises(ValueError, match="total_steps"):
        warmup_times_cosine(opt, warmup_steps=1, total_steps=0)
