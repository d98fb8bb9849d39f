"""Toy-Med-VQA: synthetic "scans" with questions, intent spans and ground-truth evidence patches.

Stands in for the IAI-Med VQA data of Uni-Med (Wu et al., ICML 2024, Section 3): there, GPT-4V marks the
"real intention" span of each question (``<real_intention>..</real_intention>``) and writes a visual
explanation of the evidence behind the answer. Here the generator knows both exactly:

- an image is a ``16 x 16`` grayscale scan with two organ ellipses (left and right) on a noisy background,
  CT-like or MRI-like contrast, and per organ 0 or 1 lesion (bright or dark, small or large);
- a question asks about one organ from four templates (two closed yes/no, two open), wrapped in a
  distractor clause of ``distractor_words`` words that mentions organs, sides and lesion attributes at random
  (the "non-core instruction interference" of the paper), with the intent span tagged;
- the evidence is the set of ``4 x 4`` patches (16 of them) that overlap the asked organ: the answer is a function of those
  pixels alone, so pasting them into another scan keeps the answer (what token-level cut-mix relies on).

Everything is vectorised with numpy and deterministic per seed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from icml24.language.tokenizers import WordTokenizer

__all__ = [
    "ANSWERS",
    "CLOSED_ANSWERS",
    "INTENT_TAG",
    "QUESTION_TYPES",
    "ToyMedVQA",
    "ToyMedVQAConfig",
    "closest_candidate",
    "make_toy_med_vqa",
    "parse_intent",
    "question_tokenizer",
]

INTENT_TAG = "real_intention"
"""The tag name of the intent spans, as in the released IAI-Med VQA annotations."""
_TAG_RE = re.compile(rf"<{INTENT_TAG}>(.*?)</{INTENT_TAG}>", flags=re.S)

SIDES = ("left", "right")
KINDS = ("bright", "dark")
SIZES = ("small", "large")
QUESTION_TYPES = ("presence", "bright", "kind", "size")
"""presence / bright are closed (yes/no), kind / size are open (bright/dark/none, small/large/none)."""
_TEMPLATES = {
    "presence": "is there a lesion in the {side} organ",
    "bright": "is there a bright lesion in the {side} organ",
    "kind": "what kind of lesion is in the {side} organ",
    "size": "what size is the lesion in the {side} organ",
}
ANSWERS = ("yes", "no", "bright", "dark", "small", "large", "none")
"""The answer vocabulary (class ids in this order)."""
CLOSED_ANSWERS = ("yes", "no")
_FILLER = ("the", "patient", "scan", "axial", "image", "prior", "history", "report", "noted", "with", "of", "on",
           "this", "study", "follow", "up", "view", "was", "and", "shows", "a", "an", "seen", "previous")  # fmt: skip
_CONFUSERS = ("left", "right", "bright", "dark", "small", "large", "lesion", "organ", "there", "is", "what")


def question_tokenizer() -> WordTokenizer:
    """The word tokenizer of every Toy-Med-VQA question (templates and distractors; ``<pad>`` is id 0)."""
    words = set(_FILLER) | set(_CONFUSERS) | set(SIDES) | set(KINDS) | set(SIZES)
    for t in _TEMPLATES.values():
        words |= set(t.replace("{side}", "").split())
    return WordTokenizer(sorted(words))


def parse_intent(text: str) -> tuple[str, list[str], list[bool]]:
    """Strip the ``<real_intention>`` tags of a question (the IAI annotation format).

    Returns ``(plain_text, spans, word_mask)``: the text without tags (white space as in the input), the tagged
    spans, and for each white-space separated word of ``plain_text`` whether it lies inside a span.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    opened, closed = text.count(f"<{INTENT_TAG}>"), text.count(f"</{INTENT_TAG}>")
    if opened != closed or opened != len(_TAG_RE.findall(text)):
        raise ValueError(f"text has unbalanced or nested <{INTENT_TAG}> tags: {text!r}")
    spans = _TAG_RE.findall(text)
    plain = _TAG_RE.sub(r"\1", text)
    mask: list[bool] = []
    pos = 0
    for m in _TAG_RE.finditer(text):
        mask += [False] * len(text[pos : m.start()].split()) + [True] * len(m.group(1).split())
        pos = m.end()
    mask += [False] * len(text[pos:].split())
    if len(mask) != len(plain.split()):
        raise ValueError(f"text must put tags between words, not inside one: {text!r}")
    return plain, spans, mask


def closest_candidate(prediction: str, candidates: list[str] | tuple[str, ...]) -> int:
    """Index of the candidate answer most similar to a generated ``prediction`` (difflib ratio; the
    official evaluation maps generations to closed-question candidates this way). Ties go to the first."""
    import difflib

    if not isinstance(prediction, str):
        raise TypeError(f"prediction must be a str, got {type(prediction).__name__}")
    if isinstance(candidates, str) or not len(candidates) or not all(isinstance(c, str) for c in candidates):
        raise ValueError("candidates must be a non-empty list of str")
    scores = [difflib.SequenceMatcher(None, c, prediction).ratio() for c in candidates]
    return int(np.argmax(scores))


