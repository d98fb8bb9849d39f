"""Which metric names :func:`icml24.common.experiment.is_timing_metric` treats as measured (issue 33)."""

from __future__ import annotations

import pytest

from icml24.common.experiment import deterministic_metrics, is_timing_metric


@pytest.mark.parametrize(
    "name",
    ["load_1min", "load_5min", "load_15min", "throughput/load_1min", "loadavg", "speed/time_ratio",
     "speed/time", "speed/wall", "speed/sec_per_step", "speed/optimisation_time_ratio", "train_seconds",
     "wall_time", "latency_ms", "tokens_per_s", "exact_cpu_per_step", "speed/step_over_direct_cpu",
     "speed/equal_quality_ratio_cpu", "speed/log10_equal_quality_time_ratio", "load_before", "load_after"],
)  # fmt: skip
def test_measured_durations_speeds_and_loads_are_timing(name):
    assert is_timing_metric(name)


@pytest.mark.parametrize(
    "name",
    ["download_count", "workload", "load_balance", "payload_1min_bytes", "speed/curve_accuracy",
     "speed/steps_to_direct_accuracy", "timesteps", "walls", "secret", "loaded_fraction", "lifetime_return",
     "fusion/occ20/rot_deg", "cpus_used"],
)  # fmt: skip
def test_computed_values_are_not_timing(name):
    assert not is_timing_metric(name)


def test_deterministic_metrics_drops_the_measured_load():
    got = deterministic_metrics({"load_1min": 1.7, "cpu_count": 2, "speed/time_ratio": 3.0, "acc": 0.9})
    assert got == {"cpu_count": 2, "acc": 0.9}
