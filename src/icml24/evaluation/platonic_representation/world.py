"""A synthetic image-caption world for testing the Platonic Representation Hypothesis in miniature.

Huh et al. (ICML 2024, https://arxiv.org/abs/2405.07987, Sec. 4) model the world as latent events ``Z``
seen through modality-specific observation functions. Here ``Z`` is explicit: a scene is a (shape,
colour, size, quadrant, count) tuple; the image modality renders it (RGB, with position jitter, colour
jitter and noise) and the text modality writes a caption from one of several paraphrase templates, with
some attributes left out. Both modalities are lossy views of the same ``Z``, so a representation that
recovers ``Z`` from either side should induce similar neighbourhoods. This world is *simulated*: it is
much simpler than natural images and text, and the captions are rendered from ``Z`` by templates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["World", "make_world", "ATTRIBUTES", "COLOURS", "SHAPES"]

SHAPES = ("circle", "square", "triangle", "cross")
COLOURS = {
    "red": (0.9, 0.15, 0.1),
    "green": (0.15, 0.75, 0.2),
    "blue": (0.15, 0.3, 0.9),
    "yellow": (0.95, 0.85, 0.1),
    "purple": (0.6, 0.2, 0.8),
    "cyan": (0.1, 0.8, 0.85),
}
SIZES = ("small", "large")
QUADRANTS = ("upper left", "upper right", "lower left", "lower right")
COUNTS = (1, 2, 3)
ATTRIBUTES = {"shape": len(SHAPES), "colour": len(COLOURS), "size": len(SIZES), "quadrant": 4, "count": 3}
"""Attribute name -> number of classes (the vision models' multitask targets)."""

_COUNT_WORDS = {1: ("one", "a single", "a"), 2: ("two", "a pair of", "two"), 3: ("three", "three", "a group of three")}
_QUAD_WORDS = {
    "upper left": ("upper left", "top left corner", "top-left"),
    "upper right": ("upper right", "top right corner", "top-right"),
    "lower left": ("lower left", "bottom left corner", "bottom-left"),
    "lower right": ("lower right", "bottom right corner", "bottom-right"),
}
_SIZE_WORDS = {"small": ("small", "tiny", "little"), "large": ("large", "big", "huge")}


@dataclass(frozen=True)
class World:
    """Paired samples of the world.

    Attributes:
        attributes: ``(n, 5)`` int latent ``Z``: shape, colour, size, quadrant, count-1 (order of ATTRIBUTES).
        images: ``(n, 3, S, S)`` float32 renderings in [0, 1].
        captions: ``n`` strings.
    """

    attributes: np.ndarray
    images: np.ndarray
    captions: list[str]


def _plural(shape: str, count: int) -> str:
    if count == 1:
        return shape
    return shape + ("es" if shape.endswith("s") else "s")


def _caption(z: np.ndarray, rng: np.random.Generator, drop_prob: float) -> str:
    shape, colour = SHAPES[z[0]], list(COLOURS)[z[1]]
    size, quad, count = SIZES[z[2]], QUADRANTS[z[3]], COUNTS[z[4]]
    keep = rng.random(4) >= drop_prob  # colour, size, quadrant, count may be left out; shape stays
    cw = rng.choice(_COUNT_WORDS[count]) if keep[3] else ("some" if count > 1 else "a")
    sw = rng.choice(_SIZE_WORDS[size]) + " " if keep[1] else ""
    col = colour + " " if keep[0] else ""
    noun = _plural(shape, count if keep[3] else (2 if count > 1 else 1))
    where = rng.choice(_QUAD_WORDS[quad])
    t = int(rng.integers(0, 4))
    if t == 0:
        s = f"{cw} {sw}{col}{noun}"
        return s + (f" in the {where}" if keep[2] else "")
    if t == 1:
        s = f"a picture showing {cw} {sw}{col}{noun}"
        return s + (f" located at the {where}" if keep[2] else "")
    if t == 2:
        return (f"in the {where} there " if keep[2] else "there ") + ("is" if count == 1 else "are") + f" {cw} {sw}{col}{noun}"
    return f"{sw}{col}{noun}".strip() + (f", {where}" if keep[2] else "") + (f", count {count}" if keep[3] else "")


def make_world(
    n: int, *, image_size: int = 24, noise: float = 0.08, caption_drop: float = 0.15, seed: int | np.random.Generator = 0
) -> World:
    """Sample ``n`` scenes and render each as an image and a caption.

    Args:
        n: number of paired samples.
        image_size: side of the square RGB image (quadrants are ``image_size / 2`` wide).
        noise: standard deviation of pixel noise; colours and positions are jittered too.
        caption_drop: probability that each of colour/size/quadrant/count is left out of the caption.
        seed: int or ``numpy.random.Generator``.
    """
    for name, v in (("n", n), ("image_size", image_size)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if image_size < 12 or image_size % 2:
        raise ValueError(f"image_size must be an even int >= 12, got {image_size}")
    for name, v, hi in (("noise", noise, None), ("caption_drop", caption_drop, 1.0)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
            raise TypeError(f"{name} must be a number, got {v!r}")
        if not (np.isfinite(v) and v >= 0 and (hi is None or v <= hi)):
            raise ValueError(f"{name} must be finite and in [0, {hi if hi is not None else 'inf'}), got {v!r}")
    if not isinstance(seed, np.random.Generator):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    z = np.stack([rng.integers(0, c, size=n) for c in ATTRIBUTES.values()], 1)
    s, half = image_size, image_size // 2
    radius = np.where(z[:, 2] == 0, half * 0.14, half * 0.3)  # small / large
    # Up to 3 objects inside the scene's quadrant at jittered positions.
    qy = (z[:, 3] // 2) * half
    qx = (z[:, 3] % 2) * half
    m = 3
    margin = radius[:, None] + 0.5
    cy = qy[:, None] + rng.uniform(margin, half - margin, size=(n, m))
    cx = qx[:, None] + rng.uniform(margin, half - margin, size=(n, m))
    active = np.arange(m)[None, :] <= z[:, 4:5]
    yy, xx = np.mgrid[:s, :s].astype(np.float64) + 0.5
    dy = yy[None, None] - cy[:, :, None, None]
    dx = xx[None, None] - cx[:, :, None, None]
    r = radius[:, None, None, None]
    shape = z[:, 0][:, None, None, None]
    circle = dy**2 + dx**2 <= r**2
    square = np.maximum(np.abs(dy), np.abs(dx)) <= r * 0.85
    triangle = (dy <= r * 0.8) & (np.abs(dx) <= (dy + r) * 0.55)
    cross = ((np.abs(dx) <= r / 3) & (np.abs(dy) <= r)) | ((np.abs(dy) <= r / 3) & (np.abs(dx) <= r))
    masks = np.select([shape == 0, shape == 1, shape == 2], [circle, square, triangle], cross)
    fg = (masks & active[:, :, None, None]).any(1)
    palette = np.asarray(list(COLOURS.values()))
    colour = np.clip(palette[z[:, 1]] + rng.normal(scale=0.06, size=(n, 3)), 0, 1)
    bg = rng.uniform(0.25, 0.55, size=(n, 1, 1, 1))
    img = np.where(fg[:, None], colour[:, :, None, None], bg) + rng.normal(scale=noise, size=(n, 3, s, s))
    captions = [_caption(zi, rng, caption_drop) for zi in z]
    return World(z.astype(np.int64), np.clip(img, 0, 1).astype(np.float32), captions)
