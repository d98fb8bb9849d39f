"""Standard and size-invariant SOD metrics (Li et al., ICML 2024, Sec. 3-4).

Paper: *Size-invariance Matters: Rethinking Metrics and Losses for Imbalanced Multi-object Salient Object
Detection*, ICML 2024. https://arxiv.org/abs/2405.09782 · code https://github.com/Ferry-Li/SI-SOD

A pixel-pooled metric decomposes into per-region terms weighted by region size. For MAE, with frames
``F_0..F_K`` tiling the image, ``MAE = sum_k |F_k|/HW * MAE_k``: a large object dominates and a small one
can be missed almost for free. The size-invariant (SI) metrics evaluate each object frame separately and
average with equal weights:

    SI-MAE = (sum_{k=1..K} MAE_k + alpha * MAE_0) / (K + alpha),   alpha = |F_0| / (HW - |F_0|)

(``normalization="code"`` divides by ``K + 1 + alpha`` as the official ``metrics.py`` does; the default
``K + alpha`` makes SI-MAE a weighted mean and is what ``pysodmetrics.SizeInvarianceMAE`` computes).
SI-F and SI-AUC average the per-object-frame F-measure and ROC-AUC; the background frame is left out.
Images without a salient object fall back to the standard metric.

Which pixels a frame's F-measure and AUC see (``convention``):

* ``"box"`` (default): only the pixels inside the object's bounding box. This is the paper's definition
  of a frame (Sec. 4: each object is evaluated inside its own frame) and makes the per-frame scores
  size-invariant.
* ``"masked_image"``: every pixel of the image, with the prediction and the ground truth set to 0 outside
  the box (``pred * mask``, ``gt * mask``), as the official ``metrics.py`` and ``pysodmetrics``
  (``SizeInvarianceFmeasureV2``) compute it. The out-of-box pixels become true negatives at every
  threshold above 0, so the per-frame false-positive rate is divided by nearly the whole image and the
  AUC is much higher (e.g. 0.95 instead of 0.80 on the same masks).
* ``"official"``: ``"masked_image"`` plus the official code's frame selection, which compares the
  bit-mask weight map with ``split == k`` for ``k = 1 .. bit_length(max(split))`` (SI-MAE tests bits):
  for three or more objects, or overlapping boxes, some "frames" are box overlaps or box remainders and
  some objects are never scored. The ROC points are ordered by ``torch.argsort`` of the FPR, as in the
  official code: that sort is unstable, so the order of points with equal FPR (and hence the AUC) depends
  on torch's sort implementation.

Conventions fixed here (from the official code): F-measure with ``beta^2 = 0.3`` over ``T = 100``
thresholds ``t_i = i / (T - 1)`` of the min-max normalised prediction (``pred >= t_i``), precision
``TP / (TP + FP + s)`` and recall ``TP / (P + s)`` with smoothing ``s = 1``; AUC by the trapezoid rule over
the same thresholds of the raw prediction with ``TPR = TP / (P + s)``, ``FPR = FP / (N + s)``. Pass
``smoothing=0`` for the unsmoothed quantities. Per-frame AUC is undefined for a frame with one class
only (e.g. a square object filling its box): such frames are left out of the SI-AUC average.

Every metric is computed for a whole batch at once: frame sums come from summed-area tables and
per-frame threshold histograms from one ``np.bincount`` over the pixels of all boxes.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from icml24.common.validation import real_array

from ._checks import check_bool, check_float, check_int
from .frames import Frames, box_pixels, object_frames

__all__ = [
    "mae",
    "si_mae",
    "f_measure",
    "si_f_measure",
    "auc",
    "si_auc",
    "evaluate",
    "frame_mae_terms",
]

BETA2 = 0.3
"""The F-measure weight beta^2 used across the SOD literature and the official code."""


def _to_numpy(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu().numpy()
    if not isinstance(x, (np.ndarray, list, tuple)):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(x).__name__}")
    return np.asarray(x)


def _prepare(pred: Any, gt: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """Validate and return ``pred`` as float64 ``(B, H, W)``, ``gt`` as bool ``(B, H, W)`` and whether
    the input was a single ``(H, W)`` map."""
    p = _to_numpy(pred, "pred")
    g = _to_numpy(gt, "gt")
    if p.shape != g.shape:
        raise ValueError(f"pred and gt must have the same shape, got {p.shape} and {g.shape}")
    if p.ndim not in (2, 3):
        raise ValueError(f"pred must be (H, W) or (B, H, W), got shape {p.shape}")
    if p.size == 0:
        raise ValueError(f"pred and gt must be non-empty maps, got shape {p.shape}")
    if p.dtype == bool or not np.issubdtype(p.dtype, np.number):
        raise TypeError(f"pred must be a real-valued saliency map in [0, 1], got dtype {p.dtype}")
    p = real_array(p, "pred")  # refuses complex maps (numpy would drop the imaginary part with a warning)
    if not np.isfinite(p).all():
        raise ValueError("pred contains non-finite values (NaN or inf)")
    if p.min() < 0.0 or p.max() > 1.0:
        raise ValueError(f"pred must lie in [0, 1], got values in [{p.min():.4g}, {p.max():.4g}]")
    if g.dtype != bool:
        gf = real_array(g, "gt")
        if not np.isfinite(gf).all():
            raise ValueError("gt contains non-finite values (NaN or inf)")
        if gf.min() < 0.0 or gf.max() > 1.0:
            raise ValueError(f"gt must be a binary mask with values in [0, 1], got [{gf.min()}, {gf.max()}]")
        g = gf > 0.5
    single = p.ndim == 2
    if single:
        p, g = p[None], g[None]
    return p, g, single


def _out(values: np.ndarray, single: bool) -> float | np.ndarray:
    return float(values[0]) if single else values


def _frames_for(g: np.ndarray, frames: Frames | None, min_area: int) -> Frames:
    check_int("min_area", min_area, 0)
    if frames is not None and not isinstance(frames, Frames):
        raise TypeError(f"frames must be a Frames (from object_frames) or None, got {type(frames).__name__}")
    if frames is None:
        return object_frames(g, min_area=min_area)
    if tuple(frames.shape) != g.shape:
        raise ValueError(f"frames were built for shape {frames.shape}, but gt has shape {g.shape}")
    return frames


def _thresholds(num: int) -> np.ndarray:
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)):
        raise TypeError(f"num_thresholds must be an int >= 2, got {num!r}")
    if num < 2:
        raise ValueError(f"num_thresholds must be >= 2, got {num}")
    return np.arange(num) / (num - 1)


def _check_f_params(beta2: float, smoothing: float) -> None:
    check_float("beta2", beta2, lo=0.0, lo_open=True)
    _check_smoothing(smoothing)


def _check_smoothing(smoothing: float) -> None:
    check_float("smoothing", smoothing, lo=0.0)


def _bin_index(p: np.ndarray, num: int) -> np.ndarray:
    """Index of the largest threshold ``<= p`` (so ``p >= t_i`` iff ``i <= bin``).

    ``floor(p (T-1))`` can be off by one where rounding puts ``p`` just across a threshold; the two
    corrections compare with ``t_i = i / (T-1)`` computed exactly as :func:`_thresholds` does.
    """
    _thresholds(num)
    d = num - 1
    b = np.minimum(np.floor(p * d), d)
    b -= b / d > p
    b += (b < d) & ((b + 1) / d <= p)
    return b.astype(np.int64)


Convention = Literal["box", "masked_image", "official"]
CONVENTIONS = ("box", "masked_image", "official")


def _check_convention(convention: str) -> None:
    if not isinstance(convention, str) or convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}; got {convention!r}")


def _official_region_histograms(
    p: np.ndarray, g: np.ndarray, fr: Frames, num: int, normalize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Histograms of the official code's SI-F/SI-AUC "frames": for each image, the pixel sets
    ``split == k`` for ``k = 1 .. bit_length(max(split))`` of the bit-mask weight map ``split``, each seen
    on the masked image (every pixel outside the set is a prediction-0, ground-truth-0 pixel).

    Returns ``(hist, img)``: ``(R, 2, num)`` counts for the non-empty sets and the image of each.
    """
    from .frames import encode_frames_bitmask

    bsz, h, w = p.shape
    split = encode_frames_bitmask(fr) if len(fr.boxes) else np.zeros(p.shape, np.int64)
    top = split.reshape(bsz, -1).max(1)
    nbits = np.array([int(t).bit_length() for t in top], np.int64)  # official: floor(log2(max) + 1)
    v = _minmax(p) if normalize else p
    valid = (split >= 1) & (split <= nbits[:, None, None])
    kmax = 63
    img = np.broadcast_to(np.arange(bsz)[:, None, None], p.shape)
    key = ((img * kmax + np.where(valid, split, 0)) * 2 + g) * num + _bin_index(v, num)
    hist = np.bincount(key[valid], minlength=bsz * kmax * 2 * num).reshape(bsz * kmax, 2, num)
    size = hist.sum((1, 2))
    keep = np.flatnonzero(size > 0)
    hist = hist[keep]
    hist[:, 0, 0] += h * w - size[keep]  # out-of-set pixels: prediction 0 (only t = 0 counts them), gt 0
    return hist, keep // kmax


