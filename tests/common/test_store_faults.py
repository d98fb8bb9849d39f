"""Store faults (issue 14): each gives one line naming the path and the fix, never a traceback, and a
non-zero exit; rows that fail their checksum and jobs without their metrics are never counted as ok."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from icml24.common.experiment import Job, JobResult, MissingMetricsError, Reproduction, check_metrics
from icml24.common.store import CORRUPT_ROW, ResultStore, StoreError, is_corrupt

runner = CliRunner()


def _job(i: int, seed: int = 0) -> Job:
    return Job("p", "e", "m:f", {"i": i}, seed)


def _filled_store(path, n: int = 200) -> ResultStore:
    store = ResultStore(path)
    for i in range(n):
        store.put(JobResult(_job(i), "ok", {"x": float(i), "pad": "y" * 200}, 0.0))
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


def _one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, output
    assert "Traceback" not in output, output
    return errors[0]


def _cli(*args: str):
    return runner.invoke(app_(), list(args))


def app_():
    from icml24.cli import app

    return app


# ------------------------------------------------------------------------------------------- bad files


@pytest.mark.parametrize("command", ["reproduce", "report"])
def test_garbage_store_is_one_line(fake_env, tmp_path, command):
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"this is not a database\n" * 100)
    res = _cli(command, "fake-sleepy", "--scale", "smoke", "--store", str(path), "--out", str(tmp_path / "r"))
    assert res.exit_code == 2
    line = _one_error_line(res.output)
    assert str(path) in line and "not an icml24 store" in line and "--store" in line


def test_truncated_store_is_one_line(fake_env, tmp_path):
    path = tmp_path / "s.sqlite"
    _filled_store(path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    for command in ("reproduce", "report"):
        res = _cli(command, "fake-sleepy", "--scale", "smoke", "--store", str(path), "--out", str(tmp_path / "r"))
        assert res.exit_code == 2, res.output
        line = _one_error_line(res.output)
        assert str(path) in line and "damaged" in line and "move it away" in line


def test_zero_byte_store_is_a_new_store(fake_env, tmp_path):
    """Decision: a zero-byte file holds no rows that could be lost, so ``reproduce`` takes it as a new,
    empty store; ``report`` says it is empty."""
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"")
    res = _cli("report", "fake-sleepy", "--scale", "smoke", "--store", str(path), "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "is empty" in _one_error_line(res.output)
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1", "--store", str(path),
               "--out", str(tmp_path / "r"))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert ResultStore(path).count("fake-sleepy") == 8


@pytest.mark.parametrize("kind", ["other-tables", "other-runs", "newer"])
def test_wrong_schema_store_is_one_line(fake_env, tmp_path, kind):
    path = tmp_path / "s.sqlite"
    with sqlite3.connect(path) as con:
        if kind == "other-tables":
            con.execute("CREATE TABLE songs (title TEXT)")
        elif kind == "other-runs":
            con.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
        else:
            con.execute("CREATE TABLE runs (id INTEGER)")
            con.execute("PRAGMA user_version=99")
    expected = {"other-tables": "not an icml24 store", "other-runs": "not icml24's", "newer": "newer icml24"}[kind]
    for command in ("reproduce", "report"):
        res = _cli(command, "fake-sleepy", "--scale", "smoke", "--store", str(path), "--out", str(tmp_path / "r"))
        assert res.exit_code == 2, res.output
        line = _one_error_line(res.output)
        assert str(path) in line and expected in line
    with sqlite3.connect(path) as con:  # nothing was written into someone else's database
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "leases" not in tables and "analyses" not in tables


def test_paths_blocked_by_a_file_or_folder(fake_env, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--store", str(blocker / "s.sqlite"),
               "--out", str(tmp_path / "r"))  # fmt: skip
    assert res.exit_code == 2
    line = _one_error_line(res.output)
    assert str(blocker) in line and "is a file" in line
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--store", str(folder), "--out", str(tmp_path / "r"))
    assert res.exit_code == 2 and "is a folder" in _one_error_line(res.output)
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1", "--store",
               str(tmp_path / "s.sqlite"), "--out", str(blocker / "report"))  # fmt: skip
    assert res.exit_code != 0
    line = _one_error_line(res.output)
    assert "report" in line and str(blocker) in line


# ------------------------------------------------------------------------------------------- full disk


class _FullDiskConnection:
    """A connection whose INSERTs fail as on a full disk and whose ROLLBACK then fails too (as SQLite's
    does when the full disk already ended the transaction)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con

    def execute(self, sql: str, *args):
        if sql.startswith("INSERT OR REPLACE INTO runs"):
            raise sqlite3.OperationalError("database or disk is full")
        if sql == "ROLLBACK":
            raise sqlite3.OperationalError("cannot rollback - no transaction is active")
        return self._con.execute(sql, *args)

    def close(self) -> None:
        self._con.close()


