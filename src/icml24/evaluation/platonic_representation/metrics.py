"""Representation-alignment metrics of the Platonic Representation Hypothesis (Huh et al., ICML 2024).

Paper: *Position: The Platonic Representation Hypothesis*, M. Huh, B. Cheung, T. Wang, P. Isola. ICML 2024.
https://arxiv.org/abs/2405.07987 · official code https://github.com/minyoungg/platonic-rep

Two representations ``f`` and ``g`` of the same ``n`` inputs are *aligned* when they induce similar kernels
``K_f(x_i, x_j) = <f(x_i), f(x_j)>``. The paper's headline metric is the mutual k-nearest-neighbour score
(Sec. 2, App. A):

    m_kNN(A, B) = 1/n sum_i |N_A(i) ∩ N_B(i)| / k,

with ``N_A(i)`` the indices of the ``k`` rows of ``A`` with the largest inner product with row ``i``
(self excluded) after L2-normalising the rows. It is 1 for identical neighbourhoods and about
``k / (n - 1)`` for independent features. The companion metrics are CKA with a linear or RBF kernel, on
the biased HSIC ``tr(KHLH) / (n-1)^2`` or on the unbiased estimator of Song et al. (2012), and the
best-over-layer-pairs score of the paper's figures. The official code clips outliers first: every
feature is clamped to ``±q_val``, ``q_val`` the mean over samples of the ``q``-quantile of ``|feature|``.

Neighbour sets come from a row-chunked ``matmul`` + ``topk`` (memory O(chunk x n)); their overlap is
counted by sorting the concatenated index lists, with no ``n x n`` mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

__all__ = [
    "clip_outliers",
    "knn_indices",
    "mutual_knn",
    "knn_overlap",
    "hsic",
    "cka",
    "unbiased_cka",
    "LayerAlignment",
    "best_over_layers",
    "chance_mutual_knn",
]


def _as_tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x.detach()
    elif isinstance(x, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(x))
    else:
        raise TypeError(f"{name} must be a numpy array or torch tensor of shape (n, d), got {type(x).__name__}")
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n samples x d features), got shape {tuple(t.shape)}")
    if t.shape[0] < 2 or t.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 samples and 1 feature, got shape {tuple(t.shape)}")
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64, torch.uint8)):
        raise TypeError(f"{name} must be real-valued, got dtype {t.dtype}")
    if t.dtype != torch.float64:
        t = t.to(torch.float32)
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return t.cpu()


def _pair(a: Any, b: Any, names: tuple[str, str] = ("A", "B")) -> tuple[torch.Tensor, torch.Tensor]:
    ta, tb = _as_tensor(a, names[0]), _as_tensor(b, names[1])
    if ta.shape[0] != tb.shape[0]:
        raise ValueError(f"{names[0]} and {names[1]} must describe the same samples: got {ta.shape[0]} and {tb.shape[0]} rows")
    dt = torch.float64 if torch.float64 in (ta.dtype, tb.dtype) else torch.float32
    return ta.to(dt), tb.to(dt)


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def _check_q(name: str, q: Any) -> None:
    if isinstance(q, bool) or not isinstance(q, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in (0, 1], got {q!r}")
    if not 0.0 < float(q) <= 1.0:  # NaN fails this too
        raise ValueError(f"{name} must be in (0, 1], got {q!r}")


def _check_kernel(kernel: Any, sigma: Any) -> None:
    if not isinstance(kernel, str) or kernel not in ("linear", "rbf"):
        raise ValueError(f"kernel must be 'linear' or 'rbf', got {kernel!r}")
    if isinstance(sigma, str):
        if sigma != "median":
            raise ValueError(f"sigma must be a positive number or 'median', got {sigma!r}")
    elif isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.floating, np.integer)) or not (
        np.isfinite(sigma) and sigma > 0
    ):
        raise ValueError(f"sigma must be a positive finite number or 'median', got {sigma!r}")


def _check_k(k: int, n: int) -> None:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must satisfy 1 <= k <= n - 1 = {n - 1}, got k={k}")


def clip_outliers(feats: Any, q: float = 0.95) -> torch.Tensor:
    """Clamp every entry to ``±q_val``, ``q_val`` = mean over samples of the ``q``-quantile of ``|row|``
    (the official ``remove_outliers``); ``q = 1`` returns the features unchanged."""
    t = _as_tensor(feats, "feats")
    _check_q("q", q)
    if q == 1.0:
        return t
    # numpy's quantile has no size limit (torch.quantile refuses inputs over 2**24 entries)
    q_val = float(np.quantile(t.abs().numpy(), q, axis=1).mean())
    return t.clamp(-q_val, q_val)


def knn_indices(feats: Any, k: int, *, normalize: bool = True, chunk_size: int = 2048) -> torch.Tensor:
    """``(n, k)`` indices of each row's ``k`` nearest rows by inner product (cosine if ``normalize``),
    excluding the row itself. Ties are broken by ``torch.topk`` (an arbitrary but deterministic order)."""
    x = _as_tensor(feats, "feats")
    n = x.shape[0]
    _check_k(k, n)
    _check_bool("normalize", normalize)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if normalize:
        x = torch.nn.functional.normalize(x, dim=1)
    out = torch.empty((n, k), dtype=torch.long)
    for s in range(0, n, chunk_size):  # a loop over row blocks bounds memory at chunk_size x n
        e = min(s + chunk_size, n)
        sim = x[s:e] @ x.T
        sim[torch.arange(e - s), torch.arange(s, e)] = -torch.inf
        out[s:e] = torch.topk(sim, k, dim=1).indices
    return out


def knn_overlap(knn_a: torch.Tensor, knn_b: torch.Tensor) -> torch.Tensor:
    """``|N_A(i) ∩ N_B(i)|`` for every row, from two ``(n, k)`` index matrices of distinct entries per row."""
    for name, t in (("knn_a", knn_a), ("knn_b", knn_b)):
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int64, torch.int32) or t.ndim != 2:
            raise TypeError(f"{name} must be an (n, k) integer torch tensor (from knn_indices), got {type(t).__name__}"
                            + (f" of dtype {t.dtype}" if isinstance(t, torch.Tensor) else ""))  # fmt: skip
        if t.numel() and t.min() < 0:
            raise ValueError(f"{name} must hold non-negative row indices")
    if knn_a.shape != knn_b.shape:
        raise ValueError(f"knn_a and knn_b: neighbour lists must have the same shape, got {tuple(knn_a.shape)} and {tuple(knn_b.shape)}")
    both = torch.sort(torch.cat([knn_a, knn_b], 1), dim=1).values
    return (both[:, 1:] == both[:, :-1]).sum(1)


def mutual_knn(
    A: Any, B: Any, k: int = 10, *, outlier_q: float | None = None, normalize: bool = True, chunk_size: int = 2048
) -> float:
    """Mutual k-nearest-neighbour alignment ``m_kNN(A, B)`` (Huh et al., Sec. 2 / App. A).

    Args:
        A: ``(n, d1)`` features (numpy or torch); row ``i`` of ``A`` and ``B`` describe the same input.
        B: ``(n, d2)`` features.
        k: neighbourhood size, ``1 <= k <= n - 1`` (paper: 10 with n = 1024).
        outlier_q: if given, :func:`clip_outliers` with this quantile first (official pipeline: 0.95).
        normalize: L2-normalise rows (cosine similarity), as the paper.
        chunk_size: rows per similarity block.

    Returns:
        The score in [0, 1]; chance level is about ``k / (n - 1)``.
    """
    a, b = _pair(A, B)
    _check_k(k, a.shape[0])
    _check_bool("normalize", normalize)
    if outlier_q is not None:
        _check_q("outlier_q", outlier_q)
        a, b = clip_outliers(a, outlier_q), clip_outliers(b, outlier_q)
    ka = knn_indices(a, k, normalize=normalize, chunk_size=chunk_size)
    kb = knn_indices(b, k, normalize=normalize, chunk_size=chunk_size)
    return float(knn_overlap(ka, kb).double().mean() / k)


def chance_mutual_knn(n: int, k: int) -> float:
    """Expected ``m_kNN`` for independent representations: the overlap of two random ``k``-subsets of the
    ``n - 1`` other points is hypergeometric with mean ``k^2 / (n - 1)``, so the score is ``k / (n - 1)``."""
    _check_k(k, n)
    return k / (n - 1)


# ---------------------------------------------------------------------------------------------- CKA


def _kernel(x: torch.Tensor, kernel: str, sigma: float | str) -> torch.Tensor:
    if kernel == "linear":
        return x @ x.T
    if kernel == "rbf":
        d2 = torch.cdist(x, x).pow(2)
        if sigma == "median":
            off = d2[~torch.eye(len(x), dtype=torch.bool)]
            s2 = off.median().clamp_min(torch.finfo(x.dtype).tiny) / 2.0  # median heuristic: 2 sigma^2 = median d^2
        elif isinstance(sigma, (int, float)) and sigma > 0:
            s2 = torch.tensor(float(sigma) ** 2, dtype=x.dtype)
        else:
            raise ValueError(f"sigma must be a positive number or 'median', got {sigma!r}")
        return torch.exp(-d2 / (2.0 * s2))
    raise ValueError(f"kernel must be 'linear' or 'rbf', got {kernel!r}")


def hsic(K: Any, L: Any, *, unbiased: bool = False) -> float:
    """HSIC of two ``(n, n)`` kernel matrices: biased ``tr(KHLH) / (n-1)^2`` or, with ``unbiased``, the
    estimator of Song et al. (2012, Eq. 5) on zero-diagonal kernels (needs ``n >= 4``)."""
    k, l_ = _pair(K, L, ("K", "L"))
    _check_bool("unbiased", unbiased)
    n = k.shape[0]
    if k.shape != (n, n):
        raise ValueError(f"K must be a square (n, n) kernel matrix, got {tuple(k.shape)}")
    if l_.shape != (n, n):
        raise ValueError(f"L must be a square (n, n) kernel matrix like K, got {tuple(l_.shape)}")
    return float(_hsic(k, l_, unbiased))


def _hsic(k: torch.Tensor, l_: torch.Tensor, unbiased: bool) -> torch.Tensor:
    n = k.shape[0]
    if k.shape != (n, n) or l_.shape != (n, n):
        raise ValueError(f"kernels must be square and of the same size, got {tuple(k.shape)}, {tuple(l_.shape)}")
    if not unbiased:
        kc = k - k.mean(0, keepdim=True) - k.mean(1, keepdim=True) + k.mean()
        lc = l_ - l_.mean(0, keepdim=True) - l_.mean(1, keepdim=True) + l_.mean()
        return (kc * lc).sum() / (n - 1) ** 2
    if n < 4:
        raise ValueError(f"the unbiased HSIC needs n >= 4 samples, got {n}")
    kt = k.clone().fill_diagonal_(0)
    lt = l_.clone().fill_diagonal_(0)
    term = (kt * lt).sum() + kt.sum() * lt.sum() / ((n - 1) * (n - 2)) - 2.0 * (kt.sum(0) @ lt.sum(1)) / (n - 2)
    return term / (n * (n - 3))


def _cka_from_kernels(k: torch.Tensor, l_: torch.Tensor, unbiased: bool) -> float:
    kl = _hsic(k, l_, unbiased)
    kk = _hsic(k, k, unbiased)
    ll = _hsic(l_, l_, unbiased)
    den = torch.sqrt(kk * ll)
    if not torch.isfinite(den) or den <= 0:
        return float("nan")  # a constant representation has no alignment to speak of
    return float(kl / den)


def cka(
    A: Any,
    B: Any,
    *,
    kernel: Literal["linear", "rbf"] = "linear",
    sigma: float | str = 1.0,
    unbiased: bool = False,
) -> float:
    """Centered kernel alignment ``HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` (Kornblith et al., 2019),
    with a linear or RBF kernel (``sigma`` a bandwidth or ``"median"``) and the biased or unbiased HSIC.
    NaN if either representation is constant."""
    a, b = _pair(A, B)
    _check_kernel(kernel, sigma)
    _check_bool("unbiased", unbiased)
    return _cka_from_kernels(_kernel(a, kernel, sigma), _kernel(b, kernel, sigma), unbiased)


def unbiased_cka(A: Any, B: Any, *, kernel: Literal["linear", "rbf"] = "linear", sigma: float | str = 1.0) -> float:
    """:func:`cka` on the unbiased HSIC estimator."""
    return cka(A, B, kernel=kernel, sigma=sigma, unbiased=True)


# -------------------------------------------------------------------------------------- best layers


@dataclass(frozen=True)
class LayerAlignment:
    """Alignment of every layer pair and the best one.

    Attributes:
        score: the maximum over layer pairs (the paper's reported score).
        best: ``(layer of A, layer of B)`` achieving it.
        scores: ``(L_A, L_B)`` array of every pair's score.
    """

    score: float
    best: tuple[int, int]
    scores: np.ndarray


def best_over_layers(
    layers_a: Sequence[Any],
    layers_b: Sequence[Any],
    *,
    metric: Literal["mutual_knn", "cka", "unbiased_cka"] = "mutual_knn",
    k: int = 10,
    outlier_q: float | None = None,
    kernel: Literal["linear", "rbf"] = "linear",
    sigma: float | str = 1.0,
) -> LayerAlignment:
    """Score every (layer of A, layer of B) pair and keep the best, as ``measure_alignment.py`` does.

    Neighbour lists (or kernels) are computed once per layer, so the cost is ``L_A + L_B`` kNN searches
    plus ``L_A * L_B`` cheap overlaps. Note the max over pairs favours deeper models (selection bias);
    ``scores`` gives every fixed-layer score too.
    """
    for name, layers in (("layers_a", layers_a), ("layers_b", layers_b)):
        if not isinstance(layers, (list, tuple)):
            raise TypeError(f"{name} must be a list of (n, d) feature matrices, got {type(layers).__name__}")
    if outlier_q is not None:
        _check_q("outlier_q", outlier_q)
    if metric in ("cka", "unbiased_cka") or kernel != "linear" or sigma != 1.0:
        _check_kernel(kernel, sigma)
    if len(layers_a) == 0 or len(layers_b) == 0:
        raise ValueError("layers_a and layers_b must each hold at least one (n, d) feature matrix")
    la = [_as_tensor(x, f"layers_a[{i}]") for i, x in enumerate(layers_a)]
    lb = [_as_tensor(x, f"layers_b[{i}]") for i, x in enumerate(layers_b)]
    n = la[0].shape[0]
    for name, layers in (("layers_a", la), ("layers_b", lb)):
        for i, x in enumerate(layers):
            if x.shape[0] != n:
                raise ValueError(f"{name}[{i}] has {x.shape[0]} rows, expected {n} (same samples everywhere)")
    if outlier_q is not None:
        la = [clip_outliers(x, outlier_q) for x in la]
        lb = [clip_outliers(x, outlier_q) for x in lb]
    scores = np.empty((len(la), len(lb)))
    if metric == "mutual_knn":
        _check_k(k, n)
        ka = [knn_indices(x, k) for x in la]
        kb = [knn_indices(x, k) for x in lb]
        for i, a in enumerate(ka):
            for j, b in enumerate(kb):
                scores[i, j] = float(knn_overlap(a, b).double().mean() / k)
    elif metric in ("cka", "unbiased_cka"):
        unb = metric == "unbiased_cka"
        ka = [_kernel(x.double(), kernel, sigma) for x in la]
        kb = [_kernel(x.double(), kernel, sigma) for x in lb]
        for i, a in enumerate(ka):
            for j, b in enumerate(kb):
                scores[i, j] = _cka_from_kernels(a, b, unb)
    else:
        raise ValueError(f"metric must be 'mutual_knn', 'cka' or 'unbiased_cka', got {metric!r}")
    flat = int(np.nanargmax(scores)) if np.isfinite(scores).any() else 0
    i, j = divmod(flat, scores.shape[1])
    return LayerAlignment(float(scores[i, j]), (i, j), scores)
