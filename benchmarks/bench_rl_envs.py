"""Speed of the batched torch envs against the real alternatives, side by side in one run.

For each task, four implementations of the same vector step (dynamics, reward, time-limit truncation and
same-step autoreset that keeps the final observation) are timed at the same N, interleaved round by round (each
round runs all four one after the other, so that load from other processes falls on all of them alike); the
table gives the median and the [min, max] over the rounds, and the ratios are taken within each round:

* ``gymnasium``: the single-env Gymnasium env (``Pendulum-v1``, ``MountainCarContinuous-v0``, our
  ``DeceptivePointMassEnv``) in ``gymnasium.vector.SyncVectorEnv`` (same-step autoreset);
* ``numpy``: plain numpy vectorisation of the same dynamics over N (1-D float32 arrays per state variable, every
  mask computed every step, ``np.stack`` for the observation);
* ``ours``: the ``TorchVectorEnv`` subclass (action checks and clipping, info dict, ``final_obs``);
* ``bare torch``: the same arithmetic as a plain torch function on 1-D tensors (no checks, no info, no class;
  out-of-place ops, bool masks and ``torch.stack``, as one writes it directly).

Steps per second are environment steps (N per vector step); one torch thread. Actions are uniform in
[-1.2, 1.2] per dimension, so the mountain cars rarely touch the wall or the goal (ours skips those tests on such
steps; see the README). ``SyncVectorEnv`` runs at ``min(N, --sync-max)`` envs: its per-env cost does not depend
on N, and 65k Python env objects take minutes to build. The load (``uptime``) is printed before and after.
Usage: ``python benchmarks/bench_rl_envs.py [--quick] [--sizes 4096 65536] [--rounds 11] [--agents]``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from icml24.rl.envs import (
    BatchedDeceptivePointMass,
    BatchedMountainCarContinuous,
    BatchedPendulum,
    DeceptivePointMassEnv,
    PointMassLayout,
)

# ---------------------------------------------------------------------------------------------------------
# bare torch math and plain numpy: the same step written directly on 1-D arrays
# ---------------------------------------------------------------------------------------------------------


def _angle_normalize_t(x: torch.Tensor) -> torch.Tensor:
    return ((x + math.pi) % (2 * math.pi)) - math.pi


class BareTorchPendulum:
    """Pendulum-v1 on 1-D tensors: the step as one would write it without an env class."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.n = n
        self.th = torch.rand(n, generator=self.g) * 2 * math.pi - math.pi
        self.thdot = torch.rand(n, generator=self.g) * 2 - 1
        self.t = torch.zeros(n, dtype=torch.long)

    def step(self, a: torch.Tensor):
        u = a[:, 0].clamp(-2.0, 2.0)
        th, thdot = self.th, self.thdot
        cost = _angle_normalize_t(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        thdot = (thdot + (15.0 * torch.sin(th) + 3.0 * u) * 0.05).clamp(-8.0, 8.0)
        th = th + thdot * 0.05
        self.t += 1
        trunc = self.t >= 200
        obs = torch.stack((torch.cos(th), torch.sin(th), thdot), dim=1)
        final = None
        if bool(trunc.any()):
            final = obs.clone()
            idx = trunc.nonzero().squeeze(1)
            k = idx.numel()
            th[idx] = torch.rand(k, generator=self.g) * 2 * math.pi - math.pi
            thdot[idx] = torch.rand(k, generator=self.g) * 2 - 1
            self.t[idx] = 0
            obs[idx] = torch.stack((torch.cos(th[idx]), torch.sin(th[idx]), thdot[idx]), dim=1)
        self.th, self.thdot = th, thdot
        return obs, -cost, trunc, final


class NumpyPendulum:
    """Pendulum-v1 vectorised with plain numpy over N."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.th = self.rng.uniform(-np.pi, np.pi, n).astype(np.float32)
        self.thdot = self.rng.uniform(-1, 1, n).astype(np.float32)
        self.t = np.zeros(n, dtype=np.int64)

    def step(self, a: np.ndarray):
        u = np.clip(a[:, 0], -2.0, 2.0)
        th, thdot = self.th, self.thdot
        cost = (((th + np.pi) % (2 * np.pi)) - np.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        thdot = np.clip(thdot + (15.0 * np.sin(th) + 3.0 * u) * 0.05, -8.0, 8.0)
        th = th + thdot * 0.05
        self.t += 1
        trunc = self.t >= 200
        obs = np.stack((np.cos(th), np.sin(th), thdot), axis=1)
        final = None
        if trunc.any():
            final = obs.copy()
            idx = np.flatnonzero(trunc)
            th[idx] = self.rng.uniform(-np.pi, np.pi, idx.size)
            thdot[idx] = self.rng.uniform(-1, 1, idx.size)
            self.t[idx] = 0
            obs[idx] = np.stack((np.cos(th[idx]), np.sin(th[idx]), thdot[idx]), axis=1)
        self.th, self.thdot = th, thdot
        return obs, -cost, trunc, final


class BareTorchMountainCar:
    """MountainCarContinuous-v0 on 1-D tensors (999-step limit)."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(n, generator=self.g) * 0.2 - 0.6
        self.v = torch.zeros(n)
        self.t = torch.zeros(n, dtype=torch.long)

    def step(self, a: torch.Tensor):
        raw = a[:, 0]
        force = raw.clamp(-1.0, 1.0)
        v = (self.v + force * 0.0015 - 0.0025 * torch.cos(3 * self.x)).clamp(-0.07, 0.07)
        x = (self.x + v).clamp(-1.2, 0.6)
        v = torch.where((x == -1.2) & (v < 0), torch.zeros_like(v), v)
        term = (x >= 0.45) & (v >= 0.0)
        reward = 100.0 * term.float() - 0.1 * raw**2
        self.t += 1
        trunc = self.t >= 999
        done = term | trunc
        obs = torch.stack((x, v), dim=1)
        final = None
        if bool(done.any()):
            final = obs.clone()
            idx = done.nonzero().squeeze(1)
            x[idx] = torch.rand(idx.numel(), generator=self.g) * 0.2 - 0.6
            v[idx] = 0.0
            self.t[idx] = 0
            obs[idx] = torch.stack((x[idx], v[idx]), dim=1)
        self.x, self.v = x, v
        return obs, reward, term, trunc, final


class NumpyMountainCar:
    """MountainCarContinuous-v0 vectorised with plain numpy."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.x = self.rng.uniform(-0.6, -0.4, n).astype(np.float32)
        self.v = np.zeros(n, dtype=np.float32)
        self.t = np.zeros(n, dtype=np.int64)

    def step(self, a: np.ndarray):
        raw = a[:, 0]
        force = np.clip(raw, -1.0, 1.0)
        v = np.clip(self.v + force * 0.0015 - 0.0025 * np.cos(3 * self.x), -0.07, 0.07)
        x = np.clip(self.x + v, -1.2, 0.6)
        v = np.where((x == -1.2) & (v < 0), 0.0, v)  # a Python float keeps float32 (NEP 50)
        term = (x >= 0.45) & (v >= 0.0)
        reward = term * np.float32(100.0) - 0.1 * raw**2  # float32, like ours
        self.t += 1
        trunc = self.t >= 999
        done = term | trunc
        obs = np.stack((x, v), axis=1)
        final = None
        if done.any():
            final = obs.copy()
            idx = np.flatnonzero(done)
            x[idx] = self.rng.uniform(-0.6, -0.4, idx.size)
            v[idx] = 0.0
            self.t[idx] = 0
            obs[idx] = np.stack((x[idx], v[idx]), axis=1)
        self.x, self.v = x, v
        return obs, reward, term, trunc, final


_LAYOUT = PointMassLayout()
_WALL = _LAYOUT.walls[0]


class BareTorchPointMass:
    """The deceptive point mass (default layout, one wall) on 1-D tensors."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.x = (torch.rand(n, generator=self.g) * 2 - 1) * 0.1
        self.y = (torch.rand(n, generator=self.g) * 2 - 1) * 0.1
        self.vx, self.vy = torch.zeros(n), torch.zeros(n)
        self.t = torch.zeros(n, dtype=torch.long)

    def step(self, a: torch.Tensor):
        lay = _LAYOUT
        a = a.clamp(-1.0, 1.0)
        vx = 0.9 * self.vx + 0.3 * a[:, 0]
        vy = 0.9 * self.vy + 0.3 * a[:, 1]
        x = (self.x + 0.1 * vx).clamp(-4.0, 4.0)
        y = (self.y + 0.1 * vy).clamp(-4.0, 4.0)
        x0, y0, x1, y1 = _WALL
        hit = (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        x, y = torch.where(hit, self.x, x), torch.where(hit, self.y, y)
        vx, vy = torch.where(hit, 0.0, vx), torch.where(hit, 0.0, vy)
        self.t += 1
        in_goal = (x - lay.goal[0]) ** 2 + (y - lay.goal[1]) ** 2 < lay.goal_radius**2
        in_decoy = (x - lay.decoy[0]) ** 2 + (y - lay.decoy[1]) ** 2 < lay.decoy_radius**2
        reward = lay.decoy_reward * in_decoy.float() + lay.goal_reward * in_goal.float()
        trunc = self.t >= 100
        done = in_goal | trunc
        obs = torch.stack((x / 3, y / 3, vx, vy, self.t / 100), dim=1)
        final = None
        if bool(done.any()):
            final = obs.clone()
            idx = done.nonzero().squeeze(1)
            k = idx.numel()
            x[idx] = (torch.rand(k, generator=self.g) * 2 - 1) * 0.1
            y[idx] = (torch.rand(k, generator=self.g) * 2 - 1) * 0.1
            vx[idx], vy[idx], self.t[idx] = 0.0, 0.0, 0
            obs[idx] = torch.stack((x[idx] / 3, y[idx] / 3, vx[idx], vy[idx], self.t[idx] / 100), dim=1)
        self.x, self.y, self.vx, self.vy = x, y, vx, vy
        return obs, reward, in_goal, trunc, final


class NumpyPointMass:
    """The deceptive point mass (default layout, one wall) vectorised with plain numpy."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.x = self.rng.uniform(-0.1, 0.1, n).astype(np.float32)
        self.y = self.rng.uniform(-0.1, 0.1, n).astype(np.float32)
        self.vx, self.vy = np.zeros(n, np.float32), np.zeros(n, np.float32)
        self.t = np.zeros(n, dtype=np.int64)

    def step(self, a: np.ndarray):
        lay = _LAYOUT
        a = np.clip(a, -1.0, 1.0)
        vx = 0.9 * self.vx + 0.3 * a[:, 0]
        vy = 0.9 * self.vy + 0.3 * a[:, 1]
        x = np.clip(self.x + 0.1 * vx, -4.0, 4.0)
        y = np.clip(self.y + 0.1 * vy, -4.0, 4.0)
        x0, y0, x1, y1 = _WALL
        hit = (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        x, y = np.where(hit, self.x, x), np.where(hit, self.y, y)
        vx, vy = np.where(hit, 0.0, vx), np.where(hit, 0.0, vy)
        self.t += 1
        in_goal = (x - lay.goal[0]) ** 2 + (y - lay.goal[1]) ** 2 < lay.goal_radius**2
        in_decoy = (x - lay.decoy[0]) ** 2 + (y - lay.decoy[1]) ** 2 < lay.decoy_radius**2
        reward = in_decoy * np.float32(lay.decoy_reward) + in_goal * np.float32(lay.goal_reward)  # float32
        trunc = self.t >= 100
        done = in_goal | trunc
        obs = np.stack((x / 3, y / 3, vx, vy, self.t.astype(np.float32) / 100), axis=1)
        final = None
        if done.any():
            final = obs.copy()
            idx = np.flatnonzero(done)
            x[idx] = self.rng.uniform(-0.1, 0.1, idx.size)
            y[idx] = self.rng.uniform(-0.1, 0.1, idx.size)
            vx[idx], vy[idx], self.t[idx] = 0.0, 0.0, 0
            obs[idx] = np.stack((x[idx] / 3, y[idx] / 3, vx[idx], vy[idx], self.t[idx] / 100), axis=1)
        self.x, self.y, self.vx, self.vy = x, y, vx, vy
        return obs, reward, in_goal, trunc, final


# ---------------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------------

TASKS = {
    "pendulum": (BatchedPendulum, BareTorchPendulum, NumpyPendulum, lambda: gym.make("Pendulum-v1"), 1),
    "mountain car": (
        BatchedMountainCarContinuous, BareTorchMountainCar, NumpyMountainCar,
        lambda: gym.make("MountainCarContinuous-v0"), 1,
    ),
    "point mass": (BatchedDeceptivePointMass, BareTorchPointMass, NumpyPointMass, DeceptivePointMassEnv, 2),
}  # fmt: skip


def _stepper(step: Callable, actions: list, steps: int) -> Callable[[], float]:
    def run() -> float:
        t = time.perf_counter()
        for i in range(steps):
            step(actions[i % len(actions)])
        return time.perf_counter() - t

    return run


IMPLS = ("gymnasium", "numpy", "ours", "bare torch")


def measure_task(name: str, n: int, steps: int, rounds: int, sync_max: int) -> dict[str, list[float]]:
    """Env steps per second of the four implementations at N = n, one value per round.

    The rounds are interleaved (each round runs all four one after the other), so that load from other processes
    falls on all of them alike; the per-round ratios are taken within a round.
    """
    ours_cls, bare_cls, numpy_cls, make, act_dim = TASKS[name]
    g = torch.Generator().manual_seed(0)
    acts_t = [torch.rand(n, act_dim, generator=g) * 2.4 - 1.2 for _ in range(8)]
    acts_np = [a.numpy().copy() for a in acts_t]
    ours = ours_cls(num_envs=n)
    ours.reset(seed=0)
    bare, plain = bare_cls(n), numpy_cls(n)
    n_sync = min(n, sync_max)
    sync = gym.vector.SyncVectorEnv([make for _ in range(n_sync)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    sync.reset(seed=0)
    sync_acts = [a[:n_sync] for a in acts_np]
    sync_steps = max(2, steps * n // (n_sync * 100))  # about 1/100 of the others' env steps: it is that slow
    runs = {
        "gymnasium": (_stepper(sync.step, sync_acts, sync_steps), n_sync * sync_steps),
        "numpy": (_stepper(plain.step, acts_np, steps), n * steps),
        "ours": (_stepper(ours.step, acts_t, steps), n * steps),
        "bare torch": (_stepper(bare.step, acts_t, steps), n * steps),
    }
    for fn, _ in runs.values():  # warm-up
        fn()
    rates: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, (fn, env_steps) in runs.items():
            rates[k].append(env_steps / fn())
    sync.close()
    return rates


def _median_spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"load average {os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds (a smoke test)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536])
    parser.add_argument("--sync-max", type=int, default=1024, help="most envs in SyncVectorEnv")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 11; 3 with --quick)")
    parser.add_argument("--agents", action="store_true", help="also time PPO and SAPG iterations")
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 20 if args.quick else 100
    rounds = args.rounds or (3 if args.quick else 11)
    print(f"start: {_uptime()}")
    print(f"torch {torch.__version__}, numpy {np.__version__}, gymnasium {gym.__version__}; 1 torch thread; "
          f"{rounds} interleaved rounds of {steps} vector steps; median [min, max] over rounds")  # fmt: skip
    print("| task | N | Gymnasium | numpy | ours | bare torch | ours / bare torch | ours / numpy |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.tasks:
        for n in args.sizes:
            rates = measure_task(name, n, steps, rounds, args.sync_max)
            cells = []
            for k in IMPLS:
                med, lo, hi = _median_spread(rates[k])
                cells.append(f"{med / 1e6:.3g}M [{lo / 1e6:.3g}, {hi / 1e6:.3g}]")
            for base in ("bare torch", "numpy"):
                med, lo, hi = _median_spread([a / b for a, b in zip(rates["ours"], rates[base], strict=True)])
                cells.append(f"{med:.2f}x [{lo:.2f}, {hi:.2f}]")
            print(f"| {name} | {n} | " + " | ".join(cells) + " |", flush=True)
    print(f"end: {_uptime()}")
    if args.agents:
        from _timing import iterations_per_s
        from icml24.rl.ppo import PPO, PPOConfig
        from icml24.rl.sapg import SAPG, SAPGConfig

        cfg = PPOConfig()
        for n in (1024,) if args.quick else (1024, 4096):
            ppo = iterations_per_s(PPO(BatchedDeceptivePointMass(num_envs=n), config=cfg, seed=0), 2 if args.quick else 5)
            sapg = iterations_per_s(
                SAPG(BatchedDeceptivePointMass(num_envs=n), config=SAPGConfig(num_blocks=4, ppo=cfg)),
                2 if args.quick else 5,
            )
            print(f"PPO  N={n}: {ppo:.2f} it/s ({ppo * n * cfg.horizon:,.0f} env steps/s incl. updates)")
            print(f"SAPG N={n} M=4: {sapg:.2f} it/s ({sapg * n * cfg.horizon:,.0f} env steps/s incl. updates)")


if __name__ == "__main__":
    main()
