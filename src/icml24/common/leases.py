"""Who is running a job: the lease owners of processes that share one store.

Before a ``reproduce`` process runs a job it takes the job's lease in the store (a row with its owner's
token, pid, host, the pid's start time and a heartbeat), and it refreshes the heartbeat of all its leases
every :data:`HEARTBEAT_S` seconds from a background thread (:class:`Heartbeat`). Another process skips a job
whose lease is live and takes it over when the lease is dead:

- on the same host, when the owner's pid is gone, or is now another process (its start time differs: pid
  reuse), so a SIGKILLed run's jobs are picked up at once;
- on any host, when the heartbeat is older than :data:`LEASE_STALE_S` seconds (an owner on another machine
  that died, or a hung one).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icml24.common.store import ResultStore

HEARTBEAT_S = 5.0
"""Seconds between two heartbeats of a running owner."""

LEASE_STALE_S = 60.0
"""A lease whose heartbeat is older than this is dead whatever its pid (12 missed heartbeats)."""


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), or ``None`` where
    ``/proc`` is not there (then a live pid counts as its owner)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (zombies count as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


@dataclass(frozen=True)
class LeaseOwner:
    """One process that claims jobs (a token unique to this run, its pid, host and pid start time)."""

    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    pid_start: str | None = None

    @classmethod
    def this_process(cls) -> LeaseOwner:
        pid = os.getpid()
        return cls(pid=pid, pid_start=process_start_time(pid))


def lease_is_live(pid: int, host: str, pid_start: str | None, heartbeat: float, *, now: float | None = None) -> bool:
    """Whether a lease row's owner may still be running its job (see the module docstring)."""
    now = time.time() if now is None else now
    if now - heartbeat > LEASE_STALE_S:
        return False
    if host != socket.gethostname():
        return True
    if not pid_alive(pid):
        return False
    if pid_start is not None:
        current = process_start_time(pid)
        if current is not None and current != pid_start:
            return False  # the pid now belongs to another process
    return True


class Heartbeat:
    """A daemon thread that refreshes ``owner``'s leases in ``store`` every ``interval`` seconds.

    Errors (a full disk, a locked store) are kept in :attr:`error` rather than raised in the thread: the
    next write of the main thread meets them too and reports them.
    """

    def __init__(self, store: ResultStore, owner: LeaseOwner, interval: float = HEARTBEAT_S) -> None:
        self.store, self.owner, self.interval = store, owner, interval
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="icml24-lease-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.store.heartbeat(self.owner)
            except Exception as exc:  # noqa: BLE001 - see the class docstring
                self.error = exc
