"""The measured-results block of a paper's README, written from the store (``icml24 readme``).

A README's numbers must come from the current code through ``icml24 reproduce`` and name the environment they
ran in. Hand-written result sections drift: the code changes, the machine changes, nobody reruns. This module
renders, from a store, one block per scale: the command, commit, code fingerprint and floating-point
environment of the rows used, the verdict and the compact check table of the report, and, given a second store
run under another kernel set, whether the verdict held there (``held`` / ``fragile``, with the checks that
moved and the share of jobs that came out bit-identical). The block sits between two HTML comments, so a
rerun replaces it in place and leaves the hand-written text around it alone::

    <!-- icml24:results scale=quick -->
    ...
    <!-- /icml24:results scale=quick -->

Only rows at the current code fingerprint are used (the store drops older ones), so a block written from a
store with missing or stale rows says so instead of presenting a partial table.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path

from icml24.common.compare import PaperDiff, diff_papers
from icml24.common.experiment import deterministic_metrics
from icml24.common.registry import get_reproduction
from icml24.common.report import PaperReport, check_rows, markdown_check_table, p_text, verdict_line
from icml24.common.store import ResultStore

BEGIN = "<!-- icml24:results scale={scale} -->"
END = "<!-- /icml24:results scale={scale} -->"


@dataclass(frozen=True)
class JobAgreement:
    """How many of a paper's jobs the two stores both hold (ok) and how many of those are bit-identical in
    every metric but the timing ones."""

    both: int
    identical: int
    total: int


def job_agreement(slug: str, scale: str, seeds: int | None, a: ResultStore, b: ResultStore) -> JobAgreement:
    """Job-by-job identity of one paper's results in two stores (timing metrics left out)."""
    jobs = get_reproduction(slug).jobs(scale, seeds)
    rows_a, rows_b = a.get_many(jobs), b.get_many(jobs)
    both = identical = 0
    for ra, rb in zip(rows_a, rows_b):
        if ra is None or rb is None or ra.status != "ok" or rb.status != "ok":
            continue
        both += 1
        identical += deterministic_metrics(ra.metrics) == deterministic_metrics(rb.metrics)
    return JobAgreement(both, identical, len(jobs))


def _when(report: PaperReport) -> str:
    runs = [run for run in report.code.get("runs", []) if run.get("current")]
    stamps = [run["last_finished"] for run in runs if run.get("last_finished")]
    if not stamps:
        return "date not recorded"
    t = datetime.datetime.fromtimestamp(max(stamps), datetime.timezone.utc)
    return t.strftime("%d %b %Y, last job finished %H:%M UTC").lstrip("0")


def _commits(report: PaperReport) -> str:
    runs = [run for run in report.code.get("runs", []) if run.get("current")]
    commits = list(dict.fromkeys((run.get("git_commit") or "no git")[:7] + (" (dirty tree)" if run.get("git_dirty")
                                                                            else "") for run in runs))  # fmt: skip
    return ", ".join(commits) or "not recorded"


def _environment_text(report: PaperReport) -> str:
    envs = report.code.get("environments") or []
    if not envs:
        return "not recorded"
    return "; ".join(f"{e.get('description')}" + (f" ({e.get('n_rows')} jobs)" if len(envs) > 1 else "")
                     for e in envs)  # fmt: skip


def kernel_sentence(diff: PaperDiff, agreement: JobAgreement | None, how: str) -> str:
    """One paragraph on the second kernel set: held, fragile, or not comparable (same kernels, or a store
    without this paper)."""
    if diff.verdict_a is None or diff.verdict_b is None:
        return f"**Second kernel set** ({how}): not in the second store; not checked."
    kernels_b = "; ".join(diff.kernels_b) or "not recorded"
    if diff.same_kernels:
        return (f"**Second kernel set** ({how}): the second store ran with the same kernels ({kernels_b}), so it "
                "is a second run, not a second kernel set; not checked.")  # fmt: skip
    jobs = (f"; {agreement.identical} of {agreement.both} jobs bit-identical (timing metrics aside)"
            if agreement is not None and agreement.both else "")  # fmt: skip
    moved = [c for c in diff.checks if not c.same_verdict]
    moved_text = "; ".join(
        f"`{c.id}`{'' if c.decisive else ' (reported only)'} {str(c.verdict_a).replace('_', ' ')} → "
        f"{str(c.verdict_b).replace('_', ' ')} (p {p_text(c.p_a) or '—'} → {p_text(c.p_b) or '—'})" for c in moved
    )
    head = f"**Second kernel set** ({how}; {kernels_b}{jobs}): verdict {diff.verdict_b.replace('_', ' ')}"
    if diff.fragile:
        return (head + f". **Fragile**: the verdict moved with the kernels ({moved_text}). The kernels act like "
                "another seed here, so this verdict is not settled.")  # fmt: skip
    if any(c.decisive for c in moved):
        return head + f", the same verdict, but decisive checks moved ({moved_text}): read the verdict as fragile."
    return head + ", every decisive check unchanged: the verdict held." + (
        f" Reported-only checks that moved: {moved_text}." if moved else "")


