"""The report's layout: the claims at a glance first, then per paper the verdict and one compact table of
checks with the long text folded away; the optional control/headroom/outcome keys of a check render when
present; a smoke report says it is a plumbing test."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest

from icml24.common import report as report_mod
from icml24.common.experiment import Analysis, ClaimCheck
from icml24.common.plotting import ForestRow, forest_plot
from icml24.common.report import (
    SMOKE_BANNER,
    PaperReport,
    check_rows,
    forest_rows,
    render_html,
    render_markdown,
)

ENV = {"icml24": "x", "commit": None, "python": "3", "torch": "2", "cpus": 1, "created": "now"}


@dataclass
class RichCheck(ClaimCheck):
    """A check with the optional keys the decision layer adds to ``to_dict`` (control, headroom...)."""

    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **self.extra}


@dataclass
class AnalysisWithNotRun(Analysis):
    not_run: list[str] = field(default_factory=list)


RULE = "one-sided paired t-test at alpha 0.05 against margin 0.02"
EVIDENCE = "method 0.91 vs baseline 0.85 over 5 seeds; " * 8


def _paper(slug: str = "p1", scale: str = "quick", paper_field: str = "rl", **analysis_kw: Any) -> PaperReport:
    checks = [
        RichCheck("gain over the baseline: method beats it", "supported", EVIDENCE, id="gain", rule=RULE,
                  effect=0.06, effect_name="mean difference method - baseline", ci=(0.03, 0.09), ci_level=0.95,
                  p_value=0.0004, power=0.91, n=5,
                  extra={"control": {"verdict": "not_supported", "effect": 0.001, "ci": [-0.01, 0.012],
                                     "p_value": 0.4, "claim": "a shuffled-label arm shows no gain"},
                         "headroom": {"baseline_best": 0.85, "max_effect": 0.15, "paper_effect": 0.05, "text": ""},
                         "outcome": "effect_above_margin", "margin": 0.02}),
        RichCheck("trend in d: regret grows sublinearly", "inconclusive", "slope 0.4 [0.1, 1.2]", id="trend",
                  rule="slope < 1", effect=0.4, ci=(0.1, math.inf), n=4,
                  extra={"uninformative": True, "control": {"verdict": "supported", "effect": 0.5, "ci": None}}),
        ClaimCheck("speed: reported only", "supported", "2x", id="speed", effect=2.0, decisive=False),
    ]  # fmt: skip
    a = AnalysisWithNotRun("supported", analysis_kw.pop("summary", "Short summary."), checks=checks,
                           rule="supported when gain is supported", decided_by=["gain"], **analysis_kw)  # fmt: skip
    return PaperReport(slug=slug, title="A paper", claim="The method wins.", scale=scale, seeds=[0, 1, 2],
                       analysis=a, deviations=("smaller",), n_jobs=3, n_ok=3, field=paper_field)  # fmt: skip


def test_one_compact_check_table_with_the_evidence_folded_away():
    html = render_html([_paper()], ENV)
    md = render_markdown([_paper()], ENV)
    section = html[html.index("<h2 id='p1'>"):]
    assert section.count("<table class='checks'>") == 1
    assert "<th>claim</th><th>verdict</th><th>effect [CI]</th><th>p</th><th>power</th><th>n</th><th>control</th>" in (
        section
    )
    assert "Decided by" not in html and "Decided by" not in md  # the table marks the deciding row
    assert section.count(RULE) == 1 and md.count(RULE) == 1  # once, in the folded details
    assert section.count(EVIDENCE.strip()) == 1
    assert "<details><summary>gain over the baseline: method beats it</summary>" in section
    assert "<tr class='decides'>" in section and ">decides<" in section
    assert "0.06 [0.03, 0.09]" in section
    assert "&lt;0.001" in section and "0.91" in section
    assert "Verdict: supported (2 decisive checks: 1 supported, 1 inconclusive)." in section
    assert "How the checks combine: supported when gain is supported." in section
    assert "| claim | verdict | effect [CI] | p | power | n | control |" in md


def test_control_headroom_outcome_and_not_run_are_rendered_when_present():
    p = _paper(not_run=["lora arm: needs the `language` extra"])
    rows = {row.id: row for row in check_rows(p)}
    assert rows["gain"].control == "not supported: 0.001 [-0.01, 0.012]"
    assert rows["gain"].notes == ["effect above margin"] and rows["gain"].role == "decides"
    assert ("Headroom", "the baseline's best 0.85; the largest possible effect 0.15; the paper's effect 0.05") in (
        rows["gain"].details
    )
    assert any(k == "Control" and "shuffled-label" in v for k, v in rows["gain"].details)
    assert rows["trend"].notes == ["uninformative: its control came out supported"]
    assert rows["speed"].role == "reported only" and rows["speed"].control == ""
    html = render_html([p], ENV)
    assert "<b>Not run.</b> lora arm: needs the `language` extra" in html
    assert '<span class="v not_supported">not supported</span> 0.001 [-0.01, 0.012]' in html
    md = render_markdown([p], ENV)
    assert "> **Not run.** lora arm: needs the `language` extra" in md
    assert "uninformative: its control came out supported" in md
    # A check without the optional keys renders too (the plain ClaimCheck of today).
    plain = _paper()
    plain.analysis.checks = [ClaimCheck("x", "supported", "e", effect=1.0, ci=(0.5, 1.5))]
    assert [row.control for row in check_rows(plain)] == [""]
    assert "<th>control</th>" not in render_html([plain], ENV)


def test_a_long_summary_is_folded_and_smoke_says_it_is_a_plumbing_test():
    long = _paper(summary="word " * 200, scale="smoke")
    html, md = render_html([long], ENV), render_markdown([long], ENV)
    assert "<details><summary>Summary of the analysis (1,000 characters)</summary>" in html
    assert html.count(SMOKE_BANNER) >= 2 and md.count(SMOKE_BANNER) >= 2  # page banner and the paper's
    assert SMOKE_BANNER == "Smoke scale: a plumbing test, numbers not meaningful."
    quick = render_html([_paper()], ENV)
    assert SMOKE_BANNER not in quick and "Short summary." in quick and "Summary of the analysis" not in quick


def test_the_claims_at_a_glance_come_first_grouped_by_field(tmp_path):
    reports = [_paper("p1", paper_field="rl"), _paper("p2", paper_field="bandits"), _paper("p3", paper_field="rl")]
    rows = forest_rows(reports)
    # Decisive checks only (speed is reported only), rl before bandits as in the catalogue, papers in order.
    assert [row.label for row in rows] == ["p1: gain", "p1: trend", "p3: gain", "p3: trend", "p2: gain", "p2: trend"]
    assert rows[0].margin == 0.02 and rows[0].paper_effect == 0.05 and rows[0].control[2] == "not_supported"
    assert rows[1].ci == (0.1, math.inf) and rows[1].uninformative
    html_path = report_mod.write_report(reports, tmp_path / "rep")
    html = html_path.read_text()
    glance = html.index("alt='Claims at a glance'")
    assert glance < html.index("<table>") and glance < html.index("<h2")
    assert (tmp_path / "rep" / report_mod.GLANCE_FILE).read_bytes()[:4] == b"\x89PNG"
    assert "its own scale" in html  # the caption says the rows are normalised
    md = (tmp_path / "rep" / "report.md").read_text()
    assert md.index("claims-at-a-glance.png") < md.index("| paper |")
    # No check with an effect: no figure, no broken image.
    bare = _paper()
    bare.analysis.checks = [ClaimCheck("c", "supported", "e")]
    assert report_mod.claims_figure([bare]) is None and "Claims at a glance" not in render_html([bare], ENV)


def test_forest_rows_are_normalised_per_row_and_the_plot_reads_at_a_hundred_rows():
    from icml24.common.plotting import _row_scale, figure_problems

    row = ForestRow("a", "rl", "supported", 50.0, (20.0, 80.0), margin=10.0)
    assert _row_scale(row) == 80.0  # every value of the row divided by 80: it spans [-1, 1]
    assert _row_scale(ForestRow("b", "rl", "supported", None, (-math.inf, 0.0))) == 1.0
    rows = [ForestRow(f"paper-{i // 3}: check-{i % 3}", ("rl", "gp", "vision")[i % 3], ("supported", "inconclusive",
            "not_supported")[i % 3], float(i), (i - 1.0, i + 1.0)) for i in range(100)]  # fmt: skip
    fig = forest_plot(rows)
    ax = fig.axes[0]
    assert len(ax.get_yticks()) == 100 and figure_problems(fig) == []
    assert fig.get_size_inches()[1] >= 0.2 * 100  # about a quarter inch a row: the labels do not collide
    assert fig.legends  # the legend is outside the data
    with pytest.raises(ValueError, match="rows"):
        forest_plot([])
    with pytest.raises(TypeError, match="ForestRow"):
        forest_plot(["x"])


def test_the_checks_own_control_headroom_and_outcome_fields_render():
    p = _paper()
    p.analysis.checks = [
        ClaimCheck("gain: it wins", "inconclusive", "e", id="gain", effect=0.01, ci=(0.005, 0.02), n=5,
                   outcome="effect_below_margin",
                   control={"verdict": "supported", "effect": 0.3, "ci": [0.1, 0.5], "p_value": 0.01, "claim": "c"},
                   headroom={"baseline_best": 0.9, "max_effect": 0.02, "paper_effect": 0.05, "can_decide": False,
                             "text": "the baseline reaches 0.9: at most 0.02 to gain"}),
        ClaimCheck("plain: effect shown", "supported", "e", id="plain", effect=1.0, outcome="effect_shown"),
    ]  # fmt: skip
    rows = {row.id: row for row in check_rows(p)}
    assert rows["gain"].notes == [
        "uninformative: its control came out supported",
        "cannot decide: the design leaves less room than the paper's effect",
        "effect below margin",
    ]
    assert ("Headroom", "the baseline reaches 0.9: at most 0.02 to gain") in rows["gain"].details
    assert rows["gain"].control == "supported: 0.3 [0.1, 0.5]" and rows["plain"].notes == []
    glance = forest_rows([p])
    assert glance[0].uninformative and glance[0].paper_effect == 0.05 and glance[0].control[0] == 0.3
