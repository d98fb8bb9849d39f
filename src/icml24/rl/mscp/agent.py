"""Online RL with MSCP's planners (Wu et al., ICML 2024, "Planning, Fast and Slow"), and the baselines.

One loop, five learners on the batched point maze (:class:`icml24.rl.mscp.data.DriftPointMazeVecEnv`), all on
the shared TD3 (:class:`icml24.rl.value.TD3Agent`) with the same networks, exploration and budget:

* ``scratch``: TD3 on the sparse task reward, no offline data;
* ``subgoals``: TD3 conditioned on the slow planner's subgoal (re-planned every ``replan_every`` steps), with the
  potential-based shaping ``F = gamma Phi(s') - Phi(s)``, ``Phi(s) = -c ||s - s_sub|| / (H m)``
  (Ng et al., 1999): the passive data through subgoals only;
* ``idm_bc``: VPT-style: an inverse dynamics model trained on the agent's online transitions labels the passive
  data with actions, the actor is pre-trained by goal-conditioned behaviour cloning on it (hindsight goals) and
  fine-tuned by TD3 with the BC term kept (TD3+BC's ``alpha / mean|Q|`` normalisation);
* ``mscp``: slow + fast planners + IDM + pessimism: ``subgoals`` plus the fast planner's guidance in the actor
  loss, ``L = -alpha Q(s, mu(s)) / mean|Q| + lambda * mean_s w(s) ||mu(s) - IDM(s, pi_fast(s, s_sub))||^2``,
  with the pessimistic weight ``w(s) = exp(-beta u(s) / u_0)`` of the fast planner's ensemble spread ``u``;
* ``mscp_no_pessimism``: the same with ``beta = 0`` (the ablation).

The structure (slow planner for subgoals, fast planner for the next state, IDM to act, pessimism against
distribution shift) is the paper's (abstract); how the pieces enter TD3 (shaping, the guidance term, the
weight) is our reconstruction, listed in the README.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from icml24.rl import _checks
from icml24.rl.mscp.data import DriftPointMazeVecEnv, collect_passive_data, maze_routes, trajectory_index
from icml24.rl.mscp.planners import (
    FastPlanner,
    InverseDynamicsModel,
    PlannerConfig,
    SlowPlanner,
    _hindsight,
    pessimism_weight,
    pretrain_planners,
)
from icml24.rl.offline import StateDataset
from icml24.rl.value.replay import ReplayBuffer
from icml24.rl.value.td3 import TD3Agent, TD3Config, random_actions

__all__ = ["METHODS", "GuidedTD3Agent", "MSCPConfig", "WorldConfig", "idm_action_error", "run_online"]

METHODS: tuple[str, ...] = ("scratch", "subgoals", "idm_bc", "mscp", "mscp_no_pessimism")
"""The learners of :func:`run_online`."""
_SUBGOAL_METHODS = ("subgoals", "mscp", "mscp_no_pessimism")
_IDM_METHODS = ("idm_bc", "mscp", "mscp_no_pessimism")


def _default_td3() -> TD3Config:
    return TD3Config(gamma=0.97, hidden=(64, 64), batch_size=128, actor_lr=1e-3, critic_lr=1e-3,
                     exploration_noise=0.3, buffer_size=200_000)  # fmt: skip


@dataclass(frozen=True)
class MSCPConfig:
    """MSCP's online phase (our reconstruction; the paper's values were not available to us)."""

    planner: PlannerConfig = field(default_factory=PlannerConfig)
    """Pre-training of the slow and fast planners on the passive data."""
    td3: TD3Config = field(default_factory=_default_td3)
    """The TD3 every learner shares."""
    replan_every: int = 3
    """Env steps between two queries of the slow planner."""
    shaping: float = 1.0
    """``c`` of the subgoal potential ``Phi(s) = -c ||s - s_sub|| / (H m)``."""
    guide_weight: float = 1.0
    """``lambda``, the weight of the fast planner's guidance term in the actor loss."""
    q_weight: float = 2.5
    """``alpha`` of the normalised Q term (TD3+BC's 2.5)."""
    pessimism: float = 2.0
    """``beta`` of the pessimistic weight ``exp(-beta u / u_0)`` (0: no pessimism)."""
    bc_weight: float = 1.0
    """Weight of the behaviour-cloning term of the IDM-labelled BC baseline."""
    bc_steps: int = 500
    """Behaviour-cloning pre-training steps of the IDM-labelled BC baseline (after the warm-up)."""
    idm_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the inverse dynamics model."""
    idm_lr: float = 1e-3
    """Adam learning rate of the inverse dynamics model."""

    def __post_init__(self) -> None:
        if not isinstance(self.planner, PlannerConfig):
            raise TypeError(f"planner must be a PlannerConfig, got {type(self.planner).__name__}")
        if not isinstance(self.td3, TD3Config):
            raise TypeError(f"td3 must be a TD3Config, got {type(self.td3).__name__}")
        _checks.integer("replan_every", self.replan_every, low=1)
        for name in ("shaping", "guide_weight", "q_weight", "pessimism", "bc_weight"):
            _checks.real(name, getattr(self, name), low=0.0)
        _checks.integer("bc_steps", self.bc_steps, low=0)
        _checks.real("idm_lr", self.idm_lr, low=0.0, low_open=True)


@dataclass(frozen=True)
class WorldConfig:
    """The maze world, the passive data and the online budget of one run."""

    drift_prob: float = 0.0
    """Probability that the world ignores the action for a random full step (0: identifiable)."""
    exclude_cells: tuple[tuple[int, int], ...] = ()
    """Cells no passive trajectory enters (the coverage gap)."""
    passive_trajectories: int = 300
    """Passive trajectories (random start and goal cells)."""
    passive_horizon: int = 30
    """States per passive trajectory."""
    passive_noise: float = 0.3
    """Action noise of the scripted navigator that produced the passive data."""
    num_envs: int = 8
    """Parallel envs of the online phase."""
    total_steps: int = 16_000
    """Online env transitions (all envs together)."""
    warmup_steps: int = 1_000
    """Uniformly random actions before learning starts."""
    max_episode_steps: int = 60
    """Episode length of the online task (start S to goal G of the maze)."""
    step_size: float = 0.5
    """Displacement of a unit action, in cells."""
    eval_points: int = 16
    """Windows of the success curve."""

    def __post_init__(self) -> None:
        _checks.real("drift_prob", self.drift_prob, low=0.0, high=1.0)
        for name, low in (("passive_trajectories", 1), ("passive_horizon", 2), ("num_envs", 1), ("total_steps", 1),
                          ("warmup_steps", 0), ("max_episode_steps", 1), ("eval_points", 1)):  # fmt: skip
            _checks.integer(name, getattr(self, name), low=low)
        _checks.real("passive_noise", self.passive_noise, low=0.0)
        _checks.real("step_size", self.step_size, low=0.0, low_open=True)
        if isinstance(self.exclude_cells, (str, bytes)) or not isinstance(self.exclude_cells, Sequence):
            raise TypeError(f"exclude_cells must be a sequence of (row, col), got {type(self.exclude_cells).__name__}")


class GuidedTD3Agent(TD3Agent):
    """TD3 whose actor loss is ``-alpha Q / mean|Q|`` plus optional guidance and behaviour-cloning terms.

    ``guide(obs) -> (a_guide, w)`` gives a target action and a per-state weight for the batch's observations
    (MSCP: IDM of the fast planner's proposal, pessimistic weight); ``bc() -> (obs, a)`` a labelled batch
    (IDM-labelled BC). With neither, the loss is TD3's up to the positive factor ``alpha / mean|Q|``.
    """

    def __init__(self, *, obs_dim: int, action_dim: int, config: TD3Config, seed: int, q_weight: float = 2.5,
                 guide: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
                 guide_weight: float = 1.0, bc: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None,
                 bc_weight: float = 1.0) -> None:  # fmt: skip
        super().__init__(obs_dim=obs_dim, action_dim=action_dim, config=config, seed=seed)
        self.q_weight = _checks.real("q_weight", q_weight, low=0.0)
        self.guide_weight = _checks.real("guide_weight", guide_weight, low=0.0)
        self.bc_weight = _checks.real("bc_weight", bc_weight, low=0.0)
        for name, fn in (("guide", guide), ("bc", bc)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
        self.guide, self.bc = guide, bc
        self.last_guide_weight = float("nan")

    def actor_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        obs = batch["obs"]
        pi = self.actor(obs)
        q = self.critic_value(self.critics[0], obs, pi)
        loss = -self.q_weight * q.mean() / q.abs().mean().detach().clamp_min(1e-3)
        if self.guide is not None and self.guide_weight > 0:
            a_g, w = self.guide(obs)
            self.last_guide_weight = float(w.mean())
            loss = loss + self.guide_weight * (w * (pi - a_g).pow(2).sum(-1)).mean()
        if self.bc is not None and self.bc_weight > 0:
            o, a = self.bc()
            loss = loss + self.bc_weight * (self.actor(o) - a).pow(2).sum(-1).mean()
        return loss


def idm_action_error(idm: InverseDynamicsModel, env: DriftPointMazeVecEnv, *, n: int = 2000, seed: int = 0) -> float:
    """Mean ``||IDM(s, s') - a||`` on fresh uniformly random actions from random free positions of the world.

    Predicting ``a = 0`` scores ``E||a||`` (about 0.77 for uniform actions on ``[-1, 1]^2``): the chance level.
    """
    if not isinstance(idm, InverseDynamicsModel):
        raise TypeError(f"idm must be an InverseDynamicsModel, got {type(idm).__name__}")
    if not isinstance(env, DriftPointMazeVecEnv):
        raise TypeError(f"env must be a DriftPointMazeVecEnv, got {type(env).__name__}")
    n = _checks.integer("n", n, low=1)
    gen = torch.Generator().manual_seed(_checks.integer("seed", seed, low=0))
    routes = maze_routes(env.maze)
    cells = torch.as_tensor(routes.cells, dtype=torch.float32)
    pos = cells[torch.randint(len(cells), (n,), generator=gen)] + 0.2 + 0.6 * torch.rand((n, 2), generator=gen)
    a = random_actions(n, 2, gen)
    saved = env.generator.get_state()
    env.generator.manual_seed(seed + 7)
    applied, _ = env.drift(a)
    env.generator.set_state(saved)
    nxt = env.move(pos, applied)
    with torch.no_grad():
        pred = idm(env.to_obs(pos), env.to_obs(nxt))
    return float((pred - a).norm(dim=1).mean())


def run_online(method: str, world: WorldConfig = WorldConfig(), config: MSCPConfig = MSCPConfig(), *,  # noqa: B008
               seed: int = 0, passive: StateDataset | None = None) -> dict[str, Any]:  # fmt: skip
    """Train one learner online on the maze task (start S to goal G) and return its learning curve and metrics.

    Args:
        method: one of :data:`METHODS`.
        world: the world (identifiable or not), the passive data and the budget.
        config: MSCP's hyper-parameters (shared by every learner where they apply).
        seed: seeds the passive data, the networks, the env and the exploration.
        passive: passive data to use instead of generating it from ``world`` (states only).

    Returns: ``success_curve`` (fraction of the episodes ending in each window that reached the goal),
    ``curve_steps``, ``auc`` (the mean of the curve: area under the learning curve over the budget),
    ``final_success`` (mean of the last fifth of the curve), ``greedy_success`` (one noise-free episode per env
    after training), ``idm_error`` / ``idm_chance`` (IDM action error on fresh random transitions and the
    error of predicting 0), ``guide_weight`` (mean pessimistic weight in the last actor updates), timings.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(world, WorldConfig):
        raise TypeError(f"world must be a WorldConfig, got {type(world).__name__}")
    if not isinstance(config, MSCPConfig):
        raise TypeError(f"config must be a MSCPConfig, got {type(config).__name__}")
    seed = _checks.integer("seed", seed, low=0)
    if passive is not None and not isinstance(passive, StateDataset):
        raise TypeError(f"passive must be a StateDataset or None, got {type(passive).__name__}")
    t0 = time.process_time()
    torch.manual_seed(seed)
    env = DriftPointMazeVecEnv(world.num_envs, drift_prob=world.drift_prob, step_size=world.step_size,
                               max_episode_steps=world.max_episode_steps)  # fmt: skip
    m = env.max_obs_step
    H = config.planner.horizon
    uses_subgoals, uses_idm = method in _SUBGOAL_METHODS, method in _IDM_METHODS
    slow: SlowPlanner | None = None
    fast: FastPlanner | None = None
    u_scale = 1.0
    if method != "scratch" and passive is None:
        passive = collect_passive_data(n_trajectories=world.passive_trajectories, horizon=world.passive_horizon,
                                       drift_prob=world.drift_prob, noise=world.passive_noise,
                                       exclude_cells=tuple(tuple(c) for c in world.exclude_cells),
                                       step_size=world.step_size, seed=seed)  # fmt: skip
    if uses_subgoals:
        assert passive is not None
        slow, fast, u_scale = pretrain_planners(passive, max_step=m, config=config.planner, seed=seed)
    t_pre = time.process_time() - t0
    goal = env.goal_obs
    N = world.num_envs
    obs_dim = 2 if method == "scratch" else 4
    idm = InverseDynamicsModel(max_step=m, hidden=config.idm_hidden) if uses_idm else None
    idm_opt = torch.optim.Adam(idm.parameters(), lr=config.idm_lr) if idm is not None else None
    data_rng = np.random.default_rng(seed + 3)
    passive_last = trajectory_index(passive)[1] if passive is not None else None
    beta = 0.0 if method == "mscp_no_pessimism" else config.pessimism

    def guide(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert fast is not None and idm is not None
        with torch.no_grad():
            s, sub = obs[:, :2], obs[:, 2:4]
            nxt, u = fast(s, sub)
            return idm(s, nxt), pessimism_weight(u, beta=beta, scale=u_scale)

    def bc() -> tuple[torch.Tensor, torch.Tensor]:
        assert passive is not None and idm is not None
        b = _hindsight(passive, passive_last, H, config.td3.batch_size, data_rng)
        with torch.no_grad():
            labels = idm(b["state"], b["next"])
        return torch.cat([b["state"], b["goal"]], dim=1), labels

    agent = GuidedTD3Agent(obs_dim=obs_dim, action_dim=2, config=config.td3, seed=seed, q_weight=config.q_weight,
                           guide=guide if method in ("mscp", "mscp_no_pessimism") else None,
                           guide_weight=config.guide_weight, bc=bc if method == "idm_bc" else None,
                           bc_weight=config.bc_weight)  # fmt: skip
    # the IDM learns from the agent's own (s, a, s'), kept apart from the TD3 buffer (whose obs carry the subgoal)
    idm_buffer = ReplayBuffer(capacity=world.total_steps + N, fields={"s": ((2,), torch.float32),
                              "a": ((2,), torch.float32), "s2": ((2,), torch.float32)})  # fmt: skip

    def idm_step() -> None:
        assert idm is not None and idm_opt is not None
        b = idm_buffer.sample(config.td3.batch_size, agent.generator)
        loss = (idm(b["s"], b["s2"]) - b["a"]).pow(2).sum(-1).mean()
        idm_opt.zero_grad()
        loss.backward()
        idm_opt.step()

    def plan(obs: torch.Tensor) -> torch.Tensor:
        assert slow is not None
        with torch.no_grad():
            return slow(obs, goal.expand_as(obs))

    def phi(s: torch.Tensor, sub: torch.Tensor) -> torch.Tensor:
        return -config.shaping * (s - sub).norm(dim=1) / (H * m)

    def inputs(obs: torch.Tensor, sub: torch.Tensor | None) -> torch.Tensor:
        if method == "scratch":
            return obs
        if uses_subgoals:
            assert sub is not None
            return torch.cat([obs, sub], dim=1)
        return torch.cat([obs, goal.expand_as(obs)], dim=1)

    obs, _ = env.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    sub = plan(obs) if uses_subgoals else None
    age = torch.zeros(N, dtype=torch.int64)
    iters = max(1, world.total_steps // N)
    window = max(1, iters // world.eval_points)
    curve, curve_steps = [], []
    w_succ = w_done = 0
    bc_done = False
    t_online = time.process_time()
    for it in range(iters):
        if uses_subgoals and it > 0:
            replan = (age % config.replan_every) == 0
            if bool(replan.any()):
                sub = torch.where(replan[:, None], plan(obs), sub)
        inp = inputs(obs, sub)
        learning = it * N >= world.warmup_steps
        a = agent.act(inp) if learning else random_actions(N, 2, gen)
        obs2, r, term, trunc, info = env.step(a)
        done = term | trunc
        real_next = torch.where(done[:, None], info["final_obs"], obs2) if "final_obs" in info else obs2
        reward = r
        if uses_subgoals:
            assert sub is not None
            reward = r + agent.config.gamma * (1.0 - term.float()) * phi(real_next, sub) - phi(obs, sub)
        agent.store({"obs": inp, "action": a, "reward": reward, "next_obs": inputs(real_next, sub),
                     "terminated": term.float()})  # fmt: skip
        if idm is not None:
            idm_buffer.add({"s": obs, "a": a, "s2": real_next})
            if len(idm_buffer) >= config.td3.batch_size:
                idm_step()
        if method == "idm_bc" and learning and not bc_done:
            bc_done = True
            _pretrain_bc(agent, bc, config.bc_steps)
        if learning:
            agent.update()
        age = torch.where(done, torch.zeros_like(age), age + 1)
        if uses_subgoals and bool(done.any()):
            assert sub is not None
            sub = torch.where(done[:, None], plan(obs2), sub)
            age = torch.where(done, torch.ones_like(age), age)
        obs = obs2
        n_done = int(done.sum())
        w_done += n_done
        w_succ += int(info["success"][done].sum()) if n_done else 0
        if (it + 1) % window == 0:
            curve.append(w_succ / w_done if w_done else 0.0)
            curve_steps.append((it + 1) * N)
            w_succ = w_done = 0
    t_online = time.process_time() - t_online
    greedy = _greedy_success(env, agent, inputs, plan if uses_subgoals else None, config.replan_every, seed)
    out: dict[str, Any] = {
        "success_curve": curve,
        "curve_steps": curve_steps,
        "auc": float(np.mean(curve)),
        "final_success": float(np.mean(curve[-max(1, len(curve) // 5):])),
        "greedy_success": greedy,
        "pretrain_seconds": t_pre,
        "online_seconds": t_online,
        "passive_states": 0 if passive is None else len(passive),
    }
    if idm is not None:
        out["idm_error"] = idm_action_error(idm, env, seed=seed)
        out["idm_chance"] = float(random_actions(20000, 2, torch.Generator().manual_seed(0)).norm(dim=1).mean())
    if method in ("mscp", "mscp_no_pessimism"):
        out["guide_weight"] = agent.last_guide_weight
    return out


def _pretrain_bc(agent: GuidedTD3Agent, bc: Callable[[], tuple[torch.Tensor, torch.Tensor]], steps: int) -> None:
    """Behaviour cloning of the actor on IDM-labelled passive data (the VPT-style baseline's pre-training)."""
    opt = torch.optim.Adam(agent.actor.parameters(), lr=agent.config.actor_lr)
    for _ in range(steps):
        o, a = bc()
        loss = (agent.actor(o) - a).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    agent.actor_targ.load_state_dict(agent.actor.state_dict())


@torch.no_grad()
def _greedy_success(env: DriftPointMazeVecEnv, agent: TD3Agent, inputs: Callable, plan: Callable | None,
                    replan_every: int, seed: int) -> float:  # fmt: skip
    """Success of one noise-free episode per env (the subgoal methods keep re-planning)."""
    obs, _ = env.reset(seed=seed + 100)
    sub = plan(obs) if plan is not None else None
    finished = torch.zeros(env.num_envs, dtype=torch.bool)
    success = torch.zeros(env.num_envs, dtype=torch.bool)
    for t in range(env.max_episode_steps):
        if plan is not None and t > 0 and t % replan_every == 0:
            sub = plan(obs)
        obs, _, term, trunc, _ = env.step(agent.act(inputs(obs, sub), noise=False))
        success |= ~finished & term
        finished |= term | trunc
        if bool(finished.all()):
            break
    return float(success.float().mean())
