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


def test_only_planned_slugs_exit_nonzero_with_a_message(tmp_path):
    # every paper is implemented now: a position paper without a demonstration is the one left with nothing to run
    no_reproduction = next(p.slug for p in catalogue.papers() if not p.runnable)
    res = runner.invoke(app, ["reproduce", no_reproduction, "--store", str(tmp_path / "s.sqlite")])
    assert res.exit_code == 2, res.output
    assert "no reproduction yet" in res.output and "nothing to run" in res.output
    assert not (tmp_path / "s.sqlite").exists()


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


def test_help_lists_the_scales_and_backends():
    res = runner.invoke(app, ["reproduce", "--help"], terminal_width=200)
    assert res.exit_code == 0
    assert "smoke|quick|full|gpu" in res.output and "local|ray" in res.output


def test_cli_backends_are_the_runners():
    from icml24.cli import BACKEND_CHOICES
    from icml24.common.runner import BACKENDS

    assert tuple(BACKEND_CHOICES) == tuple(BACKENDS)


def test_list_filters_by_status_and_field():
    res = runner.invoke(app, ["list", "--status", "implemented", "--field", "rl", "--json"])
    data = json.loads(res.stdout)
    expected = [p.slug for p in catalogue.implemented() if p.field == "rl"]
    assert res.exit_code == 0 and [e["slug"] for e in data] == expected and expected
    res = runner.invoke(app, ["list", "--status", "position"])  # not a terminal: one line per paper
    lines = [ln for ln in res.stdout.splitlines() if not ln.startswith("#")]
    assert len(lines) == sum(p.status == "position" for p in catalogue.papers())
    assert all(ln.split("\t")[2] == "position" for ln in lines)
    assert runner.invoke(app, ["list", "--field", "astrology"]).exit_code == 2


def test_a_registered_reproduction_shows_in_list_and_show(fake_env):
    res = runner.invoke(app, ["list", "--status", "registered", "--json"])
    assert [e["slug"] for e in json.loads(res.stdout)] == ["fake-sleepy", "fake-crash"]
    res = runner.invoke(app, ["show", "fake-sleepy"])
    assert res.exit_code == 0 and "user-registered" in res.output and "Random draws are reproducible" in res.output


def test_a_broken_registration_is_one_line(monkeypatch):
    monkeypatch.setenv("ICML24_REPRODUCTIONS", "no_such_module_xyz:REPRO")
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 2 and "ICML24_REPRODUCTIONS" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_show_points_to_the_installed_readme_and_prints_it(tmp_path):
    readme = catalogue.readme_path("sapg")
    assert readme is not None and readme.is_file()
    res = runner.invoke(app, ["show", "sapg", "--store", str(tmp_path / "none.sqlite")])
    assert f"README: {readme}" in res.output
    res = runner.invoke(app, ["show", "sapg", "--readme"])
    assert res.exit_code == 0 and res.stdout == readme.read_text(encoding="utf-8")
    # every paper is implemented now: a position paper without a demonstration is the one left with nothing to run
    no_reproduction = next(p.slug for p in catalogue.papers() if not p.runnable)
    assert catalogue.readme_path(no_reproduction) is None
    assert runner.invoke(app, ["show", no_reproduction, "--readme"]).exit_code == 1


def test_icml24_home_sets_the_default_store_and_report(fake_env, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("ICML24_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert (home / "runs" / "icml24.sqlite").exists() and (home / "reports" / "latest" / "index.html").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = runner.invoke(app, ["report", "--scale", "smoke"])
    assert res.exit_code == 0 and "fake-sleepy: supported" in res.output and "fake-crash" not in res.output
    res = runner.invoke(app, ["show", "fake-sleepy"])
    assert "Last verdicts" in res.output
    monkeypatch.setenv("ICML24_STORE", str(tmp_path / "other.sqlite"))
    monkeypatch.setenv("ICML24_OUT", str(tmp_path / "other-report"))
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1"])
    assert (tmp_path / "other.sqlite").exists() and (tmp_path / "other-report" / "results.json").exists()
    assert not list(elsewhere.iterdir())


def test_report_without_jobs_in_the_store_says_so(fake_env, tmp_path):
    from icml24.common.store import ResultStore

    ResultStore(tmp_path / "empty.sqlite")
    res = runner.invoke(app, ["report", "--scale", "smoke", "--store", str(tmp_path / "empty.sqlite"),
                              "--out", str(tmp_path / "rep")])  # fmt: skip
    assert res.exit_code == 1 and "nothing to report" in res.output and not (tmp_path / "rep").exists()


def test_a_scale_the_paper_lacks_exits_nonzero_with_one_line(fake_env, tmp_path):
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "gpu", "--store", str(tmp_path / "s.sqlite")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "no 'gpu' scale for fake-sleepy (it has smoke, quick, full)" in res.output


def test_summary_names_the_deciding_check_and_a_failure_its_last_line(fake_env, tmp_path):
    long_out = tmp_path / ("a-rather-long-folder-name-" * 6) / "report"
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "fake-crash", "--scale", "smoke", "--workers", "1",
                              "--store", str(tmp_path / "s.sqlite"), "--out", str(long_out)])  # fmt: skip
    assert res.exit_code == 1
    assert "fake-sleepy: supported, decided by draws-exist" in res.output
    assert "FAILED fake-crash/draw[crash=True,n=1] seed=0" in res.output
    assert "RuntimeError: this job crashes on purpose" in res.output
    assert f"Report: {(long_out / 'index.html').resolve()}" in res.output  # on one line, not wrapped


