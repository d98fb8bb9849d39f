"""Plain per-trial, per-factor Python implementations used as oracles (tests) and as the benchmark baseline.

They follow the official code's structure (``FRB/agents.py``: ``FactoredUCBAgent``), one trial at a time with
Python loops over factors and arms, and consume a given noise array so that their actions can be compared with
the vectorised agents draw for draw.
"""

from __future__ import annotations

import math

import numpy as np


def fucb_single_trial(means: np.ndarray, sigma: float, noise: np.ndarray, c_exp: float = 4.0) -> np.ndarray:
    """F-UCB on one instance (``means``: (d, K)) with observation noise ``noise`` (T, d); returns actions (T, d)."""
    d, k = means.shape
    horizon = noise.shape[0]
    avg = [[0.0] * k for _ in range(d)]
    pulls = [[0] * k for _ in range(d)]
    played = np.empty((horizon, d), dtype=np.intp)
    for t in range(1, horizon + 1):
        for i in range(d):
            best_j, best_val = 0, -math.inf
            for j in range(k):
                if pulls[i][j] == 0:
                    val = math.inf
                else:
                    val = avg[i][j] + sigma * math.sqrt(c_exp * math.log(t) / pulls[i][j])
                if val > best_val:
                    best_j, best_val = j, val
            played[t - 1, i] = best_j
        for i in range(d):
            j = played[t - 1, i]
            obs = means[i, j] + noise[t - 1, i]
            pulls[i][j] += 1
            avg[i][j] += (obs - avg[i][j]) / pulls[i][j]
    return played


def mom_estimate(rewards: np.ndarray, t_after: int) -> float:
    """The official median-of-means estimate of one arm's rewards after ``t_after`` updates (cap 2 + 32 log t)."""
    n = len(rewards)
    if n == 0:
        return math.inf
    c = 2 + 32 * math.log(t_after)
    k = max(int(min(c, n) / 2), 1)
    size = n // k
    return float(np.median([np.mean(chunk) for chunk in np.array_split(np.asarray(rewards)[: size * k], k)]))
