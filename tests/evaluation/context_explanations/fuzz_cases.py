"""Fuzz cases for the context-explanations entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.evaluation.context_explanations import (
    GridViT,
    RelationTaskConfig,
    SmallCNN,
    TokenGrid,
    TrainConfig,
    attribution_probe,
    build_model,
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

torch.manual_seed(0)
SCENES = make_scenes(6, seed=0, twins_fit=True)
IMAGES = SCENES.images
CNN = SmallCNN(width=2)
MAP = np.abs(np.random.default_rng(0).normal(size=(6, 32, 32)))
SEGMENTS = np.stack([SCENES.mask_a, SCENES.mask_b], 1)
BAD_IMAGES = [IMAGES[0], IMAGES[:0], np.full_like(IMAGES, np.nan), "images", None]
BAD_TARGET = [-1, 1.5, True, np.zeros(3, dtype=int), "1", 2, np.full(6, 5)]  # 2, 5: beyond the 2 classes
BAD_MAP = [MAP[0], -MAP, np.full_like(MAP, np.nan), "map"]
BAD_MASK = [SCENES.mask_a[:2], SCENES.mask_a.astype(int), "mask"]
BAD_POS_INT = [0, -1, 1.5, True, "2", None]
FEATS = np.random.default_rng(1).normal(size=(40, 3))
LABELS = np.arange(40) % 2

EXEMPT = {
    "Scenes": "a data container built by make_scenes (fuzzed there), not called by users",
    "Counterfactual": "a result container returned by relational_counterfactual",
    "ProbeResult": "a result container returned by attribution_probe",
    "SegmentShapley": "a result container returned by segment_shapley",
}

FUZZ_CASES = [
    dict(fn=RelationTaskConfig, args=(), kwargs={},
         invalid={"image_size": [4, 12, 32.0, True], "size_range": [(6, 4), (2, 3), (4.0, 6), [4, 6], 5],
                  "gap_range": [(0, 2), (3, 1), "1"], "max_vertical_offset": [-1, 1.5],
                  "noise_std": [-0.1, float("nan"), "0.1"], "intensity_range": [(0.0, 1.0), (1.0, 0.5), (float("nan"), 1.0)],
                  "task": ["shape", None]}),  # fmt: skip
    dict(fn=make_scenes, args=(5,), kwargs={"seed": 1},
         invalid={"n": [0, -3, 2.5, True, "5"], "config": ["relation", 3], "seed": [-1, 1.5, "0"],
                  "twins_fit": [1, "yes"]}),  # fmt: skip
    dict(fn=mirrored_twin, args=(SCENES,), kwargs={"about": "a"}, invalid={"about": ["c", None, 0], "scenes": [IMAGES, None]},
         covers=("Scenes",)),
    dict(fn=twin_fits, args=(SCENES,), kwargs={"about": "b"}, invalid={"about": ["x", 1], "scenes": [IMAGES, "s"]}),
    dict(fn=mirror_scenes, args=(SCENES,), kwargs={}, invalid={"scenes": [IMAGES, None]}),
    dict(fn=move_b, args=(SCENES, SCENES.xb), kwargs={},
         invalid={"xb": [SCENES.xb[:2], SCENES.xb + 0.5, SCENES.xb * 0 - 1, SCENES.xb * 0 + 40], "scenes": [IMAGES]}),
    dict(fn=SmallCNN, args=(), kwargs={"width": 2},
         invalid={"width": BAD_POS_INT, "in_channels": BAD_POS_INT, "num_classes": [1, 0, 2.0]}),
    dict(fn=GridViT, args=(), kwargs={"dim": 8, "depth": 1, "num_heads": 2, "mlp_dim": 8},
         invalid={"patch_size": [5, 0, 2.0], "dim": [0, 7, True], "depth": [0, -1], "dropout": [-0.1, 1.0, float("nan"), "0"],
                  "num_heads": [0, 3]}),  # fmt: skip
    dict(fn=TokenGrid, args=(), kwargs={"side": 8}, invalid={"side": BAD_POS_INT}),
    dict(fn=build_model, args=("cnn",), kwargs={"seed": 0, "width": 2}, invalid={"name": ["mlp", None, 1], "seed": [-1, 1.5, "0"]}),
    dict(fn=TrainConfig, args=(), kwargs={},
         invalid={"epochs": BAD_POS_INT, "batch_size": BAD_POS_INT, "lr": [0.0, -1e-3, float("nan"), float("inf"), "1"],
                  "weight_decay": [-1.0, float("nan")], "warmup": [-0.1, 1.5, float("nan")]}),  # fmt: skip
    dict(fn=train_classifier, args=(SmallCNN(width=2), IMAGES, SCENES.labels, TrainConfig(epochs=1)), kwargs={},
         invalid={"model": ["cnn", None], "images": BAD_IMAGES, "labels": [SCENES.labels[:2], SCENES.labels + 0.5, "y", SCENES.labels + 2, SCENES.labels - 1],
                  "config": [{"epochs": 1}, 3]}),  # fmt: skip
    dict(fn=predict_logits, args=(CNN, IMAGES), kwargs={}, invalid={"model": [None, "m"], "images": BAD_IMAGES,
                                                                   "batch_size": BAD_POS_INT}),
    dict(fn=grad_cam, args=(CNN, IMAGES, 1), kwargs={}, invalid={"model": [None], "images": BAD_IMAGES, "target": BAD_TARGET,
                                                                "layer": ["conv", 3]}),
    dict(fn=integrated_gradients, args=(CNN, IMAGES, 1), kwargs={"n_steps": 4},
         invalid={"images": BAD_IMAGES, "target": BAD_TARGET, "n_steps": BAD_POS_INT,
                  "baseline": [float("nan"), IMAGES[:2], "black"]}),  # fmt: skip
    dict(fn=occlusion, args=(CNN, IMAGES, 0), kwargs={"window": 8, "stride": 8},
         invalid={"images": BAD_IMAGES, "target": BAD_TARGET, "window": BAD_POS_INT + [64], "stride": BAD_POS_INT,
                  "baseline": [float("nan"), "0", True]}),  # fmt: skip
    dict(fn=to_heatmap, args=(np.abs(IMAGES),), kwargs={"mode": "positive"},
         invalid={"attributions": [IMAGES[0, 0], np.full_like(IMAGES, np.inf)], "mode": ["max", None]}),
    dict(fn=segment_shapley, args=(CNN, IMAGES, SCENES.background, SEGMENTS, 1), kwargs={},
         invalid={"images": BAD_IMAGES, "background": [SCENES.background[:2], np.full_like(IMAGES, np.nan)],
                  "segments": [SEGMENTS.astype(int), SEGMENTS[:, :, :4], np.concatenate([SEGMENTS, SEGMENTS], 1)],
                  "target": BAD_TARGET, "batch_size": BAD_POS_INT}),  # fmt: skip
    dict(fn=region_summaries, args=(MAP, SCENES.mask_a, SCENES.mask_b), kwargs={"dilate": 1},
         invalid={"heatmaps": BAD_MAP, "mask_a": BAD_MASK, "mask_b": BAD_MASK, "dilate": [-1, 1.5, "1"]}),
    dict(fn=shapley_summaries, args=(np.ones((4, 2)),), kwargs={},
         invalid={"values": [np.ones((4, 3)), np.full((4, 2), np.nan), np.ones(4)]}),
    dict(fn=object_mass_fraction, args=(MAP, SCENES.mask_a), kwargs={"dilate": 2},
         invalid={"heatmaps": BAD_MAP, "mask": BAD_MASK, "dilate": [-2, 0.5]}),
    dict(fn=pointing_game, args=(MAP, SCENES.mask_b), kwargs={"tolerance": 2},
         invalid={"heatmaps": BAD_MAP, "mask": BAD_MASK, "tolerance": [-1, 2.5, "2"]}),
    dict(fn=attribution_probe, args=(FEATS, LABELS), kwargs={"folds": 5, "seed": 0},
         invalid={"features": [FEATS[:, 0], np.full_like(FEATS, np.nan)], "labels": [LABELS[:5], LABELS + 0.5, LABELS * 0],
                  "folds": [1, 0, 2.5, 50], "seed": [-1, 0.5]}),  # fmt: skip
    dict(fn=relational_counterfactual, args=(CNN, SCENES), kwargs={},
         invalid={"model": [None, "cnn"], "scenes": [IMAGES, None], "batch_size": BAD_POS_INT}),
]
