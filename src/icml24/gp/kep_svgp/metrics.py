"""Uncertainty metrics used by KEP-SVGP's evaluation (Chen et al., ICML 2024, Sec. 5).

All take predicted class probabilities ``probs (n, K)`` (rows sum to 1) and integer ``labels (n,)``; the
confidence score is the maximum softmax probability (MSP).

* ECE (Guo et al. 2017): ``Σ_b |B_b|/n · |acc(B_b) - conf(B_b)|`` over equal-width confidence bins.
* AURC (Geifman et al. 2019): area under the risk-coverage curve when rejecting the least confident first.
* Failure-detection AUROC: AUROC of the confidence for separating correct from wrong predictions.
* OOD AUROC: AUROC of the confidence for separating in-distribution from out-of-distribution inputs.
* Temperature scaling (Guo et al. 2017): ``softmax(log p / T)`` with ``T`` minimising the NLL on held-out data.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "accuracy",
    "apply_temperature",
    "aurc",
    "auroc",
    "brier",
    "ece",
    "failure_auroc",
    "fit_temperature",
    "nll",
    "ood_auroc",
]


def _check(probs: np.ndarray, labels: object = None, *, name: str = "probs", need_labels: bool = True
           ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    try:
        p = np.asarray(probs, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array (n, K), got {type(probs).__name__}") from exc
    if p.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, K), got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError(f"{name} must be finite and non-negative")
    if not need_labels:
        return p, np.zeros(0, dtype=int)
    if labels is None or isinstance(labels, (str, bytes)):
        raise TypeError(f"labels must be an array of class indices, got {type(labels).__name__}")
    y = np.asarray(labels)
    if y.shape != (p.shape[0],):
        raise ValueError(f"labels must have shape ({p.shape[0]},), got {y.shape}")
    if y.dtype.kind not in "iu":
        if y.dtype.kind != "f" or not np.isfinite(y).all() or not (y == np.round(y)).all():
            raise ValueError(f"labels must be integer class indices, got dtype {y.dtype}")
    if y.size and ((y < 0).any() or (y >= p.shape[1]).any()):
        raise ValueError(f"labels must be class indices in [0, {p.shape[1] - 1}]")
    return p, y.astype(int)


def _check_scores(name: str, scores: object) -> np.ndarray:
    try:
        arr = np.asarray(scores, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a 1-D numeric array, got {type(scores).__name__}") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return arr


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    p, y = _check(probs, labels)
    return float((p.argmax(1) == y).mean())


def nll(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood of the true class (probabilities clipped below at ``eps``)."""
    p, y = _check(probs, labels)
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not 0 < eps < 1:
        raise ValueError(f"eps must be a number in (0, 1), got {eps!r}")
    return float(-np.log(np.clip(p[np.arange(len(y)), y], eps, None)).mean())


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    p, y = _check(probs, labels)
    onehot = np.eye(p.shape[1])[y]
    return float(((p - onehot) ** 2).sum(1).mean())


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins (15 as in the paper's code)."""
    p, y = _check(probs, labels)
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)):
        raise TypeError(f"n_bins must be an int, got {type(n_bins).__name__}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    conf = p.max(1)
    correct = (p.argmax(1) == y).astype(float)
    bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    gap = np.abs(np.bincount(bins, correct, n_bins) - np.bincount(bins, conf, n_bins))
    return float(gap.sum() / len(y))


def aurc(probs: np.ndarray, labels: np.ndarray) -> float:
    """Area under the risk-coverage curve (mean over coverages k/n of the risk of the k most confident)."""
    p, y = _check(probs, labels)
    conf = p.max(1)
    wrong = (p.argmax(1) != y).astype(float)[np.argsort(-conf, kind="stable")]
    risks = np.cumsum(wrong) / np.arange(1, len(wrong) + 1)
    return float(risks.mean())


def auroc(scores_pos: np.ndarray, scores_neg: np.ndarray) -> float:
    """P(score_pos > score_neg) + ½ P(tie): the Mann-Whitney form of the ROC AUC."""
    pos, neg = _check_scores("scores_pos", scores_pos), _check_scores("scores_neg", scores_neg)
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    allv = np.concatenate([pos, neg])
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty(len(allv))
    sorted_v = allv[order]
    # Average ranks over ties.
    _, first, counts = np.unique(sorted_v, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    r_pos = ranks[: len(pos)].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2.0) / (len(pos) * len(neg)))


def failure_auroc(probs: np.ndarray, labels: np.ndarray) -> float:
    """AUROC of the MSP for telling correct predictions (positive) from failures."""
    p, y = _check(probs, labels)
    conf = p.max(1)
    ok = p.argmax(1) == y
    return auroc(conf[ok], conf[~ok])


def ood_auroc(probs_in: np.ndarray, probs_out: np.ndarray) -> float:
    """AUROC of the MSP for telling in-distribution (positive) from out-of-distribution inputs."""
    p_in, _ = _check(probs_in, name="probs_in", need_labels=False)
    p_out, _ = _check(probs_out, name="probs_out", need_labels=False)
    if p_in.shape[1] != p_out.shape[1]:
        raise ValueError(f"probs_in and probs_out must have the same classes, got {p_in.shape[1]} and {p_out.shape[1]}")
    return auroc(p_in.max(1), p_out.max(1))


def apply_temperature(probs: np.ndarray, temperature: float) -> np.ndarray:
    """Temperature-scaled probabilities ``softmax(log p / T)`` (Guo et al. 2017); ``T > 1`` softens them.

    ``log p`` equals the logits up to a per-row constant, which the softmax cancels, so this is exactly
    temperature scaling of the network's logits.
    """
    p, _ = _check(probs, need_labels=False)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature!r}")
    z = np.log(np.clip(p, 1e-300, None)) / float(temperature)
    z -= z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def fit_temperature(probs: np.ndarray, labels: np.ndarray, *, bounds: tuple[float, float] = (0.05, 20.0)) -> float:
    """The temperature ``T`` in ``bounds`` that minimises the NLL of ``apply_temperature(probs, T)`` on
    ``(probs, labels)`` (a held-out split: the validation set). A log-spaced grid, then a bounded scalar
    minimisation around the best grid point; the NLL is smooth and one-dimensional in ``log T``."""
    from scipy.optimize import minimize_scalar

    p, y = _check(probs, labels)
    if (isinstance(bounds, (str, bytes)) or len(bounds) != 2
            or not all(isinstance(b, (int, float, np.floating)) and not isinstance(b, bool) for b in bounds)
            or not (0 < bounds[0] < bounds[1] < np.inf)):  # fmt: skip
        raise ValueError(f"bounds must be (low, high) with 0 < low < high < inf, got {bounds!r}")

    def loss(log_t: float) -> float:
        return nll(apply_temperature(p, float(np.exp(log_t))), y)

    grid = np.linspace(np.log(bounds[0]), np.log(bounds[1]), 61)
    best = int(np.argmin([loss(g) for g in grid]))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    res = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    return float(np.exp(res.x if res.fun <= loss(grid[best]) else grid[best]))
