"""Run jobs on a backend and record every finished one in the store as soon as it finishes.

Backends:
- ``local``: a process pool on this machine (``workers`` processes, started with ``spawn`` so that torch and
  BLAS thread pools are fresh); ``workers=1`` runs the jobs in this process.
- ``ray``: each job is a Ray task on the cluster at ``ray_address`` (a local Ray when ``None``); the package
  must be installed on every node. A given address is probed first (a TCP connect with a short timeout), so
  an address with no cluster behind it fails at once with one line (:class:`RunnerError`).

Whatever the backend, a job runs through :func:`~icml24.common.experiment.execute_job`, so it gives the same
numbers everywhere, and only the driver writes to the store (one row, one transaction, per job).

Processes. Pool workers die with the driver: each sets a parent-death signal (``prctl(PR_SET_PDEATHSIG)`` on
Linux) and runs a watchdog thread that exits when its parent pid changes (any POSIX system), so a SIGKILLed
run leaves no worker holding its stdout. Workers ignore SIGINT: Ctrl-C reaches the driver only, which stops
the pool and prints one message. SIGTERM to the driver raises :class:`RunTerminated` in it, which stops the
pool the same way (workers terminated, their jobs not stored, finished jobs kept).

Several drivers on one store. Each job is claimed with a lease in the store before it runs
(:meth:`~icml24.common.store.ResultStore.claim`), a background thread keeps the leases' heartbeat fresh, and
a job leased by another live driver is left to it: this driver waits for it at the end and takes it over
if its owner dies (:mod:`icml24.common.leases`). So two ``reproduce`` processes on one store run each job
once, and a killed one's jobs are rerun by the other.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from icml24.common.experiment import Job, JobResult, execute_job
from icml24.common.fingerprint import git_state
from icml24.common.leases import Heartbeat, LeaseOwner
from icml24.common.store import CodeChangedError, ResultStore

BACKENDS = ("local", "ray")

RAY_PROBE_TIMEOUT_S = 3.0
"""Seconds to wait for a TCP connection to a given Ray address before giving up."""

WAIT_POLL_S = 1.0
"""Seconds between two looks at jobs leased by another driver."""


class RunnerError(Exception):
    """A run cannot start (an unreachable Ray address, a missing backend); the message is one line."""


class RunTerminated(BaseException):
    """The driver got SIGTERM (or SIGHUP): the pool is stopped and finished jobs are in the store.
    A ``BaseException``, like ``KeyboardInterrupt``, so that a job running in this process does not
    record it as its own crash."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


@dataclass
class RunStats:
    """What a call to :func:`run_jobs` did.

    ``skipped`` counts the jobs not run here: already in the store at the start, or finished meanwhile by
    another process sharing the store (``done_elsewhere`` of them).
    """

    total: int = 0
    skipped: int = 0
    ran: int = 0
    failed: list[JobResult] = field(default_factory=list)
    wall_time: float = 0.0
    done_elsewhere: int = 0
    code_changed: list[Job] = field(default_factory=list)
    """Jobs that finished after their code changed on disk: not stored (rerun them)."""


ProgressCallback = Callable[[str, Job, JobResult | None], None]
"""Called with ``("start", job, None)`` and ``("done", job, result)``; ``("skip", job, None)`` for a job
another process finished."""


def git_commit() -> str | None:
    """The commit of the checkout the package runs from, when it is a git checkout."""
    return git_state().commit


def pending_jobs(jobs: Sequence[Job], store: ResultStore, force: bool = False) -> list[Job]:
    """The jobs that still have to run: all of them with ``force``, else those without an ok row at the
    current code."""
    if force:
        return list(jobs)
    done = store.done_keys(jobs)
    return [j for j in jobs if j.key not in done]


# --------------------------------------------------------------------------------------------- signals


