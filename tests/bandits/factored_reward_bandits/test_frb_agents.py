"""Agents of factored-reward bandits: oracles, the paper's invariants, F-Track's schedule and switch, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml24.bandits.factored_reward_bandits import (
    FUCB,
    FactoredEnv,
    FlatMoMUCB,
    FlatUCB1,
    FTrack,
    ParallelFactoredEnv,
    loglog_slope,
    simulate,
)
from icml24.bandits.factored_reward_bandits.reference import fucb_single_trial, mom_estimate


def _run_with_noise(agent, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Drive a vectorised agent with a fixed noise tensor (trials, T, d); return its actions (trials, T, d)."""
    n, horizon, d = noise.shape
    agent.reset(n)
    rows, cols = np.arange(n)[:, None], np.arange(d)[None, :]
    out = np.empty((n, horizon, d), dtype=np.intp)
    for t in range(1, horizon + 1):
        a = agent.select(t)
        out[:, t - 1] = a
        agent.update(a, means[rows, cols, a] + noise[:, t - 1])
    return out


@given(seed=st.integers(0, 2**16), d=st.integers(1, 3), k=st.integers(1, 4))
@settings(max_examples=15, deadline=None, derandomize=True)
def test_vectorised_fucb_matches_per_trial_python_loop(seed: int, d: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.3, 1.0, size=(3, d, k))
    noise = 0.2 * rng.standard_normal((3, 150, d))
    vec = _run_with_noise(FUCB(n_arms=k, n_factors=d, sigma=0.2), means, noise)
    for r in range(3):
        np.testing.assert_array_equal(vec[r], fucb_single_trial(means[r], 0.2, noise[r]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fucb_with_one_factor_is_ucb1_action_for_action(seed: int) -> None:
    env = FactoredEnv(n_arms=5, n_factors=1, sigma=0.3)
    a = simulate(env, FUCB(n_arms=5, n_factors=1, sigma=0.3), 800, 4, seed, record_actions=True)
    b = simulate(env, FlatUCB1(n_arms=5, n_factors=1, sigma=0.3), 800, 4, seed, record_actions=True)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.regret, b.regret)


@pytest.mark.parametrize(
    "make",
    [
        lambda k, d, T: FUCB(n_arms=k, n_factors=d, sigma=0.2),
        lambda k, d, T: FTrack(n_arms=k, n_factors=d, sigma=0.2, horizon=T),
        lambda k, d, T: FlatUCB1(n_arms=k, n_factors=d, sigma=0.2),
        lambda k, d, T: FlatMoMUCB(n_arms=k, n_factors=d, sigma=0.2),
    ],
)
def test_instantaneous_regret_is_non_negative(make) -> None:
    sim = simulate(FactoredEnv(n_arms=3, n_factors=2, sigma=0.2), make(3, 2, 400), 400, 6, seed=0)
    assert sim.regret.shape == (6, 400)
    assert sim.regret.min() >= -1e-12


def test_noiseless_fucb_regret_is_only_the_first_k_rounds() -> None:
    env = FactoredEnv(n_arms=4, n_factors=3, sigma=0.0)
    sim = simulate(env, FUCB(n_arms=4, n_factors=3, sigma=0.0), 300, 5, seed=3, record_actions=True)
    # Rounds 1..K try every arm (aligned, arm t-1 in every factor); afterwards the exact argmax is optimal.
    np.testing.assert_array_equal(sim.actions[:, :4], np.broadcast_to(np.arange(4)[None, :, None], (5, 4, 3)))
    assert np.all(sim.regret[:, 4:] == 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: FUCB(n_arms=2, n_factors=3, sigma=0.1),
        lambda: FTrack(n_arms=2, n_factors=3, sigma=0.1, horizon=4000),
    ],
)
def test_regret_is_sublinear_on_a_well_separated_instance(make) -> None:
    env = ParallelFactoredEnv(n_arms=2, n_factors=3, sigma=0.1)
    curve = simulate(env, make(), 4000, 8, seed=1).cumulative.mean(axis=0)
    assert loglog_slope(curve) < 0.7
    t = np.arange(1, curve.size + 1)
    assert curve[-1] / t[-1] < curve[99] / t[99]  # R_t / t decreases


def test_fucb_beats_flattened_ucb1_on_a_small_instance() -> None:
    env = FactoredEnv(n_arms=3, n_factors=3, sigma=0.1)
    f = simulate(env, FUCB(n_arms=3, n_factors=3, sigma=0.1), 2000, 8, seed=0).final
    u = simulate(env, FlatUCB1(n_arms=3, n_factors=3, sigma=0.1), 2000, 8, seed=0).final
    assert f.mean() < u.mean()


