"""VinT-mini generator and mini VinT-Net: determinism, the filters, touch on the surface, occlusion, the branch
switch-off, and that training learns the pose on a small set."""

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

pytest.importorskip("mujoco")

from icml24.vision.vint_6d import (  # noqa: E402
    ObjectShape,
    TrainConfig,
    VintMiniConfig,
    VintMiniDataset,
    VintMiniScene,
    VintNet,
    generate_samples,
    pose_metrics,
    predict_pose,
    train_vintnet,
    vote_keypoints,
)

CFG = VintMiniConfig()


@pytest.fixture(scope="module")
def samples():
    return generate_samples(CFG, 12, seed=3, render_all_levels=True)


def test_generator_is_deterministic_per_seed(samples):
    again = generate_samples(CFG, 12, seed=3, render_all_levels=True)
    for name in ("vision_points", "tactile_points", "hand_points", "rotation", "translation", "depth", "occlusion"):
        np.testing.assert_array_equal(getattr(samples, name), getattr(again, name))
    other = generate_samples(CFG, 12, seed=4, render_all_levels=True)
    assert not np.allclose(other.translation, samples.translation)


def test_sample_arrays_are_consistent(samples):
    n = len(samples)
    assert n == 36  # 12 grasps x 3 occlusion levels
    assert samples.vision_points.shape == (n, CFG.vision_points, 3)
    assert samples.tactile_points.shape == (n, CFG.max_tactile, 3)
    assert samples.hand_points.shape == (n, 9, 3)
    assert np.all(samples.n_contacts >= CFG.min_contacts)
    assert np.all(samples.tactile_mask.sum(1) >= 1)
    np.testing.assert_array_equal(samples.tactile_points[~samples.tactile_mask], 0.0)
    # the object mask's pixels all have a finite, positive depth (dropout holes are never in the mask)
    assert np.all(samples.depth[samples.object_mask] > 0)
    assert np.all(np.isfinite(samples.depth))
    np.testing.assert_allclose(np.einsum("nij,nkj->nik", samples.rotation, samples.rotation),
                               np.broadcast_to(np.eye(3), (n, 3, 3)), atol=1e-5)  # fmt: skip
    item = VintMiniDataset(samples)[0]
    assert item["vision_points"].shape == (CFG.vision_points, 3)
    assert len(VintMiniDataset(samples)) == n
    sub = samples.subset(np.flatnonzero(samples.grasp_id == 2))
    assert len(sub) == 3 and sorted(np.round(sub.occlusion_target.astype(float), 2).tolist()) == [0.2, 0.35, 0.5]
    # the three renders of one grasp share its touch, proprioception and pose; their measured occlusion grows
    np.testing.assert_array_equal(sub.tactile_points[0], sub.tactile_points[2])
    assert sub.occlusion[0] <= sub.occlusion[1] <= sub.occlusion[2]


def test_tactile_and_depth_points_lie_near_the_object_surface(samples):
    shape = CFG.shape
    for i in range(0, len(samples), 3):
        r, t = samples.rotation[i].astype(float), samples.translation[i].astype(float)
        local = (samples.tactile_points[i][samples.tactile_mask[i]] - t) @ r  # object frame
        # a firing taxel is on the finger surface within taxel_radius of a contact: |sdf| <= radius + 1 mm
        assert np.all(np.abs(shape.signed_distance(local)) < CFG.taxel_radius + 0.001)
        depth_local = (samples.vision_points[i] - t) @ r
        assert np.all(np.abs(shape.signed_distance(depth_local)) < 6 * CFG.depth_noise_std + 0.001)


def test_raw_contacts_are_within_two_millimetres_of_the_surface():
    scene = VintMiniScene(CFG)
    rng = np.random.default_rng(0)
    checked = 0
    for i in range(15):
        rot = Rotation.random(random_state=i).as_matrix()
        pos = np.array([0, 0, CFG.shape.lowest_extent(rot) + 0.002])
        scene.grasp(rot, pos, rng.uniform(0.5, 1.4, 6))
        _, contacts = scene.touch()
        if len(contacts):
            local = (contacts - pos) @ rot
            assert np.all(np.abs(CFG.shape.signed_distance(local)) < 0.002)
            checked += 1
    assert checked >= 10


def test_palm_penetration_filter_and_contact_filter():
    scene = VintMiniScene(CFG)
    rot = np.eye(3)  # cylinder standing: its lowest point is half_height below the centre
    h = CFG.shape.size[1]
    scene.grasp(rot, np.array([0, 0, h - 0.005]), np.full(6, 1.0))
    assert scene.palm_penetration() == pytest.approx(0.005, abs=1e-4)
    scene.grasp(rot, np.array([0, 0, h + 0.003]), np.full(6, 1.0))
    assert scene.palm_penetration() == 0.0
    # fingers commanded open never touch the object: the contact filter would drop the sample
    scene.grasp(rot, np.array([0, 0, h + 0.003]), np.full(6, -0.5))
    assert len(scene.contacts()[0]) == 0
    # a generator whose every grasp penetrates the palm cannot fill its quota: it raises and counts
    deep = VintMiniConfig(gap=-0.01, position_jitter=0.0, max_penetration=0.002)
    with pytest.raises(RuntimeError, match="penetration"):
        generate_samples(deep, 1, seed=0)
    s = generate_samples(VintMiniConfig(gap=-0.002, position_jitter=0.002), 5, seed=0)
    assert s.stats["penetration"] > 0 and s.stats["tried"] == 5 + sum(v for k, v in s.stats.items() if k != "tried")


