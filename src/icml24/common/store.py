"""The embedded results store: one SQLite file (default ``runs/icml24.sqlite``).

A finished job is one row keyed by (slug, experiment, config hash, seed, package version, code
fingerprint). The code fingerprint (:mod:`icml24.common.fingerprint`) is a content hash of the code the job
runs, so a change to a job's code means its old row is not reused: the job reruns and the old row stays as
history. Each row also records the git commit and whether the source tree was dirty, and a checksum
(sha256 of the canonical JSON of its metrics): a row whose metrics no longer match their checksum is
refused (read back as a crashed job whose error says so, rerun by the next ``reproduce``), never silently
used. An ``ok`` row with empty metrics is refused the same way.

Each row is written in its own transaction, in WAL mode with full synchronisation, so a process killed at
any moment (SIGKILL included) loses no finished job and leaves no half-written row, and several processes
can write at once (SQLite serialises writers; ``busy_timeout`` makes them wait instead of failing).
Processes that share a store claim each job with a lease row (owner pid, host, heartbeat) before running it
(:meth:`ResultStore.claim`), so two ``reproduce`` runs on one store run each job once; a lease whose owner
died or stopped beating is reclaimed.

Every failure of the file itself (missing folder, a file in the way, read-only file or folder, full disk,
garbage, truncation, another program's database) raises :class:`StoreError`, whose one-line message names
the path and the fix. ``ResultStore(path, readonly=True)`` opens the file read-only (SQLite ``mode=ro``) for
``report`` and ``show``, so they work on a store the user cannot write.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from icml24 import __version__
from icml24.common.environment import describe as describe_environment
from icml24.common.environment import environment_key, job_environment
from icml24.common.experiment import Job, JobResult, canonical_json
from icml24.common.fingerprint import Fingerprinter, GitState, combine, git_state
from icml24.common.leases import LeaseOwner, lease_is_live

DEFAULT_STORE = Path("runs") / "icml24.sqlite"

SCHEMA_VERSION = 3
"""``PRAGMA user_version`` of a store this code writes. 0: the first schema (no code fingerprint, no
checksum, no leases), migrated in place on the first write; rows of it stay readable as history. 2: no
``environment`` column (the floating-point environment of each job), added in place on the first write."""

CORRUPT_ROW = "corrupt row in the store"
"""How the ``error`` of a refused row starts (checksum mismatch, unreadable metrics, an ok row without
metrics): the row is read back as a crashed job, reported, and rerun by the next ``reproduce``."""

_RUNS_COLUMNS = (
    "slug", "experiment", "config_hash", "seed", "version", "code_fingerprint", "fn", "config", "status",
    "metrics", "checksum", "error", "wall_time", "scale", "backend", "host", "git_commit", "git_dirty",
    "finished_at", "environment",
)  # fmt: skip

_RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    slug TEXT NOT NULL,
    experiment TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    version TEXT NOT NULL,
    code_fingerprint TEXT NOT NULL,
    fn TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    metrics TEXT NOT NULL,
    checksum TEXT,
    error TEXT,
    wall_time REAL NOT NULL,
    scale TEXT,
    backend TEXT,
    host TEXT,
    git_commit TEXT,
    git_dirty INTEGER,
    finished_at REAL NOT NULL,
    environment TEXT,
    PRIMARY KEY (slug, experiment, config_hash, seed, version, code_fingerprint)
);
"""

_OTHER_TABLES = """
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
    code_fingerprint TEXT,
    git_commit TEXT,
    git_dirty INTEGER,
    PRIMARY KEY (slug, scale, version)
);
CREATE TABLE IF NOT EXISTS leases (
    slug TEXT NOT NULL,
    experiment TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    version TEXT NOT NULL,
    code_fingerprint TEXT NOT NULL,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid_start TEXT,
    heartbeat REAL NOT NULL,
    claimed_at REAL NOT NULL,
    PRIMARY KEY (slug, experiment, config_hash, seed, version, code_fingerprint)
);
CREATE INDEX IF NOT EXISTS leases_owner ON leases (owner);
"""

_V0_RUNS_COLUMNS = {
    "slug", "experiment", "config_hash", "seed", "version", "fn", "config", "status", "metrics", "error",
    "wall_time", "scale", "backend", "host", "git_commit", "finished_at",
}  # fmt: skip


