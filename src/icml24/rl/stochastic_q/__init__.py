"""Stochastic Q-learning for Large Discrete Action Spaces (Fourati, Aggarwal, Alouini; ICML 2024).

https://arxiv.org/abs/2405.10310 · official code https://github.com/fouratifares/stochdqn

Replace ``max_{b in A} Q(s, b)`` (``n`` evaluations) by the max over a random ``ceil(log2 n)``-subset plus a
small memory of good actions, in both the Bellman target and the greedy action: Stochastic (Double)
Q-learning, StochDQN and StochDDQN.
"""

from icml24.rl.stochastic_q.agents import (
    METHODS_DEEP,
    METHODS_TABULAR,
    make_dqn_agent,
    run_tabular,
    stochastic_q_learning,
)
from icml24.rl.stochastic_q.stoch_max import (
    StochasticCandidates,
    StochasticMaximizer,
    candidate_size,
    p_argmax_in_random_set,
    p_top_m_in_random_set,
    sample_without_replacement,
    stochastic_max,
)

SLUG = "stochastic-q"

__all__ = [
    "METHODS_DEEP",
    "METHODS_TABULAR",
    "SLUG",
    "StochasticCandidates",
    "StochasticMaximizer",
    "candidate_size",
    "make_dqn_agent",
    "p_argmax_in_random_set",
    "p_top_m_in_random_set",
    "run_tabular",
    "sample_without_replacement",
    "stochastic_max",
    "stochastic_q_learning",
]
