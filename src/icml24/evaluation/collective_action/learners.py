"""Re-weighting learners of *The Role of Learning Algorithms in Collective Action* (Ben-Dov et al., ICML 2024,
https://arxiv.org/abs/2405.06582, section 3), as scikit-learn classifiers over logistic regression.

Each learner ends with one weighted logistic regression; its final per-point training weights are kept in
``weights_`` so that the collective's effective size ``alpha_eff = sum_C w / sum w`` can be read off
(:func:`~icml24.evaluation.collective_action.signals.effective_collective_size`). ERM is plain
``sklearn.linear_model.LogisticRegression``.

* :class:`JTTClassifier`, Just Train Twice (Liu et al., ICML 2021): stage 1 is a strongly regularised
  logistic regression (``stage1_C``) whose training errors form the error set E; stage 2 refits with weight
  ``upweight`` (lambda_up) on E and 1 elsewhere. ``upweight = 1`` is ERM.
* :class:`CVaRDROClassifier`, CVaR-DRO at level ``rho`` (the mean of the worst ``rho`` fraction of losses),
  by iterative re-weighting: each round the best-response weights ``1/rho`` go to the worst ``rho`` mass of
  the current per-point losses, and the model is refitted on the running average of these weights
  (fictitious play, which converges for convex losses where the plain best response oscillates). ``rho = 1``
  is ERM.
* :class:`LfFClassifier`, Learning from Failure (Nam et al., NeurIPS 2020): a *biased* model trained with the
  generalised cross-entropy ``GCE = (1 - p_y^q) / q`` (its gradient is ``p_y^q`` times the cross-entropy's,
  so we fit it by refitting with weights ``p_y^q``) and a debiased model refitted with the relative difficulty
  ``w_i = CE_b(i) / (CE_b(i) + CE_d(i))`` (losses averaged over rounds, as LfF's moving average), normalised
  to mean 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

__all__ = ["CVaRDROClassifier", "JTTClassifier", "LfFClassifier", "cvar_weights"]


def _check_positive(est: Any, name: str, *, integer: bool = False, upper: float | None = None) -> None:
    value = getattr(est, name)
    if integer:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a positive real number, got {type(value).__name__}")
    if not (math.isfinite(float(value)) and value > 0) or (upper is not None and value > upper):
        bound = f" and at most {upper:g}" if upper is not None else ""
        raise ValueError(f"{name} must be a finite number > 0{bound}, got {value!r}")


def cvar_weights(losses: Any, rho: float, sample_weight: Any = None) -> np.ndarray:
    """The CVaR best response: weights ``1/rho`` on the worst ``rho`` share of the (weighted) loss mass, 0
    elsewhere, with a fractional weight on the boundary point (so that a weight of 2 acts as a duplicate).

    Returned per unit of sample weight, with ``sum(sample_weight * w) = sum(sample_weight)``; ``rho = 1``
    gives ones."""
    if isinstance(losses, (str, bytes)) or losses is None:
        raise TypeError(f"losses must be a 1-D array of numbers, got {type(losses).__name__}")
    ell = np.asarray(losses, dtype=np.float64)
    if ell.ndim != 1 or ell.size == 0 or not np.isfinite(ell).all():
        raise ValueError(f"losses must be a non-empty finite 1-D array, got shape {ell.shape}")
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.integer, np.floating)):
        raise TypeError(f"rho must be a real number in (0, 1], got {type(rho).__name__}")
    if not (0.0 < float(rho) <= 1.0):
        raise ValueError(f"rho must be in (0, 1], got {rho!r}")
    sw = np.ones_like(ell) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if sw.shape != ell.shape or not np.isfinite(sw).all() or (sw < 0).any() or sw.sum() <= 0:
        raise ValueError("sample_weight must be finite, non-negative, not all zero and of the shape of losses")
    if rho == 1.0:
        return np.ones_like(ell)
    total = float(sw.sum())
    budget = float(rho) * total
    order = np.argsort(-ell, kind="stable")
    before = np.concatenate(([0.0], np.cumsum(sw[order])[:-1]))
    share = np.clip((budget - before) / np.where(sw[order] > 0, sw[order], 1.0), 0.0, 1.0)
    share[sw[order] == 0] = 0.0
    w = np.zeros_like(ell)
    w[order] = share / float(rho)
    return w


def _named(validate, name: str):
    """Run a scikit-learn validation and say which argument failed (its messages often do not); the original
    message is kept whole after the prefix, so the estimator checks' message patterns still match."""
    try:
        return validate()
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from exc


