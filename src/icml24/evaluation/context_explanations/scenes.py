"""The relation-only task: two fixed objects whose arrangement alone sets the label.

Tomaszewska & Biecek, "Position: Do Not Explain Vision Models Without Context", ICML 2024
(https://arxiv.org/abs/2404.18316), Sec. 1 and the abstract: "does the stethoscope in the picture make the
adjacent person a doctor or a patient?" Every image holds the same two objects, a filled square A (the
"person") and a one-pixel ring B (the "stethoscope"), beside each other on a noise background. In the
*relation* task the label is 1 ("doctor") iff B lies to the right of A, 0 ("patient") iff B lies to the left,
so a map of *where* the evidence is (on A and on B, in both classes) cannot say *how* it sets the class. The
*colour* control task keeps the layout but makes exactly one object red; the label is 1 iff B is the red one
and the side of B is random, so the class is a property of *one* region and a region map can tell it.

The paper has no benchmark or code: the task is our design (notes, Sec. 6), faithful to its argument on
spatial context (relative position of two objects).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

TASKS = ("relation", "colour")
Task = Literal["relation", "colour"]
_RED = np.array([1.0, 0.2, 0.2], dtype=np.float32)
"""Red, relative to an object's intensity; a grey object is ``(1, 1, 1)`` times it."""


def _int_range(name: str, value: object, low: int) -> tuple[int, int]:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise TypeError(f"{name} must be a (low, high) tuple of ints, got {value!r}")
    lo, hi = value
    if not low <= lo <= hi:
        raise ValueError(f"{name} must satisfy {low} <= low <= high, got {value!r}")
    return lo, hi


@dataclass(frozen=True)
class RelationTaskConfig:
    """The generator of the relation-only task (notes, Sec. 6; the paper states no setting).

    Ranges are inclusive. The defaults make 32x32 RGB images whose object pair always fits.
    """

    image_size: int = 32
    """Side of the square image, pixels."""
    size_range: tuple[int, int] = (4, 6)
    """Side of each object (drawn independently for A and B), pixels: a narrow range, so size is no cue."""
    gap_range: tuple[int, int] = (1, 3)
    """Horizontal gap between the two objects, pixels ("within distance d": the objects nearly touch)."""
    max_vertical_offset: int = 2
    """B's vertical centre is A's plus an offset drawn from ``[-max_vertical_offset, max_vertical_offset]``."""
    noise_std: float = 0.1
    """Standard deviation of the Gaussian background noise (every channel)."""
    intensity_range: tuple[float, float] = (0.6, 1.0)
    """Brightness of each object, drawn independently for A and B."""
    task: Task = "relation"
    """``"relation"`` (label = B right of A) or ``"colour"`` (the control: label = B is the red object)."""

    def __post_init__(self) -> None:
        if isinstance(self.image_size, bool) or not isinstance(self.image_size, int) or self.image_size < 8:
            raise ValueError(f"image_size must be an int >= 8, got {self.image_size!r}")
        s_lo, s_hi = _int_range("size_range", self.size_range, 3)
        g_lo, g_hi = _int_range("gap_range", self.gap_range, 1)
        if isinstance(self.max_vertical_offset, bool) or not isinstance(self.max_vertical_offset, int) or self.max_vertical_offset < 0:
            raise ValueError(f"max_vertical_offset must be an int >= 0, got {self.max_vertical_offset!r}")
        if 2 * s_hi + g_hi > self.image_size:
            raise ValueError(
                f"the widest pair (2 * size_range[1] + gap_range[1] = {2 * s_hi + g_hi}) must fit in "
                f"image_size {self.image_size}"
            )
        if not isinstance(self.noise_std, (int, float)) or isinstance(self.noise_std, bool) or not (
            math.isfinite(self.noise_std) and self.noise_std >= 0
        ):
            raise ValueError(f"noise_std must be a finite number >= 0, got {self.noise_std!r}")
        lo, hi = self.intensity_range if isinstance(self.intensity_range, tuple) and len(self.intensity_range) == 2 else (None, None)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (lo, hi)) or not 0 < lo <= hi:
            raise ValueError(f"intensity_range must be a (low, high) tuple with 0 < low <= high, got {self.intensity_range!r}")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")


