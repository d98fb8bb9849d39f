"""Turn stored job results into the reproduction report.

For each paper: rebuild its job list for the scale, fetch the results from the store, run the paper's
``analyze`` and write, in the output folder, ``results.json`` (machine-readable, validated by
``results.schema.json``), ``report.md``, a self-contained ``index.html`` (styles inline, plots embedded as
base64 PNG) and every figure as a PNG file in ``figures/``.

A paper none of whose jobs finished is *not run*: it gets no verdict (and none is written to the store).
The report is written into a temporary folder beside ``out_dir`` and renamed into place, so a failed or
killed write never leaves a half-written report; its files get the user's umask.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import platform
import re
import shutil
import struct
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icml24 import __version__, catalogue
from icml24.common.experiment import Analysis, Cell, ClaimCheck, Figure, JobResult, Reproduction
from icml24.common.fingerprint import combine
from icml24.common.registry import get_reproduction
from icml24.common.runner import git_commit
from icml24.common.store import ResultStore

SCHEMA_VERSION = 2
"""Version of the layout of ``results.json`` (``results.schema.json`` beside this module describes it).
2: numeric cells, check ids and statistics, ``state``, ``null`` for non-finite numbers."""

NOT_RUN = "not_run"
"""The state, and the ``verdict`` in ``results.json``, of a paper none of whose jobs finished."""

REPORT_FILES = ("results.json", "report.md", "index.html", "figures")

GLANCE_FILE = "figures/claims-at-a-glance.png"
"""The forest plot of every decisive check of the sweep (:func:`claims_figure`), first on the page."""
"""What :func:`write_report` puts in its folder (and all that may be there for it to be replaced)."""


@dataclass
class PaperReport:
    """One paper's part of the report.

    ``state`` is ``"analysed"`` (``analysis`` holds its verdict), ``"not_run"`` (no job finished
    successfully: ``analysis`` is a placeholder and no verdict is given) or ``"analysis_failed"``
    (``analyze`` raised; ``analysis_error`` holds the traceback).
    """

    slug: str
    title: str
    claim: str
    scale: str
    seeds: list[int]
    analysis: Analysis
    deviations: tuple[str, ...]
    n_jobs: int
    n_ok: int
    errors: list[JobResult] = field(default_factory=list)
    n_missing: int = 0
    wall_time: float = 0.0
    citation: str = ""
    state: str = "analysed"
    analysis_error: str = ""
    readme: str = ""
    code: dict[str, Any] = field(default_factory=dict)
    """Where the stored rows ran: ``ResultStore.provenance(jobs).to_dict()`` (fingerprint, commits, dirty
    flags, rows of older code)."""
    field: str = ""
    """The paper's field in the catalogue (``"rl"``, ``"conformal"``); empty for a user's reproduction."""

    @property
    def verdict(self) -> str:
        """The verdict, or ``"not_run"`` when no job finished."""
        return NOT_RUN if self.state == NOT_RUN else self.analysis.verdict

    @property
    def verdict_text(self) -> str:
        """The verdict in words (``not supported``, ``not run``)."""
        return self.verdict.replace("_", " ")

    def deciding_checks(self) -> list[ClaimCheck]:
        return deciding_checks(self.analysis)

    def to_json(self) -> dict[str, Any]:
        a = self.analysis
        not_run = self.state == NOT_RUN
        return {
            "slug": self.slug,
            "field": self.field,
            "title": self.title,
            "claim": self.claim,
            "state": self.state,
            "verdict": self.verdict,
            "summary": a.summary,
            "rule": "" if not_run else a.rule,
            "decided_by": [] if not_run else [c.id for c in self.deciding_checks()],
            "checks": [c.to_dict() for c in a.checks],
            "tables": [t.to_dict() for t in a.tables],
            "figures": [{"title": f.title, "caption": f.caption, "file": _figure_file(self.slug, i)}
                        for i, f in enumerate(a.figures)],  # fmt: skip
            "scale": self.scale,
            "seeds": self.seeds,
            "jobs": {"total": self.n_jobs, "ok": self.n_ok, "error": len(self.errors), "missing": self.n_missing},
            "errors": [{"job": e.job.label, "traceback": e.error or "", "last_line": error_last_line(e.error)}
                       for e in self.errors],  # fmt: skip
            "analysis_error": self.analysis_error,
            "job_wall_time_s": round(self.wall_time, 3),
            "deviations": list(self.deviations),
            "citation": self.citation,
            "readme": self.readme,
            "code": self.code,
        }


def deciding_checks(analysis: Analysis) -> list[ClaimCheck]:
    """The checks that decided the verdict: ``analysis.decided_by`` when given, else the decisive checks
    whose verdict is the overall verdict (else every decisive check)."""
    if analysis.decided_by:
        by_id = {c.id: c for c in analysis.checks}
        return [by_id[i] for i in analysis.decided_by if i in by_id]
    decisive = [c for c in analysis.checks if c.decisive]
    return [c for c in decisive if c.verdict == analysis.verdict] or decisive


def error_last_line(error: str | None) -> str:
    """The last non-empty line of a traceback (``"RuntimeError: this job crashes on purpose"``)."""
    lines = [ln.strip() for ln in (error or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _paper_meta(slug: str, repro: Reproduction) -> tuple[str, str, str, str]:
    """Title, citation, README path and field of a catalogue paper (the slug and empty ones otherwise)."""
    try:
        p = catalogue.get(slug)
    except KeyError:  # a user-registered reproduction
        return slug, "", "", ""
    readme = catalogue.readme_path(slug)
    return p.title, p.citation, str(readme) if readme is not None else "", p.field


def analyze_paper(slug: str, scale: str, seeds: int | None, store: ResultStore) -> PaperReport:
    """Fetch a paper's results from the store and analyze them (never raises on a bad analysis).

    With no successful job the paper is *not run*: ``analyze`` is not called and no verdict is stored.
    """
    repro = get_reproduction(slug)
    jobs = repro.jobs(scale, seeds)
    stored = store.get_many(jobs)
    ok = [r for r in stored if r is not None and r.status == "ok"]
    errors = [r for r in stored if r is not None and r.status != "ok"]
    ok, short = split_incomplete(ok)
    errors += short
    missing = sum(r is None for r in stored)
    state, analysis_error = "analysed", ""
    if not ok:
        state = NOT_RUN
        what = f"{len(errors)} crashed" if errors else "none is in the store"
        analysis = Analysis(
            "inconclusive",
            f"None of its {len(jobs)} job(s) at scale {scale!r} finished successfully ({what}).",
        )
    else:
        try:
            analysis = repro.analyze(ok, scale)
        except Exception:  # noqa: BLE001 - a broken analysis is reported, not fatal to the whole report
            analysis_error = traceback.format_exc()
            state = "analysis_failed"
            analysis = Analysis("inconclusive", f"The analysis crashed: {error_last_line(analysis_error)}")
        if errors or missing:
            analysis.summary += f" (Note: {len(errors)} job(s) crashed and {missing} are missing.)"
        # Arms build_jobs left out (an optional package is absent): listed, never silently substituted.
        analysis.not_run = list(dict.fromkeys([*analysis.not_run, *repro.not_run(scale)]))
    title, citation, readme, paper_field = _paper_meta(slug, repro)
    code = store.provenance(jobs).to_dict()
    report = PaperReport(
        slug=slug, title=title, claim=repro.claim, scale=scale, seeds=sorted({j.seed for j in jobs}),
        analysis=analysis, deviations=repro.deviations, n_jobs=len(jobs), n_ok=len(ok), errors=errors,
        n_missing=missing, wall_time=sum(r.wall_time for r in stored if r is not None), citation=citation,
        state=state, analysis_error=analysis_error, readme=readme, code=code, field=paper_field,
    )  # fmt: skip
    if state != NOT_RUN and not store.readonly:  # `icml24 report` opens the store read-only
        store.put_analysis(
            slug, scale, analysis.verdict, analysis.summary, len(ok), len(errors), missing,
            fingerprint=combine(store.fingerprint(j) for j in jobs),
        )  # fmt: skip
    return report


def split_incomplete(results: list[JobResult]) -> tuple[list[JobResult], list[JobResult]]:
    """Rows that lack metric keys which the other seeds of the same job config return become errors.

    The same job function with the same config returns the same keys for every seed; a row with fewer
    (a truncated or hand-edited store, a job that silently skipped its work) would otherwise just shrink
    the report's tables from n = 3 to n = 2. Complements ``Reproduction.required_metrics``.
    """
    groups: dict[tuple[str, str], list[JobResult]] = {}
    for r in results:
        groups.setdefault((r.job.experiment, r.job.config_hash), []).append(r)
    keep, bad = [], []
    for rows in groups.values():
        union = set().union(*(r.metrics for r in rows))
        for r in rows:
            lacking = sorted(union - set(r.metrics))
            if lacking:
                bad.append(JobResult(r.job, "error", {}, r.wall_time,
                                     f"incomplete row in the store: metrics lack {', '.join(lacking)}, which the "
                                     "other seeds of this config return; rerun it with --force"))  # fmt: skip
            else:
                keep.append(r)
    return keep, bad


def slugs_with_jobs(slugs: list[str], scale: str, seeds: int | None, store: ResultStore) -> list[str]:
    """The papers among ``slugs`` that have at least one job of ``scale`` in the store."""
    out = []
    for slug in slugs:
        repro = get_reproduction(slug)
        if scale in repro.scales and any(r is not None for r in store.get_many(repro.jobs(scale, seeds))):
            out.append(slug)
    return out


def _dist_version(name: str) -> str:
    """An installed distribution's version from its metadata (importing torch to ask costs 1.5 s)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment() -> dict[str, Any]:
    return {
        "icml24": __version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "numpy": _dist_version("numpy"),
        "torch": _dist_version("torch"),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def results_payload(reports: list[PaperReport], env: dict[str, Any]) -> dict[str, Any]:
    """The content of ``results.json``: JSON-safe (non-finite numbers become ``None``)."""
    return json_safe({"schema_version": SCHEMA_VERSION, "environment": env, "papers": [r.to_json() for r in reports]})


def json_safe(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by ``None`` (so ``json.dumps(allow_nan=False)`` works)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class ReportWriteError(OSError):
    """The report could not be written (the message names the path and what to do)."""


def write_report(reports: list[PaperReport], out_dir: str | Path) -> Path:
    """Write ``results.json``, ``report.md``, ``index.html`` and ``figures/*.png`` into ``out_dir``.

    Everything is written into a temporary folder beside ``out_dir`` and renamed into place at the end, so
    ``out_dir`` holds either the previous report or the new one, never half of one. An existing
    ``out_dir`` is replaced only when it holds nothing but report files. Returns the HTML path.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReportWriteError(f"--out {out} is a file, not a folder: remove it or choose another --out")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in REPORT_FILES)
        if foreign:
            raise ReportWriteError(
                f"--out {out} holds files that are not an icml24 report ({', '.join(foreign[:3])}): "
                "choose an empty or new folder"
            )
    env = environment()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as exc:
        raise ReportWriteError(f"cannot create the report folder {out}: {exc.strerror or exc}") from exc
    try:
        figures = tmp / "figures"
        figures.mkdir()
        for r in reports:
            for i, f in enumerate(r.analysis.figures):
                (tmp / _figure_file(r.slug, i)).write_bytes(f.png)
        glance = claims_figure(reports)
        if glance is not None:
            (tmp / GLANCE_FILE).write_bytes(glance.png)
        payload = results_payload(reports, env)
        (tmp / "results.json").write_text(json.dumps(payload, indent=2, allow_nan=False), encoding="utf-8")
        (tmp / "report.md").write_text(render_markdown(reports, env, glance=glance), encoding="utf-8")
        (tmp / "index.html").write_text(render_html(reports, env, glance=glance), encoding="utf-8")
        _apply_umask(tmp)
        _replace_dir(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, ReportWriteError):
            raise ReportWriteError(f"cannot write the report into {out}: {exc.strerror or exc}") from exc
        raise
    return out / "index.html"


def _apply_umask(folder: Path) -> None:
    """``mkdtemp`` makes a 0700 folder: give it and its files the modes the user's umask asks for."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)
    for p in folder.rglob("*"):
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def _replace_dir(new: Path, out: Path) -> None:
    """Rename ``new`` to ``out``; an existing ``out`` is moved aside first and removed after."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{time.time_ns()}")
        os.replace(out, old)
    try:
        os.replace(new, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _figure_file(slug: str, index: int) -> str:
    return f"figures/{slug}-{index + 1}.png"


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height in pixels of a PNG (from its IHDR chunk); ``(0, 0)`` when it is not a PNG."""
    if len(png) < 24 or png[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0
    return struct.unpack(">II", png[16:24])


# ------------------------------------------------------------------------------------------ text

_LIST_REPR = re.compile(r"\[('[^'\[\]]*'(?:, '[^'\[\]]*')*)\]")
_NUMPY_REPR = re.compile(r"np\.(?:float|int|bool_?)\d*\(([^()]*)\)")


def readable(text: str) -> str:
    """Text for a person: Python list reprs ``['a', 'b']`` become ``a, b``; ``np.float64(0.5)`` becomes
    ``0.5``. (Analyses should not write reprs; this keeps the report readable when one does.)"""
    text = _LIST_REPR.sub(lambda m: ", ".join(s.strip("'") for s in m.group(1).split(", ")), text)
    return _NUMPY_REPR.sub(r"\1", text)


def fmt_num(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None else str(x)
    ax = abs(x)
    if ax != 0 and (ax < 1e-3 or ax >= 1e5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return ""
    return "p < 0.001" if p < 1e-3 else f"p = {p:.3f}"


def effect_text(c: ClaimCheck) -> str:
    """``"mean difference = 0.12 (95% CI 0.05 to 0.19)"``; empty when the check has no effect."""
    if c.effect is None:
        return ""
    text = f"{c.effect_name or 'effect'} = {fmt_num(c.effect)}"
    if c.ci is not None:
        level = f"{c.ci_level * 100:.0f}% CI" if c.ci_level else "CI"
        text += f" ({level} {fmt_num(c.ci[0])} to {fmt_num(c.ci[1])})"
    return text


def check_stats(c: ClaimCheck) -> dict[str, str]:
    """A check's statistics as printed: rule, effect with CI, p-value, power, n (empty ones left out)."""
    stats = {
        "rule": c.rule,
        "effect": effect_text(c),
        "p": fmt_p(c.p_value),
        "power": f"{c.power:.2f}" if c.power is not None else "",
        "n": str(c.n) if c.n is not None else "",
    }
    return {k: readable(v) for k, v in stats.items() if v}


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def effect_ci_text(effect: float | None, ci: Any = None) -> str:
    """``"0.120 [0.050, 0.190]"``: an effect and its interval, compactly (``"—"`` for a missing effect)."""
    text = fmt_num(effect) if effect is not None else "—"
    if ci is not None and len(ci) == 2:
        lo, hi = (fmt_num(v) if v is not None else "n/a" for v in ci)
        text += f" [{lo}, {hi}]"
    return text


def p_text(p: float | None) -> str:
    """A p-value for a table cell: ``"0.003"``, ``"<0.001"``; empty when there is none."""
    if p is None or not math.isfinite(p):
        return ""
    return "<0.001" if p < 1e-3 else f"{p:.3f}"


def _words(text: str) -> str:
    return readable(str(text)).replace("_", " ")


def headroom_text(headroom: Any) -> str:
    """A check's headroom in words: its own ``text``, else what the baseline reaches and the largest effect
    this budget allows beside the paper's."""
    if not isinstance(headroom, dict):
        return ""
    if headroom.get("text"):
        return readable(str(headroom["text"]))
    parts = []
    for key, words in (("baseline_best", "the baseline's best"), ("max_effect", "the largest possible effect"),
                       ("paper_effect", "the paper's effect")):  # fmt: skip
        if _finite(headroom.get(key)) is not None:
            parts.append(f"{words} {fmt_num(headroom[key])}")
    return "; ".join(parts)


def control_text(control: Any) -> str:
    """The negative control's verdict and effect [CI] (``"not supported: 0.01 [-0.02, 0.04]"``)."""
    if not isinstance(control, dict):
        return ""
    verdict = _words(control.get("verdict") or "")
    effect = effect_ci_text(_finite(control.get("effect")), control.get("ci"))
    return f"{verdict}: {effect}" if verdict else effect


PLAIN_OUTCOMES = ("effect_shown", "refuted", "undecided")
"""Outcomes the verdict already says; the others (``effect_below_margin``, ``not_run``) are shown under it."""


@dataclass
class CheckRow:
    """One check as the report's compact table shows it (see :func:`check_rows`)."""

    id: str
    claim: str
    verdict: str
    role: str
    """``"decides"``, ``"reported only"`` or empty (decisive, but not among the deciding checks)."""
    effect: str
    effect_name: str
    p: str
    power: str
    n: str
    control: str
    control_verdict: str
    notes: list[str]
    """Short flags under the verdict: ``"uninformative: its control came out supported"``, the outcome."""
    details: list[tuple[str, str]]
    """The folded-away text: evidence, rule, headroom, the control's claim."""


CHECK_COLUMNS = (("effect", "effect [CI]"), ("p", "p"), ("power", "power"), ("n", "n"), ("control", "control"))
"""The statistics columns of the check table, after claim and verdict (a column no check fills is left out)."""


def check_rows(r: PaperReport) -> list[CheckRow]:
    """The paper's checks as rows of one compact table: claim, verdict, effect [CI], p, power, n and the
    negative control, with the long text (evidence, rule, headroom) kept apart to be folded away.

    Reads the optional keys of ``ClaimCheck.to_dict`` (``control``, ``uninformative``, ``headroom``,
    ``outcome``) with ``.get``, so a check without them renders as before.
    """
    deciding = {c.id for c in r.deciding_checks()} if r.state == "analysed" else set()
    rows = []
    for c in r.analysis.checks:
        d = c.to_dict()
        control = d.get("control") if isinstance(d.get("control"), dict) else None
        ci = d.get("ci")
        notes = []
        if d.get("uninformative"):
            notes.append("uninformative: its control came out supported")
        if isinstance(d.get("headroom"), dict) and d["headroom"].get("can_decide") is False:
            notes.append("cannot decide: the design leaves less room than the paper's effect")
        if d.get("outcome") and d["outcome"] not in PLAIN_OUTCOMES:
            notes.append(_words(d["outcome"]))
        details = [("Evidence", readable(c.evidence))]
        if c.rule:
            details.append(("Rule", readable(c.rule)))
        if headroom_text(d.get("headroom")):
            details.append(("Headroom", headroom_text(d.get("headroom"))))
        if control is not None:
            ctext = control_text(control)
            claim = readable(str(control.get("claim") or ""))
            p = p_text(_finite(control.get("p_value")))
            details.append(("Control", "; ".join(x for x in (claim, ctext, f"p {p}" if p else "") if x)))
        if c.effect_name:
            details.append(("Effect", readable(c.effect_name)))
        has_effect = c.effect is not None or ci is not None
        rows.append(CheckRow(
            id=c.id, claim=readable(c.claim), verdict=c.verdict,
            role="reported only" if not c.decisive else ("decides" if c.id in deciding else ""),
            effect=effect_ci_text(_finite(c.effect), ci) if has_effect else "",
            effect_name=readable(c.effect_name), p=p_text(c.p_value),
            power=f"{c.power:.2f}" if c.power is not None else "", n=str(c.n) if c.n is not None else "",
            control=control_text(control), control_verdict=str(control.get("verdict") or "") if control else "",
            notes=notes, details=[(k, v) for k, v in details if v],
        ))  # fmt: skip
    return rows


def _check_columns(rows: list[CheckRow]) -> list[tuple[str, str]]:
    """The statistics columns that at least one row fills."""
    return [(k, name) for k, name in CHECK_COLUMNS if any(getattr(row, k) for row in rows)]


SMOKE_BANNER = "Smoke scale: a plumbing test, numbers not meaningful."
"""What a smoke-scale paper's section (and a page holding one) says first."""

LONG_SUMMARY = 400
"""A summary longer than this many characters is folded away (``<details>``) under the verdict."""


def verdict_line(r: PaperReport) -> str:
    """``"Verdict: supported (3 decisive checks: 2 supported, 1 inconclusive)."``"""
    text = f"Verdict: {r.verdict_text}"
    decisive = [c for c in r.analysis.checks if c.decisive] if r.state == "analysed" else []
    if decisive:
        counts: dict[str, int] = {}
        for c in decisive:
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
        many = "s" if len(decisive) > 1 else ""
        text += f" ({len(decisive)} decisive check{many}: " + ", ".join(
            f"{k} {v.replace('_', ' ')}" for v, k in counts.items()
        ) + ")"
    return text + "."


def not_run_parts(r: PaperReport) -> list[str]:
    """The parts of the reproduction that did not run (``Analysis.not_run``, when the analysis has it)."""
    return [readable(str(x)) for x in (getattr(r.analysis, "not_run", None) or [])]


def verdict_parts(r: PaperReport) -> dict[str, str]:
    """The verdict paragraph's parts in words: ``verdict`` (``"Verdict: supported."``), ``summary``,
    ``rule`` (how the sub-claims combine) and ``decided_by`` (the deciding sub-claims with their verdicts);
    empty parts are absent."""
    a = r.analysis
    parts = {"verdict": f"Verdict: {r.verdict_text}.", "summary": _sentence(readable(a.summary))}
    if r.state != "analysed":
        return parts
    parts["rule"] = _sentence(readable(a.rule)) if a.rule else "The analysis does not state its combining rule."
    deciding = r.deciding_checks()
    if deciding:
        parts["decided_by"] = _sentence(
            "; ".join(f"{readable(c.claim).rstrip('.')} ({c.verdict.replace('_', ' ')})" for c in deciding)
        )
    return parts


def verdict_paragraph(r: PaperReport) -> str:
    """The verdict, the summary, the combining rule in words and the sub-claim(s) that decided it."""
    p = verdict_parts(r)
    text = f"{p['verdict']} {p['summary']}"
    if "rule" in p:
        text += f" Rule: {p['rule']}"
    if "decided_by" in p:
        text += f" Decided by: {p['decided_by']}"
    return text


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?", ")")) else text + "."


def decided_by_text(r: PaperReport) -> str:
    """The ids of the deciding checks, for one-line summaries (``"regret-vs-ucb1, trend-in-d"``)."""
    if r.state != "analysed":
        return ""
    ids = [c.id for c in r.deciding_checks()]
    shown = ", ".join(ids[:DECIDED_BY_SHOWN])
    return shown + (f" and {len(ids) - DECIDED_BY_SHOWN} more" if len(ids) > DECIDED_BY_SHOWN else "")


DECIDED_BY_SHOWN = 4
"""How many deciding check ids a one-line summary names (the paper's section lists them all)."""


def code_text(r: PaperReport) -> tuple[str, list[str]]:
    """The code the paper's results ran at, in words, and the warnings a reader must see (a dirty tree,
    rows of older code). Empty when the store records no provenance."""
    code = r.code
    if not code:
        return "", []
    runs = [run for run in code.get("runs", []) if run.get("current")]
    commits = list(dict.fromkeys(run.get("git_commit") or "no git" for run in runs))
    fp = (code.get("fingerprint") or "")[:12]
    text = f"Code fingerprint {fp or 'n/a'}"
    if commits:
        text += f"; the results used ran at commit {', '.join(commits)}"
    if code.get("git_commit"):
        text += f"; this checkout is at {code['git_commit']}{' with uncommitted changes' if code.get('git_dirty') else ''}"
    text += "."
    warnings = []
    dirty = list(dict.fromkeys(run.get("git_commit") or "no git" for run in runs if run.get("git_dirty")))
    if dirty:
        warnings.append(
            f"Some results ran on a tree with uncommitted changes (at {', '.join(dirty)}): the commit alone "
            "does not identify their code (the fingerprint does)."
        )
    envs = code.get("environments") or []
    if envs:
        text += " Floating-point environment: " + "; ".join(
            f"{e.get('description')} ({e.get('n_rows')} job(s){', this reader' if e.get('readers') else ''})"
            for e in envs
        ) + "."
    if len(envs) > 1:
        warnings.append(
            f"The results used ran in {len(envs)} floating-point environments (kernel sets or libraries differ): "
            "their numbers are not interchangeable; rerun in one environment before reading them as one table."
        )
    elif envs and not envs[0].get("readers"):
        warnings.append(
            "The results used ran in another floating-point environment than this reader's (see above): the same "
            "code and seeds can give other numbers here; `icml24 compare` lines up two stores check by check."
        )
    stale = int(code.get("n_stale") or 0)
    if stale:
        warnings.append(
            f"{stale} job(s) have results only from older code (another fingerprint): they are left out "
            "(counted as missing); rerun to include them."
        )
    return text, warnings


def code_flag(r: PaperReport) -> str:
    """A short flag for the summary table: ``dirty tree``, ``3 stale``, both, or empty."""
    _, warnings = code_text(r)
    flags = []
    if any("uncommitted" in w for w in warnings):
        flags.append("dirty tree")
    if r.code.get("n_stale"):
        flags.append(f"{r.code['n_stale']} from older code")
    return ", ".join(flags)


def _spread_note(table: Any) -> str:
    spreads = table.spreads()
    if not spreads:
        return ""
    return "± is the " + "; ".join(spreads) + "."


def _seed_text(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{len(seeds)} ({seeds[0]}..{seeds[-1]})"
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


def _cell_text(v: Any) -> str:
    if isinstance(v, Cell):
        return v.text
    if isinstance(v, float):
        return fmt_num(v, 4)
    return readable(str(v))


# ------------------------------------------------------------------------------------------ at a glance

_COMPUTE = object()
"""Default of the renderers' ``glance``: build the claims figure from the reports."""

GLANCE_MAX_ROWS = 160
"""The forest plot shows at most this many checks (the first ones, by field); the caption says so."""


def forest_rows(reports: list[PaperReport]) -> list[Any]:
    """Every decisive check with an effect or a CI, of every analysed paper, as forest-plot rows grouped
    by field (catalogue order of fields, then the reports' order)."""
    from icml24.catalogue import FIELDS
    from icml24.common.plotting import ForestRow

    rows = []
    for r in reports:
        if r.state != "analysed":
            continue
        for c in r.analysis.checks:
            d = c.to_dict()
            ci = d.get("ci")
            if not c.decisive or (_finite(c.effect) is None and ci is None):
                continue
            control = d.get("control") if isinstance(d.get("control"), dict) else None
            headroom = d.get("headroom") if isinstance(d.get("headroom"), dict) else {}
            text = effect_ci_text(_finite(c.effect), ci)
            if control is not None:
                text += f"  ctrl {effect_ci_text(_finite(control.get('effect')), control.get('ci'))}"
            rows.append(ForestRow(
                label=f"{r.slug}: {c.id}", group=r.field or "other", verdict=c.verdict,
                effect=_finite(c.effect), ci=_ci_pair(ci), margin=_finite(d.get("margin")),
                equivalence_margin=_finite(d.get("equivalence_margin")),
                paper_effect=_finite(headroom.get("paper_effect")),
                control=(_finite(control.get("effect")), _ci_pair(control.get("ci")), str(control.get("verdict")))
                if control is not None else None,
                uninformative=bool(d.get("uninformative")) or headroom.get("can_decide") is False, text=text,
            ))  # fmt: skip
    order = {f: i for i, f in enumerate(FIELDS)}
    return sorted(rows, key=lambda row: order.get(row.group, len(order)))  # stable: papers keep their order


def _ci_pair(ci: Any) -> tuple[float, float] | None:
    if ci is None or len(ci) != 2:
        return None
    lo, hi = (math.nan if v is None else float(v) for v in ci)
    return (-math.inf if math.isnan(lo) else lo, math.inf if math.isnan(hi) else hi)


def claims_figure(reports: list[PaperReport]) -> Figure | None:
    """The claims at a glance: a forest plot of every decisive check of the sweep (``None`` when no check
    has an effect or an interval)."""
    from icml24.common.plotting import FOREST_CAPTION, figure_png, forest_plot

    rows = forest_rows(reports)
    if not rows:
        return None
    shown = rows[:GLANCE_MAX_ROWS]
    papers = len({row.label.partition(":")[0] for row in rows})
    caption = FOREST_CAPTION + f" {len(rows)} decisive checks of {papers} paper(s), grouped by field"
    caption += f"; the first {len(shown)} are shown." if len(shown) < len(rows) else "."
    if any(r.scale == "smoke" for r in reports):
        caption += " " + SMOKE_BANNER
    fig = forest_plot(shown)
    return Figure("Claims at a glance", figure_png(fig, dpi=100), caption)


# ------------------------------------------------------------------------------------------ Markdown


def _md(v: Any) -> str:
    return _cell_text(v).replace("|", "\\|").replace("\n", " ")


def _md_details(summary: str, lines: list[str]) -> list[str]:
    """A folded block (GitHub and most Markdown renderers show ``<details>``)."""
    return ["<details><summary>" + html.escape(summary) + "</summary>", "", *lines, "", "</details>", ""]


def markdown_check_table(rows: list[CheckRow]) -> list[str]:
    """The compact check table in Markdown (claim, verdict, then the statistics columns some row fills)."""
    cols = _check_columns(rows)
    lines = ["| claim | verdict | " + " | ".join(n for _, n in cols) + " |", "|---|---|" + "---|" * len(cols)]
    for row in rows:
        verdict = f"**{row.verdict.replace('_', ' ')}**" + (f" ({row.role})" if row.role else "")
        verdict += "".join(f"; {n}" for n in row.notes)
        lines.append(f"| {_md(row.claim)} `{row.id}` | {_md(verdict)} | "
                     + " | ".join(_md(getattr(row, k)) for k, _ in cols) + " |")  # fmt: skip
    return lines


def render_markdown(reports: list[PaperReport], env: dict[str, Any], *, glance: Any = _COMPUTE) -> str:
    """The report as Markdown; ``glance`` is the claims-at-a-glance figure (computed when not given)."""
    lines = ["# icml24 reproduction report", ""]
    lines.append(
        f"icml24 {env['icml24']} (commit {env['commit'] or 'n/a'}), Python {env['python']}, "
        f"torch {env['torch']}, {env['cpus']} CPUs, {env['created']}."
    )
    if any(r.scale == "smoke" for r in reports):
        lines += ["", f"> **{SMOKE_BANNER}**"]
    glance = claims_figure(reports) if glance is _COMPUTE else glance
    if glance is not None:
        lines += ["", f"![{glance.title}]({GLANCE_FILE})", "", f"*{glance.title}.* {glance.caption}"]
    lines += ["", "| paper | scale | verdict | decided by | jobs ok/total | job time (s) | code |"]
    lines.append("|---|---|---|---|---|---|---|")
    for r in reports:
        lines.append(
            f"| [{r.slug}](#{r.slug}) | {r.scale} | **{r.verdict_text}** | {_md(decided_by_text(r))} | "
            f"{r.n_ok}/{r.n_jobs} | {r.wall_time:.1f} | {_md(code_flag(r))} |"
        )
    for r in reports:
        a = r.analysis
        lines += ["", f"## {r.slug}", "", f"*{r.title}*", ""]
        if r.citation:
            lines += [r.citation, ""]
        if r.scale == "smoke":
            lines += [f"> **{SMOKE_BANNER}**", ""]
        lines += [f"**Claim.** {r.claim}", "", f"**{verdict_line(r)}**", ""]
        summary = _sentence(readable(a.summary))
        if len(summary) > LONG_SUMMARY:
            lines += _md_details(f"Summary of the analysis ({len(summary):,} characters)", [summary])
        elif summary:
            lines += [summary, ""]
        if r.state == "analysed" and a.rule:
            lines += [f"How the checks combine: {_sentence(readable(a.rule))}", ""]
        for part in not_run_parts(r):
            lines += [f"> **Not run.** {part}", ""]
        rows = check_rows(r)
        if rows:
            lines += markdown_check_table(rows) + [""]
            evidence = [f"- `{row.id}`: " + " ".join(f"**{k}.** {_sentence(v)}" for k, v in row.details)
                        for row in rows if row.details]  # fmt: skip
            if evidence:
                lines += _md_details("Evidence and rule of each check", evidence)
        lines += [f"Scale `{r.scale}`, seeds: {_seed_text(r.seeds)}, total job time {r.wall_time:.1f} s, "
                  f"jobs {r.n_ok}/{r.n_jobs} ok.", ""]  # fmt: skip
        ctext, cwarn = code_text(r)
        if ctext:
            lines += [ctext, ""]
        lines += [f"> **Warning.** {w}\n" for w in cwarn]
        if r.readme:
            lines += [f"README: `{r.readme}`", ""]
        for t in a.tables:
            lines += [f"**{t.title}**", "", "| " + " | ".join(map(_md, t.columns)) + " |"]
            lines.append("|" + "---|" * len(t.columns))
            lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in t.rows]
            note = " ".join(x for x in (t.note, _spread_note(t)) if x)
            if note:
                lines += ["", readable(note)]
            lines.append("")
        for i, f in enumerate(a.figures):
            caption = f" {readable(f.caption)}" if f.caption else ""
            lines += [f"![{f.title}]({_figure_file(r.slug, i)})", "", f"*Figure {i + 1}: {f.title}.*{caption}", ""]
        if r.deviations:
            lines += _md_details(f"Deviations from the paper ({len(r.deviations)})", [f"- {d}" for d in r.deviations])
        if r.analysis_error:
            lines += ["", "**The analysis crashed.**", "", "```", r.analysis_error.strip(), "```", ""]
        if r.errors or r.n_missing:
            lines += ["", f"**{len(r.errors)} job(s) crashed, {r.n_missing} missing.**", ""]
            for e in r.errors:
                lines += [f"`{e.job.label}`: {error_last_line(e.error)}", "", "```", (e.error or "").strip(), "```", ""]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#1d2329;line-height:1.45}
h1{border-bottom:2px solid #ddd}h2{margin-top:2.2em;border-bottom:1px solid #eee}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}td,th{border:1px solid #ddd;padding:.3em .6em;
text-align:left;vertical-align:top}th{background:#f6f8fa}
table.checks td.num{white-space:nowrap;font-variant-numeric:tabular-nums}
table.checks tr.decides td:first-child{border-left:3px solid #1d2329}
table.checks details summary{cursor:pointer}table.checks details p{margin:.3em 0;font-size:.92em;color:#333}
.v{padding:.1em .5em;border-radius:4px;color:#fff;font-weight:600;white-space:nowrap}
.supported{background:#1a7f37}.not_supported{background:#cf222e}.inconclusive{background:#9a6700}
.not_run{background:#6e7781}
figure{display:inline-block;vertical-align:top;margin:.5em 1% .5em 0;max-width:48%}
figure.wide{display:block;max-width:100%;margin:.8em 0}figure.wide img{width:100%}
figure img{max-width:100%;height:auto;border:1px solid #eee;cursor:zoom-in}
figcaption{font-size:.85em;color:#555}
.warn{background:#fff8c5;border-left:4px solid #9a6700;padding:.3em .6em}
.banner{background:#ddf4ff;border-left:4px solid #0969da;padding:.4em .7em;font-weight:600}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.8em}.muted{color:#666;font-size:.9em}
"""

WIDE_FIGURE_PX = 700
"""A figure wider than this (in pixels) is shown at the page's full width instead of two per row."""


def _h(v: Any) -> str:
    return html.escape(_cell_text(v))


def _verdict_badge(v: str) -> str:
    return f'<span class="v {html.escape(v)}">{html.escape(v.replace("_", " "))}</span>'


def _html_figure(f: Figure, file: str, label: str, wide: bool | None = None) -> str:
    b64 = base64.b64encode(f.png).decode()
    if wide is None:
        wide = png_size(f.png)[0] > WIDE_FIGURE_PX
    cls = " class='wide'" if wide else ""
    cap = f"{label}{_h(f.title)}" + (f". {_h(f.caption)}" if f.caption else "")
    return (
        f"<figure{cls}><a href='{file}' title='open full size'>"
        f"<img alt='{_h(f.title)}' src='data:image/png;base64,{b64}'></a>"
        f"<figcaption>{cap} <span class='muted'>(click to enlarge)</span></figcaption></figure>"
    )


def _html_checks(r: PaperReport) -> list[str]:
    rows = check_rows(r)
    if not rows:
        return []
    cols = _check_columns(rows)
    parts = ["<table class='checks'><tr><th>claim</th><th>verdict</th>"
             + "".join(f"<th>{_h(n)}</th>" for _, n in cols) + "</tr>"]  # fmt: skip
    for row in rows:
        details = "".join(f"<p><b>{_h(k)}.</b> {_h(v)}</p>" for k, v in row.details)
        claim = (f"<details><summary>{_h(row.claim)}</summary>{details}"
                 f"<p class='muted'>id <code>{_h(row.id)}</code></p></details>")  # fmt: skip
        flags = [row.role] if row.role else []
        verdict = _verdict_badge(row.verdict) + "".join(
            f"<br><span class='muted'>{_h(x)}</span>" for x in flags + row.notes
        )
        cells = []
        for k, _ in cols:
            value = getattr(row, k)
            if k == "effect" and value and row.effect_name:
                cells.append(f"<td class='num' title='{_h(row.effect_name)}'>{_h(value)}</td>")
            elif k == "control" and row.control_verdict:
                effect = value.partition(": ")[2]
                cells.append(f"<td class='num'>{_verdict_badge(row.control_verdict)} {_h(effect)}</td>")
            else:
                cells.append(f"<td class='num'>{_h(value)}</td>")
        cls = " class='decides'" if row.role == "decides" else ""
        parts.append(f"<tr{cls}><td>{claim}</td><td>{verdict}</td>{''.join(cells)}</tr>")
    parts.append("</table>")
    return parts


def render_html(reports: list[PaperReport], env: dict[str, Any], *, glance: Any = _COMPUTE) -> str:
    """The self-contained HTML page; ``glance`` is the claims-at-a-glance figure (computed when not given)."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>icml24 reproduction report</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<style>{_CSS}</style></head><body><h1>icml24 reproduction report</h1>",
        f"<p class='muted'>icml24 {_h(env['icml24'])} (commit {_h(env['commit'] or 'n/a')}), "
        f"Python {_h(env['python'])}, torch {_h(env['torch'])}, {_h(env['cpus'])} CPUs, {_h(env['created'])}</p>",
    ]
    if any(r.scale == "smoke" for r in reports):
        parts.append(f"<p class='banner'>{_h(SMOKE_BANNER)}</p>")
    glance = claims_figure(reports) if glance is _COMPUTE else glance
    if glance is not None:
        parts.append(_html_figure(glance, GLANCE_FILE, "", wide=True))
    parts.append(
        "<table><tr><th>paper</th><th>scale</th><th>verdict</th><th>decided by</th><th>jobs ok/total</th>"
        "<th>job time (s)</th><th>code</th></tr>"
    )
    for r in reports:
        parts.append(
            f"<tr><td><a href='#{_h(r.slug)}'>{_h(r.slug)}</a></td><td>{_h(r.scale)}</td>"
            f"<td>{_verdict_badge(r.verdict)}</td><td>{_h(decided_by_text(r))}</td><td>{r.n_ok}/{r.n_jobs}</td>"
            f"<td>{r.wall_time:.1f}</td><td>{_h(code_flag(r))}</td></tr>"
        )
    parts.append("</table>")
    for r in reports:
        a = r.analysis
        summary = _sentence(readable(a.summary))
        ctext, cwarn = code_text(r)
        parts += [
            f"<h2 id='{_h(r.slug)}'>{_h(r.slug)} {_verdict_badge(r.verdict)}</h2>",
            f"<p><em>{_h(r.title)}</em></p>" if r.title else "",
            f"<p class='muted'>{_h(r.citation)}</p>" if r.citation else "",
            f"<p class='banner'>{_h(SMOKE_BANNER)}</p>" if r.scale == "smoke" else "",
            f"<p><b>Claim.</b> {_h(r.claim)}</p>",
            f"<p><b>{_h(verdict_line(r))}</b></p>",
            (f"<details><summary>Summary of the analysis ({len(summary):,} characters)</summary>"
             f"<p>{_h(summary)}</p></details>") if len(summary) > LONG_SUMMARY else
            (f"<p>{_h(summary)}</p>" if summary else ""),
            f"<p class='muted'>How the checks combine: {_h(_sentence(readable(a.rule)))}</p>"
            if r.state == "analysed" and a.rule else "",
            *(f"<p class='warn'><b>Not run.</b> {_h(x)}</p>" for x in not_run_parts(r)),
            *_html_checks(r),
            f"<p class='muted'>Scale <code>{_h(r.scale)}</code>, seeds: {_h(_seed_text(r.seeds))}, "
            f"total job time {r.wall_time:.1f} s, jobs {r.n_ok}/{r.n_jobs} ok."
            + (f" {_h(ctext)}" if ctext else "") + "</p>",
            *(f"<p class='warn'>Warning. {_h(w)}</p>" for w in cwarn),
            f"<p class='muted'>README: <code>{_h(r.readme)}</code></p>" if r.readme else "",
        ]  # fmt: skip
        for t in a.tables:
            parts.append(f"<h4>{_h(t.title)}</h4><table><tr>" + "".join(f"<th>{_h(c)}</th>" for c in t.columns))
            parts += ["<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in t.rows]
            note = " ".join(x for x in (t.note, _spread_note(t)) if x)
            parts.append("</table>" + (f"<p class='muted'>{_h(note)}</p>" if note else ""))
        for i, f in enumerate(a.figures):
            parts.append(_html_figure(f, _figure_file(r.slug, i), f"Figure {i + 1}: "))
        if r.deviations:
            parts.append(f"<details><summary>Deviations from the paper ({len(r.deviations)})</summary><ul>")
            parts += [f"<li>{_h(d)}</li>" for d in r.deviations]
            parts.append("</ul></details>")
        if r.analysis_error:
            parts.append(f"<h4>The analysis crashed</h4><pre>{html.escape(r.analysis_error)}</pre>")
        if r.errors or r.n_missing:
            parts.append(f"<h4>{len(r.errors)} job(s) crashed, {r.n_missing} missing</h4>")
            for e in r.errors:
                parts.append(
                    f"<p><code>{_h(e.job.label)}</code>: {html.escape(error_last_line(e.error))}</p>"
                    f"<pre>{html.escape(e.error or '')}</pre>"
                )
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)
