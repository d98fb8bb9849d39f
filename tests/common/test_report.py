"""The report: honest states, the verdict paragraph, results.json against its schema, figures, atomic
writes with the user's umask."""

from __future__ import annotations

import json
import math
import os
import stat
from importlib import resources

import jsonschema
import pytest

from icml24.common import report as report_mod
from icml24.common.experiment import Analysis, ClaimCheck, Table, cell_to_json, fmt_mean_std, numeric_cell
from icml24.common.report import (
    NOT_RUN,
    ReportWriteError,
    analyze_paper,
    readable,
    results_payload,
    slugs_with_jobs,
    verdict_paragraph,
    write_report,
)
from icml24.common.runner import run_jobs
from icml24.common.store import ResultStore

ENV = {"icml24": "x", "commit": None, "python": "3", "torch": "2", "cpus": 1, "created": "now"}


def _schema() -> dict:
    text = resources.files("icml24.common").joinpath("results.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@pytest.fixture
def ran(fake_env, tmp_path):
    """A store with every smoke job of the fake reproduction finished."""
    from icml24.common.registry import get_reproduction

    store = ResultStore(tmp_path / "s.sqlite")
    run_jobs(get_reproduction("fake-sleepy").jobs("smoke"), store, workers=1, scale="smoke")
    return store


def test_a_paper_without_finished_jobs_is_not_run_and_no_verdict_is_stored(fake_env, tmp_path):
    store = ResultStore(tmp_path / "empty.sqlite")
    r = analyze_paper("fake-sleepy", "smoke", None, store)
    assert r.state == NOT_RUN and r.verdict == NOT_RUN and r.verdict_text == "not run"
    assert "inconclusive" not in verdict_paragraph(r)
    assert store.analyses("fake-sleepy") == []
    data = r.to_json()
    assert data["verdict"] == "not_run" and data["decided_by"] == [] and data["jobs"]["missing"] == r.n_jobs
    md = report_mod.render_markdown([r], ENV)
    assert "not run" in md and "inconclusive" not in md


def test_report_without_slugs_covers_only_papers_with_jobs(ran, fake_env):
    assert slugs_with_jobs(["fake-sleepy", "fake-crash"], "smoke", None, ran) == ["fake-sleepy"]
    assert slugs_with_jobs(["fake-sleepy"], "quick", None, ran) == []


def test_verdict_paragraph_states_the_rule_and_what_decided_it(ran):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    text = verdict_paragraph(r)
    assert text.startswith("Verdict: supported.")
    assert "Rule: supported when draws exist." in text
    assert "Decided by: draws exist (supported)" in text
    assert "centred" not in text  # a check that is reported only does not decide
    assert ran.analyses("fake-sleepy")[0]["verdict"] == "supported"


def test_decided_by_ids_win_over_the_derived_ones():
    checks = [ClaimCheck("a: x", "supported", "e", id="a"), ClaimCheck("b: y", "inconclusive", "e", id="b")]
    a = Analysis("inconclusive", "s", checks=checks, decided_by=["b"])
    assert [c.id for c in report_mod.deciding_checks(a)] == ["b"]
    a = Analysis("inconclusive", "s", checks=checks)
    assert [c.id for c in report_mod.deciding_checks(a)] == ["b"]  # the decisive checks with the verdict


def test_no_python_reprs_in_readable_text():
    assert readable("votes ['supported', 'inconclusive'] at np.float64(0.25)") == (
        "votes supported, inconclusive at 0.25"
    )
    assert readable("a [1, 2] list stays") == "a [1, 2] list stays"


def test_check_statistics_are_printed_and_empty_ones_left_out(ran):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    md = report_mod.render_markdown([r], ENV)
    assert "| claim | verdict | effect [CI] | p | power | n |" in md
    assert "| `mean-near-zero` | **inconclusive** (reported only) | — [-0.1, inf] | 0.200 | 0.80 |  |" in (
        md.replace("mean near zero: the draws are centred ", "")
    )
    assert "**Rule.** one-sided t-test, alpha 0.05." in md  # folded away with the evidence
    assert "**supported** (decides)" in md
    bare = Analysis("supported", "s", checks=[ClaimCheck("c", "supported", "e")])
    r.analysis = bare
    assert report_mod._check_columns(report_mod.check_rows(r)) == []


def test_results_json_validates_against_its_schema_with_null_for_nan(ran, tmp_path):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    not_run = analyze_paper("fake-sleepy", "quick", None, ran)
    html = write_report([r, not_run], tmp_path / "rep")
    text = (html.parent / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    jsonschema.validate(data, _schema())
    assert data["schema_version"] == report_mod.SCHEMA_VERSION
    paper = data["papers"][0]
    assert paper["decided_by"] == ["draws-exist"] and paper["rule"]
    check = paper["checks"][1]
    assert check["effect"] is None and check["ci"] == [-0.1, None] and check["p_value"] == 0.2
    rows = paper["tables"][0]["rows"]
    parsed, cell = rows[0][1], rows[0][2]
    assert cell["n"] == r.n_ok == len(cell["values"]) and cell["spread"] == "std over seeds"
    assert parsed["n"] == r.n_ok and math.isclose(parsed["mean"], cell["mean"], rel_tol=1e-2)
    assert rows[1][1] == {"text": "nan", "value": None}
    assert rows[1][2]["values"] == [1.0, None] and rows[1][2]["n"] == 1
    assert data["papers"][1]["verdict"] == "not_run"
    # The schema is not a rubber stamp.
    data["papers"][0]["checks"][0]["verdict"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, _schema())


def test_numeric_cell_keeps_the_values_and_says_the_spread():
    c = numeric_cell([1.0, 2.0, 3.0, float("nan")])
    assert c.text == fmt_mean_std([1.0, 2.0, 3.0]) and str(c) == c.text
    assert (c.mean, c.std, c.n) == (2.0, 1.0, 3) and c.spread == "std over seeds"
    sem = numeric_cell([1.0, 2.0, 3.0], spread="sem", over="trials")
    assert math.isclose(sem.std, 1 / math.sqrt(3)) and sem.spread == "sem over trials"
    assert numeric_cell([]).text == "n/a" and numeric_cell([]).mean is None
    with pytest.raises(ValueError, match="spread"):
        numeric_cell([1.0], spread="iqr")
    with pytest.raises(TypeError, match="values"):
        numeric_cell(3.0)
    table = Table("t", ["a"], [[c], [sem]])
    assert table.spreads() == ["std over seeds", "sem over trials"]
    assert cell_to_json("0.5 ± 0.1 (n=3)") == {"text": "0.5 ± 0.1 (n=3)", "mean": 0.5, "std": 0.1, "n": 3}
    assert cell_to_json("sum") == {"text": "sum"}


def test_figures_are_png_files_embedded_in_the_markdown(ran, tmp_path):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    out = write_report([r], tmp_path / "rep").parent
    png = out / "figures" / "fake-sleepy-1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![draws by n](figures/fake-sleepy-1.png)" in (out / "report.md").read_text()
    html = (out / "index.html").read_text()
    assert "<figure class='wide'><a href='figures/fake-sleepy-1.png'" in html  # two panels: full width
    assert report_mod.png_size(png.read_bytes())[0] > report_mod.WIDE_FIGURE_PX


def test_report_files_follow_the_umask(ran, tmp_path):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    old = os.umask(0o022)
    try:
        out = write_report([r], tmp_path / "rep").parent
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    for name in ("results.json", "report.md", "index.html", "figures/fake-sleepy-1.png"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644, name


def test_a_failed_write_leaves_no_half_written_report(ran, tmp_path, monkeypatch):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    out = tmp_path / "rep"

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_mod, "render_html", boom)
    with pytest.raises(ReportWriteError, match="No space left"):
        write_report([r], out)
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "s.sqlite"] + [
        p for p in tmp_path.iterdir() if p.name.startswith("s.sqlite-")
    ]
    monkeypatch.undo()
    write_report([r], out)
    before = (out / "results.json").read_text()
    monkeypatch.setattr(report_mod, "render_html", boom)
    with pytest.raises(ReportWriteError):
        write_report([r], out)
    assert (out / "results.json").read_text() == before  # the previous report is intact
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".rep")) == []


