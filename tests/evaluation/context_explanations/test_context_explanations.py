"""The demonstration's pieces against closed forms, brute force, Captum and hand-written classifiers."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import permutations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from icml24.evaluation.context_explanations import (
    GridViT,
    RelationTaskConfig,
    SmallCNN,
    TrainConfig,
    attribution_probe,
    grad_cam,
    integrated_gradients,
    make_scenes,
    mirror_scenes,
    mirrored_twin,
    move_b,
    object_mass_fraction,
    occlusion,
    pointing_game,
    predict_logits,
    region_summaries,
    relational_counterfactual,
    segment_shapley,
    shapley_summaries,
    to_heatmap,
    train_classifier,
    twin_fits,
)
from icml24.evaluation.context_explanations.scenes import render
from icml24.vision.tiny_vit import TinyViT

PROPS = settings(max_examples=25, deadline=None, derandomize=True)


# --------------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------------


@given(seed=st.integers(0, 10_000), task=st.sampled_from(["relation", "colour"]))
@PROPS
def test_labels_follow_the_rule_and_twins_flip_only_the_relation(seed, task):
    cfg = RelationTaskConfig(task=task)
    s = make_scenes(40, cfg, seed=seed, twins_fit=True)
    red_b = s.colour_b[:, 1] < s.colour_b[:, 0]
    expected = s.b_right_of_a if task == "relation" else red_b
    assert np.array_equal(s.labels, expected.astype(np.int64))
    gap = np.maximum(s.xb - (s.xa + s.sa), s.xa - (s.xb + s.sb))
    assert ((gap >= cfg.gap_range[0]) & (gap <= cfg.gap_range[1])).all()
    for about in ("a", "b"):
        t = mirrored_twin(s, about)
        assert np.array_equal(t.labels, 1 - s.labels) if task == "relation" else np.array_equal(t.labels, s.labels)
        # Both objects remain: the same pixel sets up to a translation along the row.
        assert np.array_equal(t.mask_a.sum((1, 2)), s.mask_a.sum((1, 2)))
        assert np.array_equal(t.mask_b.sum((1, 2)), s.mask_b.sum((1, 2)))
        for i in range(3):
            shift = (t.xb[i] - s.xb[i]) if about == "a" else (t.xa[i] - s.xa[i])
            moved = t.mask_b[i] if about == "a" else t.mask_a[i]
            orig = s.mask_b[i] if about == "a" else s.mask_a[i]
            assert np.array_equal(np.roll(orig, shift, axis=1), moved)
        # The twin's twin is the scene itself (a reflection is an involution).
        back = mirrored_twin(t, about)
        assert np.array_equal(back.images, s.images) and np.array_equal(back.labels, s.labels)


@given(seed=st.integers(0, 10_000))
@PROPS
def test_mirror_is_a_left_right_flip_of_the_image(seed):
    s = make_scenes(10, seed=seed)
    m = mirror_scenes(s)
    assert np.array_equal(m.images, s.images[..., ::-1])
    assert np.array_equal(m.labels, 1 - s.labels)
    assert np.array_equal(mirror_scenes(m).images, s.images)


def test_columns_alone_do_not_fix_the_label():
    """The pair is placed uniformly: over many scenes, A's column takes most values in both classes."""
    s = make_scenes(4000, seed=0)
    for x in (s.xa, s.xb):
        both = set(x[s.labels == 0]) & set(x[s.labels == 1])
        assert len(both) >= 14
    assert abs(s.labels.mean() - 0.5) < 0.03


def test_twins_fit_only_keeps_scenes_whose_twins_fit():
    s = make_scenes(300, seed=1)
    bad = ~(twin_fits(s, "a") & twin_fits(s, "b"))
    assert bad.any()
    with pytest.raises(ValueError, match="twins_fit"):
        mirrored_twin(s.subset(np.flatnonzero(bad)), "a" if (~twin_fits(s, "a")).any() else "b")


def test_config_validates():
    with pytest.raises(ValueError, match="size_range"):
        RelationTaskConfig(size_range=(6, 4))
    with pytest.raises(ValueError, match="image_size"):
        RelationTaskConfig(image_size=12)  # the widest pair does not fit
    with pytest.raises(ValueError, match="task"):
        RelationTaskConfig(task="shape")


# --------------------------------------------------------------------------------------------------
# A hand-written relational classifier (no training): margin = centre(B) - centre(A) - threshold
# --------------------------------------------------------------------------------------------------


