"""Tabular PW-DICE and its baselines, solved exactly (Yan, Schwing, Wang; ICML 2024, arXiv:2311.01331).

PW-DICE (section 4 of the paper) chooses a learner state-action occupancy ``rho`` and a coupling ``Pi`` between the
learner's and the expert's state occupancies that solve the convex program

    min_{Pi >= 0, rho >= 0}  sum_ij c(s_i, s_j) Pi_ij + eps1 KL(Pi || U) + eps2 KL(rho || d_I)
    s.t.  sum_j Pi_ij = sum_a rho(s_i, a)                                   (row marginal: learner)
          sum_i Pi_ij = d_E(s_j)                                            (column marginal: expert)
          sum_a rho(s, a) = (1 - gamma) p0(s) + gamma sum_{s~,a~} P(s | s~, a~) rho(s~, a~)   (Bellman flow)

with ``U = d_E (x) d_I(s)`` (``KL`` as ``x log(x / y)`` summed, the official code's cvxpy form; every mass is one
under the constraints, so this equals the normalised KL). ``eps1 = eps2 = 0`` is the primal Wasserstein LP. Its
Lagrange dual, with the mass-one constraints made explicit (multiplier ``lambda3``), is the unconstrained convex
log-sum-exp objective of the paper's section 4.2 (:func:`pw_dice_dual_loss`; official ``ours.py``)

    L(lambda) = eps1 log E_{U} exp[(lambda1(s_i) + lambda2(s_j) - c_ij) / eps1]
              + eps2 log E_{d_I} exp[(lambda0(s) - gamma E_{s'} lambda0(s') - lambda1(s) + lambda3) / eps2]
              - (1 - gamma) E_{p0} lambda0 - E_{d_E} lambda2 - lambda3,

and ``min L = -(primal optimum)`` (strong duality, Slater). The policy comes from the weights
``rho / d_I = exp[(lambda0 - gamma E lambda0' - lambda1 + lambda3) / eps2] / Z``: ``pi(a | s) ∝ d_I(s, a) w(s, a)``.

Baselines on the same inputs (the code's ``*_cvxpy.py``): SMODICE-KL (Ma et al., 2022) ``min_rho -E_rho[R(s)] +
KL(rho || d_I)`` with ``R = log d_E / d_I``; SMODICE-chi-square ``max_rho E_rho[R] - 1/2 E_{d_I}[(rho/d_I - 1)^2]``;
LobsDICE (Kim et al., 2022) on state pairs, its cvxpy dual with ``alpha = 0.01``. The SMODICE special case of
PW-DICE: with ``c(s_i, s_j) = -R(s_i)`` the transport cost no longer depends on ``s_j``, the optimal coupling is
``d_pi (x) d_E`` and the PW-DICE objective becomes SMODICE-KL's plus ``eps1 KL(d_pi || d_I)``, so ``eps1 -> 0``,
``eps2 = 1`` gives SMODICE-KL exactly (the paper's section 4.3; tested numerically).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from icml24.rl import _checks
from icml24.rl.offline import state_occupancy, state_pair_occupancy
from icml24.rl.value.tabular import TabularMDP, check_gamma, check_int, value_iteration

__all__ = [
    "ArbitraryTask",
    "DICESolution",
    "arbitrary_task",
    "dirac_cost",
    "grid_manhattan_cost",
    "lobsdice_tabular",
    "occupancy_metrics",
    "policy_from_occupancy",
    "pw_dice_dual_loss",
    "pw_dice_primal",
    "pw_dice_tabular_dual",
    "smodice_chi_tabular",
    "smodice_kl_tabular",
]

U_FLOOR = 1e-10
"""Added to ``U = d_E (x) d_I`` inside the log (official code), so unseen states do not force ``Pi = 0``."""
DATA_FLOOR = 1e-8
"""Added to ``d_I(s, a)`` inside the log (official code)."""


@dataclass(frozen=True)
class ArbitraryTask:
    """A random "Arbitrary" MDP of the PW-DICE tabular experiments with its softmax-optimal expert."""

    mdp: TabularMDP
    """The true MDP (no rewards, no terminal transitions; starts in state 0)."""
    expert_policy: np.ndarray
    """``(S, A)``: ``softmax(Q*)`` for the reward ``1[s = target]``."""
    target: int
    """The state with the smallest optimal value from state 0 (hardest to reach)."""
    gamma: float
    """Discount factor (0.95 in the paper's code)."""


def arbitrary_task(
    n_states: int = 20, n_actions: int = 4, *, seed: int, connectivity: int = 4, noise: float = 0.01,
    gamma: float = 0.95,
) -> ArbitraryTask:  # fmt: skip
    """The code's ``Arbitrary`` generator: each ``(s, a)`` reaches ``connectivity`` random states, mass
    ``(1 - noise)`` on one of them plus ``noise`` times a Dirichlet(1) draw; the expert is ``softmax(Q*)`` towards
    the state hardest to reach from state 0."""
    n_states, n_actions = check_int("n_states", n_states, 2), check_int("n_actions", n_actions, 1)
    seed = check_int("seed", seed, 0)
    connectivity = check_int("connectivity", connectivity, 1)
    if connectivity > n_states:
        raise ValueError(f"connectivity must be <= n_states = {n_states}, got {connectivity}")
    noise = _checks.real("noise", noise, low=0.0, high=1.0)
    gamma = check_gamma(gamma, allow_one=False)
    rng = np.random.default_rng(seed)
    P = np.zeros((n_states, n_actions, n_states))
    for s in range(n_states):
        for a in range(n_actions):
            succ = rng.choice(n_states, connectivity, replace=False)
            onehot = np.eye(connectivity)[rng.integers(connectivity)]
            P[s, a, succ] = (1 - noise) * onehot + noise * rng.dirichlet(np.ones(connectivity))
    start = np.eye(n_states)[0]
    no_term = np.zeros(P.shape, dtype=bool)
    best: tuple[float, int, np.ndarray] | None = None
    for target in range(1, n_states):
        R = np.zeros_like(P)
        R[target] = 1.0  # reward of being in the target state (the code's r(s))
        Q = value_iteration(TabularMDP(P=P, R=R, terminal=no_term, start=start), gamma, tol=1e-9)
        if best is None or Q[0].max() < best[0]:
            best = (float(Q[0].max()), target, Q)
    assert best is not None
    _, target, Q = best
    z = np.exp(Q - Q.max(1, keepdims=True))
    mdp = TabularMDP(P=P, R=np.zeros_like(P), terminal=no_term, start=start)
    return ArbitraryTask(mdp=mdp, expert_policy=z / z.sum(1, keepdims=True), target=target, gamma=gamma)


def dirac_cost(n_states: int) -> np.ndarray:
    """``c(s_i, s_j) = 1[s_i != s_j]``: with it the Wasserstein distance is the total variation."""
    n = check_int("n_states", n_states, 1)
    return 1.0 - np.eye(n)


def grid_manhattan_cost(side: int) -> np.ndarray:
    """Manhattan distance between the cells of a ``side x side`` grid (state ``s = row * side + col``)."""
    side = check_int("side", side, 1)
    rc = np.stack(np.divmod(np.arange(side * side), side), 1)
    return np.abs(rc[:, None, :] - rc[None, :, :]).sum(-1).astype(np.float64)


@dataclass(frozen=True)
class DICESolution:
    """An occupancy chosen by a tabular DICE method and the policy it implies."""

    occupancy: np.ndarray
    """``(S, A)`` learner state-action occupancy ``rho``."""
    policy: np.ndarray
    """``(S, A)``: ``rho(s, a) / sum_a rho(s, a)`` (uniform where ``rho(s) = 0``)."""
    objective: float
    """Optimal value of the method's own objective."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Method-specific parts (the PW-DICE coupling ``Pi``, LobsDICE's values)."""


def policy_from_occupancy(occupancy: np.ndarray) -> np.ndarray:
    """``pi(a | s) = rho(s, a) / rho(s)``, uniform where ``rho(s) < 1e-12`` (the code's policy retrieval)."""
    rho = _float_array("occupancy", occupancy)
    if rho.ndim != 2 or not np.all(np.isfinite(rho)):
        raise ValueError(f"occupancy must be a finite (S, A) array, got shape {rho.shape}")
    rho = np.maximum(rho, 0.0)
    tot = rho.sum(1, keepdims=True)
    return np.where(tot > 1e-12, rho / np.maximum(tot, 1e-300), 1.0 / rho.shape[1])


def _float_array(name: str, value: object) -> np.ndarray:
    """``value`` as a float64 array, or a TypeError naming ``name``."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(value).__name__}")
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers: {exc}") from None


def _check_inputs(model: object, d_expert: object, d_data: object, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(model, TabularMDP):
        raise TypeError(f"model must be a TabularMDP, got {type(model).__name__}")
    S, A = model.n_states, model.n_actions
    dE = _float_array("d_expert", d_expert)
    dI = _float_array("d_data", d_data)
    if dE.shape != (S,) or np.any(dE < 0) or not np.isclose(dE.sum(), 1.0, atol=1e-6):
        raise ValueError(f"d_expert must be a distribution over the {S} states")
    if dI.shape != (S, A) or np.any(dI < 0) or not np.isclose(dI.sum(), 1.0, atol=1e-6):
        raise ValueError(f"d_data must be a distribution over the ({S}, {A}) state-action pairs")
    check_gamma(gamma, allow_one=False)
    return dE, dI


def _flow_matrices(model: TabularMDP, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """``(F, b)`` with ``F rho = b`` the Bellman flow on the flattened ``(S * A,)`` occupancy."""
    S, A = model.n_states, model.n_actions
    B = np.repeat(np.eye(S), A, axis=0)  # (S*A, S): which state each pair belongs to
    P = model.P.reshape(S * A, S)
    return B.T - gamma * P.T, (1.0 - gamma) * model.start


def _solve(problem: Any) -> None:
    import cvxpy as cp

    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError:
        problem.solve(solver=cp.SCS, eps=1e-9, max_iters=200_000)
    if problem.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"the convex program did not solve: status {problem.status}")


def pw_dice_primal(
    model: TabularMDP, d_expert: np.ndarray, d_data: np.ndarray, cost: np.ndarray, *, gamma: float,
    eps1: float = 0.01, eps2: float = 0.01,
) -> DICESolution:  # fmt: skip
    """The PW-DICE primal (module docstring) by cvxpy; ``eps1 = eps2 = 0`` is the Wasserstein LP.

    ``model`` is the (estimated) MDP, ``d_expert`` the expert state occupancy ``(S,)``, ``d_data`` the task-agnostic
    state-action occupancy ``(S, A)``, ``cost`` the ``(S, S)`` ground cost. Defaults ``eps1 = eps2 = 0.01`` are the
    official tabular settings.
    """
    import cvxpy as cp

    dE, dI = _check_inputs(model, d_expert, d_data, gamma)
    S, A = model.n_states, model.n_actions
    c = _float_array("cost", cost)
    if c.shape != (S, S) or not np.all(np.isfinite(c)):
        raise ValueError(f"cost must be a finite ({S}, {S}) array, got shape {c.shape}")
    eps1 = _checks.real("eps1", eps1, low=0.0)
    eps2 = _checks.real("eps2", eps2, low=0.0)
    Pi = cp.Variable((S, S), nonneg=True)
    rho = cp.Variable(S * A, nonneg=True)
    F, b = _flow_matrices(model, gamma)
    rho_s = cp.reshape(rho, (S, A), order="C") @ np.ones(A)
    objective = cp.sum(cp.multiply(c, Pi))
    if eps1 > 0:
        U = np.outer(dI.sum(1), dE) + U_FLOOR
        objective = objective + eps1 * cp.sum(cp.rel_entr(Pi, U))
    if eps2 > 0:
        objective = objective + eps2 * cp.sum(cp.rel_entr(rho, dI.reshape(-1) + DATA_FLOOR))
    constraints = [cp.sum(Pi, axis=1) == rho_s, cp.sum(Pi, axis=0) == dE, F @ rho == b]
    prob = cp.Problem(cp.Minimize(objective), constraints)
    _solve(prob)
    occ = np.maximum(np.asarray(rho.value).reshape(S, A), 0.0)
    return DICESolution(occupancy=occ, policy=policy_from_occupancy(occ), objective=float(prob.value),
                        extra={"coupling": np.maximum(np.asarray(Pi.value), 0.0)})  # fmt: skip


def smodice_kl_tabular(
    model: TabularMDP, d_expert: np.ndarray, d_data: np.ndarray, *, gamma: float, delta: float = 1e-5,
    reward: np.ndarray | None = None,
) -> DICESolution:  # fmt: skip
    """SMODICE-KL's primal ``min_rho -E_rho[R(s)] + KL(rho || d_I)`` under the Bellman flow (cvxpy).

    ``R(s) = log((d_E + delta) / (d_I(s) + delta))`` (the code's ``delta = 1e-5``), or ``reward`` if given.
    """
    import cvxpy as cp

    dE, dI = _check_inputs(model, d_expert, d_data, gamma)
    S, A = model.n_states, model.n_actions
    delta = _checks.real("delta", delta, low=0.0, low_open=True)
    R = np.log((dE + delta) / (dI.sum(1) + delta)) if reward is None else _float_array("reward", reward)
    if R.shape != (S,) or not np.all(np.isfinite(R)):
        raise ValueError(f"reward must be a finite ({S},) array")
    rho = cp.Variable(S * A, nonneg=True)
    F, b = _flow_matrices(model, gamma)
    r_sa = np.repeat(R, A)
    prob = cp.Problem(cp.Minimize(-r_sa @ rho + cp.sum(cp.rel_entr(rho, dI.reshape(-1) + DATA_FLOOR))), [F @ rho == b])
    _solve(prob)
    occ = np.maximum(np.asarray(rho.value).reshape(S, A), 0.0)
    return DICESolution(occupancy=occ, policy=policy_from_occupancy(occ), objective=float(prob.value),
                        extra={"reward": R})  # fmt: skip


def smodice_chi_tabular(
    model: TabularMDP, d_expert: np.ndarray, d_data: np.ndarray, *, gamma: float, delta: float = 1e-12
) -> DICESolution:
    """SMODICE-chi-square: ``max_rho E_rho[R(s)] - 1/2 sum d_I (rho / d_I - 1)^2`` under the Bellman flow."""
    import cvxpy as cp

    dE, dI = _check_inputs(model, d_expert, d_data, gamma)
    S, A = model.n_states, model.n_actions
    delta = _checks.real("delta", delta, low=0.0, low_open=True)
    R = np.log((dE + delta) / (dI.sum(1) + delta))
    d = dI.reshape(-1) + 1e-10
    rho = cp.Variable(S * A, nonneg=True)
    F, b = _flow_matrices(model, gamma)
    # sum d (rho/d - 1)^2 = sum rho^2 / d - 2 sum rho + sum d
    penalty = cp.sum(cp.multiply(1.0 / d, cp.square(rho))) - 2 * cp.sum(rho) + d.sum()
    prob = cp.Problem(cp.Maximize(np.repeat(R, A) @ rho - 0.5 * penalty), [F @ rho == b])
    _solve(prob)
    occ = np.maximum(np.asarray(rho.value).reshape(S, A), 0.0)
    return DICESolution(occupancy=occ, policy=policy_from_occupancy(occ), objective=float(prob.value))


def lobsdice_tabular(
    model: TabularMDP, d_expert_pairs: np.ndarray, d_data: np.ndarray, *, gamma: float, alpha: float = 0.01,
    delta: float = 1e-4,
) -> DICESolution:  # fmt: skip
    """LobsDICE's tabular dual (the code's cvxpy form) on state-pair occupancies:

    ``min_V (1 - gamma) p0.V + (1 + alpha) sum_{s,s'} d_I(s, s') exp[(R(s, s') + gamma V(s') - V(s)) / (1 + alpha) - 1]``
    with ``R = log((d_E(s, s') + delta) / (d_I(s, s') + delta))``; policy ``pi(a|s) ∝ d_I(s, a) sum_s' P(s'|s, a)
    exp[(R + gamma V(s') - V(s)) / (1 + alpha)]``.
    """
    import cvxpy as cp

    if not isinstance(model, TabularMDP):
        raise TypeError(f"model must be a TabularMDP, got {type(model).__name__}")
    S = model.n_states
    dEss = _float_array("d_expert_pairs", d_expert_pairs)
    if dEss.shape != (S, S) or np.any(dEss < 0) or not np.isclose(dEss.sum(), 1.0, atol=1e-6):
        raise ValueError(f"d_expert_pairs must be a distribution over ({S}, {S}) state pairs")
    _, dI = _check_inputs(model, np.full(S, 1.0 / S), d_data, gamma)
    alpha = _checks.real("alpha", alpha, low=0.0)
    delta = _checks.real("delta", delta, low=0.0, low_open=True)
    dIss = np.einsum("sa,sak->sk", dI, model.P)
    R = np.log((dEss + delta) / (dIss + delta))
    V = cp.Variable(S)
    one = np.ones(S)
    adv = R + gamma * cp.reshape(one, (S, 1), order="C") @ cp.reshape(V, (1, S), order="C") - cp.reshape(
        V, (S, 1), order="C"
    ) @ cp.reshape(one, (1, S), order="C")
    obj = (1 - gamma) * model.start @ V + (1 + alpha) * cp.sum(cp.multiply(dIss, cp.exp(adv / (1 + alpha) - 1)))
    prob = cp.Problem(cp.Minimize(obj))
    _solve(prob)
    v = np.asarray(V.value)
    A_ss = R + gamma * v[None, :] - v[:, None]
    w = np.einsum("sak,sk->sa", model.P, np.exp(np.clip(A_ss / (1 + alpha), -700, 700)))
    occ = dI * w
    occ = occ / occ.sum()
    return DICESolution(occupancy=occ, policy=policy_from_occupancy(occ), objective=float(prob.value), extra={"V": v})


def pw_dice_dual_loss(
    pair_scores: torch.Tensor, flow_residuals: torch.Tensor, *, init_term: torch.Tensor, expert_term: torch.Tensor,
    lam3: torch.Tensor, eps1: float, eps2: float, pair_log_weights: torch.Tensor | None = None,
    flow_log_weights: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """The PW-DICE dual objective (section 4.2; minimised), from its building blocks:

    ``eps1 log E_w1 exp(pair_scores / eps1) + eps2 log E_w2 exp((flow_residuals + lam3) / eps2) - init_term
    - expert_term - lam3`` with ``pair_scores = lambda1(s_i) + lambda2(s_j) - c(s_i, s_j)``, ``flow_residuals =
    lambda0(s) - gamma (1 - done) lambda0(s') - lambda1(s)`` (or its expectation over ``s'``), ``init_term =
    (1 - gamma) E_p0 lambda0``, ``expert_term = E_E lambda2``. The expectations are uniform over the entries (a
    minibatch) unless log-weights are given (exact tabular expectations; weights of total mass ``m`` add
    ``eps log m`` to a term, as an unnormalised reference measure does in the primal).
    """
    eps1 = _checks.real("eps1", eps1, low=0.0, low_open=True)
    eps2 = _checks.real("eps2", eps2, low=0.0, low_open=True)
    for name, v in (("pair_scores", pair_scores), ("flow_residuals", flow_residuals), ("init_term", init_term),
                    ("expert_term", expert_term), ("lam3", lam3)):  # fmt: skip
        _checks.finite_tensor(name, v)
    for name, v in (("pair_log_weights", pair_log_weights), ("flow_log_weights", flow_log_weights)):
        if v is not None and (_checks.tensor(name, v).isnan().any() or (v == math.inf).any()):
            raise ValueError(f"{name} must be finite or -inf (zero weight), got NaN or +inf entries")
    if pair_scores.numel() == 0 or flow_residuals.numel() == 0:
        raise ValueError("pair_scores and flow_residuals must be non-empty")
    p = pair_scores.reshape(-1) / eps1
    f = (flow_residuals.reshape(-1) + lam3) / eps2
    p = p - np.log(p.numel()) if pair_log_weights is None else p + pair_log_weights.reshape(-1)
    f = f - np.log(f.numel()) if flow_log_weights is None else f + flow_log_weights.reshape(-1)
    return eps1 * torch.logsumexp(p, 0) + eps2 * torch.logsumexp(f, 0) - init_term - expert_term - lam3


def pw_dice_tabular_dual(
    model: TabularMDP, d_expert: np.ndarray, d_data: np.ndarray, cost: np.ndarray, *, gamma: float,
    eps1: float = 0.1, eps2: float = 0.1, max_iter: int = 2000,
) -> DICESolution:  # fmt: skip
    """Minimise the PW-DICE dual over tables ``lambda0, lambda1, lambda2`` (and ``lambda3``) in float64 with L-BFGS,
    exact expectations (``E_{s'} lambda0(s')`` through ``model.P``). ``objective`` is ``-min L``, which equals the
    primal optimum by strong duality; the policy is the weighted-BC solution ``pi ∝ d_I exp(flow / eps2)``.
    """
    dE, dI = _check_inputs(model, d_expert, d_data, gamma)
    S, A = model.n_states, model.n_actions
    c = _float_array("cost", cost)
    if c.shape != (S, S) or not np.all(np.isfinite(c)):
        raise ValueError(f"cost must be a finite ({S}, {S}) array, got shape {c.shape}")
    eps1 = _checks.real("eps1", eps1, low=0.0, low_open=True)
    eps2 = _checks.real("eps2", eps2, low=0.0, low_open=True)
    max_iter = check_int("max_iter", max_iter, 1)
    t = lambda x: torch.as_tensor(x, dtype=torch.float64)  # noqa: E731
    P, C, p0, dE_t = t(model.P), t(c), t(model.start), t(dE)
    # the primal's floored reference measures, unnormalised: then the dual is exact for the primal as solved
    log_w1 = torch.log(t(np.outer(dI.sum(1), dE) + U_FLOOR))
    log_w2 = torch.log(t(dI + DATA_FLOOR))
    params = torch.zeros(3 * S + 1, dtype=torch.float64, requires_grad=True)

    def parts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        lam0, lam1, lam2, lam3 = x[:S], x[S : 2 * S], x[2 * S : 3 * S], x[3 * S]
        pair = lam1[:, None] + lam2[None, :] - C
        flow = lam0[:, None] - gamma * P @ lam0 - lam1[:, None]
        return lam0, lam2, lam3, pair, flow

    def loss_fn(x: torch.Tensor) -> torch.Tensor:
        lam0, lam2, lam3, pair, flow = parts(x)
        return pw_dice_dual_loss(pair, flow, init_term=(1 - gamma) * p0 @ lam0, expert_term=dE_t @ lam2, lam3=lam3,
                                 eps1=eps1, eps2=eps2, pair_log_weights=log_w1, flow_log_weights=log_w2)  # fmt: skip

    opt = torch.optim.LBFGS([params], lr=1.0, max_iter=max_iter, tolerance_grad=1e-12, tolerance_change=1e-14,
                            history_size=50, line_search_fn="strong_wolfe")  # fmt: skip

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn(params)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        loss = loss_fn(params)
        _, _, lam3, _, flow = parts(params)
        logits = (flow + lam3) / eps2 + log_w2
        occ = torch.softmax(logits.reshape(-1), 0).reshape(S, A).numpy()
    return DICESolution(occupancy=occ, policy=policy_from_occupancy(occ), objective=-float(loss),
                        extra={"lambda": params.detach().numpy().copy()})  # fmt: skip


def occupancy_metrics(task: ArbitraryTask, policy: np.ndarray) -> dict[str, float]:
    """The code's evaluation in the true MDP: L1 distance of state and state-pair occupancies to the expert's,
    and the regret ``d_E(target) - d_pi(target)`` on the target state's occupancy."""
    if not isinstance(task, ArbitraryTask):
        raise TypeError(f"task must be an ArbitraryTask, got {type(task).__name__}")
    d_pi = state_occupancy(task.mdp, policy, task.gamma)
    d_e = state_occupancy(task.mdp, task.expert_policy, task.gamma)
    pair_pi = state_pair_occupancy(task.mdp, policy, task.gamma)
    pair_e = state_pair_occupancy(task.mdp, task.expert_policy, task.gamma)
    return {
        "state_l1": float(np.abs(d_pi - d_e).sum()),
        "pair_l1": float(np.abs(pair_pi - pair_e).sum()),
        "regret": float(d_e[task.target] - d_pi[task.target]),
    }
