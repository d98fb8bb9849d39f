"""The command line: exit codes, JSON output, messages."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from icml24 import catalogue
from icml24.cli import app

runner = CliRunner()


def test_unknown_slug_exits_2_and_names_the_closest():
    res = runner.invoke(app, ["reproduce", "factored-reward-bandit"])
    assert res.exit_code == 2
    assert "factored-reward-bandits" in res.output


def test_show_unknown_slug_exits_2():
    res = runner.invoke(app, ["show", "sapgg"])
    assert res.exit_code == 2 and "sapg" in res.output


def test_list_json_parses_and_covers_the_catalogue():
    res = runner.invoke(app, ["list", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert len(data) == len(catalogue.papers()) == 38
    for entry in data:
        assert {"slug", "title", "field", "status"} <= entry.keys()


def test_list_table_and_show(tmp_path):
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0 and "38 papers" in res.output
    res = runner.invoke(app, ["show", "sapg", "--store", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 0 and "SAPG" in res.output and "Claim:" in res.output


def test_planned_slug_is_skipped_with_a_message(tmp_path):
    planned = next(p.slug for p in catalogue.papers() if p.status == "planned")
    res = runner.invoke(app, ["reproduce", planned, "--store", str(tmp_path / "s.sqlite")])
    assert res.exit_code == 0
    assert "no reproduction yet" in res.output


def test_bad_scale_and_backend_exit_2(tmp_path):
    assert runner.invoke(app, ["reproduce", "--scale", "huge"]).exit_code == 2
    assert runner.invoke(app, ["reproduce", "--backend", "slurm"]).exit_code == 2


def test_reproduce_writes_report_and_crash_exits_nonzero(fake_env, tmp_path):
    store, out = tmp_path / "s.sqlite", tmp_path / "rep"
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1",
                              "--store", str(store), "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Report:" in res.output
    data = json.loads((out / "results.json").read_text())
    paper = data["papers"][0]
    assert paper["slug"] == "fake-sleepy" and paper["verdict"] in ("supported", "not_supported", "inconclusive")
    assert paper["tables"] and paper["summary"]
    html = (out / "index.html").read_text()
    assert "fake-sleepy" in html and "http://" not in html and "https://" not in html  # self-contained
    assert "fake-sleepy" in (out / "report.md").read_text()
    # `report` rebuilds from the store alone; `show` prints the last verdict.
    res = runner.invoke(app, ["report", "fake-sleepy", "--scale", "smoke", "--store", str(store),
                              "--out", str(tmp_path / "rep2")])  # fmt: skip
    assert res.exit_code == 0 and (tmp_path / "rep2" / "index.html").exists()
    res = runner.invoke(app, ["reproduce", "fake-crash", "--scale", "smoke", "--workers", "1",
                              "--store", str(store), "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1
    crash = json.loads((out / "results.json").read_text())["papers"][0]
    assert crash["jobs"]["error"] == 1 and "crashes on purpose" in crash["errors"][0]["traceback"]
    assert "crashes on purpose" in (out / "index.html").read_text()


def test_python_dash_m_works():
    out = subprocess.run([sys.executable, "-m", "icml24", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "icml24" in out.stdout
