"""Run an agent on an environment for many independent trials at once.

Mussi et al., *Factored-Reward Bandits with Intermediate Observations*, ICML 2024
(https://proceedings.mlr.press/v235/mussi24a.html): the experiments report the
expected (pseudo-)regret ``R_T = sum_t mu* - mu(a_t)`` averaged over independent trials. Here all trials advance
together: one round is one ``select`` / ``step`` / ``update`` over arrays with a leading trials axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import positive_int, seed_like
from .agents import FactoredAgent
from .environments import FactoredEnv


@dataclass(frozen=True)
class Simulation:
    """The outcome of :func:`simulate`.

    Attributes:
        regret: instantaneous pseudo-regret ``mu* - mu(a_t)``, shape (n_trials, horizon).
        means: the instances that were played, shape (n_trials, d, K).
        actions: the action vectors, shape (n_trials, horizon, d), when ``record_actions``; else ``None``.
    """

    regret: np.ndarray
    means: np.ndarray
    actions: np.ndarray | None = None

    @property
    def cumulative(self) -> np.ndarray:
        """Cumulative regret ``R_t``, shape (n_trials, horizon)."""
        return np.cumsum(self.regret, axis=1)

    @property
    def final(self) -> np.ndarray:
        """``R_T`` of every trial, shape (n_trials,)."""
        return self.regret.sum(axis=1)


def simulate(
    env: FactoredEnv,
    agent: FactoredAgent,
    horizon: int,
    n_trials: int,
    seed: int | np.random.Generator | None = None,
    record_actions: bool = False,
) -> Simulation:
    """Play ``agent`` on ``n_trials`` independent instances of ``env`` for ``horizon`` rounds.

    The environment is reset with ``seed`` (instances first, then one noise draw per round of fixed shape), so
    two agents simulated with the same seed face the same instances: comparisons are paired.
    """
    horizon = positive_int(horizon, "horizon")
    n_trials = positive_int(n_trials, "n_trials")
    if not isinstance(env, FactoredEnv):
        raise TypeError(f"env must be a FactoredEnv, got {type(env).__name__}")
    if not isinstance(agent, FactoredAgent):
        raise TypeError(f"agent must be a FactoredAgent, got {type(agent).__name__}")
    if (agent.n_arms, agent.n_factors) != (env.n_arms, env.n_factors):
        raise ValueError(
            f"agent has (n_arms, n_factors) = {(agent.n_arms, agent.n_factors)} but env has "
            f"{(env.n_arms, env.n_factors)}"
        )
    seed = seed_like(seed)
    if not isinstance(record_actions, (bool, np.bool_)):
        raise TypeError(f"record_actions must be a bool, got {record_actions!r}")
    env.reset(n_trials, seed)
    agent.reset(n_trials)
    best = env.optimal_reward()
    regret = np.empty((n_trials, horizon))
    actions_log = np.empty((n_trials, horizon, env.n_factors), dtype=np.intp) if record_actions else None
    for t in range(1, horizon + 1):  # the loop is over rounds only; trials are the arrays' first axis
        actions = agent._select(t)
        mu = env.arm_means(actions)  # validates the agent's actions once per round
        regret[:, t - 1] = best - mu.prod(axis=1)
        if actions_log is not None:
            actions_log[:, t - 1] = actions
        # The actions were just validated and the observations come from the env: skip update()'s checks.
        agent._update(actions, env.observe(mu))
    assert env.means_ is not None
    return Simulation(regret, env.means_.copy(), actions_log)
