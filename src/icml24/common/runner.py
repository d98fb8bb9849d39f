"""Run jobs on a backend and record every finished one in the store as soon as it finishes.

Backends:
- ``local``: a process pool on this machine (``workers`` processes, started with ``spawn`` so that torch and
  BLAS thread pools are fresh); ``workers=1`` runs the jobs in this process.
- ``ray``: each job is a Ray task on the cluster at ``ray_address`` (a local Ray when ``None``); the package
  must be installed on every node.

Whatever the backend, a job runs through :func:`~icml24.common.experiment.execute_job`, so it gives the same
numbers everywhere, and only the driver writes to the store (one row, one transaction, per job).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from icml24.common.experiment import Job, JobResult, execute_job
from icml24.common.store import ResultStore

BACKENDS = ("local", "ray")


@dataclass
class RunStats:
    """What a call to :func:`run_jobs` did."""

    total: int = 0
    skipped: int = 0
    ran: int = 0
    failed: list[JobResult] = field(default_factory=list)
    wall_time: float = 0.0


ProgressCallback = Callable[[str, Job, JobResult | None], None]
"""Called with ``("start", job, None)`` and ``("done", job, result)``."""


def git_commit() -> str | None:
    """The commit of the checkout the package runs from, when it is a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def pending_jobs(jobs: Sequence[Job], store: ResultStore, force: bool = False) -> list[Job]:
    """The jobs that still have to run: all of them with ``force``, else those without an ok row."""
    if force:
        return list(jobs)
    done = store.done_keys(j.slug for j in jobs)
    return [j for j in jobs if j.key not in done]


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
        store: where finished jobs are recorded; jobs already there (status ok) are skipped.
        backend: ``"local"`` or ``"ray"``.
        workers: processes for ``local`` (default: the core count); CPUs to start a local Ray with.
        ray_address: address of a running Ray cluster (``"auto"``, ``"ray://host:10001"``); ``None`` starts
            a local one.
        force: rerun jobs that are already in the store.
        scale: recorded in the store next to each result.
        progress: optional callback for progress display.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    start = time.perf_counter()
    todo = pending_jobs(jobs, store, force)
    stats = RunStats(total=len(jobs), skipped=len(jobs) - len(todo))
    commit = git_commit()
    if todo:
        if backend == "ray":
            results = _run_ray(todo, workers, ray_address, progress)
        else:
            results = _run_local(todo, workers or os.cpu_count() or 1, progress)
        for result in results:
            store.put(result, scale=scale, backend=backend, git_commit=commit)
            stats.ran += 1
            if result.status != "ok":
                stats.failed.append(result)
            if progress:
                progress("done", result.job, result)
    stats.wall_time = time.perf_counter() - start
    return stats


def _run_local(jobs: Sequence[Job], workers: int, progress: ProgressCallback | None) -> Iterator[JobResult]:
    if workers == 1 or len(jobs) == 1:
        for job in jobs:
            if progress:
                progress("start", job, None)
            yield execute_job(job)
        return
    ctx = get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        queue = list(jobs)
        running: dict[Future[JobResult], Job] = {}
        try:
            # Keep at most `workers` jobs in flight so that "start" events mean what they say and an
            # interrupt leaves few submitted-but-unstarted jobs to cancel.
            while queue or running:
                while queue and len(running) < workers:
                    job = queue.pop(0)
                    running[pool.submit(execute_job, job)] = job
                    if progress:
                        progress("start", job, None)
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    job = running.pop(fut)
                    try:
                        yield fut.result()
                    except Exception as exc:  # noqa: BLE001 - a worker that died is a failed job
                        yield JobResult(job, "error", {}, 0.0, f"worker process failed: {exc!r}")
        except BaseException:
            for fut in running:
                fut.cancel()
            raise


def _run_ray(
    jobs: Sequence[Job], workers: int | None, address: str | None, progress: ProgressCallback | None
) -> Iterator[JobResult]:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("the ray backend needs Ray: pip install 'icml24[distributed]'") from exc

    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, object] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        elif workers:
            kwargs["num_cpus"] = workers
        # Workers must import this package and the job modules: pass the driver's sys.path along.
        pythonpath = os.pathsep.join(p for p in sys.path if p)
        kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": pythonpath}} if not address else {}
        ray.init(**kwargs)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(execute_job)
        refs = {}
        for job in jobs:
            refs[remote.remote(job)] = job
            if progress:
                progress("start", job, None)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    yield ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost task is a failed job
                    yield JobResult(refs[ref], "error", {}, 0.0, f"ray task failed: {exc!r}")
    finally:
        if started_here:
            ray.shutdown()
