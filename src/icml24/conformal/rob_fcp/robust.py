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
from sklearn.base import BaseEstimator

from icml24.conformal._validation import check_alpha
from icml24.conformal.calibration import prediction_sets
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


class RobustFederatedConformal(BaseEstimator):
    """Rob-FCP as a scikit-learn style calibrator over per-client scores.

    ``fit(client_scores)`` runs Algorithm 1 and stores ``qhat_``; ``predict_sets(score_matrix)`` returns the
    boolean (n, n_classes) prediction sets ``{y : s(x, y) <= qhat_}``.

    Args:
        alpha: target miscoverage.
        n_bins: ``H`` (the paper uses 100).
        n_malicious: known number of malicious clients, or None to estimate it.
        neighbor_mode: ``"nearest"`` (paper) or ``"farthest"`` (official code).
        distance_ord: norm of the distance between histograms (1, 2 or inf).
        rank_rule: ``"fcp"`` or ``"split"``.
        quantile_bins: None for exact pooled scores, an integer for a histogram quantile.
        bounds: the score range.
        max_weight_ratio: cap on a kept client's weight relative to the median kept client (None: off).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> scores = [rng.uniform(size=200) for _ in range(8)] + [np.zeros(200)] * 2
        >>> model = RobustFederatedConformal(alpha=0.1, n_bins=10, n_malicious=2).fit(scores)
        >>> model.malicious_clients_.tolist()
        [8, 9]
    """

    def __init__(
        self,
        alpha: float = 0.1,
        *,
        n_bins: int = 100,
        n_malicious: int | None = None,
        neighbor_mode: NeighborMode = "nearest",
        distance_ord: float = 2,
        rank_rule: RankRule = "fcp",
        quantile_bins: int | None = None,
        bounds: tuple[float, float] = (0.0, 1.0),
        max_weight_ratio: float | None = DEFAULT_MAX_WEIGHT_RATIO,
    ) -> None:
        self.alpha = alpha
        self.max_weight_ratio = max_weight_ratio
        self.n_bins = n_bins
        self.n_malicious = n_malicious
        self.neighbor_mode = neighbor_mode
        self.distance_ord = distance_ord
        self.rank_rule = rank_rule
        self.quantile_bins = quantile_bins
        self.bounds = bounds

    def fit(self, client_scores: Sequence[np.ndarray]) -> RobustFederatedConformal:
        """Calibrate on K clients' scores; sets ``qhat_``, ``benign_clients_``, ``malicious_clients_``,
        ``n_malicious_``, ``maliciousness_``, ``vectors_`` and ``estimate_``."""
        if not hasattr(client_scores, "__len__") or isinstance(client_scores, (str, bytes)):
            raise TypeError(f"client_scores must be a sequence of per-client score arrays, got {type(client_scores).__name__}")
        if isinstance(client_scores, np.ndarray) and client_scores.ndim != 2:
            raise ValueError("client_scores must be a sequence of per-client score arrays")
        res = rob_fcp_quantile(
            client_scores,
            self.alpha,
            self.n_malicious,
            n_bins=self.n_bins,
            neighbor_mode=self.neighbor_mode,
            ord=self.distance_ord,
            rank_rule=self.rank_rule,
            quantile_bins=self.quantile_bins,
            bounds=self.bounds,
            max_weight_ratio=self.max_weight_ratio,
        )
        self.qhat_ = res.qhat
        self.capped_clients_ = res.capped
        self.benign_clients_ = res.benign
        self.malicious_clients_ = res.malicious
        self.n_malicious_ = res.n_malicious
        self.maliciousness_ = res.maliciousness
        self.vectors_ = res.vectors
        self.estimate_ = res.estimate
        return self

    def predict_sets(self, score_matrix: np.ndarray) -> np.ndarray:
        """Boolean (n, n_classes) sets ``{y : S[i, y] <= qhat_}`` from a score matrix."""
        if not hasattr(self, "qhat_"):
            raise RuntimeError("RobustFederatedConformal is not fitted: call fit(client_scores) first")
        return prediction_sets(score_matrix, self.qhat_)
