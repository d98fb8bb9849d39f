"""The ``icml24`` command line: ``list``, ``show``, ``reproduce`` and ``report``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from icml24 import __version__, catalogue
from icml24.common.experiment import SCALES, Job, JobResult
from icml24.common.store import DEFAULT_STORE

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Methods of ICML 2024 papers and miniature reproductions of their claims.",
)
console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

DEFAULT_OUT = Path("reports") / "latest"

ScaleOpt = Annotated[str, typer.Option("--scale", help=f"One of {', '.join(SCALES)}.")]
SeedsOpt = Annotated[int | None, typer.Option("--seeds", min=1, help="Seeds per config (default: the scale's).")]
StoreOpt = Annotated[Path, typer.Option("--store", help="SQLite results store.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Report folder.")]


def _version(value: bool) -> None:
    if value:
        console.print(f"icml24 {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    pass


@app.command("list")
def list_papers(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list instead of a table.")] = False,
) -> None:
    """List every paper of the catalogue with its field and status."""
    papers = catalogue.papers()
    if as_json:
        sys.stdout.write(json.dumps([p.to_dict() for p in papers], indent=2) + "\n")
        return
    table = RichTable(title=f"icml24: {len(papers)} papers", show_lines=False)
    for col in ("slug", "field", "status", "title"):
        table.add_column(col, overflow="fold")
    style = {"implemented": "green", "planned": "yellow", "position": "blue"}
    for p in papers:
        table.add_row(p.slug, p.field, f"[{style[p.status]}]{p.status}[/]", p.title)
    console.print(table)


def _unknown(slug: str) -> typer.Exit:
    near = catalogue.closest(slug)
    hint = f" Closest: {', '.join(near)}." if near else ""
    err.print(f"[red]error:[/] unknown paper {slug!r}.{hint} See `icml24 list`.")
    return typer.Exit(code=2)


@app.command()
def show(
    slug: Annotated[str, typer.Argument(help="Paper slug (see `icml24 list`).")],
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Citation, claim, public API, how to reproduce, and the last results in the store."""
    try:
        p = catalogue.get(slug)
    except KeyError:
        raise _unknown(slug) from None
    console.print(f"[bold]{p.title}[/] ([cyan]{p.slug}[/], field {p.field}, status {p.status})")
    console.print(f"Citation: {p.citation}")
    if p.code:
        console.print(f"Official code: {p.code}")
    console.print(f"Claim: {p.claim}")
    if p.module:
        console.print(f"Module: {p.module}")
    if p.api:
        console.print("Public API:\n" + "\n".join(f"  - {a}" for a in p.api))
    if p.status == "implemented":
        console.print(f"Reproduce: icml24 reproduce {p.slug} --scale quick   (or --scale full)")
    else:
        console.print(f"No reproduction yet ({p.status}).")
    if store.exists():
        from icml24.common.store import ResultStore, StoreError

        try:
            s = ResultStore(store, readonly=True)
            verdicts = s.analyses(slug)
            rows = s.summary(slug)
        except StoreError as exc:
            raise _fail(str(exc)) from None
        if verdicts:
            console.print("Last verdicts:")
            for v in verdicts[:3]:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(v["created_at"]))
                console.print(
                    f"  [{when}] scale={v['scale']} version={v['version']}: [bold]{v['verdict']}[/] "
                    f"({v['n_ok']} ok, {v['n_error']} crashed, {v['n_missing']} missing)\n    {v['summary'][:600]}"
                )
        if rows:
            console.print("Stored jobs:")
            for r in rows:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last"]))
                console.print(
                    f"  {r['experiment']} v{r['version']}: {r['count']} {r['status']} (last {when})"
                )
        if not rows and not verdicts:
            console.print(f"No results in {store} yet.")
    else:
        console.print(f"No results store at {store} yet.")


