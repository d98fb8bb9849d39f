"""PW-DICE tabular: constraints, strong duality (cvxpy primal vs torch dual), the SMODICE reduction, invariants."""

import numpy as np
import pytest
import torch

from icml24.rl.offline import state_action_occupancy, state_occupancy
from icml24.rl.pw_dice import (
    arbitrary_task,
    dirac_cost,
    grid_manhattan_cost,
    lobsdice_tabular,
    occupancy_metrics,
    pw_dice_dual_loss,
    pw_dice_primal,
    pw_dice_tabular_dual,
    smodice_chi_tabular,
    smodice_kl_tabular,
)

G = 0.9


def _tiny(seed: int, S: int = 4, A: int = 2):
    task = arbitrary_task(S, A, seed=seed, connectivity=min(3, S), noise=0.2, gamma=G)
    rng = np.random.default_rng(seed)
    d_data = state_action_occupancy(task.mdp, rng.dirichlet(np.ones(A), size=S), G)
    d_data = 0.8 * d_data + 0.2 / (S * A)  # full support (keeps the floors negligible)
    d_data /= d_data.sum()
    d_exp = state_occupancy(task.mdp, task.expert_policy, G)
    return task, d_exp, d_data


def _residuals(task, sol, d_exp, g):
    rho = sol.occupancy
    Pi = sol.extra["coupling"]
    flow = rho.sum(1) - (1 - g) * task.mdp.start - g * np.einsum("sa,sak->k", rho, task.mdp.P)
    return (np.abs(Pi.sum(1) - rho.sum(1)).max(), np.abs(Pi.sum(0) - d_exp).max(), np.abs(flow).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_primal_constraints_hold(seed):
    task, d_exp, d_data = _tiny(seed, S=6, A=3)
    sol = pw_dice_primal(task.mdp, d_exp, d_data, dirac_cost(6), gamma=G, eps1=0.01, eps2=0.01)
    assert max(_residuals(task, sol, d_exp, G)) < 1e-6
    assert sol.occupancy.min() >= 0 and sol.extra["coupling"].min() >= 0
    assert sol.occupancy.sum() == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(sol.policy.sum(1), 1.0, atol=1e-9)


@pytest.mark.parametrize("seed,eps", [(0, 0.5), (1, 0.2), (2, 0.1), (3, 0.5)])
def test_strong_duality_primal_equals_minus_dual(seed, eps):
    task, d_exp, d_data = _tiny(seed)
    cost = np.random.default_rng(seed).uniform(0, 1, (4, 4))
    cost = cost + cost.T
    np.fill_diagonal(cost, 0.0)
    primal = pw_dice_primal(task.mdp, d_exp, d_data, cost, gamma=G, eps1=eps, eps2=eps)
    dual = pw_dice_tabular_dual(task.mdp, d_exp, d_data, cost, gamma=G, eps1=eps, eps2=eps)
    assert dual.objective == pytest.approx(primal.objective, abs=1e-3)
    # the dual's weighted-BC occupancy d_I exp(flow / eps2) is the primal's rho
    np.testing.assert_allclose(dual.occupancy, primal.occupancy, atol=2e-3)


def test_lambda3_cancels():
    torch.manual_seed(0)
    pair, flow = torch.randn(5, 7), torch.randn(9)
    lam3 = torch.tensor(0.3, dtype=torch.float32, requires_grad=True)
    loss = pw_dice_dual_loss(pair, flow, init_term=torch.tensor(0.1), expert_term=torch.tensor(0.2), lam3=lam3,
                             eps1=0.5, eps2=0.5)
    (g,) = torch.autograd.grad(loss, lam3)
    assert abs(float(g)) < 1e-6
    shifted = pw_dice_dual_loss(pair, flow, init_term=torch.tensor(0.1), expert_term=torch.tensor(0.2),
                                lam3=torch.tensor(5.0), eps1=0.5, eps2=0.5)
    assert float(shifted) == pytest.approx(float(loss.detach()), abs=1e-5)


def test_dual_loss_closed_form():
    pair, flow = torch.tensor([0.0, 1.0]), torch.tensor([2.0])
    loss = pw_dice_dual_loss(pair, flow, init_term=torch.tensor(0.0), expert_term=torch.tensor(0.0),
                             lam3=torch.tensor(0.0), eps1=1.0, eps2=1.0)
    assert float(loss) == pytest.approx(np.log((1 + np.e) / 2) + 2.0, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 4])