class CentroidRelation(nn.Module):
    """Reads A (red channel only) and B (green channel) from the pixels; ``logit_1 - logit_0`` is
    ``cx_B - cx_A - threshold`` when both objects are visible, 0 otherwise."""

    def __init__(self, threshold: float = 0.0):
        super().__init__()
        self.threshold = threshold

    def forward(self, x):
        a = ((x[:, 0] > 0.5) & (x[:, 1] < 0.5)).double()
        b = (x[:, 1] > 0.5).double()
        cols = torch.arange(x.shape[-1], dtype=torch.float64)
        na, nb = a.sum((1, 2)), b.sum((1, 2))
        cxa = (a * cols).sum((1, 2)) / na.clamp_min(1)
        cxb = (b * cols).sum((1, 2)) / nb.clamp_min(1)
        margin = torch.where((na > 0) & (nb > 0), cxb - cxa - self.threshold, torch.zeros_like(na))
        return torch.stack([-margin / 2, margin / 2], 1).float()


def _coloured(n=30, seed=0, size_range=(4, 4)):
    cfg = RelationTaskConfig(noise_std=0.0, size_range=size_range, intensity_range=(1.0, 1.0))
    s = make_scenes(n, cfg, seed=seed, twins_fit=True)
    red, green = np.array([1, 0, 0], np.float32), np.array([0, 1, 0], np.float32)
    return render(replace(s, colour_a=np.tile(red, (n, 1)), colour_b=np.tile(green, (n, 1))))


def test_counterfactual_recovers_the_exact_threshold_of_a_hand_written_classifier():
    s = _coloured()
    # Threshold 4.5: between B touching A (offset 4) and a one-pixel gap (offset 5), no overlap at either.
    cf = relational_counterfactual(CentroidRelation(threshold=4.5), s)
    assert np.allclose(cf.flip_offset, 4.5)
    assert (cf.n_crossings == 1).all() and cf.flips.all()
    assert not cf.recovered.any()  # the flip is outside the crossing of A: not the task's rule
    # Threshold 0: the task's rule; the sweep recovers it in every scene.
    cf0 = relational_counterfactual(CentroidRelation(threshold=0.0), s)
    assert cf0.recovered.all() and (np.abs(cf0.flip_offset) < 4).all()


def test_counterfactual_of_a_position_blind_classifier_never_flips():
    class Constant(nn.Module):
        def forward(self, x):
            return torch.stack([x.mean((1, 2, 3)), x.mean((1, 2, 3)) + 1.0], 1)

    cf = relational_counterfactual(Constant(), make_scenes(20, seed=3, twins_fit=True))
    assert not cf.flips.any() and not cf.recovered.any() and np.isnan(cf.flip_offset).all()


def test_move_b_keeps_a_and_the_background():
    s = make_scenes(10, seed=5, twins_fit=True)
    m = move_b(s, s.xb + np.where(s.b_right_of_a, 1, -1) * 0)
    assert np.array_equal(m.images, s.images)
    t = move_b(s, mirrored_twin(s, "a").xb)
    assert np.array_equal(t.images, mirrored_twin(s, "a").images)


# --------------------------------------------------------------------------------------------------
# Exact segment Shapley values
# --------------------------------------------------------------------------------------------------


def test_shapley_is_symmetric_for_a_relational_classifier_whatever_the_class():
    """f(x without A) = f(x without B) = f(background) gives phi_A = phi_B (the symmetry axiom), in both
    classes: the Shapley split says nothing about which relation holds."""
    s = _coloured(n=40, seed=2)
    seg = np.stack([s.mask_a, s.mask_b], 1)
    for target in (0, 1):
        sh = segment_shapley(CentroidRelation(), s.images, s.background, seg, target)
        assert np.allclose(sh.values[:, 0], sh.values[:, 1])
        assert np.allclose(sh.values.sum(1), sh.value_of((0, 1)) - sh.value_of(()))  # efficiency
    assert np.allclose(shapley_summaries(sh.values)[:, 2], 0.0)


def _brute_force_shapley(v, k):
    """Shapley values as the mean marginal contribution over all k! orders (the definition)."""
    phi = np.zeros(k)
    orders = list(permutations(range(k)))
    for order in orders:
        seen: tuple[int, ...] = ()
        for i in order:
            phi[i] += v(tuple(sorted(seen + (i,)))) - v(tuple(sorted(seen)))
            seen = seen + (i,)
    return phi / len(orders)


