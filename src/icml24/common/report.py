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
from icml24.common.experiment import Analysis, Cell, ClaimCheck, JobResult, Reproduction
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


def _paper_meta(slug: str, repro: Reproduction) -> tuple[str, str, str]:
    try:
        p = catalogue.get(slug)
    except KeyError:  # a user-registered reproduction
        return slug, "", ""
    readme = catalogue.readme_path(slug)
    return p.title, p.citation, str(readme) if readme is not None else ""


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
    title, citation, readme = _paper_meta(slug, repro)
    code = store.provenance(jobs).to_dict()
    report = PaperReport(
        slug=slug, title=title, claim=repro.claim, scale=scale, seeds=sorted({j.seed for j in jobs}),
        analysis=analysis, deviations=repro.deviations, n_jobs=len(jobs), n_ok=len(ok), errors=errors,
        n_missing=missing, wall_time=sum(r.wall_time for r in stored if r is not None), citation=citation,
        state=state, analysis_error=analysis_error, readme=readme, code=code,
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


def environment() -> dict[str, Any]:
    import numpy
    import torch

    return {
        "icml24": __version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
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
        payload = results_payload(reports, env)
        (tmp / "results.json").write_text(json.dumps(payload, indent=2, allow_nan=False), encoding="utf-8")
        (tmp / "report.md").write_text(render_markdown(reports, env), encoding="utf-8")
        (tmp / "index.html").write_text(render_html(reports, env), encoding="utf-8")
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


_CHECK_COLUMNS = (("rule", "rule"), ("effect", "effect (CI)"), ("p", "p-value"), ("power", "power"), ("n", "n"))


def _check_columns(checks: list[ClaimCheck]) -> list[tuple[str, str]]:
    """The statistics columns that at least one check fills."""
    filled = set().union(*(check_stats(c) for c in checks)) if checks else set()
    return [(k, name) for k, name in _CHECK_COLUMNS if k in filled]


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


# ------------------------------------------------------------------------------------------ Markdown


def _md(v: Any) -> str:
    return _cell_text(v).replace("|", "\\|").replace("\n", " ")


def render_markdown(reports: list[PaperReport], env: dict[str, Any]) -> str:
    lines = ["# icml24 reproduction report", ""]
    lines.append(
        f"icml24 {env['icml24']} (commit {env['commit'] or 'n/a'}), Python {env['python']}, "
        f"torch {env['torch']}, {env['cpus']} CPUs, {env['created']}."
    )
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
        vp = verdict_parts(r)
        lines += [f"**Claim.** {r.claim}", "", f"**{vp['verdict']}** {vp['summary']}", ""]
        if "rule" in vp:
            lines += [f"**Rule.** {vp['rule']}", ""]
        if "decided_by" in vp:
            lines += [f"**Decided by.** {vp['decided_by']}", ""]
        lines += [f"Scale `{r.scale}`, seeds: {_seed_text(r.seeds)}, total job time {r.wall_time:.1f} s.", ""]
        ctext, cwarn = code_text(r)
        if ctext:
            lines += [ctext, ""]
        lines += [f"> **Warning.** {w}\n" for w in cwarn]
        if r.readme:
            lines += [f"README: `{r.readme}`", ""]
        if a.checks:
            cols = _check_columns(a.checks)
            lines += ["| sub-claim | id | verdict | evidence | " + " | ".join(n for _, n in cols) + " |"]
            lines.append("|---|---|---|---|" + "---|" * len(cols))
            for c in a.checks:
                stats = check_stats(c)
                decisive = "" if c.decisive else " (reported only)"
                lines.append(
                    f"| {_md(c.claim)} | `{c.id}` | {c.verdict.replace('_', ' ')}{decisive} | {_md(c.evidence)} | "
                    + " | ".join(_md(stats.get(k, "")) for k, _ in cols)
                    + " |"
                )
            lines.append("")
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
            lines += ["", "**Deviations from the paper.**", ""] + [f"- {d}" for d in r.deviations]
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
.v{padding:.1em .5em;border-radius:4px;color:#fff;font-weight:600;white-space:nowrap}
.supported{background:#1a7f37}.not_supported{background:#cf222e}.inconclusive{background:#9a6700}
.not_run{background:#6e7781}
figure{display:inline-block;vertical-align:top;margin:.5em 1% .5em 0;max-width:48%}
figure.wide{display:block;max-width:100%;margin:.8em 0}figure.wide img{width:100%}
figure img{max-width:100%;height:auto;border:1px solid #eee;cursor:zoom-in}
figcaption{font-size:.85em;color:#555}
.warn{background:#fff8c5;border-left:4px solid #9a6700;padding:.3em .6em}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.8em}.muted{color:#666;font-size:.9em}
"""

WIDE_FIGURE_PX = 700
"""A figure wider than this (in pixels) is shown at the page's full width instead of two per row."""


def _h(v: Any) -> str:
    return html.escape(_cell_text(v))


def _verdict_badge(v: str) -> str:
    return f'<span class="v {html.escape(v)}">{html.escape(v.replace("_", " "))}</span>'


def render_html(reports: list[PaperReport], env: dict[str, Any]) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>icml24 reproduction report</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<style>{_CSS}</style></head><body><h1>icml24 reproduction report</h1>",
        f"<p class='muted'>icml24 {_h(env['icml24'])} (commit {_h(env['commit'] or 'n/a')}), "
        f"Python {_h(env['python'])}, torch {_h(env['torch'])}, {_h(env['cpus'])} CPUs, {_h(env['created'])}</p>",
        "<table><tr><th>paper</th><th>scale</th><th>verdict</th><th>decided by</th><th>jobs ok/total</th>"
        "<th>job time (s)</th><th>code</th></tr>",
    ]
    for r in reports:
        parts.append(
            f"<tr><td><a href='#{_h(r.slug)}'>{_h(r.slug)}</a></td><td>{_h(r.scale)}</td>"
            f"<td>{_verdict_badge(r.verdict)}</td><td>{_h(decided_by_text(r))}</td><td>{r.n_ok}/{r.n_jobs}</td>"
            f"<td>{r.wall_time:.1f}</td><td>{_h(code_flag(r))}</td></tr>"
        )
    parts.append("</table>")
    for r in reports:
        a = r.analysis
        seeds = _seed_text(r.seeds)
        vp = verdict_parts(r)
        parts += [
            f"<h2 id='{_h(r.slug)}'>{_h(r.slug)} {_verdict_badge(r.verdict)}</h2>",
            f"<p><em>{_h(r.title)}</em></p>",
            f"<p class='muted'>{_h(r.citation)}</p>" if r.citation else "",
            f"<p><b>Claim.</b> {_h(r.claim)}</p>",
            f"<p><b>{_h(vp['verdict'])}</b> {_h(vp['summary'])}</p>",
            f"<p><b>Rule.</b> {_h(vp['rule'])}</p>" if "rule" in vp else "",
            f"<p><b>Decided by.</b> {_h(vp['decided_by'])}</p>" if "decided_by" in vp else "",
            f"<p class='muted'>Scale <code>{_h(r.scale)}</code>, seeds: {_h(seeds)}, "
            f"total job time {r.wall_time:.1f} s, jobs {r.n_ok}/{r.n_jobs} ok.</p>",
            f"<p class='muted'>{_h(code_text(r)[0])}</p>" if code_text(r)[0] else "",
            *(f"<p class='warn'>Warning. {_h(w)}</p>" for w in code_text(r)[1]),
            f"<p class='muted'>README: <code>{_h(r.readme)}</code></p>" if r.readme else "",
        ]
        if a.checks:
            cols = _check_columns(a.checks)
            parts.append(
                "<table><tr><th>sub-claim</th><th>id</th><th>verdict</th><th>evidence</th>"
                + "".join(f"<th>{_h(n)}</th>" for _, n in cols)
                + "</tr>"
            )
            for c in a.checks:
                stats = check_stats(c)
                decisive = "" if c.decisive else "<br><span class='muted'>reported only</span>"
                parts.append(
                    f"<tr><td>{_h(c.claim)}</td><td><code>{_h(c.id)}</code></td>"
                    f"<td>{_verdict_badge(c.verdict)}{decisive}</td><td>{_h(c.evidence)}</td>"
                    + "".join(f"<td>{_h(stats.get(k, ''))}</td>" for k, _ in cols)
                    + "</tr>"
                )
            parts.append("</table>")
        for t in a.tables:
            parts.append(f"<h4>{_h(t.title)}</h4><table><tr>" + "".join(f"<th>{_h(c)}</th>" for c in t.columns))
            parts += ["<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in t.rows]
            note = " ".join(x for x in (t.note, _spread_note(t)) if x)
            parts.append("</table>" + (f"<p class='muted'>{_h(note)}</p>" if note else ""))
        for i, f in enumerate(a.figures):
            b64 = base64.b64encode(f.png).decode()
            width, _ = png_size(f.png)
            cls = " class='wide'" if width > WIDE_FIGURE_PX else ""
            cap = f"Figure {i + 1}: {_h(f.title)}" + (f". {_h(f.caption)}" if f.caption else "")
            parts.append(
                f"<figure{cls}><a href='{_figure_file(r.slug, i)}' title='open full size'>"
                f"<img alt='{_h(f.title)}' src='data:image/png;base64,{b64}'></a>"
                f"<figcaption>{cap} <span class='muted'>(click to enlarge)</span></figcaption></figure>"
            )
        if r.deviations:
            parts.append("<h4>Deviations from the paper</h4><ul>")
            parts += [f"<li>{_h(d)}</li>" for d in r.deviations]
            parts.append("</ul>")
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
