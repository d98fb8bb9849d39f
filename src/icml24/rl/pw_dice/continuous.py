"""Continuous PW-DICE: contrastive state metric, learned dual networks, weighted behaviour cloning, SMODICE-KL
and BC baselines (Yan, Schwing, Wang; ICML 2024, arXiv:2311.01331, section 4.2 and the official ``ours.py``).

The dual of :mod:`icml24.rl.pw_dice.tabular` with networks ``lambda0, lambda1, lambda2: S -> R`` and a scalar
``lambda3``, expectations replaced by minibatch means (task-agnostic batch ``I`` of ``(s, a, s', done)``, expert
state batch ``E`` drawn with the discounted weights ``(1 - gamma) gamma^t``, initial states of ``I``)::

    L = eps1 log mean_{i in I, j in E} exp[(lambda1(s_i) + lambda2(s_j) - c(s_i, s_j)) / eps1]
      + eps2 log mean_{I} exp[(lambda0(s) - gamma (1 - done) lambda0(s') - lambda1(s) + lambda3) / eps2]
      - (1 - gamma) mean_{p0} lambda0 - mean_E lambda2 - lambda3 + kappa (mean lambda2(E)^2 + mean lambda0(I)^2
      + mean lambda1(I)^2)

with the ground cost ``c(s_i, s_j) = k ||g(s_i) - g(s_j)||^2 - alpha R(s_i)``: ``g`` an L2-normalised embedding
trained by InfoNCE on consecutive states of ``I`` (logits ``g(s)^T W~ g(s')``, ``W~ = softplus(W) softplus(W)^T``;
official ``Contrastive_PD``), ``R = log D / (1 - D)`` a SMODICE expert-vs-data discriminator (the README commands'
``scale_dist_with_occupancy 1``). The policy maximises ``sum w log pi(a | s)`` with ``w = exp[(lambda0(s) -
gamma (1 - done) lambda0(s') - lambda1(s) + lambda3) / eps2]`` normalised by its maximum over the data.

The task: :class:`~icml24.rl.envs.BatchedDeceptivePointMass` (2-D point mass, a wall between start and goal,
episode ends at the goal, horizon 100), a scripted waypoint expert, states ``(x/3, y/3, v_x, v_y)``; optionally
seen through a fixed distorting map (:func:`distort_states`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from icml24.rl import _checks
from icml24.rl.offline import StateDataset, TransitionDataset

__all__ = [
    "ContrastiveMetric",
    "DualConfig",
    "GaussianPolicy",
    "ImitationConfig",
    "POINT_MASS_PLANS",
    "collect_point_mass",
    "distort_states",
    "pw_dice_weights",
    "run_imitation",
    "scripted_expert",
    "smodice_kl_weights",
    "train_contrastive_metric",
    "train_discriminator",
    "weighted_bc",
]

DTYPE = torch.float64  # the dual's log-sum-exp over minibatches is touchy in float32 (official code: double)


def _mlp(n_in: int, n_out: int, hidden: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = n_in
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    layers.append(nn.Linear(d, n_out))
    return nn.Sequential(*layers).to(DTYPE)


def _as_states(name: str, x: Any) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.as_tensor(x)
    t = _checks.finite_tensor(name, x)
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty (N, d) array of states, got shape {tuple(t.shape)}")
    return t.to(DTYPE)


# ------------------------------------------------------------------------------------------------ metric


class ContrastiveMetric(nn.Module):
    """``c(x, y) = scale ||g(x) - g(y)||^2`` with ``g`` an L2-normalised MLP embedding (so ``0 <= c <= 4 scale``,
    ``c(x, x) = 0``, symmetric), trained by InfoNCE on consecutive states (:func:`train_contrastive_metric`)."""

    def __init__(self, *, state_dim: int, embed_dim: int = 32, hidden: Sequence[int] = (128, 128),
                 scale: float = 1.0) -> None:  # fmt: skip
        super().__init__()
        state_dim = _checks.integer("state_dim", state_dim, low=1)
        embed_dim = _checks.integer("embed_dim", embed_dim, low=1)
        self.scale = _checks.real("scale", scale, low=0.0, low_open=True)
        self.encoder = _mlp(state_dim, embed_dim, hidden)
        self.W = nn.Parameter(torch.eye(embed_dim, dtype=DTYPE) + 0.01 * torch.randn(embed_dim, embed_dim, dtype=DTYPE))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The unit-norm embedding ``g(x)``."""
        return nn.functional.normalize(self.encoder(x.to(DTYPE)), dim=-1)

    def logits(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """InfoNCE logits ``g(x_i)^T W~ g(y_j)``, ``W~ = softplus(W) softplus(W)^T`` (positive semi-definite)."""
        w = nn.functional.softplus(self.W)
        return self.encode(x) @ (w @ w.T) @ self.encode(y).T

    def pairwise(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(len(x), len(y))`` costs ``scale ||g(x_i) - g(y_j)||^2 = scale (2 - 2 g(x_i).g(y_j))``."""
        return self.scale * (2.0 - 2.0 * self.encode(x) @ self.encode(y).T).clamp_min(0.0)


def train_contrastive_metric(
    states: Any, next_states: Any, *, steps: int = 2000, batch_size: int = 512, lr: float = 1e-3, scale: float = 1.0,
    embed_dim: int = 32, hidden: Sequence[int] = (128, 128), seed: int = 0,
) -> ContrastiveMetric:  # fmt: skip
    """Fit a :class:`ContrastiveMetric` by InfoNCE: each ``s`` must pick its own ``s'`` among the batch's next states
    (cross-entropy with the diagonal as positives; Adam, gradient clipping at 1; official ``contrastive_learning.py``)."""
    s, s2 = _as_states("states", states), _as_states("next_states", next_states)
    if s.shape != s2.shape:
        raise ValueError(f"next_states must have the shape of states {tuple(s.shape)}, got {tuple(s2.shape)}")
    steps = _checks.integer("steps", steps, low=0)
    batch_size = _checks.integer("batch_size", batch_size, low=2)
    lr = _checks.real("lr", lr, low=0.0, low_open=True)
    seed = _checks.integer("seed", seed, low=0)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = ContrastiveMetric(state_dim=s.shape[1], embed_dim=embed_dim, hidden=hidden, scale=scale)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    b = min(batch_size, len(s))
    labels = torch.arange(b)
    for _ in range(steps):
        idx = torch.randint(len(s), (b,), generator=gen)
        loss = nn.functional.cross_entropy(model.logits(s[idx], s2[idx]), labels)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


# ------------------------------------------------------------------------------------------------ discriminator


def train_discriminator(
    expert_states: Any, data_states: Any, *, steps: int = 1000, batch_size: int = 256, lr: float = 3e-4,
    grad_penalty: float = 10.0, hidden: Sequence[int] = (128, 128), seed: int = 0,
) -> nn.Module:  # fmt: skip
    """SMODICE's expert-vs-data classifier (logit network); ``R(s) = logit = log D(s) / (1 - D(s))`` estimates
    ``log d_E(s) / d_I(s)``. Binary cross-entropy with a gradient penalty on interpolates (as the official code)."""
    e, d = _as_states("expert_states", expert_states), _as_states("data_states", data_states)
    if e.shape[1] != d.shape[1]:
        raise ValueError(f"expert_states and data_states must have the same state dimension, got {e.shape[1]} and "
                         f"{d.shape[1]}")  # fmt: skip
    steps = _checks.integer("steps", steps, low=0)
    batch_size = _checks.integer("batch_size", batch_size, low=1)
    grad_penalty = _checks.real("grad_penalty", grad_penalty, low=0.0)
    seed = _checks.integer("seed", seed, low=0)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = _mlp(e.shape[1], 1, hidden)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(steps):
        xe = e[torch.randint(len(e), (batch_size,), generator=gen)]
        xd = d[torch.randint(len(d), (batch_size,), generator=gen)]
        le, ld = net(xe), net(xd)
        loss = nn.functional.binary_cross_entropy_with_logits(le, torch.ones_like(le)) + \
            nn.functional.binary_cross_entropy_with_logits(ld, torch.zeros_like(ld))  # fmt: skip
        if grad_penalty > 0:
            u = torch.rand(batch_size, 1, generator=gen, dtype=DTYPE)
            mix = (u * xe + (1 - u) * xd).requires_grad_(True)
            (g,) = torch.autograd.grad(net(mix).sum(), mix, create_graph=True)
            loss = loss + grad_penalty * (g.norm(dim=1) - 1.0).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


# ------------------------------------------------------------------------------------------------ duals


def _tensors(data: TransitionDataset, need_initial: bool = True) -> tuple[torch.Tensor, ...]:
    if not isinstance(data, TransitionDataset):
        raise TypeError(f"data must be a TransitionDataset, got {type(data).__name__}")
    if data.states.ndim != 2 or data.actions.ndim != 2:
        raise ValueError("data must hold continuous (N, d) states and (N, k) actions")
    t = lambda x: torch.as_tensor(np.asarray(x, dtype=np.float64))  # noqa: E731
    init = data.initial_states
    if need_initial and len(init) == 0:
        raise ValueError("data must contain initial states (steps == 0)")
    return t(data.states), t(data.actions), t(data.next_states), t(data.dones.astype(np.float64)), t(init)


def _expert_sampler(expert: StateDataset, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(expert, StateDataset):
        raise TypeError(f"expert must be a StateDataset, got {type(expert).__name__}")
    if expert.states.ndim != 2:
        raise ValueError("expert must hold continuous (N, d) states")
    w = (1 - gamma) * gamma ** expert.steps.astype(np.float64)
    return torch.as_tensor(np.asarray(expert.states, dtype=np.float64)), torch.as_tensor(w / w.sum())


@dataclass(frozen=True)
class DualConfig:
    """Hyper-parameters of the learned duals (defaults: the README's "normal" command, scaled to a CPU)."""

    eps1: float = 0.5
    """KL weight on the coupling (``epsilon_1``)."""
    eps2: float = 0.5
    """KL weight on the learner occupancy (``epsilon_2``)."""
    gamma: float = 0.99
    """Discount (the README uses 0.999 for 1000-step MuJoCo episodes; our episodes are 100 steps)."""
    lr: float = 3e-4
    """Adam step size of the dual networks."""
    steps: int = 3000
    """Dual gradient steps."""
    batch_size: int = 512
    """Every sampler's batch size (task-agnostic, expert, initial)."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden widths of each dual network."""
    kappa: float = 1e-5
    """Small L2 penalty on the dual outputs (``lambda2_reg``)."""
    occupancy_cost: float = 1.0
    """``alpha``: the cost subtracts ``alpha R(s_i)`` (``scale_dist_with_occupancy``)."""

    def __post_init__(self) -> None:
        for name in ("eps1", "eps2", "lr"):
            _checks.real(name, getattr(self, name), low=0.0, low_open=True)
        _checks.real("gamma", self.gamma, low=0.0, high=1.0, high_open=True)
        for name in ("kappa", "occupancy_cost"):
            _checks.real(name, getattr(self, name), low=0.0)
        _checks.integer("steps", self.steps, low=0)
        _checks.integer("batch_size", self.batch_size, low=1)
        if not isinstance(self.hidden, tuple) or not all(isinstance(h, int) and h >= 1 for h in self.hidden):
            raise TypeError(f"hidden must be a tuple of positive ints, got {self.hidden!r}")


def pw_dice_weights(
    data: TransitionDataset, expert: StateDataset, *, cost: Any, reward: Any = None, config: DualConfig | None = None,
    seed: int = 0, initial_states: Any = None,
) -> np.ndarray:  # fmt: skip
    """Train the PW-DICE dual networks (module docstring) and return the weighted-BC weights of ``data``'s
    transitions, ``exp(flow / eps2)`` normalised to a maximum of 1.

    ``cost(x, y) -> (len(x), len(y))`` is the ground cost (a :class:`ContrastiveMetric`'s ``pairwise``, or a
    Euclidean distance); ``reward(x) -> (len(x),)`` is the discriminator's ``R`` (used when
    ``config.occupancy_cost > 0``); ``initial_states`` are samples of ``p0`` (default: ``data``'s step-0 states).
    """
    from icml24.rl.pw_dice.tabular import pw_dice_dual_loss

    cfg = config if config is not None else DualConfig()
    if not isinstance(cfg, DualConfig):
        raise TypeError(f"config must be a DualConfig, got {type(cfg).__name__}")
    if not callable(cost):
        raise TypeError("cost must be a callable (x, y) -> pairwise cost matrix")
    if cfg.occupancy_cost > 0 and not callable(reward):
        raise TypeError("reward must be a callable x -> R(x) when config.occupancy_cost > 0")
    seed = _checks.integer("seed", seed, low=0)
    s, _, s2, done, init = _tensors(data, need_initial=initial_states is None)
    if initial_states is not None:
        init = _as_states("initial_states", initial_states)
    xe, we = _expert_sampler(expert, cfg.gamma)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    d = s.shape[1]
    nets = nn.ModuleList([_mlp(d, 1, cfg.hidden) for _ in range(3)])
    lam3 = nn.Parameter(torch.zeros((), dtype=DTYPE))
    opt = torch.optim.Adam([*nets.parameters(), lam3], lr=cfg.lr)
    B = cfg.batch_size
    r_all = None
    if cfg.occupancy_cost > 0:
        with torch.no_grad():
            r_all = torch.as_tensor(reward(s)).reshape(-1).to(DTYPE)
    for _ in range(cfg.steps):
        i1 = torch.randint(len(s), (B,), generator=gen)  # task-agnostic states for the coupling
        ie = torch.multinomial(we, B, replacement=True, generator=gen)
        i2 = torch.randint(len(s), (B,), generator=gen)  # transitions for the flow term
        i0 = torch.randint(len(init), (B,), generator=gen)
        with torch.no_grad():
            c = cost(s[i1], xe[ie])
            if r_all is not None:
                c = c - cfg.occupancy_cost * r_all[i1][:, None]
        l1_i, l2_e = nets[1](s[i1]).squeeze(-1), nets[2](xe[ie]).squeeze(-1)
        pair = l1_i[:, None] + l2_e[None, :] - c
        l0_s, l0_n, l1_s = nets[0](s[i2]).squeeze(-1), nets[0](s2[i2]).squeeze(-1), nets[1](s[i2]).squeeze(-1)
        flow = l0_s - cfg.gamma * (1 - done[i2]) * l0_n - l1_s
        init_term = (1 - cfg.gamma) * nets[0](init[i0]).mean()
        loss = pw_dice_dual_loss(pair, flow, init_term=init_term, expert_term=l2_e.mean(), lam3=lam3,
                                 eps1=cfg.eps1, eps2=cfg.eps2)  # fmt: skip
        loss = loss + cfg.kappa * (l2_e.mean() ** 2 + l0_s.mean() ** 2 + l1_s.mean() ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        flow = nets[0](s).squeeze(-1) - cfg.gamma * (1 - done) * nets[0](s2).squeeze(-1) - nets[1](s).squeeze(-1)
        logw = (flow + lam3) / cfg.eps2
    return _normalised_weights(logw)


def _normalised_weights(logw: torch.Tensor) -> np.ndarray:
    """``exp(logw - max)``: the maximum weight is 1, and weights below 1e-6 are dropped (set to 0) as in the code."""
    w = torch.exp(logw - logw.max()).numpy()
    w[w < 1e-6] = 0.0
    return w


def smodice_kl_weights(
    data: TransitionDataset, *, reward: Any, config: DualConfig | None = None, seed: int = 0
) -> np.ndarray:
    """SMODICE-KL (Ma et al., 2022): ``min_V (1 - gamma) E_p0 V + log E_I exp[R(s) + gamma (1 - done) V(s') - V(s)]``;
    weights ``exp[R + gamma (1 - done) V' - V]`` normalised to a maximum of 1."""
    cfg = config if config is not None else DualConfig()
    if not isinstance(cfg, DualConfig):
        raise TypeError(f"config must be a DualConfig, got {type(cfg).__name__}")
    if not callable(reward):
        raise TypeError("reward must be a callable x -> R(x)")
    seed = _checks.integer("seed", seed, low=0)
    s, _, s2, done, init = _tensors(data)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    V = _mlp(s.shape[1], 1, cfg.hidden)
    opt = torch.optim.Adam(V.parameters(), lr=cfg.lr)
    with torch.no_grad():
        r_all = torch.as_tensor(reward(s)).reshape(-1).to(DTYPE)
    B = cfg.batch_size
    for _ in range(cfg.steps):
        i2 = torch.randint(len(s), (B,), generator=gen)
        i0 = torch.randint(len(init), (B,), generator=gen)
        adv = r_all[i2] + cfg.gamma * (1 - done[i2]) * V(s2[i2]).squeeze(-1) - V(s[i2]).squeeze(-1)
        loss = (1 - cfg.gamma) * V(init[i0]).mean() + torch.logsumexp(adv, 0) - math.log(B)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logw = r_all + cfg.gamma * (1 - done) * V(s2).squeeze(-1) - V(s).squeeze(-1)
    return _normalised_weights(logw)


class GaussianPolicy(nn.Module):
    """``pi(a | s) = N(tanh(mu(s)), exp(log_std)^2)``; acts with the mean."""

    def __init__(self, state_dim: int, action_dim: int, hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        state_dim = _checks.integer("state_dim", state_dim, low=1)
        action_dim = _checks.integer("action_dim", action_dim, low=1)
        self.mu = _mlp(state_dim, action_dim, hidden)
        self.log_std = nn.Parameter(torch.full((action_dim,), -0.5, dtype=DTYPE))

    def log_prob(self, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        mean = torch.tanh(self.mu(s))
        std = self.log_std.clamp(-5, 1).exp()
        return torch.distributions.Normal(mean, std).log_prob(a).sum(-1)

    @torch.no_grad()
    def act(self, s: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.mu(s.to(DTYPE)))


def weighted_bc(
    data: TransitionDataset, weights: Any = None, *, steps: int = 3000, batch_size: int = 256, lr: float = 1e-3,
    hidden: Sequence[int] = (128, 128), seed: int = 0,
) -> GaussianPolicy:  # fmt: skip
    """Weighted behaviour cloning ``max sum_i w_i log pi(a_i | s_i)`` (transitions drawn with probability
    ``∝ w``, which has the same expected gradient); ``weights=None`` is plain BC."""
    s, a, _, _, _ = _tensors(data)
    steps = _checks.integer("steps", steps, low=0)
    batch_size = _checks.integer("batch_size", batch_size, low=1)
    seed = _checks.integer("seed", seed, low=0)
    if weights is None:
        w = torch.ones(len(s), dtype=DTYPE)
    else:
        w = torch.as_tensor(np.asarray(weights, dtype=np.float64))
        if w.shape != (len(s),) or not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError(f"weights must be {len(s)} finite non-negative numbers with a positive sum")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    pi = GaussianPolicy(s.shape[1], a.shape[1], hidden)
    opt = torch.optim.Adam(pi.parameters(), lr=lr)
    for _ in range(steps):
        idx = torch.multinomial(w, batch_size, replacement=True, generator=gen)
        loss = -pi.log_prob(s[idx], a[idx]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return pi.eval()


# ------------------------------------------------------------------------------------------------ task


WAYPOINT = (-3.1, -0.2)
"""The scripted expert first drives here (left of the wall's lower end), then to the goal."""


def scripted_expert(obs: torch.Tensor, *, gain: float = 2.0, damping: float = 1.0) -> torch.Tensor:
    """Waypoint PD controller on point-mass observations ``(x/3, y/3, v_x, v_y, ...)``: drive to
    :data:`WAYPOINT` until ``x < -2.7``, then to the goal ``(-3.3, 3.3)``; actions clipped to ``[-1, 1]``."""
    o = _checks.finite_tensor("obs", obs)
    if o.ndim != 2 or o.shape[1] < 4:
        raise ValueError(f"obs must be (N, >=4) point-mass observations, got shape {tuple(o.shape)}")
    p, v = o[:, :2] * 3.0, o[:, 2:4]
    wp = torch.tensor(WAYPOINT, dtype=o.dtype)
    goal = torch.tensor((-3.3, 3.3), dtype=o.dtype)
    target = torch.where((p[:, :1] < -2.7), goal, wp)
    return torch.clamp(gain * (target - p) - damping * v, -1.0, 1.0)


_DISTORT_SEED = 12345


def distort_states(states: Any) -> np.ndarray:
    """A fixed distorting representation of the 4-D states: ``z = Q diag(8, 1, 0.25, 3) s + 0.5 sin(3 M s)`` with
    ``Q`` a random rotation and ``M`` random (seeded constants): distances in ``z`` misstate distances in ``s``,
    per-dimension normalisation cannot undo the mixing, and the map is smooth and (locally) invertible."""
    if isinstance(states, (str, bytes)) or states is None:
        raise TypeError(f"states must be a (N, 4) array, got {type(states).__name__}")
    x = np.asarray(states, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 4 or not np.all(np.isfinite(x)):
        raise ValueError(f"states must be a finite (N, 4) array, got shape {x.shape}")
    rng = np.random.default_rng(_DISTORT_SEED)
    Q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    A = Q @ np.diag([8.0, 1.0, 0.25, 3.0])
    M = rng.standard_normal((4, 4)) / 2.0
    return x @ A.T + 0.5 * np.sin(3.0 * x @ M.T)


def collect_point_mass(policy: Any, *, episodes: int, seed: int, action_noise: float = 0.0,
                       horizon: int = 100) -> tuple[TransitionDataset, dict[str, float]]:  # fmt: skip
    """Roll ``policy(obs) -> actions`` (or ``"random"``: uniform in ``[-1, 1]^2``) for ``episodes`` parallel
    episodes of the point mass; transitions with states ``(x/3, y/3, v_x, v_y)``; plus the success rate (reached
    the goal) and the mean return."""
    from icml24.rl.envs import BatchedDeceptivePointMass

    episodes = _checks.integer("episodes", episodes, low=1)
    seed = _checks.integer("seed", seed, low=0)
    action_noise = _checks.real("action_noise", action_noise, low=0.0)
    env = BatchedDeceptivePointMass(num_envs=episodes, max_episode_steps=horizon, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    alive = torch.ones(episodes, dtype=torch.bool)
    success = torch.zeros(episodes, dtype=torch.bool)
    ret = torch.zeros(episodes, dtype=torch.float64)
    S, A, S2, D, T = [], [], [], [], []
    for t in range(horizon):
        if isinstance(policy, str) and policy == "random":
            act = torch.rand(episodes, 2, generator=gen, dtype=torch.float64) * 2 - 1
        else:
            act = torch.as_tensor(policy(obs)).to(torch.float64)
            if action_noise > 0:
                act = act + action_noise * torch.randn(episodes, 2, generator=gen, dtype=torch.float64)
            act = act.clamp(-1.0, 1.0)
        nxt, r, term, trunc, info = env.step(act)
        done = term | trunc
        real_next = torch.where(done[:, None], info["final_obs"], nxt) if bool(done.any()) else nxt
        idx = alive.nonzero().squeeze(-1)
        S.append(obs[idx, :4].clone())
        A.append(act[idx].clone())
        S2.append(real_next[idx, :4].clone())
        D.append(term[idx].clone())
        T.append(torch.full((len(idx),), t, dtype=torch.int64))
        ret = ret + torch.where(alive, r, torch.zeros_like(r))
        success |= alive & term
        alive &= ~done
        obs = nxt
        if not bool(alive.any()):
            break
    data = TransitionDataset(states=torch.cat(S).numpy(), actions=torch.cat(A).numpy(),
                             next_states=torch.cat(S2).numpy(), dones=torch.cat(D).numpy().astype(bool),
                             steps=torch.cat(T).numpy())  # fmt: skip
    return data, {"success_rate": float(success.double().mean()), "mean_return": float(ret.mean())}


# ------------------------------------------------------------------------------------------------ experiment


@dataclass(frozen=True)
class ImitationConfig:
    """One continuous imitation run (defaults: the full-scale reproduction)."""

    variant: str = "normal"
    """``"normal"`` or ``"distorted"`` (every state seen through :func:`distort_states`)."""
    expert_episodes: int = 5
    """Expert trajectories whose states form the expert dataset (TS)."""
    data_expert_episodes: int = 20
    """Noisy expert trajectories in the task-agnostic dataset (TA), with actions."""
    data_random_episodes: int = 200
    """Uniform-random-policy trajectories in TA."""
    expert_noise: float = 0.3
    """Std of the Gaussian action noise of the expert in TA (TS uses a third of it)."""
    metric_steps: int = 500
    """InfoNCE steps of the contrastive metric."""
    metric_scale: float = 5.0
    """``k`` in ``c = k ||g(x) - g(y)||^2`` (``dist_scale``); also multiplies the Euclidean cost."""
    disc_steps: int = 300
    """Discriminator steps."""
    dual_steps: int = 1000
    """Dual network steps (PW-DICE and SMODICE)."""
    bc_steps: int = 1000
    """(Weighted) BC steps."""
    batch_size: int = 256
    """Batch size of every sampler of the duals (the coupling term sees batch_size^2 pairs)."""
    hidden: int = 64
    """Width of the two hidden layers of every network."""
    eval_episodes: int = 100
    """Evaluation episodes of the final deterministic policy."""
    eps1: float = 0.5
    """PW-DICE ``epsilon_1``."""
    eps2: float = 0.5
    """PW-DICE ``epsilon_2``."""

    def __post_init__(self) -> None:
        if self.variant not in ("normal", "distorted"):
            raise ValueError(f"variant must be 'normal' or 'distorted', got {self.variant!r}")
        for name in ("expert_episodes", "data_expert_episodes", "data_random_episodes", "eval_episodes", "hidden",
                     "batch_size"):  # fmt: skip
            _checks.integer(name, getattr(self, name), low=1)
        for name in ("metric_steps", "disc_steps", "dual_steps", "bc_steps"):
            _checks.integer(name, getattr(self, name), low=0)
        for name in ("eps1", "eps2", "metric_scale"):
            _checks.real(name, getattr(self, name), low=0.0, low_open=True)
        _checks.real("expert_noise", self.expert_noise, low=0.0)


METHODS = ("pw_dice_learned", "pw_dice_euclid", "smodice_kl", "bc")
"""Continuous methods: PW-DICE with the learned / Euclidean cost, SMODICE-KL, BC on the task-agnostic data."""

POINT_MASS_PLANS: dict[str, dict[str, Any]] = {
    "smoke": {"variants": ("normal",), "methods": METHODS, "seeds": 1,
              "config": {"expert_episodes": 2, "data_expert_episodes": 2, "data_random_episodes": 10,
                         "metric_steps": 20, "disc_steps": 20, "dual_steps": 20, "bc_steps": 20, "hidden": 16,
                         "eval_episodes": 10}},
    "full": {"variants": ("normal", "distorted"), "methods": METHODS, "seeds": 10, "config": {}},
}  # fmt: skip
"""Point-mass runs per scale (the quick scale runs the tabular experiment only)."""


def _normaliser(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(0), x.std(0) + 1e-6


def run_imitation(config: ImitationConfig, *, method: str, seed: int) -> dict[str, Any]:
    """Generate TS/TA for ``seed``, train ``method``, evaluate the deterministic policy on the point mass."""
    if not isinstance(config, ImitationConfig):
        raise TypeError(f"config must be an ImitationConfig, got {type(config).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    seed = _checks.integer("seed", seed, low=0)
    torch.set_num_threads(1)
    c = config
    hid = (c.hidden, c.hidden)
    ts, ts_stats = collect_point_mass(scripted_expert, episodes=c.expert_episodes, seed=1000 + seed,
                                      action_noise=c.expert_noise / 3)  # fmt: skip
    ta_e, ta_e_stats = collect_point_mass(scripted_expert, episodes=c.data_expert_episodes, seed=2000 + seed,
                                          action_noise=c.expert_noise)  # fmt: skip
    ta_r, rand_stats = collect_point_mass("random", episodes=c.data_random_episodes, seed=3000 + seed)
    cat = lambda f: np.concatenate([getattr(ta_e, f), getattr(ta_r, f)])  # noqa: E731
    rep = distort_states if c.variant == "distorted" else (lambda x: np.asarray(x, dtype=np.float64))
    mu, sd = _normaliser(rep(cat("states")))
    view = lambda x: (rep(x) - mu) / sd  # noqa: E731  the representation the learner sees, normalised
    data = TransitionDataset(states=view(cat("states")), actions=cat("actions"), next_states=view(cat("next_states")),
                             dones=cat("dones"), steps=cat("steps"))  # fmt: skip
    expert = StateDataset(states=view(ts.states), next_states=view(ts.next_states), steps=ts.steps)
    dcfg = DualConfig(eps1=c.eps1, eps2=c.eps2, steps=c.dual_steps, hidden=hid, batch_size=c.batch_size)
    weights = None
    extra: dict[str, Any] = {}
    if method != "bc":
        disc = train_discriminator(expert.states, data.states, steps=c.disc_steps, hidden=hid, seed=seed)
        reward = lambda x: disc(torch.as_tensor(x, dtype=DTYPE)).squeeze(-1)  # noqa: E731
        if method == "smodice_kl":
            weights = smodice_kl_weights(data, reward=reward, config=dcfg, seed=seed)
        else:
            if method == "pw_dice_learned":
                non_term = ~data.dones
                metric = train_contrastive_metric(data.states[non_term], data.next_states[non_term],
                                                  steps=c.metric_steps, scale=c.metric_scale, hidden=hid, seed=seed)  # fmt: skip
                cost = metric.pairwise
            else:
                cost = lambda x, y: c.metric_scale * torch.cdist(x, y)  # noqa: E731
            weights = pw_dice_weights(data, expert, cost=cost, reward=reward, config=dcfg, seed=seed)
        n_exp = len(ta_e.states)
        # the share of weighted-BC mass on the expert's transitions inside TA (a diagnostic of the weights)
        extra["expert_weight_share"] = float(weights[:n_exp].sum() / max(weights.sum(), 1e-300))
    policy = weighted_bc(data, weights, steps=c.bc_steps, hidden=hid, seed=seed)
    act = lambda obs: policy.act(torch.as_tensor(view(obs[:, :4].numpy())))  # noqa: E731
    _, stats = collect_point_mass(act, episodes=c.eval_episodes, seed=9000 + seed)
    return {
        "method": method,
        "variant": c.variant,
        "success_rate": stats["success_rate"],
        "mean_return": stats["mean_return"],
        "expert_success_rate": ts_stats["success_rate"],
        "data_expert_success_rate": ta_e_stats["success_rate"],
        "random_success_rate": rand_stats["success_rate"],
        "n_data": len(data),
        "n_expert_states": len(expert),
        "config": asdict(c),
        **extra,
    }
