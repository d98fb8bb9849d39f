"""Timing helpers shared by the benchmark scripts (importable because a script's folder is on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[..., Any], *args: Any, repeats: int = 3, **kwargs: Any) -> float:
    """The shortest wall time of ``repeats`` calls of ``fn(*args, **kwargs)``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best


def iterations_per_s(agent: Any, iters: int) -> float:
    """Training iterations per second of an agent with ``iterate()``, after one warm-up iteration."""
    agent.iterate()
    start = time.perf_counter()
    for _ in range(iters):
        agent.iterate()
    return iters / (time.perf_counter() - start)
