"""VinT-6D geometry: the Kabsch fit against scipy, the ADD / ADD-S / AUC metrics against closed forms."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from icml24.vision.vint_6d import (
    ObjectShape,
    accuracy_auc,
    add_distance,
    adds_distance,
    fit_pose,
    kabsch,
    pose_metrics,
    rotation_error_deg,
    translation_error,
)
from icml24.vision.vint_6d.geometry import rotation_about

HYP = settings(derandomize=True, max_examples=30, deadline=None)
SHAPES = [ObjectShape("cylinder", (0.025, 0.04)), ObjectShape("box", (0.035, 0.0225, 0.015)),
          ObjectShape("ellipsoid", (0.035, 0.025, 0.02))]  # fmt: skip


@HYP
@given(seed=st.integers(0, 10_000), n=st.integers(3, 40))
def test_kabsch_recovers_a_random_pose_and_matches_scipy(seed, n):
    rng = np.random.default_rng(seed)
    r = Rotation.random(random_state=rng).as_matrix()
    t = rng.normal(size=3)
    src = rng.normal(size=(n, 3))
    dst = src @ r.T + t
    r_hat, t_hat = kabsch(src, dst)
    np.testing.assert_allclose(r_hat, r, atol=1e-6)
    np.testing.assert_allclose(t_hat, t, atol=1e-6)
    # scipy's align_vectors solves the same (Wahba) problem on centred vectors
    noisy = dst + 0.05 * rng.normal(size=dst.shape)
    r_hat, _ = kabsch(src, noisy)
    ref, _ = Rotation.align_vectors(noisy - noisy.mean(0), src - src.mean(0))
    np.testing.assert_allclose(r_hat, ref.as_matrix(), atol=1e-6)


@HYP
@given(seed=st.integers(0, 10_000))
def test_kabsch_fixes_a_reflection_to_a_proper_rotation(seed):
    rng = np.random.default_rng(seed)
    src = rng.normal(size=(10, 3))
    mirrored = src * np.array([1.0, 1.0, -1.0])  # the best orthogonal fit is the reflection diag(1, 1, -1)
    r, _ = kabsch(src, mirrored)
    assert np.linalg.det(r) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-9)
    # it is the best *proper* rotation: no random rotation fits better
    cost = np.sum((src @ r.T - (src @ r.T).mean(0) - (mirrored - mirrored.mean(0))) ** 2)
    for rr in Rotation.random(200, random_state=seed).as_matrix():
        assert cost <= np.sum((src @ rr.T - (src @ rr.T).mean(0) - (mirrored - mirrored.mean(0))) ** 2) + 1e-9


def test_kabsch_weights_ignore_zero_weight_outliers():
    rng = np.random.default_rng(1)
    r = Rotation.random(random_state=1).as_matrix()
    src = rng.normal(size=(8, 3))
    dst = src @ r.T + 1.0
    dst[0] += 100.0
    w = np.ones(8)
    w[0] = 0.0
    r_hat, t_hat = kabsch(src, dst, w)
    np.testing.assert_allclose(r_hat, r, atol=1e-8)
    np.testing.assert_allclose(t_hat, np.ones(3), atol=1e-8)


def test_batched_torch_fit_pose_equals_numpy_kabsch():
    rng = np.random.default_rng(2)
    src = rng.normal(size=(5, 3))
    dst = np.stack([src @ Rotation.random(random_state=i).as_matrix().T + rng.normal(size=3)
                    + 0.01 * rng.normal(size=(5, 3)) for i in range(6)])  # fmt: skip
    r, t = fit_pose(torch.tensor(src), torch.tensor(dst))
    for i in range(6):
        rn, tn = kabsch(src, dst[i])
        np.testing.assert_allclose(r[i].numpy(), rn, atol=1e-8)
        np.testing.assert_allclose(t[i].numpy(), tn, atol=1e-8)
        assert np.linalg.det(r[i].numpy()) == pytest.approx(1.0)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_add_of_the_true_pose_is_zero_and_adds_at_most_add(shape):
    pts = shape.surface_points(200, seed=0)
    rng = np.random.default_rng(0)
    r, t = Rotation.random(random_state=0).as_matrix(), rng.normal(size=3)
    assert add_distance(pts, r, t, r, t) == 0.0
    assert adds_distance(pts, r, t, r, t) == 0.0
    for i in range(20):
        r2 = Rotation.random(random_state=i + 1).as_matrix()
        t2 = t + 0.01 * rng.normal(size=3)
        assert adds_distance(pts, r2, t2, r, t) <= add_distance(pts, r2, t2, r, t) + 1e-12


def test_add_of_a_pure_translation_is_its_length():
    pts = SHAPES[1].surface_points(50, seed=3)
    assert add_distance(pts, np.eye(3), [0.0, 0.003, 0.004], np.eye(3), np.zeros(3)) == pytest.approx(0.005)
    assert translation_error([0.0, 0.003, 0.004], [0, 0, 0]) == pytest.approx(0.005)


def test_adds_is_invariant_to_the_cylinders_spin_while_add_is_not():
    cyl = SHAPES[0]
    rad, h = cyl.size
    m = 24
    # model points with the cylinder's symmetries: rings of m points at heights symmetric about z = 0
    phi = 2 * np.pi * np.arange(m) / m
    pts = np.array([[rad * np.cos(p), rad * np.sin(p), z] for z in np.linspace(-h, h, 7) for p in phi])
    r, t = Rotation.random(random_state=5).as_matrix(), np.array([0.01, 0.0, 0.3])
    spun = r @ rotation_about([0, 0, 1], 2 * np.pi * 5 / m)
    flipped = r @ np.diag([1.0, -1.0, -1.0])
    assert adds_distance(pts, spun, t, r, t) == pytest.approx(0.0, abs=1e-12)
    assert adds_distance(pts, flipped, t, r, t) == pytest.approx(0.0, abs=1e-12)
    assert add_distance(pts, spun, t, r, t) > 0.02
    # any spin: at most half the chord between neighbouring ring points
    half_chord = rad * np.sin(np.pi / m)
    assert adds_distance(pts, r @ rotation_about([0, 0, 1], 0.123), t, r, t) <= half_chord + 1e-12
    metrics = pose_metrics(cyl, np.stack([spun, flipped]), np.stack([t, t]), np.stack([r, r]), np.stack([t, t]))
    np.testing.assert_allclose(metrics["rot_err_deg"], 0.0, atol=1e-4)


def test_rotation_error_of_a_known_angle():
    assert rotation_error_deg(rotation_about([1, 2, 3], np.radians(30)), np.eye(3)) == pytest.approx(30.0)


def test_auc_closed_form():
    # AUC(d) -> mean(max(0, 1 - d / T)) with many steps
    d = np.array([0.0, 0.25, 0.5, 2.0])
    assert accuracy_auc(d, 1.0, steps=20001) == pytest.approx(np.mean([1.0, 0.75, 0.5, 0.0]), abs=1e-3)
    assert accuracy_auc(np.zeros(5), 0.01) == pytest.approx(1.0, abs=1e-3)
    assert accuracy_auc(np.full(5, 0.02), 0.01) == 0.0


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_shape_surface_points_lie_on_the_surface_and_symmetries_map_it_to_itself(shape):
    pts = shape.surface_points(400, seed=1)
    np.testing.assert_allclose(shape.signed_distance(pts), 0.0, atol=1e-9)
    assert shape.signed_distance(np.zeros((1, 3)))[0] < 0
    far = np.array([[1.0, 0.0, 0.0]])
    assert shape.signed_distance(far)[0] > 0.9
    for s in shape.symmetries():
        np.testing.assert_allclose(shape.signed_distance(pts @ s.T), 0.0, atol=1e-9)
        assert np.linalg.det(s) == pytest.approx(1.0)
    assert shape.diameter >= np.max(np.linalg.norm(pts[:, None] - pts[None], axis=-1)) - 1e-9


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_lowest_extent_is_the_support_function(shape):
    pts = shape.surface_points(20000, seed=2)
    for i in range(5):
        r = Rotation.random(random_state=i).as_matrix()
        low = -(pts @ r.T)[:, 2].min()
        assert shape.lowest_extent(r) == pytest.approx(low, abs=1.5e-3)
        assert shape.lowest_extent(r) >= low - 1e-12


def test_canonical_rotation_is_in_the_symmetry_class_and_idempotent():
    box = SHAPES[1]
    r = Rotation.random(random_state=3).as_matrix()
    c = box.canonical_rotation(r)
    assert any(np.allclose(c, r @ s) for s in box.symmetries())
    np.testing.assert_allclose(box.canonical_rotation(c), c)
    np.testing.assert_allclose(box.canonical_rotation(r @ box.symmetries()[2]), c, atol=1e-12)


def test_shape_rejects_bad_sizes():
    with pytest.raises(ValueError, match="kind"):
        ObjectShape("sphere", (0.1,))
    with pytest.raises(ValueError, match="size"):
        ObjectShape("box", (0.1, 0.1))
    with pytest.raises(ValueError, match="size"):
        ObjectShape("cylinder", (-0.1, 0.1))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_batched_pose_metrics_match_the_brute_force_metrics(shape):
    rng = np.random.default_rng(4)
    n = 70  # more than one chunk of the batched ADD-S
    rg = Rotation.random(n, random_state=4).as_matrix()
    tg = rng.normal(size=(n, 3)) * 0.01 + np.array([0, 0, 0.25])
    r = Rotation.random(n, random_state=5).as_matrix()
    t = tg + 0.005 * rng.normal(size=(n, 3))
    m = pose_metrics(shape, r, t, rg, tg, model_points=120)
    pts = shape.surface_points(120, seed=12345)
    for i in (0, 33, 69):
        assert m["add"][i] == pytest.approx(add_distance(pts, r[i], t[i], rg[i], tg[i]), rel=1e-9)
        # exact surface: never above the 120-point nearest neighbour, within its spacing of a dense point set
        assert m["adds"][i] <= adds_distance(pts, r[i], t[i], rg[i], tg[i]) + 1e-12
        dense = shape.surface_points(20000, seed=7)
        gt_i = pts @ rg[i].T + tg[i]
        nn = cKDTree(dense @ r[i].T + t[i]).query(gt_i)[0].mean()
        assert m["adds"][i] <= nn + 1e-12 and nn - m["adds"][i] < 5e-4
        assert m["trans_err"][i] == pytest.approx(translation_error(t[i], tg[i]))
        if shape.kind != "cylinder":
            best = min(rotation_error_deg(r[i], rg[i] @ s) for s in shape.symmetries())
            assert m["rot_err_deg"][i] == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_surface_distance_is_exact(shape):
    """The exact distance to the surface agrees with a 400k-point nearest neighbour to its spacing and is never
    above it; surface points score 0 (the ellipsoid's axis-plane points, the degenerate case, included)."""
    rng = np.random.default_rng(0)
    q = np.concatenate([rng.normal(size=(200, 3)) * 0.03, [[0.01, 0, 0], [0, 0, 0], [0, 0.01, 0], [0.1, 0, 0],
                                                          [0, 0, 0.005], [0.003, 0.002, 0]]])  # fmt: skip
    dense = cKDTree(shape.surface_points(400_000, seed=3)).query(q)[0]
    d = shape.surface_distance(q)
    assert np.all(d <= dense + 1e-9) and np.max(dense - d) < 2e-4
    np.testing.assert_allclose(shape.surface_distance(shape.surface_points(500, seed=1)), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="points"):
        shape.surface_distance(np.zeros((3, 2)))


def _symmetric_poses(shape, r):
    if shape.kind == "cylinder":
        return [r @ rotation_about([0, 0, 1], a) for a in (0.123, 1.0, 2.9)] + [r @ np.diag([1.0, -1.0, -1.0])]
    return [r @ s for s in shape.symmetries()[1:]]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.kind)
