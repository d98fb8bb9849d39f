"""Malicious-client detection from characterisation vectors, and the malicious-client-count estimator.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Section 4 (Rob-FCP) and Section 5 (unknown number of malicious clients).

Known number of malicious clients ``K_m`` (``K_b = K - K_m`` benign, ``K_m < K_b``):

1. pairwise distances ``D_ij = ||v_i - v_j||_p`` between the clients' histograms (``p = 2`` by default);
2. maliciousness score ``M_k = sum_{j in N(k)} D_kj`` where ``N(k)`` are the ``K_b - 1`` nearest other
   clients (a Krum-like rule: a benign client has ``K_b - 1`` benign peers whose histograms concentrate
   around the same population histogram, so its score is small; a Byzantine client's nearest ``K_b - 1``
   peers include at least ``K_b - K_m >= 1`` benign ones far from it). The official code instead sums the
   ``K_b - 1`` *largest* entries of row ``k`` (self-distance included); ``neighbor_mode="farthest"``
   reproduces it;
3. the benign set is the ``K_b`` clients with the smallest ``M_k`` (ties broken by client index).

Unknown ``K_m`` (the official ``estimate_likelihood_v2``): rank the clients by ``M_k`` computed with the
provisional guess ``K_m = floor(K / 2)``; for each candidate ``m`` take the ``K - m`` lowest-ranked clients
as benign, fit a diagonal Gaussian ``N(mu, diag sigma^2)`` to their vectors by maximum likelihood and score

    J(m) = mean_{k benign} log N(v_k; mu, sigma^2) - mean_{k excluded} log N(v_k; mu, sigma^2);

``K_m_hat = argmax_m J(m)``. The official code maximises the benign log-likelihood with 200 Nelder-Mead
iterations started at the benign mean and ``sigma^2 = 1``, which barely moves in ``2H`` dimensions, so it
effectively scores with ``sigma^2 = 1``: that is our default (``variance="unit"``). ``variance="mle"`` uses
the closed-form maximum-likelihood fit (sample mean and variance, floored at ``var_floor`` for empty bins),
the estimator as the paper describes it. The two differ in practice: with few benign clients the fitted
variances are noisy, and dropping one more benign client can shrink them enough to make the excluded
malicious vectors look even less likely, so ``J`` keeps growing past the true count. On digits with 20
clients of 50 scores, the unit-variance scan recovered ``K_m`` exactly far more often (see the README).
The provisional ranking uses the official code's ``"farthest"`` rule by default: with the guess
``K_b - 1 = K/2 - 1`` neighbours, a tight cluster of identical Byzantine reports is its own nearest
neighbourhood and looks benign under the ``"nearest"`` rule once ``K_m`` approaches ``K/2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.spatial.distance import cdist

from icml24.conformal.rob_fcp._checks import int_at_least

__all__ = [
    "Detection",
    "NumMaliciousEstimate",
    "detect_malicious",
    "estimate_num_malicious",
    "maliciousness_scores",
    "pairwise_distances",
    "select_benign",
]

NeighborMode = Literal["nearest", "farthest"]
_METRICS = {1: "cityblock", 2: "euclidean", np.inf: "chebyshev"}


def _check_vectors(vectors: object, name: str = "vectors") -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_clients, n_bins), got shape {v.shape}")
    if v.shape[0] < 1 or v.shape[1] < 1:
        raise ValueError(f"{name} must have at least one client and one bin, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return v


def _check_n_benign(n_benign: int, n_clients: int) -> int:
    if isinstance(n_benign, bool) or not isinstance(n_benign, (int, np.integer)):
        raise TypeError(f"n_benign must be an integer, got {type(n_benign).__name__}")
    if not 1 <= n_benign <= n_clients:
        raise ValueError(f"n_benign must be in [1, {n_clients}] (the number of clients), got {n_benign}")
    return int(n_benign)


def pairwise_distances(vectors: np.ndarray, ord: float = 2) -> np.ndarray:
    """(K, K) matrix ``D_ij = ||v_i - v_j||_ord`` for ``ord`` in ``{1, 2, inf}`` (Section 4)."""
    v = _check_vectors(vectors)
    if ord not in _METRICS:
        raise ValueError(f"ord must be 1, 2 or inf, got {ord!r}")
    return cdist(v, v, metric=_METRICS[ord])


def maliciousness_scores(
    distances: np.ndarray, n_benign: int, *, neighbor_mode: NeighborMode = "nearest"
) -> np.ndarray:
    """Maliciousness ``M_k``: the sum of client ``k``'s distances to ``n_benign - 1`` other clients.

    Args:
        distances: (K, K) symmetric distance matrix with zero diagonal.
        n_benign: ``K_b``, the number of clients assumed benign.
        neighbor_mode: ``"nearest"`` sums the ``K_b - 1`` smallest distances to *other* clients (the
            paper's rule); ``"farthest"`` sums the ``K_b - 1`` largest entries of the row, self-distance
            included, as the official code does.

    Returns:
        (K,) scores; larger means more suspicious.
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"distances must be a square (K, K) matrix, got shape {d.shape}")
    if not np.isfinite(d).all() or (d < 0).any():
        raise ValueError("distances must be finite and non-negative")
    k = _check_n_benign(n_benign, d.shape[0]) - 1
    if k == 0:
        return np.zeros(d.shape[0])
    if neighbor_mode == "nearest":
        d = d.copy()
        np.fill_diagonal(d, np.inf)
        return np.partition(d, k - 1, axis=1)[:, :k].sum(axis=1)
    if neighbor_mode == "farthest":
        return -np.partition(-d, k - 1, axis=1)[:, :k].sum(axis=1)
    raise ValueError(f"neighbor_mode must be 'nearest' or 'farthest', got {neighbor_mode!r}")


