"""A synthetic scene world for the multimodal papers: images of coloured shapes with captions, questions and
ground-truth evidence.

Shared by the vision-language papers of issue 17 and later (crossget, uni-med, memvp, libra, the vision
variant of mcq-permutation). A *scene* is a small RGB image (default 32×32) on a uniform background holding
``1..max_objects`` objects, each with a colour, a shape, a size and a position on a ``grid × grid`` layout of
cells (one object per cell, so objects never overlap). Every scene comes with

- a caption from a template, with synonyms for shapes, colours and positions
  (``"a large red circle at the top left and a small blue square in the middle"``);
- question-answer pairs about colour, shape, count and existence (``"how many objects are there ?"`` →
  ``"two"``);
- per-object ground truth: boolean masks ``(B, K, H, W)`` and boxes ``(B, K, 4)`` as evidence for grounding
  metrics, and the attribute indices of every object slot;
- out-of-distribution splits: held-out caption templates (``split="ood_template"``) and held-out
  ``(colour, shape)`` combinations that never occur in ``split="train"`` and occur in every
  ``split="ood_combo"`` scene.

Rendering is vectorised over the batch with NumPy (a batch of 4096 32×32 scenes in a fraction of a second;
``benchmarks/bench_scenes.py`` and ``tests/multimodal/test_scenes.py`` time it), and every output is a pure
function of ``(n, config, seed, split)``.

Example::

    from icml24.multimodal.scenes import SceneConfig, generate_scenes
    batch = generate_scenes(256, config=SceneConfig(), seed=0)
    batch.images.shape, batch.captions[0], batch.questions[0], batch.answers[0]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = [
    "COLOURS",
    "POSITION_NAMES",
    "SHAPES",
    "SIZES",
    "SceneBatch",
    "SceneConfig",
    "TEMPLATES",
    "generate_scenes",
    "scene_vocabulary",
]

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.90, 0.15, 0.15),
    "green": (0.15, 0.80, 0.20),
    "blue": (0.20, 0.35, 0.95),
    "yellow": (0.95, 0.90, 0.15),
    "purple": (0.65, 0.25, 0.85),
    "cyan": (0.15, 0.85, 0.90),
    "orange": (0.98, 0.55, 0.10),
    "white": (0.95, 0.95, 0.95),
}
"""Colour names and their RGB values in ``[0, 1]``."""

SHAPES: tuple[str, ...] = ("square", "circle", "triangle", "diamond")
"""Shape names (the rendering rule of each is in :func:`_shape_masks`)."""

SIZES: dict[str, float] = {"small": 0.22, "large": 0.36}
"""Size names and the object's half-width as a fraction of a grid cell's side."""

POSITION_NAMES: dict[int, tuple[str, ...]] = {
    1: ("middle",),
    2: ("top left", "top right", "bottom left", "bottom right"),
    3: ("top left", "top", "top right", "left", "middle", "right", "bottom left", "bottom", "bottom right"),
}
"""Names of the grid cells, row-major, for each supported grid size."""

_SYNONYMS: dict[str, tuple[str, ...]] = {
    "square": ("square", "box", "block"),
    "circle": ("circle", "disc", "ball"),
    "triangle": ("triangle", "wedge"),
    "diamond": ("diamond", "rhombus"),
    "purple": ("purple", "violet"),
    "middle": ("middle", "centre"),
    "large": ("large", "big"),
    "small": ("small", "tiny"),
}
"""Caption synonyms; words without an entry are used as they are. Questions and answers use the canonical
words."""

_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

TEMPLATES: tuple[str, ...] = (
    "a {size} {colour} {shape} at the {position}",
    "a {colour} {shape} , {size} , at the {position}",
    "there is a {size} {colour} {shape} at the {position}",
    "the {position} holds a {size} {colour} {shape}",
    "at the {position} there is a {size} {colour} {shape}",
    "a {size} {shape} in {colour} at the {position}",
)
"""Per-object phrase templates; a caption joins one phrase per object with ``" and "``. The last
:attr:`SceneConfig.heldout_templates` of them are held out of ``split="train"``."""


@dataclass(frozen=True)
class SceneConfig:
    """What scenes look like. Defaults: the 32×32, 3×3-grid world of the crossget notes (§6, §9)."""

    image_size: int = 32
    """Side of the square image in pixels."""
    grid: int = 3
    """Objects sit in the cells of a ``grid × grid`` layout (1, 2 or 3); at most one object per cell."""
    min_objects: int = 1
    """Fewest objects in a scene."""
    max_objects: int = 3
    """Most objects in a scene (``K``, the number of object slots; at most ``grid**2``)."""
    colours: tuple[str, ...] = tuple(COLOURS)
    """The colour names in use (a subset of :data:`COLOURS`)."""
    shapes: tuple[str, ...] = SHAPES
    """The shape names in use (a subset of :data:`SHAPES`)."""
    sizes: tuple[str, ...] = tuple(SIZES)
    """The size names in use (a subset of :data:`SIZES`)."""
    background: tuple[float, float, float] = (0.08, 0.08, 0.10)
    """Uniform background RGB (uniform, so token merging has redundancy to exploit)."""
    jitter: float = 0.12
    """Largest shift of an object's centre from its cell's centre, as a fraction of the cell side (with the
    largest size at most 0.5, so an object never leaves its cell)."""
    noise: float = 0.0
    """Standard deviation of Gaussian pixel noise (0: noiseless)."""
    synonyms: bool = True
    """Captions draw shape, colour, size and position words from synonyms."""
    heldout_templates: int = 2
    """How many of the caption templates are used only by ``split="ood_template"``."""
    heldout_combinations: tuple[tuple[str, str], ...] = (("red", "triangle"), ("blue", "circle"))
    """``(colour, shape)`` pairs absent from ``"train"``/``"ood_template"`` and present in every
    ``"ood_combo"`` scene."""

    def __post_init__(self) -> None:
        if not isinstance(self.image_size, int) or self.image_size < 4:
            raise ValueError(f"image_size must be an int >= 4, got {self.image_size!r}")
        if self.grid not in POSITION_NAMES:
            raise ValueError(f"grid must be one of {sorted(POSITION_NAMES)}, got {self.grid!r}")
        if not isinstance(self.min_objects, int) or not isinstance(self.max_objects, int):
            raise TypeError("min_objects and max_objects must be ints")
        if not 1 <= self.min_objects <= self.max_objects <= self.grid**2:
            raise ValueError(f"need 1 <= min_objects <= max_objects <= grid**2 = {self.grid**2}, "
                             f"got min_objects={self.min_objects}, max_objects={self.max_objects}")  # fmt: skip
        for name, values, known in (("colours", self.colours, COLOURS), ("shapes", self.shapes, SHAPES),
                                    ("sizes", self.sizes, SIZES)):  # fmt: skip
            if not values or len(set(values)) != len(values) or any(v not in known for v in values):
                raise ValueError(f"{name} must be distinct names from {tuple(known)}, got {values!r}")
        limit = 0.5 - max(SIZES[s] for s in self.sizes)
        if not 0 <= self.jitter <= limit:
            raise ValueError(f"jitter must lie in [0, {limit:.2f}] (objects stay inside their cells), got {self.jitter!r}")
        if not self.noise >= 0:
            raise ValueError(f"noise must be >= 0, got {self.noise!r}")
        if not 0 <= self.heldout_templates < len(TEMPLATES):
            raise ValueError(f"heldout_templates must lie in [0, {len(TEMPLATES)}), got {self.heldout_templates!r}")
        for pair in self.heldout_combinations:
            if len(pair) != 2 or pair[0] not in self.colours or pair[1] not in self.shapes:
                raise ValueError(f"heldout_combinations must hold (colour, shape) pairs of the configured colours "
                                 f"and shapes, got {pair!r}")  # fmt: skip
        if len(set(self.heldout_combinations)) >= len(self.colours) * len(self.shapes):
            raise ValueError("heldout_combinations must leave at least one (colour, shape) pair for training")
        if len(self.background) != 3:
            raise ValueError(f"background must be an RGB triple, got {self.background!r}")

    @property
    def num_slots(self) -> int:
        """``K``: object slots per scene (= ``max_objects``); unused slots have ``present == False``."""
        return self.max_objects

    @property
    def position_names(self) -> tuple[str, ...]:
        return POSITION_NAMES[self.grid]


@dataclass
class SceneBatch:
    """``n`` generated scenes: arrays with a leading batch axis, plus the text.

    Object attributes are indices into the config's ``colours``, ``shapes``, ``sizes`` and
    ``position_names``; slot ``k`` of scene ``i`` is a real object iff ``present[i, k]`` (the present slots
    come first, so ``present[i, :count[i]]`` is all True).
    """

    images: np.ndarray
    """``(n, 3, H, W)`` float32 in ``[0, 1]`` (channels first, as torch expects)."""
    masks: np.ndarray
    """``(n, K, H, W)`` bool: the pixels of each object (all False for an absent slot)."""
    boxes: np.ndarray
    """``(n, K, 4)`` int64 ``(x0, y0, x1, y1)`` pixel boxes, end-exclusive (zeros for an absent slot)."""
    present: np.ndarray
    """``(n, K)`` bool."""
    colour: np.ndarray
    """``(n, K)`` int64 colour index (``-1`` for absent slots); likewise ``shape``, ``size``, ``cell``."""
    shape: np.ndarray
    size: np.ndarray
    cell: np.ndarray
    """``(n, K)`` int64 grid cell, row-major."""
    count: np.ndarray
    """``(n,)`` int64 number of objects."""
    captions: list[str]
    """One caption per scene (lower case, words separated by single spaces)."""
    questions: list[str]
    """One question per scene."""
    answers: list[str]
    """The answer of each question (a single word)."""
    question_types: list[str]
    """``"colour"``, ``"shape"``, ``"count"`` or ``"exists"`` per question."""
    keys: list[str]
    """A canonical description of each scene's content (same key ⇔ same objects in the same cells, up to
    jitter): two captions of equal-key scenes are equally right, which retrieval metrics must allow for."""
    config: SceneConfig = field(repr=False)
    split: str = "train"

    def __len__(self) -> int:
        return len(self.captions)


Split = Literal["train", "ood_template", "ood_combo"]


def scene_vocabulary(config: SceneConfig | None = None) -> list[str]:
    """Every word a caption, question or answer can contain, sorted (build a ``WordTokenizer`` from it)."""
    config = config or SceneConfig()
    words: set[str] = set(_NUMBERS) | {"yes", "no"}
    for t in TEMPLATES:
        words.update(w for w in t.split() if not w.startswith("{"))
    words.update({"and"})
    for name in (*config.colours, *config.shapes, *config.sizes, *config.position_names):
        for part in name.split():
            words.update(_SYNONYMS.get(part, (part,)))
            words.update(s for syn in _SYNONYMS.get(name, ()) for s in syn.split())
    for q in _QUESTION_TEMPLATES.values():
        words.update(w for w in q.split() if not w.startswith("{"))
    return sorted(words)


_QUESTION_TEMPLATES = {
    "colour": "what colour is the {shape} at the {position} ?",
    "shape": "what shape is at the {position} ?",
    "count": "how many objects are there ?",
    "exists": "is there a {colour} {shape} ?",
}


def _sample_attributes(rng: np.random.Generator, n: int, config: SceneConfig, split: str):
    """Counts, cells and attributes of ``n`` scenes (vectorised; held-out combinations by resampling)."""
    k, cells = config.num_slots, config.grid**2
    count = rng.integers(config.min_objects, config.max_objects + 1, size=n)
    present = np.arange(k)[None, :] < count[:, None]
    cell = np.argsort(rng.random((n, cells)), axis=1)[:, :k]
    colour = rng.integers(0, len(config.colours), size=(n, k))
    shape = rng.integers(0, len(config.shapes), size=(n, k))
    size = rng.integers(0, len(config.sizes), size=(n, k))
    held = np.array([[config.colours.index(c), config.shapes.index(s)] for c, s in config.heldout_combinations],
                    dtype=np.int64).reshape(-1, 2)  # fmt: skip
    if len(held):
        def is_held(col: np.ndarray, shp: np.ndarray) -> np.ndarray:
            return ((col[..., None] == held[:, 0]) & (shp[..., None] == held[:, 1])).any(-1)

        # Rejection: resample the colour of every held-out slot until none is left (a few rounds at most).
        bad = is_held(colour, shape)
        while bad.any():
            colour[bad] = rng.integers(0, len(config.colours), size=int(bad.sum()))
            bad = is_held(colour, shape)
        if split == "ood_combo":
            # One random real object per scene takes a held-out (colour, shape) pair.
            slot = (rng.random(n) * count).astype(np.int64)
            pair = held[rng.integers(0, len(held), size=n)]
            colour[np.arange(n), slot] = pair[:, 0]
            shape[np.arange(n), slot] = pair[:, 1]
    for a in (colour, shape, size, cell):
        a[~present] = -1
    return count, present, cell, colour, shape, size


def _shape_masks(dx: np.ndarray, dy: np.ndarray, r: np.ndarray, shape: np.ndarray, names: tuple[str, ...]):
    """Pixel masks of every slot from offsets ``dx, dy`` to the object's centre and half-width ``r``."""
    rules = {
        "square": lambda: (np.abs(dx) <= r) & (np.abs(dy) <= r),
        "circle": lambda: dx**2 + dy**2 <= r**2,
        # Apex up: the half-width grows linearly from 0 at the top (dy = -r) to r at the base (dy = r).
        "triangle": lambda: (dy >= -r) & (dy <= r) & (np.abs(dx) <= (dy + r) / 2),
        "diamond": lambda: np.abs(dx) + np.abs(dy) <= r,
    }
    mask = np.zeros(np.broadcast_shapes(dx.shape, dy.shape, r.shape, shape.shape), dtype=bool)
    for i, name in enumerate(names):
        sel = shape == i
        if sel.any():
            mask |= sel & rules[name]()
    return mask


