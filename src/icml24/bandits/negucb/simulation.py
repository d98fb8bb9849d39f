"""Run a negotiator against a negotiation environment for many independent trials at once.

Li, Mu, Qi. *A Contextual Combinatorial Bandit Approach to Negotiation*. ICML 2024,
https://arxiv.org/abs/2407.00567: the paper measures cumulative regret and how good the deals are. Here all
trials advance together: one round is one ``select`` / ``step`` / ``update`` over arrays with a trials axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from .._checks import positive_int, seed_like
from .agents import NegotiationAgent
from .environment import NegotiationEnv


@dataclass(frozen=True)
class NegotiationRun:
    """The outcome of :func:`simulate`.

    Attributes:
        regret: per-round regret against the oracle that knows ``g``, shape (n_trials, horizon).
        reward: per-round realised reward ``U(S_t) y_t``, shape (n_trials, horizon).
        episodes: finished negotiations per trial (a deal or ``episode_length`` rejections).
        deals: negotiations that ended in a deal, per trial.
        deal_utility: the sum of own utility over the deals, per trial.
        expected_reward: per-round expected reward ``U(S_t) g_t(S_t)`` of the proposal, (n_trials, horizon); the
            common-reference regret of an agent is the oracle run's expected reward minus this, round by round.
        accept_probability: the opponent's true acceptance probability ``g_t(S_t)`` of each proposal,
            (n_trials, horizon).
    """

    regret: np.ndarray
    reward: np.ndarray
    episodes: np.ndarray
    deals: np.ndarray
    deal_utility: np.ndarray
    expected_reward: np.ndarray
    accept_probability: np.ndarray

    @property
    def cumulative(self) -> np.ndarray:
        """Cumulative regret ``R_t``, shape (n_trials, horizon)."""
        return np.cumsum(self.regret, axis=1)

    @property
    def final(self) -> np.ndarray:
        """``R_T`` per trial."""
        return self.regret.sum(axis=1)

    @property
    def agreement_rate(self) -> np.ndarray:
        """Deals per finished negotiation, per trial."""
        return self.deals / np.maximum(self.episodes, 1)

    @property
    def utility_per_negotiation(self) -> np.ndarray:
        """Mean own utility per finished negotiation (0 for one without a deal): the deal value, per trial."""
        return self.deal_utility / np.maximum(self.episodes, 1)

    @property
    def utility_per_deal(self) -> np.ndarray:
        """Mean own utility of the deals made (NaN for a trial without deals)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.deals > 0, self.deal_utility / self.deals, np.nan)


def simulate(
    env: NegotiationEnv,
    agent: NegotiationAgent,
    horizon: int,
    n_trials: int,
    seed: int | np.random.Generator | None = None,
) -> NegotiationRun:
    """Play ``agent`` on ``n_trials`` independent instances of ``env`` for ``horizon`` proposals.

    The environment is reset with ``seed`` (utilities, opponent streams and acceptance draws), so agents
    simulated with one seed meet the same opponents in the same order: comparisons are paired.
    """
    if not isinstance(env, NegotiationEnv):
        raise TypeError(f"env must be a NegotiationEnv, got {type(env).__name__}")
    if not isinstance(agent, NegotiationAgent):
        raise TypeError(f"agent must be a NegotiationAgent, got {type(agent).__name__}")
    horizon = positive_int(horizon, "horizon")
    n_trials = positive_int(n_trials, "n_trials")
    seed = seed_like(seed)
    obs = env.reset(n_trials, horizon, seed)
    agent.reset(env)
    regret = np.empty((n_trials, horizon))
    reward = np.empty((n_trials, horizon))
    expected = np.empty((n_trials, horizon))
    accept = np.empty((n_trials, horizon))
    # One BLAS thread: the per-round products are small (trials x candidates x features), where a thread pool
    # only adds overhead (100x slower on a loaded machine) and changes the last bits of reductions.
    with threadpool_limits(1):
        for t in range(horizon):  # the loop is over rounds only; trials are the arrays' first axis
            bids = agent.select(obs)
            accepted, reward[:, t], regret[:, t], nxt = env.step(bids)
            expected[:, t], accept[:, t] = env.expected_reward_, env.accept_probability_
            agent.update(obs, bids, accepted)
            obs = nxt
    return NegotiationRun(regret, reward, env.episodes_.copy(), env.deals_.copy(), env.deal_utility_.copy(), expected,
                          accept)  # fmt: skip
