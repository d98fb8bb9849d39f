"""A scikit-learn split conformal classifier around any classifier with ``predict_proba``.

Split conformal prediction (Papadopoulos et al., 2002; Vovk et al., 2005; see Angelopoulos & Bates,
https://arxiv.org/abs/2107.07511): fit a classifier on training data, compute the nonconformity scores of
the true labels on a held-out calibration set, take their finite-sample quantile ``qhat``
(:func:`~icml24.conformal.calibration.conformal_quantile`), and return for a new input every label whose
score is ``<= qhat``. The sets cover the true label with probability ``>= confidence_level`` for
exchangeable data, whatever the classifier.

Two ways to use it:

* scikit-learn's one-call ``fit(X, y)``: a clone of ``estimator`` is fitted on a ``1 - calibration_size``
  share of (X, y) and conformalized on the rest, so ``cross_val_score``, ``GridSearchCV`` and ``Pipeline``
  work (they call ``fit`` and then ``score``).
* MAPIE 1.x's staged flow: ``fit(X_train, y_train)`` with ``calibration_size=None`` (fit on all of it), or
  ``prefit=True``, then ``conformalize(X_cal, y_cal)``, then ``predict_set(X)``. Calls out of order raise.

Names follow MAPIE 1.x (``mapie.classification.SplitConformalClassifier``) where the concept is the same:
``confidence_level`` (= 1 - alpha), ``conformity_score``, ``prefit``, ``conformalize``, ``predict_set``.
Differences: our ``predict_set(X)`` returns only the boolean (n, n_classes) sets (MAPIE returns
``(y_pred, sets)`` with a third axis over confidence levels; ours takes one level); ``confidence_level`` is
one float; ``fit`` holds out a calibration share unless ``calibration_size=None``.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted, column_or_1d

from icml24.conformal._validation import as_probs_array, check_alpha, check_labels, check_probs, check_rng
from icml24.conformal.calibration import conformal_quantile, conformal_rank, sets_from_probs
from icml24.conformal.scores import SCORES, aps_scores, check_raps_params, lac_scores, raps_scores

__all__ = [
    "PRECOMPUTED",
    "ConformalSetClassifierBase",
    "SmallCalibrationWarning",
    "SplitConformalClassifier",
    "min_calibration_size",
]


class SmallCalibrationWarning(UserWarning):
    """The calibration set is too small for the requested level: ``qhat = +inf`` and every set holds every
    label (the guarantee then holds trivially)."""


def min_calibration_size(confidence_level: float) -> int:
    """The smallest calibration size ``n`` with ``ceil((n + 1) * confidence_level) <= n``, i.e. the smallest
    ``n`` for which split conformal gives a finite threshold (``n >= confidence_level / (1 - confidence_level)``;
    9 at 0.9, 19 at 0.95, 99 at 0.99)."""
    alpha = check_alpha(1.0 - _check_level(confidence_level))
    n = max(1, math.floor((1.0 - alpha) / alpha) - 1)
    while conformal_rank(n, alpha) > n:
        n += 1
    return n


def _check_level(confidence_level: object) -> float:
    if isinstance(confidence_level, (bool, np.bool_)) or not isinstance(confidence_level, numbers.Real):
        raise TypeError(
            f"confidence_level must be a real number in (0, 1), got {type(confidence_level).__name__}"
        )
    value = float(confidence_level)
    if not math.isfinite(value) or not 0.0 < value < 1.0:
        raise ValueError(f"confidence_level must be in the open interval (0, 1), got {confidence_level!r}")
    return value


PRECOMPUTED = "precomputed"
"""``estimator="precomputed"``: the inputs ``X`` already are a model's predicted probabilities (n, n_classes)."""