def test_show_states_the_code_of_the_stored_results(fake_env, tmp_path):
    store = tmp_path / "s.sqlite"
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1",
                              "--store", str(store), "--out", str(tmp_path / "rep")])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["show", "fake-sleepy", "--store", str(store)])
    assert "Code of the stored results:" in res.output
    assert "smoke: 8 job(s) at the current fingerprint" in res.output
    data = json.loads((tmp_path / "rep" / "results.json").read_text())
    code = data["papers"][0]["code"]
    assert code["n_current"] == 8 and code["n_stale"] == 0 and len(code["fingerprint"]) >= 12


def test_show_a_position_paper_with_and_without_a_demonstration(tmp_path):
    store = str(tmp_path / "none.sqlite")
    for p in catalogue.papers():
        if p.status != "position":
            continue
        res = runner.invoke(app, ["show", p.slug, "--store", store])
        assert res.exit_code == 0, res.output
        if p.is_demonstration:
            assert "Demonstration" in res.output and f"icml24 reproduce {p.slug}" in res.output
        else:
            assert "No reproduction yet (position)" in res.output
            res = runner.invoke(app, ["reproduce", p.slug, "--store", store])
            assert res.exit_code == 2 and "nothing to run" in res.output


def _without_zuko(monkeypatch):
    """Simulate the subgroups extra absent: ``import zuko`` fails and find_spec says missing."""
    monkeypatch.setitem(sys.modules, "zuko", None)
    for name in [m for m in sys.modules if m.startswith("icml24.subgroups")]:
        monkeypatch.delitem(sys.modules, name)


