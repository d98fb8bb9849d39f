"""A Contextual Combinatorial Bandit Approach to Negotiation (Li, Mu, Qi; ICML 2024).

PMLR 235:28448-28465, https://arxiv.org/abs/2407.00567 (no official code found). Negotiation as a contextual
combinatorial bandit: a bid is a super arm of base arms (issue values, item units, price levels), the context
is the negotiation state, the counterpart's hidden type is summarised by hidden-state features, and only the
accept/reject of each proposal is observed (full-bandit feedback). NegUCB learns the acceptance function by
kernel regression and proposes ``argmax_S U(S) clip(mu + beta sigma, 0, 1)``; everything runs many trials at
once::

    from icml24.bandits.negucb import MultiIssueDomain, NegotiationEnv, NegUCB, simulate
    env = NegotiationEnv(MultiIssueDomain(n_issues=3, n_values=4))
    run = simulate(env, NegUCB(), horizon=1000, n_trials=4, seed=0)
    run.final.mean(), run.utility_per_negotiation.mean()
"""

from .agents import (
    EpsilonGreedy,
    LinearUCB,
    NegotiationAgent,
    NegUCB,
    OracleBidder,
    RandomBidder,
    TimeDependentTactic,
)
from .domains import AllocationDomain, Domain, MultiIssueDomain, TradingDomain
from .environment import NegotiationEnv, Observation
from .model import (
    HiddenState,
    RandomFourierFeatures,
    RidgePosterior,
    kernel_ridge_posterior,
    median_lengthscale,
)
from .simulation import NegotiationRun, simulate

SLUG = "negucb"

__all__ = [
    "SLUG",
    "AllocationDomain",
    "Domain",
    "EpsilonGreedy",
    "HiddenState",
    "LinearUCB",
    "MultiIssueDomain",
    "NegUCB",
    "NegotiationAgent",
    "NegotiationEnv",
    "NegotiationRun",
    "Observation",
    "OracleBidder",
    "RandomBidder",
    "RandomFourierFeatures",
    "RidgePosterior",
    "TimeDependentTactic",
    "TradingDomain",
    "kernel_ridge_posterior",
    "median_lengthscale",
    "simulate",
]