def select_benign(maliciousness: np.ndarray, n_benign: int) -> np.ndarray:
    """Indices (ascending) of the ``n_benign`` clients with the smallest maliciousness, ties by index."""
    m = np.asarray(maliciousness, dtype=np.float64)
    if m.ndim != 1:
        raise ValueError(f"maliciousness must be 1-D (n_clients,), got shape {m.shape}")
    if np.isnan(m).any():
        raise ValueError("maliciousness contains NaN (a NaN score cannot be ranked)")
    n_benign = _check_n_benign(n_benign, m.shape[0])
    return np.sort(np.argsort(m, kind="stable")[:n_benign])


@dataclass(frozen=True)
class Detection:
    """Outcome of the benign-client selection.

    Attributes:
        benign: indices of the clients kept for calibration (ascending).
        malicious: indices of the clients flagged as malicious (ascending).
        maliciousness: (K,) maliciousness scores ``M_k``.
        distances: (K, K) pairwise distances between characterisation vectors.
    """

    benign: np.ndarray
    malicious: np.ndarray
    maliciousness: np.ndarray
    distances: np.ndarray


def detect_malicious(
    vectors: np.ndarray,
    n_malicious: int,
    *,
    neighbor_mode: NeighborMode = "nearest",
    ord: float = 2,
) -> Detection:
    """Rob-FCP's benign-client selection for a known number of malicious clients (Section 4).

    Args:
        vectors: (K, H) characterisation vectors.
        n_malicious: ``K_m``, with ``0 <= K_m < K / 2`` (more malicious than benign clients cannot be
            told apart from the reverse).
        neighbor_mode: see :func:`maliciousness_scores`.
        ord: norm of the distance (1, 2 or inf).
    """
    v = _check_vectors(vectors)
    n_clients = v.shape[0]
    if isinstance(n_malicious, bool) or not isinstance(n_malicious, (int, np.integer)):
        raise TypeError(f"n_malicious must be an integer, got {type(n_malicious).__name__}")
    if n_malicious < 0 or (n_malicious > 0 and 2 * n_malicious >= n_clients):
        raise ValueError(
            f"n_malicious must satisfy 0 <= n_malicious < n_clients / 2 = {n_clients / 2}, got {n_malicious}"
        )
    d = pairwise_distances(v, ord)
    scores = maliciousness_scores(d, n_clients - int(n_malicious), neighbor_mode=neighbor_mode)
    benign = select_benign(scores, n_clients - int(n_malicious))
    malicious = np.setdiff1d(np.arange(n_clients), benign)
    return Detection(benign, malicious, scores, d)