def test_smodice_is_the_special_case(seed):
    """c(s_i, s_j) = -R(s_i), eps1 -> 0, eps2 = 1: PW-DICE's occupancy is SMODICE-KL's."""
    task, _, d_data = _tiny(seed, S=5, A=2)
    d_exp = np.random.default_rng(seed).dirichlet(np.ones(5))
    smo = smodice_kl_tabular(task.mdp, d_exp, d_data, gamma=G)
    R = smo.extra["reward"]
    cost = np.repeat(-R[:, None], 5, axis=1)
    pw = pw_dice_primal(task.mdp, d_exp, d_data, cost, gamma=G, eps1=1e-6, eps2=1.0)
    np.testing.assert_allclose(pw.occupancy, smo.occupancy, atol=1e-4)
    # a cost that ignores s_j makes the optimal coupling the product of marginals at any eps1
    pw2 = pw_dice_primal(task.mdp, d_exp, d_data, cost, gamma=G, eps1=0.3, eps2=1.0)
    np.testing.assert_allclose(pw2.extra["coupling"], np.outer(pw2.occupancy.sum(1), d_exp), atol=1e-5)
    # and the extra term is eps1 KL(d_pi || d_I): SMODICE with reward R - eps1 log(d_pi / d_I) has the same fixed point
    d_pi, d_I = pw2.occupancy.sum(1), d_data.sum(1)
    smo2 = smodice_kl_tabular(task.mdp, d_exp, d_data, gamma=G, reward=R - 0.3 * np.log(d_pi / d_I))
    np.testing.assert_allclose(smo2.occupancy, pw2.occupancy, atol=1e-4)


def test_lp_recovers_a_feasible_expert_occupancy():
    task, _, d_data = _tiny(5, S=6, A=3)
    d_exp = state_occupancy(task.mdp, task.expert_policy, G)
    lp = pw_dice_primal(task.mdp, d_exp, d_data, dirac_cost(6), gamma=G, eps1=0.0, eps2=0.0)
    assert lp.objective == pytest.approx(0.0, abs=1e-7)
    np.testing.assert_allclose(lp.occupancy.sum(1), d_exp, atol=1e-6)
    small = pw_dice_primal(task.mdp, d_exp, d_data, dirac_cost(6), gamma=G, eps1=1e-4, eps2=1e-4)
    assert np.abs(small.occupancy.sum(1) - d_exp).sum() < 0.01


def test_expert_data_gives_the_expert_policy():
    """d_I = the expert's occupancy, d_E its state marginal: the weights are ~uniform, weighted BC = BC."""
    task, _, _ = _tiny(6, S=6, A=3)
    d_data = state_action_occupancy(task.mdp, task.expert_policy, G)
    sol = pw_dice_primal(task.mdp, d_data.sum(1), d_data, dirac_cost(6), gamma=G, eps1=0.01, eps2=0.5)
    np.testing.assert_allclose(sol.policy, task.expert_policy, atol=0.02)
    w = sol.occupancy / d_data
    assert w.max() / w.min() < 1.1


def test_baselines_satisfy_the_flow_and_metrics():
    task, d_exp, d_data = _tiny(7, S=6, A=3)
    pairs = np.einsum("sa,sak->sk", state_action_occupancy(task.mdp, task.expert_policy, G), task.mdp.P)
    for sol in (smodice_kl_tabular(task.mdp, d_exp, d_data, gamma=G),
                smodice_chi_tabular(task.mdp, d_exp, d_data, gamma=G)):
        flow = sol.occupancy.sum(1) - (1 - G) * task.mdp.start - G * np.einsum("sa,sak->k", sol.occupancy, task.mdp.P)
        assert np.abs(flow).max() < 1e-6
    lobs = lobsdice_tabular(task.mdp, pairs, d_data, gamma=G)
    m = occupancy_metrics(task, lobs.policy)
    # exact expert data: LobsDICE's policy is close to the expert's
    assert m["state_l1"] < 0.1 and m["pair_l1"] >= m["state_l1"] - 1e-12
    m_exp = occupancy_metrics(task, task.expert_policy)
    assert m_exp["state_l1"] == pytest.approx(0.0, abs=1e-12) and m_exp["regret"] == pytest.approx(0.0, abs=1e-12)


def test_manhattan_cost():
    c = grid_manhattan_cost(3)
    assert c[0, 8] == 4 and c[4, 4] == 0 and np.array_equal(c, c.T)


def test_bad_inputs():
    task, d_exp, d_data = _tiny(0)
    with pytest.raises(ValueError, match="d_expert"):
        pw_dice_primal(task.mdp, d_exp * 2, d_data, dirac_cost(4), gamma=G)
    with pytest.raises(ValueError, match="cost"):
        pw_dice_primal(task.mdp, d_exp, d_data, dirac_cost(3), gamma=G)
    with pytest.raises(ValueError, match="eps1"):
        pw_dice_primal(task.mdp, d_exp, d_data, dirac_cost(4), gamma=G, eps1=-1.0)
    with pytest.raises(TypeError, match="model"):
        smodice_kl_tabular("mdp", d_exp, d_data, gamma=G)
