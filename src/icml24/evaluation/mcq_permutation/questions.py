"""Multiple-choice questions generated in code, and the prompt format of the paper.

Every family draws a question whose gold answer is derivable in code (arithmetic, comparisons, letters of
words, membership in a hand-written category list, a hand-written fact table), so no download is needed
and the gold label is never in doubt. Options are four distinct strings; the gold letters are stratified:
each block of ``n_options`` consecutive questions puts the gold option once at every letter (in a random
order), so a set of ``n`` questions has every gold letter ``n // n_options`` or one more times.
:func:`unseen_split` keeps a training set from sharing any question text or fact with a test set.

The prompt is the format of the official code (``LLMs_attack.py``, ``format_example``): the question, one
line ``"A. option"`` per option, then ``"Answer:"``; the letter read off is the next token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class MCQ:
    """One multiple-choice question: its text, its options in their original order and the gold index."""

    question: str
    """The question text, without options."""
    options: tuple[str, ...]
    """The option texts in their original (clean) order; distinct."""
    gold: int
    """Index of the correct option in ``options``."""
    family: str = ""
    """The generator family that made it (for per-family tables)."""

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise TypeError(f"question must be a str, got {type(self.question).__name__}")
        if not isinstance(self.options, tuple) or not all(isinstance(o, str) for o in self.options):
            raise TypeError("options must be a tuple of str")
        if not 2 <= len(self.options) <= len(LETTERS):
            raise ValueError(f"options must hold 2..{len(LETTERS)} strings, got {len(self.options)}")
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"options must be distinct, got {self.options!r}")
        if isinstance(self.gold, bool) or not isinstance(self.gold, (int, np.integer)):
            raise TypeError(f"gold must be an int, got {self.gold!r}")
        if not 0 <= int(self.gold) < len(self.options):
            raise ValueError(f"gold must index options (0..{len(self.options) - 1}), got {self.gold}")

    @property
    def n_options(self) -> int:
        return len(self.options)


def format_prompt(question: str, options: Sequence[str], *, header: str = "", shots: Sequence[tuple] = ()) -> str:
    """The MMLU-style prompt of the official code: ``header``, solved ``shots``, then the question.

    Each block is ``question\\nA. o1\\nB. o2\\n...\\nAnswer:``; a shot ``(question, options, gold)`` is
    followed by its gold letter and a blank line. The model's letter is the next token after ``Answer:``.
    """
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    if isinstance(options, str) or not all(isinstance(o, str) for o in options) or len(options) < 2:
        raise ValueError("options must be a sequence of at least two str")

    def block(q: str, opts: Sequence[str]) -> str:
        return q + "".join(f"\n{LETTERS[j]}. {o}" for j, o in enumerate(opts)) + "\nAnswer:"

    text = header
    for q, opts, g in shots:
        text += block(q, opts) + f" {LETTERS[int(g)]}\n\n"
    return text + block(question, options)


# ---------------------------------------------------------------------------------------------- families
FRUITS = ["apple", "banana", "orange", "grape", "pear", "mango", "cherry", "lemon", "peach", "plum", "strawberry", "melon"]
ANIMALS = ["dog", "cat", "horse", "cow", "lion", "tiger", "rabbit", "sheep", "elephant", "monkey", "bear", "duck"]
COLOURS = ["red", "blue", "green", "yellow", "purple", "pink", "brown", "black", "white", "grey"]
OBJECTS = ["chair", "table", "car", "stone", "hammer", "spoon", "window", "book", "shoe", "door", "phone", "bottle",
           "pencil", "clock", "bucket", "brick"]  # fmt: skip
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Germany": "Berlin", "Spain": "Madrid",
            "England": "London", "Russia": "Moscow", "China": "Beijing", "Egypt": "Cairo", "Greece": "Athens",
            "Canada": "Ottawa", "Ireland": "Dublin", "Portugal": "Lisbon", "Austria": "Vienna",
            "Norway": "Oslo", "Poland": "Warsaw"}  # fmt: skip
OPPOSITES = {"hot": "cold", "big": "small", "up": "down", "fast": "slow", "happy": "sad", "light": "dark",
             "old": "young", "wet": "dry", "open": "closed", "early": "late", "hard": "soft", "full": "empty",
             "rich": "poor", "loud": "quiet", "high": "low", "thick": "thin"}  # fmt: skip
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def _pick(rng: np.random.Generator, pool: Sequence[str], k: int, exclude: Sequence[str] = ()) -> list[str]:
    pool = [p for p in pool if p not in exclude]
    return [pool[i] for i in rng.choice(len(pool), size=k, replace=False)]


def _member(category: str, members: Sequence[str], others: Sequence[str]):
    def make(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
        return f"Which of these is {category}?", _pick(rng, members, 1)[0], _pick(rng, others, n - 1)

    return make


def _addition(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    a, b = (int(x) for x in rng.integers(1, 10, size=2))
    s = a + b
    near = [s + d for d in (-3, -2, -1, 1, 2, 3) if s + d >= 0]
    wrong = [str(x) for x in rng.choice(near, size=n - 1, replace=False)]
    return f"What is {a} + {b}?", str(s), wrong


def _largest(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    values = [int(v) for v in rng.choice(np.arange(1, 100), size=n, replace=False)]
    best = max(values)
    return "Which number is the largest?", str(best), [str(v) for v in values if v != best]


def _smallest(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    values = [int(v) for v in rng.choice(np.arange(1, 100), size=n, replace=False)]
    least = min(values)
    return "Which number is the smallest?", str(least), [str(v) for v in values if v != least]


def _capital(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    country = _pick(rng, list(CAPITALS), 1)[0]
    gold = CAPITALS[country]
    return f"What is the capital of {country}?", gold, _pick(rng, list(CAPITALS.values()), n - 1, exclude=[gold])


def _opposite(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    word = _pick(rng, list(OPPOSITES), 1)[0]
    gold = OPPOSITES[word]
    pool = [w for w in list(OPPOSITES) + list(OPPOSITES.values()) if w not in (word, gold)]
    return f"What is the opposite of {word}?", gold, _pick(rng, pool, n - 1)


def _first_letter(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    words = FRUITS + ANIMALS + OBJECTS
    while True:
        chosen = _pick(rng, words, n)
        if len({w[0] for w in chosen}) == n:
            break
    return f"Which word starts with the letter {chosen[0][0].upper()}?", chosen[0], chosen[1:]


def _number_word(rng: np.random.Generator, n: int) -> tuple[str, str, list[str]]:
    k = int(rng.integers(0, len(NUMBER_WORDS)))
    return f"Which word means the number {k}?", NUMBER_WORDS[k], _pick(rng, NUMBER_WORDS, n - 1, exclude=[NUMBER_WORDS[k]])


FAMILIES: dict[str, Callable[[np.random.Generator, int], tuple[str, str, list[str]]]] = {
    "fruit": _member("a fruit", FRUITS, ANIMALS + OBJECTS),
    "animal": _member("an animal", ANIMALS, FRUITS + OBJECTS),
    "colour": _member("a colour", COLOURS, FRUITS + ANIMALS + OBJECTS),
    "addition": _addition,
    "largest": _largest,
    "smallest": _smallest,
    "capital": _capital,
    "opposite": _opposite,
    "first-letter": _first_letter,
    "number-word": _number_word,
}
"""Question generators by family name: ``make(rng, n_options) -> (question, gold text, wrong texts)``."""


def generate_questions(
    n: int, *, families: Sequence[str] | None = None, n_options: int = 4, seed: int = 0
) -> list[MCQ]:
    """``n`` questions cycling through ``families`` (default: all), gold letters stratified.

    Deterministic in ``seed``. Families take turns so every family gets ``n // len(families)`` or one more;
    each block of ``n_options`` questions holds every gold letter once (a random permutation per block),
    so every gold letter occurs ``n // n_options`` or one more times.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if isinstance(n_options, bool) or not isinstance(n_options, (int, np.integer)) or not 2 <= n_options <= 6:
        raise ValueError(f"n_options must be an int in 2..6, got {n_options!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    names = list(FAMILIES) if families is None else list(families)
    if isinstance(families, str) or not names:
        raise ValueError(f"families must be a non-empty sequence of names from {sorted(FAMILIES)}, got {families!r}")
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"families must be names from {sorted(FAMILIES)}, got unknown {unknown}")
    rng = np.random.default_rng(seed)
    out = []
    golds: list[int] = []
    for i in range(int(n)):
        family = names[i % len(names)]
        question, gold_text, wrong = FAMILIES[family](rng, int(n_options))
        if not golds:
            golds = [int(g) for g in rng.permutation(int(n_options))]
        gold = golds.pop()
        options = list(wrong)
        rng.shuffle(options)
        options.insert(gold, gold_text)
        out.append(MCQ(question, tuple(options), gold, family))
    return out


