"""Occupancy measures and offline datasets (icml24.rl.offline): closed forms, Monte Carlo, Bellman flow."""

import numpy as np
import pytest

from icml24.rl.envs.chain import garnet_mdp
from icml24.rl.offline import (
    StateDataset,
    TransitionDataset,
    collect_transitions,
    discounted_state_distribution,
    empirical_mdp,
    empirical_policy,
    state_action_occupancy,
    state_occupancy,
    state_pair_occupancy,
)
from icml24.rl.value import TabularMDP, policy_evaluation


def _two_state_mdp() -> TabularMDP:
    # action 0 stays, action 1 switches; start in state 0
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[1, 0, 1] = P[0, 1, 1] = P[1, 1, 0] = 1.0
    z = np.zeros_like(P)
    return TabularMDP(P=P, R=z, terminal=z.astype(bool), start=np.array([1.0, 0.0]))


def test_two_state_closed_form():
    # always switch: s_t alternates 0,1,0,... so d(0) = (1-g) sum_t g^{2t} = 1/(1+g)
    g = 0.9
    d = state_occupancy(_two_state_mdp(), np.array([1, 1]), g)
    np.testing.assert_allclose(d, [1 / (1 + g), g / (1 + g)], atol=1e-12)


def test_bellman_flow_and_mass_one():
    mdp = garnet_mdp(n_states=7, n_actions=3, seed=1)
    mdp = TabularMDP(P=mdp.P, R=mdp.R, terminal=np.zeros_like(mdp.terminal), start=mdp.start)
    pi = np.random.default_rng(0).dirichlet(np.ones(3), size=7)
    g = 0.95
    d = state_action_occupancy(mdp, pi, g)
    assert d.sum() == pytest.approx(1.0, abs=1e-12) and np.all(d >= 0)
    flow = (1 - g) * mdp.start + g * np.einsum("sa,sak->k", d, mdp.P)
    np.testing.assert_allclose(d.sum(1), flow, atol=1e-12)
    # the occupancy is the normalised value of the indicator reward: <d, r> = (1-g) V(p0)
    r = np.random.default_rng(1).standard_normal((7, 3))
    R = np.broadcast_to(r[:, :, None], mdp.P.shape).copy()
    v = policy_evaluation(TabularMDP(P=mdp.P, R=R, terminal=mdp.terminal, start=mdp.start), pi, g)
    assert (d * r).sum() == pytest.approx((1 - g) * mdp.start @ v, abs=1e-10)
    pair = state_pair_occupancy(mdp, pi, g)
    np.testing.assert_allclose(pair.sum(1), d.sum(1), atol=1e-12)


def test_occupancy_matches_monte_carlo():
    mdp = _two_state_mdp()
    pi = np.array([[0.3, 0.7], [0.6, 0.4]])
    g = 0.8
    data = collect_transitions(mdp, pi, n_steps=20_000, seed=0, horizon=40)
    est = discounted_state_distribution(data, 2, g)
    np.testing.assert_allclose(est, state_occupancy(mdp, pi, g), atol=0.02)
    np.testing.assert_allclose(empirical_policy(data, 2, 2), pi, atol=0.03)
    est_mdp = empirical_mdp(data, 2, 2, mdp.start)
    np.testing.assert_allclose(est_mdp.P, mdp.P, atol=1e-12)  # deterministic dynamics: exact


def test_empirical_mdp_unseen_pairs_are_uniform():
    data = TransitionDataset(states=np.array([0]), actions=np.array([0]), next_states=np.array([1]),
                             dones=np.array([False]), steps=np.array([0]))
    m = empirical_mdp(data, 3, 2, np.array([1.0, 0, 0]))
    np.testing.assert_allclose(m.P[0, 0], [0, 1, 0])
    np.testing.assert_allclose(m.P[2, 1], [1 / 3] * 3)


def test_state_dataset_from_transitions_and_bad_input():
    data = collect_transitions(_two_state_mdp(), np.array([1, 0]), n_steps=10, seed=0)
    obs = StateDataset.from_transitions(data)
    assert len(obs) == 10 and np.array_equal(obs.next_states, data.next_states)
    with pytest.raises(ValueError, match="dones"):
        TransitionDataset(states=np.zeros(2), actions=np.zeros(2), next_states=np.zeros(2), dones=np.zeros(2),
                          steps=np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="policy"):
        state_occupancy(_two_state_mdp(), np.array([[0.5, 0.6], [1, 0]]), 0.9)
    with pytest.raises(ValueError, match="gamma"):
        state_occupancy(_two_state_mdp(), np.array([0, 0]), 1.0)
