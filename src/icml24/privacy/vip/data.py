"""Data of the ViP miniature: synthetic pre-training images and a "private" image set.

ViP (Yu et al., ICML 2024, https://arxiv.org/abs/2306.08842), Sec. 3.2: before any private data is touched,
the MAE is pre-trained on 1.05M procedurally generated images (Shaders21k, Baradad et al. 2022), which cost
no privacy; the private stage then trains on LAION. Here :func:`synthetic_images` plays Shaders21k (random
sums of oriented gratings, Gabor blobs and soft strokes, all vectorised numpy) and :func:`private_digits`
plays LAION: scikit-learn's 8x8 digits upsampled to 16x16, where every affine jitter of a training digit is
counted as one record (so N is about 15,000; see the privacy-unit caveat in the README).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PrivateDigits", "private_digits", "synthetic_images"]


def _rng(seed: object) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return np.random.default_rng(int(seed))


def _count(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _segment_distance(px: np.ndarray, py: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of the pixel centres ``(px, py)`` (each ``(Q,)``) to the segments ``a -> b`` (``(..., 2)``),
    shape ``(..., Q)``; coordinates kept apart so that every array op is over a contiguous last axis."""
    ax, ay = a[..., 0:1], a[..., 1:2]
    abx, aby = b[..., 0:1] - ax, b[..., 1:2] - ay
    apx, apy = px - ax, py - ay
    t = np.clip((apx * abx + apy * aby) / np.maximum(abx**2 + aby**2, 1e-9), 0.0, 1.0)
    return np.sqrt((apx - t * abx) ** 2 + (apy - t * aby) ** 2)


def synthetic_images(n: int, *, size: int = 16, seed: int = 0) -> np.ndarray:
    """``n`` procedural grey images ``(n, 1, size, size)`` in [0, 1] (the Shaders21k stand-in, ViP Sec. 3.2).

    Each image is a random mixture of three texture families, each with a random weight: a sum of two
    oriented sinusoidal gratings (random frequency, angle, phase), a Gabor blob (Gaussian envelope at a
    random centre times a grating) and two to four soft strokes (a polyline drawn with a Gaussian profile).
    The mixture is min-max scaled per image. No image depends on any private data.
    """
    n = _count("n", n)
    size = _count("size", size, 2)
    rng = _rng(seed)
    coords = (np.arange(size) + 0.5) / size  # pixel centres in (0, 1)
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    px = np.stack([xx.ravel(), yy.ravel()], axis=1)  # (Q, 2)

    # Gratings: sum_k sin(2 pi f_k <u_k, x> + phi_k), two per image.
    angle = rng.uniform(0, np.pi, (n, 2))
    freq = rng.uniform(0.5, 4.0, (n, 2))
    phase = rng.uniform(0, 2 * np.pi, (n, 2))
    u = np.stack([np.cos(angle), np.sin(angle)], axis=-1)  # (n, 2, 2)
    gratings = np.sin(2 * np.pi * freq[..., None] * (u @ px.T) + phase[..., None]).sum(1)  # (n, Q)

    # Gabor blob: exp(-|x - c|^2 / (2 s^2)) * cos(2 pi f <u, x - c>).
    centre = rng.uniform(0.2, 0.8, (n, 1, 2))
    width = rng.uniform(0.08, 0.25, (n, 1))
    g_angle = rng.uniform(0, np.pi, n)
    g_u = np.stack([np.cos(g_angle), np.sin(g_angle)], axis=-1)[:, None, :]
    d = px[None] - centre
    gabor = np.exp(-(d**2).sum(-1) / (2 * width**2)) * np.cos(2 * np.pi * rng.uniform(1.0, 4.0, (n, 1)) * (d * g_u).sum(-1))

    # Strokes: a 4-vertex polyline, of which 2 to 4 segments are drawn, Gaussian profile of random width.
    verts = rng.uniform(0.1, 0.9, (n, 5, 2))
    dist = _segment_distance(px[:, 0], px[:, 1], verts[:, :-1], verts[:, 1:])  # (n, 4, Q)
    drawn = np.arange(4)[None, :] < rng.integers(2, 5, n)[:, None]
    dist = np.where(drawn[..., None], dist, np.inf).min(1)
    stroke_w = rng.uniform(0.03, 0.08, (n, 1))
    strokes = np.exp(-(dist**2) / (2 * stroke_w**2))

    w = rng.dirichlet(np.ones(3), n)
    img = w[:, :1] * gratings / 2 + w[:, 1:2] * gabor + w[:, 2:] * 2 * strokes
    lo, hi = img.min(1, keepdims=True), img.max(1, keepdims=True)
    img = (img - lo) / np.maximum(hi - lo, 1e-6)
    return img.reshape(n, 1, size, size).astype(np.float32)