def test_flat_mom_estimates_match_the_reference_median_of_means() -> None:
    env = FactoredEnv(n_arms=2, n_factors=2, sigma=0.3)
    agent = FlatMoMUCB(n_arms=2, n_factors=2, sigma=0.3)
    env.reset(3, seed=5)
    agent.reset(3)
    history: list[list[list[float]]] = [[[] for _ in range(4)] for _ in range(3)]
    for t in range(1, 301):
        a = agent.select(t)
        obs = env.step(a)
        agent.update(a, obs)
        for r in range(3):
            history[r][a[r, 0] * 2 + a[r, 1]].append(float(obs[r].prod()))
    for r in range(3):
        for arm in range(4):
            assert agent.estimates_[r, arm] == pytest.approx(mom_estimate(history[r][arm], 301), abs=1e-12)


def test_ftrack_warmup_is_aligned_and_has_the_paper_length() -> None:
    horizon = 5000
    agent = FTrack(n_arms=3, n_factors=4, sigma=0.1, horizon=horizon)
    assert agent.n0 == math.ceil(math.sqrt(math.log(horizon)))
    assert agent.warmup_rounds == agent.n0 * 3
    sim = simulate(ParallelFactoredEnv(n_arms=3, n_factors=4, sigma=0.1), agent, horizon, 2, 0, record_actions=True)
    warm = sim.actions[:, : agent.warmup_rounds]
    expected = (np.arange(agent.warmup_rounds) % 3)[None, :, None]
    np.testing.assert_array_equal(warm, np.broadcast_to(expected, warm.shape))


def test_ftrack_schedule_holds_each_required_count_and_fills_the_horizon() -> None:
    horizon = 8000
    agent = FTrack(n_arms=4, n_factors=3, sigma=0.05, horizon=horizon)
    env = FactoredEnv(n_arms=4, n_factors=3, sigma=0.05, means=np.array([[1.0, 0.6, 0.5, 0.3]] * 3))
    sim = simulate(env, agent, horizon, 3, seed=0, record_actions=True)
    length = horizon - agent.warmup_rounds
    for r in range(3):
        acts, counts = agent.schedule_actions_[r], agent.schedule_counts_[r]
        assert counts.sum() == length
        for i in range(3):
            for j in range(4):
                if j == agent._warmup_means[r, i].argmax():
                    continue
                assert counts[acts[:, i] == j].sum() == agent.required_[r, i, j]
        if not agent.switched_[r]:
            # The rounds actually played after the warm-up are exactly the schedule's columns.
            played = sim.actions[r, agent.warmup_rounds :]
            for a, c in zip(acts, counts):
                assert np.all(played == a, axis=1).sum() == c
    assert not agent.switched_.any()


def test_ftrack_required_counts_follow_the_formula() -> None:
    horizon = 10_000
    agent = FTrack(n_arms=2, n_factors=2, sigma=0.1, horizon=horizon, c=2.5)
    simulate(ParallelFactoredEnv(n_arms=2, n_factors=2, sigma=0.1), agent, 2 * agent.warmup_rounds, 1, seed=0)
    log_t = math.log(horizon)
    f = (1 + 1 / log_t) * (2.5 * math.log(log_t) + math.log(horizon))
    gaps = agent._warmup_means.max(axis=2) - agent._warmup_means[:, :, 0]
    np.testing.assert_array_equal(agent.required_[:, :, 0], np.ceil(2 * 0.01 * f / gaps**2))
    assert agent.epsilon == pytest.approx(math.sqrt(2 * 0.01 * (1 + 1 / log_t) * 3.5 * math.log(log_t) / agent.n0))


def test_noiseless_ftrack_with_tied_arms_needs_no_exploration() -> None:
    # sigma = 0: the warm-up means are exact; a tie with the best arm is a 0/0 count, which must be 0.
    means = np.array([[0.5, 0.5, 0.9], [0.4, 0.8, 0.8]])
    agent = FTrack(n_arms=3, n_factors=2, sigma=0.0, horizon=200)
    sim = simulate(FactoredEnv(n_arms=3, n_factors=2, sigma=0.0, means=means), agent, 200, 2, seed=0)
    assert agent.required_ is not None and (agent.required_ == 0).all()
    # only the warm-up costs regret: afterwards the schedule plays an optimal vector every round
    warmup = sim.regret[:, : agent.warmup_rounds].sum(axis=1)
    np.testing.assert_allclose(sim.final, warmup)


