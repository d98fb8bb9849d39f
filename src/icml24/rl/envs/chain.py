"""A large-action "needle" chain MDP and a Gymnasium env over any :class:`~icml24.rl.value.TabularMDP`.

The needle chain (our construction for the Stochastic Q-learning reproduction): states ``0..K-1``, ``n``
actions. In each state one hidden "needle" action advances to the next state (reward 0; from the last state
it ends the episode with reward ``goal_reward``); every other action stays put and pays a small fixed reward
``U(0, distractor_max)``. Finding the needles needs many distinct actions tried per state, so the exact
maximisation over ``n`` actions dominates the per-step cost of Q-learning.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from icml24.rl.value.tabular import TabularMDP


def needle_chain_mdp(
    *,
    n_states: int = 10,
    n_actions: int = 1024,
    goal_reward: float = 1.0,
    distractor_max: float = 0.01,
    seed: int = 0,
) -> TabularMDP:
    """The needle chain; the needles and distractor rewards are fixed by ``seed``."""
    if n_states < 1 or n_actions < 2:
        raise ValueError(f"need n_states >= 1 and n_actions >= 2, got {n_states}, {n_actions}")
    rng = np.random.default_rng(seed)
    S, A = n_states, n_actions
    needles = rng.integers(0, A, S)
    P = np.zeros((S, A, S))
    R = np.zeros((S, A, S))
    T = np.zeros((S, A, S), dtype=bool)
    small = rng.uniform(0, distractor_max, (S, A))
    s_idx = np.arange(S)
    P[s_idx, :, s_idx] = 1.0
    R[s_idx, :, s_idx] = small
    P[s_idx, needles, s_idx] = 0.0
    R[s_idx, needles, s_idx] = 0.0
    nxt = np.minimum(s_idx + 1, S - 1)
    P[s_idx, needles, nxt] = 1.0
    R[S - 1, needles[S - 1], S - 1] = goal_reward
    T[S - 1, needles[S - 1], S - 1] = True
    start = np.zeros(S)
    start[0] = 1.0
    return TabularMDP(P=P, R=R, terminal=T, start=start)


class TabularMDPEnv(gym.Env):
    """A Gymnasium env sampling a :class:`TabularMDP` (Discrete observations and actions).

    ``terminated`` when a terminal transition is taken; ``truncated`` after ``max_episode_steps``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, mdp: TabularMDP, *, max_episode_steps: int = 100) -> None:
        self.mdp = mdp
        self.max_episode_steps = int(max_episode_steps)
        self.observation_space = gym.spaces.Discrete(mdp.n_states)
        self.action_space = gym.spaces.Discrete(mdp.n_actions)
        self._s = 0
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self._s = int(self.np_random.choice(self.mdp.n_states, p=self.mdp.start))
        self._t = 0
        return self._s, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in Discrete({self.mdp.n_actions}), got {action!r}")
        s2, r, term = self.mdp.step(np.array([self._s]), np.array([int(action)]), self.np_random)
        self._s = int(s2[0])
        self._t += 1
        return (
            self._s,
            float(r[0]),
            bool(term[0]),
            self._t >= self.max_episode_steps and not bool(term[0]),
            {},
        )


def garnet_mdp(
    *, n_states: int = 10, n_actions: int = 1024, branching: int = 2, reward_power: float = 4.0, seed: int = 0
) -> TabularMDP:
    """A random "Garnet" MDP with many actions: each ``(s, a)`` leads to ``branching`` random next states with
    random probabilities and pays ``U(0, 1) ** reward_power`` (skewed: good actions are rare). Continuing
    (no terminal transitions); start state 0."""
    if n_states < 1 or n_actions < 1 or not 1 <= branching <= n_states:
        raise ValueError(
            f"need n_states, n_actions >= 1 and 1 <= branching <= n_states, got "
            f"{n_states}, {n_actions}, {branching}"
        )
    rng = np.random.default_rng(seed)
    S, A = n_states, n_actions
    nxt = np.argsort(rng.random((S, A, S)), axis=-1)[..., :branching]
    probs = rng.dirichlet(np.ones(branching), size=(S, A))
    P = np.zeros((S, A, S))
    np.put_along_axis(P, nxt, probs, axis=-1)
    R = np.broadcast_to((rng.random((S, A)) ** reward_power)[..., None], (S, A, S)).copy()
    start = np.zeros(S)
    start[0] = 1.0
    return TabularMDP(P=P, R=R, terminal=np.zeros((S, A, S), dtype=bool), start=start)
