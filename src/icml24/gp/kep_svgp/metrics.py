"""Uncertainty metrics used by KEP-SVGP's evaluation (Chen et al., ICML 2024, Sec. 5).

All take predicted class probabilities ``probs (n, K)`` (rows sum to 1) and integer ``labels (n,)``; the
confidence score is the maximum softmax probability (MSP).

* ECE (Guo et al. 2017): ``Σ_b |B_b|/n · |acc(B_b) - conf(B_b)|`` over equal-width confidence bins.
* AURC (Geifman et al. 2019): area under the risk-coverage curve when rejecting the least confident first.
* Failure-detection AUROC: AUROC of the confidence for separating correct from wrong predictions.
* OOD AUROC: AUROC of the confidence for separating in-distribution from out-of-distribution inputs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["accuracy", "aurc", "auroc", "brier", "ece", "failure_auroc", "nll", "ood_auroc"]


def _check(probs: np.ndarray, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2:
        raise ValueError(f"probs must be 2-D (n, K), got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("probs must be finite and non-negative")
    if labels is None:
        return p, None
    y = np.asarray(labels)
    if y.shape != (p.shape[0],):
        raise ValueError(f"labels must have shape ({p.shape[0]},), got {y.shape}")
    return p, y.astype(int)


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    p, y = _check(probs, labels)
    return float((p.argmax(1) == y).mean())


def nll(probs: np.ndarray, labels: np.ndarray, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood of the true class."""
    p, y = _check(probs, labels)
    return float(-np.log(np.clip(p[np.arange(len(y)), y], eps, None)).mean())


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    p, y = _check(probs, labels)
    onehot = np.eye(p.shape[1])[y]
    return float(((p - onehot) ** 2).sum(1).mean())


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins (15 as in the paper's code)."""
    p, y = _check(probs, labels)
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
    pos, neg = np.asarray(scores_pos, float), np.asarray(scores_neg, float)
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
    p_in, _ = _check(probs_in)
    p_out, _ = _check(probs_out)
    return auroc(p_in.max(1), p_out.max(1))
