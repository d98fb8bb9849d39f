"""Conformal Prediction Sets Improve Human Decision Making (Cresswell, Sui, Kumar & Vouitsis, ICML 2024,
https://arxiv.org/abs/2401.13744).

Conformal (RAPS) sets versus coverage-matched top-k sets (:mod:`.sets`), the trial's statistics over a
table of participant responses (:mod:`.analysis`), simulated decision-makers (:mod:`.simulation`) and a
reader for the released participant-level results (:mod:`.trial_data`). The reproduction lives in
``reproduce.py`` and is not imported here.
"""

from icml24.conformal.conformal_decision_sets.analysis import (
    ArmSummary,
    WelchResult,
    arm_summaries,
    compare_arms,
    participant_accuracy,
)
from icml24.conformal.conformal_decision_sets.sets import (
    CoverageMatchedSets,
    display_order,
    smallest_k_for_alpha,
    temperature_softmax,
    topk_coverage,
    topk_sets,
)
from icml24.conformal.conformal_decision_sets.simulation import (
    DECISION_RULES,
    HumanModel,
    decide,
    human_knowledge,
    simulate_trial,
)
from icml24.conformal.conformal_decision_sets.trial_data import (
    N_QUESTIONS,
    find_trial_folder,
    load_trial_results,
)

SLUG = "conformal-decision-sets"

__all__ = [
    "DECISION_RULES",
    "N_QUESTIONS",
    "SLUG",
    "ArmSummary",
    "CoverageMatchedSets",
    "HumanModel",
    "WelchResult",
    "arm_summaries",
    "compare_arms",
    "decide",
    "display_order",
    "find_trial_folder",
    "human_knowledge",
    "load_trial_results",
    "participant_accuracy",
    "simulate_trial",
    "smallest_k_for_alpha",
    "temperature_softmax",
    "topk_coverage",
    "topk_sets",
]
