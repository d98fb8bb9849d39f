"""Conformal sets and top-k sets with matched coverage, as shown to participants.

"Conformal Prediction Sets Improve Human Decision Making", Cresswell, Sui, Kumar & Vouitsis, ICML 2024
(PMLR 235), https://arxiv.org/abs/2401.13744, official code https://github.com/layer6ai-labs/hitl-conformal-prediction.

The trial compares two ways of showing a model's output to a person: a fixed-size top-k list and a
conformal (RAPS) set whose size varies with the model's uncertainty, with ``alpha`` tuned so that both have
the *same* empirical coverage on the calibration data (Section 3 of the paper):

1. ``p = softmax(z / T)`` with a fixed temperature ``T``.
2. ``C_topk(x)`` = the ``k`` most probable labels; its calibration coverage ``c_k`` sets ``alpha := 1 - c_k``.
3. RAPS scores (Angelopoulos et al., 2021, Eq. 4) ``s(x, y) = rho(y) + U p_y + lam max(0, o(y) - k_reg)``,
   randomised at calibration and test time, calibrated at level ``alpha``.
4. Test sets ``{y : s(x, y) <= qhat}``, never empty (the top label is shown when the set would be empty),
   displayed sorted by class id so that the model's ranking is not revealed.

The official code takes ``qhat`` as ``np.quantile(scores, 1 - alpha, method="higher")`` (no ``n + 1``
correction); we offer that rule as ``quantile_rule="higher"`` and default to the finite-sample rank rule of
:func:`icml24.conformal.conformal_quantile`.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from icml24.conformal import check_alpha, check_labels, check_probs, conformal_quantile, raps_scores
from icml24.conformal.calibration import sets_from_probs
from icml24.conformal.predictor import ConformalSetClassifierBase
from icml24.conformal.scores import check_raps_params

__all__ = [
    "CoverageMatchedSets",
    "display_order",
    "smallest_k_for_alpha",
    "temperature_softmax",
    "topk_coverage",
    "topk_sets",
]

QUANTILE_RULES = ("finite_sample", "higher")
MATCH_RULES = ("coverage", "alpha")


def temperature_softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """``softmax(z / T)`` row-wise (step 1; the paper fixes T per task, e.g. 0.3 for Go-Emotions)."""
    z = np.asarray(logits)
    if z.dtype == object or not np.issubdtype(z.dtype, np.number):
        raise TypeError(f"logits must be a numeric array (n_samples, n_classes), got dtype {z.dtype}")
    z = z.astype(np.float64)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)):
        raise TypeError(f"temperature must be a number > 0, got {type(temperature).__name__}")
    if not np.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if z.ndim != 2:
        raise ValueError(f"logits must be 2-D (n_samples, n_classes), got shape {z.shape}")
    if not np.isfinite(z).all():
        raise ValueError("logits contains NaN or infinite values")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    z = z / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _check_k(k: int, k_max: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= k_max:
        raise ValueError(f"k must be an integer in [1, {k_max}], got {k!r}")
    return int(k)


def topk_sets(probs: np.ndarray, k: int) -> np.ndarray:
    """Boolean (n, K) sets of the ``k`` most probable labels (ties broken by class index, as the ranking of
    the conformal scores)."""
    p = check_probs(probs)
    k = _check_k(k, p.shape[1])
    order = np.argsort(-p, axis=1, kind="stable")[:, :k]
    sets = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(sets, order, True, axis=1)
    return sets


def topk_coverage(probs: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Fraction of samples whose true label is among the ``k`` most probable (step 2)."""
    p = check_probs(probs)
    y = check_labels(labels, p.shape[1], n_samples=p.shape[0])
    sets = topk_sets(p, k)
    return float(sets[np.arange(len(y)), y].mean())


def smallest_k_for_alpha(probs: np.ndarray, labels: np.ndarray, alpha: float) -> int:
    """The other matching direction of the official code (``naive.py``, ``compute_k_empirically``): fix
    ``alpha`` and take the smallest ``k`` whose calibration coverage *exceeds* ``1 - alpha`` (strictly, as
    the official code; ``K`` when none does, which cannot happen here since top-K coverage is 1)."""
    alpha = check_alpha(alpha)
    p = check_probs(probs)
    y = check_labels(labels, p.shape[1], n_samples=p.shape[0])
    # rank of the true label (1-based), stable ordering: coverage of top-k is P(rank <= k)
    p_y = p[np.arange(len(y)), y]
    rank = (p > p_y[:, None]).sum(1) + ((p == p_y[:, None]) & (np.arange(p.shape[1]) < y[:, None])).sum(1) + 1
    cov = np.cumsum(np.bincount(rank, minlength=p.shape[1] + 1)[1:]) / len(y)
    above = cov > 1.0 - alpha
    return int(np.argmax(above) + 1) if above.any() else int(p.shape[1])


