"""Environments of factored-reward bandits: enumeration, expectations, noise model, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.bandits.factored_reward_bandits import (
    FactoredEnv,
    ParallelFactoredEnv,
    joint_actions,
    joint_index,
)


@given(k=st.integers(1, 5), d=st.integers(1, 4))
@settings(max_examples=40, deadline=None, derandomize=True)
def test_joint_enumeration_is_a_bijection_of_size_k_pow_d(k: int, d: int) -> None:
    vectors = joint_actions(k, d)
    assert vectors.shape == (k**d, d)
    assert len({tuple(v) for v in vectors}) == k**d  # all distinct, so every vector appears once
    assert vectors.min() >= 0 and vectors.max() < k
    np.testing.assert_array_equal(joint_index(vectors, k), np.arange(k**d))


def test_joint_actions_match_itertools_product_order() -> None:
    import itertools

    np.testing.assert_array_equal(joint_actions(3, 2), np.array(list(itertools.product(range(3), repeat=2))))


def test_means_are_uniform_in_paper_range_and_differ_per_trial() -> None:
    env = FactoredEnv(n_arms=4, n_factors=3).reset(200, seed=0)
    assert env.means_.shape == (200, 3, 4)
    assert env.means_.min() >= 0.3 and env.means_.max() <= 1.0
    # U[0.3, 1] has mean 0.65 and sd 0.2; 2400 draws put the sample mean within 0.02 with overwhelming odds.
    assert abs(env.means_.mean() - 0.65) < 0.02
    assert not np.allclose(env.means_[0], env.means_[1])


def test_expected_reward_is_product_of_arm_means() -> None:
    means = np.array([[0.5, 0.9], [0.4, 0.8], [1.0, 0.7]])
    env = FactoredEnv(n_arms=2, n_factors=3, means=means).reset(2, seed=0)
    actions = np.array([[0, 1, 1], [1, 1, 0]])
    np.testing.assert_allclose(env.expected_reward(actions), [0.5 * 0.8 * 0.7, 0.9 * 0.8 * 1.0])
    np.testing.assert_allclose(env.optimal_reward(), [0.9 * 0.8 * 1.0] * 2)
    np.testing.assert_array_equal(env.optimal_actions(), [[1, 1, 0]] * 2)
    np.testing.assert_allclose(env.regret(actions), [0.72 - 0.28, 0.0])


@pytest.mark.parametrize("noise", ["gaussian", "bernoulli"])
def test_monte_carlo_mean_of_product_matches_expected_reward(noise: str) -> None:
    means = np.array([[0.5, 0.9], [0.4, 0.8]])
    n = 40_000
    env = FactoredEnv(n_arms=2, n_factors=2, sigma=0.3, noise=noise, means=means).reset(n, seed=1)
    actions = np.tile([1, 0], (n, 1))
    rewards = env.step(actions).prod(axis=1)
    expected = env.expected_reward(actions)[0]
    # With independent factors E[prod X_i] = prod mu_i; 5 standard errors of the Monte Carlo mean.
    assert abs(rewards.mean() - expected) < 5 * rewards.std() / np.sqrt(n)


def test_gaussian_alpha_sets_correlation_and_keeps_variance() -> None:
    n = 50_000
    env = FactoredEnv(n_arms=1, n_factors=2, sigma=0.2, alpha=0.5, means=np.ones((2, 1))).reset(n, seed=2)
    noise = env.step(np.zeros((n, 2), dtype=int)) - 1.0
    np.testing.assert_allclose(noise.std(axis=0), [0.2, 0.2], rtol=0.02)
    assert abs(np.corrcoef(noise.T)[0, 1] - 0.5) < 0.02


def test_bernoulli_alpha_one_makes_factors_share_the_uniform() -> None:
    n = 20_000
    env = FactoredEnv(n_arms=1, n_factors=2, noise="bernoulli", alpha=1.0, means=np.full((2, 1), 0.5))
    obs = env.reset(n, seed=3).step(np.zeros((n, 2), dtype=int))
    np.testing.assert_array_equal(obs[:, 0], obs[:, 1])
    assert abs(obs.mean() - 0.5) < 0.02


def test_parallel_instance_has_best_last_arm() -> None:
    env = ParallelFactoredEnv(n_arms=3, n_factors=4).reset(2, seed=0)
    np.testing.assert_array_equal(env.means_[0], [[0.5, 0.5, 1.0]] * 4)
    np.testing.assert_array_equal(env.optimal_actions(), np.full((2, 4), 2))


def test_same_seed_same_stream() -> None:
    a = FactoredEnv(n_arms=3, n_factors=2).reset(5, seed=7)
    b = FactoredEnv(n_arms=3, n_factors=2).reset(5, seed=7)
    act = np.zeros((5, 2), dtype=int)
    np.testing.assert_array_equal(a.means_, b.means_)
    np.testing.assert_array_equal(a.step(act), b.step(act))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_arms": 0, "n_factors": 2}, "n_arms"),
        ({"n_arms": 2, "n_factors": 0}, "n_factors"),
        ({"n_arms": 2, "n_factors": 2, "sigma": -0.1}, "sigma"),
        ({"n_arms": 2, "n_factors": 2, "alpha": 1.5}, "alpha"),
        ({"n_arms": 2, "n_factors": 2, "means": np.array([[0.5, 0.0], [0.3, 0.2]])}, "means"),
        ({"n_arms": 2, "n_factors": 2, "means": np.array([[0.5, -1.0], [0.3, 0.2]])}, "means"),
        ({"n_arms": 2, "n_factors": 2, "means": np.ones((3, 2))}, "means"),
        ({"n_arms": 2, "n_factors": 2, "low": 0.0}, "low"),
        ({"n_arms": 2, "n_factors": 2, "noise": "cauchy"}, "noise"),
        ({"n_arms": 2, "n_factors": 2, "noise": "bernoulli", "means": np.full((2, 2), 1.5)}, "Bernoulli"),
    ],
)
def test_bad_env_arguments_raise_value_error_naming_them(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        FactoredEnv(**kwargs)


def test_bad_actions_raise() -> None:
    env = FactoredEnv(n_arms=3, n_factors=2).reset(4, seed=0)
    with pytest.raises(ValueError, match="actions"):
        env.step(np.zeros((4, 3), dtype=int))
    with pytest.raises(ValueError, match="actions"):
        env.step(np.full((4, 2), 3))
    with pytest.raises(TypeError, match="actions"):
        env.step(np.zeros((4, 2)))
    with pytest.raises(RuntimeError, match="reset"):
        FactoredEnv(n_arms=3, n_factors=2).step(np.zeros((4, 2), dtype=int))
    with pytest.raises(TypeError, match="n_arms"):
        FactoredEnv(n_arms=2.5, n_factors=2)
