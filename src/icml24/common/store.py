"""The embedded results store: one SQLite file (default ``runs/icml24.sqlite``).

A finished job is one row keyed by (slug, experiment, config hash, seed, package version). Each row is
written in its own transaction, in WAL mode with full synchronisation, so a process killed at any moment
(SIGKILL included) loses no finished job and leaves no half-written row, and several processes can write
at once (SQLite serialises writers; ``busy_timeout`` makes them wait instead of failing).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from icml24 import __version__
from icml24.common.experiment import Job, JobResult, canonical_json

DEFAULT_STORE = Path("runs") / "icml24.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    slug TEXT NOT NULL,
    experiment TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    version TEXT NOT NULL,
    fn TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    metrics TEXT NOT NULL,
    error TEXT,
    wall_time REAL NOT NULL,
    scale TEXT,
    backend TEXT,
    host TEXT,
    git_commit TEXT,
    finished_at REAL NOT NULL,
    PRIMARY KEY (slug, experiment, config_hash, seed, version)
);
CREATE TABLE IF NOT EXISTS analyses (
    slug TEXT NOT NULL,
    scale TEXT NOT NULL,
    version TEXT NOT NULL,
    verdict TEXT NOT NULL,
    summary TEXT NOT NULL,
    n_ok INTEGER NOT NULL,
    n_error INTEGER NOT NULL,
    n_missing INTEGER NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (slug, scale, version)
);
"""


class ResultStore:
    """SQLite-backed store of job results.

    Each method opens its own short-lived connection, so a ``ResultStore`` can be shared across threads
    and pickled into worker processes.
    """

    def __init__(self, path: str | Path = DEFAULT_STORE, *, version: str = __version__) -> None:
        self.path = Path(path)
        self.version = version
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        con.execute("PRAGMA busy_timeout=60000")
        con.execute("PRAGMA synchronous=FULL")
        return con

    # ------------------------------------------------------------------ writes
    def put(
        self,
        result: JobResult,
        *,
        scale: str | None = None,
        backend: str | None = None,
        git_commit: str | None = None,
    ) -> None:
        """Insert or replace one job's result, atomically."""
        job = result.job
        row = (
            job.slug, job.experiment, job.config_hash, job.seed, self.version, job.fn,
            canonical_json(dict(job.config)), result.status, json.dumps(result.metrics, allow_nan=True),
            result.error, float(result.wall_time), scale, backend, socket.gethostname(), git_commit,
            time.time(),
        )  # fmt: skip
        with closing(self._connect()) as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                con.execute(
                    "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def put_analysis(
        self, slug: str, scale: str, verdict: str, summary: str, n_ok: int, n_error: int, n_missing: int
    ) -> None:
        with closing(self._connect()) as con:
            con.execute(
                "INSERT OR REPLACE INTO analyses VALUES (?,?,?,?,?,?,?,?,?)",
                (slug, scale, self.version, verdict, summary, n_ok, n_error, n_missing, time.time()),
            )

    # ------------------------------------------------------------------ reads
    def get(self, job: Job) -> JobResult | None:
        """The stored result of ``job`` for this package version, or ``None``."""
        with closing(self._connect()) as con:
            row = con.execute(
                "SELECT status, metrics, error, wall_time FROM runs "
                "WHERE slug=? AND experiment=? AND config_hash=? AND seed=? AND version=?",
                (job.slug, job.experiment, job.config_hash, job.seed, self.version),
            ).fetchone()
        if row is None:
            return None
        return JobResult(job, row[0], json.loads(row[1]), row[3], row[2])

    def get_many(self, jobs: Sequence[Job]) -> list[JobResult | None]:
        """Results for many jobs in one query (``None`` where a job has no row)."""
        wanted: dict[tuple[str, str, str, int], Job] = {j.key: j for j in jobs}
        found: dict[tuple[str, str, str, int], JobResult] = {}
        slugs = sorted({j.slug for j in jobs})
        with closing(self._connect()) as con:
            for slug in slugs:
                for exp, chash, seed, status, metrics, error, wall in con.execute(
                    "SELECT experiment, config_hash, seed, status, metrics, error, wall_time FROM runs "
                    "WHERE slug=? AND version=?",
                    (slug, self.version),
                ):
                    key = (slug, exp, chash, seed)
                    if key in wanted:
                        found[key] = JobResult(wanted[key], status, json.loads(metrics), wall, error)
        return [found.get(j.key) for j in jobs]

    def done_keys(self, slugs: Iterable[str]) -> set[tuple[str, str, str, int]]:
        """Keys of the jobs that finished successfully (errored jobs are retried on the next run)."""
        out: set[tuple[str, str, str, int]] = set()
        with closing(self._connect()) as con:
            for slug in set(slugs):
                out.update(
                    (slug, e, h, s)
                    for e, h, s in con.execute(
                        "SELECT experiment, config_hash, seed FROM runs "
                        "WHERE slug=? AND version=? AND status='ok'",
                        (slug, self.version),
                    )
                )
        return out

    def summary(self, slug: str) -> list[dict[str, Any]]:
        """Per experiment and version: job counts by status and the time of the last finished job."""
        with closing(self._connect()) as con:
            rows = con.execute(
                "SELECT experiment, version, status, COUNT(*), MAX(finished_at), SUM(wall_time) FROM runs "
                "WHERE slug=? GROUP BY experiment, version, status ORDER BY MAX(finished_at) DESC",
                (slug,),
            ).fetchall()
        return [
            {"experiment": e, "version": v, "status": s, "count": n, "last": t, "wall_time": w}
            for e, v, s, n, t, w in rows
        ]

    def analyses(self, slug: str) -> list[dict[str, Any]]:
        """The verdicts recorded for ``slug``, newest first."""
        with closing(self._connect()) as con:
            rows = con.execute(
                "SELECT scale, version, verdict, summary, n_ok, n_error, n_missing, created_at "
                "FROM analyses WHERE slug=? ORDER BY created_at DESC",
                (slug,),
            ).fetchall()
        keys = ("scale", "version", "verdict", "summary", "n_ok", "n_error", "n_missing", "created_at")
        return [dict(zip(keys, r)) for r in rows]

    def count(self, slug: str | None = None) -> int:
        with closing(self._connect()) as con:
            if slug is None:
                return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            return con.execute("SELECT COUNT(*) FROM runs WHERE slug=?", (slug,)).fetchone()[0]