def display_order(sets: np.ndarray) -> list[list[int]]:
    """The labels of each set in the order participants saw them: sorted by class id, so the display carries
    no information about the model's ranking inside the set (step 4)."""
    s = np.asarray(sets)
    if s.ndim != 2:
        raise ValueError(f"sets must be a 2-D boolean array (n_samples, n_classes), got shape {s.shape}")
    if s.dtype != np.bool_:
        if not np.issubdtype(s.dtype, np.number) or not np.isin(s, (0, 1)).all():
            raise TypeError(f"sets must be boolean (or 0/1), got dtype {s.dtype}")
        s = s.astype(bool)
    return [np.flatnonzero(row).tolist() for row in s]


class CoverageMatchedSets(ConformalSetClassifierBase):
    """Top-k sets and RAPS conformal sets with the same calibration coverage (Section 3 of the paper), as a
    scikit-learn classifier around any classifier with ``predict_proba``.

    The same stages as :class:`~icml24.conformal.SplitConformalClassifier` (MAPIE 1.x's names): the one-call
    ``fit(X, y)`` fits a clone of ``estimator`` on a ``1 - calibration_size`` share and calibrates on the rest;
    or ``fit`` (``calibration_size=None``) / ``prefit=True``, then ``conformalize(X_cal, y_cal)``. Then
    :meth:`predict_set` gives the conformal arm of the trial and :meth:`predict_topk` the top-k arm;
    ``predict`` is the model's top label and ``score`` the size-penalised coverage of the conformal sets.
    With ``estimator="precomputed"``, ``X`` already holds the model's probabilities (n, n_classes) (what the
    trial had: the softmax of a fixed network), labels are column indices and ``fit`` calibrates on all of it.

    The matched level is derived, not set: ``alpha_ = 1 - c_k`` with ``c_k`` the top-k coverage on the
    calibration data, so there is no ``confidence_level`` parameter.

    Args:
        estimator: a classifier with ``fit``, ``predict_proba``, ``classes_`` (default
            ``LogisticRegression()``), or ``"precomputed"``.
        k: size of the top-k sets, ``1 <= k < n_classes``; the paper's flow picks ``k`` first and derives
            ``alpha`` from it.
        lam: RAPS penalty (0.5 for all three tasks in the official config).
        k_reg: RAPS unpenalised ranks (4 for Go-Emotions, 5 for ObjectNet and Few-NERD).
        randomized: randomised RAPS scores, as in the official code.
        allow_empty: the trial never showed an empty set (False).
        match: how the two set types are matched. ``"alpha"``: the paper's flow, ``alpha = 1 - c_k`` and the
            usual conformal quantile of the scores (``quantile_rule``): the sets keep the conformal guarantee
            ``P(y in C(x)) >= 1 - alpha`` on new data; with ``allow_empty=False`` the displayed sets then
            over-cover (every would-be empty set gets the top label, which is often right). ``"coverage"``
            (default, what the simulated trial needs): the threshold is the smallest that gives the
            *displayed* sets a calibration coverage of at least ``c_k``, so both arms show sets of the same
            empirical coverage and differ only in how their sizes vary. **This in-sample threshold has no
            conformal guarantee**: it is an empirical quantile of the calibration scores without the
            ``(n + 1)`` correction, fitted to the very points it is checked on, so test coverage may fall
            below ``c_k`` (by about ``1 / n`` in expectation, more for small ``n``). Use ``match="alpha"``
            when the sets must be valid conformal sets.
        quantile_rule: for ``match="alpha"``: ``"finite_sample"`` (rank ``ceil((n+1)(1-alpha))``) or
            ``"higher"`` (the official code's ``np.quantile(..., method="higher")``).
        prefit: ``estimator`` is already fitted: ``fit`` calibrates on all of (X, y).
        calibration_size: share of ``fit``'s data held out for calibration; ``None``: ``fit`` only fits the
            estimator and ``conformalize`` must follow.
        random_state: seed of the calibration split and of the randomised scores (``conformalize`` reseeds;
            each ``predict_set`` call then draws fresh ``U``'s).

    Edge cases: when top-k covers every calibration point (``c_k = 1``, an accurate model), ``alpha_ = 0``;
    ``match="coverage"`` then finds the threshold that covers every calibration point, and ``match="alpha"``
    (no conformal threshold exists at level 1) shows every label, with a :class:`SmallCalibrationWarning`.
    When top-k covers none (``c_k = 0``) the conformal sets are the top label only.

    Fitted attributes: ``estimator_``, ``classes_``, ``n_classes_``, ``n_features_in_``, ``alpha_``,
    ``topk_coverage_cal_``, ``qhat_``, ``calibration_scores_``, ``n_calibration_``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> p = rng.dirichlet(np.ones(5), size=200)
        >>> y = p.argmax(1)
        >>> y[:40] = rng.integers(0, 5, 40)
        >>> cms = CoverageMatchedSets("precomputed", k=2, random_state=0).fit(p, y)
        >>> bool(cms.predict_set(p).any(axis=1).all())
        True
    """

    def __init__(
        self,
        estimator=None,
        *,
        k: int = 3,
        lam: float = 0.5,
        k_reg: int = 5,
        randomized: bool = True,
        allow_empty: bool = False,
        match: str = "coverage",
        quantile_rule: str = "finite_sample",
        prefit: bool = False,
        calibration_size: float | None = 0.25,
        random_state: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.k = k
        self.lam = lam
        self.k_reg = k_reg
        self.randomized = randomized
        self.allow_empty = allow_empty
        self.match = match
        self.quantile_rule = quantile_rule
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.random_state = random_state

    _calibration_attrs = ("qhat_", "calibration_scores_", "n_calibration_", "rng_", "alpha_", "topk_coverage_cal_")

    def fit(self, X, y) -> CoverageMatchedSets:
        """Fit the classifier on a ``1 - calibration_size`` share and calibrate on the rest (``prefit`` or
        ``"precomputed"``: calibrate on all of (X, y); ``calibration_size=None``: fit only)."""
        return self._fit(X, y)

    def conformalize(self, X_conformalize, y_conformalize) -> CoverageMatchedSets:
        """Match the two arms on calibration data: top-k coverage ``c_k``, ``alpha_ = 1 - c_k``, the RAPS
        scores of the true labels and the threshold ``qhat_`` (``match``)."""
        p, y = self._start_conformalize(X_conformalize, y_conformalize)
        if p.shape[1] < 2:
            raise ValueError(f"coverage-matched sets need at least 2 classes, got {p.shape[1]}")
        k = _check_k(self.k, p.shape[1] - 1)  # top-n_classes sets hold every label: nothing to match
        self.n_calibration_ = int(y.shape[0])
        self.topk_coverage_cal_ = topk_coverage(p, y, k)
        self.alpha_ = 1.0 - self.topk_coverage_cal_
        self.rng_ = np.random.default_rng(self.random_state)
        # alpha is the paper's matched level; with match="coverage" it is reported, and qhat is set below
        scores = raps_scores(p, y, lam=self.lam, k_reg=self.k_reg, randomized=self.randomized, rng=self.rng_)
        if self.match == "coverage" and not self.allow_empty:
            self.qhat_ = _displayed_coverage_threshold(p, y, scores, self.topk_coverage_cal_)
        elif self.match == "coverage":
            # sets may be empty: their coverage is the fraction of scores <= qhat
            m = int(np.ceil(round(self.topk_coverage_cal_ * len(y), 9)))
            self.qhat_ = float(np.partition(scores, m - 1)[m - 1]) if m > 0 else -np.inf
        elif self.quantile_rule == "higher":
            self.qhat_ = float(np.quantile(scores, 1.0 - self.alpha_, method="higher"))
        elif self.alpha_ == 0.0:
            self.qhat_ = np.inf  # level 1: no finite conformal threshold
        elif self.alpha_ == 1.0:
            self.qhat_ = -np.inf  # level 0: the empty set (the top label when allow_empty=False)
        else:
            self.qhat_ = conformal_quantile(scores, self.alpha_)
        self.calibration_scores_ = scores
        self._warn_if_infinite(
            f"alpha = 1 - top-{k} calibration coverage = {self.alpha_:.3g}: with {self.n_calibration_} calibration "
            "samples no finite conformal threshold exists, so every conformal set holds every label"
        )
        return self

    def predict_topk(self, X) -> np.ndarray:
        """Boolean (n, n_classes) top-k sets (the trial's top-k arm)."""
        return topk_sets(self._test_probs(X), self.k)

    def predict_set(self, X) -> np.ndarray:
        """Boolean (n, n_classes) RAPS sets at the matched level (the trial's conformal arm); column ``j`` is
        ``classes_[j]``."""
        return sets_from_probs(
            self._test_probs(X),
            self.qhat_,
            score="raps",
            lam=self.lam,
            k_reg=self.k_reg,
            randomized=self.randomized,
            rng=self.rng_,
            allow_empty=self.allow_empty,
        )

    def _check_params(self) -> None:
        super()._check_params()
        if self.match not in MATCH_RULES:
            raise ValueError(f"match must be one of {MATCH_RULES}, got {self.match!r}")
        if self.quantile_rule not in QUANTILE_RULES:
            raise ValueError(f"quantile_rule must be one of {QUANTILE_RULES}, got {self.quantile_rule!r}")
        check_raps_params(self.lam, self.k_reg)
        for name in ("randomized", "allow_empty"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def _test_probs(self, X) -> np.ndarray:
        check_is_fitted(self, "qhat_", msg="call fit(X, y) (or conformalize) before predicting sets")
        return self.estimator_.predict_proba(X)


def _displayed_coverage_threshold(p: np.ndarray, y: np.ndarray, scores: np.ndarray, target: float) -> float:
    """Smallest threshold whose never-empty sets cover at least ``target`` of the calibration points.

    A point whose true label is the model's top label is always covered (its set holds the top label at
    least); any other point is covered iff its score is ``<= qhat``. So the threshold is an order statistic
    of the scores of the points the top label misses.
    """
    n = len(y)
    top_right = np.argmax(p, axis=1) == y
    need = int(np.ceil(round(target * n, 9))) - int(top_right.sum())
    if need <= 0:
        return -np.inf
    rest = np.sort(scores[~top_right])
    return float(rest[need - 1]) if need <= rest.size else np.inf