@dataclass(frozen=True)
class Scenes:
    """A batch of two-object scenes: the layout, the background and the rendered images.

    Attributes:
        config: the generator's config.
        labels: ``(n,)`` int64, the class of each scene under ``config.task``.
        xa, ya, sa: left column, top row and side of A (``(n,)`` int64).
        xb, yb, sb: the same for B.
        colour_a, colour_b: ``(n, 3)`` float32 RGB of each object.
        background: ``(n, 3, H, W)`` float32 noise under the objects (also the "object removed" reference of
            the segment Shapley values).
        images: ``(n, 3, H, W)`` float32, A painted on the background, then B's ring on top.
    """

    config: RelationTaskConfig
    labels: np.ndarray
    xa: np.ndarray
    ya: np.ndarray
    sa: np.ndarray
    xb: np.ndarray
    yb: np.ndarray
    sb: np.ndarray
    colour_a: np.ndarray
    colour_b: np.ndarray
    background: np.ndarray
    images: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def mask_a(self) -> np.ndarray:
        """``(n, H, W)`` bool: A's visible pixels (where B's ring covers A, the pixel is B's)."""
        return _square(self.xa, self.ya, self.sa, self.config.image_size) & ~self.mask_b

    @property
    def mask_b(self) -> np.ndarray:
        """``(n, H, W)`` bool: B's ring pixels."""
        return _ring(self.xb, self.yb, self.sb, self.config.image_size)

    @property
    def b_right_of_a(self) -> np.ndarray:
        """``(n,)`` bool: B's centre lies right of A's centre (the relation the relation task labels)."""
        return (2 * self.xb + self.sb) > (2 * self.xa + self.sa)

    @property
    def centre_offset(self) -> np.ndarray:
        """``(n,)`` float: B's centre column minus A's centre column, pixels (signed)."""
        return (self.xb + self.sb / 2.0) - (self.xa + self.sa / 2.0)

    def subset(self, index: np.ndarray) -> Scenes:
        """The scenes at ``index`` (an int or bool array)."""
        idx = np.asarray(index)
        return replace(self, **{k: getattr(self, k)[idx] for k in _ARRAYS})


_ARRAYS = ("labels", "xa", "ya", "sa", "xb", "yb", "sb", "colour_a", "colour_b", "background", "images")


def _grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:size, 0:size]
    return yy[None], xx[None]


def _square(x: np.ndarray, y: np.ndarray, s: np.ndarray, size: int) -> np.ndarray:
    yy, xx = _grid(size)
    x, y, s = (np.asarray(v)[:, None, None] for v in (x, y, s))
    return (xx >= x) & (xx < x + s) & (yy >= y) & (yy < y + s)


def _ring(x: np.ndarray, y: np.ndarray, s: np.ndarray, size: int) -> np.ndarray:
    """A one-pixel square outline of side ``s``."""
    inner = _square(np.asarray(x) + 1, np.asarray(y) + 1, np.asarray(s) - 2, size)
    return _square(x, y, s, size) & ~inner


def task_labels(config: RelationTaskConfig, b_right: np.ndarray, b_is_red: np.ndarray) -> np.ndarray:
    """The label rule: the relation task's is ``B right of A``; the colour task's is ``B is the red one``."""
    return (b_right if config.task == "relation" else b_is_red).astype(np.int64)


def render(scenes: Scenes) -> Scenes:
    """Scenes with ``images`` repainted from the layout and the background (A first, B's ring on top)."""
    mask_a = _square(scenes.xa, scenes.ya, scenes.sa, scenes.config.image_size)[:, None]
    mask_b = scenes.mask_b[:, None]
    img = np.where(mask_a, scenes.colour_a[:, :, None, None], scenes.background)
    img = np.where(mask_b, scenes.colour_b[:, :, None, None], img).astype(np.float32)
    return replace(scenes, images=img)


def _check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return int(n)


