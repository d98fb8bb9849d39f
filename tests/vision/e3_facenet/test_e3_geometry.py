"""Volume rendering, virtual normals, the geometric regulariser and the multi-view reprojection error, against
closed forms and brute force (notes section 7)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.vision.e3_facenet import (
    CameraSpec,
    camera_rays,
    depth_total_variation,
    geometric_regularization,
    point_map,
    render_toy_faces,
    reprojection_error,
    sample_attributes,
    virtual_normals,
    volume_render,
)

HYP = settings(derandomize=True, max_examples=25, deadline=None)


def _plane_points(h: int, w: int, normal=(0.3, -0.2, 1.0), offset=4.0, yaw=0.2) -> torch.Tensor:
    """Perspective rays of a camera hitting the plane n.x = offset (closed-form ray lengths), as a point map."""
    o, d = camera_rays(torch.tensor([yaw]), resolution=h)
    n = torch.tensor(normal)
    t = (offset - (o * n).sum(-1)) / (d * n).sum(-1)
    return point_map(t.reshape(1, h, w), o, d)


@HYP
@given(st.integers(0, 10_000), st.integers(2, 16))
def test_volume_weights_in_unit_interval_sum_at_most_one_and_depth_in_range(seed, k):
    g = torch.Generator().manual_seed(seed)
    sigma = torch.rand(2, 5, k, generator=g) * torch.tensor(10.0) ** (torch.rand(1, generator=g) * 4 - 2)
    depths = torch.sort(torch.rand(k, generator=g) * 3 + 2).values + torch.arange(k) * 1e-3
    out = volume_render(sigma, torch.rand(2, 5, k, 4, generator=g), depths, far=6.0)
    w = out["weights"]
    assert bool((w >= 0).all()) and bool((w <= 1).all())
    assert bool((w.sum(-1) <= 1 + 1e-6).all())
    assert bool((out["depth"] >= depths[0] - 1e-5).all()) and bool((out["depth"] <= 6.0 + 1e-5).all())


def test_volume_render_closed_forms():
    depths = torch.tensor([1.0, 2.0, 3.0])
    feats = torch.arange(3.0).reshape(1, 1, 3, 1)
    # One opaque sample: all weight on it, its depth and feature.
    opaque = volume_render(torch.tensor([[[0.0, 1e4, 0.0]]]), feats, depths, far=4.0)
    assert opaque["weights"][0, 0].tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert float(opaque["depth"]) == pytest.approx(2.0) and float(opaque["features"]) == pytest.approx(1.0)
    # Empty space: the background's feature at the far depth.
    empty = volume_render(torch.zeros(1, 1, 3), feats, depths, far=4.0, background=torch.tensor([[7.0]]))
    assert float(empty["depth"]) == pytest.approx(4.0) and float(empty["features"]) == pytest.approx(7.0)
    # Constant density s over unit intervals: w_k = exp(-s (k-1)) (1 - exp(-s)).
    s = 0.7
    uni = volume_render(torch.full((1, 1, 3), s), feats, depths, far=4.0)
    want = [math.exp(-s * i) * (1 - math.exp(-s)) for i in range(3)]
    assert uni["weights"][0, 0].tolist() == pytest.approx(want, rel=1e-5)


def test_virtual_normals_are_unit_and_constant_on_any_plane():
    pts = _plane_points(8, 8)
    n = virtual_normals(pts)
    assert torch.allclose(n.norm(dim=1), torch.ones(1, 6, 6), atol=1e-5)
    want = torch.nn.functional.normalize(torch.tensor([0.3, -0.2, 1.0]), dim=0)
    # Columns x rows = right x down: the normal points away from the camera, i.e. along -n for this plane.
    assert torch.allclose(n[0].reshape(3, -1).T, -want.expand(36, 3), atol=1e-4)
    reg = geometric_regularization(pts)
    assert float(reg["normal"]) == pytest.approx(0.0, abs=1e-4)  # float32 round-off of a constant normal


def test_flipping_x_flips_the_normal_consistently():
    g = torch.Generator().manual_seed(0)
    pts = _plane_points(7, 7) + 0.05 * torch.randn(1, 3, 7, 7, generator=g)
    n = virtual_normals(pts)
    # Mirror the x coordinate (a reflection R, det -1): n' = -R n.
    mirrored = pts * torch.tensor([-1.0, 1.0, 1.0]).reshape(1, 3, 1, 1)
    n_m = virtual_normals(mirrored)
    assert torch.allclose(n_m, -n * torch.tensor([-1.0, 1.0, 1.0]).reshape(1, 3, 1, 1), atol=1e-5)
    # Reverse the image columns: the horizontal difference changes sign, so does the normal.
    n_f = virtual_normals(pts.flip(-1))
    assert torch.allclose(n_f, -n.flip(-1), atol=1e-5)


def test_geometric_regularisation_closed_forms_on_an_orthographic_plane():
    s, h = 0.1, 9
    ys, xs = torch.meshgrid(torch.arange(h) * s, torch.arange(h) * s, indexing="ij")
    plane = torch.stack([xs, ys, torch.full_like(xs, 3.0)])[None]
    reg = geometric_regularization(plane, shift=2)
    # |P(u + 2 e_x) - P(u)|_1 = 2 s in x only; the mean over the three coordinates is 2 s / 3 per axis.
    assert float(reg["loc"]) == pytest.approx(4 * s / 3, rel=1e-5)
    assert float(reg["normal"]) == pytest.approx(0.0, abs=1e-6)
    assert float(reg["reg"]) == pytest.approx(4 * s / 3, rel=1e-5)
    # All points at one place: both terms vanish (the loss's minimum).
    same = torch.ones(1, 3, h, h)
    assert float(geometric_regularization(same)["loc"]) == 0.0
    # A bumpy surface costs more than the plane.
    bumpy = plane.clone()
    bumpy[:, 2] += 0.3 * torch.sin(xs * 20)
    assert float(geometric_regularization(bumpy)["reg"]) > float(reg["reg"]) + 0.05


def test_depth_total_variation_closed_form():
    d = torch.arange(16.0).reshape(1, 4, 4)  # +1 along rows' columns, +4 down the rows
    assert depth_total_variation(d).tolist() == pytest.approx([5.0])
    assert depth_total_variation(torch.full((2, 3, 3), 2.0)).tolist() == [0.0, 0.0]


def test_camera_rays_are_unit_and_rotate_with_yaw():
    o, d = camera_rays(torch.tensor([0.0, 0.25]), resolution=6)
    assert torch.allclose(d.norm(dim=-1), torch.ones(2, 36), atol=1e-6)
    # The mean ray points at the head's centre; the camera is on the circle of radius 4.
    for i in range(2):
        centre = torch.nn.functional.normalize(d[i].mean(0), dim=0)
        assert torch.allclose(centre, -o[i, 0] / o[i, 0].norm(), atol=1e-5)
    assert torch.allclose(o.norm(dim=-1), torch.full((2, 36), 4.0))
    c, s = math.cos(0.25), math.sin(0.25)
    rot = torch.tensor([[c, 0, s], [0, 1, 0], [-s, 0, c]])  # yaw about the y axis
    assert torch.allclose(d[0] @ rot.T, d[1], atol=1e-5)


def test_renderer_depth_matches_brute_force_ray_marching():
    attrs = torch.tensor([[0, 1, 0, 1]])
    out = render_toy_faces(attrs, torch.tensor([0.1]), resolution=6, supersample=1)
    o, d = camera_rays(torch.tensor([0.1]), resolution=6)
    t = torch.linspace(2.8, 5.2, 24001)
    pts = o[0, :, None] + t[None, :, None] * d[0, :, None]
    inside = ((pts / torch.tensor([0.8, 1.0, 0.85])) ** 2).sum(-1) <= 1
    first = torch.where(inside.any(1), t[inside.float().argmax(1)], torch.tensor(5.2))
    assert torch.allclose(out["depth"].reshape(-1), first, atol=2e-4)
    assert out["mask"].reshape(-1).tolist() == inside.any(1).float().tolist()


def test_reprojection_error_is_zero_for_the_same_view_and_small_for_the_true_geometry():
    attrs = sample_attributes(8, generator=torch.Generator().manual_seed(1))
    cam = CameraSpec()
    y0, y1 = torch.zeros(8), torch.full((8,), 0.3)
    a, b = render_toy_faces(attrs, y0), render_toy_faces(attrs, y1)
    same = reprojection_error(a["image"], a["depth"], y0, a["image"], y0, camera=cam)
    assert float(same.abs().max()) < 1e-5
    true = reprojection_error(a["image"], a["depth"], y0, b["image"], y1, camera=cam, mask=a["mask"])
    static = reprojection_error(a["image"], a["depth"], y0, a["image"], y1, camera=cam, mask=a["mask"])
    assert float(true.mean()) < 0.6 * float(static.mean())


def test_reprojection_error_with_the_visibility_test_scores_the_true_geometry_near_zero():
    """Points the other view cannot see (the far side of the head, silhouette pixels whose depth mixes face and
    background) are left out when the target's depth is given: the true geometry then scores about half of what it
    scored without the test at 16 px, under a quarter of a static image, and tends to 0 with the resolution, while a
    static image stays far off."""
    attrs = sample_attributes(16, generator=torch.Generator().manual_seed(1))
    cam = CameraSpec()
    y0, y1 = torch.zeros(16), torch.full((16,), 0.3)
    errs = {}
    for res in (16, 64):
        a, b = render_toy_faces(attrs, y0, resolution=res), render_toy_faces(attrs, y1, resolution=res)
        blind = reprojection_error(a["image"], a["depth"], y0, b["image"], y1, camera=cam, mask=a["mask"])
        seen = reprojection_error(a["image"], a["depth"], y0, b["image"], y1, camera=cam, mask=a["mask"],
                                  target_depth=b["depth"])  # fmt: skip
        static = reprojection_error(a["image"], a["depth"], y0, a["image"], y1, camera=cam, mask=a["mask"],
                                    target_depth=a["depth"])  # fmt: skip
        errs[res] = float(seen.mean())
        assert float(seen.mean()) < 0.6 * float(blind.mean())
        assert float(seen.mean()) < 0.25 * float(static.mean())
    assert errs[64] < 0.015 and errs[64] < 0.5 * errs[16]
    # the same view with its own depth: every pixel visible, error 0
    a = render_toy_faces(attrs, y0)
    same = reprojection_error(a["image"], a["depth"], y0, a["image"], y0, camera=cam, target_depth=a["depth"])
    assert float(same.abs().max()) < 1e-5
    # a wrong target depth hides every point: nothing to score
    far = reprojection_error(a["image"], a["depth"], y0, a["image"], y0, camera=cam, mask=a["mask"],
                             target_depth=a["depth"] + 1.0)  # fmt: skip
    assert bool(torch.isnan(far).all())
    with pytest.raises(ValueError, match="target_depth"):
        reprojection_error(a["image"], a["depth"], y0, a["image"], y0, camera=cam, target_depth=a["depth"][:, :4])
    with pytest.raises(ValueError, match="depth_tolerance"):
        reprojection_error(a["image"], a["depth"], y0, a["image"], y0, camera=cam, depth_tolerance=0.0)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="depths"):
        volume_render(torch.ones(1, 1, 3), torch.ones(1, 1, 3, 2), torch.tensor([1.0, 1.0, 2.0]), far=3.0)
    with pytest.raises(ValueError, match="far"):
        volume_render(torch.ones(1, 1, 3), torch.ones(1, 1, 3, 2), torch.tensor([1.0, 2.0, 3.0]), far=2.0)
    with pytest.raises(ValueError, match="shift"):
        geometric_regularization(torch.ones(1, 3, 8, 8), shift=0)
    with pytest.raises(TypeError, match="points"):
        virtual_normals("pts")
