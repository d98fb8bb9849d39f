"""Conformal prediction: a shared core (scores, split calibration, prediction sets, metrics, a
scikit-learn wrapper) used by the papers of this field (``rob_fcp``, ``conformal_decision_sets``)."""

from icml24.conformal._validation import check_alpha, check_labels, check_probs
from icml24.conformal.calibration import conformal_quantile, conformal_rank, prediction_sets, sets_from_probs
from icml24.conformal.metrics import (
    StratifiedCoverage,
    class_conditional_coverage,
    covered,
    marginal_coverage,
    mean_set_size,
    set_sizes,
    size_stratified_coverage,
    size_stratified_coverage_violation,
)
from icml24.conformal.predictor import (
    PRECOMPUTED,
    SmallCalibrationWarning,
    SplitConformalClassifier,
    min_calibration_size,
)
from icml24.conformal.scores import SCORES, aps_scores, lac_scores, raps_scores, score_function

__all__ = [
    "PRECOMPUTED",
    "SCORES",
    "SmallCalibrationWarning",
    "SplitConformalClassifier",
    "StratifiedCoverage",
    "aps_scores",
    "check_alpha",
    "check_labels",
    "check_probs",
    "class_conditional_coverage",
    "conformal_quantile",
    "conformal_rank",
    "covered",
    "lac_scores",
    "marginal_coverage",
    "mean_set_size",
    "min_calibration_size",
    "prediction_sets",
    "raps_scores",
    "score_function",
    "set_sizes",
    "sets_from_probs",
    "size_stratified_coverage",
    "size_stratified_coverage_violation",
]