def test_ftrack_safety_switch_fires_when_means_shift_after_warmup() -> None:
    horizon = 3000
    agent = FTrack(n_arms=2, n_factors=3, sigma=0.05, horizon=horizon)
    env = ParallelFactoredEnv(n_arms=2, n_factors=3, sigma=0.05).reset(4, seed=0)
    agent.reset(4)
    for t in range(1, horizon + 1):
        if t == agent.warmup_rounds + 1:
            env.means_[:2, 1, 1] = 0.2  # trials 0 and 1: the best arm of factor 1 collapses
        a = agent.select(t)
        agent.update(a, env.step(a))
    np.testing.assert_array_equal(agent.switched_, [True, True, False, False])
    assert np.all(agent.switch_round_[:2] > agent.warmup_rounds)
    assert np.all(agent.switch_round_[2:] == -1)


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: FUCB(n_arms=0, n_factors=2, sigma=0.1), "n_arms"),
        (lambda: FUCB(n_arms=2, n_factors=0, sigma=0.1), "n_factors"),
        (lambda: FUCB(n_arms=2, n_factors=2, sigma=-1.0), "sigma"),
        (lambda: FlatUCB1(n_arms=2, n_factors=2, sigma=-1.0), "sigma"),
        (lambda: FlatMoMUCB(n_arms=2, n_factors=2, sigma=-0.5), "sigma"),
        (lambda: FTrack(n_arms=2, n_factors=2, sigma=-0.1, horizon=100), "sigma"),
        (lambda: FTrack(n_arms=2, n_factors=2, sigma=0.1, horizon=0), "horizon"),
        (lambda: FTrack(n_arms=2, n_factors=2, sigma=0.1, horizon=2), "horizon"),
        (lambda: FTrack(n_arms=50, n_factors=2, sigma=0.1, horizon=20), "horizon"),
        (lambda: FUCB(n_arms=2, n_factors=2, sigma=0.1, c_exp=0.0), "c_exp"),
        (lambda: FTrack(n_arms=2, n_factors=2, sigma=0.1, horizon=100, schedule_order="x"), "schedule_order"),
    ],
)
def test_bad_agent_arguments_raise_value_error_naming_them(factory, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        factory()


def test_mismatched_shapes_raise() -> None:
    agent = FUCB(n_arms=3, n_factors=2, sigma=0.1).reset(4)
    with pytest.raises(ValueError, match="actions"):
        agent.update(np.zeros((4, 3), dtype=int), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="observations"):
        agent.update(np.zeros((4, 2), dtype=int), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="n_arms, n_factors"):
        simulate(FactoredEnv(n_arms=3, n_factors=2), FUCB(n_arms=3, n_factors=3, sigma=0.1), 10, 2, 0)
    with pytest.raises(ValueError, match="horizon"):
        simulate(FactoredEnv(n_arms=3, n_factors=2), FUCB(n_arms=3, n_factors=2, sigma=0.1), 0, 2, 0)
    with pytest.raises(ValueError, match="n_trials"):
        simulate(FactoredEnv(n_arms=3, n_factors=2), FUCB(n_arms=3, n_factors=2, sigma=0.1), 10, 0, 0)
    with pytest.raises(RuntimeError, match="reset"):
        FUCB(n_arms=3, n_factors=2, sigma=0.1).select(1)


@given(
    seed=st.integers(0, 2**16),
    d=st.integers(1, 3),
    k=st.integers(2, 3),
    sigma=st.sampled_from([0.05, 0.5]),
    order=st.sampled_from(["increasing", "decreasing"]),
)
@settings(max_examples=12, deadline=None, derandomize=True)
def test_vectorised_ftrack_matches_per_trial_python_loop(seed: int, d: int, k: int, sigma: float, order: str) -> None:
    from icml24.bandits.factored_reward_bandits.reference import ftrack_single_trial

    rng = np.random.default_rng(seed)
    horizon = 400
    means = rng.uniform(0.3, 1.0, size=(3, d, k))
    noise = sigma * rng.standard_normal((3, horizon, d))
    agent = FTrack(n_arms=k, n_factors=d, sigma=sigma, horizon=horizon, schedule_order=order)
    # Trial 0: factor 0's outcomes jump after the warm-up, so the safety switch and the F-UCB fallback run too.
    noise[0, agent.warmup_rounds :, 0] += 4 * agent.epsilon
    vec = _run_with_noise(agent, means, noise)
    assert agent.switch_round_[0] > agent.warmup_rounds
    for r in range(3):
        ref_actions, ref_switch = ftrack_single_trial(means[r], sigma, noise[r], order=order)
        np.testing.assert_array_equal(vec[r], ref_actions)
        assert agent.switch_round_[r] == ref_switch