def _frame_histograms(
    p: np.ndarray, g: np.ndarray, boxes: np.ndarray | None, num: int, normalize: bool = False
) -> np.ndarray:
    """``(M, 2, num)`` counts of pixels per (frame, gt class, threshold bin), for overlapping boxes;
    ``boxes=None`` means one frame per whole image. ``normalize`` min-max normalises each image first.

    Only the pixels inside the boxes are gathered (:func:`box_pixels`, total work = sum of box areas),
    binned and counted with one ``bincount``; no Python loop over boxes.
    """
    bsz = p.shape[0]
    if normalize:
        lo = p.min(axis=(1, 2))
        span = p.max(axis=(1, 2)) - lo + 1e-20
    if boxes is None:
        v = _minmax(p) if normalize else p
        pix = g.astype(np.int64) * num + _bin_index(v, num)
        key = (np.arange(bsz)[:, None, None] * (2 * num) + pix).ravel()
        return np.bincount(key, minlength=bsz * 2 * num).reshape(bsz, 2, num)
    m = len(boxes)
    if m == 0:
        return np.zeros((0, 2, num), np.int64)
    areas = (boxes[:, 2] - boxes[:, 1]) * (boxes[:, 4] - boxes[:, 3])
    flat = box_pixels(boxes, p.shape)
    v = p.ravel()[flat]
    if normalize:
        # As the official code: (p - min + eps) / (max - min + eps), per image.
        img = np.repeat(boxes[:, 0], areas)
        v = np.clip((v - lo[img] + 1e-20) / span[img], 0.0, 1.0)
    key = np.repeat(np.arange(m) * (2 * num), areas) + g.ravel()[flat] * num + _bin_index(v, num)
    return np.bincount(key, minlength=m * 2 * num).reshape(m, 2, num)


