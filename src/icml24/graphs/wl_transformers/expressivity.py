"""Does a model tell two graphs apart? BREC's reliable paired comparison (Wang & Zhang, 2023,
https://arxiv.org/abs/2304.07702).

A model with a non-canonical input (LPE depends on the eigenvector basis) gives different outputs for
relabellings of one graph, so "different outputs" is not enough. BREC compares the outputs of ``R``
random relabellings of ``G`` and of ``H`` with a paired Hotelling T^2 test, and trusts a "distinguished"
only if the same test does *not* separate ``G`` from other relabellings of ``G`` (the reliability check).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch
from scipy import stats
from torch import nn

from icml24.graphs.wl_transformers.datasets import relabel_randomly
from icml24.graphs.wl_transformers.tokens import tokenize
from icml24.graphs.wl_transformers.training import predict


def hotelling_paired_p(a: np.ndarray, b: np.ndarray, *, ridge: float = 1e-8) -> float:
    """p-value of the paired Hotelling T^2 test that rows of ``a - b`` have mean zero.

    ``ridge`` (times the mean squared output) is added to the covariance so that a model whose outputs do
    not vary under relabelling (an exactly invariant one) is decided by the size of the mean difference:
    ``1e-8`` is a standard deviation of 1e-4 of the output's size, 100 times float32 round-off across
    relabellings, so that round-off is never "distinguished" and a relative difference of 1e-3 always is.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"a and b must be 2-D arrays of one shape, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite (a model output NaN or inf)")
    if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or not (np.isfinite(ridge) and ridge > 0):
        raise ValueError(f"ridge must be a positive number, got {ridge!r}")
    n, q = a.shape
    if n <= q:
        raise ValueError(f"a needs more rows (relabellings) than columns (outputs), got {n} x {q}")
    d = a - b
    mean = d.mean(0)
    scale = float(np.mean(np.concatenate([a, b]) ** 2)) + 1e-12
    cov = np.cov(d, rowvar=False).reshape(q, q) + ridge * scale * np.eye(q)
    t2 = float(n * mean @ np.linalg.solve(cov, mean))
    f = (n - q) / (q * (n - 1)) * t2
    return float(stats.f.sf(f, q, n - q))


def _outputs(model: nn.Module, graph: nx.Graph, rng: np.random.Generator, n_perm: int, order: int,
             num_eigs: int) -> np.ndarray:  # fmt: skip
    data = [tokenize(relabel_randomly(graph, rng), order=order, num_eigs=num_eigs) for _ in range(n_perm)]
    return predict(model, data, batch_size=8)


def distinguishes(
    model: nn.Module,
    g: nx.Graph,
    h: nx.Graph,
    *,
    order: int = 2,
    num_eigs: int = 16,
    n_perm: int = 32,
    alpha: float = 1e-3,
    seed: int = 0,
) -> dict:
    """Whether ``model`` reliably separates ``g`` from ``h`` (BREC-style, in eval mode).

    Returns ``{"distinguished", "reliable", "p_pair", "p_self"}``: ``p_pair`` is the T^2 p-value of
    ``g`` against ``h`` over ``n_perm`` paired relabellings, ``p_self`` that of ``g`` against fresh
    relabellings of ``g``; ``distinguished`` needs ``p_pair < alpha`` and ``reliable`` (``p_self >=
    alpha``).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for name, graph in (("g", g), ("h", h)):
        if not isinstance(graph, nx.Graph):
            raise TypeError(f"{name} must be a networkx.Graph, got {type(graph).__name__}")
    if isinstance(n_perm, bool) or not isinstance(n_perm, int) or n_perm < 4:
        raise ValueError(f"n_perm must be an int >= 4, got {n_perm!r}")
    if not (isinstance(alpha, float) and 0 < alpha < 1):
        raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}")
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        out_g = _outputs(model, g, rng, n_perm, order, num_eigs)
        out_h = _outputs(model, h, rng, n_perm, order, num_eigs)
        out_g2 = _outputs(model, g, rng, n_perm, order, num_eigs)
    p_pair = hotelling_paired_p(out_g, out_h)
    p_self = hotelling_paired_p(out_g, out_g2)
    reliable = p_self >= alpha
    return {"distinguished": bool(p_pair < alpha and reliable), "reliable": bool(reliable),
            "p_pair": p_pair, "p_self": p_self}  # fmt: skip