def test_a_missing_extra_skips_its_paper_with_one_line(fake_env, tmp_path, monkeypatch):
    _without_zuko(monkeypatch)
    store, out = tmp_path / "s.sqlite", tmp_path / "rep"
    res = runner.invoke(app, ["reproduce", "syflow", "fake-sleepy", "--scale", "smoke", "--workers", "1",
                              "--store", str(store), "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    skipped = [line for line in res.output.splitlines() if "syflow" in line]
    assert skipped == ["skipped: syflow needs the subgroups extra: pip install 'icml24[subgroups]'"]
    assert "fake-sleepy: supported" in res.output and "Traceback" not in res.output
    # report on a store that holds only other papers: syflow is not even looked at
    res = runner.invoke(app, ["report", "--store", str(store), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "fake-sleepy: supported" in res.output and "syflow" not in res.output
    res = runner.invoke(app, ["reproduce", "syflow", "--scale", "smoke", "--store", str(store)])
    assert res.exit_code == 2 and "nothing to run" in res.output and "Traceback" not in res.output


def test_a_failing_import_the_catalogue_did_not_foresee_is_one_line(fake_env, tmp_path, monkeypatch):
    _without_zuko(monkeypatch)
    monkeypatch.setattr(catalogue, "extra_installed", lambda extra: True)
    res = runner.invoke(app, ["reproduce", "syflow", "fake-sleepy", "--scale", "smoke", "--workers", "1",
                              "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "rep")])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "skipped: syflow needs zuko (the subgroups extra): pip install 'icml24[subgroups]'" in res.output


def test_show_names_the_extra_and_the_module_api(tmp_path, monkeypatch):
    import importlib

    store = str(tmp_path / "none.sqlite")
    res = runner.invoke(app, ["show", "syflow", "--store", store])
    assert res.exit_code == 0, res.output
    assert "Extras: subgroups (installed): pip install 'icml24[subgroups]'" in res.output
    module = importlib.import_module("icml24.subgroups.syflow")
    for name in module.__all__:  # what the README examples import, not the catalogue's shorter list
        assert f"  - icml24.subgroups.syflow.{name}\n" in res.output
    assert "Extras: none" in runner.invoke(app, ["show", "bloop", "--store", store]).output
    _without_zuko(monkeypatch)
    res = runner.invoke(app, ["show", "syflow", "--store", store])
    assert res.exit_code == 0, res.output
    assert "Extras: subgroups (not installed): pip install 'icml24[subgroups]'" in res.output
    assert "from the catalogue: icml24.subgroups.syflow does not import here, it needs zuko" in res.output


def test_scale_gpu_without_cuda_refuses_in_one_line_unless_forced(fake_env, tmp_path, monkeypatch):
    import icml24.cli as cli

    monkeypatch.setattr(cli, "_cuda_available", lambda: False)
    store = tmp_path / "s.sqlite"
    res = runner.invoke(app, ["reproduce", "sapg", "--scale", "gpu", "--store", str(store)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "--scale gpu needs a CUDA device" in res.output and "--force" in res.output and not store.exists()
    # --force passes the check: the run starts (and is interrupted here before any job)
    import icml24.common.runner as runner_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "run_jobs", interrupted)
    res = runner.invoke(app, ["reproduce", "sapg", "--scale", "gpu", "--force", "--store", str(store)])
    assert res.exit_code == 130 and "job(s) at scale 'gpu'" in res.output, res.output


def test_seeds_out_of_range_is_one_line(tmp_path):
    store = str(tmp_path / "s.sqlite")
    for seeds in (0, 10**4 + 1, 10**12, 10**30):
        for command in ("reproduce", "report"):
            res = runner.invoke(app, [command, "--seeds", str(seeds), "--store", store])
            assert res.exit_code == 2, (command, seeds, res.output)
            assert res.output.strip() == f"error: --seeds must be between 1 and 10000, got {seeds}"


def test_report_without_a_scale_reports_what_the_store_holds(fake_env, tmp_path):
    store, out = tmp_path / "s.sqlite", tmp_path / "rep"
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1",
                              "--store", str(store), "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", "--store", str(store), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "Reporting 1 paper(s)" in res.output and "1 at scale 'smoke'" in res.output
    assert json.loads((out / "results.json").read_text())["papers"][0]["scale"] == "smoke"
    res = runner.invoke(app, ["report", "--scale", "quick", "--store", str(store), "--out", str(out)])
    assert res.exit_code == 1
    assert "no jobs of scale 'quick'" in res.output and "it holds smoke (1 paper(s))" in res.output


def test_tracebacks_do_not_print_locals():
    assert app.pretty_exceptions_show_locals is False


def test_clip_cuts_at_a_word_boundary_with_an_ellipsis():
    from icml24.cli import _clip

    text = "the agent loiters near the goal and never leaves"
    assert _clip(text, 100) == text
    assert _clip(text, 30) == "the agent loiters near the…"
    assert len(_clip(text, 30)) <= 30 and _clip("a" * 50, 10) == "a" * 9 + "…"


def test_the_progress_bar_keeps_the_count_elapsed_and_eta_at_any_width():
    """The job label is cut to what is left of the line; k/N, elapsed and ETA stay whole (80/120/200 columns)."""
    import io
    import re
    from types import SimpleNamespace

    from rich.console import Console

    from icml24.cli import _Progress

    label = "stochastic-q/deep[agent=sac,env=InvertedPendulum-v5,n=1000,steps=3000,buffer=100000,tau=0.005] seed=7"
    for width in (80, 120, 200):
        out = Console(file=io.StringIO(), width=width, color_system=None)
        progress = _Progress(1234, 17, out=out, tty=True)
        try:
            progress("start", SimpleNamespace(label=label), None)
            shot = Console(file=io.StringIO(), width=width, color_system=None)
            shot.print(progress.bar.get_renderable())
            (line,) = shot.file.getvalue().splitlines()
            assert len(line) <= width, (width, line)
            assert re.search(r"reproduce .* 17/1234 \d:\d\d:\d\d ETA (-:--:--|\d:\d\d:\d\d) stochastic-q/deep\[a", line), line
            assert line.endswith(label) == (width == 200) and line.endswith("…") == (width < 200), line
            progress.status("writing the report", "to reports/latest")
            shot = Console(file=io.StringIO(), width=width, color_system=None)
            shot.print(progress.bar.get_renderable())
            assert "17/1234" in shot.file.getvalue() and "writing the report" in shot.file.getvalue()
        finally:
            progress.close()


def test_after_the_last_job_the_log_says_what_it_is_doing(fake_env, tmp_path):
    res = runner.invoke(app, ["reproduce", "fake-sleepy", "--scale", "smoke", "--workers", "1",
                              "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "rep")])  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines.index("analysing 1 paper(s)...") < lines.index("writing the report...")
    assert lines.index("writing the report...") < next(i for i, s in enumerate(lines) if s.startswith("Report: "))