class StoreError(Exception):
    """The store file cannot be used; the message (one line) names the path and the fix."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CodeChangedError(StoreError):
    """A job's code changed on disk after its fingerprint was taken (an edit or a ``git pull`` during a long
    sweep over an editable install): the result may come from either version, so it is not stored under
    either fingerprint; rerun the job."""


def metrics_checksum(metrics: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, no whitespace, NaN as ``NaN``) of a row's metrics."""
    return hashlib.sha256(canonical_json(metrics).encode()).hexdigest()


def is_corrupt(result: JobResult | None) -> bool:
    """Whether a result read from the store is a refused row (see :data:`CORRUPT_ROW`)."""
    return result is not None and result.status == "error" and (result.error or "").startswith(CORRUPT_ROW)


@dataclass(frozen=True)
class CodeRun:
    """One code state at which stored rows of a paper ran.

    Attributes:
        fingerprint: the code fingerprint of the rows (``""`` for rows of the first schema, which had none).
        git_commit: the commit they ran at (``None``: not a git checkout).
        git_dirty: whether the source tree had uncommitted changes (``None``: unknown).
        n_rows: how many rows (jobs of the requested list) ran at this state.
        last_finished: Unix time of the newest of them.
        current: whether ``fingerprint`` is the fingerprint of the code as it is now.
    """

    fingerprint: str
    git_commit: str | None
    git_dirty: bool | None
    n_rows: int
    last_finished: float
    current: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint, "git_commit": self.git_commit, "git_dirty": self.git_dirty,
            "n_rows": self.n_rows, "last_finished": self.last_finished, "current": self.current,
        }  # fmt: skip


@dataclass(frozen=True)
class RunEnvironment:
    """One floating-point environment in which rows the report uses ran (:mod:`icml24.common.environment`).

    Attributes:
        key: :func:`~icml24.common.environment.environment_key` of it (``""``: rows stored before
            environments were recorded).
        environment: the recorded environment (``None`` when not recorded).
        n_rows: how many of the rows ran in it.
    """

    key: str
    environment: dict[str, Any] | None
    n_rows: int

    @property
    def is_readers(self) -> bool:
        """Whether this is the environment of the process reading the store (the same kernels and libraries)."""
        return bool(self.key) and self.key == job_environment()["key"]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "n_rows": self.n_rows, "description": describe_environment(self.environment),
                "readers": self.is_readers, "environment": self.environment}  # fmt: skip


@dataclass(frozen=True)
class Provenance:
    """What code a paper's stored results ran at, against the code as it is now
    (:meth:`ResultStore.provenance`).

    Attributes:
        fingerprint: the fingerprint of the current code of these jobs (one per paper, see
            :func:`~icml24.common.fingerprint.combine`).
        git_commit, git_dirty: the current checkout (``None`` outside git).
        runs: the code states of the stored rows of these jobs at this package version, newest first; the
            ``current`` ones are the rows the report uses.
        n_current: jobs with a row at the current fingerprint (the report uses these).
        n_stale: jobs with rows only at other fingerprints (numbers of older code: not used, rerun them).
        environments: the floating-point environments of the rows the report uses, most rows first.
    """

    fingerprint: str
    git_commit: str | None
    git_dirty: bool | None
    runs: tuple[CodeRun, ...]
    n_current: int
    n_stale: int
    environments: tuple[RunEnvironment, ...] = ()

    @property
    def mixed_environments(self) -> bool:
        """Whether the rows the report uses ran in more than one floating-point environment."""
        return len(self.environments) > 1

    @property
    def foreign_environment(self) -> bool:
        """Whether some rows the report uses ran in another environment than the reader's (or unrecorded)."""
        return any(not e.is_readers for e in self.environments)

    @property
    def matches(self) -> bool:
        """Whether every job with a stored row has one at the current code (nothing stale)."""
        return self.n_stale == 0

    @property
    def current_runs(self) -> tuple[CodeRun, ...]:
        """The code states of the rows the report uses (several commits can share one fingerprint)."""
        return tuple(r for r in self.runs if r.current)

    @property
    def dirty(self) -> bool:
        """Whether any row the report uses ran on a dirty tree."""
        return any(r.git_dirty for r in self.current_runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint, "git_commit": self.git_commit, "git_dirty": self.git_dirty,
            "matches": self.matches, "n_current": self.n_current, "n_stale": self.n_stale,
            "runs": [r.to_dict() for r in self.runs],
            "environments": [e.to_dict() for e in self.environments],
            "mixed_environments": self.mixed_environments, "foreign_environment": self.foreign_environment,
        }  # fmt: skip


