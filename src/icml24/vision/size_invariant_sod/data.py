"""Synthetic multi-object saliency images with objects of very different sizes.

A stand-in for the MSOD benchmark of Li et al. (ICML 2024, https://arxiv.org/abs/2405.09782), where
small salient objects sit next to large ones: each image has one large object and up to three more whose
radii are log-uniform over the whole range, on a low-contrast textured background. Objects never touch
(a gap of at least one pixel), so each is exactly one 4-connected component of the ground truth, and the
instance map tells which object each pixel belongs to (used for per-object recall).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from ._checks import check_float, check_int

__all__ = ["SaliencyData", "make_multi_object_saliency", "object_recall"]


@dataclass(frozen=True)
class SaliencyData:
    """A generated data set.

    Attributes:
        images: ``(N, 3, H, W)`` float32 RGB in [0, 1].
        masks: ``(N, H, W)`` bool ground truth (union of the objects).
        instances: ``(N, H, W)`` int16 object index, 0 for background, 1..K per image.
        object_areas: ``(N, max_objects)`` int pixel area of each object (0 where there is none).
    """

    images: np.ndarray
    masks: np.ndarray
    instances: np.ndarray
    object_areas: np.ndarray


def make_multi_object_saliency(
    n: int,
    size: int = 64,
    *,
    max_objects: int = 4,
    radius_range: tuple[float, float] = (2.0, 20.0),
    contrast: float = 0.35,
    noise: float = 0.06,
    seed: int | np.random.Generator = 0,
) -> SaliencyData:
    """Generate ``n`` images of ``size x size`` with 1 large + 0..``max_objects-1`` objects of any size.

    Args:
        n: number of images.
        size: side in pixels.
        max_objects: most objects per image (at least one).
        radius_range: (smallest, largest) object radius in pixels; the first object's radius is drawn from
            the upper half (log scale), the others log-uniformly over the whole range.
        contrast: colour distance between objects and the background texture (lower is harder).
        noise: standard deviation of the per-pixel Gaussian noise.
        seed: an int or a ``numpy.random.Generator``.
    """
    check_int("n", n, 1)
    check_int("size", size, 8)
    check_int("max_objects", max_objects, 1)
    check_float("contrast", contrast, lo=0.0)
    check_float("noise", noise, lo=0.0)
    if not isinstance(seed, np.random.Generator):
        check_int("seed", seed, 0)
    if not isinstance(radius_range, (tuple, list)) or len(radius_range) != 2:
        raise TypeError(f"radius_range must be a (min, max) pair, got {radius_range!r}")
    rmin, rmax = (check_float("radius_range", r) for r in radius_range)
    if not 0.5 <= rmin <= rmax <= size / 2 - 1:
        raise ValueError(f"radius_range must satisfy 0.5 <= min <= max <= size/2 - 1, got {radius_range}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    m = max_objects
    count = rng.integers(1, m + 1, size=n)
    active = np.arange(m)[None, :] < count[:, None]
    lo, hi = np.log(rmin), np.log(rmax)
    logr = rng.uniform(lo, hi, size=(n, m))
    logr[:, 0] = rng.uniform((lo + hi) / 2, hi, size=n)
    r = np.exp(logr)
    shape = rng.integers(0, 3, size=(n, m))  # 0 disk, 1 square, 2 ellipse
    # A square's corner lies at r * sqrt(2): shrink large squares so that they fit in the image.
    r = np.where(shape == 1, np.minimum(r, (size - 1) / 2 / np.sqrt(2.0) - 0.5), r)
    aspect = np.where(shape == 2, rng.uniform(0.45, 0.8, size=(n, m)), 1.0)
    horizontal = rng.random((n, m)) < 0.5
    # Circumradius for the no-touch test (a square's corner lies at r * sqrt(2)).
    reach = np.where(shape == 1, r * np.sqrt(2.0), r)
    cy = rng.uniform(reach, size - 1 - reach)
    cx = rng.uniform(reach, size - 1 - reach)
    for _ in range(30):  # rejection rounds, vectorised over images and object pairs
        d = np.hypot(cy[:, :, None] - cy[:, None, :], cx[:, :, None] - cx[:, None, :])
        clash = (d < reach[:, :, None] + reach[:, None, :] + 2.0) & active[:, :, None] & active[:, None, :]
        clash &= np.tril(np.ones((m, m), bool), -1)[None]  # the later object of a pair moves
        bad = clash.any(2)
        if not bad.any():
            break
        cy = np.where(bad, rng.uniform(reach, size - 1 - reach), cy)
        cx = np.where(bad, rng.uniform(reach, size - 1 - reach), cx)
    else:
        d = np.hypot(cy[:, :, None] - cy[:, None, :], cx[:, :, None] - cx[:, None, :])
        clash = (d < reach[:, :, None] + reach[:, None, :] + 2.0) & active[:, :, None] & active[:, None, :]
        active &= ~(clash & np.tril(np.ones((m, m), bool), -1)[None]).any(2)

    yy, xx = np.mgrid[:size, :size].astype(np.float64)
    dy = yy[None, None] - cy[:, :, None, None]
    dx = xx[None, None] - cx[:, :, None, None]
    ay = np.where(horizontal, aspect, 1.0)[:, :, None, None]
    ax = np.where(horizontal, 1.0, aspect)[:, :, None, None]
    rr = r[:, :, None, None]
    disk = (dy / ay) ** 2 + (dx / ax) ** 2 <= rr**2
    square = (np.abs(dy) <= rr) & (np.abs(dx) <= rr)
    obj = np.where((shape == 1)[:, :, None, None], square, disk) & active[:, :, None, None]
    instances = np.zeros((n, size, size), np.int16)
    for j in range(m):  # objects are disjoint: the order of writing does not matter
        instances[obj[:, j]] = j + 1
    masks = instances > 0
    areas = obj.sum((2, 3))

    # Background: smoothed noise texture around a random grey-ish tint; objects: a colour at a fixed
    # distance ``contrast`` from the local background in a random direction.
    tint = rng.uniform(0.3, 0.7, size=(n, 3, 1, 1))
    tex = ndimage.gaussian_filter(rng.normal(size=(n, 3, size, size)), sigma=(0, 0, 3, 3))
    tex = tex / (tex.std(axis=(2, 3), keepdims=True) + 1e-8) * 0.08
    bg = tint + tex
    direction = rng.normal(size=(n, m, 3))
    direction /= np.linalg.norm(direction, axis=2, keepdims=True)
    colour = np.clip(tint[:, None, :, 0, 0] + contrast * direction * np.sqrt(3.0), 0.0, 1.0)  # (n, m, 3)
    lookup = np.concatenate([np.zeros((n, 1, 3)), colour], 1)  # index 0 = background (unused)
    obj_rgb = np.take_along_axis(lookup, instances.reshape(n, -1, 1).astype(np.int64), axis=1)
    obj_rgb = obj_rgb.reshape(n, size, size, 3).transpose(0, 3, 1, 2)
    img = np.where(masks[:, None], obj_rgb, bg) + rng.normal(scale=noise, size=(n, 3, size, size))
    img = np.clip(img, 0.0, 1.0).astype(np.float32)
    return SaliencyData(img, masks, instances, areas.astype(np.int64))


def object_recall(pred: np.ndarray, data: SaliencyData, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Per object: its area and whether it is detected (mean predicted saliency inside it > ``threshold``).

    Returns ``(areas, detected)`` flattened over all objects of all images.
    """
    if not isinstance(data, SaliencyData):
        raise TypeError(f"data must be a SaliencyData, got {type(data).__name__}")
    check_float("threshold", threshold, lo=0.0, hi=1.0)
    if hasattr(pred, "detach") and hasattr(pred, "cpu"):
        pred = pred.detach().cpu().numpy()
    if not isinstance(pred, np.ndarray) or not np.issubdtype(pred.dtype, np.number):
        raise TypeError(f"pred must be a numeric numpy array or torch tensor, got {type(pred).__name__}")
    p = np.asarray(pred, dtype=np.float64)
    if p.shape != data.masks.shape:
        raise ValueError(f"pred must have the shape of data.masks {data.masks.shape}, got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("pred contains non-finite values (NaN or inf)")
    n, m = data.object_areas.shape
    key = (np.arange(n)[:, None, None] * (m + 1) + data.instances).ravel()
    sums = np.bincount(key, weights=p.ravel(), minlength=n * (m + 1)).reshape(n, m + 1)[:, 1:]
    areas = data.object_areas
    ok = areas > 0
    mean = np.where(ok, sums / np.maximum(areas, 1), 0.0)
    return areas[ok], mean[ok] > threshold
