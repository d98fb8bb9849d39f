"""The results store: round trips, errors, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3

import pytest

from icml24.common.experiment import Job, JobResult, config_hash
from icml24.common.store import ResultStore


def _job(i: int, seed: int = 0) -> Job:
    return Job("p", "e", "m:f", {"i": i, "nested": {"a": [1, 2]}}, seed)


def test_round_trip_through_store_and_json(tmp_path):
    store = ResultStore(tmp_path / "s.sqlite")
    metrics = {"x": 1.5, "curve": [0.1, 0.2], "nan": float("nan"), "name": "a"}
    store.put(JobResult(_job(1), "ok", metrics, 0.25))
    got = store.get(_job(1))
    assert got is not None and got.status == "ok"
    assert got.metrics["x"] == 1.5 and got.metrics["curve"] == [0.1, 0.2] and got.metrics["name"] == "a"
    assert got.metrics["nan"] != got.metrics["nan"]  # NaN survives
    assert json.loads(json.dumps(got.metrics))["curve"] == [0.1, 0.2]
    assert store.get(_job(2)) is None
    assert store.get_many([_job(2), _job(1)])[1].metrics["x"] == 1.5


def test_version_is_part_of_the_key(tmp_path):
    ResultStore(tmp_path / "s.sqlite", version="1").put(JobResult(_job(1), "ok", {"x": 1}, 0.0))
    assert ResultStore(tmp_path / "s.sqlite", version="2").get(_job(1)) is None
    assert ResultStore(tmp_path / "s.sqlite", version="1").get(_job(1)) is not None


def test_errors_are_kept_but_not_done(tmp_path):
    store = ResultStore(tmp_path / "s.sqlite")
    store.put(JobResult(_job(1), "error", {}, 0.0, "Traceback: boom"))
    store.put(JobResult(_job(2), "ok", {"x": 1}, 0.0))
    assert store.get(_job(1)).error == "Traceback: boom"
    assert store.done_keys(["p"]) == {_job(2).key}


def test_config_hash_is_order_independent():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_job_rejects_bad_input():
    with pytest.raises(ValueError, match="fn"):
        Job("p", "e", "no_colon", {}, 0)
    with pytest.raises(TypeError, match="seed"):
        Job("p", "e", "m:f", {}, 1.5)
    with pytest.raises(TypeError, match="JSON"):
        Job("p", "e", "m:f", {"x": object()}, 0)


def test_concurrent_writers_lose_nothing(fake_env, tmp_path):
    from icml24_fake_repro import write_many  # importable by spawned children, unlike a test module

    path = str(tmp_path / "s.sqlite")
    ResultStore(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=write_many, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = ResultStore(path)
    assert store.count("p") == 160
    for w in range(4):
        for i in (0, 39):
            assert store.get(_job(i, seed=w)).metrics == {"w": w, "i": i}
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_group_results_sorts_numbers_numerically():
    from icml24.common.experiment import group_results

    results = [JobResult(Job("p", "e", "m:f", {"d": d}, 0), "ok", {}, 0.0) for d in (10, 2, 5)]
    results.append(JobResult(Job("p", "e", "m:f", {"d": 3}, 0), "error", {}, 0.0, "x"))
    assert list(group_results(results, "e", by=["d"])) == [(2,), (5,), (10,)]


@pytest.mark.parametrize(
    "name,timing",
    [("train_seconds", True), ("sec_per_epoch", True), ("env_steps_per_second", True), ("wall_time", True),
     ("update_seconds_per_step", True), ("coverage", False), ("walls", False), ("final_return", False),
     ("timesteps", False), ("secret", False)],
)  # fmt: skip
def test_timing_metrics_are_recognised(name, timing):
    from icml24.common.experiment import is_timing_metric

    assert is_timing_metric(name) is timing
