"""Fuzz cases for VinT-6D's public API (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.vision.vint_6d import (
    ObjectShape,
    PointNetEncoder,
    TrainConfig,
    VintMiniConfig,
    VintMiniDataset,
    VintMiniScene,
    VintNet,
    accuracy_auc,
    add_distance,
    adds_distance,
    fit_pose,
    generate_samples,
    kabsch,
    pose_metrics,
    predict_pose,
    rotation_error_deg,
    train_vintnet,
    translation_error,
    vote_keypoints,
)

RNG = np.random.default_rng(0)
PTS = RNG.normal(size=(6, 3))
R = np.eye(3)
T = np.array([0.0, 0.0, 0.3])
CYL = ObjectShape("cylinder", (0.025, 0.04))
KP = CYL.keypoints()
SMALL = VintMiniConfig(steps=40)
SAMPLES = generate_samples(SMALL, 3, seed=0)
V = torch.as_tensor(SAMPLES.vision_points)
TP = torch.as_tensor(SAMPLES.tactile_points)
TM = torch.as_tensor(SAMPLES.tactile_mask)
H = torch.as_tensor(SAMPLES.hand_points)
NET = VintNet(num_keypoints=len(KP))


def net_forward(vision_points, tactile_points, tactile_mask, hand_points):
    """VintNet(num_keypoints=4)(...)."""
    return NET(vision_points, tactile_points, tactile_mask, hand_points)


def encoder_forward(x, mask):
    """PointNetEncoder(in_dim=3)(x, mask)."""
    return PointNetEncoder(in_dim=3)(x, mask)


def train_small(model_keypoints, symmetries=None):
    """train_vintnet for one epoch on three samples."""
    return train_vintnet(VintNet(num_keypoints=4), SAMPLES, model_keypoints, symmetries=symmetries,
                         config=TrainConfig(epochs=1, batch_size=2))  # fmt: skip


SCENE = VintMiniScene(SMALL)
SCENE.grasp(np.eye(3), np.array([0.0, 0.0, 0.045]), np.full(6, 1.0))


FUZZ_CASES = [
    dict(fn=kabsch, args=(PTS, PTS + 1.0), kwargs={},
         invalid={"source": [np.zeros((3, 2)), "x", None, np.zeros((0, 3))], "target": [np.zeros((5, 3)), [[1, 2]]],
                  "weights": [np.ones(3), -np.ones(6), np.zeros(6), "w"]}),
    dict(fn=add_distance, args=(PTS, R, T, R, T), kwargs={},
         invalid={"model_points": [np.zeros(3), "p"], "rotation": [np.diag([1.0, 1.0, -1.0]), np.ones((3, 3)), None],
                  "translation": [np.zeros(2), "t"], "rotation_gt": [2 * np.eye(3)], "translation_gt": [None]}),
    dict(fn=adds_distance, args=(PTS, R, T, R, T), kwargs={},
         invalid={"model_points": [np.zeros((2, 2))], "rotation": [np.zeros((2, 2))], "translation_gt": [[1.0]]}),
    dict(fn=accuracy_auc, args=(np.array([0.001, 0.02]), 0.01), kwargs={},
         invalid={"distances": [np.array([-1.0]), np.array([]), "d", None], "max_threshold": [0.0, -1.0, "1", True],
                  "steps": [1, 2.5, True]}),
    dict(fn=rotation_error_deg, args=(R, R), kwargs={}, invalid={"rotation": [np.zeros((3, 3)), "r"],
                                                                 "rotation_gt": [np.ones((2, 2))]}),
    dict(fn=translation_error, args=(T, T), kwargs={}, invalid={"translation": [np.zeros(4), "t"],
                                                               "translation_gt": [None]}),
    dict(fn=pose_metrics, args=(CYL, R[None], T[None], R[None], T[None]), kwargs={},
         invalid={"shape": ["cylinder"], "rotations": [np.zeros((1, 2, 2))], "translations": [np.zeros((2, 3))],
                  "rotations_gt": [np.zeros((2, 3, 3))]}),
    dict(fn=ObjectShape, args=("box", (0.03, 0.02, 0.01)), kwargs={},
         invalid={"kind": ["sphere", None], "size": [(0.03, 0.02), (0.03, -0.02, 0.01), "big", (0.03, 0.02, float("nan"))]}),
    dict(fn=VintMiniConfig, args=(), kwargs={"fov_deg": 26.0, "depth_noise_std": 0.0015, "dropout": 0.1},
         invalid={"fov_deg": [0.5, 200.0, "26"], "depth_noise_std": [-0.1], "dropout": [1.0, -0.1],
                  "shape": ["cylinder"], "image_size": [0, 2.5], "steps": [0, True], "close_target": [(1.0, 0.0), 3],
                  "kp_range": [(0.0, 1.0)], "camera_position": [(0.0, 0.0, 0.035)], "taxel_radius": [0.0],
                  "vision_points": [0]}),
    dict(fn=generate_samples, args=(SMALL, 1), kwargs={"seed": 0},
         invalid={"config": [{"steps": 10}, None], "n_grasps": [0, 1.5, True], "seed": [1.5, "0"],
                  "occlusion_levels": [(), (1.5,), "0.2"]}),
    dict(fn=VintMiniScene, args=(SMALL,), kwargs={}, invalid={"config": ["cfg", 3]}),
    dict(fn=SCENE.render, args=(0.3, 0.5), kwargs={}, invalid={"target_occlusion": [-0.1, 1.5, "x"],
                                                              "direction": ["up"]},
         covers=("VintMiniSamples",)),
    dict(fn=VintMiniDataset, args=(SAMPLES,), kwargs={}, invalid={"samples": [None, {"vision_points": 1}]}),
    dict(fn=VintNet, args=(), kwargs={"num_keypoints": 4, "modalities": "fusion", "scale": 0.05},
         invalid={"num_keypoints": [0, 2.5, True], "modalities": ["rgb", None], "scale": [0.0, -1.0, "s"],
                  "center": [(0.0, 0.0), "c"], "head_dim": [0]}),
    dict(fn=net_forward, args=(V, TP, TM, H), kwargs={},
         invalid={"vision_points": [V[..., :2], V[0], np.zeros((3, 64, 3))], "tactile_points": [TP[:2]],
                  "tactile_mask": [TM[:, :3], "m"], "hand_points": [H[..., :2], None]}),
    dict(fn=PointNetEncoder, args=(), kwargs={"in_dim": 3}, invalid={"in_dim": [0, 1.5], "local_dim": [0],
                                                                     "global_dim": [-1]}),
    dict(fn=encoder_forward, args=(torch.zeros(2, 5, 3), torch.ones(2, 5, dtype=torch.bool)), kwargs={},
         allowed={"x": "a PointNet layer is plain arithmetic; VintNet.forward checks its inputs before it"}),
    dict(fn=vote_keypoints, args=(torch.zeros(2, 5, 3), torch.zeros(2, 5, 4, 3), torch.ones(2, 5, dtype=torch.bool)),
         kwargs={"bandwidth": 0.01},
         invalid={"voters": [torch.zeros(2, 5), "v"], "offsets": [torch.zeros(2, 4, 4, 3)],
                  "mask": [torch.ones(2, 4)], "bandwidth": [0.0, -1.0, "b"], "iterations": [-1, 1.5]}),
    dict(fn=fit_pose, args=(torch.tensor(KP), torch.tensor(KP)[None].repeat(2, 1, 1)), kwargs={},
         invalid={"model_keypoints": [KP, torch.zeros(4, 2)], "keypoints": [torch.zeros(2, 3, 3), "k"]}),
    dict(fn=TrainConfig, args=(), kwargs={"epochs": 2, "lr": 0.002},
         invalid={"epochs": [0, 1.5], "batch_size": [0], "lr": [0.0, -1.0, "x"], "weight_decay": [-0.1]}),
    dict(fn=train_small, args=(KP,), kwargs={"symmetries": np.stack(CYL.symmetries())},
         invalid={"model_keypoints": [KP[:2], "kp", None], "symmetries": [np.zeros((2, 3)), "s"]},
         covers=("train_vintnet",)),
    dict(fn=predict_pose, args=(NET, SAMPLES, KP), kwargs={"bandwidth": 0.01},
         invalid={"model": [None, "net"], "samples": [None], "model_keypoints": [KP[:3], "kp"],
                  "bandwidth": [0.0, "b"], "batch_size": [0, 1.5]}),
]  # fmt: skip
