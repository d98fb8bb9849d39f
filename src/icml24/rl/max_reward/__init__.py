"""To the Max: Reinventing Reward in Reinforcement Learning (Veviurko, Böhmer, de Weerdt; ICML 2024).

https://arxiv.org/abs/2402.01361 · official code https://github.com/veviurko/To-the-Max

Optimise ``E[max_t gamma^t r_t]`` instead of the discounted sum, with the state augmented by the running
maximum ``y`` so that the Bellman recursion is right for stochastic environments:
``Q(s, y, a) = E[terminated ? max(y, r) : gamma max(y', V(s', y'))]``, ``y' = max(y, r) / gamma``.
Exact DP and tabular Q-learning over ``(s, y)`` (:mod:`.bellman`, :mod:`.tabular`) and max-TD3 (:mod:`.deep`).
"""

from icml24.rl.max_reward.bellman import (
    Outcomes,
    YGrid,
    augmented_backup,
    check_reward_bounds,
    cumulative_value_iteration,
    max_returns,
    max_reward_value_iteration,
    maxdet_value_iteration,
    rollout,
    stochastic_counterexample,
    y_grid,
)
from icml24.rl.max_reward.deep import MaxTD3Agent, evaluate_greedy, train_td3_vec
from icml24.rl.max_reward.tabular import episodes_to_success, maze_q_learning

SLUG = "max-reward-rl"

__all__ = [
    "SLUG",
    "MaxTD3Agent",
    "Outcomes",
    "YGrid",
    "augmented_backup",
    "check_reward_bounds",
    "cumulative_value_iteration",
    "episodes_to_success",
    "evaluate_greedy",
    "max_returns",
    "max_reward_value_iteration",
    "maxdet_value_iteration",
    "maze_q_learning",
    "rollout",
    "stochastic_counterexample",
    "train_td3_vec",
    "y_grid",
]