@given(seed=st.integers(0, 1000), k=st.integers(1, 4))
@PROPS
def test_shapley_matches_the_permutation_definition(seed, k):
    rng = np.random.default_rng(seed)
    size = 8
    labels = rng.integers(0, k + 1, (2, size, size))  # label k: outside every segment
    seg = np.stack([labels == i for i in range(k)], 1)
    x = rng.normal(size=(2, 3, size, size)).astype(np.float32)
    bg = rng.normal(size=(2, 3, size, size)).astype(np.float32)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * size * size, 8), nn.Tanh(), nn.Linear(8, 2))
    sh = segment_shapley(model, x, bg, seg, 1)
    for i in range(2):
        ref = _brute_force_shapley(lambda c, i=i: float(sh.value_of(c)[i]), k)
        assert np.allclose(sh.values[i], ref, atol=1e-9)
    assert np.allclose(sh.values.sum(1), sh.value_of(tuple(range(k))) - sh.value_of(()), atol=1e-6)


def test_shapley_agrees_with_captum_shapley_values():
    from captum.attr import ShapleyValues

    s = make_scenes(6, seed=4, twins_fit=True)
    torch.manual_seed(0)
    model = SmallCNN(width=4).eval()
    seg = np.stack([s.mask_a, s.mask_b], 1)
    ours = segment_shapley(model, s.images, s.background, seg, 1).values
    # Captum's exact Shapley over feature groups: A, B and the rest (which equals the baseline there, a
    # null player that changes no other player's value).
    group = np.where(s.mask_a, 0, np.where(s.mask_b, 1, 2))[:, None].repeat(3, 1)
    x, bg = torch.as_tensor(s.images), torch.as_tensor(s.background)
    for i in range(len(s)):
        attr = ShapleyValues(model).attribute(x[i : i + 1], baselines=bg[i : i + 1], target=1,
                                              feature_mask=torch.as_tensor(group[i : i + 1]))  # fmt: skip
        phi_a = float(attr[0][torch.as_tensor(group[i]) == 0][0])
        phi_b = float(attr[0][torch.as_tensor(group[i]) == 1][0])
        assert math.isclose(phi_a, ours[i, 0], rel_tol=1e-4, abs_tol=1e-5)
        assert math.isclose(phi_b, ours[i, 1], rel_tol=1e-4, abs_tol=1e-5)


# --------------------------------------------------------------------------------------------------
# Heatmaps through Captum
# --------------------------------------------------------------------------------------------------


def _manual_grad_cam(model, layer, x, target):
    acts = {}
    handle = layer.register_forward_hook(lambda m, i, o: acts.setdefault("a", o))
    out = model(x)
    handle.remove()
    a = acts["a"]
    grads = torch.autograd.grad(out[:, target].sum(), a)[0]
    cam = torch.relu((grads.mean((2, 3), keepdim=True) * a).sum(1, keepdim=True))
    return cam, torch.nn.functional.interpolate(cam, size=x.shape[2:], mode="bilinear")[:, 0]


def test_grad_cam_is_the_closed_form_non_negative_and_up_sampled():
    torch.manual_seed(1)
    model = SmallCNN(width=8).eval()
    s = make_scenes(5, seed=0)
    cam = grad_cam(model, s.images, 1)
    coarse, ref = _manual_grad_cam(model, model.last_conv, torch.as_tensor(s.images), 1)
    assert cam.shape == (5, 32, 32) and (cam >= 0).all()
    assert coarse.shape[2:] == (8, 8)  # the last conv map: the input side / 4
    assert np.allclose(cam, ref.detach().numpy(), atol=1e-5)


def test_grad_cam_of_the_vit_reads_the_token_grid():
    torch.manual_seed(2)
    model = GridViT(dim=16, depth=1, num_heads=2, mlp_dim=32).eval()
    s = make_scenes(3, seed=0)
    cam = grad_cam(model, s.images, 0)
    assert cam.shape == (3, 32, 32) and (cam >= 0).all()
    coarse, ref = _manual_grad_cam(model, model.token_grid, torch.as_tensor(s.images), 0)
    assert coarse.shape[2:] == (8, 8)
    assert np.allclose(cam, ref.detach().numpy(), atol=1e-5)


def test_grid_vit_is_exactly_the_shared_tiny_vit():
    torch.manual_seed(3)
    model = GridViT(dim=16, depth=2, num_heads=2, mlp_dim=32).eval()
    plain = TinyViT(image_size=32, patch_size=4, in_channels=3, num_classes=2, dim=16, depth=2, num_heads=2,
                    mlp_dim=32, dropout=0.0).eval()  # fmt: skip
    plain.load_state_dict(model.vit.state_dict())
    x = torch.as_tensor(make_scenes(4, seed=1).images)
    assert torch.allclose(model(x), plain(x), atol=1e-6)