def _counts_ge(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """TP_i, FP_i (pixels with ``pred >= t_i``), positives and negatives of each frame."""
    ge = np.flip(np.cumsum(np.flip(hist, -1), -1), -1).astype(np.float64)
    return ge[:, 1], ge[:, 0], ge[:, 1, 0], ge[:, 0, 0]


def _f_curves(hist: np.ndarray, beta2: float, smoothing: float) -> np.ndarray:
    tp, fp, pos, _ = _counts_ge(hist)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = tp / (tp + fp + smoothing)
        rec = tp / (pos[:, None] + smoothing)
        f = (1 + beta2) * prec * rec / (beta2 * prec + rec)
    return np.nan_to_num(f, nan=0.0, posinf=0.0, neginf=0.0)


def _aucs(hist: np.ndarray, smoothing: float, official_order: bool = False) -> np.ndarray:
    """Trapezoid ROC-AUC per frame; NaN for frames with a single class (AUC undefined).

    The ROC points are taken from the highest threshold down (FPR and TPR both non-decreasing). With
    ``official_order`` they are ordered as the official code orders them: ``torch.argsort`` of the
    float32 FPR alone, an unstable sort that puts points of equal FPR in an arbitrary (but
    deterministic) order, so the TPR used at the end of an FPR plateau is not always the highest.
    """
    tp, fp, pos, neg = _counts_ge(hist)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = tp / (pos[:, None] + smoothing)
        fpr = fp / (neg[:, None] + smoothing)
    if official_order and len(fpr):
        import torch  # the official order is torch's sort order: reproduce it with torch itself

        tpr32 = torch.from_numpy(tpr.astype(np.float32))
        fpr32 = torch.from_numpy(fpr.astype(np.float32))
        order = torch.stack([torch.argsort(row) for row in fpr32])  # one row at a time, as the official loop
        tpr = torch.gather(tpr32, 1, order).double().numpy()
        fpr = torch.gather(fpr32, 1, order).double().numpy()
    else:  # FPR is non-increasing in the threshold index: reversing the axis sorts it
        tpr, fpr = tpr[:, ::-1], fpr[:, ::-1]
    out = np.trapezoid(tpr, fpr, axis=1)
    out[(pos == 0) | (neg == 0)] = np.nan
    return out


def _minmax(p: np.ndarray) -> np.ndarray:
    lo = p.min(axis=(1, 2), keepdims=True)
    hi = p.max(axis=(1, 2), keepdims=True)
    # As the official code: (p - min + eps) / (max - min + eps); a constant map stays constant.
    return np.clip((p - lo + 1e-20) / (hi - lo + 1e-20), 0.0, 1.0)


def _frame_mean(values: np.ndarray, img: np.ndarray, bsz: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of per-frame ``values`` (NaN skipped) per image, and the number of valid frames."""
    ok = ~np.isnan(values)
    s = np.bincount(img[ok], weights=values[ok], minlength=bsz)
    c = np.bincount(img[ok], minlength=bsz)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s / c, c


# ---------------------------------------------------------------------------------------------- MAE


def mae(pred: Any, gt: Any) -> float | np.ndarray:
    """Mean absolute error ``mean |P - G|`` per image (float for an ``(H, W)`` map, ``(B,)`` otherwise)."""
    p, g, single = _prepare(pred, gt)
    return _out(np.abs(p - g).mean(axis=(1, 2)), single)


def frame_mae_terms(pred: Any, gt: Any, frames: Frames | None = None, *, min_area: int = 0) -> dict[str, Any]:
    """The pieces of SI-MAE: per-object-frame MAE ``MAE_k`` (``(M,)``), background ``MAE_0`` and ``alpha``
    per image (``(B,)``; ``MAE_0`` is NaN where the background frame is empty), and the frames used."""
    p, g, _ = _prepare(pred, gt)
    fr = _frames_for(g, frames, min_area)
    err = np.abs(p - g)
    flat = box_pixels(fr.boxes, p.shape)
    areas = fr.box_areas
    box_id = np.repeat(np.arange(len(areas)), areas)
    obj = np.bincount(box_id, weights=err.ravel()[flat], minlength=len(areas)) / np.maximum(areas, 1)
    bg = np.bincount(flat, minlength=p.size).reshape(p.shape) == 0
    bg_area = bg.sum(axis=(1, 2))
    hw = p.shape[1] * p.shape[2]
    with np.errstate(invalid="ignore", divide="ignore"):
        mae0 = np.where(bg, err, 0.0).sum(axis=(1, 2)) / bg_area
        alpha = np.where(fr.n_objects > 0, bg_area / np.maximum(hw - bg_area, 1), 0.0)
    return {"mae_k": obj, "mae_0": mae0, "alpha": alpha, "frames": fr, "mae": err.mean(axis=(1, 2))}


def si_mae(
    pred: Any,
    gt: Any,
    frames: Frames | None = None,
    *,
    min_area: int = 0,
    normalization: Literal["paper", "code"] = "paper",
) -> float | np.ndarray:
    """Size-invariant MAE (Sec. 4): per-frame MAE averaged with weight 1 per object and ``alpha`` for the
    background, ``alpha = |F_0| / (HW - |F_0|)``.

    Args:
        pred: ``(H, W)`` or ``(B, H, W)`` saliency in [0, 1] (numpy or torch).
        gt: binary ground truth of the same shape.
        frames: precomputed :func:`~icml24.vision.size_invariant_sod.frames.object_frames` (else built here).
        min_area: drop components smaller than this when building frames.
        normalization: ``"paper"`` divides by ``K + alpha``; ``"code"`` by ``K + 1 + alpha`` (official
            ``metrics.py``, where the background frame is counted once more).
    """
    if normalization not in ("paper", "code"):
        raise ValueError(f"normalization must be 'paper' or 'code', got {normalization!r}")
    single = np.ndim(_to_numpy(pred, "pred")) == 2
    t = frame_mae_terms(pred, gt, frames, min_area=min_area)
    fr: Frames = t["frames"]
    bsz = fr.shape[0]
    k = fr.n_objects.astype(np.float64)
    obj_sum = np.bincount(fr.boxes[:, 0], weights=t["mae_k"], minlength=bsz) if len(fr.boxes) else np.zeros(bsz)
    has_bg = ~np.isnan(t["mae_0"])
    alpha = t["alpha"]
    num = obj_sum + np.where(has_bg, alpha * np.nan_to_num(t["mae_0"]), 0.0)
    den = k + alpha + (has_bg.astype(np.float64) if normalization == "code" else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(fr.n_objects > 0, num / np.where(den > 0, den, 1.0), t["mae"])
    return _out(out, single)


# ---------------------------------------------------------------------------------------- F-measure


def _f_aggregate(curves: np.ndarray, aggregate: str) -> np.ndarray:
    if aggregate == "mean":
        return curves.mean(axis=1)
    if aggregate == "max":
        return curves.max(axis=1)
    raise ValueError(f"aggregate must be 'mean' or 'max', got {aggregate!r}")


def f_measure(
    pred: Any,
    gt: Any,
    *,
    aggregate: Literal["mean", "max", "curve"] = "mean",
    beta2: float = BETA2,
    num_thresholds: int = 100,
    smoothing: float = 1.0,
    normalize: bool = True,
) -> float | np.ndarray:
    """Standard F-measure over thresholds (mean F, max F, or the ``(B, T)`` curve) of each image."""
    p, g, single = _prepare(pred, gt)
    _thresholds(num_thresholds)
    _check_f_params(beta2, smoothing)
    check_bool("normalize", normalize)
    hist = _frame_histograms(p, g, None, num_thresholds, normalize)
    curves = _f_curves(hist, beta2, smoothing)
    if aggregate == "curve":
        return curves[0] if single else curves
    return _out(_f_aggregate(curves, aggregate), single)


def _si_frame_histograms(
    p: np.ndarray, g: np.ndarray, fr: Frames, num: int, normalize: bool, convention: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame threshold histograms under ``convention`` and the image index of each frame."""
    if convention == "official":
        return _official_region_histograms(p, g, fr, num, normalize)
    hist = _frame_histograms(p, g, fr.boxes, num, normalize)
    if convention == "masked_image" and len(hist):
        # every out-of-box pixel is (prediction 0, gt 0): a negative counted only at threshold t_0 = 0
        hist[:, 0, 0] += p.shape[1] * p.shape[2] - fr.box_areas
    return hist, fr.boxes[:, 0]


def si_f_measure(
    pred: Any,
    gt: Any,
    frames: Frames | None = None,
    *,
    aggregate: Literal["mean", "max"] = "mean",
    min_area: int = 0,
    beta2: float = BETA2,
    num_thresholds: int = 100,
    smoothing: float = 1.0,
    normalize: bool = True,
    convention: Convention = "box",
) -> float | np.ndarray:
    """Size-invariant F-measure (Sec. 4): the F-measure (mean or max over thresholds) of each object frame,
    averaged over the object frames of the image; the standard F-measure where there is no object.

    ``convention`` chooses which pixels a frame sees (module docstring): ``"box"`` (in-box pixels, the
    paper's frame), ``"masked_image"`` (pysodmetrics, official) or ``"official"`` (also the official
    ``split == k`` frame selection).
    """
    p, g, single = _prepare(pred, gt)
    fr = _frames_for(g, frames, min_area)
    _thresholds(num_thresholds)
    _check_f_params(beta2, smoothing)
    check_bool("normalize", normalize)
    _check_convention(convention)
    if aggregate not in ("mean", "max"):
        raise ValueError(f"aggregate must be 'mean' or 'max', got {aggregate!r}")
    hist, img = _si_frame_histograms(p, g, fr, num_thresholds, normalize, convention)
    per = _f_aggregate(_f_curves(hist, beta2, smoothing), aggregate)
    mean, count = _frame_mean(per, img, p.shape[0])
    if (count == 0).any():  # images without an object: the standard F-measure
        empty = count == 0
        hist = _frame_histograms(p[empty], g[empty], None, num_thresholds, normalize)
        mean[empty] = _f_aggregate(_f_curves(hist, beta2, smoothing), aggregate)
    return _out(mean, single)


# ---------------------------------------------------------------------------------------------- AUC


def auc(pred: Any, gt: Any, *, num_thresholds: int = 100, smoothing: float = 1.0) -> float | np.ndarray:
    """Pixel ROC-AUC of each image by the trapezoid rule over ``num_thresholds`` thresholds (NaN when the
    image has a single class)."""
    p, g, single = _prepare(pred, gt)
    _thresholds(num_thresholds)
    _check_smoothing(smoothing)
    return _out(_aucs(_frame_histograms(p, g, None, num_thresholds), smoothing), single)


def si_auc(
    pred: Any,
    gt: Any,
    frames: Frames | None = None,
    *,
    min_area: int = 0,
    num_thresholds: int = 100,
    smoothing: float = 1.0,
    convention: Convention = "box",
) -> float | np.ndarray:
    """Size-invariant AUC (Sec. 4): ROC-AUC of each object frame averaged over the image's object frames
    (frames with one class only are skipped; the image AUC is used when no frame is usable).

    ``convention="box"`` (default, the paper's frame) scores only the pixels inside each box;
    ``"masked_image"`` scores the whole image with prediction and ground truth zeroed outside the box
    (as pysodmetrics and the official code), which adds every out-of-box pixel as a true negative and
    raises the score; ``"official"`` also selects frames as the official ``metrics.py`` does
    (``split == k``) and orders ROC points by ``torch.argsort`` of the FPR. See the module docstring.
    """
    p, g, single = _prepare(pred, gt)
    fr = _frames_for(g, frames, min_area)
    _thresholds(num_thresholds)
    _check_smoothing(smoothing)
    _check_convention(convention)
    hist, img = _si_frame_histograms(p, g, fr, num_thresholds, False, convention)
    per = _aucs(hist, smoothing, official_order=convention == "official")
    mean, count = _frame_mean(per, img, p.shape[0])
    if (count == 0).any():  # no usable object frame: the image AUC
        empty = count == 0
        mean[empty] = _aucs(
            _frame_histograms(p[empty], g[empty], None, num_thresholds), smoothing, convention == "official"
        )
    return _out(mean, single)


def evaluate(pred: Any, gt: Any, *, min_area: int = 0, convention: Convention = "box") -> dict[str, float]:
    """All six metrics (standard and SI versions of MAE, mean F-measure, AUC), averaged over the batch
    (NaN entries, e.g. AUC of a single-class image, skipped). ``convention`` is passed to SI-F and
    SI-AUC."""
    p, g, _ = _prepare(pred, gt)
    _check_convention(convention)
    check_int("min_area", min_area, 0)
    fr = object_frames(g, min_area=min_area)
    vals = {
        "mae": mae(p, g),
        "si_mae": si_mae(p, g, fr),
        "f_mean": f_measure(p, g),
        "si_f_mean": si_f_measure(p, g, fr, convention=convention),
        "auc": auc(p, g),
        "si_auc": si_auc(p, g, fr, convention=convention),
    }
    out = {}
    for k, v in vals.items():
        v = np.atleast_1d(v)
        ok = ~np.isnan(v)
        out[k] = float(v[ok].mean()) if ok.any() else float("nan")
    return out
