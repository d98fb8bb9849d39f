"""Occupancy measures and offline (state-only) datasets for tabular and continuous offline RL.

Shared by the offline imitation papers (:mod:`icml24.rl.pw_dice`, PW-DICE, ICML 2024) and the tabular theory
papers of :mod:`icml24.rl`. The discounted occupancy of a policy ``pi`` in a :class:`TabularMDP` is

    d^pi(s, a) = (1 - gamma) sum_t gamma^t Pr(s_t = s, a_t = a | s_0 ~ p0, pi),

the solution of the Bellman flow equations ``sum_a d(s, a) = (1 - gamma) p0(s) + gamma sum_{s~, a~} P(s | s~, a~)
d(s~, a~)`` (Puterman, 1994, section 6.9; the constraint of every DICE method). It is one linear solve,
``d_S = (1 - gamma) (I - gamma P_pi^T)^{-1} p0`` and ``d(s, a) = d_S(s) pi(a | s)``. A transition flagged
terminal in the MDP ends the episode (as in :func:`icml24.rl.value.policy_evaluation`), so with terminal
transitions the occupancy's total mass is below one; DICE methods model termination by an absorbing state
instead (no terminal flags, mass one).

Datasets: :class:`TransitionDataset` holds task-agnostic ``(s, a, s', done)`` tuples with the step index in
their episode; :class:`StateDataset` holds expert states only (the "learning from observation" setting), with
the next state so that state-pair methods (LobsDICE) can use consecutive states. Both work for integer
(tabular) and real-vector (continuous) states. :func:`empirical_mdp` and :func:`empirical_policy` are the
count estimates the tabular DICE experiments use (PW-DICE code, ``PWDICE_tabular_wrapup``: unseen pairs get a
uniform row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml24.rl.value.tabular import TabularMDP, check_gamma, check_int

__all__ = [
    "StateDataset",
    "TransitionDataset",
    "collect_transitions",
    "discounted_state_distribution",
    "empirical_mdp",
    "empirical_policy",
    "state_action_occupancy",
    "state_occupancy",
    "state_pair_occupancy",
]


def _check_mdp(mdp: object) -> TabularMDP:
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    return mdp


def _policy_matrix(mdp: TabularMDP, policy: object) -> np.ndarray:
    """A deterministic ``(S,)`` or stochastic ``(S, A)`` policy as an ``(S, A)`` row-stochastic matrix."""
    if isinstance(policy, (str, bytes)) or policy is None:
        raise TypeError(f"policy must be an (S,) int array or an (S, A) array, got {type(policy).__name__}")
    pi = np.asarray(policy)
    S, A = mdp.n_states, mdp.n_actions
    if pi.ndim == 1:
        if pi.shape != (S,) or not np.issubdtype(pi.dtype, np.integer):
            raise ValueError(f"a deterministic policy must be an int array of shape ({S},), got {pi.dtype} {pi.shape}")
        if np.any(pi < 0) or np.any(pi >= A):
            raise ValueError(f"policy actions must be in [0, {A}), got {pi.min()}..{pi.max()}")
        return np.eye(A)[pi]
    if pi.shape != (S, A) or not np.issubdtype(pi.dtype, np.number):
        raise ValueError(f"policy must have shape ({S},) or ({S}, {A}), got {pi.shape}")
    pi = pi.astype(np.float64)
    if not np.all(np.isfinite(pi)) or np.any(pi < 0) or not np.allclose(pi.sum(-1), 1.0, atol=1e-8):
        raise ValueError("every row of policy must be a probability distribution over actions")
    return pi


def state_occupancy(mdp: TabularMDP, policy: object, gamma: float) -> np.ndarray:
    """Discounted state occupancy ``d_S^pi (S,)``: ``(1 - gamma) (I - gamma P_pi^T)^{-1} p0`` (one solve)."""
    _check_mdp(mdp)
    gamma = check_gamma(gamma, allow_one=False)
    pi = _policy_matrix(mdp, policy)
    P_pi = np.einsum("sa,sak->sk", pi, mdp.P * (~mdp.terminal))
    d = np.linalg.solve(np.eye(mdp.n_states) - gamma * P_pi.T, (1.0 - gamma) * mdp.start)
    return np.maximum(d, 0.0)  # clip round-off negatives (~1e-17) so the result is a valid measure


def state_action_occupancy(mdp: TabularMDP, policy: object, gamma: float) -> np.ndarray:
    """Discounted state-action occupancy ``d^pi(s, a) = d_S^pi(s) pi(a | s)`` ``(S, A)``."""
    d_s = state_occupancy(mdp, policy, gamma)
    return d_s[:, None] * _policy_matrix(mdp, policy)


def state_pair_occupancy(mdp: TabularMDP, policy: object, gamma: float) -> np.ndarray:
    """Discounted occupancy of consecutive state pairs ``d^pi(s, s') = sum_a d^pi(s, a) P(s' | s, a)`` ``(S, S)``.

    The distribution LobsDICE matches, and the ``A0`` metric of the PW-DICE tabular experiments.
    """
    d_sa = state_action_occupancy(mdp, policy, gamma)
    return np.einsum("sa,sak->sk", d_sa, mdp.P)


@dataclass(frozen=True)
class TransitionDataset:
    """Task-agnostic transitions ``(s, a, s', done)``; states are ints (tabular) or float vectors."""

    states: np.ndarray
    """``(N,)`` int or ``(N, d)`` float current states."""
    actions: np.ndarray
    """``(N,)`` int or ``(N, k)`` float actions."""
    next_states: np.ndarray
    """Next states, the shape of ``states``."""
    dones: np.ndarray
    """``(N,)`` bool: the transition is terminal (no bootstrap from ``s'``); truncation is not terminal."""
    steps: np.ndarray
    """``(N,)`` int: the step index ``t`` of the transition in its episode (0 at an initial state)."""

    def __post_init__(self) -> None:
        s, a, s2 = np.asarray(self.states), np.asarray(self.actions), np.asarray(self.next_states)
        d, t = np.asarray(self.dones), np.asarray(self.steps)
        n = len(s)
        if s.ndim not in (1, 2) or n == 0:
            raise ValueError(f"states must be a non-empty (N,) or (N, d) array, got shape {s.shape}")
        if s2.shape != s.shape:
            raise ValueError(f"next_states must have the shape of states {s.shape}, got {s2.shape}")
        if a.ndim not in (1, 2) or len(a) != n:
            raise ValueError(f"actions must be (N,) or (N, k) with N = {n}, got shape {a.shape}")
        if d.shape != (n,) or d.dtype != bool:
            raise ValueError(f"dones must be a bool array of shape ({n},), got {d.dtype} {d.shape}")
        if t.shape != (n,) or not np.issubdtype(t.dtype, np.integer) or np.any(t < 0):
            raise ValueError(f"steps must be a non-negative int array of shape ({n},)")
        for name, v in (("states", s), ("next_states", s2), ("actions", a)):
            if not np.issubdtype(v.dtype, np.number) or not np.all(np.isfinite(v)):
                raise ValueError(f"{name} must be finite numbers")
        for name, v in (("states", s), ("actions", a), ("next_states", s2), ("dones", d), ("steps", t)):
            object.__setattr__(self, name, v)

    def __len__(self) -> int:
        return len(self.states)

    @property
    def initial_states(self) -> np.ndarray:
        """The states at step 0 (samples of ``p0``)."""
        return self.states[self.steps == 0]


@dataclass(frozen=True)
class StateDataset:
    """Expert observations only: states, the next states and their step index (no actions)."""

    states: np.ndarray
    """``(N,)`` int or ``(N, d)`` float expert states."""
    next_states: np.ndarray
    """The state that followed each one (same shape)."""
    steps: np.ndarray
    """``(N,)`` int step index of each state in its episode."""

    def __post_init__(self) -> None:
        s, s2, t = np.asarray(self.states), np.asarray(self.next_states), np.asarray(self.steps)
        if s.ndim not in (1, 2) or len(s) == 0:
            raise ValueError(f"states must be a non-empty (N,) or (N, d) array, got shape {s.shape}")
        if s2.shape != s.shape:
            raise ValueError(f"next_states must have the shape of states {s.shape}, got {s2.shape}")
        if t.shape != (len(s),) or not np.issubdtype(t.dtype, np.integer) or np.any(t < 0):
            raise ValueError(f"steps must be a non-negative int array of shape ({len(s)},)")
        for name, v in (("states", s), ("next_states", s2)):
            if not np.issubdtype(v.dtype, np.number) or not np.all(np.isfinite(v)):
                raise ValueError(f"{name} must be finite numbers")
        for name, v in (("states", s), ("next_states", s2), ("steps", t)):
            object.__setattr__(self, name, v)

    def __len__(self) -> int:
        return len(self.states)

    @classmethod
    def from_transitions(cls, data: TransitionDataset) -> StateDataset:
        """Drop the actions of a transition dataset (an expert's demonstrations become observations)."""
        if not isinstance(data, TransitionDataset):
            raise TypeError(f"data must be a TransitionDataset, got {type(data).__name__}")
        return cls(states=data.states, next_states=data.next_states, steps=data.steps)


def collect_transitions(
    mdp: TabularMDP, policy: object, *, n_steps: int, seed: int, horizon: int | None = None
) -> TransitionDataset:
    """Roll ``policy`` out for ``n_steps`` transitions, restarting from ``p0`` at a terminal or after ``horizon``.

    With ``horizon=None`` one long episode (the PW-DICE tabular generator: its "trajectories" are rollouts of a
    given length in a never-ending MDP).
    """
    _check_mdp(mdp)
    pi = _policy_matrix(mdp, policy)
    n_steps = check_int("n_steps", n_steps, 1)
    seed = check_int("seed", seed, 0)
    if horizon is not None:
        horizon = check_int("horizon", horizon, 1)
    rng = np.random.default_rng(seed)
    cum_pi = np.cumsum(pi, axis=1)
    S_, A_, S2, T = (np.empty(n_steps, dtype=np.int64) for _ in range(4))
    D = np.empty(n_steps, dtype=bool)
    s, t = int(mdp.reset(1, rng)[0]), 0
    for i in range(n_steps):
        a = min(int(np.searchsorted(cum_pi[s], rng.random(), side="right")), mdp.n_actions - 1)
        s2, _, term = mdp.step(np.array([s]), np.array([a]), rng)
        S_[i], A_[i], S2[i], D[i], T[i] = s, a, int(s2[0]), bool(term[0]), t
        s, t = int(s2[0]), t + 1
        if D[i] or (horizon is not None and t >= horizon):
            s, t = int(mdp.reset(1, rng)[0]), 0
    return TransitionDataset(states=S_, actions=A_, next_states=S2, dones=D, steps=T)


def _check_tabular(data: object, n_states: int) -> None:
    if not isinstance(data, (TransitionDataset, StateDataset)):
        raise TypeError(f"data must be a TransitionDataset or StateDataset, got {type(data).__name__}")
    for name in ("states", "next_states"):
        v = getattr(data, name)
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= n_states:
            raise ValueError(f"data.{name} must be ints in [0, {n_states}) for a tabular estimate")


def empirical_mdp(data: TransitionDataset, n_states: int, n_actions: int, start: np.ndarray) -> TabularMDP:
    """Count estimate ``P^(s' | s, a)`` from tabular transitions; an unseen ``(s, a)`` gets a uniform row.

    (As the PW-DICE tabular code does; rewards are zero and no transition is terminal.)
    """
    n_states, n_actions = check_int("n_states", n_states, 1), check_int("n_actions", n_actions, 1)
    if not isinstance(data, TransitionDataset):
        raise TypeError(f"data must be a TransitionDataset, got {type(data).__name__}")
    _check_tabular(data, n_states)
    if data.actions.ndim != 1 or data.actions.min() < 0 or data.actions.max() >= n_actions:
        raise ValueError(f"data.actions must be ints in [0, {n_actions})")
    counts = np.zeros((n_states, n_actions, n_states))
    np.add.at(counts, (data.states, data.actions, data.next_states), 1.0)
    tot = counts.sum(-1, keepdims=True)
    P = np.where(tot > 0, counts / np.maximum(tot, 1.0), 1.0 / n_states)
    zeros = np.zeros_like(P)
    return TabularMDP(P=P, R=zeros, terminal=zeros.astype(bool), start=np.asarray(start, dtype=np.float64))


def empirical_policy(data: TransitionDataset, n_states: int, n_actions: int) -> np.ndarray:
    """The behaviour policy ``pi_b(a | s)`` by counts ``(S, A)``; unseen states act uniformly."""
    n_states, n_actions = check_int("n_states", n_states, 1), check_int("n_actions", n_actions, 1)
    if not isinstance(data, TransitionDataset):
        raise TypeError(f"data must be a TransitionDataset, got {type(data).__name__}")
    _check_tabular(data, n_states)
    counts = np.zeros((n_states, n_actions))
    np.add.at(counts, (data.states, data.actions), 1.0)
    tot = counts.sum(-1, keepdims=True)
    return np.where(tot > 0, counts / np.maximum(tot, 1.0), 1.0 / n_actions)


def discounted_state_distribution(data: StateDataset | TransitionDataset, n_states: int, gamma: float) -> np.ndarray:
    """Empirical discounted state distribution: weight ``(1 - gamma) gamma^t`` per visited state, normalised.

    The expert occupancy estimate ``d_E`` of the PW-DICE tabular code (``TS_type = "full"``).
    """
    n_states = check_int("n_states", n_states, 1)
    gamma = check_gamma(gamma, allow_one=False)
    _check_tabular(data, n_states)
    w = (1.0 - gamma) * gamma ** data.steps.astype(np.float64)
    d = np.bincount(data.states, weights=w, minlength=n_states)
    return d / d.sum()
