"""Timing that load cannot decide: arms measured interleaved inside one job, in CPU time beside wall time.

A speed check that compares two wall-clock numbers measured minutes apart is decided by whatever else the
machine ran meanwhile. :func:`interleaved_times` runs the arms in rotation (A B C, B C A, C A B, ...) within one
process, so that a burst of load hits every arm alike, and records each call's CPU time of this process
(``time.process_time``: what the arm itself computed, load-independent on a single-threaded job) beside its wall
time. A speed verdict should rest on the per-round ratio of CPU times (or on an operation count), with the
wall-time ratio and the load reported beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ArmTimes:
    """One arm's per-round times in seconds (``cpu``: this process's CPU time; ``wall``: elapsed)."""

    cpu: tuple[float, ...]
    wall: tuple[float, ...]

    @property
    def cpu_median(self) -> float:
        return float(np.median(self.cpu))

    @property
    def wall_median(self) -> float:
        return float(np.median(self.wall))


def interleaved_times(
    arms: Mapping[str, Callable[[], object]], *, rounds: int = 5, warmup: int = 1
) -> dict[str, ArmTimes]:
    """Time each arm ``rounds`` times, the arms in a rotating order within each round, after ``warmup``
    untimed rotations. Returns per arm its CPU and wall times, one per round."""
    if not isinstance(arms, Mapping) or not arms or not all(callable(f) for f in arms.values()):
        raise TypeError("arms must be a non-empty mapping of names to callables taking no argument")
    for name, value in (("rounds", rounds), ("warmup", warmup)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "rounds" else 0):
            raise ValueError(f"{name} must be an int >= {1 if name == 'rounds' else 0}, got {value!r}")
    names = list(arms)
    for _ in range(warmup):
        for name in names:
            arms[name]()
    cpu: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            c0, w0 = time.process_time(), time.perf_counter()
            arms[name]()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {n: ArmTimes(tuple(cpu[n]), tuple(wall[n])) for n in names}


def per_round_ratios(times: Mapping[str, ArmTimes], numerator: str, denominator: str, *, clock: str = "cpu") -> list[float]:
    """``numerator / denominator`` per round on one clock (``"cpu"`` or ``"wall"``): paired ratios, each from
    two calls measured side by side, for :func:`icml24.common.decide.compare_to_value` (e.g. on their logs)."""
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
    a, b = getattr(times[numerator], clock), getattr(times[denominator], clock)
    return [x / y if y > 0 else float("nan") for x, y in zip(a, b)]


def load_1min() -> float | None:
    """The machine's 1-minute load average (``None`` where the OS gives none), to report beside timings."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None