class _PrecomputedProbabilities:
    """The fitted "model" behind ``estimator="precomputed"``: ``predict_proba(X)`` checks that ``X`` holds
    probability rows with the calibration's number of columns and returns it."""

    def __init__(self, n_classes: int) -> None:
        self.classes_ = np.arange(n_classes)
        self.n_features_in_ = n_classes

    def predict_proba(self, X) -> np.ndarray:
        p = check_probs(X, name="X")
        if p.shape[1] != self.classes_.shape[0]:
            raise ValueError(
                f"X must have shape (n_samples, {self.classes_.shape[0]}) like the calibration probabilities, "
                f"got {p.shape}"
            )
        return p


class ConformalSetClassifierBase(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """What the conformal set classifiers of this package share (:class:`SplitConformalClassifier`,
    ``CoverageMatchedSets``, ``RobustFederatedConformal``): the wrapped classifier, the one-call ``fit``
    that holds out a calibration share, MAPIE 1.x's staged flow (``fit`` then ``conformalize`` then
    ``predict_set``), ``estimator="precomputed"`` (``X`` already holds the model's probabilities), point
    predictions from the wrapped model and the size-penalised coverage ``score``.

    Subclasses set the parameters ``estimator``, ``prefit``, ``calibration_size``, ``random_state`` and
    implement ``conformalize`` (which must call :meth:`_start_conformalize`) and ``predict_set``.
    """

    _calibration_attrs: tuple[str, ...] = ("qhat_", "calibration_scores_", "n_calibration_", "rng_")

    # ------------------------------------------------------------------ shared stages
    def _fit(self, X, y, **sample_props):
        """``fit``'s body; ``sample_props`` are per-sample arrays (or None) split along with (X, y) and passed
        to ``conformalize``."""
        self._check_params()
        y = column_or_1d(y, warn=True)
        if self._precomputed or self.prefit:
            self.__dict__.pop("estimator_", None)
            self._arg_names = ("X", "y")  # errors name fit's arguments, not conformalize's
            try:
                return self.conformalize(X, y, **sample_props)
            finally:
                del self._arg_names
        for attr in self._calibration_attrs:
            self.__dict__.pop(attr, None)
        if self.calibration_size is None:
            self.estimator_ = clone(self._base()).fit(X, y)
            self._set_classes()
            return self
        names = [k for k, v in sample_props.items() if v is not None]
        X_fit, X_cal, y_fit, y_cal, *extra = self._split(X, y, *(sample_props[k] for k in names))
        self.estimator_ = clone(self._base()).fit(X_fit, y_fit)
        self._set_classes()
        return self.conformalize(X_cal, y_cal, **dict(zip(names, extra[1::2])))  # (fit, cal) pairs

    def _start_conformalize(self, X, y):
        """Checks shared by every ``conformalize``: returns ``(probs, y_idx)`` of the calibration data."""
        name_X, name_y = getattr(self, "_arg_names", ("X_conformalize", "y_conformalize"))
        self._check_params()
        if self._precomputed:
            # the number of classes is the number of probability columns of the calibration data
            self.estimator_ = _PrecomputedProbabilities(as_probs_array(X, name=name_X).shape[1])
            self._set_classes()
        elif not hasattr(self, "estimator_"):
            if not self.prefit:
                raise NotFittedError("call fit(X, y) before conformalize, or pass prefit=True with a fitted estimator")
            self._use_prefit()
        y_idx = self._encode(y, name=name_y)
        probs = self.estimator_.predict_proba(X)
        if probs.shape[0] == 0:
            raise ValueError("the calibration set is empty: conformalize needs at least one sample")
        if probs.shape[0] != y_idx.shape[0]:
            raise ValueError(f"{name_X} has {probs.shape[0]} samples but {name_y} has {y_idx.shape[0]}")
        return probs, y_idx

    def predict_proba(self, X) -> np.ndarray:
        """The wrapped estimator's probabilities."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(X)

    def predict(self, X) -> np.ndarray:
        """The wrapped estimator's point predictions (its top label), as MAPIE's ``predict``."""
        probs = self.predict_proba(X)
        return self.classes_[np.argmax(probs, axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Size-penalised coverage ``coverage - mean_set_size / n_classes`` of ``predict_set`` on (X, y);
        higher is better.

        It is 0 for the trivial predictors (every set every label, or every set empty), ``1 - 1/n_classes``
        for singleton sets that always hold the true label, and, at a fixed level (where conformal coverage
        is about the level whatever the model), it ranks models by how small their sets are: what
        ``GridSearchCV``/``cross_val_score`` should select on. Plain coverage is
        ``icml24.conformal.marginal_coverage(self.predict_set(X), y, classes=self.classes_)``. ``sample_weight`` weights
        both terms.
        """
        sets = self.predict_set(X)
        y_idx = self._encode(column_or_1d(y, warn=True), name="y")
        if y_idx.shape[0] != sets.shape[0]:
            raise ValueError(f"X has {sets.shape[0]} samples but y has {y_idx.shape[0]}")
        hit = sets[np.arange(sets.shape[0]), y_idx].astype(float)
        size = sets.sum(axis=1) / self.n_classes_
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
        return float(np.average(hit - size, weights=w))

    def __sklearn_tags__(self):
        # Input tags come from the wrapped estimator (sparse input, NaN): it is the one that reads X.
        tags = super().__sklearn_tags__()
        if self._precomputed:
            return tags
        from sklearn.utils import get_tags

        base = get_tags(self._base())
        tags.input_tags.sparse = base.input_tags.sparse
        tags.input_tags.allow_nan = base.input_tags.allow_nan
        return tags

    # ------------------------------------------------------------------ helpers
    @property
    def _precomputed(self) -> bool:
        return isinstance(self.estimator, str) and self.estimator == PRECOMPUTED

    def _base(self):
        return LogisticRegression() if self.estimator is None else self.estimator

    def _check_params(self) -> None:
        if isinstance(self.estimator, str) and not self._precomputed:
            raise ValueError(f"estimator must be a classifier, None or {PRECOMPUTED!r}, got {self.estimator!r}")
        if not self._precomputed and not hasattr(self._base(), "predict_proba"):
            raise TypeError(f"estimator must have predict_proba, got {type(self.estimator).__name__}")
        for name in ("prefit",):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        cs = self.calibration_size
        if cs is not None:
            if isinstance(cs, (bool, np.bool_)) or not isinstance(cs, numbers.Real):
                raise TypeError(f"calibration_size must be a float in (0, 1) or None, got {type(cs).__name__}")
            if not (math.isfinite(float(cs)) and 0.0 < float(cs) < 1.0):
                raise ValueError(f"calibration_size must be in the open interval (0, 1) or None, got {cs!r}")

    def _split(self, X, y, *extra):
        n = len(y)
        if n < 2:
            raise ValueError(f"fit needs at least 2 samples to hold out a calibration share, got n_samples = {n}")
        _, counts = np.unique(y, return_counts=True)
        n_cal = max(1, round(float(self.calibration_size) * n))
        stratify = y if counts.min() >= 2 and counts.size <= min(n_cal, n - n_cal) else None
        return train_test_split(X, y, *extra, test_size=n_cal, random_state=self.random_state, stratify=stratify)

    def _use_prefit(self) -> None:
        try:
            check_is_fitted(self._base())
        except NotFittedError as exc:
            raise NotFittedError("prefit=True but the estimator is not fitted") from exc
        self.estimator_ = self._base()
        self._set_classes()

    def _set_classes(self) -> None:
        classes = getattr(self.estimator_, "classes_", None)
        if classes is None:
            raise TypeError("the estimator must expose classes_ after fitting")
        self.classes_ = np.asarray(classes)
        self.n_classes_ = int(self.classes_.shape[0])
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        if hasattr(self.estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.estimator_.feature_names_in_
        # classes 0..K-1 (the common case): labels are already column indices, no lookup needed
        self._classes_are_indices = bool(
            np.issubdtype(self.classes_.dtype, np.integer) and np.array_equal(self.classes_, np.arange(self.n_classes_))
        )

    def _encode(self, y, name: str = "y_conformalize") -> np.ndarray:
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        if y.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
        if y.shape[0] == 0:
            raise ValueError("the calibration set is empty: conformalize needs at least one sample")
        if self._classes_are_indices and (np.issubdtype(y.dtype, np.integer) or self._precomputed):
            return check_labels(y, self.n_classes_, name=name)
        order = np.argsort(self.classes_)
        sorted_classes = self.classes_[order]
        try:
            pos = np.clip(np.searchsorted(sorted_classes, y), 0, self.n_classes_ - 1)
        except TypeError as exc:
            raise ValueError(f"{name} contains labels not comparable with the classes {self.classes_.tolist()}") from exc
        unknown = sorted_classes[pos] != y
        if unknown.any():
            bad = np.unique(y[unknown])[:5].tolist()
            raise ValueError(f"{name} contains labels not among the classes {self.classes_.tolist()}: {bad}")
        return order[pos]

    def _warn_if_infinite(self, what: str) -> None:
        if math.isinf(self.qhat_) and self.qhat_ > 0:
            warnings.warn(what, SmallCalibrationWarning, stacklevel=3)


def _check_score_params(est) -> None:
    """Validate the conformity-score hyper-parameters that split and federated set classifiers share
    (``confidence_level``, ``conformity_score``, ``lam``, ``k_reg``, ``randomized``, ``allow_empty``)."""
    _check_level(est.confidence_level)
    if est.conformity_score not in SCORES:
        raise ValueError(f"conformity_score must be one of {SCORES}, got {est.conformity_score!r}")
    check_raps_params(est.lam, est.k_reg)
    for name in ("randomized", "allow_empty"):
        if not isinstance(getattr(est, name), (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool, got {getattr(est, name)!r}")


class SplitConformalClassifier(ConformalSetClassifierBase):
    """Split conformal prediction sets for any classifier with ``predict_proba``.

    Args:
        estimator: a scikit-learn classifier with ``fit``, ``predict_proba`` and ``classes_``
            (default: ``LogisticRegression()``, as in MAPIE), or ``"precomputed"``: ``X`` already holds a
            model's predicted probabilities (n, n_classes), labels are column indices, and ``fit``
            conformalizes on all of (X, y).
        confidence_level: target coverage ``1 - alpha``; sets cover the true label with probability
            ``>= confidence_level`` over exchangeable calibration and test data.
        conformity_score: ``"lac"`` (1 - p_y), ``"aps"`` or ``"raps"`` (see :mod:`icml24.conformal.scores`).
        prefit: the estimator is already fitted: ``fit(X, y)`` conformalizes on all of (X, y), and
            ``conformalize`` may be called directly.
        calibration_size: share of ``fit``'s data held out for conformalization (stratified when every class
            has two samples); ``None``: ``fit`` fits the estimator on all of it and ``conformalize`` must
            follow (MAPIE's flow). Ignored when ``prefit``.
        lam: RAPS penalty per rank beyond ``k_reg``.
        k_reg: RAPS number of unpenalised top ranks.
        randomized: randomised APS/RAPS scores (exact rather than conservative coverage; sets may be
            empty unless ``allow_empty=False``).
        allow_empty: if False, an empty set is replaced by the model's top label.
        random_state: seed of the calibration split and of the randomised scores. ``conformalize`` reseeds
            the generator; each ``predict_set`` call then draws fresh ``U``'s, so repeated calls on the same
            inputs may differ (the coverage guarantee is over that randomness).

    A calibration set smaller than :func:`min_calibration_size` (9 at level 0.9) gives ``qhat_ = +inf``:
    every set is every label, and a :class:`SmallCalibrationWarning` says so.

    Fitted attributes: ``estimator_``, ``classes_``, ``n_classes_``, ``n_features_in_``,
    ``calibration_scores_``, ``n_calibration_``, ``qhat_``, ``alpha_`` (= 1 - confidence_level).

    Example:
        >>> from sklearn.datasets import load_digits
        >>> from sklearn.linear_model import LogisticRegression
        >>> X, y = load_digits(return_X_y=True)
        >>> cp = SplitConformalClassifier(LogisticRegression(max_iter=500), confidence_level=0.9, prefit=False,
        ...                               calibration_size=None)
        >>> sets = cp.fit(X[:800], y[:800]).conformalize(X[800:1300], y[800:1300]).predict_set(X[1300:])
        >>> sets.shape
        (497, 10)
    """

    def __init__(
        self,
        estimator=None,
        *,
        confidence_level: float = 0.9,
        conformity_score: str = "lac",
        prefit: bool = False,
        calibration_size: float | None = 0.25,
        lam: float = 0.01,
        k_reg: int = 5,
        randomized: bool = False,
        allow_empty: bool = True,
        random_state: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.confidence_level = confidence_level
        self.conformity_score = conformity_score
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.lam = lam
        self.k_reg = k_reg
        self.randomized = randomized
        self.allow_empty = allow_empty
        self.random_state = random_state

    # ------------------------------------------------------------------ stages
    def fit(self, X, y) -> SplitConformalClassifier:
        """Fit and (unless ``calibration_size=None``) conformalize.

        ``prefit=False``: fit a clone of ``estimator`` on a ``1 - calibration_size`` share of (X, y) and
        conformalize on the rest (with ``calibration_size=None``: fit on all of it, no conformalization).
        ``prefit=True`` or ``estimator="precomputed"``: conformalize on all of (X, y).
        """
        return self._fit(X, y)

    def conformalize(self, X_conformalize, y_conformalize) -> SplitConformalClassifier:
        """Compute the calibration scores of the true labels and the threshold ``qhat_`` (MAPIE 1.x's
        ``conformalize``). Warns with :class:`SmallCalibrationWarning` when the set is too small for the
        level."""
        probs, y_idx = self._start_conformalize(X_conformalize, y_conformalize)
        self.alpha_ = 1.0 - _check_level(self.confidence_level)
        self.rng_ = check_rng(self.random_state)
        self.calibration_scores_ = self._scores(probs, y_idx)
        self.n_calibration_ = int(self.calibration_scores_.shape[0])
        self.qhat_ = conformal_quantile(self.calibration_scores_, self.alpha_)
        self._warn_if_infinite(
            f"{self.n_calibration_} calibration samples are too few for confidence_level="
            f"{self.confidence_level}: split conformal needs at least "
            f"{min_calibration_size(self.confidence_level)}, so every prediction set holds every label"
        )
        return self

    def predict_set(self, X) -> np.ndarray:
        """Boolean (n, n_classes) prediction sets; column ``k`` is ``classes_[k]`` (MAPIE's ``predict_set``
        returns ``(y_pred, sets[:, :, levels])``: see the module docstring)."""
        check_is_fitted(self, "qhat_", msg="call conformalize(X_cal, y_cal) (or fit) before predict_set")
        probs = self.estimator_.predict_proba(X)
        return sets_from_probs(
            probs,
            self.qhat_,
            score=self.conformity_score,
            lam=self.lam,
            k_reg=self.k_reg,
            randomized=self.randomized,
            rng=self.rng_ if self.randomized else None,
            allow_empty=self.allow_empty,
        )

    # ------------------------------------------------------------------ helpers
    def _check_params(self) -> None:
        super()._check_params()
        _check_score_params(self)

    def _scores(self, probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
        return conformity_scores(self.conformity_score, probs, labels, lam=self.lam, k_reg=self.k_reg,
                                 randomized=self.randomized, rng=self.rng_ if self.randomized else None)


def conformity_scores(name: str, probs: np.ndarray, labels: np.ndarray, *, lam: float, k_reg: int,
                      randomized: bool, rng: np.random.Generator | None) -> np.ndarray:
    """The conformity scores of the true ``labels`` under the score ``name`` (``"lac"``, ``"aps"``, ``"raps"``)."""
    if name == "lac":
        return lac_scores(probs, labels)
    if name == "aps":
        return aps_scores(probs, labels, randomized=randomized, rng=rng)
    return raps_scores(probs, labels, lam=lam, k_reg=k_reg, randomized=randomized, rng=rng)
