"""The runner: resume, force, crashes, determinism across backends."""

from __future__ import annotations

import importlib
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from icml24.common.experiment import execute_job
from icml24.common.runner import run_jobs
from icml24.common.store import ResultStore


def _fake():
    return importlib.import_module("icml24_fake_repro")


def test_local_pool_equals_in_process_and_resumes(fake_env, tmp_path):
    fake = _fake()
    jobs = fake.REPRODUCTION.jobs("smoke")
    s1, s2 = ResultStore(tmp_path / "a.sqlite"), ResultStore(tmp_path / "b.sqlite")
    st1 = run_jobs(jobs, s1, workers=1)
    st2 = run_jobs(jobs, s2, workers=2)
    assert st1.ran == st2.ran == len(jobs) and not st1.failed
    for a, b in zip(s1.get_many(jobs), s2.get_many(jobs)):
        assert a.metrics == b.metrics
    again = run_jobs(jobs, s1, workers=1)
    assert again.ran == 0 and again.skipped == len(jobs)
    forced = run_jobs(jobs[:2], s1, workers=1, force=True)
    assert forced.ran == 2


def test_same_seed_same_numbers_different_seed_different(fake_env):
    fake = _fake()
    j0, j1 = fake.REPRODUCTION.jobs("smoke")[:2]
    assert j0.seed != j1.seed
    assert execute_job(j0).metrics == execute_job(j0).metrics
    assert execute_job(j0).metrics != execute_job(j1).metrics


def test_crashed_job_is_stored_with_traceback(fake_env, tmp_path):
    fake = _fake()
    store = ResultStore(tmp_path / "s.sqlite")
    stats = run_jobs(fake.CRASHING.jobs("smoke"), store, workers=1)
    assert len(stats.failed) == 1 and stats.ran == 2
    err = store.get(fake.CRASHING.jobs("smoke")[0])
    assert err.status == "error" and "this job crashes on purpose" in err.error


def test_bad_backend_and_workers(tmp_path):
    with pytest.raises(ValueError, match="backend"):
        run_jobs([], ResultStore(tmp_path / "s.sqlite"), backend="slurm")
    with pytest.raises(ValueError, match="workers"):
        run_jobs([], ResultStore(tmp_path / "s.sqlite"), workers=0)


def _count(path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status='ok'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_sigkill_mid_run_loses_nothing_and_resume_runs_only_missing(fake_env, tmp_path):
    store_path = tmp_path / "s.sqlite"
    cmd = [sys.executable, "-m", "icml24", "reproduce", "fake-sleepy", "--scale", "quick",
           "--workers", "2", "--store", str(store_path), "--out", str(tmp_path / "r")]  # fmt: skip
    proc = subprocess.Popen(cmd, env=fake_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    deadline = time.time() + 90
    while _count(store_path) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    n_first = _count(store_path)
    total = 12
    assert 3 <= n_first < total, f"kill landed outside the run ({n_first} jobs stored)"
    with sqlite3.connect(store_path) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        before = dict(con.execute("SELECT config_hash || seed, finished_at FROM runs").fetchall())
    out = subprocess.run(cmd, env=fake_env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{n_first} already in" in out.stdout and f"{total - n_first} to run" in out.stdout
    with sqlite3.connect(store_path) as con:
        after = dict(con.execute("SELECT config_hash || seed, finished_at FROM runs").fetchall())
    assert len(after) == total
    assert all(after[k] == v for k, v in before.items())  # finished jobs were not rerun
    assert (tmp_path / "r" / "index.html").exists()


def test_ray_backend_gives_the_same_numbers(fake_env, tmp_path):
    pytest.importorskip("ray")
    fake = _fake()
    jobs = fake.REPRODUCTION.jobs("smoke")
    local, remote = ResultStore(tmp_path / "l.sqlite"), ResultStore(tmp_path / "r.sqlite")
    run_jobs(jobs, local, workers=1)
    stats = run_jobs(jobs, remote, backend="ray", workers=2)
    assert stats.ran == len(jobs) and not stats.failed, [f.error for f in stats.failed]
    for a, b in zip(local.get_many(jobs), remote.get_many(jobs)):
        assert a.metrics == b.metrics
