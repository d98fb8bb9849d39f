"""Processes (issue 14): pool workers die with the driver, SIGTERM and Ctrl-C stop a run cleanly, a bad Ray
address fails at once, and two drivers on one store run each job once (leases)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icml24.common.experiment import Job
from icml24.common.leases import LEASE_STALE_S, LeaseOwner, lease_is_live, pid_alive, process_start_time
from icml24.common.store import ResultStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find workers")

EXTRA = ",icml24_fake_repro:SLOW,icml24_fake_repro:EMPTY"


@pytest.fixture
def env(fake_env, monkeypatch):
    fake_env = dict(fake_env)
    fake_env["ICML24_REPRODUCTIONS"] += EXTRA
    monkeypatch.setenv("ICML24_REPRODUCTIONS", fake_env["ICML24_REPRODUCTIONS"])
    return fake_env


def _children(pid: int) -> set[int]:
    """Pids whose parent is ``pid``."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.add(int(entry.name))
    return out


def _start(env, tmp_path, *args, slug="fake-slow", workers="2", store=None):
    cmd = [sys.executable, "-m", "icml24", "reproduce", slug, "--scale", "quick", "--workers", workers,
           "--store", str(store or tmp_path / "s.sqlite"), "--out", str(tmp_path / "r"), *args]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip


def _wait_for_workers(proc, n: int, timeout: float = 60.0) -> set[int]:
    """Wait until ``proc`` has ``n`` worker children running jobs (they sleep in the job)."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        kids = _children(proc.pid)
        if len(kids) >= n:
            time.sleep(1.0)  # let the workers pick their jobs up
            return _children(proc.pid)
        time.sleep(0.1)
    raise AssertionError(f"no {n} workers appeared; output: {proc.communicate(timeout=5)[0] if proc.poll() is not None else ''}")


def _all_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = {p for p in pids if pid_alive(p)}
        if not alive:
            return set()
        time.sleep(0.1)
    return {p for p in pids if pid_alive(p)}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_driver_kills_its_workers_and_closes_stdout(env, tmp_path, sig):
    proc = _start(env, tmp_path)
    try:
        workers = _wait_for_workers(proc, 2)
        assert len(workers) >= 2
        os.kill(proc.pid, sig)  # the driver only, as `kill PID` does; not its process group
        out, _ = proc.communicate(timeout=30)  # returns only once every holder of stdout is gone (| tee)
        left = _all_gone(workers, 10.0)
        assert not left, f"workers {left} outlived the driver"
        if sig == signal.SIGTERM:
            assert proc.returncode == 128 + signal.SIGTERM, out
            assert "terminated by SIGTERM" in out and "Traceback" not in out, out
        else:
            assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_ctrl_c_prints_one_message_and_no_worker_traceback(env, tmp_path):
    proc = _start(env, tmp_path)
    try:
        workers = _wait_for_workers(proc, 2)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 130, out
        assert out.count("interrupted") == 1 and "Traceback" not in out and "KeyboardInterrupt" not in out, out
        assert not _all_gone(workers, 10.0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_worker_initializer_arms_the_parent_death_signal():
    """The worker initializer itself, in a child whose parent dies: the child must follow (fast check of the
    mechanism the subprocess tests above exercise end to end)."""
    code = (
        "import os, sys, time, subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import os, time; from icml24.common.runner import _worker_init; _worker_init(os.getppid()); "
        "print(os.getpid(), flush=True); time.sleep(60)'], stdout=subprocess.PIPE, text=True)\n"
        "print(child.stdout.readline().strip(), flush=True)\n"
        "os._exit(0)\n"  # the parent dies without waiting for the child
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    pid = int(out.stdout.strip())
    assert not _all_gone({pid}, 10.0), "the orphaned worker kept running"


def test_bad_ray_address_fails_at_once_with_one_line(env, tmp_path):
    pytest.importorskip("ray")
    from typer.testing import CliRunner

    from icml24.cli import app

    start = time.time()
    res = CliRunner().invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--backend", "ray",
                                   "--ray-address", "127.0.0.1:1", "--store", str(tmp_path / "s.sqlite"),
                                   "--out", str(tmp_path / "r")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert time.time() - start < 30
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "127.0.0.1:1" in errors[0] and "ray start --head" in errors[0], res.output
    assert "Traceback" not in res.output


def test_ray_auto_without_a_cluster_is_one_line(monkeypatch):
    ray_services = pytest.importorskip("ray._private.services")
    from icml24.common.runner import RunnerError, probe_ray_address

    def nothing(address, temp_dir=None):
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_services, "canonicalize_bootstrap_address_or_die", nothing)
    with pytest.raises(RunnerError, match="auto found no running Ray cluster") as info:
        probe_ray_address("auto")
    assert "\n" not in str(info.value)
    with pytest.raises(RunnerError, match="not auto, HOST:PORT"):
        probe_ray_address("nonsense")


# ------------------------------------------------------------------------------------------- leases


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_lease_liveness_rules():
    me = LeaseOwner.this_process()
    now = time.time()
    assert lease_is_live(me.pid, me.host, me.pid_start, now, now=now)
    assert not lease_is_live(me.pid, me.host, me.pid_start, now - LEASE_STALE_S - 1, now=now)  # stale beat
    assert not lease_is_live(_dead_pid(), me.host, None, now, now=now)  # owner gone
    assert not lease_is_live(me.pid, me.host, "1", now, now=now)  # pid reused by another process
    assert lease_is_live(12345678, "another-host", None, now, now=now)  # elsewhere: the heartbeat decides
    assert process_start_time(me.pid) == me.pid_start is not None


def test_claim_done_busy_and_reclaim(tmp_path):
    store = ResultStore(tmp_path / "s.sqlite")
    job = Job("p", "e", "m:f", {"i": 1}, 0)
    a, b = LeaseOwner.this_process(), LeaseOwner.this_process()
    assert store.claim(job, a) == "claimed"
    assert store.claim(job, a) == "claimed"  # its own lease
    assert store.claim(job, b) == "busy"  # a live owner holds it
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        con.execute("UPDATE leases SET heartbeat = heartbeat - ?", (LEASE_STALE_S + 5,))
    assert store.claim(job, b) == "claimed"  # a's heartbeat went stale: b takes it over
    dead = LeaseOwner(pid=_dead_pid(), pid_start=None)
    job2 = Job("p", "e", "m:f", {"i": 2}, 0)
    assert store.claim(job2, dead) == "claimed"
    assert store.claim(job2, a) == "claimed"  # the owner died: reclaimed at once
    from icml24.common.experiment import JobResult

    store.put(JobResult(job2, "ok", {"x": 1}, 0.0), owner=a)  # releases a's lease in the same transaction
    assert store.claim(job2, b) == "done"
    assert store.claim(job2, b, done_since=time.time() + 1) == "claimed"  # --force: older rows rerun
    assert {r["owner"] for r in store.leases()} == {b.token}
    assert store.heartbeat(b) == 2
    store.release(b)
    assert store.leases() == []


def _ran(out: str) -> int:
    line = next(line for line in out.splitlines() if line.startswith("Ran "))
    return int(line.split()[1])


def test_two_drivers_on_one_store_run_each_job_once(env, tmp_path):
    store = tmp_path / "s.sqlite"
    ResultStore(store)
    procs = [_start(env, tmp_path, slug="fake-sleepy", workers="1", store=store) for _ in range(2)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    assert sum(_ran(o) for o in outs) == 12, outs  # every job ran once, in one of the two
    assert all(_ran(o) > 0 for o in outs), outs  # and the two shared the work
    with sqlite3.connect(store) as con:
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 12
        assert con.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0


@pytest.mark.slow  # about 25 s; test_claim_done_busy_and_reclaim is the fast version (a dead owner's lease)
def test_a_killed_drivers_jobs_are_taken_over_by_the_other(env, tmp_path):
    store = tmp_path / "s.sqlite"
    ResultStore(store)
    first = _start(env, tmp_path, slug="fake-slow", workers="1", store=store)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not ResultStore(store).leases():
            time.sleep(0.1)
        assert ResultStore(store).leases(), "the first driver never claimed a job"
        second = _start(env, tmp_path, slug="fake-slow", workers="2", store=store)
        time.sleep(3.0)  # the second has started and left the first's job to it
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        out, _ = second.communicate(timeout=180)
    finally:
        for p in (first,):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert second.returncode == 0, out
    with sqlite3.connect(store) as con:
        ok = con.execute("SELECT COUNT(*) FROM runs WHERE status='ok'").fetchone()[0]
        assert ok == 8, out  # the killed driver's job was reclaimed and run; nothing lost
        assert con.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