class _WeightedLogisticBase(ClassifierMixin, BaseEstimator):
    """Shared fit plumbing: validation, classes, the final weighted logistic regression."""

    def _validate_fit(self, X: Any, y: Any, sample_weight: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        for name in ("C",):
            _check_positive(self, name)
        _check_positive(self, "max_iter", integer=True)
        X, y = _named(lambda: validate_data(self, X, y, dtype=np.float64), "X and y")
        _named(lambda: check_classification_targets(y), "y")
        sw = _named(lambda: _check_sample_weight(sample_weight, X, dtype=np.float64), "sample_weight")
        self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise ValueError(f"y must hold at least 2 classes, got {self.classes_.size} class")
        return X, y, sw

    def _logistic(self, C: float) -> LogisticRegression:
        return LogisticRegression(C=float(C), max_iter=int(self.max_iter))

    def _per_point_loss(self, model: LogisticRegression, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Cross-entropy ``-log p_y(x)`` of each training point under ``model``."""
        proba = model.predict_proba(X)
        idx = np.searchsorted(model.classes_, y)
        return -np.log(np.clip(proba[np.arange(len(y)), idx], 1e-12, 1.0))

    def _true_class_proba(self, model: LogisticRegression, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        proba = model.predict_proba(X)
        return proba[np.arange(len(y)), np.searchsorted(model.classes_, y)]

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "estimator_")
        X = _named(lambda: validate_data(self, X, reset=False, dtype=np.float64), "X")
        return self.estimator_.predict(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "estimator_")
        X = _named(lambda: validate_data(self, X, reset=False, dtype=np.float64), "X")
        return self.estimator_.predict_proba(X)

    def decision_function(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "estimator_")
        X = _named(lambda: validate_data(self, X, reset=False, dtype=np.float64), "X")
        return self.estimator_.decision_function(X)


class JTTClassifier(_WeightedLogisticBase):
    """Just Train Twice over logistic regression (section 3 of the paper; Liu et al. 2021).

    Args:
        C: inverse L2 strength of the final (stage-2) logistic regression.
        stage1_C: inverse L2 strength of stage 1: small values underfit, so that hard points (and a collective
            too small to be learned) land in the error set.
        upweight: lambda_up, the weight of the error set in stage 2 (1: ERM, bit for bit).
        max_iter: L-BFGS iterations of each logistic regression.

    Fitted attributes: ``stage1_estimator_``, ``estimator_`` (stage 2), ``n_iter_`` (its L-BFGS iterations), ``error_set_`` (boolean mask of the
    stage-1 training errors), ``weights_`` (stage-2 weight of each point, without the sample weights),
    ``classes_``, ``n_features_in_``.
    """

    def __init__(self, C: float = 1.0, stage1_C: float = 0.05, upweight: float = 20.0, max_iter: int = 1000):
        self.C = C
        self.stage1_C = stage1_C
        self.upweight = upweight
        self.max_iter = max_iter

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> JTTClassifier:
        _check_positive(self, "stage1_C")
        _check_positive(self, "upweight")
        X, y, sw = self._validate_fit(X, y, sample_weight)
        if float(self.upweight) == 1.0:  # no re-weighting: ERM, without spending a stage-1 fit
            self.stage1_estimator_ = None
            self.error_set_ = np.zeros(len(y), dtype=bool)
        else:
            self.stage1_estimator_ = self._logistic(self.stage1_C).fit(X, y, sample_weight=sample_weight)
            self.error_set_ = self.stage1_estimator_.predict(X) != y
        self.weights_ = np.where(self.error_set_, float(self.upweight), 1.0)
        final_sw = None if sample_weight is None and float(self.upweight) == 1.0 else sw * self.weights_
        self.estimator_ = self._logistic(self.C).fit(X, y, sample_weight=final_sw)
        self.n_iter_ = self.estimator_.n_iter_
        return self


class CVaRDROClassifier(_WeightedLogisticBase):
    """CVaR-DRO at level ``rho`` over logistic regression, by averaged iterative re-weighting.

    Args:
        C: inverse L2 strength of each logistic regression.
        rho: the CVaR level in (0, 1]: the objective is the mean of the worst ``rho`` share of per-point
            losses (``rho = 1``: ERM).
        n_rounds: re-weighting rounds after the initial ERM fit.
        max_iter: L-BFGS iterations of each logistic regression.

    Fitted attributes: ``estimator_``, ``weights_`` (the final averaged CVaR weights, mean 1 over the
    sample weights), ``classes_``, ``n_features_in_``.
    """

    def __init__(self, C: float = 1.0, rho: float = 0.2, n_rounds: int = 10, max_iter: int = 1000):
        self.C = C
        self.rho = rho
        self.n_rounds = n_rounds
        self.max_iter = max_iter

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> CVaRDROClassifier:
        _check_positive(self, "rho", upper=1.0)
        _check_positive(self, "n_rounds", integer=True)
        X, y, sw = self._validate_fit(X, y, sample_weight)
        model = self._logistic(self.C).fit(X, y, sample_weight=sample_weight)
        if float(self.rho) == 1.0:  # CVaR at level 1 is the mean loss: ERM
            self.weights_ = np.ones(len(y))
            self.estimator_ = model
            self.n_iter_ = model.n_iter_
            return self
        avg = np.zeros(len(y))
        for t in range(1, int(self.n_rounds) + 1):
            q = cvar_weights(self._per_point_loss(model, X, y), float(self.rho), sw)
            avg += (q - avg) / t
            model = self._logistic(self.C).fit(X, y, sample_weight=sw * avg)
        self.weights_ = avg
        self.estimator_ = model
        self.n_iter_ = model.n_iter_
        return self


class LfFClassifier(_WeightedLogisticBase):
    """Learning from Failure over logistic regression: a GCE-biased model and a debiased model.

    Args:
        C: inverse L2 strength of the debiased (final) model.
        biased_C: inverse L2 strength of the biased model.
        q: the generalised cross-entropy exponent in (0, 1] (0.7 in LfF).
        n_rounds: alternating rounds (biased refit with ``p_y^q`` weights, debiased refit with relative
            difficulty weights).
        max_iter: L-BFGS iterations of each logistic regression.

    Fitted attributes: ``biased_estimator_``, ``estimator_``, ``weights_`` (the final relative-difficulty
    weights, mean 1 over the sample weights), ``classes_``, ``n_features_in_``.
    """

    def __init__(self, C: float = 1.0, biased_C: float = 0.05, q: float = 0.7, n_rounds: int = 5,
                 max_iter: int = 1000):  # fmt: skip
        self.C = C
        self.biased_C = biased_C
        self.q = q
        self.n_rounds = n_rounds
        self.max_iter = max_iter

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> LfFClassifier:
        _check_positive(self, "biased_C")
        _check_positive(self, "q", upper=1.0)
        _check_positive(self, "n_rounds", integer=True)
        X, y, sw = self._validate_fit(X, y, sample_weight)
        biased = self._logistic(self.biased_C).fit(X, y, sample_weight=sample_weight)
        debiased = self._logistic(self.C).fit(X, y, sample_weight=sample_weight)
        loss_b = np.zeros(len(y))
        loss_d = np.zeros(len(y))
        w = np.ones(len(y))
        for t in range(1, int(self.n_rounds) + 1):
            # GCE step: its gradient is p_y^q times the cross-entropy's, so it emphasises the easy points
            gce_w = self._true_class_proba(biased, X, y) ** float(self.q)
            gce_mean = max(float((sw * gce_w).sum() / sw.sum()), 1e-12)
            biased = self._logistic(self.biased_C).fit(X, y, sample_weight=sw * gce_w / gce_mean)
            loss_b += (self._per_point_loss(biased, X, y) - loss_b) / t
            loss_d += (self._per_point_loss(debiased, X, y) - loss_d) / t
            w = loss_b / np.maximum(loss_b + loss_d, 1e-12)
            mass = float((sw * w).sum())
            w = w * (float(sw.sum()) / mass) if mass > 0 else np.ones(len(y))
            debiased = self._logistic(self.C).fit(X, y, sample_weight=sw * w)
        self.biased_estimator_ = biased
        self.weights_ = w
        self.estimator_ = debiased
        self.n_iter_ = debiased.n_iter_
        return self
