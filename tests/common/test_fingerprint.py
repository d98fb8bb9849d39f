"""Code fingerprints in the store key: changed code is rerun, old rows stay as history (issue 11)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from icml24.common.experiment import Job, JobResult
from icml24.common.fingerprint import DRIVER_ONLY, Fingerprinter, code_files, combine
from icml24.common.store import SCHEMA_VERSION, ResultStore

REPRO = '''
from icml24.common.experiment import Analysis, Job, Reproduction, metric_values

OFFSET = {offset}

def run(config, seed):
    return {{"x": float(seed + OFFSET)}}

def build_jobs(scale, seeds):
    return [Job("fp-paper", "e", "fp_repro:run", {{"k": 1}}, s) for s in range(seeds or 2)]

def analyze(results, scale):
    xs = metric_values(results, "x")
    return Analysis("inconclusive", "x = " + ",".join(str(x) for x in sorted(xs)))

REPRODUCTION = Reproduction("fp-paper", "x is reproducible.", build_jobs, analyze)
'''


def _write_repro(folder, offset: float) -> None:
    (folder / "fp_repro.py").write_text(REPRO.format(offset=offset))


def _env(folder):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env.get("PYTHONPATH", "")])
    env["ICML24_REPRODUCTIONS"] = "fp_repro:REPRODUCTION"
    env["CI"] = "1"
    return env


def _reproduce(folder, store, out):
    cmd = [sys.executable, "-m", "icml24", "reproduce", "fp-paper", "--scale", "smoke", "--workers", "1",
           "--store", str(store), "--out", str(out)]  # fmt: skip
    res = subprocess.run(cmd, env=_env(folder), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout, json.loads((out / "results.json").read_text())["papers"][0]


def test_changed_job_code_reruns_and_reports_new_numbers(tmp_path):
    """The issue's scenario: a job function's output changes by +100; the rerun reruns the jobs and the
    report shows the new numbers; the old rows stay in the store as history."""
    code = tmp_path / "code"
    code.mkdir()
    store, out = tmp_path / "s.sqlite", tmp_path / "rep"
    _write_repro(code, 0)
    stdout, paper = _reproduce(code, store, out)
    assert "Ran 2 job(s)" in stdout and paper["summary"] == "x = 0.0,1.0"
    stdout, _ = _reproduce(code, store, out)
    assert "Ran 0 job(s)" in stdout
    _write_repro(code, 100)
    stdout, paper = _reproduce(code, store, out)
    assert "Ran 2 job(s)" in stdout, stdout
    assert paper["summary"] == "x = 100.0,101.0"
    sys.path.insert(0, str(code))
    try:
        rs = ResultStore(store, readonly=True)
        assert rs.count("fp-paper") == 4  # two old rows kept as history
        job = Job("fp-paper", "e", "fp_repro:run", {"k": 1}, 0)
        history = rs.history(job)
        assert [h["metrics"]["x"] for h in history] == [100.0, 0.0]
        assert [h["current"] for h in history] == [True, False]
        prov = rs.provenance([job, Job("fp-paper", "e", "fp_repro:run", {"k": 1}, 1)])
        assert prov.matches and prov.n_current == 2 and prov.n_stale == 0
        assert [r.current for r in prov.runs] == [True, False]
        assert prov.fingerprint == prov.runs[0].fingerprint != prov.runs[1].fingerprint
    finally:
        sys.path.remove(str(code))


def test_provenance_flags_stale_rows(tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "s.sqlite")
    jobs = [Job("p", "e", "m:f", {"i": i}, 0) for i in range(3)]
    monkeypatch.setattr(store, "fingerprint", lambda job: "old")
    for j in jobs:
        store.put(JobResult(j, "ok", {"x": 1.0}, 0.0), git_commit="abc1234", git_dirty=True)
    monkeypatch.setattr(store, "fingerprint", lambda job: "new")
    store.put(JobResult(jobs[0], "ok", {"x": 2.0}, 0.0), git_commit="def5678", git_dirty=False)
    assert store.get(jobs[0]).metrics == {"x": 2.0} and store.get(jobs[1]) is None
    prov = store.provenance(jobs)
    assert not prov.matches and prov.n_current == 1 and prov.n_stale == 2
    assert prov.fingerprint == "new" and not prov.dirty
    assert [(r.fingerprint, r.git_commit, r.git_dirty, r.n_rows, r.current) for r in prov.runs] == [
        ("new", "def5678", False, 1, True),
        ("old", "abc1234", True, 3, False),
    ]
    assert json.dumps(prov.to_dict())  # plain JSON for results.json


def test_fingerprint_covers_the_paper_field_and_common_but_not_other_papers():
    files = {label for label, _ in code_files("icml24.rl.sapg.reproduce").files}
    assert "icml24/rl/sapg/reproduce.py" in files and "icml24/rl/sapg/agent.py" in files
    assert "icml24/common/experiment.py" in files and "icml24/rl/__init__.py" in files
    assert "icml24/rl/ppo/agent.py" in files  # imported by sapg: in through the import closure
    assert not any(f.startswith("icml24/rl/stochastic_q/") for f in files)  # another paper of the field
    assert not any(f.endswith(".md") for f in files)
    # store, runner, report cannot change a job's metrics (decide is in when the paper's module imports it)
    assert not (files & (DRIVER_ONLY - {"icml24/common/decide.py"}))


def test_fingerprint_changes_with_the_code_and_is_cached(tmp_path, monkeypatch):
    pkg = tmp_path / "fppkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jobs.py").write_text("from fppkg import helper\ndef run(config, seed):\n    return {'x': helper.X}\n")
    (pkg / "helper.py").write_text("X = 1\n")
    (pkg / "data.csv").write_text("a,b\n1,2\n")
    (pkg / "README.md").write_text("docs\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = Fingerprinter()
    fp = first.for_fn("fppkg.jobs:run")
    assert len(fp) == 16 and Fingerprinter().for_fn("fppkg.jobs:run") == fp
    (pkg / "README.md").write_text("other docs\n")
    assert Fingerprinter().for_fn("fppkg.jobs:run") == fp  # docs do not count
    (pkg / "helper.py").write_text("X = 2\n")
    changed = Fingerprinter().for_fn("fppkg.jobs:run")
    assert changed != fp
    assert first.for_fn("fppkg.jobs:run") == fp  # cached: computed once per run
    (pkg / "data.csv").write_text("a,b\n1,3\n")
    assert Fingerprinter().for_fn("fppkg.jobs:run") != changed  # package data counts
    assert Fingerprinter().for_fn("no_such_module_xyz:run") == Fingerprinter().for_fn("no_such_module_xyz:g")
    with pytest.raises(ValueError, match="fn"):
        Fingerprinter().for_fn("no_colon")
    assert combine(["a"]) == "a" and combine(["a", "b"]) == combine(["b", "a", "a"]) != "a"


V0_SCHEMA = textwrap.dedent("""
    CREATE TABLE runs (slug TEXT NOT NULL, experiment TEXT NOT NULL, config_hash TEXT NOT NULL,
        seed INTEGER NOT NULL, version TEXT NOT NULL, fn TEXT NOT NULL, config TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ok', 'error')), metrics TEXT NOT NULL, error TEXT,
        wall_time REAL NOT NULL, scale TEXT, backend TEXT, host TEXT, git_commit TEXT, finished_at REAL NOT NULL,
        PRIMARY KEY (slug, experiment, config_hash, seed, version));
    CREATE TABLE analyses (slug TEXT NOT NULL, scale TEXT NOT NULL, version TEXT NOT NULL, verdict TEXT NOT NULL,
        summary TEXT NOT NULL, n_ok INTEGER NOT NULL, n_error INTEGER NOT NULL, n_missing INTEGER NOT NULL,
        created_at REAL NOT NULL, PRIMARY KEY (slug, scale, version));