def test_a_folder_with_other_files_is_not_replaced(ran, tmp_path):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    with pytest.raises(ReportWriteError, match="not an icml24 report"):
        write_report([r], tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ReportWriteError, match="is a file"):
        write_report([r], tmp_path / "afile")


def test_results_payload_has_no_non_finite_numbers():
    payload = results_payload([], ENV)
    assert payload["schema_version"] == report_mod.SCHEMA_VERSION and payload["papers"] == []
    assert report_mod.json_safe({"a": [float("nan"), 1.0, float("-inf")]}) == {"a": [None, 1.0, None]}


def test_check_ids_are_unique_and_cut_at_a_word():
    long = "KEP-SVGP improves uncertainty over softmax attention at every noise level"
    a = Analysis("supported", "s", checks=[ClaimCheck(long, "supported", "e"), ClaimCheck(long, "supported", "f")])
    ids = [c.id for c in a.checks]
    assert ids == ["kep-svgp-improves-uncertainty-over-softmax", "kep-svgp-improves-uncertainty-over-softmax-2"]
    assert ClaimCheck("Mean: x", "supported", "e").id == "mean"


def test_code_provenance_is_stated_and_dirty_or_stale_rows_are_flagged(ran):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    r.code = {
        "fingerprint": "0123456789abcdef", "git_commit": "abc1234", "git_dirty": False, "n_current": 8,
        "n_stale": 3, "runs": [
            {"fingerprint": "0123456789abcdef", "git_commit": "abc1234", "git_dirty": True, "current": True},
            {"fingerprint": "ffff", "git_commit": "0ld0000", "git_dirty": False, "current": False},
        ],
    }  # fmt: skip
    text, warnings = report_mod.code_text(r)
    assert text.startswith("Code fingerprint 0123456789ab; the results used ran at commit abc1234")
    assert len(warnings) == 2 and "uncommitted" in warnings[0] and "3 job(s)" in warnings[1]
    assert report_mod.code_flag(r) == "dirty tree, 3 from older code"
    md = report_mod.render_markdown([r], ENV)
    assert "> **Warning.** Some results ran on a tree with uncommitted changes" in md
    assert "class='warn'" in report_mod.render_html([r], ENV)
    r.code = {}
    assert report_mod.code_text(r) == ("", []) and report_mod.code_flag(r) == ""


