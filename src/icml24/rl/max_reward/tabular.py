"""Tabular Q-learning for the max-reward objective over ``(s, y)``, beside cumulative Q-learning.

Veviurko, Böhmer, de Weerdt, "To the Max: Reinventing Reward in Reinforcement Learning", ICML 2024,
https://arxiv.org/abs/2402.01361.

Max-reward Q-learning is the stochastic-approximation version of the augmented Bellman operator of
:mod:`.bellman`: after ``(s, y) -a-> (s', r)``, ``y' = max(y, r) / gamma`` and

    Q(s, y, a) <- Q(s, y, a) + alpha [ (terminated ? max(y, r) : gamma max(y', max_a' Q(s', y', a'))) - Q(s, y, a) ].

``y`` is an index into the finite reachable grid (:func:`.bellman.y_grid`); once ``y >= r_max`` the value is
``y`` whatever the agent does, so saturated rows stop learning. ``n_runs`` learners run in lock-step episodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml24.rl.max_reward.bellman import Outcomes, y_grid
from icml24.rl.value.tabular import check_gamma, check_int


def _greedy(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Argmax with uniformly random tie-breaking (zero-initialised tables are all ties)."""
    return (q + 1e-9 * rng.random(q.shape)).argmax(-1)


def maze_q_learning(
    mdp: Outcomes,
    *,
    objective: str,
    gamma: float,
    alpha: float = 0.5,
    epsilon: float = 0.1,
    horizon: int = 50,
    episodes: int = 300,
    n_runs: int = 10,
    seed: int = 0,
    eval_every: int = 5,
    eval_episodes: int = 1,
) -> dict[str, Any]:
    """Epsilon-greedy Q-learning: ``objective`` ``"max"`` (over ``(s, y)``), ``"maxdet"`` (the y-free max
    recursion ``Q(s, a) <- max(r, gamma max_a' Q(s', a'))``, baseline) or ``"cumulative"`` (over ``s``).

    Every ``eval_every`` episodes the greedy policy of each run is rolled out ``eval_episodes`` times; its
    success rate (terminated within ``horizon``) is recorded. Returns the curve ``(n_runs, n_evals)``, the
    evaluation episodes, and the tables.
    """
    if not isinstance(mdp, Outcomes):
        raise TypeError(f"mdp must be an Outcomes, got {type(mdp).__name__}")
    check_gamma(gamma)
    for name, v in (("alpha", alpha), ("epsilon", epsilon)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if not 0 <= epsilon <= 1:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
    seed = check_int("seed", seed, 0)
    for name, v in (("horizon", horizon), ("episodes", episodes), ("n_runs", n_runs), ("eval_every", eval_every),
                    ("eval_episodes", eval_episodes)):  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if objective not in ("max", "maxdet", "cumulative"):
        raise ValueError(f"objective must be 'max', 'maxdet' or 'cumulative', got {objective!r}")
    rng = np.random.default_rng(seed)
    S, A, B = mdp.n_states, mdp.n_actions, n_runs
    if objective == "max":
        grid = y_grid(mdp.reward, gamma)
        yv, r_idx_of = grid.values, grid.reward_index
        Y = len(yv)
    else:
        grid, Y = None, 1
    Q = np.zeros((B, S, Y, A))
    rows = np.arange(B)
    curve, eval_at = [], []

    def evaluate() -> np.ndarray:
        E = eval_episodes
        s = np.repeat(mdp.reset_states(B * E, rng) if hasattr(mdp, "reset_states") else
                      rng.choice(S, size=B * E, p=mdp.start), 1)  # fmt: skip
        run = np.repeat(rows, E)
        yi = np.zeros(B * E, dtype=np.int64)
        alive = np.ones(B * E, dtype=bool)
        success = np.zeros(B * E, dtype=bool)
        for _ in range(horizon):
            a = _greedy(Q[run, s, np.maximum(yi, 0)], rng)
            s2, r, term = mdp.sample(s, a, rng)
            if grid is not None:
                ny = grid.next_index[np.maximum(yi, 0), r_idx_of(r)]
                yi = np.where(yi < 0, -1, ny)
            success |= alive & term
            alive &= ~term
            s = s2
            if not alive.any():
                break
        return success.reshape(B, E).mean(1)

    for ep in range(episodes):
        s = rng.choice(S, size=B, p=mdp.start)
        yi = np.zeros(B, dtype=np.int64)
        alive = np.ones(B, dtype=bool)
        for _ in range(horizon):
            yc = np.maximum(yi, 0)
            greedy = _greedy(Q[rows, s, yc], rng)
            a = np.where(rng.random(B) < epsilon, rng.integers(0, A, B), greedy)
            s2, r, term = mdp.sample(s, a, rng)
            if grid is not None:
                m = np.maximum(yv[yc], r)
                ny = grid.next_index[yc, r_idx_of(r)]
                boot = np.where(
                    ny >= 0,
                    gamma * np.maximum(yv[np.maximum(ny, 0)], Q[rows, s2, np.maximum(ny, 0)].max(-1)),
                    m,
                )
                target = np.where(term, m, boot)
                learn = alive & (yi >= 0)
            elif objective == "maxdet":  # the y-free recursion: right only for deterministic dynamics
                target = np.where(term, r, np.maximum(r, gamma * Q[rows, s2, 0].max(-1)))
                ny = yi
                learn = alive
            else:
                target = r + gamma * (~term) * Q[rows, s2, 0].max(-1)
                ny = yi
                learn = alive
            q_sa = Q[rows, s, yc, a]
            Q[rows, s, yc, a] = np.where(learn, q_sa + alpha * (target - q_sa), q_sa)
            if grid is not None:
                yi = np.where(yi < 0, -1, ny)
            alive &= ~term
            s = s2
            if not alive.any():
                break
        if (ep + 1) % eval_every == 0:
            curve.append(evaluate())
            eval_at.append(ep + 1)
    return {"curve": np.array(curve).T, "eval_episodes": eval_at, "Q": Q, "grid": grid}


def episodes_to_success(curve: np.ndarray, eval_at: list[int], threshold: float = 0.9) -> np.ndarray:
    """First evaluation episode at which each run's greedy success rate reaches ``threshold`` (NaN if never)."""
    curve = np.asarray(curve)
    if curve.dtype.kind not in "biuf" or curve.ndim != 2:
        raise ValueError(f"curve must be a (runs, evaluations) array of success rates, got {curve.dtype} {curve.shape}")
    if not np.all(np.isfinite(curve)) or np.any(curve < 0) or np.any(curve > 1):
        raise ValueError("curve must hold finite success rates in [0, 1]")
    at_ = np.asarray(eval_at)
    if at_.dtype.kind not in "biuf" or at_.shape != (curve.shape[1],) or not np.all(np.isfinite(at_)):
        raise ValueError(f"eval_at must be {curve.shape[1]} finite episode numbers, got {at_.shape}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or not 0 <= threshold <= 1:
        raise ValueError(f"threshold must be a success rate in [0, 1], got {threshold!r}")
    hit = curve >= threshold
    first = np.where(hit.any(1), hit.argmax(1), -1)
    at = np.asarray(eval_at, dtype=np.float64)
    return np.where(first >= 0, at[np.maximum(first, 0)], np.nan)