def generate_scenes(n: int, *, config: SceneConfig | None = None, seed: int = 0, split: Split = "train") -> SceneBatch:
    """Generate ``n`` scenes (images, masks, boxes, captions, questions), a pure function of its arguments.

    Args:
        n: number of scenes (>= 1).
        config: the scene world; ``None`` means :class:`SceneConfig` ``()``.
        seed: seed of NumPy's ``default_rng``.
        split: ``"train"`` (training templates, no held-out combinations), ``"ood_template"`` (held-out
            templates only, no held-out combinations) or ``"ood_combo"`` (training templates, every scene has
            an object with a held-out ``(colour, shape)`` pair).

    Returns:
        A :class:`SceneBatch`.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    config = SceneConfig() if config is None else config
    if not isinstance(config, SceneConfig):
        raise TypeError(f"config must be a SceneConfig, got {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if split not in ("train", "ood_template", "ood_combo"):
        raise ValueError(f"split must be 'train', 'ood_template' or 'ood_combo', got {split!r}")
    if split == "ood_combo" and not config.heldout_combinations:
        raise ValueError("split='ood_combo' needs config.heldout_combinations")
    if split == "ood_template" and config.heldout_templates == 0:
        raise ValueError("split='ood_template' needs config.heldout_templates >= 1")
    n = int(n)
    rng = np.random.default_rng(seed)
    count, present, cell, colour, shape, size = _sample_attributes(rng, n, config, split)

    # Geometry: each object is a stamp (its shape rule evaluated once on a small patch) placed at its cell's
    # centre plus a whole-pixel jitter; placing stamps by fancy indexing keeps rendering O(n K patch²).
    hw = config.image_size
    side = hw / config.grid
    k = config.num_slots
    row, col = np.divmod(np.where(present, cell, 0), config.grid)
    max_shift = int(np.floor(config.jitter * side))
    shift = rng.integers(-max_shift, max_shift + 1, size=(n, k, 2))
    cx = np.floor((col + 0.5) * side).astype(np.int64) + shift[..., 0]
    cy = np.floor((row + 0.5) * side).astype(np.int64) + shift[..., 1]
    half = np.array([SIZES[s] for s in config.sizes]) * side  # (n_sizes,) half-widths in pixels
    reach = int(np.ceil(half.max()))
    offsets = np.arange(-reach, reach + 1, dtype=np.float64)
    ody, odx = np.meshgrid(offsets, offsets, indexing="ij")
    n_shapes = len(config.shapes)
    stamps = _shape_masks(odx[None, None], ody[None, None], half[None, :, None, None],
                          np.arange(n_shapes)[:, None, None, None], config.shapes)  # (n_shapes, n_sizes, P, P)
    stamp = stamps[np.where(present, shape, 0), np.where(present, size, 0)] & present[..., None, None]
    py = np.clip(cy[..., None, None] + np.arange(-reach, reach + 1)[:, None], 0, hw - 1)
    px = np.clip(cx[..., None, None] + np.arange(-reach, reach + 1)[None, :], 0, hw - 1)
    ni, ki = np.nonzero(present)
    masks = np.zeros((n, k, hw, hw), dtype=bool)
    masks[ni[:, None, None], ki[:, None, None], py[ni, ki], px[ni, ki]] = stamp[ni, ki]

    # Compose: background, then each object's colour on its pixels (cells are disjoint: no overlaps).
    palette = np.array([COLOURS[c] for c in config.colours], dtype=np.float32)
    images = np.empty((n, hw, hw, 3), dtype=np.float32)
    images[:] = np.asarray(config.background, dtype=np.float32)
    on = masks[ni, ki]  # (m, H, W) for the m real objects
    obj_rgb = palette[colour[ni, ki]]
    hit_n, hit_y, hit_x = np.nonzero(on)
    images[ni[hit_n], hit_y, hit_x] = obj_rgb[hit_n]
    images = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    if config.noise > 0:
        images = np.clip(images + rng.normal(0, config.noise, images.shape).astype(np.float32), 0, 1)

    # Boxes from the masks (end-exclusive).
    any_x, any_y = masks.any(2), masks.any(3)  # (n, K, W), (n, K, H)
    idx = np.arange(hw)
    big = hw + 1
    x0 = np.where(any_x, idx, big).min(-1)
    x1 = np.where(any_x, idx, -1).max(-1) + 1
    y0 = np.where(any_y, idx, big).min(-1)
    y1 = np.where(any_y, idx, -1).max(-1) + 1
    boxes = np.stack([x0, y0, x1, y1], -1).astype(np.int64)
    boxes[~masks.any((2, 3))] = 0

    captions, questions, answers, qtypes, keys = _texts(rng, n, config, split, count, cell, colour, shape, size)
    return SceneBatch(images=images.astype(np.float32, copy=False), masks=masks, boxes=boxes, present=present,
                      colour=colour, shape=shape, size=size, cell=cell, count=count.astype(np.int64),
                      captions=captions, questions=questions, answers=answers, question_types=qtypes, keys=keys,
                      config=config, split=split)  # fmt: skip


def _texts(rng, n, config, split, count, cell, colour, shape, size):
    """Captions (one phrase per object, objects in reading order), one question each, content keys."""
    n_train = len(TEMPLATES) - config.heldout_templates
    pool = TEMPLATES[n_train:] if split == "ood_template" else TEMPLATES[:n_train]
    k = config.num_slots
    template_idx = rng.integers(0, len(pool), size=(n, k))
    syn_draw = rng.random((n, k, 4))
    qtype_idx = rng.integers(0, 4, size=n)
    q_slot = (rng.random(n) * count).astype(np.int64)
    exists_draw = rng.random((n, 3))
    names = config.position_names

    def word(name: str, u: float) -> str:
        if not config.synonyms:
            return name
        options = _SYNONYMS.get(name, (name,))
        return options[int(u * len(options))]

    captions, questions, answers, qtypes, keys = [], [], [], [], []
    for i in range(n):
        c = int(count[i])
        order = np.argsort(cell[i, :c], kind="stable")  # reading order: row-major cells
        phrases, key = [], []
        for j in order:
            u = syn_draw[i, j]
            cname, sname, zname, pname = (config.colours[colour[i, j]], config.shapes[shape[i, j]],
                                          config.sizes[size[i, j]], names[cell[i, j]])  # fmt: skip
            phrases.append(pool[template_idx[i, j]].format(size=word(zname, u[0]), colour=word(cname, u[1]),
                                                           shape=word(sname, u[2]), position=word(pname, u[3])))  # fmt: skip
            key.append(f"{zname} {cname} {sname} @{cell[i, j]}")
        captions.append(" and ".join(phrases))
        keys.append(" | ".join(key))
        j = int(q_slot[i])
        qtype = ("colour", "shape", "count", "exists")[qtype_idx[i]]
        if qtype == "colour":
            q = _QUESTION_TEMPLATES["colour"].format(shape=config.shapes[shape[i, j]], position=names[cell[i, j]])
            a = config.colours[colour[i, j]]
        elif qtype == "shape":
            q, a = _QUESTION_TEMPLATES["shape"].format(position=names[cell[i, j]]), config.shapes[shape[i, j]]
        elif qtype == "count":
            q, a = _QUESTION_TEMPLATES["count"], _NUMBERS[c]
        else:
            # Half the time ask about a present object, otherwise about a random pair (answer computed).
            if exists_draw[i, 0] < 0.5:
                ci, si = int(colour[i, j]), int(shape[i, j])
            else:
                ci = int(exists_draw[i, 1] * len(config.colours))
                si = int(exists_draw[i, 2] * len(config.shapes))
            has = bool(((colour[i, :c] == ci) & (shape[i, :c] == si)).any())
            q = _QUESTION_TEMPLATES["exists"].format(colour=config.colours[ci], shape=config.shapes[si])
            a = "yes" if has else "no"
        questions.append(q)
        answers.append(a)
        qtypes.append(qtype)
    return captions, questions, answers, qtypes, keys
