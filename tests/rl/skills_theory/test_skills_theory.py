"""skills-theory: environments (pinned sizes and diameters), the difficulty measures and their invariants,
macroaction augmentation, value iteration and Q-learning on the deterministic goal MDPs."""

from collections import deque

import numpy as np
import pytest

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
    all_permutations,
    cliff_walking,
    compile_grid,
    eight_puzzle,
    permutation_rank,
)
from icml24.rl.skills_theory.learning import greedy_success_rate, steps_to_solve
from icml24.rl.skills_theory.macros import augment, random_macros
from icml24.rl.value.tabular import DeterministicMDP, QLearningConfig, value_iteration


@pytest.fixture(scope="module")
def puzzle():
    return eight_puzzle()


def naive_distances(T, goal):
    """Reference: BFS over an explicit inverse adjacency list, one state at a time."""
    preds = [[] for _ in range(T.shape[0])]
    for s in range(T.shape[0]):
        for s2 in T[s]:
            preds[s2].append(s)
    dist = np.full(T.shape[0], np.inf)
    dist[goal] = 0
    queue = deque([goal])
    while queue:
        u = queue.popleft()
        for v in preds[u]:
            if dist[v] == np.inf:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def test_cliff_matches_gymnasium_toy_text():
    gym = pytest.importorskip("gymnasium")
    env = gym.make("CliffWalking-v1" if "CliffWalking-v1" in gym.registry else "CliffWalking-v0").unwrapped
    task = cliff_walking()
    for s in range(48):
        if s == task.goal:
            continue
        for a in range(4):
            (_, s2, _, _), = env.P[s][a]
            assert task.next_state[s, a] == s2, (s, a)
    d = goal_distances(task.next_state, task.goal)
    assert d[36] == 13 and d.max() == 14  # up, 11 x right, down; the far corner is one further


def test_vectorised_bfs_matches_naive_on_compile():
    task = compile_grid(seed=3)
    np.testing.assert_array_equal(goal_distances(task.next_state, task.goal), naive_distances(task.next_state, task.goal))
    support = task.start > 0
    assert np.isclose(task.start.sum(), 1) and np.all(np.isfinite(goal_distances(task.next_state, task.goal)[support]))


def test_permutation_rank_is_lexicographic():
    perms = all_permutations(5)
    np.testing.assert_array_equal(permutation_rank(perms), np.arange(120))


def test_eight_puzzle_pinned(puzzle):
    assert puzzle.n_states == 181_440
    d = goal_distances(puzzle.next_state, puzzle.goal)
    assert d.max() == 31 and (d == 31).sum() == 2  # the two hardest boards (known)
    assert np.isclose(puzzle.start.sum(), 1) and puzzle.start[puzzle.goal] == 0
    # every state is reachable and every move is reversible: blank up then down returns (where both legal)
    T = puzzle.next_state
    s = np.arange(puzzle.n_states)
    moved = T[:, 0] != s
    np.testing.assert_array_equal(T[T[moved, 0], 2], s[moved])


def test_value_iteration_exact_after_max_distance_sweeps():
    task = compile_grid(seed=1)
    mdp = task.mdp(task.hand_picked[1])
    d = goal_distances(mdp.next_state, task.goal)
    D = int(d[np.isfinite(d)].max())
    gamma = 0.9
    Q, sweeps = value_iteration(mdp, gamma, tol=1e-12, return_sweeps=True)
    assert sweeps == D + 2  # V exact after D sweeps, all of Q after D + 1; the (D+2)-th changes nothing
    v_true = np.where(np.isfinite(d), gamma ** (d - 1), 0.0)
    v_true[task.goal] = 1.0  # the goal's own (bookkeeping) transitions count as entering it
    Q_D = value_iteration(mdp, gamma, tol=0.0, max_iter=D)
    np.testing.assert_allclose(Q_D.max(1), v_true, atol=1e-12)
    Q_short = value_iteration(mdp, gamma, tol=0.0, max_iter=D - 1)
    assert np.abs(Q_short.max(1) - v_true).max() > 1e-3


def test_deterministic_mdp_matches_dense_form():
    task = cliff_walking()
    mdp = task.mdp(((1, 1),))
    Q_sparse = value_iteration(mdp, 0.95)
    Q_dense = value_iteration(mdp.to_tabular(), 0.95)
    np.testing.assert_allclose(Q_sparse, Q_dense, atol=1e-9)
    with pytest.raises(ValueError, match="next_state"):
        DeterministicMDP.goal_reaching(np.array([[0, 5]]), 0, np.array([1.0]))


