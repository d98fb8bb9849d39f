"""Factored-Reward Bandits with Intermediate Observations (Mussi, Drago, Restelli, Metelli; ICML 2024).

PMLR 235:36911-36952, https://proceedings.mlr.press/v235/mussi24a.html; official code github.com/marcomussi/FRB.

A learner picks one arm in each of ``d`` factors; each factor returns an intermediate observation and the reward
is their product. Learning every factor from its own observation (:class:`FUCB`) avoids the ``K^d`` flattened
arms and the heavy-tailed product; tracking the aligned lower-bound exploration (:class:`FTrack`) explores
suboptimal arms of different factors in the same rounds. Everything is vectorised over independent trials::

    from icml24.bandits.factored_reward_bandits import FactoredEnv, FUCB, simulate
    env = FactoredEnv(n_arms=3, n_factors=2, sigma=0.1)
    sim = simulate(env, FUCB(n_arms=3, n_factors=2, sigma=0.1), horizon=1000, n_trials=20, seed=0)
    sim.final.mean()   # mean R_T over the 20 trials
"""

from ..regret import loglog_slope
from .agents import FUCB, FactoredAgent, FlatMoMUCB, FlatUCB1, FTrack
from .environments import FactoredEnv, ParallelFactoredEnv, joint_actions, joint_index
from .lower_bound import ExplorationLP, aligned_schedule, exploration_lp, required_samples, schedule_cost
from .simulation import Simulation, simulate

SLUG = "factored-reward-bandits"

__all__ = [
    "SLUG",
    "ExplorationLP",
    "FTrack",
    "FUCB",
    "FactoredAgent",
    "FactoredEnv",
    "FlatMoMUCB",
    "FlatUCB1",
    "ParallelFactoredEnv",
    "Simulation",
    "aligned_schedule",
    "exploration_lp",
    "joint_actions",
    "joint_index",
    "loglog_slope",
    "required_samples",
    "schedule_cost",
    "simulate",
]
