"""The search environment and the searches: Gymnasium's env checker, the env against a live forward pass,
the random-search limit (uniform visitation; failure counts converge to the landscape), the DQN agent
with epsilon = 1 is random search, determinism, the epsilon-greedy bandit's exploitation, and the metrics
on a hand-made trace."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from scipy import stats

from icml24.evaluation.failure_landscape import (
    DQNSearchConfig,
    FailureLandscape,
    FailureSearchEnv,
    SearchTrace,
    apply_concepts,
    dqn_search,
    epsilon_greedy_search,
    failure_reward,
    linear_epsilon,
    predict_proba,
    random_search,
    search_metrics,
)

from .conftest import SMALL_GRID


def test_env_passes_the_gymnasium_checker(small_landscape):
    check_env(FailureSearchEnv(small_landscape), skip_render_check=True)


def test_env_answers_as_a_live_forward_pass(trained, small_landscape):
    model, images, labels = trained
    env = FailureSearchEnv(small_landscape)
    obs, info = env.reset(seed=3)
    for cell in (0, 5, SMALL_GRID.n_cells - 1):
        obs, info = env.reset()
        i = info["image"]
        np.testing.assert_array_equal(obs, images[i].reshape(-1))
        _, reward, terminated, truncated, info = env.step(cell)
        x = apply_concepts(torch.as_tensor(images[i : i + 1]), SMALL_GRID.values(np.array([cell])))
        r, f = failure_reward(predict_proba(model, x), labels[i : i + 1])
        assert terminated and not truncated and info["failed"] == bool(f[0])
        assert reward == pytest.approx(r[0], rel=1e-4, abs=1e-4)
    with pytest.raises(ValueError, match="action"):
        env.reset()
        env.step(SMALL_GRID.n_cells)


def test_random_search_visits_uniformly_and_its_counts_converge_to_the_landscape(small_landscape):
    n = SMALL_GRID.n_cells
    trace = random_search(FailureSearchEnv(small_landscape), 12_000, seed=1)
    visits = trace.visitation(n)
    assert stats.chisquare(visits).pvalue > 1e-3
    # law of large numbers: failures / visits -> the exhaustive failure rate (binomial standard error bound)
    est = trace.failure_counts(n) / visits
    se = np.sqrt(np.maximum(small_landscape.failure_rate * (1 - small_landscape.failure_rate), 1e-4) / visits)
    assert np.all(np.abs(est - small_landscape.failure_rate) < 4.5 * se + 1e-9)


def test_dqn_with_epsilon_one_is_random_search(small_landscape):
    cfg = DQNSearchConfig(epsilon_start=1.0, epsilon_final=1.0)
    trace = dqn_search(FailureSearchEnv(small_landscape), 3000, config=cfg, seed=0)
    assert stats.chisquare(trace.visitation(SMALL_GRID.n_cells)).pvalue > 1e-3


def test_dqn_search_is_deterministic_and_learns_to_prefer_failing_cells(small_landscape):
    env = FailureSearchEnv(small_landscape)
    cfg = DQNSearchConfig(epsilon_final=0.2)
    a = dqn_search(env, 1500, config=cfg, seed=4)
    b = dqn_search(FailureSearchEnv(small_landscape), 1500, config=cfg, seed=4)
    np.testing.assert_array_equal(a.cells, b.cells)
    np.testing.assert_array_equal(a.images, b.images)
    # once it exploits, its queries fail more often than uniform queries would
    late = a.failed[750:].mean()
    assert late > small_landscape.failure_rate.mean() + 0.05


def test_epsilon_greedy_without_exploration_exploits_a_failing_cell(small_landscape):
    trace = epsilon_greedy_search(FailureSearchEnv(small_landscape), 2000, epsilon=0.0, seed=0)
    top = np.bincount(trace.cells, minlength=SMALL_GRID.n_cells).argmax()
    assert small_landscape.failure_rate[top] >= np.sort(small_landscape.failure_rate)[-3] - 0.05
    assert trace.failed[1000:].mean() > small_landscape.failure_rate.mean()


def test_linear_schedule_matches_sb3():
    cfg = DQNSearchConfig()
    assert linear_epsilon(0, 1000, cfg) == 1.0
    assert linear_epsilon(50, 1000, cfg) == pytest.approx(0.8)
    assert linear_epsilon(100, 1000, cfg) == pytest.approx(0.6)
    assert linear_epsilon(999, 1000, cfg) == pytest.approx(0.6)


def test_search_metrics_on_a_hand_made_trace():
    grid = SMALL_GRID
    n = grid.n_cells  # 12
    failed = np.zeros((4, n), bool)
    failed[:, 0] = True  # cell 0 fails on every image
    failed[:2, 1] = True  # cell 1 on half
    failed[0, 2] = True  # cell 2 on a quarter (below 0.3: not a true failure cell)
    land = FailureLandscape(grid=grid, rewards=np.where(failed, 5.0, -1.0), failed=failed,
                            observations=np.zeros((4, 3), np.float32), labels=np.zeros(4, np.int64))
    trace = SearchTrace("hand", images=np.array([0, 3, 0, 1]), cells=np.array([0, 1, 2, 5]),
                        rewards=np.array([5.0, -1.0, 5.0, -1.0]), failed=np.array([True, False, True, False]))
    m = search_metrics(trace, land, threshold=0.3, checkpoints=2)
    assert m["true_cells_found"] == 1 and m["true_cells_recall"] == 0.5  # cell 0 found; cell 1 queried but no failure
    assert m["cells_with_failures"] == 2 and m["failure_rate"] == 0.5 and m["distinct_cells"] == 4
    assert m["recall_steps"] == [2, 4] and m["recall_curve"] == [0.5, 0.5]
    assert m["visitation_w1"] > 0 and m["reported_w1"] >= 0