@contextmanager
def terminate_as_exception() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`RunTerminated` in the main thread (a no-op off
    the main thread), so the pool is stopped by the same path as Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise RunTerminated(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


_PR_SET_PDEATHSIG = 1


def _worker_init(parent_pid: int) -> None:
    """Initializer of every pool worker: die with the parent, leave Ctrl-C to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked by the parent while spawning
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no usable libc; the watchdog remains
            pass
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="icml24-parent-watchdog", daemon=True).start()


def _watch_parent(parent_pid: int, interval: float = 1.0) -> None:
    """Exit the worker when its parent is gone (re-parented), where no parent-death signal exists."""
    while True:
        time.sleep(interval)
        if os.getppid() != parent_pid:
            os._exit(1)


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT while worker processes are spawned: they inherit the mask and ignore SIGINT from their
    first instruction (a Ctrl-C then is delivered to the parent when it unblocks, not lost)."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# --------------------------------------------------------------------------------------------- backends


class _Inline:
    """Runs each job in this process when it is waited for (``workers=1``)."""

    capacity = 1

    def __init__(self) -> None:
        self._queue: list[Job] = []

    def submit(self, job: Job) -> None:
        self._queue.append(job)

    def wait_done(self, timeout: float) -> list[JobResult]:
        return [execute_job(self._queue.pop(0))] if self._queue else []

    @property
    def n_running(self) -> int:
        return len(self._queue)

    def stop(self) -> None:
        self._queue.clear()


class _Pool:
    """A spawn process pool whose workers die with this process (see the module docstring)."""

    def __init__(self, workers: int) -> None:
        self.capacity = workers
        self._pool: ProcessPoolExecutor | None = None
        self._running: dict[Future[JobResult], Job] = {}

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.capacity, mp_context=get_context("spawn"), initializer=_worker_init,
                initargs=(os.getpid(),),
            )  # fmt: skip
        return self._pool

    def submit(self, job: Job) -> None:
        with _sigint_blocked():
            try:
                fut = self._executor().submit(execute_job, job)
            except BrokenProcessPool:  # a worker died earlier: start a fresh pool
                self._discard()
                fut = self._executor().submit(execute_job, job)
        self._running[fut] = job

    @property
    def n_running(self) -> int:
        return len(self._running)

    def wait_done(self, timeout: float) -> list[JobResult]:
        if not self._running:
            return []
        done, _ = wait(self._running, timeout=timeout, return_when=FIRST_COMPLETED)
        out = []
        for fut in done:
            job = self._running.pop(fut)
            try:
                out.append(fut.result())
            except Exception as exc:  # noqa: BLE001 - a worker that died is a failed job
                out.append(JobResult(job, "error", {}, 0.0, f"worker process failed: {exc!r}"))
        return out

    def _discard(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + 5.0
        for proc in processes:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)

    def close(self) -> None:
        """Normal end: every job has been collected; let the workers exit."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def stop(self) -> None:
        """Interrupted: terminate the workers now (their jobs are not stored)."""
        self._running.clear()
        self._discard()


class _Ray:
    def __init__(self, workers: int | None, address: str | None) -> None:
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RunnerError("the ray backend needs Ray: pip install 'icml24[distributed]'") from exc
        self.ray = ray
        if address:
            probe_ray_address(address)
        self.started_here = not ray.is_initialized()
        if self.started_here:
            kwargs: dict[str, object] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            elif workers:
                kwargs["num_cpus"] = workers
            # Workers must import this package and the job modules: pass the driver's sys.path along.
            pythonpath = os.pathsep.join(p for p in sys.path if p)
            env_vars = {"PYTHONPATH": pythonpath}
            # A forced kernel set (ATEN_CPU_CAPABILITY=avx2 icml24 reproduce ...) must reach the workers too; on a
            # cluster too, where nothing else of the driver's environment is passed.
            if os.environ.get("ATEN_CPU_CAPABILITY"):
                env_vars["ATEN_CPU_CAPABILITY"] = os.environ["ATEN_CPU_CAPABILITY"]
            if address:  # the cluster's own paths; only the kernel choice travels
                env_vars.pop("PYTHONPATH")
            kwargs["runtime_env"] = {"env_vars": env_vars} if env_vars else {}
            try:
                ray.init(**kwargs)
            except (ConnectionError, TimeoutError, RuntimeError) as exc:
                raise RunnerError(f"cannot connect to the Ray cluster at {address or 'a new local Ray'}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None  # fmt: skip
        cpus = int(ray.cluster_resources().get("CPU", workers or 1))
        self.capacity = max(1, 2 * cpus)  # keep every CPU busy, claim little ahead
        self._remote = ray.remote(num_cpus=1, max_retries=0)(execute_job)
        self._refs: dict[Any, Job] = {}

    def submit(self, job: Job) -> None:
        self._refs[self._remote.remote(job)] = job

    @property
    def n_running(self) -> int:
        return len(self._refs)

    def wait_done(self, timeout: float) -> list[JobResult]:
        if not self._refs:
            return []
        done, _ = self.ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        out = []
        for ref in done:
            job = self._refs.pop(ref)
            try:
                out.append(self.ray.get(ref))
            except Exception as exc:  # noqa: BLE001 - a lost task is a failed job
                out.append(JobResult(job, "error", {}, 0.0, f"ray task failed: {exc!r}"))
        return out

    def stop(self) -> None:
        for ref in self._refs:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001, S110 - best effort on the way out
                pass
        self._refs.clear()
        self.close()

    def close(self) -> None:
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()


def probe_ray_address(address: str, timeout: float = RAY_PROBE_TIMEOUT_S) -> str:
    """Check that a Ray cluster answers at ``address`` (``"auto"``, ``"host:port"``, ``"ray://host:port"``)
    within ``timeout`` seconds; return the ``host:port`` probed. Raises :class:`RunnerError` (one line)
    when no cluster is found or nothing listens there."""
    target = address
    if address == "auto":
        target = _find_local_ray(address)
    host_port = target.removeprefix("ray://")
    host, sep, port_text = host_port.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        raise RunnerError(f"--ray-address {address!r} is not auto, HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise RunnerError(
            f"no Ray cluster answers at {host_port} (--ray-address {address}: {why} within {timeout:g} s): start "
            "one with `ray start --head`, fix the address, or leave out --ray-address to start a local Ray"
        ) from None
    return host_port


def _find_local_ray(address: str) -> str:
    """The address ``ray.init(address="auto")`` would use: ``RAY_ADDRESS``, else the latest ``ray start``."""
    env = os.environ.get("RAY_ADDRESS", "")
    if env and env != "auto":
        return env
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die

        return canonicalize_bootstrap_address_or_die(address)
    except ImportError:  # pragma: no cover - ray internals moved: fall back to its address file
        path = os.path.join(os.environ.get("RAY_TMPDIR", "/tmp/ray"), "ray_current_cluster")  # noqa: S108
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                found = f.read().strip()
            if found:
                return found
    except Exception:  # noqa: BLE001 - ray raises ConnectionError (or others) when it finds nothing
        pass
    raise RunnerError(
        "--ray-address auto found no running Ray cluster on this machine: start one with `ray start --head`, "
        "pass its address, or leave out --ray-address to start a local Ray"
    )


# --------------------------------------------------------------------------------------------- the run


def run_jobs(
    jobs: Sequence[Job],
    store: ResultStore,
    *,
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    force: bool = False,
    scale: str | None = None,
    progress: ProgressCallback | None = None,
) -> RunStats:
    """Run the jobs that are not in the store yet and store each result when it arrives.

    Args:
        jobs: the jobs to run (any mix of papers).
        store: where finished jobs are recorded; jobs already there (status ok, current code) are skipped,
            and jobs another process has leased are left to it (and taken over if it dies).
        backend: ``"local"`` or ``"ray"``.
        workers: processes for ``local`` (default: the core count); CPUs to start a local Ray with.
        ray_address: address of a running Ray cluster (``"auto"``, ``"ray://host:10001"``); ``None`` starts
            a local one.
        force: rerun jobs that are already in the store (those finished by another process during this run
            are not rerun).
        scale: recorded in the store next to each result.
        progress: optional callback for progress display.

    Raises:
        RunnerError: the backend cannot start (e.g. no Ray cluster at ``ray_address``).
        RunTerminated: SIGTERM/SIGHUP arrived; KeyboardInterrupt: Ctrl-C. Either way the workers are
            stopped and every job finished before is in the store.
        StoreError: the store cannot be written (full disk, read-only...).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    start = time.perf_counter()
    run_start = time.time()
    todo = pending_jobs(jobs, store, force)
    stats = RunStats(total=len(jobs), skipped=len(jobs) - len(todo))
    if not todo:
        stats.wall_time = time.perf_counter() - start
        return stats
    state = git_state()
    owner = LeaseOwner.this_process()
    with terminate_as_exception():
        runner: _Inline | _Pool | _Ray
        if backend == "ray":
            runner = _Ray(workers, ray_address)
        else:
            n = min(workers or os.cpu_count() or 1, len(todo))
            runner = _Inline() if n == 1 else _Pool(n)
        try:
            with Heartbeat(store, owner):
                for result in _drive(todo, store, runner, owner, run_start if force else None, stats, progress):
                    try:
                        store.put(
                            result, scale=scale, backend=backend, git_commit=state.commit, git_dirty=state.dirty,
                            owner=owner,
                        )  # fmt: skip
                    except CodeChangedError:
                        # Which version ran is unknown (modules imported before or after the edit): store nothing.
                        stats.code_changed.append(result.job)
                        store.release(owner, [result.job])
                        continue
                    stats.ran += 1
                    if result.status != "ok":
                        stats.failed.append(result)
                    if progress:
                        progress("done", result.job, result)
        except BaseException:
            runner.stop()
            raise
        finally:
            try:
                store.release(owner)
            except Exception:  # noqa: BLE001, S110 - leases of a dead owner are reclaimed anyway
                pass
        if isinstance(runner, (_Pool, _Ray)):
            runner.close()
    stats.wall_time = time.perf_counter() - start
    return stats


def _drive(
    todo: Sequence[Job],
    store: ResultStore,
    runner: _Inline | _Pool | _Ray,
    owner: LeaseOwner,
    done_since: float | None,
    stats: RunStats,
    progress: ProgressCallback | None,
) -> Iterator[JobResult]:
    """Claim, submit and collect jobs until each is finished here or by another process."""
    queue = list(todo)
    waiting: list[Job] = []  # leased by another live process
    last_look = 0.0
    while queue or waiting or runner.n_running:
        # Keep at most `capacity` jobs in flight: "start" events mean what they say, an interrupt leaves
        # few submitted jobs, and the other processes on this store can claim the rest.
        while queue and runner.n_running < runner.capacity:
            job = queue.pop(0)
            outcome = store.claim(job, owner, done_since=done_since)
            if outcome == "claimed":
                runner.submit(job)
                if progress:
                    progress("start", job, None)
            elif outcome == "busy":
                waiting.append(job)
            else:
                _skip(job, stats, progress)
        if runner.n_running:
            yield from runner.wait_done(WAIT_POLL_S)
        if waiting and (not runner.n_running or time.monotonic() - last_look > WAIT_POLL_S):
            if not runner.n_running and not queue:
                time.sleep(WAIT_POLL_S)
            last_look = time.monotonic()
            still = []
            for job in waiting:
                outcome = store.claim(job, owner, done_since=done_since)
                if outcome == "busy":
                    still.append(job)
                elif outcome == "done":
                    _skip(job, stats, progress)
                else:  # its owner died: ours now
                    store.release(owner, [job])
                    queue.append(job)
            waiting = still


def _skip(job: Job, stats: RunStats, progress: ProgressCallback | None) -> None:
    stats.skipped += 1
    stats.done_elsewhere += 1
    if progress:
        progress("skip", job, None)
