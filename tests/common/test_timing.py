"""Interleaved CPU-time measurement (issue 33: a check that rests on time must not be decided by load)."""

from __future__ import annotations

import time

import pytest

from icml24.common.timing import interleaved_times, load_1min, per_round_ratios


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_time_ignores_sleeping_and_ratios_are_per_round():
    calls: list[str] = []

    def fast():
        calls.append("fast")
        _spin(0.002)

    def slow():
        calls.append("slow")
        _spin(0.006)

    def sleepy():  # waits (like a loaded machine's queue) without computing
        calls.append("sleepy")
        time.sleep(0.02)

    times = interleaved_times({"fast": fast, "slow": slow, "sleepy": sleepy}, rounds=4, warmup=1)
    assert calls[:3] == ["fast", "slow", "sleepy"]  # the warm-up rotation, untimed
    assert calls[3:6] == ["fast", "slow", "sleepy"] and calls[6:9] == ["slow", "sleepy", "fast"]  # rotating order
    assert calls[9:12] == ["sleepy", "fast", "slow"] and len(calls) == 15
    assert len(times["fast"].cpu) == 4 and len(times["fast"].wall) == 4
    assert times["sleepy"].cpu_median < 0.01 <= times["sleepy"].wall_median  # CPU time does not count waiting
    ratios = per_round_ratios(times, "slow", "fast")
    assert len(ratios) == 4 and all(r > 1.5 for r in ratios)
    assert isinstance(load_1min(), float)


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="arms"):
        interleaved_times({})
    with pytest.raises(ValueError, match="rounds"):
        interleaved_times({"a": lambda: None}, rounds=0)
    with pytest.raises(ValueError, match="clock"):
        per_round_ratios(interleaved_times({"a": lambda: None}, rounds=1), "a", "a", clock="gpu")
