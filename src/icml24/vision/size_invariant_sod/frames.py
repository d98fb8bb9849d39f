"""Object frames for size-invariant SOD evaluation (Li et al., ICML 2024, Sec. 4).

Paper: *Size-invariance Matters: Rethinking Metrics and Losses for Imbalanced Multi-object Salient Object
Detection*, F. Li, Q. Xu, S. Bao, Z. Yang, R. Cong, X. Cao, Q. Huang. ICML 2024.
https://arxiv.org/abs/2405.09782 · official code https://github.com/Ferry-Li/SI-SOD

The size-invariant metrics split an image into one *frame* per salient object, the bounding box ``F_k``
of the k-th 4-connected component of the ground truth, plus the background frame ``F_0`` of the pixels
outside every box. Boxes may overlap. This module finds the frames of a whole batch with one call to
``scipy.ndimage.label`` (a 3-D structuring element that never connects two images), and provides the
official code's bit-mask encoding (bit ``k-1`` set inside box ``k``) and its inverse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from ._checks import check_bool, check_int

__all__ = ["Frames", "object_frames", "encode_frames_bitmask", "decode_frames_bitmask", "box_sums", "box_pixels"]


@dataclass(frozen=True)
class Frames:
    """The object frames of a batch of ground-truth masks.

    Attributes:
        boxes: ``(M, 5)`` int64 array, one row per object frame: ``(image, y0, y1, x0, x1)`` with the
            half-open box ``[y0, y1) x [x0, x1)``; rows are grouped by image, in label order.
        areas: ``(M,)`` int64 pixel count of each object (the component, not its box).
        shape: ``(B, H, W)`` of the batch.
        n_objects: ``(B,)`` number of frames per image (``K``).
    """

    boxes: np.ndarray
    areas: np.ndarray
    shape: tuple[int, int, int]
    n_objects: np.ndarray

    @property
    def box_areas(self) -> np.ndarray:
        b = self.boxes
        return (b[:, 2] - b[:, 1]) * (b[:, 4] - b[:, 3])

    def coverage(self) -> np.ndarray:
        """``(B, H, W)`` int count of object frames covering each pixel (0 = background frame ``F_0``).

        Built with a 2-D difference array and two cumulative sums, so the cost is O(BHW + M).
        """
        bsz, h, w = self.shape
        diff = np.zeros((bsz, h + 1, w + 1), dtype=np.int64)
        i, y0, y1, x0, x1 = self.boxes.T
        np.add.at(diff, (i, y0, x0), 1)
        np.add.at(diff, (i, y0, x1), -1)
        np.add.at(diff, (i, y1, x0), -1)
        np.add.at(diff, (i, y1, x1), 1)
        return diff.cumsum(1).cumsum(2)[:, :h, :w]


def _structure(connectivity: int) -> np.ndarray:
    if isinstance(connectivity, bool) or connectivity not in (4, 8):
        raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
    s2 = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    # Zero planes above and below: components never cross from one image of the batch to the next.
    s3 = np.zeros((3, 3, 3), dtype=bool)
    s3[1] = s2
    return s3


def object_frames(
    gt: np.ndarray, *, min_area: int = 0, connectivity: int = 4, keep_largest: bool = True
) -> Frames:
    """Find the object frames (bounding boxes of connected components) of binary masks.

    Args:
        gt: ``(H, W)`` or ``(B, H, W)`` ground truth; pixels ``> 0.5`` are salient.
        min_area: components with fewer pixels are dropped (the paper's preprocessing threshold epsilon;
            ``pysodmetrics`` uses 50).
        connectivity: 4 (the official code, ``skimage.measure.label(connectivity=1)``) or 8.
        keep_largest: when every component of an image is below ``min_area``, keep its largest one(s)
            instead of none (the rule of ``pysodmetrics``); images without any salient pixel have no frame.

    Returns:
        :class:`Frames` for the batch (a 2-D input is treated as a batch of one).
    """
    if hasattr(gt, "detach") and hasattr(gt, "cpu"):
        gt = gt.detach().cpu().numpy()
    if not isinstance(gt, (np.ndarray, list, tuple)):
        raise TypeError(f"gt must be a numpy array or torch tensor, got {type(gt).__name__}")
    g = np.asarray(gt)
    if g.ndim == 2:
        g = g[None]
    if g.ndim != 3:
        raise ValueError(f"gt must be (H, W) or (B, H, W), got shape {np.shape(gt)}")
    if not (g.dtype == bool or np.issubdtype(g.dtype, np.number)):
        raise TypeError(f"gt must be a numeric or boolean mask, got dtype {g.dtype}")
    if g.dtype != bool and not np.isfinite(g).all():
        raise ValueError("gt contains non-finite values (NaN or inf)")
    check_int("min_area", min_area, 0)
    check_bool("keep_largest", keep_largest)
    fg = g > 0.5
    labels, n = ndimage.label(fg, structure=_structure(connectivity))
    bsz = g.shape[0]
    if n == 0:
        return Frames(np.zeros((0, 5), np.int64), np.zeros(0, np.int64), g.shape, np.zeros(bsz, np.int64))
    slices = ndimage.find_objects(labels)
    boxes = np.array([[s[0].start, s[1].start, s[1].stop, s[2].start, s[2].stop] for s in slices], np.int64)
    areas = np.bincount(labels.ravel(), minlength=n + 1)[1:].astype(np.int64)
    keep = areas >= min_area
    if keep_largest and min_area > 0:
        # Per image: if nothing survives, keep the component(s) of maximal area.
        img = boxes[:, 0]
        max_area = np.zeros(bsz, np.int64)
        np.maximum.at(max_area, img, areas)
        survivors = np.bincount(img[keep], minlength=bsz)
        keep |= (survivors[img] == 0) & (areas == max_area[img])
    boxes, areas = boxes[keep], areas[keep]
    order = np.argsort(boxes[:, 0], kind="stable")  # label order is raster order over the whole batch
    boxes, areas = boxes[order], areas[order]
    return Frames(boxes, areas, g.shape, np.bincount(boxes[:, 0], minlength=bsz).astype(np.int64))


def encode_frames_bitmask(frames: Frames) -> np.ndarray:
    """The official code's weight map: ``(B, H, W)`` int64 with bit ``k-1`` set inside the k-th box.

    Boxes are numbered from 1 within each image. Supports up to 62 objects per image.
    """
    if not isinstance(frames, Frames):
        raise TypeError(f"frames must be a Frames (from object_frames), got {type(frames).__name__}")
    if frames.n_objects.size and frames.n_objects.max() > 62:
        raise ValueError(f"at most 62 objects per image fit in an int64 bit mask, got {frames.n_objects.max()}")
    bsz, h, w = frames.shape
    out = np.zeros((bsz, h, w), np.int64)
    starts = np.concatenate([[0], np.cumsum(frames.n_objects)[:-1]])
    k = np.arange(len(frames.boxes)) - starts[frames.boxes[:, 0]]
    for (i, y0, y1, x0, x1), bit in zip(frames.boxes, k, strict=True):  # one slice write per object
        out[i, y0:y1, x0:x1] |= np.int64(1) << np.int64(bit)
    return out


def decode_frames_bitmask(weight: np.ndarray) -> list[list[tuple[int, int, int, int]]]:
    """Recover the boxes ``(y0, y1, x0, x1)`` of every image from a bit-mask weight map."""
    if not isinstance(weight, np.ndarray):
        raise TypeError(f"weight must be a numpy array (the bit-mask weight map), got {type(weight).__name__}")
    w = weight
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3:
        raise ValueError(f"weight must be (H, W) or (B, H, W), got shape {weight.shape}")
    if not np.issubdtype(w.dtype, np.number) or (np.issubdtype(w.dtype, np.floating) and not np.isfinite(w).all()):
        raise ValueError("weight must hold finite non-negative integers")
    if (w < 0).any() or (w != np.floor(w)).any():
        raise ValueError("weight must hold non-negative integers (bit k-1 set inside box k)")
    w = w.astype(np.int64)
    out: list[list[tuple[int, int, int, int]]] = []
    for img in w:
        boxes = []
        top = int(img.max())
        for bit in range(top.bit_length()):
            m = (img >> bit) & 1
            if not m.any():
                continue
            rows = np.flatnonzero(m.any(1))
            cols = np.flatnonzero(m.any(0))
            boxes.append((int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1))
        out.append(boxes)
    return out


def box_sums(maps: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Sum of ``maps[i]`` inside each box ``(i, y0, y1, x0, x1)`` via a summed-area table: O(BHW + M).

    ``maps`` has shape ``(B, H, W)`` or ``(B, C, H, W)``; the result is ``(M,)`` or ``(M, C)``.
    """
    m = np.asarray(maps, dtype=np.float64)
    sq = m.ndim == 3
    if sq:
        m = m[:, None]
    bsz, c, h, w = m.shape
    sat = np.zeros((bsz, c, h + 1, w + 1))
    sat[:, :, 1:, 1:] = m.cumsum(2).cumsum(3)
    i, y0, y1, x0, x1 = boxes.T
    s = sat[i, :, y1, x1] - sat[i, :, y0, x1] - sat[i, :, y1, x0] + sat[i, :, y0, x0]
    return s[:, 0] if sq else s


def box_pixels(boxes: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Flat indices (into a ``(B, H, W)`` array) of every pixel of every box, box after box.

    Built from one run of consecutive indices per (box, row) with two ``np.repeat``: O(sum of box areas),
    no Python loop. Box ``m`` owns the slice ``[cumsum(areas)[m-1], cumsum(areas)[m])`` of the result.
    """
    _, h, w = shape
    i, y0, y1, x0, x1 = np.asarray(boxes, np.int64).reshape(-1, 5).T
    heights, widths = y1 - y0, x1 - x0
    run_box = np.repeat(np.arange(len(i)), heights)
    run_row = y0[run_box] + np.arange(len(run_box)) - np.repeat(np.cumsum(heights) - heights, heights)
    run_len = widths[run_box]
    run_start = (i[run_box] * h + run_row) * w + x0[run_box]
    total = int(run_len.sum())
    return np.repeat(run_start - (np.cumsum(run_len) - run_len), run_len) + np.arange(total)