@dataclass(frozen=True)
class NumMaliciousEstimate:
    """Outcome of the malicious-client-count estimator (Section 5).

    Attributes:
        n_malicious: the estimate ``K_m_hat``.
        candidates: the candidate counts ``m`` that were scored.
        objective: ``J(m)`` for each candidate (higher is better).
        order: clients sorted from least to most suspicious (the ranking the candidates split).
    """

    n_malicious: int
    candidates: np.ndarray
    objective: np.ndarray
    order: np.ndarray


def _gaussian_loglik(v: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2.0 * np.pi * var).sum() + ((v - mu) ** 2 / var).sum(axis=1))


def estimate_num_malicious(
    vectors: np.ndarray,
    *,
    min_malicious: int = 1,
    max_malicious: int | None = None,
    neighbor_mode: NeighborMode = "farthest",
    ord: float = 2,
    variance: Literal["mle", "unit"] = "unit",
    var_floor: float = 1e-4,
    n_rounds: int = 1,
) -> NumMaliciousEstimate:
    """Estimate ``K_m`` by the profile-likelihood scan of Section 5 (official ``estimate_likelihood_v2``).

    Args:
        vectors: (K, H) characterisation vectors, ``K >= 3``.
        min_malicious: smallest candidate (the official code starts at 2; ``J`` needs ``m >= 1``).
        max_malicious: largest candidate; default ``ceil(K / 2) - 1`` (the largest ``m < K / 2``).
        neighbor_mode: rule of the provisional ranking (default: the official code's ``"farthest"``).
        ord: distance norm, as in :func:`detect_malicious`.
        variance: ``"unit"`` fixes ``sigma^2 = 1`` (what the official optimiser returns); ``"mle"`` fits it.
        var_floor: lower bound on each fitted variance (empty bins have zero sample variance).
        n_rounds: re-rank the clients with the current estimate this many times (the code's
            ``num_mal_est_round``; round one uses the provisional guess ``floor(K / 2)``).
    """
    v = _check_vectors(vectors)
    n_clients = v.shape[0]
    if n_clients < 3:
        raise ValueError(f"estimating the number of malicious clients needs at least 3 clients, got {n_clients}")
    upper = (n_clients + 1) // 2 - 1
    int_at_least(min_malicious, "min_malicious", 1)
    int_at_least(n_rounds, "n_rounds", 1)
    max_m = upper if max_malicious is None else int_at_least(max_malicious, "max_malicious", 1)
    if not 1 <= int(min_malicious) <= max_m <= upper:
        raise ValueError(
            f"need 1 <= min_malicious <= max_malicious <= ceil(K/2) - 1 = {upper}, "
            f"got min_malicious={min_malicious}, max_malicious={max_malicious}"
        )
    if variance not in ("mle", "unit"):
        raise ValueError(f"variance must be 'mle' or 'unit', got {variance!r}")
    if not var_floor > 0:
        raise ValueError(f"var_floor must be > 0, got {var_floor!r}")
    if int(n_rounds) < 1:
        raise ValueError(f"n_rounds must be >= 1, got {n_rounds!r}")
    d = pairwise_distances(v, ord)
    candidates = np.arange(int(min_malicious), max_m + 1)
    guess = n_clients // 2
    for _ in range(int(n_rounds)):
        # With K even the provisional guess K/2 leaves K/2 benign neighbours; clamp so K_b - 1 >= 0.
        n_benign = max(n_clients - guess, 1)
        order = np.argsort(maliciousness_scores(d, n_benign, neighbor_mode=neighbor_mode), kind="stable")
        ranked = v[order]
        csum = np.cumsum(ranked, axis=0)
        csum2 = np.cumsum(ranked**2, axis=0)
        objective = np.empty(candidates.size)
        for i, m in enumerate(candidates):
            kb = n_clients - m
            mu = csum[kb - 1] / kb
            if variance == "mle":
                var = np.maximum(csum2[kb - 1] / kb - mu**2, var_floor)
            else:
                var = np.ones_like(mu)
            ll = _gaussian_loglik(ranked, mu, var)
            objective[i] = ll[:kb].mean() - ll[kb:].mean()
        guess = int(candidates[int(np.argmax(objective))])
    return NumMaliciousEstimate(guess, candidates, objective, order)