def results_block(report: PaperReport, *, command: str, note: str = "", second: str = "") -> str:
    """The block (markers included) for one paper and scale; ``second`` is the kernel-set paragraph
    (:func:`kernel_sentence`) or empty."""
    scale = report.scale
    lines = [BEGIN.format(scale=scale), f"### Measured at the current code: {scale} scale", ""]
    fp = (report.code.get("fingerprint") or "")[:12] or "n/a"
    stale = int(report.code.get("n_stale") or 0)
    lines.append(
        f"Written by `icml24 readme` from the store of `{command}` ({_when(report)}; commit {_commits(report)}; "
        f"code fingerprint {fp}). Environment: {_environment_text(report)}."
        + (f" {note.strip()}" if note.strip() else "")
        + f" Jobs: {report.n_ok}/{report.n_jobs} ok, {report.wall_time:.0f} s of job time."
    )
    if report.n_ok < report.n_jobs or stale:
        lines += ["", f"> **Incomplete**: {report.n_jobs - report.n_ok} job(s) missing or crashed"
                      + (f", {stale} only from older code" if stale else "") + "; the verdict below is not final."]
    lines += ["", f"**{verdict_line(report)}**", ""]
    if report.state == "analysed":
        rows = check_rows(report)
        decisive = [r for r in rows if r.role != "reported only"]
        reported = [r for r in rows if r.role == "reported only"]
        if decisive:
            lines += markdown_check_table(decisive) + [""]
        if reported:  # folded away: per-setting breakdowns and diagnostics can run to dozens of rows
            lines += [f"<details><summary>{len(reported)} reported-only check(s)</summary>", ""]
            lines += markdown_check_table(reported) + ["", "</details>", ""]
    else:
        lines += [f"Not analysed: {report.analysis.summary}", ""]
    if second:
        lines += [second, ""]
    lines.append("Hand-written sections of this README that name another fingerprint describe earlier runs; where "
                 "their numbers differ from this block, this block is what the current code gives.")  # fmt: skip
    lines.append(END.format(scale=scale))
    return "\n".join(lines)


_RESULTS_HEADING = re.compile(r"^## Results\s*$", re.M)
_DEVIATIONS_HEADING = re.compile(r"^## Deviations", re.M)


def replace_block(text: str, block: str, scale: str) -> str:
    """``text`` with its block of ``scale`` replaced by ``block``; a README without one gets it after its
    ``## Results`` heading (scales in the order quick, full, gpu are kept by inserting after earlier ones), or,
    without one, in a new ``## Results`` section before ``## Deviations``."""
    begin, end = BEGIN.format(scale=scale), END.format(scale=scale)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    heading = _RESULTS_HEADING.search(text)
    if heading is None:  # a new Results section before the deviations (the README's narrative stays above)
        deviations = _DEVIATIONS_HEADING.search(text)
        if deviations is None:
            raise ValueError("the README has neither a '## Results' nor a '## Deviations' heading to put the "
                             "results block under")  # fmt: skip
        at = deviations.start()
        return text[:at] + "## Results\n\n" + block + "\n\n" + text[at:]
    at = heading.end()
    for earlier in ("smoke", "quick", "full"):  # after the blocks of smaller scales already there
        if earlier == scale:
            break
        m = re.search(re.escape(END.format(scale=earlier)), text)
        if m:
            at = max(at, m.end())
    return text[:at] + "\n\n" + block + "\n\n" + text[at:].lstrip("\n")


def update_readme(path: Path, block: str, scale: str) -> bool:
    """Write the block into the README at ``path`` atomically; whether the file changed."""
    old = path.read_text()
    new = replace_block(old, block, scale)
    if new == old:
        return False
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(new)
    tmp.replace(path)
    return True


def paper_block(slug: str, scale: str, seeds: int | None, store: ResultStore, *, command: str, note: str = "",
                second: ResultStore | None = None, second_how: str = "") -> tuple[PaperReport, str]:
    """Analyse one paper from ``store`` (and ``second``) and render its block."""
    from icml24.common.report import analyze_paper

    report = analyze_paper(slug, scale, seeds, store)
    paragraph = ""
    if second is not None:
        other = analyze_paper(slug, scale, seeds, second)
        diff = diff_papers(report, other if other.state != "not_run" else None)
        agreement = job_agreement(slug, scale, seeds, store, second)
        paragraph = kernel_sentence(diff, agreement, second_how or "second store")
    return report, results_block(report, command=command, note=note, second=paragraph)


__all__ = ["BEGIN", "END", "JobAgreement", "job_agreement", "kernel_sentence", "paper_block",
           "replace_block", "results_block", "update_readme"]