ClaimOutcome = Literal["claimed", "done", "busy"]


class ResultStore:
    """SQLite-backed store of job results.

    Each method opens its own short-lived connection, so a ``ResultStore`` can be shared across threads
    and pickled into worker processes. The code fingerprints of the jobs are computed once per store
    object (one per run) and cached.

    Args:
        path: the SQLite file (created, with its folder, unless ``readonly``).
        version: the package version that is part of the key.
        readonly: open read-only (``report``, ``show``): nothing is created, migrated or written.

    Raises:
        StoreError: the file cannot be opened, is not an icml24 store, is damaged or cannot be written.
    """

    def __init__(self, path: str | Path = DEFAULT_STORE, *, version: str = __version__, readonly: bool = False):
        self.path = Path(path)
        self.version = version
        self.readonly = readonly
        self._fingerprints = Fingerprinter()
        self._fresh: Fingerprinter | None = None  # the code on disk now, once it has changed since the start
        self._git: GitState | None = None
        self._immutable = False
        if readonly:
            self._open_readonly()
        else:
            self._open_writable()

    # ------------------------------------------------------------------ opening
    def _open_writable(self) -> None:
        path = self.path
        if path.is_dir():
            raise StoreError(f"store path {path} is a folder: pass --store FILE.sqlite", path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            blocker = next((p for p in [path.parent, *path.parent.parents] if p.exists() and not p.is_dir()), None)
            raise StoreError(
                f"cannot create the store {path}: {blocker or path.parent} is a file, not a folder; "
                "move it away or pass --store elsewhere",
                path,
            ) from None
        except PermissionError:
            raise StoreError(
                f"cannot create the folder {path.parent} for the store {path}: permission denied; "
                "pass --store in a writable folder",
                path,
            ) from None
        except OSError as exc:
            raise self._error(exc, "create") from None
        # SQLite would open a read-only file read-only without a word and fail at the first result; WAL
        # also needs to create its -wal and -shm files beside the store. Say so before any job runs.
        not_writable = [p for p in (path, path.parent) if p.exists() and not os.access(p, os.W_OK)]
        if not_writable:
            what = " and ".join(f"{'folder' if p.is_dir() else 'file'} {p}" for p in not_writable)
            raise StoreError(
                f"store {path} is read-only ({what} not writable): make it writable, or pass --store PATH "
                "(`icml24 report` and `show` can read it as it is)",
                path,
            )
        with self._guard("open"), closing(self._connect()) as con:
            self._check_integrity(con)
            con.execute("PRAGMA journal_mode=WAL")
            self._create_or_migrate(con)

    def _open_readonly(self) -> None:
        if not self.path.exists():
            raise StoreError(f"no results store at {self.path}: run `icml24 reproduce` first or pass --store", self.path)
        if self.path.is_dir():
            raise StoreError(f"store path {self.path} is a folder: pass --store FILE.sqlite", self.path)
        try:
            with closing(self._connect()) as con:
                con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            # A WAL store in a folder we cannot write, whose -shm file is gone, cannot be opened with
            # mode=ro: open it as immutable (nobody can be writing it: we could not either).
            if "unable to open" not in str(exc) and "readonly" not in str(exc):
                raise self._error(exc, "open") from None
            self._immutable = True
        except sqlite3.Error as exc:
            raise self._error(exc, "open") from None
        with self._guard("open"), closing(self._connect()) as con:
            self._check_integrity(con)
            self._check_schema(con, migrate=False)

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            mode = "immutable=1" if self._immutable else "mode=ro"
            uri = f"file:{quote(str(self.path.resolve()))}?{mode}"
            con = sqlite3.connect(uri, uri=True, timeout=60.0, isolation_level=None)
        else:
            con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            con.execute("PRAGMA synchronous=FULL")
        con.execute("PRAGMA busy_timeout=60000")
        return con

    def _check_integrity(self, con: sqlite3.Connection) -> None:
        """Refuse a damaged file at once (a truncated store reads fine until the missing pages are needed)."""
        problems = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise StoreError(
                f"store {self.path} is damaged ({problems[0][:80]}): restore it from a backup, or move it away "
                "to start a new store",
                self.path,
            )

    def _check_schema(self, con: sqlite3.Connection, *, migrate: bool) -> bool:
        """Check the file holds an icml24 store of a known schema. Returns whether it must be created
        (empty file) or migrated (first schema); raises :class:`StoreError` otherwise."""
        user_version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if user_version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema {user_version}, written by a newer icml24 (this one reads up to "
                f"{SCHEMA_VERSION}): upgrade icml24 or pass --store elsewhere",
                self.path,
            )
        if "runs" not in tables:
            if tables:
                raise StoreError(
                    f"{self.path} is an SQLite database but not an icml24 store (it holds tables "
                    f"{', '.join(sorted(tables)[:5])}): pass --store elsewhere",
                    self.path,
                )
            if not migrate:
                raise StoreError(f"store {self.path} is empty: run `icml24 reproduce` first", self.path)
            return True
        columns = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
        if user_version == SCHEMA_VERSION and columns >= set(_RUNS_COLUMNS):
            return False
        if user_version == 2 and columns >= set(_RUNS_COLUMNS) - {"environment"}:
            if not migrate:
                raise StoreError(
                    f"store {self.path} has schema 2 (no job environments): run `icml24 reproduce` once on it (it "
                    "adds the column in place, keeping every row) or make it writable",
                    self.path,
                )
            return True
        if user_version == 0 and columns == _V0_RUNS_COLUMNS:
            if not migrate:
                raise StoreError(
                    f"store {self.path} has the first icml24 schema: run `icml24 reproduce` once on it (it "
                    "migrates in place, keeping every row) or make it writable",
                    self.path,
                )
            return True
        raise StoreError(
            f"store {self.path} has a `runs` table that is not icml24's (schema {user_version}, columns "
            f"{', '.join(sorted(columns)[:6])}...): pass --store elsewhere",
            self.path,
        )

    def _create_or_migrate(self, con: sqlite3.Connection) -> None:
        if not self._check_schema(con, migrate=True):
            return
        with _transaction(con):
            # Recheck inside the write lock: another process may have created or migrated it meanwhile.
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return
            if version == 2 and "runs" in tables:
                # Schema 2 lacks only the environment column: rows keep NULL (environment not recorded).
                con.execute("ALTER TABLE runs ADD COLUMN environment TEXT")
            elif "runs" in tables:
                # First schema: the primary key gains the code fingerprint, so rebuild the table; old
                # rows keep an empty fingerprint (unknown code), are never reused, and stay as history.
                con.execute("ALTER TABLE runs RENAME TO runs_v0")
                con.execute(_RUNS_TABLE)
                old = sorted(_V0_RUNS_COLUMNS)
                con.execute(
                    f"INSERT INTO runs ({', '.join(old)}, code_fingerprint) SELECT {', '.join(old)}, '' FROM runs_v0"
                )
                con.execute("DROP TABLE runs_v0")
                if "analyses" in tables:
                    have = {r[1] for r in con.execute("PRAGMA table_info(analyses)")}
                    for col, kind in (("code_fingerprint", "TEXT"), ("git_commit", "TEXT"), ("git_dirty", "INTEGER")):
                        if col not in have:
                            con.execute(f"ALTER TABLE analyses ADD COLUMN {col} {kind}")
            else:
                con.execute(_RUNS_TABLE)
            for statement in filter(str.strip, _OTHER_TABLES.split(";")):
                con.execute(statement)
            con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # ------------------------------------------------------------------ errors
    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn SQLite and OS errors about the file into one-line :class:`StoreError` s."""
        try:
            yield
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc, action) from exc

    def _error(self, exc: BaseException, action: str) -> StoreError:
        path = self.path
        text = str(exc)
        low = text.lower()
        code = getattr(exc, "sqlite_errorcode", None)
        full = "disk is full" in low or getattr(exc, "errno", None) == errno.ENOSPC or code == 13
        if not full and ("disk i/o error" in low or isinstance(exc, OSError)):
            # SQLite reports many an ENOSPC as a plain I/O error (SQLITE_IOERR_WRITE, _SHMSIZE...).
            full = _free_bytes(path) < _FULL_BELOW_BYTES
        if full:
            msg = (
                f"the disk holding the store {path} is full ({_free_bytes(path) // 1024} KiB free; {action} "
                "failed): free space, or pass --store on another disk"
            )
        elif "readonly" in low or "read-only" in low or isinstance(exc, PermissionError):
            msg = (
                f"store {path} is read-only ({action} failed): make the file and its folder writable, "
                "or pass --store PATH (report and show only read it)"
            )
        elif "not a database" in low:
            msg = f"{path} is not an icml24 store (not an SQLite file): move it away or pass --store elsewhere"
        elif "malformed" in low or "corrupt" in low:
            msg = f"store {path} is damaged ({text}): restore it from a backup, or move it away to start a new store"
        elif "unable to open" in low:
            msg = (
                f"cannot open the store {path} ({action}): check that its folder exists and is writable, "
                "or pass --store elsewhere"
            )
        elif "locked" in low or "busy" in low:
            msg = f"store {path} stayed locked by another process for 60 s ({action}): retry when it has finished"
        elif "disk i/o error" in low or isinstance(exc, OSError):
            name = getattr(exc, "sqlite_errorname", None) or text
            msg = f"I/O error on the store {path} ({action}: {name}): check the disk (space, quota, file size limit)"
        else:
            msg = f"store {path} failed ({action}: {text}): move it away or pass --store elsewhere"
        return StoreError(msg, path)

    def _write_check(self) -> None:
        if self.readonly:
            raise StoreError(f"store {self.path} was opened read-only: open it without readonly=True to write", self.path)

    # ------------------------------------------------------------------ code
    def fingerprint(self, job: Job) -> str:
        """The fingerprint of the code ``job`` runs (cached per module for the life of this object)."""
        return self._fingerprints.for_fn(job.fn)

    def code_unchanged(self, job: Job) -> bool:
        """Is the code of ``job`` on disk still the code its fingerprint was taken of? Only when a file the
        fingerprint read has changed (a ``stat`` per file) is the fingerprint recomputed from disk; a change that
        leaves the normal form alone (a comment, a docstring) keeps the job current."""
        if not self._fingerprints.changed_files():
            return True
        if self._fresh is None or self._fresh.changed_files():
            self._fresh = Fingerprinter()
        return self._fresh.for_fn(job.fn) == self.fingerprint(job)

    def git(self) -> GitState:
        """The git state of the running package (computed once per store object)."""
        if self._git is None:
            self._git = git_state()
        return self._git

    def _full_key(self, job: Job) -> tuple[str, str, str, int, str, str]:
        return (job.slug, job.experiment, job.config_hash, job.seed, self.version, self.fingerprint(job))

    # ------------------------------------------------------------------ writes
    def put(
        self,
        result: JobResult,
        *,
        scale: str | None = None,
        backend: str | None = None,
        git_commit: str | None = None,
        git_dirty: bool | None = None,
        owner: LeaseOwner | None = None,
    ) -> None:
        """Insert or replace one job's result (at the current code fingerprint), atomically; release the
        lease ``owner`` held on it in the same transaction. ``git_commit``/``git_dirty`` default to the
        running checkout's."""
        self._write_check()
        job = result.job
        if not self.code_unchanged(job):
            raise CodeChangedError(
                f"{job.label}: its code changed on disk while the run was going (fingerprint "
                f"{self.fingerprint(job)} when planned, {self._fresh.for_fn(job.fn) if self._fresh else '?'} now): "
                "the result is not stored; rerun it", self.path)  # fmt: skip
        if git_commit is None and git_dirty is None:
            state = self.git()
            git_commit, git_dirty = state.commit, state.dirty
        key = self._full_key(job)
        metrics_text = json.dumps(result.metrics, allow_nan=True)
        row = (
            *key, job.fn, canonical_json(dict(job.config)), result.status, metrics_text,
            metrics_checksum(result.metrics), result.error, float(result.wall_time), scale, backend,
            socket.gethostname(), git_commit, None if git_dirty is None else int(git_dirty), time.time(),
            None if result.environment is None else canonical_json(result.environment),
        )  # fmt: skip
        with self._guard("writing a result"), closing(self._connect()) as con, _transaction(con):
            con.execute(
                f"INSERT OR REPLACE INTO runs ({', '.join(_RUNS_COLUMNS)}) VALUES ({','.join('?' * len(_RUNS_COLUMNS))})",
                row,
            )
            if owner is not None:
                con.execute(
                    "DELETE FROM leases WHERE slug=? AND experiment=? AND config_hash=? AND seed=? AND version=? "
                    "AND code_fingerprint=? AND owner=?",
                    (*key, owner.token),
                )

    def put_analysis(
        self,
        slug: str,
        scale: str,
        verdict: str,
        summary: str,
        n_ok: int,
        n_error: int,
        n_missing: int,
        *,
        fingerprint: str | None = None,
    ) -> None:
        """Record a paper's verdict (with the code fingerprint of the rows it was computed from)."""
        self._write_check()
        state = self.git()
        with self._guard("writing a verdict"), closing(self._connect()) as con:
            con.execute(
                "INSERT OR REPLACE INTO analyses (slug, scale, version, verdict, summary, n_ok, n_error, n_missing, "
                "created_at, code_fingerprint, git_commit, git_dirty) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (slug, scale, self.version, verdict, summary, n_ok, n_error, n_missing, time.time(), fingerprint,
                 state.commit, None if state.dirty is None else int(state.dirty)),
            )  # fmt: skip

    # ------------------------------------------------------------------ leases
    def claim(self, job: Job, owner: LeaseOwner, *, done_since: float | None = None) -> ClaimOutcome:
        """Try to take the lease on ``job`` for ``owner``, in one write transaction.

        Returns ``"done"`` when the job already has a valid ok row at the current code (finished at or after
        ``done_since`` when given: ``--force`` reruns older rows), ``"busy"`` when another live owner holds
        its lease, ``"claimed"`` otherwise (no lease, our own, or one whose owner is dead or whose heartbeat
        is older than :data:`~icml24.common.leases.LEASE_STALE_S`).
        """
        self._write_check()
        key = self._full_key(job)
        where = "slug=? AND experiment=? AND config_hash=? AND seed=? AND version=? AND code_fingerprint=?"
        now = time.time()
        with self._guard("claiming a job"), closing(self._connect()) as con, _transaction(con):
            row = con.execute(f"SELECT status, metrics, checksum, finished_at FROM runs WHERE {where}", key).fetchone()
            if row is not None:
                result = _row_result(job, row[0], row[1], None, 0.0, row[2])
                if result.status == "ok" and (done_since is None or row[3] >= done_since):
                    return "done"
            lease = con.execute(f"SELECT owner, pid, host, pid_start, heartbeat FROM leases WHERE {where}", key).fetchone()
            if lease is not None and lease[0] != owner.token and lease_is_live(*lease[1:], now=now):
                return "busy"
            con.execute(
                "INSERT OR REPLACE INTO leases (slug, experiment, config_hash, seed, version, code_fingerprint, "
                "owner, pid, host, pid_start, heartbeat, claimed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (*key, owner.token, owner.pid, owner.host, owner.pid_start, now, now),
            )
        return "claimed"

    def heartbeat(self, owner: LeaseOwner) -> int:
        """Refresh the heartbeat of every lease ``owner`` holds; returns how many it holds."""
        self._write_check()
        with self._guard("refreshing leases"), closing(self._connect()) as con:
            return con.execute("UPDATE leases SET heartbeat=? WHERE owner=?", (time.time(), owner.token)).rowcount

    def release(self, owner: LeaseOwner, jobs: Iterable[Job] | None = None) -> None:
        """Drop ``owner``'s leases (on ``jobs``, or all of them)."""
        self._write_check()
        with self._guard("releasing leases"), closing(self._connect()) as con, _transaction(con):
            if jobs is None:
                con.execute("DELETE FROM leases WHERE owner=?", (owner.token,))
                return
            for job in jobs:
                con.execute(
                    "DELETE FROM leases WHERE slug=? AND experiment=? AND config_hash=? AND seed=? AND version=? "
                    "AND code_fingerprint=? AND owner=?",
                    (*self._full_key(job), owner.token),
                )

    def leases(self) -> list[dict[str, Any]]:
        """Every lease row (for tests and diagnostics)."""
        with self._guard("reading leases"), closing(self._connect()) as con:
            cur = con.execute("SELECT * FROM leases")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    # ------------------------------------------------------------------ reads
    def get(self, job: Job) -> JobResult | None:
        """The stored result of ``job`` for this package version and the current code, or ``None``.
        A row that fails its checksum comes back as an error result (see :data:`CORRUPT_ROW`)."""
        return self.get_many([job])[0]

    def get_many(self, jobs: Sequence[Job]) -> list[JobResult | None]:
        """Results for many jobs in one query per paper (``None`` where a job has no row at the current
        code; rows of other fingerprints are history, not results). Refused rows come back as errors."""
        wanted: dict[tuple[str, str, str, int, str], Job] = {}
        for j in jobs:
            wanted[(*j.key, self.fingerprint(j))] = j
        found: dict[tuple[str, str, str, int, str], JobResult] = {}
        with self._guard("reading results"), closing(self._connect()) as con:
            for slug in sorted({j.slug for j in jobs}):
                for exp, chash, seed, fp, status, metrics, error, wall, checksum, env in con.execute(
                    "SELECT experiment, config_hash, seed, code_fingerprint, status, metrics, error, wall_time, "
                    "checksum, environment FROM runs WHERE slug=? AND version=?",
                    (slug, self.version),
                ):
                    key = (slug, exp, chash, seed, fp)
                    if key in wanted:
                        found[key] = _row_result(wanted[key], status, metrics, error, wall, checksum)
                        found[key].environment = _environment(env)
        return [found.get((*j.key, self.fingerprint(j))) for j in jobs]

    def done_keys(self, jobs: Iterable[Job | str]) -> set[tuple[str, str, str, int]]:
        """Keys of the jobs that finished successfully at the current code (crashed and refused rows are
        retried on the next run). Given slugs instead of jobs: every such key of those papers (the current
        fingerprint of a row is that of the ``fn`` it records)."""
        items = list(jobs)
        job_list = [j for j in items if isinstance(j, Job)]
        out = {j.key for j, r in zip(job_list, self.get_many(job_list)) if r is not None and r.status == "ok"}
        slugs = sorted({s for s in items if isinstance(s, str)})
        with self._guard("reading results"), closing(self._connect()) as con:
            for slug in slugs:
                for exp, chash, seed, fp, fn, status, metrics, checksum in con.execute(
                    "SELECT experiment, config_hash, seed, code_fingerprint, fn, status, metrics, checksum FROM runs "
                    "WHERE slug=? AND version=? AND status='ok'",
                    (slug, self.version),
                ):
                    job = Job(slug, exp, fn, {}, seed)
                    if fp == self._fingerprints.for_fn(fn) and _row_result(job, status, metrics, None, 0, checksum).status == "ok":
                        out.add((slug, exp, chash, seed))
        return out

    def provenance(self, jobs: Sequence[Job]) -> Provenance:
        """The code fingerprints, commits and dirty flags the stored rows of ``jobs`` ran at (this package
        version, every fingerprint), against the current code. The report and ``icml24 show`` render it:
        ``matches`` is ``False`` when some job has rows of older code only."""
        current = {j.key: self.fingerprint(j) for j in jobs}
        by_state: dict[tuple[str, str | None, int | None, bool], list[float]] = {}
        has_current: set[tuple[str, str, str, int]] = set()
        has_other: set[tuple[str, str, str, int]] = set()
        envs: dict[str, list[Any]] = {}
        with self._guard("reading results"), closing(self._connect()) as con:
            for slug in sorted({j.slug for j in jobs}):
                for exp, chash, seed, fp, commit, dirty, finished, env_text in con.execute(
                    "SELECT experiment, config_hash, seed, code_fingerprint, git_commit, git_dirty, finished_at, "
                    "environment FROM runs WHERE slug=? AND version=?",
                    (slug, self.version),
                ):
                    key = (slug, exp, chash, seed)
                    if key not in current:
                        continue
                    is_current = fp == current[key]
                    (has_current if is_current else has_other).add(key)
                    if is_current:
                        env = _environment(env_text)
                        envs.setdefault(environment_key(env), [env, 0])[1] += 1
                    by_state.setdefault((fp, commit, dirty, is_current), []).append(finished)
        runs = sorted(
            (
                CodeRun(fp, commit, None if dirty is None else bool(dirty), len(times), max(times), is_current)
                for (fp, commit, dirty, is_current), times in by_state.items()
            ),
            key=lambda r: -r.last_finished,
        )
        state = self.git()
        return Provenance(
            fingerprint=combine(current.values()) if current else "",
            git_commit=state.commit,
            git_dirty=state.dirty,
            runs=tuple(runs),
            n_current=len(has_current),
            n_stale=len(has_other - has_current),
            environments=tuple(
                RunEnvironment(key, env, n) for key, (env, n) in sorted(envs.items(), key=lambda kv: -kv[1][1])
            ),
        )

    def provenance_for(self, slug: str, scale: str, seeds: int | None = None) -> Provenance:
        """:meth:`provenance` of a registered paper's jobs at ``scale`` (and ``seeds``)."""
        from icml24.common.registry import get_reproduction

        return self.provenance(get_reproduction(slug).jobs(scale, seeds))

    def history(self, job: Job) -> list[dict[str, Any]]:
        """Every stored row of ``job`` (all versions and code fingerprints), newest first."""
        with self._guard("reading results"), closing(self._connect()) as con:
            cur = con.execute(
                "SELECT version, code_fingerprint, git_commit, git_dirty, status, metrics, checksum, error, "
                "wall_time, finished_at FROM runs WHERE slug=? AND experiment=? AND config_hash=? AND seed=? "
                "ORDER BY finished_at DESC",
                job.key,
            )
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
        for row in rows:
            result = _row_result(job, row["status"], row["metrics"], row["error"], row["wall_time"], row["checksum"])
            row["metrics"], row["status"], row["error"] = result.metrics, result.status, result.error
            row["current"] = row["version"] == self.version and row["code_fingerprint"] == self.fingerprint(job)
        return rows

    def summary(self, slug: str) -> list[dict[str, Any]]:
        """Per experiment, version and code fingerprint: job counts by status, the time of the last
        finished job and its commit, newest first."""
        with self._guard("reading results"), closing(self._connect()) as con:
            rows = con.execute(
                "SELECT experiment, version, code_fingerprint, status, COUNT(*), MAX(finished_at), SUM(wall_time), "
                "MAX(git_commit) FROM runs WHERE slug=? GROUP BY experiment, version, code_fingerprint, status "
                "ORDER BY MAX(finished_at) DESC",
                (slug,),
            ).fetchall()
        return [
            {"experiment": e, "version": v, "fingerprint": fp, "status": s, "count": n, "last": t, "wall_time": w,
             "git_commit": c}
            for e, v, fp, s, n, t, w, c in rows
        ]  # fmt: skip

    def analyses(self, slug: str) -> list[dict[str, Any]]:
        """The verdicts recorded for ``slug``, newest first."""
        with self._guard("reading verdicts"), closing(self._connect()) as con:
            rows = con.execute(
                "SELECT scale, version, verdict, summary, n_ok, n_error, n_missing, created_at, code_fingerprint, "
                "git_commit, git_dirty FROM analyses WHERE slug=? ORDER BY created_at DESC",
                (slug,),
            ).fetchall()
        keys = ("scale", "version", "verdict", "summary", "n_ok", "n_error", "n_missing", "created_at",
                "fingerprint", "git_commit", "git_dirty")  # fmt: skip
        return [dict(zip(keys, r)) for r in rows]

    def count(self, slug: str | None = None) -> int:
        """Stored rows (every version and fingerprint), of one paper or all."""
        with self._guard("reading results"), closing(self._connect()) as con:
            if slug is None:
                return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            return con.execute("SELECT COUNT(*) FROM runs WHERE slug=?", (slug,)).fetchone()[0]

    def slugs(self) -> list[str]:
        """The papers with at least one stored row, sorted."""
        with self._guard("reading results"), closing(self._connect()) as con:
            return [r[0] for r in con.execute("SELECT DISTINCT slug FROM runs ORDER BY slug")]


