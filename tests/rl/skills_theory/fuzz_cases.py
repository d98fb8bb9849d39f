"""Fuzz cases for skills-theory's exported callables (driven by tests/test_fuzz_api.py)."""

import numpy as np

from icml24.rl.skills_theory import (
    GoalTask,
    augment,
    cliff_walking,
    combined_difficulty,
    compile_grid,
    eight_puzzle,
    entropy,
    exploration_difficulty,
    exploration_probabilities,
    fit_combination_weight,
    goal_distances,
    greedy_success_rate,
    incompressibility,
    learning_difficulty,
    make_task,
    mean_solution_length,
    permutation_rank,
    random_macros,
    rubiks_cube_222,
    steps_to_solve,
)
from icml24.rl.value import DeterministicMDP, QLearningConfig

CLIFF = cliff_walking()
T = CLIFF.next_state
D = goal_distances(T, CLIFF.goal)
Q_EPS = exploration_probabilities(T, CLIFF.goal, 0.02)
MDP = CLIFF.mdp(((1, 1),))
START = CLIFF.start
JL = np.array([10.0, 20.0, 40.0, 15.0])
JE = np.array([2.0, 1.0, 4.0, 3.0])
Y = np.array([1.0, 2.0, 4.0, 2.5])
W = ((1.0, (0, 1), (0.5, 0.5)),)
CFG = QLearningConfig(gamma=0.99, alpha=0.1, epsilon=0.1, horizon=30)
BAD_TABLE = [np.array([[0, 1], [2, 0]]), np.zeros((3, 2)), [[0, 1]], np.zeros((0, 2), dtype=int), None]

FUZZ_CASES = [
    dict(fn=goal_distances, args=(T, CLIFF.goal),
         invalid={"next_state": BAD_TABLE, "goal": [-1, 48, 1.5, "0", True]}),
    dict(fn=mean_solution_length, args=(D, START),
         invalid={"distances": [D[:3], np.full(48, -1.0), "d"], "start": [START[:3], -START, np.ones(48), [1.0]]},
         allowed={"distances": "inf marks states that cannot reach the goal"}),
    dict(fn=learning_difficulty, args=(4, D, START), invalid={"n_actions": [0, -1, 2.5, None]},
         allowed={"distances": "inf marks states that cannot reach the goal"}),
    dict(fn=exploration_probabilities, args=(T, CLIFF.goal, 0.02),
         invalid={"next_state": BAD_TABLE, "goal": [-1, 99], "epsilon": [-0.1, 1.0, 2.0, "x"],
                  "rtol": [0.0, -1.0, 2.0]}),
    dict(fn=exploration_difficulty, args=(Q_EPS, START),
         invalid={"q": [Q_EPS[:3], Q_EPS * 2, [0.5]], "start": [START[:2], -START]}),
    dict(fn=entropy, args=(np.full(4, 0.25),), invalid={"p": [np.ones(4), np.array([-0.5, 1.5]), [0.5, 0.5]]}),
    dict(fn=incompressibility, args=(5.0, 7.0, 5),
         invalid={"start_entropy": [-1.0, "x"], "mean_length": [0.0, -2.0], "n_actions": [1, 0, 2.5]}),
    dict(fn=combined_difficulty, args=(JL, JE, 0.5),
         invalid={"j_learn": [-JL, JL[:2]], "j_explore": [JE[:2], -JE], "weight": [-0.1, 1.5, "a"]}),
    dict(fn=fit_combination_weight, args=(JL, JE, Y),
         invalid={"j_learn": [JL[:2], -JL], "j_explore": [JE[:3]], "log_steps": [Y[:3], Y[:2]]}),
    dict(fn=augment, args=(T, ((1, 1), (0,))),
         invalid={"next_state": BAD_TABLE, "macros": [((),), ((5,),), "ab", ((1.5,),), 3]}),
    dict(fn=random_macros, args=(np.random.default_rng(0), 3), kwargs={"action_weights": W, "mean_length": 3.0},
         invalid={"rng": [0, None], "n_macros": [-1, 1.5], "mean_length": [2.0, 1.0, "3"],
                  "action_weights": [(), ((0.5, (0, 1), (0.5, 0.5)),)]}),
    dict(fn=permutation_rank, args=(np.array([[0, 1, 2], [2, 1, 0]]),), invalid={"perms": [np.arange(3)]}),
    dict(fn=compile_grid, kwargs={"seed": 0, "size": 6, "n_objects": 2, "visit_length": 1},
         invalid={"seed": [-1, 1.5], "size": [2, "10"], "n_objects": [0, 99], "visit_length": [0, 5],
                  "n_colours": [0]}),
    dict(fn=make_task, args=("cliff",), invalid={"name": ["maze", 3, None]}),
    dict(fn=greedy_success_rate, args=(MDP, np.zeros((48, 5)), 20),
         invalid={"mdp": [None, T], "Q": [np.zeros((48, 4)), [[0.0]], np.zeros(5)], "horizon": [0, -1, 2.5]}),
    dict(fn=steps_to_solve, args=(MDP,),
         kwargs={"config": CFG, "n_runs": 1, "budget": 200, "eval_every": 100, "seed": 0},
         invalid={"mdp": [None], "config": [None, {}], "n_runs": [0, 1.5], "budget": [0, -5], "eval_every": [0],
                  "seed": [-1], "threshold": [0.0, 1.5, "x"]}),
    dict(fn=DeterministicMDP.goal_reaching, args=(T, CLIFF.goal, START),
         invalid={"next_state": [np.array([[0, 5]]), np.zeros((2, 2))], "goal": [99, -1, 1.5, np.array([], dtype=int)],
                  "start": [START[:3], -START]}),
]

EXEMPT = {
    "cliff_walking": "takes no arguments (a fixed 4x12 table)",
    "eight_puzzle": "takes no arguments (the fixed 8-puzzle table)",
    "rubiks_cube_222": "takes no arguments (the fixed 2x2 cube table; 5 s to build)",
    "GoalTask": "a frozen record of tables built by the environment functions above, which check their inputs",
}

_ = (GoalTask, eight_puzzle, rubiks_cube_222)