@dataclass(frozen=True)
class PrivateDigits:
    """The miniature's private set and its downstream probe data (``float32`` images in [0, 1], ``(n, 1, s, s)``).

    Attributes:
        private: the DP-training records: ``jitters`` affine jitters of each of the private digits (no labels).
        downstream_x, downstream_y: the other digits and their labels, disjoint from the private digits: the
            downstream task of the linear probe (as ImageNet is for a LAION-trained ViP).
    """

    private: np.ndarray
    downstream_x: np.ndarray
    downstream_y: np.ndarray


def _upsample(x: np.ndarray, size: int) -> np.ndarray:
    import torch

    t = torch.as_tensor(x)
    return torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear", align_corners=False).numpy()


def _affine_jitter(x: np.ndarray, rng: np.random.Generator, max_rotation: float, max_shift: float,
                   scale_range: tuple[float, float]) -> np.ndarray:  # fmt: skip
    import torch

    n = len(x)
    ang = np.deg2rad(rng.uniform(-max_rotation, max_rotation, n))
    scale = rng.uniform(*scale_range, n)
    shift = rng.uniform(-max_shift, max_shift, (n, 2))
    theta = np.zeros((n, 2, 3))
    theta[:, 0, 0], theta[:, 0, 1] = np.cos(ang) / scale, -np.sin(ang) / scale
    theta[:, 1, 0], theta[:, 1, 1] = np.sin(ang) / scale, np.cos(ang) / scale
    theta[:, :, 2] = shift
    t = torch.as_tensor(x)
    grid = torch.nn.functional.affine_grid(torch.as_tensor(theta, dtype=t.dtype), list(t.shape), align_corners=False)
    return torch.nn.functional.grid_sample(t, grid, align_corners=False, padding_mode="zeros").numpy()


def private_digits(*, n_private: int = 1000, jitters: int = 15, size: int = 16, seed: int = 0) -> PrivateDigits:
    """scikit-learn's digits split (seeded) into ``n_private`` private digits and a downstream rest.

    The private set is ``jitters`` random affine copies of every private digit (rotation up to 12 degrees,
    scale 0.9-1.1, shift up to 1.5 pixels at 16x16), ``n_private * jitters`` records in all; the rest, with
    labels, is the downstream set of the linear probe.
    """
    from sklearn.datasets import load_digits

    n_private = _count("n_private", n_private, 1)
    jitters = _count("jitters", jitters)
    size = _count("size", size, 8)
    rng = _rng(seed)
    x, y = load_digits(return_X_y=True)
    if n_private > len(x) - 200:
        raise ValueError(f"n_private must leave at least 200 of the {len(x)} digits downstream, got {n_private}")
    x = _upsample((x / 16.0).reshape(-1, 1, 8, 8).astype(np.float32), size)
    perm = rng.permutation(len(x))
    priv, rest = perm[:n_private], perm[n_private:]
    base = np.repeat(x[priv], jitters, axis=0)
    private = np.clip(_affine_jitter(base, rng, 12.0, 1.5 * 2 / size, (0.9, 1.1)), 0.0, 1.0).astype(np.float32)
    private = private[rng.permutation(len(private))]
    return PrivateDigits(private, x[rest], y[rest])
