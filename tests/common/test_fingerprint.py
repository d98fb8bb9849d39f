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
from icml24.common.fingerprint import Fingerprinter, combine
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


def test_fingerprint_covers_what_the_job_runs_not_analyze_nor_other_papers():
    units = Fingerprinter().units("icml24.rl.sapg.reproduce:run_point_mass")
    defs = set(units.definitions)
    assert "icml24.rl.sapg.reproduce:run_point_mass" in defs and "icml24.rl.sapg.agent:SAPG" in defs
    assert "icml24.rl.ppo.agent:PPO" in defs  # imported by sapg: in through the closure
    assert "icml24.common.experiment:execute_job" in defs  # the harness runs every job
    assert "icml24.rl.sapg.reproduce:analyze" not in defs  # analysis reruns from stored metrics
    assert not any(d.startswith("icml24.common.decide:") for d in defs)
    assert not any(d.startswith("icml24.rl.stochastic_q") for d in defs)  # another paper of the field
    assert not any(d.startswith("icml24.common.report") or d.startswith("icml24.common.store") for d in defs)


def _make_package(root, name="fppkg"):
    """A miniature project: a field package with two papers, a shared helper module and a data file."""
    pkg = root / name
    (pkg / "paper_a" / "data").mkdir(parents=True)
    (pkg / "paper_b").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "shared.py").write_text("def scale(x):\n    return 2 * x\n\ndef unused():\n    return 0\n")
    (pkg / "paper_a" / "__init__.py").write_text("")
    (pkg / "paper_a" / "data" / "table.csv").write_text("a,b\n1,2\n")
    (pkg / "paper_a" / "README.md").write_text("docs\n")
    (pkg / "paper_a" / "reproduce.py").write_text(textwrap.dedent('''
        """Paper A."""
        from fppkg.shared import scale

        OFFSET = 1


        def _helper(v):
            return v + OFFSET


        def run(config, seed):
            """The job."""
            return {"x": scale(_helper(seed))}


        def analyze(results, scale_name):
            return sum(r["x"] for r in results)
        '''))
    (pkg / "paper_b" / "__init__.py").write_text("")
    (pkg / "paper_b" / "reproduce.py").write_text(
        "from fppkg import shared\n\ndef run(config, seed):\n    return {'y': shared.scale(seed) + 1}\n"
    )
    return pkg


def _fps():
    f = Fingerprinter()
    return f.for_fn("fppkg.paper_a.reproduce:run"), f.for_fn("fppkg.paper_b.reproduce:run")


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new))


def test_semantic_fingerprint_ignores_what_cannot_change_a_job(tmp_path, monkeypatch):
    """The issue's contract: a reformat, a comment, a docstring, an ``analyze`` edit, a new paper in the same
    field and moving a helper (unused, or used and unchanged) leave every fingerprint as it is."""
    pkg = _make_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = _fps()
    a = pkg / "paper_a" / "reproduce.py"
    _edit(a, "return v + OFFSET", "return (v +\n            OFFSET)  # a comment")  # reformat + comment
    _edit(a, '"""The job."""', '"""The job, documented at length."""')
    _edit(a, "return sum(r[\"x\"] for r in results)", "return max(r[\"x\"] for r in results)")  # analyze
    (pkg / "paper_a" / "README.md").write_text("other docs\n")
    (pkg / "paper_c").mkdir()  # a new paper beside them
    (pkg / "paper_c" / "__init__.py").write_text("")
    (pkg / "paper_c" / "reproduce.py").write_text("def run(config, seed):\n    return {'z': 3}\n")
    _edit(pkg / "shared.py", "def unused():\n    return 0\n", "")  # an unused helper moves out...
    (pkg / "paper_c" / "tools.py").write_text("def unused():\n    return 0\n")  # ...to another module
    assert _fps() == before
    # A used helper moved, unchanged, from the paper into the shared module: the code that runs is the same.
    _edit(a, "def _helper(v):\n    return (v +\n            OFFSET)  # a comment\n", "")
    _edit(a, "from fppkg.shared import scale", "from fppkg.shared import _helper, scale")
    (pkg / "shared.py").write_text((pkg / "shared.py").read_text() + "\nfrom fppkg.paper_a.reproduce import OFFSET\n"
                                   "\ndef _helper(v):\n    return v + OFFSET\n")  # fmt: skip
    assert _fps() == before


@pytest.mark.parametrize(
    ("where", "old", "new", "moves_b"),
    [
        ("paper_a/reproduce.py", "return {\"x\": scale(_helper(seed))}", "return {\"x\": scale(_helper(seed)) + 0}", False),
        ("paper_a/reproduce.py", "OFFSET = 1", "OFFSET = 2", False),  # a constant the job reads
        ("paper_a/data/table.csv", "1,2", "1,3", False),  # a data file beside the job
        ("shared.py", "return 2 * x", "return 3 * x", True),  # shared code both papers run
    ],
)
def test_semantic_fingerprint_moves_with_what_a_job_executes(tmp_path, monkeypatch, where, old, new, moves_b):
    pkg = _make_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    fp_a, fp_b = _fps()
    _edit(pkg / where, old, new)
    new_a, new_b = _fps()
    assert new_a != fp_a
    assert (new_b != fp_b) == moves_b  # no other paper moves unless it runs the changed code


