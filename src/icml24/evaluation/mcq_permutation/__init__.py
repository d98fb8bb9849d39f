"""Fool Your (Vision and) Language Model With Embarrassingly Simple Permutations (Zong, Yu, Chavhan, Zhao,
Hospedales; ICML 2024). https://arxiv.org/abs/2310.01651 · official code https://github.com/ys-zong/FoolyourVLLMs

Multiple-choice answers should not depend on the order of the options, yet reordering them (the letters
stay, the contents move) fools popular models: a question survives the adversarial-permutation attack only
if the model is right under every one of the ``n!`` orders, and that accuracy falls far below the clean one.
"""

from icml24.evaluation.mcq_permutation.adapt import fit_top_layers
from icml24.evaluation.mcq_permutation.attack import (
    AttackSummary,
    PermutationScores,
    accuracy_by_gold_letter,
    adversarial_correct,
    all_permutations,
    apply_order,
    attack_early_exit,
    calibrate,
    calibrated,
    clean_correct,
    correct_matrix,
    letter_histogram,
    majority_vote,
    majority_vote_correct,
    permutation_prior,
    random_permutation_correct,
    reduced_orders,
    sampled_permutation_correct,
    summarize,
)
from icml24.evaluation.mcq_permutation.questions import (
    FAMILIES,
    LETTERS,
    MCQ,
    fact_key,
    format_prompt,
    generate_questions,
    unseen_split,
)
from icml24.evaluation.mcq_permutation.scorers import (
    EmbeddingClozeScorer,
    FunctionScorer,
    LetterProbabilityScorer,
    score_questions,
)
from icml24.evaluation.mcq_permutation.tiny import TinyLetterModel

SLUG = "mcq-permutation"

__all__ = [
    "FAMILIES",
    "LETTERS",
    "MCQ",
    "SLUG",
    "AttackSummary",
    "EmbeddingClozeScorer",
    "FunctionScorer",
    "LetterProbabilityScorer",
    "PermutationScores",
    "TinyLetterModel",
    "accuracy_by_gold_letter",
    "adversarial_correct",
    "all_permutations",
    "apply_order",
    "attack_early_exit",
    "calibrate",
    "calibrated",
    "clean_correct",
    "correct_matrix",
    "fact_key",
    "fit_top_layers",
    "format_prompt",
    "generate_questions",
    "letter_histogram",
    "majority_vote",
    "majority_vote_correct",
    "permutation_prior",
    "random_permutation_correct",
    "reduced_orders",
    "sampled_permutation_correct",
    "score_questions",
    "summarize",
    "unseen_split",
]
