"""The adversarial-permutation attack and the metrics and defences built on per-permutation letter scores.

Zong et al., ICML 2024, Section 3 ("adversarial permutation"): an answer-option order is a permutation
``pi`` of the option indices; the option shown at letter ``j`` is ``o_{pi(j)}`` and the gold letter moves to
``pi^{-1}(g)``. A question counts as correct under the attack only if the model is correct under *every*
one of the ``n!`` orders (the official ``full_search_eval`` loops over ``itertools.permutations`` and stops
at the first failure)::

    adversarial accuracy = mean_q  min_pi 1[ argmax_j p_M(letter j | prompt(q, pi)) = pi^{-1}(g_q) ]

Everything here works on :class:`PermutationScores`: the letter probabilities of one question under a set
of orders (all ``n!`` permutations, or the reduced subsets of Section 3.3), so that one scoring pass gives
clean accuracy, adversarial accuracy, random-permutation (average-case) accuracy, the letter histogram, the
accuracy per gold position, and the two defences the paper discusses (Section 5): majority vote over
permutations and prior (contextual) calibration of the letter probabilities (Zhao et al., 2021).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from icml24.evaluation.mcq_permutation.questions import MCQ


def all_permutations(n: int) -> np.ndarray:
    """All ``n!`` orders of ``n`` options as rows of option indices, identity first (``itertools`` order,
    as the official code enumerates them); row ``p``, column ``j``: the original option shown at letter ``j``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 8:
        raise ValueError(f"n must be an int in 1..8 (n! orders), got {n!r}")
    return np.array(list(itertools.permutations(range(int(n)))), dtype=np.int64).reshape(math.factorial(n), n)