def test_integrated_gradients_completeness():
    """Sundararajan et al., Prop. 1: the attributions sum to f(x) - f(baseline), within 1-2% at 50+ steps."""
    torch.manual_seed(4)
    model = SmallCNN(width=8).eval()
    s = make_scenes(8, seed=2)
    attr, delta = integrated_gradients(model, s.images, 1, n_steps=64, return_delta=True)
    with torch.no_grad():
        gap = (model(torch.as_tensor(s.images))[:, 1] - model(torch.zeros_like(torch.as_tensor(s.images)))[:, 1]).numpy()
    total = attr.sum((1, 2, 3))
    assert np.allclose(total, gap, rtol=0.02, atol=0.02 * np.abs(gap).max())
    assert np.allclose(np.abs(delta), np.abs(total - gap), atol=1e-4)


def test_occlusion_of_a_linear_model_is_the_window_sum():
    """For f = <w, x> and non-overlapping windows, occluding a window to 0 drops f by the window's sum of
    w * x: every pixel of the window gets that drop."""
    torch.manual_seed(5)
    size = 8
    lin = nn.Linear(3 * size * size, 2)
    model = nn.Sequential(nn.Flatten(), lin).eval()
    x = np.random.default_rng(0).normal(size=(2, 3, size, size)).astype(np.float32)
    attr = occlusion(model, x, 1, window=4, stride=4)
    wx = (lin.weight[1].detach().numpy().reshape(3, size, size) * x).sum(1)  # (2, H, W)
    for i in range(2):
        for r in (0, 4):
            for c in (0, 4):
                block = wx[i, r : r + 4, c : c + 4].sum()
                assert np.allclose(attr[i, :, r : r + 4, c : c + 4], block, atol=1e-5)


def test_region_summaries_and_where_metrics_on_hand_made_maps():
    s = make_scenes(4, seed=7, twins_fit=True)
    only_a = s.mask_a.astype(float)
    f = region_summaries(only_a, s.mask_a, s.mask_b, dilate=0)
    assert np.allclose(f[:, 0], 1.0) and np.allclose(f[:, 1], 0.0)
    assert np.allclose(object_mass_fraction(only_a, s.mask_a | s.mask_b, dilate=0), 1.0)
    assert pointing_game(only_a, s.mask_a, tolerance=0).all()
    far = np.zeros_like(only_a)
    far[:, 0, 0] = 1.0  # a corner: far from both objects for these scenes or not, but never on the objects' pixels
    assert not pointing_game(far, s.mask_a & ~s.mask_a, tolerance=0).any()
    assert np.allclose(to_heatmap(np.stack([only_a, -only_a, only_a], 1)), 2 * only_a)
    assert np.allclose(to_heatmap(np.stack([only_a, -only_a, only_a], 1), mode="absolute"), 3 * only_a)


def test_the_probe_is_at_chance_without_signal_and_accurate_with_it():
    rng = np.random.default_rng(0)
    y = np.arange(400) % 2
    noise = attribution_probe(rng.normal(size=(400, 3)), y).accuracy
    assert abs(noise - 0.5) < 3 * 0.5 / math.sqrt(400) + 0.02
    signal = attribution_probe(np.c_[y + 0.2 * rng.normal(size=400), rng.normal(size=400)], y).accuracy
    assert signal > 0.95


# --------------------------------------------------------------------------------------------------
# Training: a small CNN learns the relation (mirrored-twin test), quickly
# --------------------------------------------------------------------------------------------------


def test_small_cnn_solves_the_relation_by_the_relation():
    torch.manual_seed(0)
    train = make_scenes(600, seed=10)
    mirrored = mirror_scenes(train)
    x = np.concatenate([train.images, mirrored.images])
    y = np.concatenate([train.labels, mirrored.labels])
    model = SmallCNN(width=8)
    history = train_classifier(model, x, y, TrainConfig(epochs=8, batch_size=64), seed=0)
    assert history[-1] < history[0]
    test = make_scenes(200, seed=11, twins_fit=True)
    for scenes in (test, mirrored_twin(test, "a"), mirrored_twin(test, "b")):
        acc = (predict_logits(model, scenes.images).argmax(1) == scenes.labels).mean()
        assert acc > 0.9


def test_two_player_shapley_difference_is_the_lone_object_gap():
    """phi_A - phi_B = v({A}) - v({B}) for two players: the README's account of why region summaries of a
    trained model can tell the class (the explained logit's response to a lone object)."""
    torch.manual_seed(6)
    model = SmallCNN(width=4).eval()
    s = make_scenes(12, seed=8, twins_fit=True)
    sh = segment_shapley(model, s.images, s.background, np.stack([s.mask_a, s.mask_b], 1), s.labels)
    assert np.allclose(sh.values[:, 0] - sh.values[:, 1], sh.value_of((0,)) - sh.value_of((1,)), atol=1e-6)
