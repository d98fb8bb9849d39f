"""VinT-6D (Wan et al., ICML 2024, https://proceedings.mlr.press/v235/wan24d.html): A Large-Scale Object-in-hand
Dataset from Vision, Touch and Proprioception, with the VinT-Net benchmark.

* :class:`VintMiniConfig`, :class:`VintMiniScene`, :func:`generate_samples`, :class:`VintMiniSamples`,
  :class:`VintMiniDataset`: the VinT-mini generator on MuJoCo (ray-cast depth with noise and holes, an occluder
  swept to a target occlusion, taxel touch from the contact list, joint angles and forward kinematics).
* :class:`VintNet`, :class:`PointNetEncoder`, :func:`vote_keypoints`, :func:`fit_pose`, :class:`TrainConfig`,
  :func:`train_vintnet`, :func:`predict_pose`: the mini VinT-Net (per-point fusion of vision and touch, keypoint
  offsets, voting, Kabsch) and its vision-only / touch-only variants.
* :class:`ObjectShape`, :func:`kabsch`, :func:`add_distance`, :func:`adds_distance`, :func:`accuracy_auc`,
  :func:`rotation_error_deg`, :func:`translation_error`, :func:`pose_metrics`: objects, the pose fit and the
  ADD / ADD-S / ADD(S) AUC metrics.
"""

from icml24.vision.vint_6d.geometry import (
    SHAPE_KINDS,
    ObjectShape,
    accuracy_auc,
    add_distance,
    adds_distance,
    kabsch,
    pose_metrics,
    rotation_error_deg,
    translation_error,
)
from icml24.vision.vint_6d.model import (
    MODALITIES,
    PointNetEncoder,
    TrainConfig,
    VintNet,
    fit_pose,
    predict_pose,
    train_vintnet,
    vote_keypoints,
)
from icml24.vision.vint_6d.sim import (
    VintMiniConfig,
    VintMiniDataset,
    VintMiniSamples,
    VintMiniScene,
    generate_samples,
)

SLUG = "vint-6d"

__all__ = [
    "MODALITIES",
    "SHAPE_KINDS",
    "SLUG",
    "ObjectShape",
    "PointNetEncoder",
    "TrainConfig",
    "VintMiniConfig",
    "VintMiniDataset",
    "VintMiniSamples",
    "VintMiniScene",
    "VintNet",
    "accuracy_auc",
    "add_distance",
    "adds_distance",
    "fit_pose",
    "generate_samples",
    "kabsch",
    "pose_metrics",
    "predict_pose",
    "rotation_error_deg",
    "train_vintnet",
    "translation_error",
    "vote_keypoints",
]