def test_occlusion_is_a_fraction_monotone_in_the_occluder_and_hits_its_target():
    scene = VintMiniScene(CFG)
    rot = Rotation.random(random_state=7).as_matrix()
    scene.grasp(rot, np.array([0, 0, CFG.shape.lowest_extent(rot) + 0.002]), np.full(6, 1.0))
    scene.place_occluder(0.4, None)
    base = scene.occlusion()
    values = []
    for edge in np.linspace(-0.4, 0.4, 17):  # the plate covers more of the image as its edge moves on
        scene.place_occluder(0.4, float(edge))
        values.append(scene.occlusion())
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(b >= a - 1e-12 for a, b in zip(values, values[1:]))
    assert values[0] == pytest.approx(base) and values[-1] == 1.0
    for target in (0.3, 0.5, 0.7):
        _, _, occ = scene.render(target, 1.0)
        assert occ == pytest.approx(max(target, base), abs=0.02)


def test_camera_transforms_round_trip():
    scene = VintMiniScene(CFG)
    p = np.random.default_rng(0).normal(size=(10, 3))
    np.testing.assert_allclose(scene.to_world(scene.to_camera(p)), p, atol=1e-12)
    # the camera target lies on the optical axis
    c = scene.to_camera(np.asarray(CFG.camera_target)[None])[0]
    assert abs(c[0]) < 1e-12 and abs(c[1]) < 1e-12 and c[2] > 0


def _batch(samples, n=8):
    return (torch.as_tensor(samples.vision_points[:n]), torch.as_tensor(samples.tactile_points[:n]),
            torch.as_tensor(samples.tactile_mask[:n]), torch.as_tensor(samples.hand_points[:n]))  # fmt: skip


def test_vision_only_output_is_independent_of_touch_and_touch_only_of_vision(samples):
    torch.manual_seed(0)
    kp = CFG.shape.keypoints()
    v, t, m, h = _batch(samples)
    vision = VintNet(num_keypoints=len(kp), modalities="vision")
    out = vision(v, t, m, h)
    np.testing.assert_array_equal(out.detach(), vision(v, torch.randn_like(t), ~m, torch.randn_like(h)).detach())
    touch = VintNet(num_keypoints=len(kp), modalities="touch")
    np.testing.assert_array_equal(touch(v, t, m, h).detach(), touch(torch.randn_like(v), t, m, h).detach())
    fusion = VintNet(num_keypoints=len(kp), modalities="fusion")
    assert not torch.allclose(fusion(v, t, m, h), fusion(v, torch.randn_like(t), m, h))
    # padded (masked-out) taxels do not change the fused output
    t2 = t.clone()
    t2[~m] = 5.0
    n_vision = v.shape[1]
    np.testing.assert_allclose(fusion(v, t, m, h)[:, :n_vision].detach(), fusion(v, t2, m, h)[:, :n_vision].detach(),
                               atol=1e-6)  # fmt: skip


def test_voting_of_exact_offsets_returns_the_keypoints():
    rng = np.random.default_rng(0)
    kps = torch.tensor(rng.normal(size=(2, 4, 3)), dtype=torch.float32)
    voters = torch.tensor(rng.normal(size=(2, 30, 3)), dtype=torch.float32)
    offsets = kps[:, None] - voters[:, :, None]
    offsets[:, :5] += 1.0  # five outliers far away: the mean-shift steps ignore them
    mask = torch.ones(2, 30, dtype=torch.bool)
    est = vote_keypoints(voters, offsets, mask, bandwidth=0.05, iterations=5)
    torch.testing.assert_close(est, kps, atol=1e-4, rtol=0)


def test_training_learns_the_pose_beyond_a_constant_guess():
    cfg = VintMiniConfig(steps=120)
    train = generate_samples(cfg, 400, seed=0)
    test = generate_samples(cfg, 60, seed=1)
    shape = cfg.shape
    kp = shape.keypoints()
    torch.manual_seed(0)
    net = VintNet(num_keypoints=len(kp), modalities="fusion", center=tuple(train.translation.mean(0).tolist()))
    losses = train_vintnet(net, train, kp, symmetries=np.stack(shape.symmetries()),
                           config=TrainConfig(epochs=20, batch_size=32, lr=5e-3), generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert losses[-1] < 0.5 * losses[0]
    r, t = predict_pose(net, test, kp)
    m = pose_metrics(shape, r, t, test.rotation.astype(float), test.translation.astype(float))
    const_t = np.broadcast_to(train.translation.mean(0), test.translation.shape).astype(float)
    assert np.mean(m["trans_err"]) < 0.6 * np.mean(np.linalg.norm(const_t - test.translation, axis=1))
    # a random axis is on average 1 rad (57 degrees) from the true one, modulo the flip
    assert np.all(np.isfinite(m["adds"])) and float(np.mean(m["rot_err_deg"])) < 40.0


def test_config_round_trip_and_bad_values():
    c = VintMiniConfig(shape=ObjectShape("box", (0.03, 0.02, 0.01)), image_size=24)
    assert VintMiniConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="dropout"):
        VintMiniConfig(dropout=1.0)
    with pytest.raises(ValueError, match="image_size"):
        VintMiniConfig(image_size=0)
    with pytest.raises(TypeError, match="shape"):
        VintMiniConfig(shape="cylinder")
