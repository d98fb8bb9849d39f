"""Continuous PW-DICE pieces: metric invariants, discriminator, dual weights, weighted BC, the point-mass task."""

import numpy as np
import pytest
import torch

from icml24.rl.offline import StateDataset, TransitionDataset
from icml24.rl.pw_dice.continuous import (
    ContrastiveMetric,
    DualConfig,
    ImitationConfig,
    collect_point_mass,
    distort_states,
    pw_dice_weights,
    run_imitation,
    scripted_expert,
    smodice_kl_weights,
    train_contrastive_metric,
    train_discriminator,
    weighted_bc,
)


def test_metric_is_a_bounded_symmetric_pseudo_metric():
    torch.manual_seed(0)
    m = ContrastiveMetric(state_dim=3, scale=2.5)
    x, y = torch.randn(7, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        c = m.pairwise(x, y)
        assert c.shape == (7, 5) and float(c.min()) >= 0 and float(c.max()) <= 4 * 2.5 + 1e-9
        torch.testing.assert_close(m.pairwise(y, x), c.T)
        assert float(m.pairwise(x, x).diagonal().abs().max()) < 1e-9


def test_contrastive_metric_puts_successors_closer_than_random_states():
    rng = np.random.default_rng(0)
    s = rng.uniform(-1, 1, (2000, 2))
    s2 = s + 0.05 * rng.standard_normal(s.shape)  # a successor is a small step away
    m = train_contrastive_metric(s, s2, steps=300, batch_size=256, hidden=(32, 32), seed=0)
    x = torch.as_tensor(s[:200])
    near = m.pairwise(x, torch.as_tensor(s2[:200])).diagonal().mean()
    far = m.pairwise(x, torch.as_tensor(s[200:400])).mean()
    assert float(near) < 0.5 * float(far)


def test_discriminator_logit_ranks_expert_states():
    rng = np.random.default_rng(1)
    e, d = rng.normal(2.0, 0.3, (300, 2)), rng.normal(0.0, 1.0, (3000, 2))
    net = train_discriminator(e, d, steps=300, hidden=(32, 32), seed=0)
    with torch.no_grad():
        r_e, r_d = net(torch.as_tensor(e)).mean(), net(torch.as_tensor(d)).mean()
    assert float(r_e) > float(r_d) + 1.0


def _toy_data(seed=0):
    data, _ = collect_point_mass("random", episodes=20, seed=seed, horizon=30)
    ex, _ = collect_point_mass(scripted_expert, episodes=3, seed=seed, horizon=30)
    expert = StateDataset.from_transitions(ex)
    both = TransitionDataset(*(np.concatenate([getattr(ex, f), getattr(data, f)]) for f in
                               ("states", "actions", "next_states", "dones", "steps")))
    return both, expert, len(ex)


def test_dual_weights_are_finite_non_negative_with_max_one_and_favour_the_expert():
    data, expert, n_exp = _toy_data()
    disc = train_discriminator(expert.states, data.states, steps=200, hidden=(32, 32), seed=0)
    reward = lambda x: disc(torch.as_tensor(x)).squeeze(-1)  # noqa: E731
    cfg = DualConfig(steps=300, hidden=(32, 32), batch_size=128)
    for w in (pw_dice_weights(data, expert, cost=lambda x, y: torch.cdist(x, y), reward=reward, config=cfg),
              smodice_kl_weights(data, reward=reward, config=cfg)):
        assert w.shape == (len(data),) and np.all(np.isfinite(w)) and w.min() >= 0 and w.max() == pytest.approx(1.0)
        assert w[:n_exp].mean() > w[n_exp:].mean()  # the expert's own transitions get more weight


def test_weighted_bc_with_indicator_weights_clones_that_subset():
    rng = np.random.default_rng(0)
    s = rng.standard_normal((400, 2))
    a = np.where(np.arange(400)[:, None] < 200, 0.5, -0.5) * np.ones((400, 2))
    data = TransitionDataset(states=s, actions=a, next_states=s, dones=np.zeros(400, bool),
                             steps=np.zeros(400, dtype=np.int64))
    w = (np.arange(400) < 200).astype(float)
    pi = weighted_bc(data, w, steps=300, hidden=(32, 32), seed=0)
    assert float(pi.act(torch.as_tensor(s)).mean()) == pytest.approx(0.5, abs=0.1)
    with pytest.raises(ValueError, match="weights"):
        weighted_bc(data, -w, steps=1)


def test_point_mass_expert_succeeds_and_random_does_not():
    _, ex = collect_point_mass(scripted_expert, episodes=20, seed=0, action_noise=0.3)
    _, rnd = collect_point_mass("random", episodes=20, seed=0)
    assert ex["success_rate"] == 1.0 and rnd["success_rate"] == 0.0


def test_distortion_is_fixed_and_mixes_dimensions():
    x = np.random.default_rng(0).standard_normal((50, 4))
    z = distort_states(x)
    np.testing.assert_array_equal(z, distort_states(x))
    assert z.shape == (50, 4) and abs(np.corrcoef(z[:, 0], x[:, 0])[0, 1]) < 0.99
    with pytest.raises(ValueError, match="states"):
        distort_states(x[:, :3])


@pytest.mark.parametrize("method", ["pw_dice_learned", "bc"])
def test_run_imitation_smoke(method):
    cfg = ImitationConfig(expert_episodes=2, data_expert_episodes=2, data_random_episodes=5, metric_steps=5,
                          disc_steps=5, dual_steps=5, bc_steps=5, hidden=16, eval_episodes=5, variant="distorted")
    out = run_imitation(cfg, method=method, seed=0)
    assert 0.0 <= out["success_rate"] <= 1.0 and out["expert_success_rate"] == 1.0
    with pytest.raises(ValueError, match="method"):
        run_imitation(cfg, method="gail", seed=0)


def test_minibatch_dual_recovers_the_exact_tabular_solution():
    """One-hot states of a deterministic tabular MDP (so sampled s' is exact): the networks' weighted-BC
    occupancy d_I w / sum matches the cvxpy primal's rho."""
    from icml24.rl.offline import state_action_occupancy
    from icml24.rl.pw_dice import arbitrary_task, dirac_cost, pw_dice_primal

    S, A, g, eps = 4, 2, 0.8, 0.5
    task = arbitrary_task(S, A, seed=3, connectivity=2, noise=0.0, gamma=g)
    d_data = 0.5 * state_action_occupancy(task.mdp, np.full((S, A), 0.5), g) + 0.5 / (S * A)
    d_exp = np.array([0.1, 0.2, 0.3, 0.4])
    exact = pw_dice_primal(task.mdp, d_exp, d_data, dirac_cost(S), gamma=g, eps1=eps, eps2=eps).occupancy
    rng = np.random.default_rng(0)
    n = 20_000
    pairs = rng.choice(S * A, n, p=d_data.reshape(-1))
    st, ac = pairs // A, pairs % A
    nxt = task.mdp.P[st, ac].argmax(-1)
    eye = np.eye(S)
    data = TransitionDataset(states=eye[st], actions=eye[ac][:, :A], next_states=eye[nxt], dones=np.zeros(n, bool),
                             steps=np.ones(n, dtype=np.int64))
    ex_states = eye[rng.choice(S, 5000, p=d_exp)]
    expert = StateDataset(states=ex_states, next_states=ex_states, steps=np.zeros(5000, dtype=np.int64))
    cfg = DualConfig(eps1=eps, eps2=eps, gamma=g, lr=3e-3, steps=1000, batch_size=512, hidden=(32,), kappa=0.0,
                     occupancy_cost=0.0)
    w = pw_dice_weights(data, expert, cost=lambda x, y: 1.0 - x @ y.T, config=cfg, seed=0,
                        initial_states=eye[[0] * 10])
    est = np.zeros((S, A))
    np.add.at(est, (st, ac), w)
    est /= est.sum()
    assert np.abs(est - exact).sum() < 0.1  # the data occupancy itself is 0.29 away