def fact_key(q: MCQ) -> tuple:
    """The fact a question tests, the same for every wording of it: the unordered operands of an addition,
    the unordered word pair of an opposite, otherwise the family and the gold option's text (a capital
    names its country, a member its category)."""
    if not isinstance(q, MCQ):
        raise TypeError(f"q must be an MCQ, got {type(q).__name__}")
    gold = q.options[q.gold]
    if q.family == "addition":
        a, b = (int(x) for x in q.question.removeprefix("What is ").removesuffix("?").split(" + "))
        return ("addition", min(a, b), max(a, b))
    if q.family == "opposite":
        word = q.question.removeprefix("What is the opposite of ").removesuffix("?")
        return ("opposite", *sorted((word, gold)))
    return (q.family, gold)


def unseen_split(candidates: Sequence[MCQ], test: Sequence[MCQ]) -> list[MCQ]:
    """The ``candidates`` that share neither their question text nor their fact (:func:`fact_key`) with any
    question of ``test``: a model trained on them meets every test question unseen.

    A family whose question text does not vary ("Which of these is a fruit?", "Which number is the
    largest?") is thereby left out of training entirely whenever it is in the test set.
    """
    for name, qs in (("candidates", candidates), ("test", test)):
        if isinstance(qs, MCQ) or not all(isinstance(q, MCQ) for q in qs):
            raise TypeError(f"{name} must be a sequence of MCQ")
    texts = {q.question for q in test}
    facts = {fact_key(q) for q in test}
    return [q for q in candidates if q.question not in texts and fact_key(q) not in facts]
