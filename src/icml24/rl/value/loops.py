"""Training loops over Gymnasium environments (one gradient step per env step, as the papers' code)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from icml24.rl.value.dqn import DQNAgent
from icml24.rl.value.networks import ActionGrid


def train_dqn(
    env: Any,
    agent: DQNAgent,
    *,
    steps: int,
    seed: int,
    grid: ActionGrid | None = None,
    max_episode_steps: int | None = None,
) -> dict[str, Any]:
    """Run ``agent`` on a single Gymnasium ``env`` for ``steps`` env steps with one update per step.

    ``grid`` maps the agent's action index to the env's continuous action (discretised control). Episodes
    end on ``terminated or truncated``; only ``terminated`` cuts the bootstrap. ``max_episode_steps``
    truncates earlier than the env's own limit (the official script caps episodes at 100 steps).
    Returns the undiscounted episode returns, their end steps, CPU time per env step (``time.process_time``:
    robust to other processes on a shared machine; timed once the buffer
    holds a minibatch, so every timed step updates), the CPU time of each timed step (``step_seconds``; the
    reset after an episode end is not in it) and Q evaluations per step.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    ep_ret, ep_len = 0.0, 0
    returns: list[float] = []
    ends: list[int] = []
    update_time = 0.0
    timed_steps = 0
    step_times: list[float] = []  # CPU seconds of each timed env step (act + env + store + update)
    start = None
    evals0 = 0
    for t in range(steps):
        if start is None and len(agent.buffer) >= agent.batch_size:
            start = time.process_time()  # time only the steady state: every step acts greedily-or-not and updates
            evals0 = agent.evaluations
        t0 = time.process_time()
        a = agent.act(obs)
        env_action = grid.index_to_action(a).astype(np.float32) if grid is not None else a
        obs2, r, term, trunc, _ = env.step(env_action)
        ep_len += 1
        if max_episode_steps is not None and ep_len >= max_episode_steps:
            trunc = True
        agent.store(obs, a, float(r), obs2, bool(term))
        u0 = time.process_time()
        agent.update()
        if start is not None:
            t1 = time.process_time()
            update_time += t1 - u0
            timed_steps += 1
            step_times.append(t1 - t0)
        ep_ret += float(r)
        obs = obs2
        if term or trunc:
            returns.append(ep_ret)
            ends.append(t + 1)
            ep_ret, ep_len = 0.0, 0
            obs, _ = env.reset()
    wall = time.process_time() - start if start is not None else 0.0
    timed_steps = max(timed_steps, 1)
    return {
        "episode_returns": returns,
        "episode_end_steps": ends,
        "seconds_per_step": wall / timed_steps,
        "update_seconds_per_step": update_time / timed_steps,
        "step_seconds": step_times,
        "evaluations_per_step": (agent.evaluations - evals0) / timed_steps if start is not None else 0.0,
    }
