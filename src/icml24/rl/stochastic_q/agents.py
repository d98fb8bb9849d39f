"""Stochastic (Double) Q-learning and StochDQN / StochDDQN on the shared value-based machinery.

Fourati, Aggarwal, Alouini. "Stochastic Q-learning for Large Discrete Action Spaces". ICML 2024,
https://arxiv.org/abs/2405.10310.

Stochastic Q-learning (Algorithm 1 of the paper) is Watkins' Q-learning with both maximisations replaced by
the stochastic max of :mod:`.stoch_max`:

    Q(s, a) <- Q(s, a) + alpha [ r + gamma (1 - terminated) stoch_max_b Q(s', b) - Q(s, a) ],

acting epsilon-greedily around ``stoch_argmax_b Q(s, b)``. Stochastic Double Q-learning keeps two tables and
updates one with the other's value at its own stochastic argmax. StochDQN/StochDDQN are DQN/DDQN whose target
max (DDQN: the online network's argmax) and greedy action range over ``C = R u M``. With ``k >= n`` every one
of them *is* its exact counterpart, computed by the same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml24.rl.stochastic_q.stoch_max import StochasticCandidates, StochasticMaximizer
from icml24.rl.value.dqn import AllActions, DQNAgent, DQNConfig
from icml24.rl.value.tabular import QLearningConfig, TabularMDP, exact_max, q_learning

METHODS_TABULAR = ("q_learning", "double_q_learning", "stoch_q_learning", "stoch_double_q_learning")
METHODS_DEEP = ("dqn", "ddqn", "stochdqn", "stochddqn")


def stochastic_q_learning(
    mdp: TabularMDP,
    *,
    config: QLearningConfig = QLearningConfig(),  # noqa: B008 - frozen dataclass
    n_runs: int = 1,
    steps: int,
    seed: int,
    k: int | None = None,
    use_memory: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """Stochastic (Double, with ``config.double``) Q-learning: ``n_runs`` independent learners in lock-step.

    ``k`` is ``|R|`` (default ``ceil(log2 n)``); the memory holds each state's previous stochastic argmax.
    Other keyword arguments go to :func:`icml24.rl.value.q_learning`.
    """
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    maximizer = StochasticMaximizer(n_runs=n_runs, n_states=mdp.n_states, k=k, use_memory=use_memory)
    return q_learning(mdp, config=config, n_runs=n_runs, steps=steps, seed=seed, maximizer=maximizer, **kwargs)


def run_tabular(method: str, mdp: TabularMDP, *, config: QLearningConfig, k: int | None = None, **kw: Any) -> dict:
    """One of :data:`METHODS_TABULAR` by name (the exact ones use the same loop with the exact max)."""
    if method not in METHODS_TABULAR:
        raise ValueError(f"method must be one of {METHODS_TABULAR}, got {method!r}")
    if not isinstance(config, QLearningConfig):
        raise TypeError(f"config must be a QLearningConfig, got {type(config).__name__}")
    cfg = QLearningConfig(**{**config.__dict__, "double": "double" in method})
    if method.startswith("stoch"):
        return stochastic_q_learning(mdp, config=cfg, k=k, **kw)
    return q_learning(mdp, config=cfg, maximizer=exact_max, **kw)


def make_dqn_agent(
    method: str,
    *,
    obs_dim: int,
    action_table: np.ndarray | int,
    config: DQNConfig = DQNConfig(),  # noqa: B008 - frozen dataclass
    k: int | None = None,
    memory: str = "batch",
    seed: int = 0,
) -> DQNAgent:
    """DQN, DDQN, StochDQN or StochDDQN (:data:`METHODS_DEEP`) with the same network and config."""
    if method not in METHODS_DEEP:
        raise ValueError(f"method must be one of {METHODS_DEEP}, got {method!r}")
    if not isinstance(config, DQNConfig):
        raise TypeError(f"config must be a DQNConfig, got {type(config).__name__}")
    cfg = DQNConfig(**{**config.__dict__, "double": method.endswith("ddqn")})
    sampler = StochasticCandidates(k, memory) if method.startswith("stoch") else AllActions()
    return DQNAgent(obs_dim=obs_dim, action_table=action_table, config=cfg, candidates=sampler, seed=seed)
