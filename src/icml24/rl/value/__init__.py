"""Shared value-based RL machinery: replay buffer, Q-networks over (discretised) actions, DQN/Double DQN over a
candidate set of actions, TD3, tabular MDPs with exact DP and batched tabular (Double) Q-learning.

Used by :mod:`icml24.rl.stochastic_q` (Stochastic Q-learning, ICML 2024) and :mod:`icml24.rl.max_reward`
(To the Max, ICML 2024) and :mod:`icml24.rl.skills_theory` (When Do Skills Help RL?, ICML 2024).
"""

from icml24.rl.value.dqn import AllActions, CandidateSampler, DQNAgent, DQNConfig, default_batch_size
from icml24.rl.value.loops import train_dqn
from icml24.rl.value.networks import ActionGrid, StateActionQNetwork, StateQNetwork, mlp
from icml24.rl.value.replay import ReplayBuffer
from icml24.rl.value.tabular import (
    DeterministicMDP,
    QLearningConfig,
    TabularMDP,
    bellman_optimality,
    check_gamma,
    exact_max,
    mdp_from_toy_text,
    policy_evaluation,
    q_learning,
    q_learning_gym,
    value_iteration,
)
from icml24.rl.value.td3 import TD3Agent, TD3Config, random_actions

__all__ = [
    "ActionGrid",
    "AllActions",
    "CandidateSampler",
    "DQNAgent",
    "DQNConfig",
    "DeterministicMDP",
    "QLearningConfig",
    "ReplayBuffer",
    "StateActionQNetwork",
    "StateQNetwork",
    "TD3Agent",
    "TD3Config",
    "TabularMDP",
    "bellman_optimality",
    "check_gamma",
    "default_batch_size",
    "exact_max",
    "mdp_from_toy_text",
    "mlp",
    "policy_evaluation",
    "q_learning",
    "q_learning_gym",
    "random_actions",
    "train_dqn",
    "value_iteration",
]
