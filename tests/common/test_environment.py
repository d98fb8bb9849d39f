"""Issue 33 part 2: every job records its floating-point environment; the store, report, show and compare use it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from icml24.common.environment import describe, environment_key, job_environment
from icml24.common.experiment import Job, JobResult, execute_job
from icml24.common.fingerprint import Fingerprinter
from icml24.common.store import SCHEMA_VERSION, ResultStore


def test_job_environment_names_the_kernels_and_libraries():
    env = job_environment()
    for key in ("python", "numpy", "scipy", "torch", "torch_cpu_capability", "blas", "cpu_model", "key"):
        assert key in env, key
    assert env["torch_cpu_capability"] and env["key"] == environment_key(env) and len(env["key"]) == 12
    text = describe(env)
    assert env["torch_cpu_capability"] in text and "numpy" in text
    other = dict(env, torch_cpu_capability="AVX2" if env["torch_cpu_capability"] != "AVX2" else "DEFAULT")
    assert environment_key(other) != env["key"]  # the kernel set is part of the key
    assert environment_key(dict(env, aten_cpu_capability="x")) == env["key"]  # the request is not; the result is
    assert environment_key(None) == "" and "not recorded" in describe(None)


def test_environment_is_outside_the_fingerprint():
    units = Fingerprinter().units("icml24.rl.sapg.reproduce:run_point_mass")
    assert not any(d.startswith("icml24.common.environment") for d in units.definitions)


def test_execute_job_records_the_environment_and_the_store_keeps_it(tmp_path):
    job = Job("p", "e", "icml24.common.experiment:canonical_json", {}, 0)
    result = execute_job(job)  # a crash (canonical_json takes one argument) still records where it ran
    assert result.status == "error" and result.environment == job_environment()
    store = ResultStore(tmp_path / "s.sqlite")
    ok = JobResult(Job("p", "e", "m:f", {"i": 1}, 0), "ok", {"x": 1.0}, 0.0, environment=job_environment())
    store.put(ok)
    assert store.get(ok.job).environment == job_environment()
    foreign = dict(job_environment(), torch_cpu_capability="SOMEWHERE_ELSE")
    foreign["key"] = environment_key(foreign)
    store.put(JobResult(Job("p", "e", "m:f", {"i": 2}, 0), "ok", {"x": 2.0}, 0.0, environment=foreign))
    prov = store.provenance([ok.job, Job("p", "e", "m:f", {"i": 2}, 0)])
    assert prov.mixed_environments and prov.foreign_environment
    assert sorted(e.is_readers for e in prov.environments) == [False, True]
    data = prov.to_dict()
    assert data["mixed_environments"] and len(data["environments"]) == 2 and json.dumps(data)
    from icml24.common.report import PaperReport, code_text  # noqa: F401 - the report words the flag

    text, warnings = code_text(type("R", (), {"code": data})())
    assert "Floating-point environment" in text and any("2 floating-point environments" in w for w in warnings)


def test_schema_2_store_gains_the_environment_column_in_place(tmp_path):
    path = tmp_path / "v2.sqlite"
    store = ResultStore(path)
    job = Job("p", "e", "m:f", {"i": 1}, 0)
    store.put(JobResult(job, "ok", {"x": 5.0}, 0.0))
    with sqlite3.connect(path) as con:  # make it a schema-2 store: no environment column
        con.execute("ALTER TABLE runs DROP COLUMN environment")
        con.execute("PRAGMA user_version=2")
    with pytest.raises(Exception, match="schema 2"):
        ResultStore(path, readonly=True)
    reopened = ResultStore(path)
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    got = reopened.get(job)
    assert got.metrics == {"x": 5.0} and got.environment is None  # kept, environment not recorded
    assert [e.key for e in reopened.provenance([job]).environments] == [""]


def test_forced_kernel_set_is_recorded():
    """ATEN_CPU_CAPABILITY chooses torch's kernels; the recorded capability is the one torch used."""
    code = "from icml24.common.environment import job_environment as j; e=j(); print(e['torch_cpu_capability'])"
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "DEFAULT"


