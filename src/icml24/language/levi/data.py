"""Generated tasks with a distribution shift for LEVI's miniature reproduction (no downloads).

LEVI (Roh et al., ICML 2024, https://arxiv.org/abs/2402.04644) argues that fine-tuning fails out of
distribution for two reasons at once: the fine-tuning data carry spurious shortcuts, and the pre-trained
model lacks features the new (sub)domain needs. :func:`make_review_task` builds a text task with both
flaws, so that neither a probe of the pre-trained model nor a model trained from scratch is enough alone:

* the label (the sentiment of a product review) is carried in each review either by an ordinary English
  sentiment word (a pre-trained encoder knows these, including synonyms it never saw in the fine-tuning
  data) or, in a ``jargon_fraction`` of the reviews, only by an invented domain word ("the gasket is
  florbid") that a pre-trained encoder cannot know (it splits it into word pieces) but a bag-of-words
  model trained from scratch learns;
* a brand name agrees with the label in a fraction ``rho`` of the training and in-distribution (ID)
  reviews and in ``1 - rho`` of the out-of-distribution (OOD) ones (a shortcut that flips);
* OOD reviews use sentence templates and ordinary sentiment words that never occur in training, so a
  model trained from scratch has no feature for them while the pre-trained encoder does.

:func:`make_digit_task` is the vision counterpart on scikit-learn's bundled 8x8 digits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "BRANDS",
    "JARGON",
    "DigitTask",
    "ReviewSplit",
    "ReviewTask",
    "SENTIMENT_WORDS",
    "make_digit_task",
    "make_review_task",
]

SENTIMENT_WORDS: dict[str, dict[int, tuple[str, ...]]] = {
    # Ordinary sentiment adjectives; the "ood" ones never occur in training or ID reviews.
    "train": {
        1: ("great", "excellent", "wonderful", "good", "fantastic", "nice", "superb", "lovely"),
        0: ("terrible", "awful", "bad", "horrible", "poor", "dreadful", "lousy", "disappointing"),
    },
    "ood": {
        1: ("amazing", "outstanding", "brilliant", "splendid", "delightful", "marvelous", "terrific", "perfect"),
        0: ("defective", "faulty", "useless", "pathetic", "miserable", "broken", "inferior", "worthless"),
    },
}
"""Ordinary sentiment words by split (``"train"`` for training and ID, ``"ood"`` for OOD) and label."""

JARGON: dict[int, tuple[str, ...]] = {
    # Invented words: a pre-trained encoder has never seen them as words; their meaning exists only in the
    # fine-tuning data (the "new subdomain" of the paper). The same words are used in every split.
    1: ("zentic", "quorvy", "plimsome", "vadrous", "glenty", "brisomal"),
    0: ("florbid", "skarnish", "druvic", "mallowish", "grevous", "tolkish"),
}
"""Domain jargon by label: the only sentiment cue in a ``jargon_fraction`` of the reviews."""

BRANDS: dict[int, tuple[str, ...]] = {1: ("Acme", "Zorbex"), 0: ("Globex", "Vantor")}
"""Brand names, grouped by the label they agree with in training (the spurious shortcut)."""

PARTS = ("gasket", "hinge", "valve", "filter", "switch", "motor", "battery", "screen", "handle", "nozzle")
PRODUCTS = ("blender", "kettle", "drill", "vacuum", "heater", "toaster", "fan", "printer", "mixer", "router")
FILLERS = ("I bought it last month.", "It arrived on time.", "The box was plain.", "My sister has one too.",
           "I use it every day.", "Shipping took a week.", "It came in blue.", "The manual is short.")  # fmt: skip

TEMPLATES = {
    # {brand} {product} {word}: an ordinary sentiment review; {part} {jargon}: a jargon-only review.
    "train": {
        "word": ("The {brand} {product} is {word}.", "This {product} from {brand} is {word}.",
                 "I think the {brand} {product} is {word}.", "{brand} made a {word} {product}."),
        "jargon": ("The {part} of the {brand} {product} is {jargon}.", "On this {brand} {product} the {part} is {jargon}.",
                   "The {brand} {product} has a {jargon} {part}.", "Its {part} is {jargon}, says my {brand} {product} log."),
    },
    "ood": {
        "word": ("Honestly, my new {product} by {brand} turned out {word}.", "Overall the {product} ({brand}) felt {word} to use.",
                 "After a week with the {brand} {product}: {word}."),
        "jargon": ("Honestly, the {part} on my {product} by {brand} turned out {jargon}.",
                   "After a week with the {brand} {product}, the {part} seems {jargon}."),
    },
}  # fmt: skip
"""Sentence templates by split and cue; the OOD templates never occur in training or ID reviews."""


@dataclass(frozen=True)
class ReviewSplit:
    """One split of the review task."""

    texts: list[str]
    """The reviews."""
    labels: np.ndarray
    """Sentiment, 1 positive / 0 negative, shape ``(n,)`` int64."""
    brand_agrees: np.ndarray
    """Whether the brand's training-time group equals the label (the shortcut holds), shape ``(n,)`` bool."""
    jargon_only: np.ndarray
    """Whether the only sentiment cue is a jargon word, shape ``(n,)`` bool."""


