"""Size-invariant metrics and losses for multi-object salient object detection.

Li, Xu, Bao, Yang, Cong, Cao, Huang. *Size-invariance Matters: Rethinking Metrics and Losses for Imbalanced
Multi-object Salient Object Detection*. ICML 2024. https://arxiv.org/abs/2405.09782

Pixel-pooled SOD metrics weight each region by its size, so small salient objects barely count. The
size-invariant (SI) versions evaluate each object's bounding-box frame separately and average them
(``si_mae``, ``si_f_measure``, ``si_auc``); ``SizeInvariantLoss`` optimises the same idea.

Example:
    >>> import numpy as np
    >>> from icml24.vision.size_invariant_sod import mae, si_mae
    >>> gt = np.zeros((32, 32)); gt[2:20, 2:20] = 1; gt[28, 28] = 1   # a large and a 1-pixel object
    >>> pred = gt.copy(); pred[28, 28] = 0                            # miss the small one
    >>> round(float(mae(pred, gt)), 4), round(float(si_mae(pred, gt)), 4)
    (0.001, 0.2409)
"""

from .data import SaliencyData, make_multi_object_saliency, object_recall
from .frames import Frames, decode_frames_bitmask, encode_frames_bitmask, object_frames
from .losses import SizeInvariantLoss
from .metrics import auc, evaluate, f_measure, frame_mae_terms, mae, si_auc, si_f_measure, si_mae
from .model import TinyUNet

SLUG = "size-invariant-sod"

__all__ = [
    "SLUG",
    "Frames",
    "SaliencyData",
    "SizeInvariantLoss",
    "TinyUNet",
    "auc",
    "decode_frames_bitmask",
    "encode_frames_bitmask",
    "evaluate",
    "f_measure",
    "frame_mae_terms",
    "make_multi_object_saliency",
    "mae",
    "object_frames",
    "object_recall",
    "si_auc",
    "si_f_measure",
    "si_mae",
]