def _rng(seed: object) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def make_scenes(
    n: int,
    config: RelationTaskConfig | None = None,
    *,
    seed: int | np.random.Generator = 0,
    twins_fit: bool = False,
) -> Scenes:
    """Draw ``n`` scenes of the task (balanced labels in expectation).

    The pair (A, gap, B) is placed uniformly in the image, so neither object's column alone fixes the
    label (a model with translation-invariant features must use the relation).

    Args:
        n: number of scenes.
        config: the generator (default: :class:`RelationTaskConfig`).
        seed: an int or a numpy Generator.
        twins_fit: keep only scenes whose two mirrored twins (:func:`mirrored_twin` about A and about B) fit
            inside the image (used for the test scenes).
    """
    n = _check_n(n)
    config = RelationTaskConfig() if config is None else config
    if not isinstance(config, RelationTaskConfig):
        raise TypeError(f"config must be a RelationTaskConfig, got {type(config).__name__}")
    if not isinstance(twins_fit, bool):
        raise TypeError(f"twins_fit must be True or False, got {twins_fit!r}")
    rng = _rng(seed)
    parts: list[Scenes] = []
    have = 0
    while have < n:
        m = (n - have) * (4 if twins_fit else 1)
        s = _draw(m, config, rng)
        if twins_fit:
            s = s.subset(twin_fits(s, "a") & twin_fits(s, "b"))
        parts.append(s)
        have += len(s)
    out = parts[0] if len(parts) == 1 else replace(
        parts[0], **{k: np.concatenate([getattr(p, k) for p in parts]) for k in _ARRAYS}
    )
    return out.subset(np.arange(n))