_FULL_BELOW_BYTES = 1 << 20
"""An I/O error on a file system with less free space than this is reported as a full disk."""


def _free_bytes(path: Path) -> int:
    """Free bytes (for unprivileged users) on the file system of ``path``'s nearest existing folder."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return 1 << 62  # unknown: do not claim the disk is full
    return st.f_bavail * st.f_frsize


def _environment(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        env = json.loads(text)
    except (TypeError, ValueError):
        return None
    return env if isinstance(env, dict) else None


def _row_result(
    job: Job, status: str, metrics_text: str, error: str | None, wall: float, checksum: str | None
) -> JobResult:
    """A stored row as a result, refusing rows whose metrics fail their checksum or an ok row without
    metrics (legacy rows without a checksum are taken as they are)."""
    try:
        metrics = json.loads(metrics_text)
    except (TypeError, ValueError):
        return JobResult(job, "error", {}, wall, f"{CORRUPT_ROW}: its metrics are not valid JSON; rerun to recompute")
    if checksum is not None and metrics_checksum(metrics) != checksum:
        return JobResult(
            job, "error", {}, wall,
            f"{CORRUPT_ROW}: its metrics do not match their checksum (changed outside icml24); not used, rerun "
            "`icml24 reproduce` to recompute",
        )  # fmt: skip
    if status == "ok" and not metrics:
        return JobResult(job, "error", {}, wall, f"{CORRUPT_ROW}: an ok row without metrics; rerun to recompute")
    return JobResult(job, status, metrics, wall, error)  # type: ignore[arg-type]


@contextmanager
def _transaction(con: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; on failure roll back without hiding the first error (on a full
    disk the rollback itself can fail)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the transaction is gone already; the first error is the one to report
        raise
