"""Sample complexity of tabular RL on a (macroaction-augmented) goal MDP: env steps until the greedy policy
solves the task (the paper's convergence time ``N_{r >= 0.95}``, Section 5).

:func:`greedy_success_rate` is exact (a deterministic greedy rollout from every start state, weighted by
``p``); :func:`steps_to_solve` runs :func:`icml24.rl.value.tabular.q_learning` (``n_runs`` learners in
lock-step) and reports the first evaluated step at which each learner's success rate reaches the threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml24.rl.value.tabular import DeterministicMDP, QLearningConfig, check_int, q_learning


def greedy_success_rate(mdp: DeterministicMDP, Q: np.ndarray, horizon: int) -> np.ndarray:
    """``P_{s~p}[the greedy policy of Q reaches the goal within horizon steps]`` for each table in ``Q``.

    ``Q`` is ``(S, A)`` or ``(B, S, A)``; ties in the argmax go to the lowest action index (deterministic).
    """
    if not isinstance(mdp, DeterministicMDP):
        raise TypeError(f"mdp must be a DeterministicMDP, got {type(mdp).__name__}")
    if not isinstance(Q, np.ndarray):
        raise TypeError(f"Q must be a numpy array, got {type(Q).__name__}")
    Q = Q.astype(np.float64, copy=False)
    if not np.all(np.isfinite(Q)):
        raise ValueError("Q must be finite")
    single = Q.ndim == 2
    Qb = Q[None] if single else Q
    if Qb.ndim != 3 or Qb.shape[1:] != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"Q must be (S, A) or (B, S, A) with (S, A) = {(mdp.n_states, mdp.n_actions)}, "
                         f"got {Q.shape}")  # fmt: skip
    horizon = check_int("horizon", horizon, 1)
    support = np.flatnonzero(mdp.start)
    B = Qb.shape[0]
    policy = Qb.argmax(-1)  # (B, S)
    rows = np.arange(B)[:, None]
    s = np.broadcast_to(support, (B, support.size)).copy()
    solved = np.zeros(s.shape, dtype=bool)
    for _ in range(horizon):
        a = policy[rows, s]
        solved |= mdp.terminal[s, a] & (mdp.reward[s, a] > 0)
        s = mdp.next_state[s, a]
    rate = solved.astype(np.float64) @ mdp.start[support]
    return rate[0] if single else rate


def steps_to_solve(
    mdp: DeterministicMDP,
    *,
    config: QLearningConfig,
    n_runs: int,
    budget: int,
    eval_every: int,
    seed: int,
    threshold: float = 0.95,
) -> dict[str, Any]:
    """Tabular Q-learning until the greedy policy's success rate reaches ``threshold`` (within
    ``config.horizon`` steps from a start state drawn from ``p``).

    Training stops once every learner has reached the threshold at an evaluation. Returns per learner the first
    evaluation step at or above the threshold (``nan`` if not within ``budget`` env steps) and the last
    success rate. A learner can dip below the threshold after first reaching it; the first crossing counts.
    """
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    eval_every = check_int("eval_every", eval_every, 1)
    budget = check_int("budget", budget, 1)
    out = q_learning(
        mdp, config=config, n_runs=n_runs, steps=budget, seed=seed, eval_every=eval_every,
        evaluate=lambda Q: greedy_success_rate(mdp, Q, config.horizon), stop_at=threshold,
    )  # fmt: skip
    curve = out["curve"]  # (n_runs, n_evals)
    at = np.asarray(out["curve_steps"], dtype=np.float64)
    hit = curve >= threshold
    first = np.where(hit.any(1), at[hit.argmax(1)], np.nan)
    return {"steps": first, "final_success": curve[:, -1] if curve.shape[1] else np.zeros(n_runs)}