def _draw(m: int, config: RelationTaskConfig, rng: np.random.Generator) -> Scenes:
    size = config.image_size
    s_lo, s_hi = config.size_range
    g_lo, g_hi = config.gap_range
    sa = rng.integers(s_lo, s_hi + 1, m)
    sb = rng.integers(s_lo, s_hi + 1, m)
    gap = rng.integers(g_lo, g_hi + 1, m)
    b_right = rng.random(m) < 0.5
    b_is_red = rng.random(m) < 0.5
    width = sa + gap + sb
    x0 = np.floor(rng.random(m) * (size - width + 1)).astype(np.int64)
    xa = np.where(b_right, x0, x0 + sb + gap)
    xb = np.where(b_right, x0 + sa + gap, x0)
    ya = np.floor(rng.random(m) * (size - sa + 1)).astype(np.int64)
    dy = rng.integers(-config.max_vertical_offset, config.max_vertical_offset + 1, m)
    # B's centre row is A's plus dy (integer rounding of the half-size difference), kept inside the image.
    yb = np.clip(ya + (sa - sb) // 2 + dy, 0, size - sb)
    lo, hi = config.intensity_range
    ia = rng.uniform(lo, hi, m).astype(np.float32)
    ib = rng.uniform(lo, hi, m).astype(np.float32)
    grey = np.ones(3, dtype=np.float32)
    if config.task == "colour":
        colour_a = np.where(b_is_red[:, None], grey, _RED) * ia[:, None]
        colour_b = np.where(b_is_red[:, None], _RED, grey) * ib[:, None]
    else:
        colour_a, colour_b = grey * ia[:, None], grey * ib[:, None]
    background = (config.noise_std * rng.standard_normal((m, 3, size, size))).astype(np.float32)
    scenes = Scenes(config, task_labels(config, b_right, b_is_red), xa, ya, sa.astype(np.int64), xb, yb,
                    sb.astype(np.int64), colour_a.astype(np.float32), colour_b.astype(np.float32), background,
                    np.empty(0, dtype=np.float32))  # fmt: skip
    return render(scenes)


def _check_about(about: object) -> str:
    if about not in ("a", "b"):
        raise ValueError(f"about must be 'a' (mirror B about A) or 'b' (mirror A about B), got {about!r}")
    return str(about)


def twin_fits(scenes: Scenes, about: str = "a") -> np.ndarray:
    """``(n,)`` bool: the mirrored twin of each scene (see :func:`mirrored_twin`) fits inside the image."""
    if not isinstance(scenes, Scenes):
        raise TypeError(f"scenes must be Scenes, got {type(scenes).__name__}")
    about = _check_about(about)
    size = scenes.config.image_size
    if about == "a":
        x = 2 * scenes.xa + scenes.sa - scenes.xb - scenes.sb
        return (x >= 0) & (x <= size - scenes.sb)
    x = 2 * scenes.xb + scenes.sb - scenes.xa - scenes.sa
    return (x >= 0) & (x <= size - scenes.sa)


def mirrored_twin(scenes: Scenes, about: str = "a") -> Scenes:
    """The mirrored twin of each scene: one object reflected about the other's vertical centre line.

    ``about="a"`` moves B to the mirror column about A (A and the background stay); ``about="b"`` moves A
    about B (B stays). Both objects remain, with the same sizes, colours, gap and rows; only which side B is
    on changes, so the relation label flips and the colour label stays. A model that reads a non-relational
    cue (B's column, A's column, a border) fails on one of the two twins; one that reads the relation does
    not (the notes' mirrored-twin test, Sec. 9).

    Raises:
        ValueError: when a twin does not fit in the image (draw the scenes with ``twins_fit=True``).
    """
    fits = twin_fits(scenes, about)
    if not fits.all():
        raise ValueError(
            f"scenes: {int((~fits).sum())} twin(s) about {about!r} leave the image; draw them with make_scenes(..., twins_fit=True)"
        )
    if about == "a":
        moved = replace(scenes, xb=2 * scenes.xa + scenes.sa - scenes.xb - scenes.sb)
    else:
        moved = replace(scenes, xa=2 * scenes.xb + scenes.sb - scenes.xa - scenes.sa)
    red_b = scenes.colour_b[:, 1] < scenes.colour_b[:, 0]
    moved = replace(moved, labels=task_labels(scenes.config, moved.b_right_of_a, red_b))
    return render(moved)


def mirror_scenes(scenes: Scenes) -> Scenes:
    """The scenes flipped left to right (background, both objects, their relation): the relation label
    flips, the colour label stays. Training on scenes together with their mirrors gives the model the
    task's own symmetry (mirror-equivariance), so no side of the image is special."""
    if not isinstance(scenes, Scenes):
        raise TypeError(f"scenes must be Scenes, got {type(scenes).__name__}")
    size = scenes.config.image_size
    flipped = replace(scenes, xa=size - scenes.xa - scenes.sa, xb=size - scenes.xb - scenes.sb,
                      background=np.ascontiguousarray(scenes.background[..., ::-1]))  # fmt: skip
    red_b = scenes.colour_b[:, 1] < scenes.colour_b[:, 0]
    return render(replace(flipped, labels=task_labels(scenes.config, flipped.b_right_of_a, red_b)))


def move_b(scenes: Scenes, xb: np.ndarray) -> Scenes:
    """The scenes with B's left column set to ``xb`` (A, the rows and the background stay): the
    counterfactual rearrangement of :func:`~icml24.evaluation.context_explanations.explain.relational_counterfactual`.
    B may overlap A (its ring is painted on top). Labels follow the task's rule (B right of A by centres).
    """
    if not isinstance(scenes, Scenes):
        raise TypeError(f"scenes must be Scenes, got {type(scenes).__name__}")
    xb = np.asarray(xb)
    if xb.shape != scenes.xb.shape or not np.issubdtype(xb.dtype, np.integer):
        raise ValueError(f"xb must be an int array of shape {scenes.xb.shape}, got {xb.dtype} {xb.shape}")
    size = scenes.config.image_size
    if (xb < 0).any() or (xb > size - scenes.sb).any():
        raise ValueError(f"xb must keep B inside the image (0 <= xb <= {size} - sb)")
    moved = replace(scenes, xb=xb.astype(np.int64))
    red_b = scenes.colour_b[:, 1] < scenes.colour_b[:, 0]
    return render(replace(moved, labels=task_labels(scenes.config, moved.b_right_of_a, red_b)))
