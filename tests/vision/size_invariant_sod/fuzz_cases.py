"""Fuzz cases for the size-invariant-sod entry points (see tests/test_fuzz_api.py)."""

import numpy as np
import torch

from icml24.vision.size_invariant_sod import (
    SizeInvariantLoss,
    TinyUNet,
    auc,
    decode_frames_bitmask,
    encode_frames_bitmask,
    evaluate,
    f_measure,
    frame_mae_terms,
    mae,
    make_multi_object_saliency,
    object_frames,
    object_recall,
    si_auc,
    si_f_measure,
    si_mae,
)

DATA = make_multi_object_saliency(3, 16, radius_range=(1.0, 5.0), seed=0)
GT = DATA.masks.astype(np.float64)
PRED = np.clip(0.7 * GT + 0.2 * np.random.default_rng(0).random(GT.shape), 0.0, 1.0)
FRAMES = object_frames(GT)
NAN_PRED = PRED.copy()
NAN_PRED[0, 0, 0] = np.nan
BAD_PRED = [NAN_PRED, PRED * 2.0, PRED - 1.0, PRED[0, 0], PRED[:1], np.zeros((3, 0, 16)), "pred", None,
            PRED.astype(bool), np.zeros((1, 1, 3, 16, 16))]  # fmt: skip
BAD_GT = [GT * 3.0, GT - 1.0, GT[:1], "gt", None, np.full(GT.shape, np.nan)]
BAD_INT = [-1, 2.5, "3", None, True]
BAD_THRESHOLDS = [1, 0, -5, 2.5, "100", None, True]
BAD_SMOOTHING = [-1.0, float("nan"), float("inf"), "1", None]
OTHER_FRAMES = object_frames(GT[:1])
BAD_FRAMES = [OTHER_FRAMES, "frames", 3]


def loss_forward(logits, target, base="bce", size_invariant=True, min_area=0):
    """SizeInvariantLoss(base=..., size_invariant=..., min_area=...)(logits, target)."""
    return SizeInvariantLoss(base=base, size_invariant=size_invariant, min_area=min_area)(logits, target)


def unet_forward(x, in_channels=3, width=4, depth=2, head_bias=-2.0):
    """TinyUNet(...)(x): the module checks its hyperparameters and its input."""
    return TinyUNet(in_channels=in_channels, width=width, depth=depth, head_bias=head_bias)(x)


LOGITS = torch.zeros(3, 1, 16, 16)
TARGET = torch.from_numpy(DATA.masks.astype(np.float32))
NAN_LOGITS = LOGITS.clone()
NAN_LOGITS[0, 0, 0, 0] = float("nan")

FUZZ_CASES = [
    dict(fn=mae, args=(PRED, GT), invalid={"pred": BAD_PRED, "gt": BAD_GT}),
    dict(fn=si_mae, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "frames": BAD_FRAMES, "min_area": BAD_INT,
                  "normalization": ["bits", None, 1]}),
    dict(fn=frame_mae_terms, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "frames": BAD_FRAMES, "min_area": BAD_INT}),
    dict(fn=f_measure, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "aggregate": ["median", None], "beta2": [0.0, -1.0, float("nan"), "b", None],
                  "num_thresholds": BAD_THRESHOLDS, "smoothing": BAD_SMOOTHING, "normalize": ["yes", None, 2]}),
    dict(fn=si_f_measure, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "frames": BAD_FRAMES, "aggregate": ["median", "curve", None],
                  "min_area": BAD_INT, "beta2": [0.0, -1.0, float("nan"), "b"], "num_thresholds": BAD_THRESHOLDS,
                  "smoothing": BAD_SMOOTHING, "normalize": ["yes", None, 2], "convention": ["bits", None]}),
    dict(fn=auc, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "num_thresholds": BAD_THRESHOLDS, "smoothing": BAD_SMOOTHING}),
    dict(fn=si_auc, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "frames": BAD_FRAMES, "min_area": BAD_INT,
                  "num_thresholds": BAD_THRESHOLDS, "smoothing": BAD_SMOOTHING, "convention": ["bits", None]}),
    dict(fn=evaluate, args=(PRED, GT),
         invalid={"pred": BAD_PRED, "gt": BAD_GT, "min_area": BAD_INT, "convention": ["bits", None]}),
    dict(fn=object_frames, args=(GT,),
         invalid={"gt": [GT[0, 0], np.full(GT.shape, np.nan), "gt", None, np.zeros((2, 2, 2, 2))],
                  "min_area": BAD_INT, "connectivity": [6, 0, "4", None], "keep_largest": ["no", None, 2]}),
    dict(fn=encode_frames_bitmask, args=(FRAMES,), invalid={"frames": ["frames", None, GT]}),
    dict(fn=decode_frames_bitmask, args=(encode_frames_bitmask(FRAMES),),
         invalid={"weight": [np.full((4, 4), -1), np.full((4, 4), np.nan), np.full((4, 4), 0.5), "w", None, np.zeros(4)]}),
    dict(fn=make_multi_object_saliency, args=(4, 16), kwargs={"radius_range": (1.0, 5.0)},
         invalid={"n": BAD_INT + [0], "size": [4, 16.5, "16", None], "max_objects": [0, 1.5, None],
                  "radius_range": [(5.0, 1.0), (0.1, 2.0), (1.0, 100.0), (float("nan"), 2.0), "r", None, (1.0,)],
                  "contrast": [-0.1, float("nan"), "c", None], "noise": [-0.1, float("nan"), "n", None],
                  "seed": [-1, 1.5, "s", None]}),
    dict(fn=object_recall, args=(PRED, DATA),
         invalid={"pred": [PRED[:1], NAN_PRED, "p", None, PRED[0]], "data": ["data", None, GT],
                  "threshold": [float("nan"), -0.5, 1.5, "t", None]}),
    dict(fn=loss_forward, args=(LOGITS, TARGET), covers=(SizeInvariantLoss,),
         invalid={"logits": [NAN_LOGITS, LOGITS[:1], "x", None, []], "target": [TARGET * 2, TARGET[:1], "t", None],
                  "base": ["focal", None], "size_invariant": ["yes", None], "min_area": BAD_INT}),
    dict(fn=unet_forward, args=(torch.zeros(2, 3, 8, 8),), covers=(TinyUNet,),
         invalid={"x": [torch.zeros(2, 3, 7, 7), torch.zeros(2, 1, 8, 8), torch.zeros(3, 8, 8), "x", None],
                  "in_channels": [0, 1.5, None], "width": [0, -2, 1.5, None], "depth": [0, 2.5, None],
                  "head_bias": [float("nan"), "b", None]},
         allowed={"x": "a forward pass does not scan its input: NaN pixels give NaN logits, which "
                       "SizeInvariantLoss and the metrics reject with a clear error"}),
]

EXEMPT = {
    "Frames": "a frozen result container built by object_frames (its fields are checked where it is consumed)",
    "SaliencyData": "a frozen result container built by make_multi_object_saliency",
}
