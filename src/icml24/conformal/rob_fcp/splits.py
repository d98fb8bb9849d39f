"""Client partitions of a calibration set: IID equal shares and Dirichlet label skew.

"Certifiably Byzantine-Robust Federated Conformal Prediction" (Kang et al., ICML 2024,
https://arxiv.org/abs/2406.01960), Section 6: the calibration half of the test set is split equally at
random (IID) or by the usual Dirichlet label partition (non-IID, ``beta = 0.5``; Hsu et al. 2019, as in the
official ``fl_conformal.py``): for every class, the class's samples are divided among the clients in
proportions drawn from ``Dirichlet(beta * 1_K)``; clients already holding their fair share ``N / K``
receive none; draws repeat until every client has at least ``min_size`` samples.
"""

from __future__ import annotations

import numpy as np

from icml24.conformal._validation import check_rng
from icml24.conformal.rob_fcp._checks import finite_real, int_at_least

__all__ = ["dirichlet_label_split", "iid_split"]


def _check_clients(n_clients: int, n_samples: int) -> int:
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) or n_clients < 1:
        raise ValueError(f"n_clients must be a positive integer, got {n_clients!r}")
    if n_clients > n_samples:
        raise ValueError(f"n_clients ({n_clients}) exceeds the number of samples ({n_samples})")
    return int(n_clients)


def iid_split(n_samples: int, n_clients: int, rng: np.random.Generator | int | None = None) -> list[np.ndarray]:
    """Shuffle ``range(n_samples)`` and cut it into ``n_clients`` shares whose sizes differ by at most one."""
    n_samples = int_at_least(n_samples, "n_samples", 1)
    n_clients = _check_clients(n_clients, n_samples)
    perm = check_rng(rng).permutation(int(n_samples))
    return [np.sort(p) for p in np.array_split(perm, n_clients)]


def dirichlet_label_split(
    labels: np.ndarray,
    n_clients: int,
    beta: float = 0.5,
    rng: np.random.Generator | int | None = None,
    *,
    min_size: int = 10,
    max_tries: int = 1000,
) -> list[np.ndarray]:
    """Non-IID split with ``Dirichlet(beta)`` label skew (smaller ``beta`` = more skew).

    Args:
        labels: (n,) integer class labels.
        n_clients: number of clients ``K``.
        beta: Dirichlet concentration, > 0.
        rng: seed or Generator.
        min_size: redraw until every client holds at least this many samples.
        max_tries: give up (``RuntimeError``) after this many draws.

    Returns:
        K sorted index arrays that partition ``range(n)``.
    """
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a 1-D integer array, got shape {y.shape} and dtype {y.dtype}")
    n = y.size
    n_clients = _check_clients(n_clients, n)
    beta = finite_real(beta, "beta")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    if min_size * n_clients > n:
        raise ValueError(f"min_size={min_size} x n_clients={n_clients} exceeds the {n} samples")
    gen = check_rng(rng)
    classes = np.unique(y)
    for _ in range(int(max_tries)):
        owner = np.empty(n, dtype=np.int64)
        sizes = np.zeros(n_clients, dtype=np.int64)
        for c in classes:
            idx = np.flatnonzero(y == c)
            gen.shuffle(idx)
            p = gen.dirichlet(np.full(n_clients, float(beta)))
            p = p * (sizes < n / n_clients)  # full clients take no more
            p = p / p.sum() if p.sum() > 0 else np.full(n_clients, 1.0 / n_clients)
            cuts = (np.cumsum(p) * idx.size).astype(np.int64)[:-1]
            for k, part in enumerate(np.split(idx, cuts)):
                owner[part] = k
                sizes[k] += part.size
        if sizes.min() >= min_size:
            return [np.flatnonzero(owner == k) for k in range(n_clients)]
    raise RuntimeError(f"no Dirichlet split with every client >= {min_size} samples after {max_tries} draws")