def test_full_disk_reports_the_first_error_not_the_rollback(tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "s.sqlite")
    real = store._connect
    monkeypatch.setattr(store, "_connect", lambda: _FullDiskConnection(real()))
    with pytest.raises(StoreError) as info:
        store.put(JobResult(_job(1), "ok", {"x": 1.0}, 0.0))
    message = str(info.value)
    assert "is full" in message and str(tmp_path / "s.sqlite") in message and "rollback" not in message
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert "disk is full" in str(info.value.__cause__)


def test_full_disk_in_the_cli_is_one_line(fake_env, tmp_path, monkeypatch):
    import icml24.common.store as store_module

    real = store_module.ResultStore._connect

    def full(self):
        con = real(self)
        return _FullDiskConnection(con) if not self.readonly else con

    monkeypatch.setattr(store_module.ResultStore, "_connect", full)
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1", "--store",
               str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "r"))  # fmt: skip
    assert res.exit_code == 2, res.output
    line = _one_error_line(res.output)
    assert "is full" in line and "s.sqlite" in line and "--store" in line


def _namespace_available() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


needs_namespace = pytest.mark.skipif(not _namespace_available(), reason="needs `unshare -rm` (mount namespaces)")


def _in_namespace(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a shell script as root of a private mount namespace (tmpfs and read-only binds, no privileges
    needed outside it)."""
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=240)  # fmt: skip


@needs_namespace
def test_a_real_full_disk_mid_run_is_one_line(fake_env, tmp_path):
    """A 1 MiB tmpfs: the store is created, then the disk is filled until 44 KiB are left (the store opens,
    SQLite's -shm takes 32 KiB), so the run fails on its first writes (claims or results). One line, exit 2,
    and the store passes its integrity check once space is freed."""
    disk = tmp_path / "disk"
    disk.mkdir()
    py = sys.executable
    store = disk / "s.sqlite"
    script = f"""
    set -e
    mount -t tmpfs -o size=1m tmpfs {disk}
    {py} -c 'from icml24.common.store import ResultStore; ResultStore("{store}")'
    {py} -c '
import os
st = os.statvfs("{disk}")
free = st.f_bavail * st.f_frsize
with open("{disk}/fill", "wb") as f:
    f.write(bytes(max(0, free - 44 * 1024)))
'
    set +e
    {py} -m icml24 reproduce fake-sleepy --scale smoke --workers 1 --store {store} --out {tmp_path}/r
    echo "rc=$?"
    rm {disk}/fill
    {py} -c 'import sqlite3; print("integrity", sqlite3.connect("{store}").execute("PRAGMA integrity_check").fetchone()[0])'
    """
    out = _in_namespace(script, fake_env)
    text = out.stdout + out.stderr
    assert "rc=2" in text, text
    line = _one_error_line(text)
    assert "is full" in line and str(store) in line and "free space" in line
    assert "integrity ok" in text, text


# ------------------------------------------------------------------------------------------- read-only


def _readonly_script(paths: list, command: str) -> str:
    if os.geteuid() != 0:  # an ordinary user: permissions are enough
        chmods = " && ".join(f"chmod a-w {p}" for p in paths)
        return f"{chmods} && {command}"
    binds = " && ".join(f"mount --bind {p} {p} && mount -o remount,bind,ro {p}" for p in paths)
    return f"{binds} && {command}"


@needs_namespace
def test_read_only_store_folder_and_out(fake_env, tmp_path):
    """A read-only store: `reproduce` says so in one line; `report` and `show` read it (opened with
    mode=ro); a read-only --out is one line too."""
    folder = tmp_path / "st"
    folder.mkdir()
    store = folder / "s.sqlite"
    ok = subprocess.run([sys.executable, "-m", "icml24", "reproduce", "fake-sleepy", "--scale", "smoke",
                         "--workers", "1", "--store", str(store), "--out", str(tmp_path / "r0")],
                        env=fake_env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    py = sys.executable
    ro_out = tmp_path / "ro_out"
    ro_out.mkdir()
    command = (
        f"{py} -m icml24 reproduce fake-sleepy --scale smoke --force --store {store} --out {tmp_path}/r1; "
        f"echo rc1=$?; {py} -m icml24 report fake-sleepy --scale smoke --store {store} --out {tmp_path}/r2; "
        f"echo rc2=$?; {py} -m icml24 show bloop --store {store}; echo rc3=$?; "
        f"{py} -m icml24 report fake-sleepy --scale smoke --store {store} --out {ro_out}/rep; echo rc4=$?"
    )
    out = _in_namespace(_readonly_script([folder, ro_out], command), fake_env)
    text = out.stdout + out.stderr
    assert "rc1=2" in text and "rc2=0" in text and "rc3=0" in text and "rc4=0" not in text, text
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, text
    assert str(store) in errors[0] and "read-only" in errors[0] and "--store" in errors[0]
    assert "report" in errors[1] and str(ro_out) in errors[1]
    assert "(8/8 jobs ok)" in text  # the report read every row of the read-only store


def test_readonly_open_never_writes(fake_env, tmp_path):
    path = tmp_path / "s.sqlite"
    ResultStore(path).put(JobResult(_job(1), "ok", {"x": 1.0}, 0.0))
    ro = ResultStore(path, readonly=True)
    assert ro.get(_job(1)).metrics == {"x": 1.0}
    with pytest.raises(StoreError, match="read-only"):
        ro.put(JobResult(_job(2), "ok", {"x": 1.0}, 0.0))
    with pytest.raises(StoreError, match="no results store"):
        ResultStore(tmp_path / "missing.sqlite", readonly=True)
    assert not (tmp_path / "missing.sqlite").exists()


# ------------------------------------------------------------------------------------------- silent lies


def test_a_flipped_digit_is_refused_reported_and_rerun(fake_env, tmp_path):
    store, out = tmp_path / "s.sqlite", tmp_path / "r"
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1", "--store", str(store), "--out", str(out))
    assert res.exit_code == 0, res.output
    with sqlite3.connect(store) as con:
        rowid, metrics = con.execute("SELECT rowid, metrics FROM runs LIMIT 1").fetchone()
        data = json.loads(metrics)
        data["numpy_mean"] = data["numpy_mean"] + 1.0  # one digit changed behind icml24's back
        con.execute("UPDATE runs SET metrics=? WHERE rowid=?", (json.dumps(data), rowid))
    rs = ResultStore(store, readonly=True)
    from icml24_fake_repro import REPRODUCTION

    results = rs.get_many(REPRODUCTION.jobs("smoke"))
    bad = [r for r in results if is_corrupt(r)]
    assert len(bad) == 1 and "checksum" in bad[0].error and bad[0].metrics == {}
    res = _cli("report", "fake-sleepy", "--scale", "smoke", "--store", str(store), "--out", str(out))
    assert res.exit_code == 1, res.output
    assert "failed their checksum" in _one_error_line(res.output)
    paper = json.loads((out / "results.json").read_text())["papers"][0]
    assert paper["jobs"]["ok"] == 7 and paper["jobs"]["error"] == 1
    res = _cli("reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1", "--store", str(store), "--out", str(out))
    assert res.exit_code == 0 and "Ran 1 job(s)" in res.output, res.output  # only the refused row reran
    res = _cli("report", "fake-sleepy", "--scale", "smoke", "--store", str(store), "--out", str(out))
    assert res.exit_code == 0, res.output


def test_an_ok_row_without_metrics_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    store = ResultStore(path)
    store.put(JobResult(_job(1), "ok", {"x": 1.0}, 0.0))
    with sqlite3.connect(path) as con:  # an empty-metrics ok row, checksum and all, as an old bug could write
        from icml24.common.store import metrics_checksum

        con.execute("UPDATE runs SET metrics='{}', checksum=?", (metrics_checksum({}),))
    got = store.get(_job(1))
    assert got.status == "error" and got.error.startswith(CORRUPT_ROW)
    assert store.done_keys([_job(1)]) == set() and store.done_keys(["p"]) == set()


def test_jobs_without_their_declared_metrics_are_errors(fake_env, tmp_path, monkeypatch):
    monkeypatch.setenv("ICML24_REPRODUCTIONS", fake_env["ICML24_REPRODUCTIONS"] + ",icml24_fake_repro:EMPTY")
    res = _cli("reproduce", "fake-empty", "--scale", "smoke", "--workers", "1", "--store", str(tmp_path / "s.sqlite"),
               "--out", str(tmp_path / "r"))  # fmt: skip
    assert res.exit_code == 1, res.output
    paper = json.loads((tmp_path / "r" / "results.json").read_text())["papers"][0]
    assert paper["jobs"] == {"total": 2, "ok": 0, "error": 2, "missing": 0} or paper["jobs"]["ok"] == 0
    tracebacks = " ".join(e["traceback"] for e in paper["errors"])
    assert "returned no metrics" in tracebacks and "not_returned" in tracebacks


def test_check_metrics_rule():
    job = Job("p", "e", "m:f", {}, 0, required_metrics=("a", "b"))
    check_metrics(job, {"a": 1, "b": None})
    with pytest.raises(MissingMetricsError, match="returned no metrics"):
        check_metrics(Job("p", "e", "m:f", {}, 0), {})
    with pytest.raises(MissingMetricsError, match="without b"):
        check_metrics(job, {"a": 1})
    repro = Reproduction("p", "c", lambda s, n: [Job("p", "e", "m:f", {}, 0), Job("p", "o", "m:f", {}, 0)],
                         lambda r, s: None, required_metrics={"e": ("a",)})  # fmt: skip
    jobs = repro.jobs("smoke")
    assert [j.required_metrics for j in jobs] == [("a",), ()]
    assert jobs[0] == Job("p", "e", "m:f", {}, 0) and jobs[0].key == Job("p", "e", "m:f", {}, 0).key
    with pytest.raises(TypeError, match="required_metrics"):
        Reproduction("p", "c", lambda s, n: [], lambda r, s: None, required_metrics={"e": "a"})
