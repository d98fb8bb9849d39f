"""Rob-FCP end to end: histograms -> detection -> robust federated quantile -> prediction sets.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang, Lin, Sun, Xiao & Li, ICML 2024,
https://arxiv.org/abs/2406.01960). Federated conformal prediction (FCP) pools every client's calibration
scores into one quantile, so a few Byzantine clients that report fake scores can push the threshold
anywhere. Rob-FCP (Algorithm 1) has each client summarise its scores as a histogram (its
characterisation vector), scores each client by the summed distance to its ``K_b - 1`` nearest peers,
keeps the ``K_b`` least suspicious clients and runs FCP on them only:

    qhat = the ceil((1 - alpha)(N_b + K_b))-th smallest score of the kept clients,  C(x) = {y : s(x, y) <= qhat}.

When the number of malicious clients is unknown it is first estimated by the likelihood scan of Section 5.
Baselines: plain FCP (:func:`fcp_quantile`, no defence) and the oracle that knows the benign clients
(:func:`oracle_quantile`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sklearn.utils.validation import check_is_fitted

from icml24.conformal._validation import check_alpha, check_probs, check_rng
from icml24.conformal.calibration import sets_from_probs
from icml24.conformal.predictor import (
    ConformalSetClassifierBase,
    _check_level,
    _check_score_params,
    conformity_scores,
)
from icml24.conformal.rob_fcp._checks import index_array, int_at_least
from icml24.conformal.rob_fcp.characterization import check_bounds, client_histograms
from icml24.conformal.rob_fcp.detection import (
    NeighborMode,
    NumMaliciousEstimate,
    detect_malicious,
    estimate_num_malicious,
)
from icml24.conformal.rob_fcp.quantile import RankRule, federated_quantile, histogram_quantile
from icml24.conformal.rob_fcp.weights import (
    DEFAULT_MAX_WEIGHT_RATIO,
    cap_scores,
    check_max_weight_ratio,
    weight_cap,
)

__all__ = [
    "RobFCPResult",
    "RobustFederatedConformal",
    "fcp_quantile",
    "oracle_quantile",
    "rob_fcp_quantile",
    "select_clients",
]


@dataclass(frozen=True)
class RobFCPResult:
    """What one Rob-FCP calibration found.

    Attributes:
        qhat: the robust threshold.
        benign: indices of the clients kept (ascending).
        malicious: indices of the clients discarded (ascending).
        n_malicious: the number of malicious clients used (given or estimated).
        maliciousness: (K,) maliciousness scores.
        vectors: (K, H) characterisation vectors.
        estimate: the estimator's output when the number of malicious clients was unknown, else None.
    """

    qhat: float
    benign: np.ndarray
    malicious: np.ndarray
    n_malicious: int
    maliciousness: np.ndarray
    vectors: np.ndarray
    estimate: NumMaliciousEstimate | None = None
    capped: dict[int, tuple[int, int]] | None = None
    """``{client: (claimed size, size used)}`` for kept clients whose weight was capped (beyond the paper)."""


def select_clients(
    vectors: np.ndarray,
    n_malicious: int | None,
    *,
    neighbor_mode: NeighborMode = "nearest",
    ord: float = 2,
    estimator_neighbor_mode: NeighborMode = "farthest",
    variance: Literal["mle", "unit"] = "unit",
    var_floor: float = 1e-4,
) -> tuple[np.ndarray, np.ndarray, int, NumMaliciousEstimate | None]:
    """Benign set from characterisation vectors: ``(benign, maliciousness, K_m, estimate)``.

    ``n_malicious=None`` estimates ``K_m`` first (Section 5); with fewer than 3 clients nothing can be
    estimated and every client is kept.
    """
    v = np.asarray(vectors, dtype=np.float64)
    estimate = None
    if n_malicious is None:
        if v.shape[0] < 3:
            n_mal = 0
        else:
            estimate = estimate_num_malicious(
                v, neighbor_mode=estimator_neighbor_mode, ord=ord, variance=variance, var_floor=var_floor
            )
            n_mal = estimate.n_malicious
    else:
        n_mal = int(n_malicious)
    det = detect_malicious(v, n_mal, neighbor_mode=neighbor_mode, ord=ord)
    return det.benign, det.maliciousness, n_mal, estimate


def rob_fcp_quantile(
    client_scores: Sequence[np.ndarray],
    alpha: float = 0.1,
    n_malicious: int | None = None,
    *,
    n_bins: int = 100,
    neighbor_mode: NeighborMode = "nearest",
    ord: float = 2,
    rank_rule: RankRule = "fcp",
    quantile_bins: int | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
    estimator_neighbor_mode: NeighborMode = "farthest",
    variance: Literal["mle", "unit"] = "unit",
    var_floor: float = 1e-4,
    max_weight_ratio: float | None = DEFAULT_MAX_WEIGHT_RATIO,
) -> RobFCPResult:
    """Rob-FCP's robust federated quantile (Algorithm 1; Section 5 when ``n_malicious`` is None).

    Args:
        client_scores: K arrays of (possibly Byzantine) calibration scores in ``bounds``.
        alpha: target miscoverage.
        n_malicious: known ``K_m`` (``0 <= K_m < K / 2``), or None to estimate it.
        n_bins: ``H``, bins of the characterisation vectors.
        neighbor_mode: ``"nearest"`` (paper) or ``"farthest"`` (official code), see
            :func:`~icml24.conformal.rob_fcp.detection.maliciousness_scores`.
        ord: distance norm (1, 2, inf).
        rank_rule: ``"fcp"`` or ``"split"`` (see :func:`~icml24.conformal.rob_fcp.quantile.federated_rank`).
        quantile_bins: None pools the kept clients' exact scores; an integer computes the quantile from
            their histograms with that many bins (what a server that only receives histograms can do).
        bounds: the score range.
        estimator_neighbor_mode, variance, var_floor: passed to
            :func:`~icml24.conformal.rob_fcp.detection.estimate_num_malicious`.
        max_weight_ratio: a kept client weighs at most this many times the median kept client (its scores
            thinned to evenly spaced order statistics); ``None``: weights as claimed (the paper). Beyond the
            paper, see :mod:`~icml24.conformal.rob_fcp.weights`.
    """
    alpha = check_alpha(alpha)
    bounds = check_bounds(bounds)
    max_weight_ratio = check_max_weight_ratio(max_weight_ratio)
    if n_malicious is not None:
        int_at_least(n_malicious, "n_malicious", 0)
    if quantile_bins is not None:
        int_at_least(quantile_bins, "quantile_bins", 1)
    vectors = client_histograms(client_scores, n_bins, bounds=bounds)
    benign, scores, n_mal, estimate = select_clients(
        vectors,
        n_malicious,
        neighbor_mode=neighbor_mode,
        ord=ord,
        estimator_neighbor_mode=estimator_neighbor_mode,
        variance=variance,
        var_floor=var_floor,
    )
    kept = [np.asarray(client_scores[i], dtype=np.float64).ravel() for i in benign]
    cap = weight_cap([k.size for k in kept], max_weight_ratio)
    capped = {int(i): (k.size, int(math.floor(cap))) for i, k in zip(benign, kept) if k.size > cap}
    kept = [cap_scores(k, cap) for k in kept]
    if quantile_bins is None:
        qhat = federated_quantile(kept, alpha, rank_rule=rank_rule)
    else:
        counts = client_histograms(kept, quantile_bins, bounds=bounds, normalize=False)
        qhat = histogram_quantile(counts, alpha, rank_rule=rank_rule, bounds=bounds)
    malicious = np.setdiff1d(np.arange(len(client_scores)), benign)
    return RobFCPResult(qhat, benign, malicious, n_mal, scores, vectors, estimate, capped)


def fcp_quantile(
    client_scores: Sequence[np.ndarray], alpha: float = 0.1, *, rank_rule: RankRule = "fcp"
) -> float:
    """Baseline: plain FCP (Lu et al., ICML 2023) over every client, malicious ones included."""
    return federated_quantile(client_scores, alpha, rank_rule=rank_rule)


def oracle_quantile(
    client_scores: Sequence[np.ndarray],
    benign: Sequence[int] | np.ndarray,
    alpha: float = 0.1,
    *,
    rank_rule: RankRule = "fcp",
) -> float:
    """Baseline: FCP over the truly benign clients only (the oracle that knows who is malicious)."""
    idx = index_array(benign, "benign", len(client_scores))
    if idx.size == 0:
        raise ValueError("benign is empty: the oracle needs at least one benign client")
    return federated_quantile([client_scores[i] for i in idx], alpha, rank_rule=rank_rule)


class RobustFederatedConformal(ConformalSetClassifierBase):
    """Rob-FCP as a scikit-learn classifier: prediction sets calibrated over clients, some of them Byzantine.

    The stages of :class:`~icml24.conformal.SplitConformalClassifier` (MAPIE 1.x's names), with the
    calibration data partitioned over clients:

    * ``fit(X, y, clients=ids)``: fit a clone of ``estimator`` on a ``1 - calibration_size`` share of (X, y)
      and calibrate on the rest, where ``ids[i]`` names the client that holds sample ``i`` (``clients=None``:
      one client, where Rob-FCP is split conformal). ``prefit=True``: calibrate on all of it.
    * ``conformalize(X_cal, y_cal, clients=ids)``: each client's conformity scores of its true labels, then
      Algorithm 1 (histograms, maliciousness, the ``K_b`` least suspicious clients, the FCP quantile).
    * ``conformalize_scores(client_scores)``: Algorithm 1 from the scores the clients *report* (a list of K
      arrays), which is what a server receives and where Byzantine clients lie (see
      :func:`~icml24.conformal.rob_fcp.apply_attack`); client ids are then ``0..K-1``.
    * ``predict_set(X)``: boolean (n, n_classes) sets ``{y : s(x, y) <= qhat_}``; ``predict`` is the model's
      top label, ``score`` the size-penalised coverage of the sets.

    Args:
        estimator: a classifier with ``fit``, ``predict_proba`` and ``classes_`` (default
            ``LogisticRegression()``), or ``"precomputed"`` (``X`` holds the model's probabilities).
        confidence_level: target coverage ``1 - alpha``.
        conformity_score: ``"lac"``, ``"aps"`` or ``"raps"`` (see :mod:`icml24.conformal.scores`); the
            paper's experiments use randomised APS.
        n_malicious: known number of malicious clients ``K_m`` (``< K / 2``), or None to estimate it
            (Section 5).
        n_bins: ``H``, bins of the characterisation vectors (the paper uses 100).
        neighbor_mode: ``"nearest"`` (paper) or ``"farthest"`` (official code).
        distance_ord: norm of the distance between histograms (1, 2 or inf).
        rank_rule: ``"fcp"`` or ``"split"``.
        quantile_bins: None for exact pooled scores, an integer for a histogram quantile.
        bounds: the score range of the histograms; None: ``(0, 1)`` for LAC and APS, ``(0, 1 + lam *
            max(0, n_classes - k_reg))`` for RAPS.
        max_weight_ratio: cap on a kept client's weight relative to the median kept client (None: off).
        lam, k_reg, randomized, allow_empty: as in :class:`~icml24.conformal.SplitConformalClassifier`.
        prefit: ``estimator`` is already fitted.
        calibration_size: share of ``fit``'s data held out for calibration (``None``: ``fit`` only fits).
        random_state: seed of the calibration split and the randomised scores.

    Fitted attributes: ``estimator_``, ``classes_``, ``n_classes_``, ``n_features_in_``, ``alpha_``,
    ``qhat_``, ``client_ids_``, ``n_clients_``, ``benign_clients_``, ``malicious_clients_`` (client ids),
    ``n_malicious_``, ``maliciousness_``, ``vectors_``, ``estimate_``, ``capped_clients_``,
    ``n_calibration_``.

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> from icml24.conformal.rob_fcp import apply_attack
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.normal(size=(600, 4)), rng.integers(0, 3, 600)
        >>> clf = LogisticRegression().fit(X[:200], y[:200])
        >>> cp = RobustFederatedConformal(clf, prefit=True, n_bins=10, n_malicious=2)
        >>> cp = cp.fit(X[200:], y[200:], clients=np.arange(400) % 10)      # 10 honest clients
        >>> cp.n_clients_, cp.n_malicious_
        (10, 2)
        >>> scores = [rng.uniform(size=200) for _ in range(8)] + [np.zeros(200)] * 2   # 2 clients lie
        >>> cp.conformalize_scores(scores).malicious_clients_.tolist()
        [8, 9]
    """

    def __init__(
        self,
        estimator=None,
        *,
        confidence_level: float = 0.9,
        conformity_score: str = "lac",
        n_malicious: int | None = None,
        n_bins: int = 100,
        neighbor_mode: NeighborMode = "nearest",
        distance_ord: float = 2,
        rank_rule: RankRule = "fcp",
        quantile_bins: int | None = None,
        bounds: tuple[float, float] | None = None,
        max_weight_ratio: float | None = DEFAULT_MAX_WEIGHT_RATIO,
        lam: float = 0.01,
        k_reg: int = 5,
        randomized: bool = False,
        allow_empty: bool = True,
        prefit: bool = False,
        calibration_size: float | None = 0.25,
        random_state: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.confidence_level = confidence_level
        self.conformity_score = conformity_score
        self.n_malicious = n_malicious
        self.n_bins = n_bins
        self.neighbor_mode = neighbor_mode
        self.distance_ord = distance_ord
        self.rank_rule = rank_rule
        self.quantile_bins = quantile_bins
        self.bounds = bounds
        self.max_weight_ratio = max_weight_ratio
        self.lam = lam
        self.k_reg = k_reg
        self.randomized = randomized
        self.allow_empty = allow_empty
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.random_state = random_state

    _calibration_attrs = (
        "qhat_", "rng_", "alpha_", "client_ids_", "n_clients_", "benign_clients_", "malicious_clients_",
        "n_malicious_", "maliciousness_", "vectors_", "estimate_", "capped_clients_", "n_calibration_",
    )  # fmt: skip

    def fit(self, X, y, clients=None) -> RobustFederatedConformal:
        """Fit the classifier on a ``1 - calibration_size`` share and calibrate over the clients on the rest
        (``prefit`` or ``"precomputed"``: calibrate on all of it). ``clients``: (n,) client id of each sample,
        or None for one client."""
        if clients is not None:
            clients = _check_client_ids(clients, len(y))
        return self._fit(X, y, clients=clients)

    def conformalize(self, X_conformalize, y_conformalize, clients=None) -> RobustFederatedConformal:
        """Per-client conformity scores of the true labels, then Rob-FCP's robust threshold (Algorithm 1)."""
        probs, y_idx = self._start_conformalize(X_conformalize, y_conformalize)
        self.rng_ = check_rng(self.random_state)
        scores = conformity_scores(self.conformity_score, probs, y_idx, lam=self.lam, k_reg=self.k_reg,
                                   randomized=self.randomized, rng=self.rng_ if self.randomized else None)
        if clients is None:
            return self._calibrate([scores], np.zeros(1, dtype=np.int64))
        client_ids, which = np.unique(_check_client_ids(clients, scores.shape[0]), return_inverse=True)
        return self._calibrate([scores[which == c] for c in range(client_ids.shape[0])], client_ids)

    def conformalize_scores(self, client_scores: Sequence[np.ndarray]) -> RobustFederatedConformal:
        """Rob-FCP from the calibration scores the K clients report (Algorithm 1; client ids ``0..K-1``).

        The scores must come from ``conformity_score`` (with ``lam``, ``k_reg``, ``randomized``) on the same
        model that ``predict_set`` uses: a threshold is a conformal threshold only for its own score."""
        self._check_params()
        if not hasattr(client_scores, "__len__") or isinstance(client_scores, (str, bytes)):
            raise TypeError(
                f"client_scores must be a sequence of per-client score arrays, got {type(client_scores).__name__}"
            )
        if isinstance(client_scores, np.ndarray) and client_scores.ndim != 2:
            raise ValueError("client_scores must be a sequence of per-client score arrays")
        if not self._precomputed and not hasattr(self, "estimator_") and self.prefit:
            self._use_prefit()
        self.rng_ = check_rng(self.random_state)
        return self._calibrate(list(client_scores), np.arange(len(client_scores)))

    def predict_set(self, X) -> np.ndarray:
        """Boolean (n, n_classes) sets ``{y : s(x, y) <= qhat_}``; column ``j`` is ``classes_[j]``."""
        check_is_fitted(self, "qhat_", msg="call fit, conformalize or conformalize_scores before predict_set")
        if self._precomputed and not hasattr(self, "estimator_"):
            probs = check_probs(X, name="X")  # calibrated from reported scores only: X defines the classes
        else:
            check_is_fitted(self, "estimator_", msg="fit the estimator (or pass prefit=True) before predict_set")
            probs = self.estimator_.predict_proba(X)
        return sets_from_probs(probs, self.qhat_, score=self.conformity_score, lam=self.lam, k_reg=self.k_reg,
                               randomized=self.randomized, rng=self.rng_ if self.randomized else None,
                               allow_empty=self.allow_empty)

    # ------------------------------------------------------------------ helpers
    def _check_params(self) -> None:
        super()._check_params()
        _check_score_params(self)

    def _score_bounds(self) -> tuple[float, float]:
        if self.bounds is not None:
            return check_bounds(self.bounds)
        if self.conformity_score != "raps":
            return (0.0, 1.0)
        if not hasattr(self, "n_classes_"):
            raise ValueError("bounds must be given for RAPS scores when the number of classes is unknown "
                             "(calibration from reported scores without a fitted estimator)")
        return (0.0, 1.0 + float(self.lam) * max(0, self.n_classes_ - int(self.k_reg)))

    def _calibrate(self, groups: list, client_ids: np.ndarray) -> RobustFederatedConformal:
        self.alpha_ = 1.0 - _check_level(self.confidence_level)
        res = rob_fcp_quantile(
            groups,
            self.alpha_,
            self.n_malicious,
            n_bins=self.n_bins,
            neighbor_mode=self.neighbor_mode,
            ord=self.distance_ord,
            rank_rule=self.rank_rule,
            quantile_bins=self.quantile_bins,
            bounds=self._score_bounds(),
            max_weight_ratio=self.max_weight_ratio,
        )
        self.qhat_ = res.qhat
        self.client_ids_ = client_ids
        self.n_clients_ = int(client_ids.shape[0])
        self.benign_clients_ = client_ids[res.benign]
        self.malicious_clients_ = client_ids[res.malicious]
        self.n_malicious_ = res.n_malicious
        self.maliciousness_ = res.maliciousness
        self.vectors_ = res.vectors
        self.estimate_ = res.estimate
        self.capped_clients_ = None if res.capped is None else {client_ids[i].item(): v for i, v in res.capped.items()}
        self.n_calibration_ = int(sum(np.size(g) for g in groups))
        self._warn_if_infinite(
            f"the calibration scores of the {len(res.benign)} kept client(s) are too few for confidence_level="
            f"{self.confidence_level}: no finite threshold, so every prediction set holds every label"
        )
        return self


def _check_client_ids(clients, n_samples: int) -> np.ndarray:
    ids = np.asarray(clients)
    if ids.ndim != 1 or ids.shape[0] != n_samples:
        raise ValueError(
            f"clients must be 1-D with one client id per sample ({n_samples}), got shape {ids.shape}"
        )
    if ids.dtype == object or not (np.issubdtype(ids.dtype, np.integer) or ids.dtype.kind in "US"):
        raise TypeError(f"clients must hold integer or string client ids, got dtype {ids.dtype}")
    return ids