def test_a_symmetry_equivalent_pose_scores_zero_adds(shape):
    """ADD-S has no sampling floor: a pose exact up to the object's symmetry scores 0 (it scored the point spacing,
    3.5 mm for 300 points on the cylinder against its 9.4 mm threshold, when measured against the same points),
    while ADD sees the symmetry and an offset of 1 mm scores about 1 mm."""
    r, t = Rotation.random(random_state=11).as_matrix(), np.array([0.005, -0.01, 0.3])
    poses = _symmetric_poses(shape, r)
    n = len(poses)
    m = pose_metrics(shape, np.stack(poses), np.tile(t, (n, 1)), np.tile(r, (n, 1, 1)), np.tile(t, (n, 1)))
    np.testing.assert_allclose(m["adds"], 0.0, atol=1e-9)
    assert np.all(m["add"] > 1e-3)
    threshold = 0.1 * shape.diameter
    assert accuracy_auc(m["adds"], threshold) > 0.99
    if shape.kind == "cylinder":  # the floor of the point-set version this replaces
        pts = shape.surface_points(300, seed=12345)
        assert adds_distance(pts, poses[0], t, r, t) > 0.2 * threshold
    shifted = pose_metrics(shape, r[None], (t + [0.0, 0.0, 0.001])[None], r[None], t[None])
    assert 0.0002 < shifted["adds"][0] <= 0.001 + 1e-12