def test_macroactions_never_lengthen_solutions():
    rng = np.random.default_rng(0)
    for task in (cliff_walking(), compile_grid(seed=2)):
        d0 = goal_distances(task.next_state, task.goal)
        for _ in range(5):
            ms = random_macros(rng, 3, action_weights=task.macro_action_weights, mean_length=task.mean_macro_length)
            T = augment(task.next_state, ms)
            assert T.shape[1] == task.n_actions + 3
            assert np.all(goal_distances(T, task.goal) <= d0)


def test_duplicate_primitive_changes_only_action_count():
    task = compile_grid(seed=1)
    d0 = goal_distances(task.next_state, task.goal)
    T = augment(task.next_state, [(2,)])
    d1 = goal_distances(T, task.goal)
    np.testing.assert_array_equal(d0, d1)
    A = task.n_actions
    assert np.isclose(learning_difficulty(A + 1, d1, task.start), learning_difficulty(A, d0, task.start) * (A + 1) / A)


def test_macro_stops_at_goal():
    task = cliff_walking()
    T = augment(task.next_state, [(1, 1, 1)])
    assert T[46, 4] == task.goal  # one step right reaches the goal; the rest of the macro is not executed


def test_exploration_probability_invariants():
    task = cliff_walking()
    qs = [exploration_probabilities(task.next_state, task.goal, eps) for eps in (0.0001, 0.01, 0.02, 0.1)]
    for q in qs:
        assert q[task.goal] == 1 and np.all((q >= 0) & (q <= 1))
    for lo, hi in zip(qs, qs[1:]):
        assert np.all(hi <= lo + 1e-12)  # non-increasing in eps
    assert exploration_difficulty(qs[2], task.start) > 0
    at_goal = np.zeros(task.n_states)
    at_goal[task.goal] = 1
    assert exploration_difficulty(qs[2], at_goal) == 0
    q_tiny = exploration_probabilities(task.next_state, task.goal, 1e-7, rtol=1e-9)
    assert q_tiny.min() > 0.99  # connected graph: reaching the goal is almost sure as eps -> 0


def test_exploration_probability_closed_form_on_a_chain():
    # chain 0 <- 1 <- 2 with actions {left, stay}: q(1) = (1-e)/2 (1 + q(1)) => q(1) = (1-e)/(1+e)
    T = np.array([[0, 0], [0, 1], [1, 2]])
    e = 0.1
    q = exploration_probabilities(T, 0, e, rtol=1e-14)
    q1 = (1 - e) / (1 + e)
    np.testing.assert_allclose(q[1], q1, rtol=1e-10)
    np.testing.assert_allclose(q[2], (1 - e) / 2 * q1 / (1 - (1 - e) / 2), rtol=1e-10)


def test_incompressibility():
    assert incompressibility(0.0, 13.0, 4) == 0.0
    # brute force over a fine eps grid
    H, D, A = 5.0, 7.0, 5
    eps = np.linspace(1e-6, 1 - 1e-6, 200_001)
    brute = np.max((H - np.log((1 - eps) / eps)) / (D * np.log(A / (1 - eps))))
    assert abs(incompressibility(H, D, A) - brute) < 1e-6
    assert incompressibility(6.0, D, A) > incompressibility(H, D, A) > incompressibility(H, 2 * D, A)
    p = np.full(8, 1 / 8)
    assert np.isclose(entropy(p), np.log(8))


def test_incompressibility_limit_at_small_entropy():
    """Issue 39: I_p jumps from 0 at H = 0 to about 1/E[d] at H = 1e-6. For 0 < H <= log|A| the ratio stays
    below 1/E[d] at every eps (brute force) and tends to it as eps -> 1: the supremum is that boundary limit, and
    the grid returns its value at logit 30, a few per cent below it; above log|A| an interior maximum exceeds it
    and falls continuously to it; H = 0 keeps the official code's 0 (documented jump)."""
    D, A = 9.48, 4
    eps = 1 - np.logspace(-12, -1e-9, 400_001)  # eps from 1 - 1e-12 to nearly 0
    for H in (1e-6, 0.3, np.log(A)):
        brute = (H - np.log((1 - eps) / eps)) / (D * np.log(A / (1 - eps)))
        assert brute.max() < 1 / D and brute.argmax() == 0  # below the limit, largest nearest eps = 1
        far = (H + 1e8) / (D * (np.log(A) + np.logaddexp(0.0, 1e8)))  # logit(eps) = 1e8: the slow log approach
        assert far <= 1 / D and far == pytest.approx(1 / D, rel=1e-7)  # the supremum is the eps -> 1 limit
        grid_end = (H + 30.0) / (D * (np.log(A) + np.logaddexp(0.0, 30.0)))
        assert incompressibility(H, D, A) == pytest.approx(grid_end, rel=1e-9)
        assert 0.95 / D < incompressibility(H, D, A) < 1 / D
    assert incompressibility(0.0, D, A) == 0.0  # the official convention (CliffWalking), a jump at 0
    hs = np.linspace(1e-9, np.log(A) + 2.0, 2001)
    vals = np.array([incompressibility(h, D, A) for h in hs])
    assert np.all(np.diff(vals) >= -1e-12) and np.max(np.abs(np.diff(vals))) < 1e-3  # monotone, no jump on H > 0
    # the order of the paper's environments does not depend on the H = 0 convention: CliffWalking's limit
    # 1/13 is below CompILE2's interior value
    assert 1 / 13.0 < 0.130


