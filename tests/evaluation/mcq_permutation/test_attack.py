"""The attack, its metrics and defences, on toy scorers whose answers are known by hand (no model needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from icml24.evaluation.mcq_permutation import (
    MCQ,
    FunctionScorer,
    PermutationScores,
    accuracy_by_gold_letter,
    adversarial_correct,
    all_permutations,
    apply_order,
    attack_early_exit,
    calibrate,
    calibrated,
    clean_correct,
    format_prompt,
    generate_questions,
    letter_histogram,
    majority_vote,
    majority_vote_correct,
    permutation_prior,
    random_permutation_correct,
    reduced_orders,
    score_questions,
    summarize,
)
from icml24.evaluation.mcq_permutation.questions import FAMILIES

QS = generate_questions(40, seed=3)


def oracle_fn(q: MCQ):
    """Knows the gold text; ignores positions entirely."""
    gold_text = q.options[q.gold]
    return lambda question, opts: [1.0 if o == gold_text else 0.1 for o in opts]


def test_enumerator_gives_n_factorial_distinct_orders_with_identity_first():
    for n in range(1, 6):
        p = all_permutations(n)
        assert p.shape == (math.factorial(n), n) and len({tuple(r) for r in p}) == math.factorial(n)
        assert np.array_equal(p[0], np.arange(n))
        assert all(sorted(r) == list(range(n)) for r in p.tolist())


def test_relabelled_gold_points_at_the_same_text():
    for q in QS[:10]:
        for order in all_permutations(4):
            opts, g = apply_order(q, order)
            assert opts[g] == q.options[q.gold]


def test_reduce_attack_counts_and_k_equals_n_is_the_permutation_attack():
    assert reduced_orders(4, 2, 2).shape == (3 * 2, 2)
    assert reduced_orders(4, 2, 3).shape == (3 * 6, 3)
    assert {tuple(r) for r in reduced_orders(4, 1, 4)} == {tuple(r) for r in all_permutations(4)}
    assert all(2 in r for r in reduced_orders(4, 2, 3).tolist())
    # k = 1: the only option is the gold one and any model that outputs the only letter is right.
    s = score_questions(FunctionScorer(lambda q, o: [1.0] * len(o)), QS[:5], k=1)
    assert adversarial_correct(s).all()


def test_constant_letter_model_clean_equals_share_of_gold_at_A_and_adversarial_is_zero():
    always_a = FunctionScorer(lambda q, opts: [0.9] + [0.1] * (len(opts) - 1))
    s = score_questions(always_a, QS)
    assert clean_correct(s).mean() == pytest.approx(np.mean([q.gold == 0 for q in QS]))
    assert adversarial_correct(s).sum() == 0
    assert random_permutation_correct(s).mean() == pytest.approx(0.25)
    assert letter_histogram(s).tolist() == [40 * 24, 0, 0, 0]
    np.testing.assert_allclose(accuracy_by_gold_letter(s), [1, 0, 0, 0])
    # the per-question prior calibration removes a pure letter bias: ties everywhere -> letter A again,
    # but any content signal wins once the bias is divided out (next test)


def test_permutation_invariant_model_has_adversarial_equal_to_clean():
    rng = np.random.default_rng(0)
    content = {o: rng.random() for q in QS for o in q.options}  # fixed score per option text: order-blind
    s = score_questions(FunctionScorer(lambda q, opts: [content[o] for o in opts]), QS)
    assert np.array_equal(adversarial_correct(s), clean_correct(s))
    assert np.array_equal(random_permutation_correct(s), clean_correct(s).astype(float))
    oracle = [score_questions(FunctionScorer(oracle_fn(q)), [q])[0] for q in QS]
    assert adversarial_correct(oracle).all()


def test_ordering_adversarial_le_random_le_one_and_adversarial_le_clean():
    rng = np.random.default_rng(1)
    noisy = FunctionScorer(lambda q, opts: rng.random(len(opts)) + np.array([0.3, 0, 0, 0]))
    s = score_questions(noisy, QS)
    adv, rnd, clean = adversarial_correct(s), random_permutation_correct(s), clean_correct(s)
    assert np.all(adv <= rnd + 1e-12) and np.all(rnd <= 1) and np.all(adv <= clean)


def test_early_exit_equals_exhaustive():
    rng = np.random.default_rng(2)
    bias = {q.question: rng.normal(size=4) for q in QS}
    content = {o: rng.normal() for q in QS for o in q.options}

    def fn(question, opts):
        return np.exp(bias[question] + 1.5 * np.array([content[o] for o in opts]))

    s = score_questions(FunctionScorer(fn), QS)
    for q, sq, adv in zip(QS, s, adversarial_correct(s), strict=True):
        survived, n_scored = attack_early_exit(lambda order, q=q: fn(q.question, apply_order(q, order)[0]), q)
        assert survived == adv
        assert n_scored == (24 if adv else int(np.argmin(sq.correct())) + 1)


def test_majority_vote_is_invariant_to_the_initial_order():
    rng = np.random.default_rng(4)
    bias = rng.normal(size=4) * 2
    content = {o: rng.normal() for q in QS for o in q.options}
    fn = FunctionScorer(lambda q, opts: np.exp(bias + np.array([content[o] for o in opts])))
    for q in QS[:15]:
        votes = set()
        for order in all_permutations(4)[::5]:
            opts, g = apply_order(q, order)
            relisted = MCQ(q.question, opts, g)
            choice = majority_vote(score_questions(fn, [relisted])[0])
            votes.add(relisted.options[choice])
        assert len(votes) == 1


def test_calibration_by_the_permutation_prior_undoes_a_pure_letter_bias():
    # A strong letter bias times a weak content signal: raw argmax follows the bias, calibrated follows content.
    bias = np.array([20.0, 1.0, 1.0, 1.0])
    fn = FunctionScorer(lambda question, opts: bias * np.array([2.0 if o == gold[question] else 1.0 for o in opts]))
    gold = {q.question: q.options[q.gold] for q in QS}
    qs = list({q.question: q for q in QS}.values())  # one question per text (the toy reads gold by text)
    s = score_questions(fn, qs)
    assert adversarial_correct(s).sum() == 0
    cal = [calibrated(x) for x in s]
    assert adversarial_correct(cal).all()
    pure = score_questions(FunctionScorer(lambda question, opts: bias), qs[:1])[0]
    np.testing.assert_allclose(permutation_prior(pure), bias / bias.sum())
    np.testing.assert_allclose(calibrate(np.array([0.5, 0.25, 0.25]), np.array([0.5, 0.25, 0.25])), [1 / 3] * 3)
    # majority vote: every option wins the 6 orders that put it at A, a tie broken by the summed
    # probability, which the content signal tips towards the gold option
    assert majority_vote_correct(s).all()


def test_summary_and_histogram_consistency():
    rng = np.random.default_rng(5)
    s = score_questions(FunctionScorer(lambda q, o: rng.random(len(o))), QS)
    summ = summarize(s)
    assert summ.n_questions == 40 and sum(summ.letter_counts) == 40 * 24
    assert 0 <= summ.adversarial <= summ.random_permutation <= 1


def test_scores_validate_their_shape():
    with pytest.raises(ValueError, match="orders"):
        PermutationScores(np.zeros((2, 3), int), np.zeros((2, 4)), 0)
    with pytest.raises(ValueError, match="gold"):
        PermutationScores(np.array([[1, 2]]), np.ones((1, 2)), 0)


def test_questions_are_deterministic_balanced_and_valid():
    a, b = generate_questions(200, seed=7), generate_questions(200, seed=7)
    assert a == b and a != generate_questions(200, seed=8)
    golds = np.bincount([q.gold for q in a], minlength=4)
    assert golds.min() > 30  # roughly uniform over letters
    assert {q.family for q in a} == set(FAMILIES)
    for q in a:
        assert len(set(q.options)) == 4
    add = [q for q in a if q.family == "addition"]
    for q in add:
        x, y = (int(t) for t in q.question.removeprefix("What is ").removesuffix("?").split(" + "))
        assert q.options[q.gold] == str(x + y)
    big = [q for q in a if q.family == "largest"]
    assert all(int(q.options[q.gold]) == max(int(o) for o in q.options) for q in big)


def test_prompt_format_matches_the_official_layout():
    p = format_prompt("Q?", ["x", "y"], header="H\n\n", shots=[("S?", ["u", "v"], 1)])
    assert p == "H\n\nS?\nA. u\nB. v\nAnswer: B\n\nQ?\nA. x\nB. y\nAnswer:"


def test_gold_letters_are_stratified():
    from icml24.evaluation.mcq_permutation import generate_questions

    for n in (40, 24, 7):
        golds = np.bincount([q.gold for q in generate_questions(n, seed=3)], minlength=4)
        assert golds.max() - golds.min() <= 1, (n, golds)
    assert np.bincount([q.gold for q in generate_questions(40, seed=0)]).tolist() == [10, 10, 10, 10]


def test_adaptation_questions_share_no_text_or_fact_with_the_test_set():
    from icml24.evaluation.mcq_permutation import fact_key, generate_questions, unseen_split
    from icml24.evaluation.mcq_permutation import reproduce as R

    test = generate_questions(40, seed=0)
    train = R.adaptation_questions(480, test, seed=50_000)
    assert len(train) == 480
    assert not {q.question for q in train} & {q.question for q in test}
    assert not {fact_key(q) for q in train} & {fact_key(q) for q in test}
    assert np.bincount([q.gold for q in train], minlength=4).tolist() == [120] * 4  # re-stratified after filtering
    # The same fact in another wording is caught: 3 + 4 and 4 + 3, hot/cold and cold/hot.
    from icml24.evaluation.mcq_permutation import MCQ

    a = MCQ("What is 3 + 4?", ("7", "6", "8", "5"), 0, "addition")
    b = MCQ("What is 4 + 3?", ("6", "7", "8", "5"), 1, "addition")
    c = MCQ("What is the opposite of hot?", ("cold", "up", "big", "wet"), 0, "opposite")
    d = MCQ("What is the opposite of cold?", ("up", "hot", "big", "wet"), 1, "opposite")
    assert unseen_split([b, d], [a, c]) == []
    # The old training set (a fresh draw of all families) shared most test questions.
    old = generate_questions(480, seed=50_000)
    assert len(unseen_split(old, test)) < len(old)
