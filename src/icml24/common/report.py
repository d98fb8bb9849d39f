"""Turn stored job results into the reproduction report.

For each paper: rebuild its job list for the scale, fetch the results from the store, run the paper's
``analyze`` and write, in the output folder, ``results.json`` (machine-readable), ``report.md`` and a
self-contained ``index.html`` (styles inline, plots embedded as base64 PNG). Files are written atomically
(temporary file, then rename), so a killed process never leaves a half-written report.
"""

from __future__ import annotations

import base64
import html
import json
import os
import platform
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icml24 import __version__, catalogue
from icml24.common.experiment import Analysis, JobResult, Reproduction
from icml24.common.fingerprint import combine
from icml24.common.registry import get_reproduction
from icml24.common.runner import git_commit
from icml24.common.store import ResultStore


@dataclass
class PaperReport:
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

    def to_json(self) -> dict[str, Any]:
        a = self.analysis
        return {
            "slug": self.slug,
            "title": self.title,
            "claim": self.claim,
            "verdict": a.verdict,
            "summary": a.summary,
            "checks": [c.to_dict() for c in a.checks],
            "tables": [t.to_dict() for t in a.tables],
            "figures": [f.title for f in a.figures],
            "scale": self.scale,
            "seeds": self.seeds,
            "jobs": {"total": self.n_jobs, "ok": self.n_ok, "error": len(self.errors), "missing": self.n_missing},
            "errors": [{"job": e.job.label, "traceback": e.error} for e in self.errors],
            "job_wall_time_s": round(self.wall_time, 3),
            "deviations": list(self.deviations),
            "citation": self.citation,
        }


def _paper_meta(slug: str, repro: Reproduction) -> tuple[str, str]:
    try:
        p = catalogue.get(slug)
        return p.title, p.citation
    except KeyError:  # a user-registered reproduction
        return slug, ""


def analyze_paper(slug: str, scale: str, seeds: int | None, store: ResultStore) -> PaperReport:
    """Fetch a paper's results from the store and analyze them (never raises on a bad analysis)."""
    repro = get_reproduction(slug)
    jobs = repro.jobs(scale, seeds)
    stored = store.get_many(jobs)
    ok = [r for r in stored if r is not None and r.status == "ok"]
    errors = [r for r in stored if r is not None and r.status != "ok"]
    missing = sum(r is None for r in stored)
    try:
        analysis = repro.analyze(ok, scale)
    except Exception:  # noqa: BLE001 - a broken analysis is reported, not fatal to the whole report
        analysis = Analysis("inconclusive", "The analysis crashed:\n" + traceback.format_exc())
    if (errors or missing) and analysis.verdict != "inconclusive":
        analysis.summary += f" (Note: {len(errors)} job(s) crashed and {missing} are missing.)"
    title, citation = _paper_meta(slug, repro)
    report = PaperReport(
        slug=slug, title=title, claim=repro.claim, scale=scale, seeds=sorted({j.seed for j in jobs}),
        analysis=analysis,
        deviations=repro.deviations, n_jobs=len(jobs), n_ok=len(ok), errors=errors, n_missing=missing,
        wall_time=sum(r.wall_time for r in stored if r is not None), citation=citation,
    )  # fmt: skip
    if not store.readonly:  # `icml24 report` opens the store read-only
        store.put_analysis(
            slug, scale, analysis.verdict, analysis.summary, len(ok), len(errors), missing,
            fingerprint=combine(store.fingerprint(j) for j in jobs),
        )  # fmt: skip
    return report


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


def write_report(reports: list[PaperReport], out_dir: str | Path) -> Path:
    """Write ``results.json``, ``report.md`` and ``index.html`` into ``out_dir``; return the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    payload = {"environment": env, "papers": [r.to_json() for r in reports]}
    _atomic_write(out / "results.json", json.dumps(payload, indent=2, allow_nan=True))
    _atomic_write(out / "report.md", render_markdown(reports, env))
    _atomic_write(out / "index.html", render_html(reports, env))
    return out / "index.html"


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ------------------------------------------------------------------------------------------ Markdown


def _seed_text(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{len(seeds)} ({seeds[0]}..{seeds[-1]})"
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


def _md_cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def render_markdown(reports: list[PaperReport], env: dict[str, Any]) -> str:
    lines = ["# icml24 reproduction report", ""]
    lines.append(
        f"icml24 {env['icml24']} (commit {env['commit'] or 'n/a'}), Python {env['python']}, "
        f"torch {env['torch']}, {env['cpus']} CPUs, {env['created']}."
    )
    lines += ["", "| paper | scale | verdict | jobs ok/total | job time (s) |", "|---|---|---|---|---|"]
    for r in reports:
        lines.append(
            f"| [{r.slug}](#{r.slug}) | {r.scale} | **{r.analysis.verdict}** | {r.n_ok}/{r.n_jobs} | "
            f"{r.wall_time:.1f} |"
        )
    for r in reports:
        a = r.analysis
        lines += ["", f"## {r.slug}", "", f"*{r.title}*", ""]
        if r.citation:
            lines += [r.citation, ""]
        lines += [f"**Claim.** {r.claim}", "", f"**Verdict: {a.verdict}.** {a.summary}", ""]
        lines += [f"Scale `{r.scale}`, seeds: {_seed_text(r.seeds)}, total job time {r.wall_time:.1f} s.", ""]
        if a.checks:
            lines += ["| sub-claim | verdict | evidence |", "|---|---|---|"]
            lines += [f"| {_md_cell(c.claim)} | {c.verdict} | {_md_cell(c.evidence)} |" for c in a.checks]
            lines.append("")
        for t in a.tables:
            lines += [f"**{t.title}**", "", "| " + " | ".join(map(_md_cell, t.columns)) + " |"]
            lines.append("|" + "---|" * len(t.columns))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
            if t.note:
                lines += ["", t.note]
            lines.append("")
        for i, f in enumerate(a.figures):
            lines += [f"*Figure {i + 1}: {f.title}* (embedded in index.html){' - ' + f.caption if f.caption else ''}"]
        if r.deviations:
            lines += ["", "**Deviations from the paper.**", ""] + [f"- {d}" for d in r.deviations]
        if r.errors or r.n_missing:
            lines += ["", f"**{len(r.errors)} job(s) crashed, {r.n_missing} missing.**", ""]
            for e in r.errors:
                lines += [f"`{e.job.label}`", "", "```", (e.error or "").strip(), "```", ""]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1d2329;line-height:1.45}
h1{border-bottom:2px solid #ddd}h2{margin-top:2.2em;border-bottom:1px solid #eee}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}td,th{border:1px solid #ddd;padding:.3em .6em;
text-align:left;vertical-align:top}th{background:#f6f8fa}
.v{padding:.1em .5em;border-radius:4px;color:#fff;font-weight:600}
.supported{background:#1a7f37}.not_supported{background:#cf222e}.inconclusive{background:#9a6700}
figure{display:inline-block;margin:.5em;max-width:48%}figure img{max-width:100%}figcaption{font-size:.85em;color:#555}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.8em}.muted{color:#666;font-size:.9em}
"""


