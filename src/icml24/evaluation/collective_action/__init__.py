"""The Role of Learning Algorithms in Collective Action (Ben-Dov, Fawkes, Samadi, Sanyal; ICML 2024).

https://arxiv.org/abs/2405.06582. A collective, a fraction ``alpha`` of the users who contribute training
data, plants a signal ``g(x)`` and relabels its points to a target class ``y*``; its success
``S(alpha) = P[f(g(x)) = y* | y != y*]`` depends on the learner. Re-weighting learners (JTT, CVaR-DRO,
LfF) change the collective's effective size ``alpha_eff = sum_C w / sum w``: they amplify a small
collective (still misclassified, so up-weighted) and dilute a large one (learned early, while other hard
points are up-weighted); SGD's simplicity bias decides which signals get learned.

This package: the signal and the collective's strategy (:class:`PatchSignal`, :func:`plant_collective`),
the success and effective size (:func:`success_rate`, :func:`effective_collective_size`,
:func:`jtt_effective_size`), the classical learners as scikit-learn classifiers
(:class:`JTTClassifier`, :class:`CVaRDROClassifier`, :class:`LfFClassifier`; ERM is
``LogisticRegression``), SGD-trained MLPs with the same objectives (:func:`train_mlp`) and dominoes inputs
for the simplicity-bias experiment (:func:`make_dominoes`).
"""

from icml24.evaluation.collective_action.dominoes import Dominoes, make_dominoes
from icml24.evaluation.collective_action.learners import (
    CVaRDROClassifier,
    JTTClassifier,
    LfFClassifier,
    cvar_weights,
)
from icml24.evaluation.collective_action.mlp import MLP_METHODS, MLPRun, train_mlp
from icml24.evaluation.collective_action.signals import (
    CollectiveData,
    PatchSignal,
    effective_collective_size,
    jtt_effective_size,
    plant_collective,
    success_rate,
)

SLUG = "collective-action"

__all__ = [
    "MLP_METHODS",
    "SLUG",
    "CVaRDROClassifier",
    "CollectiveData",
    "Dominoes",
    "JTTClassifier",
    "LfFClassifier",
    "MLPRun",
    "PatchSignal",
    "cvar_weights",
    "effective_collective_size",
    "jtt_effective_size",
    "make_dominoes",
    "plant_collective",
    "success_rate",
    "train_mlp",
]