class _Progress:
    """A rich progress bar on a terminal, plain log lines otherwise."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done = total, done
        self.tty = sys.stdout.isatty() and not os.environ.get("CI")
        self.start = time.time()
        self.bar = None
        if self.tty:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )  # fmt: skip

            self.bar = Progress(
                TextColumn("[bold]reproduce"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"), console=console,
            )  # fmt: skip
            self.task = self.bar.add_task("", total=total, completed=done)
            self.bar.start()

    def __call__(self, event: str, job: Job, result: JobResult | None) -> None:
        if event == "skip":  # another process sharing the store finished it
            self.done += 1
            if self.bar is not None:
                self.bar.update(self.task, advance=1)
            else:
                print(f"[{self.done}/{self.total}] done by another process: {job.label}", flush=True)
            return
        if event == "start":
            if self.bar is not None:
                self.bar.update(self.task, description=escape(job.label))
            return
        self.done += 1
        assert result is not None
        mark = "ok" if result.status == "ok" else "FAILED"
        if self.bar is not None:
            self.bar.update(self.task, advance=1)
            if result.status != "ok":
                self.bar.console.print(f"[red]job failed:[/] {escape(job.label)}")
        else:
            print(
                f"[{self.done}/{self.total}] {mark} {job.label} ({result.wall_time:.1f}s, "
                f"elapsed {time.time() - self.start:.0f}s)",
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _fail(message: str, code: int = 2) -> typer.Exit:
    """Print one error line (never wrapped) and return the exit to raise."""
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code=code)


def _write_report(reports: list, out: Path) -> Path:
    from icml24.common.report import write_report

    try:
        return write_report(reports, out)
    except OSError as exc:
        where = exc.filename or out
        raise _fail(
            f"cannot write the report to {out} ({exc.strerror or exc} at {where}): pass --out to a writable folder"
        ) from None


def _check_scale(scale: str) -> None:
    if scale not in SCALES:
        err.print(f"[red]error:[/] --scale must be one of {', '.join(SCALES)}, got {scale!r}")
        raise typer.Exit(code=2)


def _resolve(slugs: list[str]) -> list[str]:
    from icml24.common.registry import resolve_slugs

    res = resolve_slugs(slugs)
    if res.unknown:
        for name, near in res.unknown:
            hint = f" Closest: {', '.join(near)}." if near else ""
            err.print(f"[red]error:[/] unknown paper {name!r}.{hint} See `icml24 list`.")
        raise typer.Exit(code=2)
    for name, status in res.not_implemented:
        err.print(f"[yellow]skipped:[/] {name} is {status}: it has no reproduction yet.")
    return res.runnable


@app.command()
def reproduce(
    slugs: Annotated[list[str] | None, typer.Argument(help="Papers to run (default: all implemented).")] = None,
    scale: ScaleOpt = "quick",
    seeds: SeedsOpt = None,
    backend: Annotated[str, typer.Option("--backend", help="local (process pool) or ray.")] = "local",
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Parallel jobs (default: cores).")] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster address (default: start a local Ray).")
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
    out: OutOpt = DEFAULT_OUT,
    force: Annotated[bool, typer.Option("--force", help="Rerun jobs already in the store.")] = False,
) -> None:
    """Run the reproductions (all implemented papers, or those named), resuming from the store, and
    write the report (index.html, report.md, results.json)."""
    from icml24.common.registry import get_reproduction
    from icml24.common.report import analyze_paper
    from icml24.common.runner import BACKENDS, RunnerError, RunTerminated, pending_jobs, run_jobs
    from icml24.common.store import ResultStore, StoreError

    _check_scale(scale)
    if backend not in BACKENDS:
        err.print(f"[red]error:[/] --backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        raise typer.Exit(code=2)
    names = _resolve(list(slugs or []))
    runnable: list[str] = []
    jobs: list[Job] = []
    for slug in names:
        repro = get_reproduction(slug)
        if scale not in repro.scales:
            err.print(f"[yellow]skipped:[/] {slug} has no {scale!r} scale (it has {', '.join(repro.scales)}).")
            continue
        runnable.append(slug)
        jobs += repro.jobs(scale, seeds)
    if not runnable:
        err.print("nothing to run.")
        raise typer.Exit(code=0)
    try:
        rs = ResultStore(store)
        todo = len(pending_jobs(jobs, rs, force))
    except StoreError as exc:
        raise _fail(str(exc)) from None
    console.print(
        f"{len(runnable)} paper(s), {len(jobs)} job(s) at scale {scale!r}: {len(jobs) - todo} already in "
        f"{store}, {todo} to run on backend {backend!r}."
    )
    progress = _Progress(len(jobs), len(jobs) - todo)
    try:
        stats = run_jobs(
            jobs, rs, backend=backend, workers=workers, ray_address=ray_address, force=force,
            scale=scale, progress=progress,
        )  # fmt: skip
    except KeyboardInterrupt:
        progress.close()
        err.print("[yellow]interrupted:[/] finished jobs are in the store; rerun the same command to resume.")
        raise typer.Exit(code=130) from None
    except RunTerminated as exc:
        progress.close()
        err.print(f"[yellow]{exc}:[/] finished jobs are in the store; rerun the same command to resume.")
        raise typer.Exit(code=128 + exc.signum) from None
    except (StoreError, RunnerError) as exc:
        progress.close()
        raise _fail(str(exc)) from None
    progress.close()
    try:
        reports = [analyze_paper(slug, scale, seeds, rs) for slug in runnable]
    except StoreError as exc:
        raise _fail(str(exc)) from None
    html_path = _write_report(reports, out)
    for r in reports:
        console.print(f"  {r.slug}: [bold]{r.analysis.verdict}[/] ({r.n_ok}/{r.n_jobs} jobs ok)")
    console.print(
        f"Ran {stats.ran} job(s) in {stats.wall_time:.1f}s ({stats.skipped} from the store, "
        f"{len(stats.failed)} crashed)."
    )
    console.print(f"Report: {html_path.resolve()} (and report.md, results.json beside it)")
    if stats.failed:
        err.print(f"[red]{len(stats.failed)} job(s) crashed[/]; their tracebacks are in the report and the store.")
        raise typer.Exit(code=1)


@app.command()
def report(
    slugs: Annotated[list[str] | None, typer.Argument(help="Papers (default: all implemented).")] = None,
    scale: ScaleOpt = "quick",
    seeds: SeedsOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Rebuild the report from the store without running anything."""
    from icml24.common.registry import get_reproduction
    from icml24.common.report import analyze_paper
    from icml24.common.store import ResultStore, StoreError, is_corrupt

    _check_scale(scale)
    if not store.exists():
        err.print(f"[red]error:[/] no results store at {store}")
        raise typer.Exit(code=2)
    names = [s for s in _resolve(list(slugs or [])) if scale in get_reproduction(s).scales]
    try:
        rs = ResultStore(store, readonly=True)  # report only reads: it works on a read-only store
        reports = [analyze_paper(slug, scale, seeds, rs) for slug in names]
    except StoreError as exc:
        raise _fail(str(exc)) from None
    html_path = _write_report(reports, out)
    for r in reports:
        console.print(f"  {r.slug}: [bold]{r.analysis.verdict}[/] ({r.n_ok}/{r.n_jobs} jobs in the store)")
    console.print(f"Report: {html_path.resolve()}")
    corrupt = sum(is_corrupt(e) for r in reports for e in r.errors)
    if corrupt:
        raise _fail(
            f"{corrupt} stored row(s) failed their checksum and were not used (see the report); rerun "
            "`icml24 reproduce` with the same options to recompute them",
            code=1,
        )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
