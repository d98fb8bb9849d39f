"""A scikit-learn style split conformal classifier around any classifier with ``predict_proba``.

Split conformal prediction (Papadopoulos et al., 2002; Vovk et al., 2005; see Angelopoulos & Bates,
https://arxiv.org/abs/2107.07511): fit a classifier on training data, compute the nonconformity scores of
the true labels on a held-out calibration set, take their finite-sample quantile ``qhat``
(:func:`~icml24.conformal.calibration.conformal_quantile`), and return for a new input every label whose
score is ``<= qhat``. The sets cover the true label with probability ``>= 1 - alpha`` for exchangeable
data, whatever the classifier.

The API is staged like MAPIE's and refuses calls out of order: ``fit`` (or ``prefit=True``), then
``calibrate``, then ``predict_sets``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from icml24.conformal._validation import check_alpha, check_labels, check_rng
from icml24.conformal.calibration import conformal_quantile, sets_from_probs
from icml24.conformal.scores import SCORES, aps_scores, check_raps_params, lac_scores, raps_scores

__all__ = ["SplitConformalClassifier"]


class SplitConformalClassifier(BaseEstimator):
    """Split conformal prediction sets for any classifier with ``predict_proba``.

    Args:
        estimator: a scikit-learn style classifier with ``fit``, ``predict_proba`` and ``classes_``.
        alpha: target miscoverage; sets cover the true label with probability >= ``1 - alpha``.
        score: ``"lac"`` (1 - p_y), ``"aps"`` or ``"raps"`` (see :mod:`icml24.conformal.scores`).
        prefit: the estimator is already fitted; ``fit`` does not refit it and ``calibrate`` may be called
            directly.
        lam: RAPS penalty per rank beyond ``k_reg``.
        k_reg: RAPS number of unpenalised top ranks.
        randomized: randomised APS/RAPS scores (exact rather than conservative coverage; sets may be
            empty unless ``allow_empty=False``).
        allow_empty: if False, an empty set is replaced by the model's top label.
        random_state: seed for the randomised scores. ``calibrate`` reseeds the generator; each
            ``predict_sets`` call then draws fresh ``U``'s, so repeated calls on the same inputs may differ
            (the coverage guarantee is over that randomness).

    Fitted attributes: ``estimator_``, ``classes_``, ``n_classes_``, ``calibration_scores_``,
    ``n_calibration_``, ``qhat_``.

    Example:
        >>> from sklearn.datasets import load_digits
        >>> from sklearn.linear_model import LogisticRegression
        >>> X, y = load_digits(return_X_y=True)
        >>> cp = SplitConformalClassifier(LogisticRegression(max_iter=500), alpha=0.1)
        >>> sets = cp.fit(X[:800], y[:800]).calibrate(X[800:1300], y[800:1300]).predict_sets(X[1300:])
        >>> sets.shape
        (497, 10)
    """

    def __init__(
        self,
        estimator,
        *,
        alpha: float = 0.1,
        score: str = "lac",
        prefit: bool = False,
        lam: float = 0.01,
        k_reg: int = 5,
        randomized: bool = False,
        allow_empty: bool = True,
        random_state: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.alpha = alpha
        self.score = score
        self.prefit = prefit
        self.lam = lam
        self.k_reg = k_reg
        self.randomized = randomized
        self.allow_empty = allow_empty
        self.random_state = random_state

    # ------------------------------------------------------------------ stages
    def fit(self, X, y) -> SplitConformalClassifier:
        """Fit a clone of ``estimator`` on (X, y); with ``prefit=True`` only check that it is fitted."""
        self._check_params()
        if self.prefit:
            self._use_prefit()
        else:
            self.estimator_ = clone(self.estimator).fit(X, y)
            self._set_classes()
        return self

    def calibrate(self, X_cal, y_cal) -> SplitConformalClassifier:
        """Compute the calibration scores of the true labels and the threshold ``qhat_``."""
        self._check_params()
        if not hasattr(self, "estimator_"):
            if not self.prefit:
                raise NotFittedError("call fit(X, y) before calibrate, or pass prefit=True with a fitted estimator")
            self._use_prefit()
        y_idx = self._encode(y_cal)
        probs = self.estimator_.predict_proba(X_cal)
        if probs.shape[0] == 0:
            raise ValueError("the calibration set is empty: calibrate needs at least one sample")
        self.rng_ = check_rng(self.random_state)
        self.calibration_scores_ = self._scores(probs, y_idx)
        self.n_calibration_ = int(self.calibration_scores_.shape[0])
        self.qhat_ = conformal_quantile(self.calibration_scores_, self.alpha)
        return self

    def predict_sets(self, X) -> np.ndarray:
        """Boolean (n, n_classes) prediction sets; column ``k`` is ``classes_[k]``."""
        check_is_fitted(self, "qhat_", msg="call calibrate(X_cal, y_cal) before predict_sets")
        probs = self.estimator_.predict_proba(X)
        return sets_from_probs(
            probs,
            self.qhat_,
            score=self.score,
            lam=self.lam,
            k_reg=self.k_reg,
            randomized=self.randomized,
            rng=self.rng_ if self.randomized else None,
            allow_empty=self.allow_empty,
        )

    def predict_proba(self, X) -> np.ndarray:
        """The wrapped estimator's probabilities."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(X)

    def predict(self, X) -> np.ndarray:
        """The wrapped estimator's point predictions (its top label)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    # ------------------------------------------------------------------ helpers
    def _check_params(self) -> None:
        check_alpha(self.alpha)
        if self.score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {self.score!r}")
        if not hasattr(self.estimator, "predict_proba"):
            raise TypeError(f"estimator must have predict_proba, got {type(self.estimator).__name__}")
        check_raps_params(self.lam, self.k_reg)
        for name in ("prefit", "randomized", "allow_empty"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def _use_prefit(self) -> None:
        try:
            check_is_fitted(self.estimator)
        except NotFittedError as exc:
            raise NotFittedError("prefit=True but the estimator is not fitted") from exc
        self.estimator_ = self.estimator
        self._set_classes()

    def _set_classes(self) -> None:
        classes = getattr(self.estimator_, "classes_", None)
        if classes is None:
            raise TypeError("the estimator must expose classes_ after fitting")
        self.classes_ = np.asarray(classes)
        self.n_classes_ = int(self.classes_.shape[0])
        # classes 0..K-1 (the common case): labels are already column indices, no lookup needed
        self._classes_are_indices = bool(
            np.issubdtype(self.classes_.dtype, np.integer) and np.array_equal(self.classes_, np.arange(self.n_classes_))
        )

    def _encode(self, y) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y_cal must be 1-D, got shape {y.shape}")
        if y.shape[0] == 0:
            raise ValueError("the calibration set is empty: calibrate needs at least one sample")
        if self._classes_are_indices and np.issubdtype(y.dtype, np.integer):
            return check_labels(y, self.n_classes_, name="y_cal")
        order = np.argsort(self.classes_)
        sorted_classes = self.classes_[order]
        pos = np.clip(np.searchsorted(sorted_classes, y), 0, self.n_classes_ - 1)
        unknown = sorted_classes[pos] != y
        if unknown.any():
            bad = np.unique(y[unknown])[:5].tolist()
            raise ValueError(f"y_cal contains labels not among the classes {self.classes_.tolist()}: {bad}")
        return order[pos]

    def _scores(self, probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
        rng = self.rng_ if self.randomized else None
        if self.score == "lac":
            return lac_scores(probs, labels)
        if self.score == "aps":
            return aps_scores(probs, labels, randomized=self.randomized, rng=rng)
        return raps_scores(probs, labels, lam=self.lam, k_reg=self.k_reg, randomized=self.randomized, rng=rng)