@dataclass(frozen=True)
class ReviewTask:
    """Training, ID validation, ID test and OOD test splits of the review task."""

    train: ReviewSplit
    val: ReviewSplit
    test_id: ReviewSplit
    test_ood: ReviewSplit
    rho: float
    """Brand-label agreement in training and ID (``1 - rho`` in OOD)."""
    jargon_fraction: float
    """Fraction of reviews whose only sentiment cue is jargon."""


def _check_int(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_fraction(name: str, value: object, *, open_low: bool = False, open_high: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not np.isfinite(value):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    v = float(value)
    if v < 0 or v > 1 or (open_low and v == 0) or (open_high and v == 1):
        raise ValueError(f"{name} must be in {'(' if open_low else '['}0, 1{')' if open_high else ']'}, got {value!r}")
    return v


def _exact_mask(rng: np.random.Generator, n: int, fraction: float) -> np.ndarray:
    """A random boolean mask with exactly ``round(fraction * n)`` true entries (so rates are exact)."""
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[: int(round(fraction * n))]] = True
    return mask


def _reviews(rng: np.random.Generator, n: int, agree_rate: float, jargon_fraction: float, split: str) -> ReviewSplit:
    labels = rng.permutation(np.arange(n) % 2).astype(np.int64)
    agrees = np.zeros(n, dtype=bool)
    jargon = np.zeros(n, dtype=bool)
    for y in (0, 1):  # exact rates within each class, so the brand carries no marginal label information
        idx = np.flatnonzero(labels == y)
        agrees[idx] = _exact_mask(rng, idx.size, agree_rate)
        jargon[idx] = _exact_mask(rng, idx.size, jargon_fraction)
    words = SENTIMENT_WORDS["ood" if split == "ood" else "train"]
    templates = TEMPLATES["ood" if split == "ood" else "train"]
    texts = []
    for y, a, j in zip(labels, agrees, jargon):
        brand = str(rng.choice(BRANDS[int(y) if a else 1 - int(y)]))
        cue = "jargon" if j else "word"
        sentence = str(rng.choice(templates[cue])).format(
            brand=brand, product=rng.choice(PRODUCTS), part=rng.choice(PARTS),
            word=rng.choice(words[int(y)]), jargon=rng.choice(JARGON[int(y)]),
        )  # fmt: skip
        if rng.random() < 0.5:  # neutral filler before or after, so position carries nothing
            filler = str(rng.choice(FILLERS))
            sentence = f"{filler} {sentence}" if rng.random() < 0.5 else f"{sentence} {filler}"
        texts.append(sentence)
    return ReviewSplit(texts, labels, agrees, jargon)


def make_review_task(
    n_train: int = 2000,
    n_val: int = 500,
    n_test: int = 1000,
    *,
    rho: float = 0.95,
    jargon_fraction: float = 0.5,
    seed: int = 0,
) -> ReviewTask:
    """The review-sentiment task with a flipping brand shortcut and a jargon subdomain (module docstring).

    Args:
        n_train: training reviews (the fine-tuning data).
        n_val: ID validation reviews (model selection uses these only, never OOD data).
        n_test: reviews in each of the ID and OOD test splits.
        rho: fraction of training/ID reviews whose brand agrees with the label; OOD has ``1 - rho``.
        jargon_fraction: fraction of reviews whose only sentiment cue is an invented jargon word.
        seed: seed of the generator.
    """
    n_train = _check_int("n_train", n_train, 2)
    n_val = _check_int("n_val", n_val, 2)
    n_test = _check_int("n_test", n_test, 2)
    rho = _check_fraction("rho", rho)
    jargon_fraction = _check_fraction("jargon_fraction", jargon_fraction)
    seed = _check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    return ReviewTask(
        train=_reviews(rng, n_train, rho, jargon_fraction, "train"),
        val=_reviews(rng, n_val, rho, jargon_fraction, "train"),
        test_id=_reviews(rng, n_test, rho, jargon_fraction, "train"),
        test_ood=_reviews(rng, n_test, 1 - rho, jargon_fraction, "ood"),
        rho=rho,
        jargon_fraction=jargon_fraction,
    )


# ----------------------------------------------------------------------------------------------- vision
@dataclass(frozen=True)
class DigitTask:
    """The vision arm: pre-training and fine-tuning images built from scikit-learn's 8x8 digits.

    Images are ``(n, 1, 10, 10)`` float32 in [0, 1] (the 8x8 digit padded by a one-pixel frame that
    carries the spurious marks). Fine-tuning labels are ``digit - 5`` (digits 5-9).
    """

    pre_x: np.ndarray
    """Pre-training images (digits 0-4, a corner mark that agrees with the class)."""
    pre_y: np.ndarray
    """Pre-training labels 0-4."""
    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    test_id_x: np.ndarray
    test_id_y: np.ndarray
    test_ood_x: np.ndarray
    test_ood_y: np.ndarray
    rho: float


def _frame(images8: np.ndarray) -> np.ndarray:
    out = np.zeros((images8.shape[0], 10, 10), dtype=np.float32)
    out[:, 1:9, 1:9] = images8
    return out


def _border_mark(x: np.ndarray, cls: np.ndarray) -> None:
    """Light one of five border segments (top, bottom, left, right, a corner pair) by class, in place."""
    segments = [(0, slice(2, 8)), (9, slice(2, 8)), (slice(2, 8), 0), (slice(2, 8), 9), ((0, 9), (9, 0))]
    for i, c in enumerate(cls):
        seg = segments[int(c)]
        if isinstance(seg[0], tuple):
            x[i, seg[0][0], seg[0][1]] = 1.0
            x[i, seg[1][0], seg[1][1]] = 1.0
        else:
            x[i, seg[0], seg[1]] = 1.0


def make_digit_task(*, rho: float = 0.9, noise: float = 0.1, seed: int = 0) -> DigitTask:
    """Digits 0-4 to pre-train on, and a shifted fine-tuning task on digits 5-9 (the notes' vision arm).

    Pre-training images carry a mark in one of five corner pixels that agrees with the class (the
    pre-trained model's own artefact). Fine-tuning images are contrast-inverted (a subdomain the
    pre-trained model never saw) and carry a border mark that agrees with the class in a fraction ``rho``
    of training/ID images and is drawn from another class in OOD images (the fine-tuning shortcut flips).
    Gaussian pixel noise of standard deviation ``noise`` makes the task harder than clean digits.

    Args:
        rho: border-mark agreement in training/ID (OOD: never agrees).
        noise: pixel noise standard deviation.
        seed: seed of the split and the marks.
    """
    rho = _check_fraction("rho", rho)
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a non-negative number, got {noise!r}")
    seed = _check_int("seed", seed, 0)
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    target = digits.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    # Pre-training: digits 0-4 with a class-coded corner pixel (agrees 90% of the time).
    pre_idx = rng.permutation(np.flatnonzero(target < 5))
    pre_x = _frame(images[pre_idx])
    pre_y = target[pre_idx]
    corners = [(0, 0), (0, 9), (9, 9), (9, 0), (0, 4)]
    mark = np.where(rng.random(pre_y.size) < 0.9, pre_y, rng.integers(0, 5, pre_y.size))
    for i, c in enumerate(mark):
        pre_x[i, corners[int(c)][0], corners[int(c)][1]] = 1.0
    # Fine-tuning: digits 5-9, contrast-inverted digit area, border mark as the shortcut.
    ft_idx = rng.permutation(np.flatnonzero(target >= 5))
    n = ft_idx.size
    n_train, n_val = int(0.4 * n), int(0.15 * n)
    n_id = (n - n_train - n_val) // 2
    parts = np.split(ft_idx, [n_train, n_train + n_val, n_train + n_val + n_id])
    out = {}
    for name, idx in zip(("train", "val", "test_id", "test_ood"), parts):
        x = _frame(1.0 - images[idx])
        x[:, 0, :] = x[:, 9, :] = x[:, :, 0] = x[:, :, 9] = 0.0
        y = target[idx] - 5
        if name == "test_ood":
            cls = (y + rng.integers(1, 5, y.size)) % 5  # always another class's mark
        else:
            agree = rng.random(y.size) < rho
            cls = np.where(agree, y, (y + rng.integers(1, 5, y.size)) % 5)
        _border_mark(x, cls)
        x = np.clip(x + noise * rng.standard_normal(x.shape).astype(np.float32), 0.0, 1.0)
        out[f"{name}_x"] = x[:, None]
        out[f"{name}_y"] = y
    pre_x = np.clip(pre_x + noise * rng.standard_normal(pre_x.shape).astype(np.float32), 0.0, 1.0)[:, None]
    return DigitTask(pre_x=pre_x, pre_y=pre_y, rho=rho, **out)