""")


def test_first_schema_store_is_migrated_and_its_rows_kept_as_history(tmp_path):
    path = tmp_path / "old.sqlite"
    job = Job("p", "e", "m:f", {"i": 1}, 0)
    with sqlite3.connect(path) as con:
        con.executescript(V0_SCHEMA)
        con.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            ("p", "e", job.config_hash, 0, "0.1.0", "m:f", '{"i":1}', "ok", '{"x": 5}', None, 1.0, "quick",
             "local", "h", "abc", 100.0),
        )  # fmt: skip
        con.execute("INSERT INTO analyses VALUES ('p','quick','0.1.0','supported','s',1,0,0,100.0)")
    with pytest.raises(Exception, match="first icml24 schema"):
        ResultStore(path, version="0.1.0", readonly=True)  # read-only cannot migrate: says how
    store = ResultStore(path, version="0.1.0")
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store.count("p") == 1
    assert store.get(job) is None  # unknown code: never reused
    assert store.history(job)[0]["metrics"] == {"x": 5} and not store.history(job)[0]["current"]
    assert store.analyses("p")[0]["verdict"] == "supported"
    store.put(JobResult(job, "ok", {"x": 6}, 0.0))
    assert store.get(job).metrics == {"x": 6} and store.count("p") == 2
    ResultStore(path, version="0.1.0")  # reopening a migrated store changes nothing
    assert store.count("p") == 2