@dataclass(frozen=True)
class ToyMedVQAConfig:
    """How the synthetic scans and questions are drawn."""

    image_size: int = 16
    """Side of the square scan in pixels (shapes are drawn in units of a 32-pixel scan and scaled)."""
    patch_size: int = 4
    """Side of an evidence patch (the model's patch size); must divide ``image_size``."""
    distractor_words: int = 5
    """Words of distractor text around the intent span (split at random before and after it)."""
    lesion_rate: float = 0.5
    """Probability that an organ carries a lesion."""
    noise: float = 0.05
    """Standard deviation of the pixel noise."""
    confuser_rate: float = 0.4
    """Share of distractor words drawn from the task words (sides, kinds, sizes, "lesion", "organ")."""

    def __post_init__(self) -> None:
        if isinstance(self.image_size, bool) or not isinstance(self.image_size, int) or self.image_size < 16:
            raise ValueError(f"image_size must be an int >= 16, got {self.image_size!r}")
        if (isinstance(self.patch_size, bool) or not isinstance(self.patch_size, int) or self.patch_size < 1
                or self.image_size % self.patch_size):  # fmt: skip
            raise ValueError(f"patch_size must be a positive int dividing image_size, got {self.patch_size!r}")
        if isinstance(self.distractor_words, bool) or not isinstance(self.distractor_words, int) or self.distractor_words < 0:
            raise ValueError(f"distractor_words must be an int >= 0, got {self.distractor_words!r}")
        for name in ("lesion_rate", "confuser_rate"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{name} must be a probability in [0, 1], got {v!r}")
        if isinstance(self.noise, bool) or not isinstance(self.noise, (int, float)) or not 0 <= self.noise < 1:
            raise ValueError(f"noise must be a number in [0, 1), got {self.noise!r}")


@dataclass(frozen=True)
class ToyMedVQA:
    """A Toy-Med-VQA split. Arrays share the first axis (``n`` samples).

    Attributes:
        images: ``(n, 1, H, W)`` float32 scans.
        questions: ``(n, L)`` int64 word ids (:func:`question_tokenizer`), right-padded with 0.
        intent_mask: ``(n, L)`` bool, True on the words of the intent span.
        answers: ``(n,)`` int64 ids into :data:`ANSWERS`.
        is_closed: ``(n,)`` bool, True for yes/no questions.
        evidence: ``(n, P)`` bool over the ``P`` patches (row-major), True where a patch overlaps the asked organ.
        texts: the tagged questions.
        side, question_type: ``(n,)`` int ids into ``("left", "right")`` and :data:`QUESTION_TYPES`.
        organ_masks: ``(n, 2, H, W)`` bool pixel masks of the left and right organ.
        findings: ``(n, 2)`` int64 finding of the left and right organ: 0 none, 1 small bright, 2 large bright,
            3 small dark, 4 large dark lesion (image-level labels, for pretraining an image encoder).
    """

    images: np.ndarray
    questions: np.ndarray
    intent_mask: np.ndarray
    answers: np.ndarray
    is_closed: np.ndarray
    evidence: np.ndarray
    texts: tuple[str, ...]
    side: np.ndarray
    question_type: np.ndarray
    organ_masks: np.ndarray = field(repr=False)
    findings: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 2), np.int64))

    def __len__(self) -> int:
        return int(self.answers.shape[0])

    def subset(self, index: np.ndarray | slice) -> ToyMedVQA:
        """The samples at ``index`` (an index array, boolean mask or slice)."""
        idx = np.arange(len(self))[index]
        return ToyMedVQA(self.images[idx], self.questions[idx], self.intent_mask[idx], self.answers[idx],
                         self.is_closed[idx], self.evidence[idx], tuple(self.texts[i] for i in idx),
                         self.side[idx], self.question_type[idx], self.organ_masks[idx],
                         self.findings[idx])  # fmt: skip


