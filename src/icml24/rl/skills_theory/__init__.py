"""When Do Skills Help Reinforcement Learning? A Theoretical Analysis of Temporal Abstractions
(Li, Poesia, Solar-Lezama; ICML 2024).

https://arxiv.org/abs/2406.07897 · official code https://github.com/uranium11010/rl-skill-theory

In deterministic sparse-reward MDPs the paper measures how hard a task is to learn (p-learning difficulty
``|A| E_p[d_A]``) and to explore (p-exploration difficulty ``E_p[-log q_eps]``), shows that these track the
sample complexity of RL, and bounds the best gain from skills by how compressible the optimal solutions are
(p-incompressibility). This package computes the measures exactly on full state tables (CliffWalking, a
CompILE-like grid, the 8-puzzle, the 2x2 cube), augments action spaces with macroactions and measures
tabular Q-learning's steps to solve.
"""

from icml24.rl.skills_theory.difficulty import (
    combined_difficulty,
    entropy,
    exploration_difficulty,
    exploration_probabilities,
    fit_combination_weight,
    goal_distances,
    incompressibility,
    learning_difficulty,
    mean_solution_length,
)
from icml24.rl.skills_theory.envs import (
    GoalTask,
    cliff_walking,
    compile_grid,
    eight_puzzle,
    make_task,
    permutation_rank,
    rubiks_cube_222,
)
from icml24.rl.skills_theory.learning import greedy_success_rate, steps_to_solve
from icml24.rl.skills_theory.macros import augment, random_macros

SLUG = "skills-theory"

__all__ = [
    "GoalTask",
    "SLUG",
    "augment",
    "cliff_walking",
    "combined_difficulty",
    "compile_grid",
    "eight_puzzle",
    "entropy",
    "exploration_difficulty",
    "exploration_probabilities",
    "fit_combination_weight",
    "goal_distances",
    "greedy_success_rate",
    "incompressibility",
    "learning_difficulty",
    "make_task",
    "mean_solution_length",
    "permutation_rank",
    "random_macros",
    "rubiks_cube_222",
    "steps_to_solve",
]