def test_one_line_summaries_name_at_most_four_deciding_checks(ran):
    r = analyze_paper("fake-sleepy", "smoke", None, ran)
    r.analysis.checks = [ClaimCheck(f"c{i}", "supported", "e", id=f"c{i}") for i in range(6)]
    r.analysis.decided_by = []
    assert report_mod.decided_by_text(r) == "c0, c1, c2, c3 and 2 more"
    assert "c5 (supported)" in verdict_paragraph(r)  # the paper's own section lists them all


def test_fmt_mean_std_cells_carry_their_per_seed_values_into_results_json():
    import math
    import pickle

    from icml24.common.experiment import MeanStdText, cell_to_json, fmt_mean_std

    text = fmt_mean_std([0.5, 0.7, math.nan])
    assert text == "0.600 ± 0.141 (n=2)" and isinstance(text, MeanStdText)
    cell = cell_to_json(text)
    assert cell["values"] == [0.5, 0.7, None] and cell["mean"] == 0.6 and cell["n"] == 2
    assert cell_to_json(pickle.loads(pickle.dumps(text))) == cell  # survives process pools
    assert "values" not in cell_to_json("0.6 ± 0.1 (n=2)")  # a plain string has no values to give


def test_a_row_lacking_keys_its_sibling_seeds_return_is_an_error_not_a_smaller_table():
    from icml24.common.experiment import Job, JobResult
    from icml24.common.report import split_incomplete

    def row(seed, metrics, cfg=None):
        return JobResult(Job("x", "e", "m:f", cfg or {"a": 1}, seed), "ok", metrics)

    rows = [row(0, {"acc": 1.0, "loss": 0.1}), row(1, {"acc": 0.9}), row(2, {"acc": 0.8, "loss": 0.2}),
            row(0, {"other": 1.0}, {"a": 2})]  # fmt: skip
    keep, bad = split_incomplete(rows)
    assert [r.job.seed for r in bad] == [1] and "loss" in bad[0].error and bad[0].status == "error"
    assert len(keep) == 3  # another config may return other keys
