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


def ftrack_single_trial(
    means: np.ndarray,
    sigma: float,
    noise: np.ndarray,
    c: float = 2.5,
    c_exp: float = 4.0,
    order: str = "increasing",
) -> tuple[np.ndarray, int]:
    """F-Track on one instance, written like the official ``FtrackAgent`` (a d x L matrix of planned pulls, runs of
    identical columns served least-served-first, F-UCB after the drift check fails).

    ``noise`` has shape (T, d) and fixes the horizon. Returns the actions (T, d) and the 1-based round at which the
    safety switch fired (-1 if never).
    """
    d, k = means.shape
    horizon = noise.shape[0]
    log_t = math.log(horizon)

    def f_t(delta: float) -> float:
        return (1 + 1 / log_t) * (c * math.log(log_t) + math.log(1 / delta))

    n0 = math.ceil(math.sqrt(log_t))
    warmup = n0 * k
    eps = math.sqrt(2 * sigma**2 * f_t(1 / log_t) / n0)
    avg = [[0.0] * k for _ in range(d)]
    pulls = [[0] * k for _ in range(d)]
    played = np.empty((horizon, d), dtype=np.intp)
    columns: list[list[int]] = []
    sizes: list[int] = []
    served: list[int] = []
    warm_avg: list[list[float]] = []
    switched_at = -1
    for t in range(1, horizon + 1):
        if t <= warmup:
            action = [(t - 1) % k] * d
        else:
            if not columns:
                warm_avg = [row[:] for row in avg]
                length = horizon - warmup
                plan = [[0] * length for _ in range(d)]
                for i in range(d):
                    best = max(range(k), key=lambda j, i=i: (warm_avg[i][j], -j))
                    need = {}
                    for j in range(k):
                        if j != best:
                            gap = warm_avg[i][best] - warm_avg[i][j]
                            raw = math.inf if gap == 0 else 2 * sigma**2 * f_t(1 / horizon) / gap**2
                            need[j] = min(math.ceil(raw) if math.isfinite(raw) else length, length)
                    arms = sorted(need, key=lambda j: (need[j] if order == "increasing" else -need[j], j))
                    pos = 0
                    for j in arms:
                        for u in range(pos, min(pos + need[j], length)):
                            plan[i][u] = j
                        pos += need[j]
                    for u in range(min(pos, length), length):
                        plan[i][u] = best
                for u in range(length):
                    col = [plan[i][u] for i in range(d)]
                    if columns and columns[-1] == col:
                        sizes[-1] += 1
                    else:
                        columns.append(col)
                        sizes.append(1)
                served = [0] * len(columns)
            drift = max(abs(avg[i][j] - warm_avg[i][j]) for i in range(d) for j in range(k))
            if switched_at < 0 and drift > 2 * eps:
                switched_at = t
            open_groups = [g for g in range(len(columns)) if served[g] < sizes[g]]
            if switched_at < 0 and open_groups:
                g = min(open_groups, key=lambda g: (served[g], g))
                served[g] += 1
                action = columns[g]
            else:
                action = []
                for i in range(d):
                    best_j, best_val = 0, -math.inf
                    for j in range(k):
                        bonus = sigma * math.sqrt(c_exp * math.log(t) / pulls[i][j])
                        if avg[i][j] + bonus > best_val:
                            best_j, best_val = j, avg[i][j] + bonus
                    action.append(best_j)
        played[t - 1] = action
        for i in range(d):
            j = action[i]
            pulls[i][j] += 1
            avg[i][j] += (means[i, j] + noise[t - 1, i] - avg[i][j]) / pulls[i][j]
    return played, switched_at
