"""Fuzz cases for mcq-permutation's exported callables (see tests/test_fuzz_api.py)."""

import numpy as np

from icml24.evaluation.mcq_permutation import (
    MCQ,
    FunctionScorer,
    PermutationScores,
    TinyLetterModel,
    accuracy_by_gold_letter,
    adversarial_correct,
    all_permutations,
    apply_order,
    attack_early_exit,
    calibrate,
    calibrated,
    clean_correct,
    correct_matrix,
    fact_key,
    format_prompt,
    generate_questions,
    letter_histogram,
    majority_vote,
    majority_vote_correct,
    permutation_prior,
    random_permutation_correct,
    reduced_orders,
    sampled_permutation_correct,
    score_questions,
    summarize,
    unseen_split,
)

Q = MCQ("Which?", ("a", "b", "c", "d"), 2)
SCORER = FunctionScorer(lambda q, o: [1.0, 0.5, 0.2, 0.1])
S = score_questions(SCORER, [Q])
ONE = S[0]
BAD_SCORES = ["x", [], [1, 2], ONE]

FUZZ_CASES = [
    dict(fn=MCQ, args=("Which?", ("a", "b"), 1),
         invalid={"question": [3], "options": [("a",), ("a", "a"), ["a", "b"], (1, 2)], "gold": [2, -1, 1.0, True]}),
    dict(fn=format_prompt, args=("Q?", ["x", "y"]), invalid={"question": [None], "options": ["xy", ["x"], [1, 2]]}),
    dict(fn=generate_questions, args=(4,), kwargs={"seed": 1},
         invalid={"n": [0, 1.5, "3"], "families": ["fruit", [], ["nope"]], "n_options": [1, 9, 2.0], "seed": [-1, 0.5]}),
    dict(fn=fact_key, args=(Q,), invalid={"q": ["Which?", None]}),
    dict(fn=unseen_split, args=([Q], [Q]), invalid={"candidates": [Q, ["x"]], "test": [Q, [1]]}),
    dict(fn=all_permutations, args=(4,), invalid={"n": [0, 9, 2.5, True]}),
    dict(fn=reduced_orders, args=(4, 1, 2), invalid={"n": [0, 9], "gold": [4, -1, 1.5], "k": [0, 5, 2.5]}),
    dict(fn=apply_order, args=(Q, [3, 2, 1, 0]), invalid={"mcq": ["Q"], "order": [[0, 0, 1, 2], [0, 1, 3, 9], [0, 1]]}),
    dict(fn=PermutationScores, args=(np.array([[0, 1]]), np.array([[0.5, 0.5]]), 1),
         invalid={"orders": [np.array([[0, 0]]), np.array([0, 1])], "probs": [np.array([[0.5, -1.0]]), np.array([[0.5]])]}),
    dict(fn=correct_matrix, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=clean_correct, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=adversarial_correct, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=random_permutation_correct, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=sampled_permutation_correct, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=letter_histogram, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=accuracy_by_gold_letter, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=majority_vote_correct, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=summarize, args=(S,), invalid={"scores": BAD_SCORES}),
    dict(fn=majority_vote, args=(ONE,), invalid={"scores": [S, "x"]}),
    dict(fn=permutation_prior, args=(ONE,), invalid={"scores": [S, None]}),
    dict(fn=calibrated, args=(ONE,), invalid={"scores": [S, None]}),
    dict(fn=calibrate, args=(np.array([0.5, 0.3, 0.2]), np.array([0.4, 0.3, 0.3])),
         invalid={"probs": [np.array([0.5, 0.5]), np.array([-0.1, 0.6, 0.5])], "prior": [np.array([0.0, 0.5, 0.5])]}),
    dict(fn=attack_early_exit, args=(lambda order: [1.0, 0, 0, 0], Q), invalid={"score_order": [3], "mcq": ["Q"]}),
    dict(fn=score_questions, args=(SCORER, [Q]), invalid={"scorer": [3], "mcqs": [[], Q, ["Q"]], "k": [0, 2.5]}),
    dict(fn=FunctionScorer, args=(lambda q, o: [1.0] * len(o),), invalid={"fn": [3]}),
    dict(fn=TinyLetterModel, kwargs={"steps": 2},
         invalid={"d_model": [0, 1.5], "steps": [0], "lr": [0, -1.0], "gold_skew": [1.5, -0.1, "a"], "seed": [-1]}),
]

EXEMPT = {
    "FAMILIES": "a constant mapping of generators",
    "LETTERS": "a constant string",
    "SLUG": "a constant",
    "AttackSummary": "a result record built by summarize",
    "LetterProbabilityScorer": "needs a transformers model; its argument checks are tested in test_scorers.py",
    "EmbeddingClozeScorer": "needs an encoder; its argument checks are tested in test_scorers.py",
    "fit_top_layers": "needs a transformers Llama model; its argument checks are tested in test_scorers.py",
}