def reduced_orders(n: int, gold: int, k: int) -> np.ndarray:
    """The candidate orders of the reduce attack (Section 3.3): every ``k``-subset of the ``n`` options that
    keeps the gold one, in every order: ``C(n-1, k-1) * k!`` rows of ``k`` original indices. ``k = n`` gives
    all permutations."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 8:
        raise ValueError(f"n must be an int in 1..8, got {n!r}")
    if isinstance(gold, bool) or not isinstance(gold, (int, np.integer)) or not 0 <= gold < n:
        raise ValueError(f"gold must be an int in 0..{n - 1}, got {gold!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ValueError(f"k must be an int in 1..{n}, got {k!r}")
    others = [i for i in range(n) if i != gold]
    rows = [perm for comb in itertools.combinations(others, k - 1) for perm in itertools.permutations((gold, *comb))]
    return np.array(rows, dtype=np.int64).reshape(len(rows), k)


def apply_order(mcq: MCQ, order: Sequence[int]) -> tuple[tuple[str, ...], int]:
    """The options shown under ``order`` and the letter index of the gold option among them."""
    if not isinstance(mcq, MCQ):
        raise TypeError(f"mcq must be an MCQ, got {type(mcq).__name__}")
    idx = [int(i) for i in order]
    if len(set(idx)) != len(idx) or not all(0 <= i < mcq.n_options for i in idx) or mcq.gold not in idx:
        raise ValueError(f"order must be distinct option indices of this question that include the gold {mcq.gold}, got {idx}")
    return tuple(mcq.options[i] for i in idx), idx.index(mcq.gold)


@dataclass(frozen=True)
class PermutationScores:
    """A scorer's letter probabilities for one question under a set of option orders.

    ``orders[p, j]`` is the original option index shown at letter ``j`` under order ``p``; ``probs[p, j]``
    the model's probability of letter ``j`` there (not necessarily normalised over the letters).
    """

    orders: np.ndarray
    """``(P, k)`` int: the orders scored; row 0 is the clean (original) order when all permutations are used."""
    probs: np.ndarray
    """``(P, k)`` float: letter probabilities per order."""
    gold: int
    """Original index of the gold option."""

    def __post_init__(self) -> None:
        o, p = np.asarray(self.orders), np.asarray(self.probs, dtype=float)
        if o.ndim != 2 or p.shape != o.shape or o.shape[0] < 1:
            raise ValueError(f"orders and probs must be (P, k) arrays of one shape, got {o.shape} and {p.shape}")
        if not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError("probs must be finite and non-negative")
        if not np.all((o == self.gold).sum(1) == 1) or any(len(set(r)) != len(r) for r in o.tolist()):
            raise ValueError(f"orders: every row must list distinct options and show the gold option {self.gold} once")
        object.__setattr__(self, "orders", o.astype(np.int64))
        object.__setattr__(self, "probs", p)

    @property
    def gold_letters(self) -> np.ndarray:
        """``(P,)``: the letter index of the gold option under each order (``pi^{-1}(g)``)."""
        return np.argmax(self.orders == self.gold, axis=1)

    def predicted_letters(self, probs: np.ndarray | None = None) -> np.ndarray:
        """``(P,)``: argmax letter per order (ties to the first letter, as ``np.argmax`` in the official code)."""
        return np.argmax(self.probs if probs is None else probs, axis=1)

    def correct(self, probs: np.ndarray | None = None) -> np.ndarray:
        """``(P,)`` bool: the prediction under each order is the gold letter."""
        return self.predicted_letters(probs) == self.gold_letters

    def predicted_options(self, probs: np.ndarray | None = None) -> np.ndarray:
        """``(P,)``: the original option index the model chose under each order."""
        pred = self.predicted_letters(probs)
        return self.orders[np.arange(len(pred)), pred]


def _check_scores(scores: Sequence[PermutationScores]) -> list[PermutationScores]:
    if isinstance(scores, PermutationScores) or not isinstance(scores, Sequence) or len(scores) == 0:
        raise ValueError("scores must be a non-empty sequence of PermutationScores")
    if not all(isinstance(s, PermutationScores) for s in scores):
        raise TypeError("scores must hold PermutationScores")
    return list(scores)


def correct_matrix(scores: Sequence[PermutationScores]) -> np.ndarray:
    """``(Q, P)`` bool: question ``q`` answered correctly under order ``p`` (all questions scored over the
    same number of orders)."""
    scores = _check_scores(scores)
    if len({s.orders.shape for s in scores}) != 1:
        raise ValueError("scores must all be over the same number of orders of the same size")
    return np.stack([s.correct() for s in scores])


def clean_correct(scores: Sequence[PermutationScores]) -> np.ndarray:
    """``(Q,)`` bool: correct under the original order (row 0 must be the identity)."""
    scores = _check_scores(scores)
    for s in scores:
        if not np.array_equal(s.orders[0], np.arange(s.orders.shape[1])):
            raise ValueError("row 0 of every scores.orders must be the identity (the clean order)")
    return np.array([bool(s.correct()[0]) for s in scores])


def adversarial_correct(scores: Sequence[PermutationScores]) -> np.ndarray:
    """``(Q,)`` bool: correct under every scored order (the adversarial-permutation attack, Section 3)."""
    return np.array([bool(s.correct().all()) for s in _check_scores(scores)])


def attack_early_exit(
    score_order: Callable[[Sequence[int]], np.ndarray], mcq: MCQ, orders: np.ndarray | None = None
) -> tuple[bool, int]:
    """The official loop: score orders one at a time and stop at the first wrong answer.

    ``score_order(order) -> letter probabilities``. Returns ``(survived, orders scored)``; ``survived``
    equals ``adversarial_correct`` of the exhaustive evaluation (tested), at up to ``n!`` times less cost.
    """
    if not callable(score_order):
        raise TypeError("score_order must be callable")
    if not isinstance(mcq, MCQ):
        raise TypeError(f"mcq must be an MCQ, got {type(mcq).__name__}")
    orders = all_permutations(mcq.n_options) if orders is None else np.asarray(orders)
    for count, order in enumerate(orders, start=1):
        _, gold_letter = apply_order(mcq, order)
        if int(np.argmax(score_order(order))) != gold_letter:
            return False, count
    return True, len(orders)


def random_permutation_correct(scores: Sequence[PermutationScores]) -> np.ndarray:
    """``(Q,)`` float: the expected correctness under a uniformly random order (mean over the orders)."""
    return np.array([float(s.correct().mean()) for s in _check_scores(scores)])


def sampled_permutation_correct(scores: Sequence[PermutationScores], seed: int = 0) -> np.ndarray:
    """``(Q,)`` bool: correctness under one uniformly drawn order per question (a random-shuffle benchmark)."""
    rng = np.random.default_rng(seed)
    return np.array([bool(s.correct()[rng.integers(len(s.orders))]) for s in _check_scores(scores)])


def letter_histogram(scores: Sequence[PermutationScores], probs: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """``(k,)`` counts of predicted letters over all questions and orders (Section 4's position bias).

    Over all ``n!`` orders each letter holds the gold option equally often, so an unbiased model predicts
    each letter ``1/k`` of the time; a skew is a letter preference."""
    scores = _check_scores(scores)
    k = scores[0].orders.shape[1]
    counts = np.zeros(k, dtype=np.int64)
    for i, s in enumerate(scores):
        counts += np.bincount(s.predicted_letters(None if probs is None else probs[i]), minlength=k)[:k]
    return counts


def accuracy_by_gold_letter(scores: Sequence[PermutationScores]) -> np.ndarray:
    """``(k,)`` accuracy when the gold option sits at letter ``j`` (the official ``--position_permute``,
    averaged over every arrangement of the other options rather than one swap)."""
    scores = _check_scores(scores)
    k = scores[0].orders.shape[1]
    hit, tot = np.zeros(k), np.zeros(k)
    for s in scores:
        g, c = s.gold_letters, s.correct()
        hit += np.bincount(g, weights=c, minlength=k)[:k]
        tot += np.bincount(g, minlength=k)[:k]
    return np.divide(hit, tot, out=np.full(k, np.nan), where=tot > 0)


# ---------------------------------------------------------------------------------------------- defences
def majority_vote(scores: PermutationScores) -> int:
    """The original option chosen most often over the scored orders (Section 5: voting over permutations,
    ``n!`` times the cost). Ties go to the option with the larger summed normalised probability, then the
    lower index, so the vote does not depend on the order in which the options were first listed."""
    if not isinstance(scores, PermutationScores):
        raise TypeError(f"scores must be PermutationScores, got {type(scores).__name__}")
    n = int(scores.orders.max()) + 1
    votes = np.bincount(scores.predicted_options(), minlength=n).astype(float)
    norm = scores.probs / np.maximum(scores.probs.sum(1, keepdims=True), 1e-300)
    mass = np.zeros(n)
    np.add.at(mass, scores.orders.reshape(-1), norm.reshape(-1))
    key = votes * (mass.sum() + 1.0) + mass  # votes first, summed probability breaks ties
    return int(np.argmax(key))


def majority_vote_correct(scores: Sequence[PermutationScores]) -> np.ndarray:
    """``(Q,)`` bool: the majority vote picks the gold option."""
    return np.array([majority_vote(s) == s.gold for s in _check_scores(scores)])


def permutation_prior(scores: PermutationScores) -> np.ndarray:
    """``(k,)``: the question's letter prior, its letter probabilities averaged over all orders.

    Over all ``n!`` orders every option sits at every letter equally often, so this average carries no
    information about which option is right, only about which letter the model likes."""
    if not isinstance(scores, PermutationScores):
        raise TypeError(f"scores must be PermutationScores, got {type(scores).__name__}")
    norm = scores.probs / np.maximum(scores.probs.sum(1, keepdims=True), 1e-300)
    return norm.mean(0)


def calibrate(probs: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """Prior (contextual) calibration (Zhao et al., 2021, Eq. 2 with ``W = diag(prior)^{-1}``, ``b = 0``):
    the letter probabilities, normalised over the letters, divided by the prior and renormalised."""
    p = np.asarray(probs, dtype=float)
    q = np.asarray(prior, dtype=float)
    if p.ndim not in (1, 2) or q.ndim != 1 or p.shape[-1] != q.shape[0]:
        raise ValueError(f"probs must be (k,) or (P, k) and prior (k,), got {p.shape} and {q.shape}")
    if not np.all(np.isfinite(q)) or np.any(q <= 0):
        raise ValueError("prior must be finite and positive")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("probs must be finite and non-negative")
    norm = p / np.maximum(p.sum(-1, keepdims=True), 1e-300)
    out = norm / q
    return out / out.sum(-1, keepdims=True)


def calibrated(scores: PermutationScores, prior: np.ndarray | None = None) -> PermutationScores:
    """``scores`` with calibrated probabilities: by ``prior`` (e.g. a content-free prior), or by the
    question's own :func:`permutation_prior` when ``prior`` is ``None``."""
    if not isinstance(scores, PermutationScores):
        raise TypeError(f"scores must be PermutationScores, got {type(scores).__name__}")
    q = permutation_prior(scores) if prior is None else prior
    return PermutationScores(scores.orders, calibrate(scores.probs, q), scores.gold)


@dataclass(frozen=True)
class AttackSummary:
    """Accuracies of one scorer on a set of questions (fractions of questions)."""

    n_questions: int
    clean: float
    random_permutation: float
    adversarial: float
    majority_vote: float
    letter_counts: tuple[int, ...]
    accuracy_by_gold_letter: tuple[float, ...]


def summarize(scores: Sequence[PermutationScores]) -> AttackSummary:
    """Clean, random-permutation, adversarial and majority-vote accuracy, the letter histogram and the
    accuracy per gold letter, from all-permutation scores (row 0 the clean order)."""
    scores = _check_scores(scores)
    return AttackSummary(
        n_questions=len(scores),
        clean=float(clean_correct(scores).mean()),
        random_permutation=float(random_permutation_correct(scores).mean()),
        adversarial=float(adversarial_correct(scores).mean()),
        majority_vote=float(majority_vote_correct(scores).mean()),
        letter_counts=tuple(int(c) for c in letter_histogram(scores)),
        accuracy_by_gold_letter=tuple(float(a) for a in accuracy_by_gold_letter(scores)),
    )
