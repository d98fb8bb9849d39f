"""Invariants of the Bloop direction and the baselines (notes, Sec. 7), against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.optim.bloop import (
    bloop_direction,
    dynamic_barrier_direction,
    mixed_direction,
    pcgrad_direction,
    project_out,
    projection_ratio,
    tree_dot,
    update_ema,
)

SHAPES = [(3, 4), (5,), (2, 2, 3)]


def rand_grads(seed: int, shapes=SHAPES, scales=None) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    scales = scales or [1.0] * len(shapes)
    return [s * torch.randn(shape, generator=g, dtype=torch.float64) for shape, s in zip(shapes, scales)]


def flat(gs) -> torch.Tensor:
    return torch.cat([x.reshape(-1) for x in gs])


def test_tree_dot_is_the_dot_product_of_the_flattened_vectors():
    a, b = rand_grads(0), rand_grads(1)
    assert torch.allclose(tree_dot(a, b), flat(a) @ flat(b))


def test_bloop_direction_matches_a_flattened_reference():
    gm, ga, e = rand_grads(0), rand_grads(1), rand_grads(2)
    lam = 0.7
    d = bloop_direction(gm, ga, e, lam, eps=0.0)
    fe, fa = flat(e), flat(ga)
    ref = flat(gm) + lam * (fa - (fa @ fe) / (fe @ fe) * fe)
    assert torch.allclose(flat(d), ref, atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_projected_aux_is_orthogonal_to_the_ema_globally(seed):
    gm, ga, e = rand_grads(seed), rand_grads(seed + 100), rand_grads(seed + 200)
    lam = 0.3
    d = bloop_direction(gm, ga, e, lam, eps=0.0)
    aux_part = [(x - y) / lam for x, y in zip(d, gm)]
    rel = tree_dot(aux_part, e) / (torch.linalg.norm(flat(aux_part)) * torch.linalg.norm(flat(e)))
    assert abs(float(rel)) < 1e-6


def test_global_projection_differs_from_a_per_tensor_projection():
    # blocks with very different ratios <g_t, e_t>/||e_t||^2: a per-tensor projection removes one
    # component per block, the global one a single component along the whole e.
    e = rand_grads(3, scales=[1.0, 5.0, 0.2])
    ga = rand_grads(4)
    glob, c = project_out(e, ga, eps=0.0)
    per = [x - (torch.vdot(x.reshape(-1), o.reshape(-1)) / (o**2).sum()) * o for x, o in zip(ga, e)]
    # both are orthogonal to e, but the global one changed g_aux only along e (one scalar c)
    assert abs(float(tree_dot(per, e))) < 1e-9 and abs(float(tree_dot(glob, e))) < 1e-9
    assert torch.allclose(flat(ga) - flat(glob), c * flat(e))
    assert not torch.allclose(flat(glob), flat(per), atol=1e-3)
    # the per-tensor result is not of the form g_aux - c e for any scalar c
    diff = flat(ga) - flat(per)
    c_ls = (diff @ flat(e)) / (flat(e) @ flat(e))
    assert torch.linalg.norm(diff - c_ls * flat(e)) > 1e-3


def test_no_ema_identity_first_order_decrease_equals_gd():
    gm, ga = rand_grads(5), rand_grads(6)
    e = update_ema(rand_grads(7), gm, 1.0)  # rho = 1: the EMA is the current gradient
    d = bloop_direction(gm, ga, e, 2.5, eps=0.0)
    assert torch.allclose(tree_dot(d, gm), tree_dot(gm, gm), rtol=1e-10)


def test_limits():
    gm, ga, e = rand_grads(8), rand_grads(9), rand_grads(10)
    # lam = 0: the training gradient
    assert torch.allclose(flat(bloop_direction(gm, ga, e, 0.0)), flat(gm))
    # g_aux parallel to e: removed entirely
    par = [3.0 * x for x in e]
    assert torch.allclose(flat(bloop_direction(gm, par, e, 0.9, eps=0.0)), flat(gm), atol=1e-12)
    # g_aux orthogonal to e: Bloop is the mixed sum
    fa, fe = flat(ga), flat(e)
    orth_flat = fa - (fa @ fe) / (fe @ fe) * fe
    orth, i = [], 0
    for x in ga:
        orth.append(orth_flat[i : i + x.numel()].reshape(x.shape))
        i += x.numel()
    assert torch.allclose(
        flat(bloop_direction(gm, orth, e, 0.9, eps=0.0)), flat(mixed_direction(gm, orth, 0.9)), atol=1e-12
    )


def test_homogeneity_linear_in_aux_and_invariant_to_ema_scale():
    g1, g2, e = rand_grads(11), rand_grads(12), rand_grads(13)
    a, b = 2.0, -0.5
    comb = [a * x + b * y for x, y in zip(g1, g2)]
    lhs = flat(project_out(e, comb, eps=0.0)[0])
    rhs = a * flat(project_out(e, g1, eps=0.0)[0]) + b * flat(project_out(e, g2, eps=0.0)[0])
    assert torch.allclose(lhs, rhs, atol=1e-12)
    for s in (1e-3, 7.0):
        scaled = [s * x for x in e]
        assert torch.allclose(flat(project_out(scaled, g1, eps=0.0)[0]), flat(project_out(e, g1, eps=0.0)[0]))


def test_ema_edge_cases():
    e, g = rand_grads(14), rand_grads(15)
    assert torch.equal(flat(update_ema(e, g, 1.0)), flat(g))
    assert torch.equal(flat(update_ema(e, g, 0.0)), flat(e))
    half = update_ema(e, g, 0.5)
    assert torch.allclose(flat(half), 0.5 * (flat(e) + flat(g)))


def test_zero_ema_does_not_divide_by_zero_and_gives_the_mixed_sum():
    gm, ga = rand_grads(16), rand_grads(17)
    zeros = [torch.zeros_like(x) for x in gm]
    d = bloop_direction(gm, ga, zeros, 0.4)
    assert torch.allclose(flat(d), flat(mixed_direction(gm, ga, 0.4)))


def test_dynamic_barrier_both_branches():
    gm, e = rand_grads(18), rand_grads(19)
    lam = 0.5
    # small ratio (c <= 1/lam): identical to Bloop
    ga_small = [0.1 * x + y for x, y in zip(e, rand_grads(20, scales=[0.01] * 3))]
    c = float(projection_ratio(e, ga_small, eps=0.0))
    assert c <= 1 / lam
    assert torch.allclose(
        flat(dynamic_barrier_direction(gm, ga_small, e, lam, eps=0.0)),
        flat(bloop_direction(gm, ga_small, e, lam, eps=0.0)),
    )
    # large ratio (c > 1/lam): d = g_main - e + lam g_aux
    ga_big = [10.0 * x for x in e]
    assert float(projection_ratio(e, ga_big, eps=0.0)) > 1 / lam
    d = dynamic_barrier_direction(gm, ga_big, e, lam, eps=0.0)
    assert torch.allclose(flat(d), flat(gm) - flat(e) + lam * flat(ga_big))
    # with rho = 1 (e = g_main): the notebook's formula max(1 - lam c, 0) g_main + lam g_aux
    for ga in (ga_small, ga_big, rand_grads(21)):
        cc = float(projection_ratio(gm, ga, eps=0.0))
        d = dynamic_barrier_direction(gm, ga, gm, lam, eps=0.0)
        assert torch.allclose(flat(d), max(1 - lam * cc, 0.0) * flat(gm) + lam * flat(ga), atol=1e-12)


def test_pcgrad_non_conflicting_is_the_mixed_sum_and_conflicting_projects():
    gm = rand_grads(22)
    ga = [x + 0.1 * y for x, y in zip(gm, rand_grads(23))]  # positive inner product
    assert float(tree_dot(gm, ga)) > 0
    d = pcgrad_direction(gm, ga, gm, ga, 0.3)
    assert torch.allclose(flat(d), flat(mixed_direction(gm, ga, 0.3)))
    conflict = [-x + 0.1 * y for x, y in zip(gm, rand_grads(24))]
    fm, fa = flat(gm), flat(conflict)
    ref = (fm - (fm @ fa) / (fa @ fa) * fa) + 0.3 * (fa - (fa @ fm) / (fm @ fm) * fm)
    assert torch.allclose(flat(pcgrad_direction(gm, conflict, gm, conflict, 0.3, eps=0.0)), ref)


def test_mismatched_structures_raise():
    with pytest.raises(ValueError, match="same number of tensors"):
        tree_dot(rand_grads(0), rand_grads(0)[:2])
    with pytest.raises(ValueError, match="same shape"):
        mixed_direction([torch.zeros(3)], [torch.zeros(4)], 0.1)


@settings(max_examples=40, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=3), min_size=1, max_size=4),
    seed=st.integers(0, 10_000),
    lam=st.floats(0.0, 10.0),
)
def test_orthogonality_property(shapes, seed, lam):
    shapes = [tuple(s) for s in shapes]
    gm, ga, e = rand_grads(seed, shapes), rand_grads(seed + 1, shapes), rand_grads(seed + 2, shapes)
    proj, _ = project_out(e, ga, eps=0.0)
    scale = float(torch.linalg.norm(flat(ga)) * torch.linalg.norm(flat(e)))
    assert abs(float(tree_dot(proj, e))) <= 1e-9 * max(scale, 1e-30)
    d = bloop_direction(gm, ga, e, lam, eps=0.0)
    assert np.allclose(flat(d).numpy(), (flat(gm) + lam * flat(proj)).numpy())
