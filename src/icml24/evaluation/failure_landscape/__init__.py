"""Failures Are Fated, But Can Be Faded (Sagar, Taparia, Senanayake; ICML 2024).

https://arxiv.org/abs/2406.07145 · official code https://github.com/somsagar07/FailureShiftRL.
A deep-RL agent explores a grid of *actionable concepts* (input perturbations such as rotation, blur and
brightness) to map where a trained model fails (its *failure landscape*), rewarded by the paper's
confidence-weighted failure reward; a human marks unacceptable failure modes and the model is fine-tuned
on them, which restructures (fades) those failures.

This package: the concept grid and its batched perturbations (:class:`ConceptGrid`,
:func:`apply_concepts`, :func:`perturb_grid`), the model under test on bundled digits
(:class:`DigitsCNN`, :func:`train_classifier`), the reward and the exhaustive ground-truth landscape
(:func:`failure_reward`, :func:`evaluate_landscape`, :func:`landscape_distance` by POT), the one-step
Gymnasium search env with the DQN agent of :mod:`icml24.rl.value` and the random and epsilon-greedy
baselines (:class:`FailureSearchEnv`, :func:`dqn_search`, :func:`random_search`,
:func:`epsilon_greedy_search`, :func:`search_metrics`), and the restructuring step
(:func:`select_failure_modes`, :func:`restructure`).
"""

from icml24.evaluation.failure_landscape.concepts import (
    CONCEPT_NAMES,
    ConceptGrid,
    apply_concepts,
    perturb_grid,
)
from icml24.evaluation.failure_landscape.landscape import (
    FailureLandscape,
    evaluate_landscape,
    failure_reward,
    landscape_distance,
    normalize_landscape,
)
from icml24.evaluation.failure_landscape.model import (
    DigitsCNN,
    TrainConfig,
    load_digit_images,
    predict_proba,
    train_classifier,
)
from icml24.evaluation.failure_landscape.restructure import (
    RestructureConfig,
    augment_with_concepts,
    concept_augmenter,
    restructure,
    select_failure_modes,
)
from icml24.evaluation.failure_landscape.search import (
    DQNSearchConfig,
    FailureSearchEnv,
    SearchTrace,
    dqn_search,
    epsilon_greedy_search,
    linear_epsilon,
    random_search,
    search_metrics,
)

SLUG = "failure-landscape"

__all__ = [
    "CONCEPT_NAMES",
    "SLUG",
    "ConceptGrid",
    "DQNSearchConfig",
    "DigitsCNN",
    "FailureLandscape",
    "FailureSearchEnv",
    "RestructureConfig",
    "SearchTrace",
    "TrainConfig",
    "apply_concepts",
    "augment_with_concepts",
    "concept_augmenter",
    "dqn_search",
    "epsilon_greedy_search",
    "evaluate_landscape",
    "failure_reward",
    "landscape_distance",
    "linear_epsilon",
    "load_digit_images",
    "normalize_landscape",
    "perturb_grid",
    "predict_proba",
    "random_search",
    "restructure",
    "search_metrics",
    "select_failure_modes",
    "train_classifier",
]
