"""The size-invariant loss, the data generator and the reproduction of size-invariant-sod."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from icml24.common.experiment import execute_job
from icml24.vision.size_invariant_sod import (
    SizeInvariantLoss,
    TinyUNet,
    make_multi_object_saliency,
    object_frames,
    object_recall,
)
from icml24.vision.size_invariant_sod.losses import frame_box_means
from icml24.vision.size_invariant_sod.reproduce import REPRODUCTION


def _cross(h: int = 16, w: int = 20) -> torch.Tensor:
    g = torch.zeros(h, w)
    g[h // 2 - 1 : h // 2 + 1, :] = 1
    g[:, w // 2 - 1 : w // 2 + 1] = 1
    return g


@pytest.mark.parametrize("base", ["bce", "mse", "l1", "bce+dice", "bce+iou"])
def test_one_frame_covering_the_image_gives_the_base_loss(base):
    tgt = torch.stack([_cross(), _cross()])
    logits = torch.randn(2, 16, 20, generator=torch.Generator().manual_seed(0))
    si = SizeInvariantLoss(base=base)(logits, tgt)
    plain = SizeInvariantLoss(base=base, size_invariant=False)(logits, tgt)
    assert si.item() == pytest.approx(plain.item(), rel=1e-6, abs=1e-7)
    if base == "bce":
        assert plain.item() == pytest.approx(F.binary_cross_entropy_with_logits(logits, tgt).item(), rel=1e-6)


def test_empty_target_uses_the_base_loss():
    tgt = torch.zeros(3, 12, 12)
    logits = torch.randn(3, 1, 12, 12, generator=torch.Generator().manual_seed(1))
    want = F.binary_cross_entropy_with_logits(logits[:, 0], tgt)
    assert SizeInvariantLoss()(logits, tgt).item() == pytest.approx(want.item(), rel=1e-6)


def test_loss_is_sum_of_frame_losses_plus_alpha_weighted_background():
    tgt = torch.zeros(1, 20, 20)
    tgt[0, 2:6, 2:6] = 1
    tgt[0, 15, 15] = 1
    logits = torch.randn(1, 20, 20, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    loss = SizeInvariantLoss()(logits, tgt.double())
    p = torch.sigmoid(logits[0])
    bce = F.binary_cross_entropy_with_logits(logits[0], tgt[0].double(), reduction="none")
    want = bce[2:6, 2:6].mean() + bce[15:16, 15:16].mean()
    bg = torch.ones(20, 20, dtype=torch.bool)
    bg[2:6, 2:6] = False
    bg[15, 15] = False
    alpha = float(bg.sum()) / (400 - float(bg.sum()))
    want = want + alpha * ((p[bg] - 0) ** 2).mean()
    assert loss.item() == pytest.approx(want.item(), rel=1e-12)


def test_background_gradient_is_alpha_scaled_mse_gradient():
    tgt = torch.zeros(1, 16, 16, dtype=torch.float64)
    tgt[0, 3:7, 3:7] = 1
    logits = torch.randn(1, 16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    SizeInvariantLoss()(logits, tgt).backward()
    bg_area = 256 - 16
    alpha = bg_area / 16
    p = torch.sigmoid(logits.detach())
    # d/dz of alpha * mean_{F0} (sigmoid(z) - 0)^2 at a background pixel
    want = alpha * 2 * p * p * (1 - p) / bg_area
    assert torch.allclose(logits.grad[0, 12, 12], want[0, 12, 12], rtol=1e-10)
    assert torch.allclose(logits.grad[0, 0, 15], want[0, 0, 15], rtol=1e-10)


def test_small_object_weighs_as_much_as_a_large_one():
    # Same per-pixel logits inside two objects of different size: equal frame losses, so the SI loss
    # gradient per object (summed over its pixels) is equal, while plain BCE favours the big one.
    tgt = torch.zeros(1, 40, 40, dtype=torch.float64)
    tgt[0, 2:22, 2:22] = 1
    tgt[0, 30:32, 30:32] = 1
    logits = torch.full((1, 40, 40), -1.0, dtype=torch.float64, requires_grad=True)
    SizeInvariantLoss()(logits, tgt).backward()
    g = logits.grad[0]
    assert g[2:22, 2:22].sum().item() == pytest.approx(g[30:32, 30:32].sum().item(), rel=1e-9)


def test_frame_box_means_matches_slicing():
    x = torch.randn(2, 9, 11, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    boxes = torch.tensor([[0, 1, 5, 2, 9], [1, 0, 9, 0, 11], [1, 4, 5, 3, 4]])
    got = frame_box_means(x, boxes)
    want = torch.stack([x[i, a:b, c:d].mean() for i, a, b, c, d in boxes.tolist()])
    assert torch.allclose(got, want, atol=1e-12)


def test_deep_supervision_sums_side_outputs():
    tgt = torch.zeros(2, 12, 12)
    tgt[:, 2:5, 2:5] = 1
    a, b = torch.randn(2, 12, 12), torch.randn(2, 12, 12)
    loss = SizeInvariantLoss()
    assert loss([a, b], tgt).item() == pytest.approx(loss(a, tgt).item() + loss(b, tgt).item(), rel=1e-6)


def test_loss_bad_input():
    loss = SizeInvariantLoss()
    with pytest.raises(ValueError, match="base"):
        SizeInvariantLoss(base="focal")
    with pytest.raises(ValueError, match="shape"):
        loss(torch.zeros(2, 8, 8), torch.zeros(2, 8, 9))
    with pytest.raises(ValueError, match="binary"):
        loss(torch.zeros(2, 8, 8), torch.full((2, 8, 8), 3.0))
    with pytest.raises(ValueError, match="non-finite"):
        loss(torch.full((2, 8, 8), float("nan")), torch.zeros(2, 8, 8))
    with pytest.raises(TypeError, match="torch.Tensor"):
        loss(np.zeros((2, 8, 8)), torch.zeros(2, 8, 8))


def test_generator_objects_are_separate_components_with_diverse_sizes():
    d = make_multi_object_saliency(40, 48, radius_range=(2.0, 16.0), seed=0)
    fr = object_frames(d.masks)
    np.testing.assert_array_equal(fr.n_objects, (d.object_areas > 0).sum(1))
    areas = d.object_areas[d.object_areas > 0]
    assert areas.min() < 50 and areas.max() > 300
    assert d.images.dtype == np.float32 and d.images.min() >= 0 and d.images.max() <= 1
    d2 = make_multi_object_saliency(40, 48, radius_range=(2.0, 16.0), seed=0)
    np.testing.assert_array_equal(d.images, d2.images)


def test_object_recall_matches_loop():
    d = make_multi_object_saliency(5, 32, radius_range=(2.0, 10.0), seed=1)
    p = np.random.default_rng(0).random(d.masks.shape)
    areas, det = object_recall(p, d)
    want_a, want_d = [], []
    for i in range(5):
        for k in range(1, d.object_areas.shape[1] + 1):
            m = d.instances[i] == k
            if m.any():
                want_a.append(m.sum())
                want_d.append(p[i][m].mean() > 0.5)
    np.testing.assert_array_equal(areas, want_a)
    np.testing.assert_array_equal(det, want_d)


def test_tiny_unet_shapes():
    net = TinyUNet(width=4, depth=3)
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 1, 32, 32)


def test_smoke_reproduction_runs_and_is_deterministic():
    jobs = REPRODUCTION.jobs("smoke")
    res = [execute_job(j) for j in jobs]
    assert all(r.status == "ok" for r in res), [r.error for r in res]
    a = REPRODUCTION.analyze(res, "smoke")
    assert a.verdict in ("supported", "not_supported", "inconclusive") and a.checks and a.tables
    json.dumps([r.metrics for r in res])
    again = execute_job(jobs[0])
    assert again.metrics == res[0].metrics
    # analyze copes with missing results
    assert REPRODUCTION.analyze(res[:1], "smoke").verdict in ("inconclusive", "not_supported", "supported")
    assert REPRODUCTION.analyze([], "smoke").verdict == "inconclusive"
