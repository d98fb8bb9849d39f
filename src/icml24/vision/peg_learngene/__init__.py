"""PEG (Wang, Yang, Chen, Geng, ICML 2024, https://proceedings.mlr.press/v235/wang24cf.html): Vision
Transformers as Probabilistic Expansion from Learngene.

* :func:`mixture_matrix`, :func:`mix`: Gaussian-softmax (or uniform, or one-hot) mixtures of ancestry heads/layers.
* :class:`ExpansionMap`, :class:`LearngeneAttention`, :class:`ExpandedFFNStack`: the non-linear expansion to
  descendants of any head count and depth.
* :func:`build_descendant`: descendants initialised by PEG or by the baselines (random, direct inheritance,
  uniform mixture, TLEG-style linear expansion, the ancestry itself, the released code's behaviour).
* :func:`train_classifier`, :func:`digits_split`: training with a per-epoch accuracy curve; the digits split.
"""

from icml24.vision.peg_learngene.learngene import (
    METHODS,
    DescendantSpec,
    ExpandedFFNStack,
    ExpansionMap,
    LearngeneAttention,
    build_descendant,
    descendant_parameter_count,
    mix,
    mixture_matrix,
)
from icml24.vision.peg_learngene.training import TrainConfig, accuracy, digits_split, train_classifier

SLUG = "peg-learngene"

__all__ = [
    "METHODS",
    "SLUG",
    "DescendantSpec",
    "ExpandedFFNStack",
    "ExpansionMap",
    "LearngeneAttention",
    "TrainConfig",
    "accuracy",
    "build_descendant",
    "descendant_parameter_count",
    "digits_split",
    "mix",
    "mixture_matrix",
    "train_classifier",
]