def test_fingerprint_follows_lazy_imports_fn_strings_and_side_effects(tmp_path, monkeypatch):
    pkg = tmp_path / "fplazy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "inner.py").write_text("def f():\n    return 1\n")
    (pkg / "other.py").write_text("def g(c, s):\n    return {'g': 1}\n")
    (pkg / "setting.py").write_text("import math\nFLAG = []\nFLAG.append(1)\n")
    (pkg / "jobs.py").write_text(
        "import fplazy.setting\n\ndef run(config, seed):\n    from fplazy.inner import f\n"
        "    return {'x': f(), 'next': 'fplazy.other:g'}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    units = Fingerprinter().units("fplazy.jobs:run")
    assert {"fplazy.inner:f", "fplazy.other:g", "fplazy.jobs:run"} <= set(units.definitions)
    assert "fplazy.setting" in units.modules
    fp = Fingerprinter().for_fn("fplazy.jobs:run")
    for path, old, new in [("inner.py", "return 1", "return 2"), ("other.py", "'g': 1", "'g': 2"),
                           ("setting.py", "FLAG.append(1)", "FLAG.append(2)")]:  # fmt: skip
        _edit(pkg / path, old, new)
        assert Fingerprinter().for_fn("fplazy.jobs:run") != fp, path
        fp = Fingerprinter().for_fn("fplazy.jobs:run")


def test_fingerprint_is_cached_and_checks_its_argument(tmp_path, monkeypatch):
    pkg = _make_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    first = Fingerprinter()
    fp = first.for_fn("fppkg.paper_a.reproduce:run")
    assert len(fp) == 16
    _edit(pkg / "paper_a" / "reproduce.py", "OFFSET = 1", "OFFSET = 5")
    assert first.for_fn("fppkg.paper_a.reproduce:run") == fp  # cached: computed once per run
    assert Fingerprinter().for_fn("no_such_module_xyz:run") == Fingerprinter().for_fn("no_such_module_xyz:g")
    with pytest.raises(ValueError, match="fn"):
        Fingerprinter().for_fn("no_colon")
    assert combine(["a"]) == "a" and combine(["a", "b"]) == combine(["b", "a", "a"]) != "a"


def test_every_paper_has_a_fingerprint_apart_from_its_field_neighbours():
    """Each paper's job functions fingerprint without error, and two papers of one field differ."""
    f = Fingerprinter()
    a = f.for_fn("icml24.rl.sapg.reproduce:run_point_mass")
    b = f.for_fn("icml24.rl.stochastic_q.reproduce:run_deep")
    assert a != b and len(a) == len(b) == 16


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


EDITING_JOB = '''
import os
from pathlib import Path

OFFSET = {offset}


def run(config, seed):
    # Stands in for an edit (or a git pull) landing while a sweep runs: the job rewrites its own module.
    edit = config.get("edit")
    if edit:
        path = Path(__file__)
        path.write_text(path.read_text().replace(edit[0], edit[1]))
    return {{"x": OFFSET + seed}}
'''


@pytest.mark.parametrize(("edit", "stored"), [
    (("OFFSET = 0", "OFFSET = 5"), False),  # a constant the job reads: either version may have run
    (("# Stands in", "# Still stands in"), True),  # a comment: the same computation, the row is kept
])  # fmt: skip
def test_a_result_whose_code_changed_during_the_run_is_not_stored(tmp_path, monkeypatch, edit, stored):
    from icml24.common.runner import run_jobs

    module = f"fp_editing_{'const' if not stored else 'comment'}"
    (tmp_path / f"{module}.py").write_text(EDITING_JOB.format(offset=0))
    monkeypatch.syspath_prepend(str(tmp_path))
    store = ResultStore(tmp_path / "s.sqlite")
    first = Job("fp-edit", "e", f"{module}:run", {"edit": list(edit)}, 0)
    second = Job("fp-edit", "e", f"{module}:run", {}, 1)
    planned = store.fingerprint(first)
    assert store.code_unchanged(first)
    stats = run_jobs([first, second], store, workers=1)
    if stored:
        assert stats.code_changed == [] and store.get(first) is not None and store.get(second) is not None
        assert store.code_unchanged(first) and store.fingerprint(first) == planned
    else:
        assert [j.label for j in stats.code_changed] == [first.label, second.label]
        assert stats.ran == 0 and not store.code_unchanged(second)
        assert ResultStore(tmp_path / "s.sqlite").count("fp-edit") == 0  # nothing stored under either fingerprint
        assert store._fingerprints.changed_files() == [tmp_path / f"{module}.py"]
        # A fresh run (a new process: the code on disk now, imported anew and fingerprinted) stores both.
        monkeypatch.delitem(sys.modules, module)
        again = ResultStore(tmp_path / "s.sqlite")
        stats = run_jobs([Job("fp-edit", "e", f"{module}:run", {}, 0), second], again, workers=1)
        assert stats.code_changed == [] and again.count("fp-edit") == 2
        assert again.get(second).metrics == {"x": 6.0}  # the edited constant