def _render(rng: np.random.Generator, n: int, size: int, cfg: ToyMedVQAConfig):
    """Scans, organ masks and lesion attributes (``has``, ``kind``, ``big``: ``(n, 2)``)."""
    r = np.arange(size, dtype=np.float32)[None, :, None]
    c = np.arange(size, dtype=np.float32)[None, None, :]
    scale = size / 32.0
    mri = rng.random(n) < 0.5
    organ_level = np.where(mri, 0.45, 0.55).astype(np.float32)
    images = cfg.noise * rng.standard_normal((n, size, size)).astype(np.float32)
    masks = np.zeros((n, 2, size, size), bool)
    has = rng.random((n, 2)) < cfg.lesion_rate
    kind = rng.integers(0, 2, (n, 2))  # 0 bright, 1 dark
    big = rng.integers(0, 2, (n, 2))  # 0 small, 1 large
    for s, base_col in enumerate((8.5, 23.5)):
        cy = (16.0 + rng.uniform(-0.5, 0.5, n)) * scale
        cx = (base_col + rng.uniform(-0.5, 0.5, n)) * scale
        a = rng.uniform(9.0, 11.0, n) * scale
        b = rng.uniform(5.0, 6.0, n) * scale
        organ = ((r - cy[:, None, None]) / a[:, None, None]) ** 2 + ((c - cx[:, None, None]) / b[:, None, None]) ** 2 <= 1
        masks[:, s] = organ
        images += organ * (organ_level[:, None, None] + 0.03 * rng.standard_normal((n, size, size)).astype(np.float32))
        radius = np.where(big[:, s] == 1, 4.0, 2.4) * scale
        theta = rng.uniform(0, 2 * np.pi, n)
        u = np.sqrt(rng.random(n))
        ly = cy + u * (a - radius - 1) * np.sin(theta)
        lx = cx + u * np.maximum(b - radius - 1, 0) * np.cos(theta)
        disk = (r - ly[:, None, None]) ** 2 + (c - lx[:, None, None]) ** 2 <= radius[:, None, None] ** 2
        contrast = np.where(kind[:, s] == 0, 0.4, -0.4).astype(np.float32)
        images += (disk & organ & has[:, s, None, None]) * contrast[:, None, None]
    return images[:, None].astype(np.float32), masks, has, kind, big


def make_toy_med_vqa(n: int, *, config: ToyMedVQAConfig | None = None, seed: int = 0,
                     max_question_len: int | None = None) -> ToyMedVQA:  # fmt: skip
    """Draw ``n`` Toy-Med-VQA samples (deterministic per ``seed``).

    Args:
        n: number of samples (``>= 1``).
        config: the generator's settings (:class:`ToyMedVQAConfig`).
        seed: the seed of the numpy generator.
        max_question_len: pad the questions to this many words (default: the longest question possible
            at ``config.distractor_words``, so splits drawn with one config share a width).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    cfg = ToyMedVQAConfig() if config is None else config
    if not isinstance(cfg, ToyMedVQAConfig):
        raise TypeError(f"config must be a ToyMedVQAConfig, got {type(cfg).__name__}")
    longest = max(len(t.split()) for t in _TEMPLATES.values()) + cfg.distractor_words
    width = longest if max_question_len is None else max_question_len
    if isinstance(width, bool) or not isinstance(width, int) or width < longest:
        raise ValueError(f"max_question_len must be an int >= {longest} (the longest question), got {width!r}")
    n = int(n)
    rng = np.random.default_rng(int(seed))
    size, p = cfg.image_size, cfg.patch_size
    images, masks, has, kind, big = _render(rng, n, size, cfg)
    side = rng.integers(0, 2, n)
    qtype = rng.integers(0, len(QUESTION_TYPES), n)
    rows = np.arange(n)
    h, k, g = has[rows, side], kind[rows, side], big[rows, side]
    yes, no = ANSWERS.index("yes"), ANSWERS.index("no")
    answer = np.select(
        [qtype == 0, qtype == 1, qtype == 2, qtype == 3],
        [np.where(h, yes, no),
         np.where(h & (k == 0), yes, no),
         np.where(h, np.where(k == 0, ANSWERS.index("bright"), ANSWERS.index("dark")), ANSWERS.index("none")),
         np.where(h, np.where(g == 1, ANSWERS.index("large"), ANSWERS.index("small")), ANSWERS.index("none"))],
    ).astype(np.int64)  # fmt: skip
    organ = masks[rows, side]  # (n, H, W)
    grid = size // p
    evidence = organ.reshape(n, grid, p, grid, p).any(axis=(2, 4)).reshape(n, grid * grid)
    # Distractor words: filler or task words ("confusers"), split at random around the intent span.
    d = cfg.distractor_words
    confuse = rng.random((n, d)) < cfg.confuser_rate
    filler_ids = rng.integers(0, len(_FILLER), (n, d))
    confuser_ids = rng.integers(0, len(_CONFUSERS), (n, d))
    cut = rng.integers(0, d + 1, n)
    tok = question_tokenizer()
    questions = np.zeros((n, width), np.int64)
    intent = np.zeros((n, width), bool)
    texts = []
    for i in range(n):
        words = [(_CONFUSERS[confuser_ids[i, j]] if confuse[i, j] else _FILLER[filler_ids[i, j]]) for j in range(d)]
        core = _TEMPLATES[QUESTION_TYPES[qtype[i]]].format(side=SIDES[side[i]])
        before, after = words[: cut[i]], words[cut[i] :]
        texts.append(" ".join([*before, f"<{INTENT_TAG}>{core}</{INTENT_TAG}>", *after]))
        ids = tok.encode(" ".join([*before, core, *after]))
        questions[i, : len(ids)] = ids
        n_core = len(core.split())
        intent[i, len(before) : len(before) + n_core] = True
    findings = np.where(has, 1 + 2 * kind + big, 0).astype(np.int64)
    return ToyMedVQA(images, questions, intent, answer, qtype < 2, evidence, tuple(texts), side.astype(np.int64),
                     qtype.astype(np.int64), masks, findings)  # fmt: skip