def test_combined_difficulty_and_weight_fit():
    jl = np.array([10.0, 20.0, 40.0, 15.0, 30.0])
    je = np.array([2.0, 1.0, 4.0, 3.0, 2.5])
    np.testing.assert_allclose(combined_difficulty(jl, je, 1.0), np.log(jl))
    np.testing.assert_allclose(combined_difficulty(jl, je, 0.0), je)
    np.testing.assert_allclose(combined_difficulty(jl, je, 0.5), np.log(0.5 * jl + 0.5 * np.exp(je)))
    y = combined_difficulty(jl, je, 0.3) * 2 + 1
    lam, r = fit_combination_weight(jl, je, y)
    assert r > 0.9999 and abs(lam - 0.3) < 0.02
    assert np.isfinite(combined_difficulty(np.array([5.0]), np.array([800.0]), 0.5)).all()


def test_learning_difficulty_needs_solvable_start():
    T = np.array([[0, 0], [1, 1]])
    d = goal_distances(T, 0)
    with pytest.raises(ValueError, match="unreachable"):
        mean_solution_length(d, np.array([0.0, 1.0]))


def test_q_learning_on_deterministic_mdp_solves_cliff_with_the_full_solution_macro():
    task = cliff_walking()
    mdp = task.mdp(task.hand_picked[2])  # the optimal 13-step solution as one macroaction
    cfg = QLearningConfig(gamma=0.99, alpha=0.1, epsilon=0.1, horizon=100)
    out = steps_to_solve(mdp, config=cfg, n_runs=3, budget=20_000, eval_every=200, seed=0)
    assert np.all(np.isfinite(out["steps"])) and np.all(out["final_success"] >= 0.95)
    Q_star = value_iteration(mdp, 0.99)
    assert greedy_success_rate(mdp, Q_star, 100) == 1.0
    assert greedy_success_rate(mdp, np.zeros((2, mdp.n_states, mdp.n_actions)), 100).tolist() == [0.0, 0.0]


def test_random_macros_lengths_and_distinct():
    rng = np.random.default_rng(1)
    weights = ((1.0, (0, 1, 2, 3), (0.25, 0.25, 0.25, 0.25)),)
    ms = random_macros(rng, 200, action_weights=weights, mean_length=4.0)
    assert len(set(ms)) == 200 and min(map(len, ms)) >= 2
    one_each = [len(random_macros(rng, 1, action_weights=weights, mean_length=4.0)[0]) for _ in range(4000)]
    assert abs(np.mean(one_each) - 4.0) < 0.15  # 1 + Geometric(1/3): mean 4


@pytest.mark.slow
def test_cube_pinned():
    from icml24.rl.skills_theory.envs import rubiks_cube_222

    cube = rubiks_cube_222()
    assert cube.n_states == 3_674_160 == 5040 * 729
    d = goal_distances(cube.next_state, cube.goal)
    assert np.all(np.isfinite(d))  # F, R, U generate the whole group with DBL fixed
    # 11 in the half-turn metric; with clockwise quarter turns only (the official action space) it is 19
    assert d.max() == 19
    T = cube.next_state.astype(np.int64)
    s = np.arange(cube.n_states)
    for a in range(3):
        np.testing.assert_array_equal(T[T[T[T[s, a], a], a], a], s)  # a quarter turn has order 4
    assert np.isclose(cube.start.sum(), 1) and cube.start[cube.goal] == 0


def test_deterministic_reset_samples_the_start_distribution():
    task = compile_grid(seed=1)
    mdp = task.mdp()
    draws = mdp.reset(200_000, np.random.default_rng(0))
    assert set(np.unique(draws)) <= set(np.flatnonzero(task.start))
    freq = np.bincount(draws, minlength=task.n_states)[task.start > 0] / draws.size
    p = task.start[task.start > 0]
    assert np.max(np.abs(freq - p) / np.sqrt(p * (1 - p) / draws.size)) < 5  # within 5 standard errors
