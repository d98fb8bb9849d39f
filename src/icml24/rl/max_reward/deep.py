"""Max-reward TD3 (Veviurko et al., ICML 2024, Section 5 and the official ``td3max.py``), on the shared TD3.

The actor ``mu(s, y)`` and the twin critics ``Q_i(s, a, y)`` see the running maximum ``y`` as an extra input.
A critic's raw output ``h`` is squashed to the value range ``[0, v_ub]``, ``v_ub = r_ub - r_lb``, and then pushed
above ``y``, ``Q = y + leaky_relu(Q_raw - y, 0.01)``, because ``Q(s, a, y) >= y`` always. The squash is the
official ``QMaxNetwork``'s: ``Q_raw = v_ub (tanh(h - 1) + 1) / 2`` with orthogonal initialisation (gain sqrt 2
in the hidden layers, 1 in the head, zero biases), so an untrained critic starts near ``0.12 v_ub``
(``critic_start="official"``); ``critic_start="midrange"`` (``v_ub sigmoid(h)`` with PyTorch's default
initialisation, our earlier choice) starts optimistic near ``0.5 v_ub`` and is kept as an ablation. With ``y' = max(y, r) / gamma``
(clamped to the value range) the target is

    terminated ? max(y, r) : max(max(y, r), gamma * min_i Q_i'(s', mu'(s', y') + eps, y'))

(``gamma * max(y', Q') = max(max(y, r), gamma Q')``, which stays right when ``y'`` is clamped). Rewards are shifted
by the known lower bound ``r_lb`` so that they are non-negative.

Convention (the official code mixes two; we use one everywhere): ``y`` is carried in current-time units,
``y_0 = 0`` and ``y_{t+1} = min(max(y_t, r_t - r_lb) / gamma, r_ub - r_lb)``, both when acting and in the target.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import nn

from icml24.rl.max_reward.bellman import check_reward_bounds
from icml24.rl.value.tabular import check_int
from icml24.rl.value.td3 import TD3Agent, TD3Config, random_actions

CRITIC_STARTS = ("official", "midrange")


class MaxTD3Agent(TD3Agent):
    """TD3 for the max-reward objective; observations passed in are ``[obs, y]`` (last column = ``y``).

    Args:
        obs_dim: size of the *environment* observation (``y`` is appended internally).
        action_dim: action size (actions in ``[-1, 1]``).
        r_lb, r_ub: known reward bounds; rewards are shifted by ``r_lb`` so values lie in ``[0, r_ub - r_lb]``.
        config: :class:`TD3Config` (the paper uses ``gamma = 0.995`` for max-TD3).
        critic_start: ``"official"`` (tanh(h - 1) squash, orthogonal init: starts near 0.12 of the value range,
            as the official code) or ``"midrange"`` (sigmoid squash, default init: starts near 0.5).
        seed: seed of networks, replay sampling and noise.
    """

    def __init__(
        self,
        *,
        obs_dim: int,
        action_dim: int,
        r_lb: float,
        r_ub: float,
        config: TD3Config = TD3Config(gamma=0.995),  # noqa: B008
        critic_start: str = "official",
        seed: int = 0,
    ) -> None:
        check_int("obs_dim", obs_dim, 1)
        for name, v in (("r_lb", r_lb), ("r_ub", r_ub)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if not r_lb < r_ub:
            raise ValueError(f"reward bounds must satisfy r_lb < r_ub, got r_lb={r_lb}, r_ub={r_ub}")
        if critic_start not in CRITIC_STARTS:
            raise ValueError(f"critic_start must be one of {CRITIC_STARTS}, got {critic_start!r}")
        if not isinstance(config, TD3Config):
            raise TypeError(f"config must be a TD3Config, got {type(config).__name__}")
        if config.gamma == 0:
            raise ValueError("max-reward TD3 needs gamma > 0 (y' = max(y, r) / gamma)")
        super().__init__(obs_dim=obs_dim + 1, action_dim=action_dim, config=config, seed=seed)
        self.env_obs_dim = obs_dim
        self.r_lb, self.r_ub = float(r_lb), float(r_ub)
        self.v_ub = self.r_ub - self.r_lb
        self.critic_start = critic_start
        if critic_start == "official":
            with torch.no_grad():
                for critic in self.critics:
                    linears = [m for m in critic.modules() if isinstance(m, nn.Linear)]
                    for i, lin in enumerate(linears):  # official layer_init: orthogonal, gain sqrt(2); head gain 1
                        nn.init.orthogonal_(lin.weight, 1.0 if i == len(linears) - 1 else math.sqrt(2.0))
                        nn.init.zeros_(lin.bias)
            self.critics_targ.load_state_dict(self.critics.state_dict())
            # the optimizer holds the same parameter objects, so re-initialising in place needs no new optimizer

    def shift(self, reward: torch.Tensor) -> torch.Tensor:
        """``r - r_lb`` after checking ``r_lb <= r <= r_ub``."""
        check_reward_bounds(reward.detach().cpu().numpy(), self.r_lb, self.r_ub)
        return reward - self.r_lb

    def next_y(self, y: torch.Tensor, shifted_reward: torch.Tensor) -> torch.Tensor:
        """``y' = min(max(y, r) / gamma, r_ub - r_lb)``."""
        return (torch.maximum(y, shifted_reward) / self.config.gamma).clamp(0.0, self.v_ub)

    def critic_value(self, critic: nn.Module, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``y + leaky_relu(Q_raw - y, 0.01)`` with ``Q_raw`` the critic's output squashed into ``[0, v_ub]``."""
        h = critic(torch.cat([obs, action], dim=1)).squeeze(-1)
        if self.critic_start == "official":
            raw = self.v_ub * 0.5 * (torch.tanh(h - 1.0) + 1.0)
        else:
            raw = self.v_ub * torch.sigmoid(h)
        y = obs[:, -1]
        return y + nn.functional.leaky_relu(raw - y, 0.01)

    def compute_target(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        m = torch.maximum(batch["obs"][:, -1], batch["reward"])
        cont = torch.maximum(m, self.config.gamma * self.target_q(batch["next_obs"]))
        return torch.where(batch["terminated"] > 0, m, cont)


def train_td3_vec(
    env: Any,
    agent: TD3Agent,
    *,
    total_steps: int,
    seed: int,
    warmup_steps: int = 2000,
    updates_per_step: int = 1,
    eval_points: int = 10,
) -> dict[str, Any]:
    """Train a (max-)TD3 agent on a batched torch vector env with same-step autoreset.

    ``total_steps`` counts env transitions (``num_envs`` per vector step). For a :class:`MaxTD3Agent` the loop
    tracks ``y`` per env, appends it to the observations and resets it to 0 when an episode ends. Only
    ``terminated`` cuts the bootstrap. Returns the success rate of the episodes finished in each of
    ``eval_points`` windows, the mean best progress per episode (``info["progress"]``: 1 = goal), the overall
    success, and env steps per CPU second (``time.process_time``).
    """
    if not isinstance(agent, TD3Agent):
        raise TypeError(f"agent must be a TD3Agent or MaxTD3Agent, got {type(agent).__name__}")
    if not hasattr(env, "num_envs"):
        raise TypeError(f"env must be a batched vector env with num_envs, got {type(env).__name__}")
    # The loop stores (obs, action, reward, next_obs, terminated) from one step() call and resets y where an
    # episode ended; with next-step autoreset the step after an episode end returns a reset observation and a
    # dummy reward, which would enter the replay buffer as a transition. Refuse it rather than learn from it.
    mode = getattr(env, "metadata", {}).get("autoreset_mode", AutoresetMode.SAME_STEP)
    if str(getattr(mode, "value", mode)) != AutoresetMode.SAME_STEP.value:
        raise ValueError(
            f"env must autoreset in the same step (autoreset_mode=SameStep), got autoreset_mode={getattr(mode, 'value', mode)}"
        )
    total_steps = check_int("total_steps", total_steps, 1)
    seed = check_int("seed", seed, 0)
    warmup_steps = check_int("warmup_steps", warmup_steps, 0)
    updates_per_step = check_int("updates_per_step", updates_per_step, 0)
    eval_points = check_int("eval_points", eval_points, 1)
    is_max = isinstance(agent, MaxTD3Agent)
    N = env.num_envs
    obs, _ = env.reset(seed=seed)
    y = torch.zeros(N)
    gen = torch.Generator().manual_seed(seed + 1)
    iters = max(1, total_steps // N)
    window = max(1, iters // eval_points)
    succ_curve, steps_curve = [], []
    w_succ, w_done = 0, 0
    best = torch.zeros(N)  # best progress (DSP value of the cells visited) of each env's current episode
    prog_curve: list[float] = []
    w_prog: list[float] = []
    total_succ, total_done = 0, 0
    start = time.process_time()
    update_time = 0.0
    for it in range(iters):
        inp = torch.cat([obs, y[:, None]], 1) if is_max else obs
        a = random_actions(N, agent.action_dim, gen) if it * N < warmup_steps else agent.act(inp)
        obs2, r, term, trunc, info = env.step(a)
        done = term | trunc
        real_next = torch.where(done[:, None], info["final_obs"], obs2) if "final_obs" in info else obs2
        if is_max:
            r_used = agent.shift(r)
            y2 = agent.next_y(y, r_used)
            nxt = torch.cat([real_next, y2[:, None]], 1)
        else:
            r_used, nxt, y2 = r, real_next, y
        agent.store({"obs": inp, "action": a, "reward": r_used, "next_obs": nxt, "terminated": term.float()})
        y = torch.where(done, torch.zeros_like(y2), y2)
        obs = obs2
        if it * N >= warmup_steps:
            u0 = time.process_time()
            for _ in range(updates_per_step):
                agent.update()
            update_time += time.process_time() - u0
        best = torch.maximum(best, info["progress"]) if "progress" in info else best
        if bool(done.any()):
            w_prog += best[done].tolist()
            best = torch.where(done, torch.zeros_like(best), best)
        n_done = int(done.sum())
        n_succ = int(info["success"][done].sum()) if n_done else 0
        w_done, w_succ = w_done + n_done, w_succ + n_succ
        total_done, total_succ = total_done + n_done, total_succ + n_succ
        if (it + 1) % window == 0:
            succ_curve.append(w_succ / w_done if w_done else 0.0)
            # no episode ended in this window: carry the last value forward
            prog_curve.append(float(np.mean(w_prog)) if w_prog else (prog_curve[-1] if prog_curve else 0.0))
            w_prog = []
            steps_curve.append((it + 1) * N)
            w_succ, w_done = 0, 0
    wall = time.process_time() - start
    return {
        "success_curve": succ_curve,
        "curve_steps": steps_curve,
        "success_rate": total_succ / max(total_done, 1),
        "progress_curve": prog_curve,
        "final_progress": float(np.mean(prog_curve[-max(1, len(prog_curve) // 5) :])) if prog_curve else 0.0,
        "final_success": float(np.mean(succ_curve[-max(1, len(succ_curve) // 5) :])) if succ_curve else 0.0,
        "env_steps_per_second": iters * N / wall,
        "update_seconds": update_time,
    }


@torch.no_grad()
def evaluate_greedy(env: Any, agent: TD3Agent, *, seed: int) -> float:
    """Success rate of one deterministic episode per env (``mu(s, y)`` without noise)."""
    if not isinstance(agent, TD3Agent):
        raise TypeError(f"agent must be a TD3Agent or MaxTD3Agent, got {type(agent).__name__}")
    if not hasattr(env, "num_envs"):
        raise TypeError(f"env must be a batched vector env with num_envs, got {type(env).__name__}")
    seed = check_int("seed", seed, 0)
    is_max = isinstance(agent, MaxTD3Agent)
    N = env.num_envs
    obs, _ = env.reset(seed=seed)
    y = torch.zeros(N)
    finished = torch.zeros(N, dtype=torch.bool)
    success = torch.zeros(N, dtype=torch.bool)
    for _ in range(env.max_episode_steps):
        inp = torch.cat([obs, y[:, None]], 1) if is_max else obs
        obs, r, term, trunc, info = env.step(agent.act(inp, noise=False))
        if is_max:
            y = agent.next_y(y, r - agent.r_lb)
        success |= ~finished & term
        finished |= term | trunc
        if bool(finished.all()):
            break
    return float(success.float().mean())