def _h(v: Any) -> str:
    if isinstance(v, float):
        v = f"{v:.4g}"
    return html.escape(str(v))


def _verdict_badge(v: str) -> str:
    return f'<span class="v {v}">{_h(v)}</span>'


def render_html(reports: list[PaperReport], env: dict[str, Any]) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>icml24 reproduction report</title>",
        f"<style>{_CSS}</style></head><body><h1>icml24 reproduction report</h1>",
        f"<p class='muted'>icml24 {_h(env['icml24'])} (commit {_h(env['commit'] or 'n/a')}), "
        f"Python {_h(env['python'])}, torch {_h(env['torch'])}, {_h(env['cpus'])} CPUs, {_h(env['created'])}</p>",
        "<table><tr><th>paper</th><th>scale</th><th>verdict</th><th>jobs ok/total</th><th>job time (s)</th></tr>",
    ]
    for r in reports:
        parts.append(
            f"<tr><td><a href='#{_h(r.slug)}'>{_h(r.slug)}</a></td><td>{_h(r.scale)}</td>"
            f"<td>{_verdict_badge(r.analysis.verdict)}</td><td>{r.n_ok}/{r.n_jobs}</td>"
            f"<td>{r.wall_time:.1f}</td></tr>"
        )
    parts.append("</table>")
    for r in reports:
        a = r.analysis
        seeds = _seed_text(r.seeds)
        parts += [
            f"<h2 id='{_h(r.slug)}'>{_h(r.slug)} {_verdict_badge(a.verdict)}</h2>",
            f"<p><em>{_h(r.title)}</em></p>",
            f"<p class='muted'>{_h(r.citation)}</p>" if r.citation else "",
            f"<p><b>Claim.</b> {_h(r.claim)}</p>",
            f"<p><b>Verdict: {_h(a.verdict)}.</b> {_h(a.summary)}</p>",
            f"<p class='muted'>Scale <code>{_h(r.scale)}</code>, seeds: {_h(seeds)}, "
            f"total job time {r.wall_time:.1f} s, jobs {r.n_ok}/{r.n_jobs} ok.</p>",
        ]
        if a.checks:
            parts.append("<table><tr><th>sub-claim</th><th>verdict</th><th>evidence</th></tr>")
            parts += [
                f"<tr><td>{_h(c.claim)}</td><td>{_verdict_badge(c.verdict)}</td><td>{_h(c.evidence)}</td></tr>"
                for c in a.checks
            ]
            parts.append("</table>")
        for t in a.tables:
            parts.append(f"<h4>{_h(t.title)}</h4><table><tr>" + "".join(f"<th>{_h(c)}</th>" for c in t.columns))
            parts += ["<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in t.rows]
            parts.append("</table>" + (f"<p class='muted'>{_h(t.note)}</p>" if t.note else ""))
        for f in a.figures:
            b64 = base64.b64encode(f.png).decode()
            cap = _h(f.title) + (f": {_h(f.caption)}" if f.caption else "")
            parts.append(f"<figure><img alt='{_h(f.title)}' src='data:image/png;base64,{b64}'>"
                         f"<figcaption>{cap}</figcaption></figure>")
        if r.deviations:
            parts.append("<h4>Deviations from the paper</h4><ul>")
            parts += [f"<li>{_h(d)}</li>" for d in r.deviations]
            parts.append("</ul>")
        if r.errors or r.n_missing:
            parts.append(f"<h4>{len(r.errors)} job(s) crashed, {r.n_missing} missing</h4>")
            for e in r.errors:
                parts.append(f"<p><code>{_h(e.job.label)}</code></p><pre>{_h(e.error)}</pre>")
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)