FRAGILE_REPRO = textwrap.dedent('''
    import os
    from icml24.common import decide
    from icml24.common.experiment import Job, Reproduction, metric_values

    def run(config, seed):
        # Stands in for a kernel set: the same code and seed give another number under another environment.
        return {"x": float(os.environ.get("FAKE_SHIFT", "0")) + 0.01 * seed}

    def build_jobs(scale, seeds):
        return [Job("cmp-paper", "e", "cmp_repro:run", {}, s) for s in range(seeds or 4)]

    def analyze(results, scale):
        d = decide.compare_to_value(metric_values(results, "x"), 0.0)
        return decide.analysis([d.to_check(id="x-positive", claim="x is positive")], summary="x")

    REPRODUCTION = Reproduction("cmp-paper", "x is positive.", build_jobs, analyze)
''')


def test_compare_two_stores_flags_a_verdict_that_flips(tmp_path):
    (tmp_path / "cmp_repro.py").write_text(FRAGILE_REPRO)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               ICML24_REPRODUCTIONS="cmp_repro:REPRODUCTION", CI="1")  # fmt: skip

    def icml24(*args, **extra):
        res = subprocess.run([sys.executable, "-m", "icml24", *args], env=dict(env, **extra), capture_output=True,
                             text=True, timeout=120)  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    for name, shift in (("a", "1"), ("b", "-1"), ("c", "2")):
        icml24("reproduce", "cmp-paper", "--scale", "smoke", "--workers", "1", "--store", str(tmp_path / f"{name}.sqlite"),
               "--out", str(tmp_path / f"rep-{name}"), FAKE_SHIFT=shift)  # fmt: skip
    out = icml24("compare", str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite"), "cmp-paper", "--scale", "smoke",
                 "--json", str(tmp_path / "cmp.json"))  # fmt: skip
    assert "fragile" in out and "1 of 1 paper(s) fragile" in out
    data = json.loads((tmp_path / "cmp.json").read_text())["papers"][0]
    assert data["verdict_a"] == "supported" and data["verdict_b"] == "not_supported" and data["fragile"]
    assert data["checks"][0]["id"] == "x-positive" and not data["checks"][0]["same_verdict"]
    same = icml24("compare", str(tmp_path / "a.sqlite"), str(tmp_path / "c.sqlite"), "cmp-paper", "--scale",
                  "smoke")
    assert "0 of 1 paper(s) fragile" in same  # same verdict, other numbers: not fragile
    # All three ran with this machine's kernels: compare says it compared runs, not kernel sets.
    assert data["same_kernels"] and data["kernels_a"] == data["kernels_b"] != []
    assert "same kernels in both stores" in " ".join(out.split())
    icml24("reproduce", "cmp-paper", "--scale", "smoke", "--workers", "1", "--store", str(tmp_path / "d.sqlite"),
           "--out", str(tmp_path / "rep-d"), FAKE_SHIFT="1", ATEN_CPU_CAPABILITY="default")  # fmt: skip
    other = icml24("compare", str(tmp_path / "a.sqlite"), str(tmp_path / "d.sqlite"), "cmp-paper", "--scale",
                   "smoke", "--json", str(tmp_path / "cmp-d.json"))  # fmt: skip
    data = json.loads((tmp_path / "cmp-d.json").read_text())["papers"][0]
    (ka,), (kb,) = data["kernels_a"], data["kernels_b"]
    assert not data["same_kernels"] and kb.startswith("torch DEFAULT")
    assert ka.split(",")[1:] == kb.split(",")[1:]  # only torch's capability moved, the BLAS is the same
    assert "same kernels" not in " ".join(other.split())


def test_kernel_set_names_torch_capability_and_blas_architecture():
    from icml24.common.compare import PaperDiff, kernel_set

    env = {"torch_cpu_capability": "AVX2", "blas": [{"internal_api": "openblas", "architecture": "Haswell"}]}
    assert kernel_set(env) == "torch AVX2, openblas Haswell"
    assert kernel_set(None) == "" and kernel_set({"torch_cpu_capability": "DEFAULT"}) == "torch DEFAULT"
    assert PaperDiff("p", "supported", "supported", [], [], kernels_a=["k"], kernels_b=["k"]).same_kernels
    assert not PaperDiff("p", "supported", "supported", [], [], kernels_a=["k"], kernels_b=["j"]).same_kernels
    assert not PaperDiff("p", "supported", "supported", [], []).same_kernels  # not recorded: not claimed same
