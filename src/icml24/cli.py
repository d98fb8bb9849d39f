"""The ``icml24`` command line: ``list``, ``show``, ``reproduce`` and ``report``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from icml24 import __version__, catalogue
from icml24.common.experiment import SCALES, Job, JobResult
from icml24.common.paths import HOME_ENV, OUT_ENV, STORE_ENV, default_out, default_store

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_show_locals=False,  # a traceback must not print every local (configs, tensors, paths)
    no_args_is_help=True,
    help="Methods of ICML 2024 papers and miniature reproductions of their claims.",
)
# soft_wrap: never insert line breaks (a terminal wraps long lines itself; a pipe or log file gets one
# line per message, so a long report path stays whole).
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

BACKEND_CHOICES = ("local", "ray")
REGISTERED = "registered"
"""The status ``list`` shows for a user-registered reproduction (``ICML24_REPRODUCTIONS``)."""

ScaleOpt = Annotated[
    str,
    typer.Option("--scale", click_type=click.Choice(SCALES), help="Scale of the run (smoke: seconds, quick: "
                 "<= 2 min per paper on 2 cores, full: <= 20 min, gpu: the papers that need one)."),
]  # fmt: skip
MAX_SEEDS = 10_000
"""The most seeds per config ``--seeds`` takes (the full scale uses 10; a million jobs would exhaust memory)."""


def _check_seeds(value: int | None) -> None:
    """One error line for ``--seeds`` out of 1..MAX_SEEDS (not a MemoryError or OverflowError traceback)."""
    if value is not None and not 1 <= value <= MAX_SEEDS:
        raise _fail(f"--seeds must be between 1 and {MAX_SEEDS}, got {value}")


SeedsOpt = Annotated[
    int | None, typer.Option("--seeds", help=f"Seeds per config, 1..{MAX_SEEDS} (default: the scale's).")
]
StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help=f"SQLite results store [default: ${STORE_ENV}, else ${HOME_ENV}/runs/icml24.sqlite, "
                 "else runs/icml24.sqlite]", show_default=False),
]  # fmt: skip
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help=f"Report folder [default: ${OUT_ENV}, else ${HOME_ENV}/reports/latest, "
                 "else reports/latest]", show_default=False),
]  # fmt: skip


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


def _fail(message: str, code: int = 2) -> typer.Exit:
    """Print one error line and return the exit to raise."""
    err.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(code=code)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    head = cut.rsplit(maxsplit=1)[0] if " " in cut.strip() else cut
    return head.rstrip(" ,;:") + "…"


def _skip_line(message: str) -> None:
    err.print(f"[yellow]skipped:[/] {escape(message)}")


def _extras() -> dict:
    """The user-registered reproductions; a broken ``ICML24_REPRODUCTIONS`` is one error line."""
    from icml24.common.registry import ENV_VAR, extra_reproductions

    try:
        return extra_reproductions()
    except Exception as exc:  # noqa: BLE001 - any import failure of the user's module is one line
        raise _fail(f"{ENV_VAR}: {type(exc).__name__}: {exc}") from None


@app.command("list")
def list_papers(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list instead of a table.")] = False,
    status: Annotated[
        str | None,
        typer.Option("--status", click_type=click.Choice((*catalogue.STATUSES, REGISTERED)),
                     help="Only papers with this status."),
    ] = None,  # fmt: skip
    field: Annotated[
        str | None, typer.Option("--field", click_type=click.Choice(catalogue.FIELDS), help="Only this field.")
    ] = None,
) -> None:
    """List every paper of the catalogue (and every user-registered reproduction) with its field and status."""
    entries = [p.to_dict() for p in catalogue.papers()]
    for slug, repro in _extras().items():
        if slug not in {e["slug"] for e in entries}:
            entries.append({"slug": slug, "title": repro.claim, "field": "-", "status": REGISTERED,
                            "claim": repro.claim, "scales": list(repro.scales)})  # fmt: skip
    entries = [e for e in entries if (status is None or e["status"] == status) and (field is None or e["field"] == field)]
    if as_json:
        sys.stdout.write(json.dumps(entries, indent=2) + "\n")
        return
    if not sys.stdout.isatty():
        # One tab-separated line per paper: nothing folded, easy to grep and cut.
        for e in entries:
            sys.stdout.write(f"{e['slug']}\t{e['field']}\t{e['status']}\t{e['title']}\n")
        sys.stdout.write(f"# icml24: {len(entries)} papers\n")
        return
    table = RichTable(title=f"icml24: {len(entries)} papers", show_lines=False)
    for col in ("slug", "field", "status", "title"):
        table.add_column(col, overflow="fold")
    style = {"implemented": "green", "planned": "yellow", "position": "blue", REGISTERED: "magenta"}
    for e in entries:
        table.add_row(e["slug"], e["field"], f"[{style[e['status']]}]{e['status']}[/]", escape(e["title"]))
    console.print(table)


def _unknown(slug: str) -> typer.Exit:
    near = catalogue.closest(slug)
    hint = f" Closest: {', '.join(near)}." if near else ""
    return _fail(f"unknown paper {slug!r}.{hint} See `icml24 list`.")


@app.command()
def show(
    slug: Annotated[str, typer.Argument(help="Paper slug (see `icml24 list`).")],
    store: StoreOpt = None,
    readme: Annotated[bool, typer.Option("--readme", help="Print the paper's README.md instead.")] = False,
) -> None:
    """Citation, claim, public API, README, how to reproduce, and the last results in the store."""
    store = store or default_store()
    extras = _extras()
    if slug in extras:
        repro = extras[slug]
        if readme:
            raise _fail(f"{slug} is a user-registered reproduction: it has no README in icml24")
        console.print(f"[bold]{escape(slug)}[/] (user-registered reproduction, from ICML24_REPRODUCTIONS)")
        console.print(f"Claim: {escape(repro.claim)}")
        console.print(f"Scales: {', '.join(repro.scales)}")
        if repro.deviations:
            console.print("Deviations:\n" + "\n".join(f"  - {escape(d)}" for d in repro.deviations))
        console.print(f"Reproduce: icml24 reproduce {slug} --scale quick")
        _show_store(slug, store)
        return
    try:
        p = catalogue.get(slug)
    except KeyError:
        raise _unknown(slug) from None
    readme_path = catalogue.readme_path(slug)
    if readme:
        if readme_path is None:
            raise _fail(f"{slug} is {p.status}: it has no README yet", code=1)
        sys.stdout.write(readme_path.read_text(encoding="utf-8"))
        return
    console.print(f"[bold]{escape(p.title)}[/] ([cyan]{p.slug}[/], field {p.field}, status {p.status})")
    console.print(f"Citation: {escape(p.citation)}")
    if p.code:
        console.print(f"Official code: {p.code}")
    console.print(f"Claim: {escape(p.claim)}")
    if p.module:
        console.print(f"Module: {p.module}")
    api, why = _public_api(p)
    if api:
        console.print(f"Public API{why}:\n" + "\n".join(f"  - {a}" for a in api))
    if p.extras:
        missing = p.missing_extras
        state = " (installed)" if not missing else (
            f" (not installed: {', '.join(missing)})" if len(p.extras) > 1 else " (not installed)"
        )
        console.print(f"Extras: {', '.join(p.extras)}{state}: {escape(p.install_hint)}")
    elif p.runnable:
        console.print("Extras: none (the core install runs it)")
    if readme_path is not None:
        console.print(f"README: {readme_path}   (print it: icml24 show {p.slug} --readme)")
    if p.status == "implemented":
        console.print(f"Reproduce: icml24 reproduce {p.slug} --scale quick   (or --scale full)")
    elif p.is_demonstration:
        console.print(
            f"Demonstration (illustrates the position paper's argument; not a reproduction): "
            f"icml24 reproduce {p.slug} --scale quick   (or --scale full)"
        )
    else:
        console.print(f"No reproduction yet ({p.status}).")
    _show_store(slug, store)


def _public_api(p: catalogue.Paper) -> tuple[list[str], str]:
    """The names the paper's module exports (``__all__``, what the README examples import), and a note when
    the module cannot be imported here (then the catalogue's list)."""
    if not p.module:
        return list(p.api), ""
    import importlib

    try:
        module = importlib.import_module(p.module)
    except ImportError as exc:
        what = exc.name if isinstance(exc, ModuleNotFoundError) and exc.name else f"{type(exc).__name__}: {exc}"
        return list(p.api), f" (from the catalogue: {p.module} does not import here, it needs {escape(what)})"
    names = getattr(module, "__all__", None)
    if not names:
        return list(p.api), ""
    return [f"{p.module}.{n}" for n in names], ""


def _show_store(slug: str, store: Path) -> None:
    if not store.exists():
        console.print(f"No results store at {store} yet.")
        return
    from icml24.common.store import ResultStore, StoreError

    try:
        s = ResultStore(store, readonly=True)
        verdicts = s.analyses(slug)
        rows = s.summary(slug)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    if verdicts:
        console.print(f"Last verdicts (in {store}):")
        for v in verdicts[:3]:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(v["created_at"]))
            console.print(
                f"  [{when}] scale={v['scale']} version={v['version']}: [bold]{v['verdict']}[/] "
                f"({v['n_ok']} ok, {v['n_error']} crashed, {v['n_missing']} missing)\n    {escape(_clip(v['summary'], 600))}"
            )
    if rows:
        console.print("Stored jobs:")
        for r in rows:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last"]))
            console.print(f"  {r['experiment']} v{r['version']}: {r['count']} {r['status']} (last {when})")
    if rows:
        _show_code(slug, s)
    if not rows and not verdicts:
        console.print(f"No results in {store} yet.")


def _show_code(slug: str, store) -> None:
    """Per scale with stored rows: the code fingerprint and commit(s) they ran at, flagging a dirty tree
    and rows of older code (the report says the same)."""
    from icml24.common.environment import describe as describe_environment
    from icml24.common.registry import get_reproduction
    from icml24.common.store import StoreError

    try:
        repro = get_reproduction(slug)
    except (LookupError, catalogue.MissingExtra):
        return
    printed = False
    for scale in repro.scales:
        try:
            prov = store.provenance(repro.jobs(scale))
        except StoreError as exc:
            raise _fail(str(exc)) from None
        if not prov.runs:
            continue
        if not printed:
            console.print("Code of the stored results:")
            printed = True
        commits = ", ".join(dict.fromkeys(r.git_commit or "no git" for r in prov.current_runs)) or "none"
        flags = []
        if prov.dirty:
            flags.append("ran on a tree with uncommitted changes")
        if prov.n_stale:
            flags.append(f"{prov.n_stale} job(s) only from older code, not used: rerun them")
        flag = f"  [yellow]warning: {escape('; '.join(flags))}[/]" if flags else ""
        console.print(
            f"  {scale}: {prov.n_current} job(s) at the current fingerprint {prov.fingerprint[:12]}, "
            f"commit {commits}{flag}"
        )
        for env in prov.environments:
            mark = "this machine's environment" if env.is_readers else "[yellow]another environment than this one's[/]"
            console.print(f"    {env.n_rows} job(s) in {escape(describe_environment(env.environment))} ({mark})")


def _progress_bar(out: Console, total: int, bar_width: int):
    """The rich progress bar: ``reproduce [bar] k/N elapsed ETA remaining label``. Every column but the job
    label keeps its width (the label is cut to what is left, :meth:`_Progress.label`), so ``k/N``, elapsed
    and ETA stay visible on a narrow terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )  # fmt: skip
    from rich.table import Column

    def fixed() -> Column:
        return Column(no_wrap=True)

    return Progress(
        TextColumn("[bold]reproduce", table_column=fixed()),
        BarColumn(bar_width=bar_width, table_column=fixed()),
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=2 * len(str(total)) + 1)),
        TimeElapsedColumn(table_column=fixed()), TextColumn("ETA", table_column=fixed()),
        TimeRemainingColumn(table_column=fixed()),
        TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis")),
        console=out,
    )  # fmt: skip


class _Progress:
    """A rich progress bar on a terminal, plain log lines otherwise."""

    def __init__(self, total: int, done: int, *, out: Console | None = None, tty: bool | None = None) -> None:
        self.total, self.done = total, done
        self.tty = (sys.stdout.isatty() and not os.environ.get("CI")) if tty is None else tty
        self.start = time.time()
        self.bar = None
        if self.tty:
            out = out or console
            self.bar_width = 10 if out.width < 100 else 20  # a narrow terminal keeps more room for the label
            self.bar = _progress_bar(out, total, self.bar_width)
            self.task = self.bar.add_task("", total=total, completed=done)
            self.bar.start()

    def label(self, text: str) -> str:
        """``text`` cut (with an ellipsis) to the width the fixed columns leave on the console's line."""
        assert self.bar is not None
        n = len(str(self.total))
        # reproduce, bar, k/N, elapsed, "ETA", remaining, and one space between each of the seven columns
        fixed = len("reproduce") + self.bar_width + 2 * n + 1 + 7 + 3 + 7 + 6
        room = self.bar.console.width - fixed - 1
        if room < 8:
            return ""
        return escape(text if len(text) <= room else text[: room - 1] + "…")

    def status(self, message: str, detail: str = "") -> None:
        """What the command does after the last job (analysing, writing the report), so it is never silent:
        on the bar ``message`` and ``detail``; in a log one line per new ``message``."""
        if self.bar is not None:
            self.bar.update(self.task, description=self.label(f"{message} {detail}".strip()))
            self.bar.refresh()
        elif message != getattr(self, "_said", None):
            self._said = message
            print(f"{message}...", flush=True)

    def __call__(self, event: str, job: Job, result: JobResult | None) -> None:
        from icml24.common.report import error_last_line

        if event == "skip":  # another process sharing the store finished it
            self.done += 1
            if self.bar is not None:
                self.bar.update(self.task, advance=1)
            else:
                print(f"[{self.done}/{self.total}] done by another process: {job.label}", flush=True)
            return
        if event == "start":
            if self.bar is not None:
                self.bar.update(self.task, description=self.label(job.label))
            return
        self.done += 1
        assert result is not None
        mark = "ok" if result.status == "ok" else "FAILED"
        why = f": {error_last_line(result.error)}" if result.status != "ok" else ""
        if self.bar is not None:
            self.bar.update(self.task, advance=1)
            if result.status != "ok":
                self.bar.console.print(f"[red]job failed:[/] {escape(job.label)}{escape(why)}")
        else:
            print(
                f"[{self.done}/{self.total}] {mark} {job.label} ({result.wall_time:.1f}s, "
                f"elapsed {time.time() - self.start:.0f}s){why}",
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _resolve(
    slugs: list[str], scale: str | None, *, include_demonstrations: bool = False, among: set[str] | None = None
) -> list[str]:
    """The papers to run or report at ``scale``: exits 2 with one line for an unknown slug, for a named
    paper that lacks the scale, or when nothing is left (only planned papers named, say). With no slugs:
    the implemented papers (and the position papers' demonstrations with ``include_demonstrations``), only
    those in ``among`` when given. A paper whose extra is not installed is skipped with one line naming the
    ``pip install``; the catalogue says what each needs, so no ``reproduce.py`` is imported here.
    ``scale=None`` checks no scale."""
    from icml24.common.registry import resolve_slugs

    extras = _extras()  # a broken ICML24_REPRODUCTIONS is one error line
    res = resolve_slugs(slugs, include_demonstrations=include_demonstrations)
    if res.unknown:
        for name, near in res.unknown:
            hint = f" Closest: {', '.join(near)}." if near else ""
            err.print(f"[red]error:[/] unknown paper {escape(repr(name))}.{escape(hint)} See `icml24 list`.")
        raise typer.Exit(code=2)
    for name, status in res.not_implemented:
        err.print(f"[yellow]skipped:[/] {name} is {status}: it has no reproduction yet.")
    wanted = [s for s in res.runnable if slugs or among is None or s in among]
    candidates = []
    for s in wanted:
        missing = () if s in extras else catalogue.get(s).missing_extras
        if missing:
            _skip_line(f"{s} needs the {', '.join(missing)} extra: pip install 'icml24[{','.join(missing)}]'")
        else:
            candidates.append(s)
    lacking = {s: _scales_of(s, extras) for s in candidates}
    lacking = {s: sc for s, sc in lacking.items() if scale is not None and scale not in sc}
    if slugs and lacking:
        raise _fail(
            f"no {scale!r} scale for "
            + "; ".join(f"{s} (it has {', '.join(sc)})" for s, sc in lacking.items())
        )
    runnable = [s for s in candidates if s not in lacking]
    if not runnable:
        if len(candidates) < len(wanted):
            what = "every paper left needs an extra that is not installed"
        elif slugs:
            what = "the papers named have no reproduction yet"
        elif among is not None:
            what = "the store holds no paper this install can run"
        else:
            what = f"no paper has a {scale!r} scale"
        raise _fail(f"nothing to {'report' if among is not None else 'run'}: {what}", code=1 if among is not None else 2)
    return runnable


def _scales_of(slug: str, extras: dict) -> tuple[str, ...]:
    """A paper's scales, from the catalogue (or the user-registered reproduction)."""
    return tuple(extras[slug].scales) if slug in extras else catalogue.get(slug).scales


def _load(slugs: list[str]) -> dict:
    """The reproductions of ``slugs`` by slug; one whose import needs a missing extra is skipped with one line."""
    from icml24.common.registry import get_reproduction

    out = {}
    for slug in slugs:
        try:
            out[slug] = get_reproduction(slug)
        except catalogue.MissingExtra as exc:
            _skip_line(str(exc))
    return out


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device (torch is imported here only for ``--scale gpu``)."""
    import torch

    return bool(torch.cuda.is_available())


def _verdict_line(r) -> str:
    from icml24.common.report import decided_by_text

    deciding = decided_by_text(r)
    by = f", decided by {deciding}" if deciding else ""
    return f"  {r.slug}: [bold]{r.verdict_text}[/]{escape(by)} ({r.n_ok}/{r.n_jobs} jobs ok)"


def _write_report(reports: list, out: Path) -> Path:
    from icml24.common.report import ReportWriteError, write_report

    try:
        return write_report(reports, out)
    except ReportWriteError as exc:
        raise _fail(str(exc), code=1) from None
    except OSError as exc:
        where = exc.filename or out
        raise _fail(
            f"cannot write the report to {out} ({exc.strerror or exc} at {where}): pass --out to a writable folder"
        ) from None


@app.command()
def reproduce(
    slugs: Annotated[
        list[str] | None,
        typer.Argument(help="Papers to run (default: all implemented; a position paper's demonstration runs when named)."),
    ] = None,
    scale: ScaleOpt = "quick",
    seeds: SeedsOpt = None,
    backend: Annotated[
        str, typer.Option("--backend", click_type=click.Choice(BACKEND_CHOICES),
                          help="local: a process pool on this machine; ray: Ray tasks.")
    ] = "local",  # fmt: skip
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Parallel jobs (default: cores).")] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster address (default: start a local Ray).")
    ] = None,
    store: StoreOpt = None,
    out: OutOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rerun jobs already in the store; run --scale gpu without a CUDA device.")
    ] = False,
) -> None:
    """Run the reproductions (all implemented papers, or those named), resuming from the store, and
    write the report (index.html, report.md, results.json, figures/)."""
    from icml24.common.report import analyze_paper
    from icml24.common.runner import RunnerError, RunTerminated, pending_jobs, run_jobs
    from icml24.common.store import ResultStore, StoreError

    _check_seeds(seeds)
    store = store or default_store()
    out = out or default_out()
    repros = _load(_resolve(list(slugs or []), scale))
    if not repros:
        raise _fail("nothing to run: every paper left needs an extra that is not installed")
    if scale == "gpu" and not force and not _cuda_available():
        raise _fail("--scale gpu needs a CUDA device and none is visible: run --scale full, or pass --force")
    runnable = list(repros)
    jobs: list[Job] = []
    for slug in runnable:
        jobs += repros[slug].jobs(scale, seeds)
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
    try:
        reports = []
        for i, slug in enumerate(runnable, 1):
            progress.status(f"analysing {len(runnable)} paper(s)", f"({i}/{len(runnable)}: {slug})")
            reports.append(analyze_paper(slug, scale, seeds, rs))
        progress.status("writing the report", f"to {out}")
        html_path = _write_report(reports, out)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    finally:
        progress.close()
    for r in reports:
        console.print(_verdict_line(r))
    console.print(
        f"Ran {stats.ran} job(s) in {stats.wall_time:.1f}s ({stats.skipped} from the store, "
        f"{len(stats.failed)} crashed)."
    )
    console.print(f"Report: {html_path.resolve()} (and report.md, results.json, figures/ beside it)")
    if stats.code_changed:
        err.print(f"[yellow]{len(stats.code_changed)} job(s) finished after their code changed on disk[/] (an edit "
                  "during the run): not stored, since either version may have run; run `icml24 reproduce` again to "
                  "rerun them: " + escape(", ".join(j.label for j in stats.code_changed[:5]))
                  + (" ..." if len(stats.code_changed) > 5 else ""))  # fmt: skip
    if stats.failed:
        err.print(f"[red]{len(stats.failed)} job(s) crashed[/]; their tracebacks are in the report and the store.")
        raise typer.Exit(code=1)


REPORT_SCALE_ORDER = ("gpu", "full", "quick", "smoke")
"""The scales, largest first (``report`` without ``--scale`` prefers the larger of two equally complete)."""


def _coverage(repro, scale: str, seeds: int | None, store) -> float:
    """The share of ``repro``'s jobs at ``scale`` that the store holds (ok or crashed)."""
    jobs = repro.jobs(scale, seeds)
    return sum(r is not None for r in store.get_many(jobs)) / len(jobs) if jobs else 0.0


@app.command()
def report(
    slugs: Annotated[
        list[str] | None, typer.Argument(help="Papers (default: every paper with jobs in the store).")
    ] = None,
    scale: Annotated[
        str | None,
        typer.Option("--scale", click_type=click.Choice(SCALES),
                     help="Report this scale [default: per paper, its most complete scale in the store, the larger on a tie]."),
    ] = None,  # fmt: skip
    seeds: SeedsOpt = None,
    store: StoreOpt = None,
    out: OutOpt = None,
) -> None:
    """Rebuild the report from the store without running anything."""
    from icml24.common.report import analyze_paper
    from icml24.common.store import ResultStore, StoreError, is_corrupt

    _check_seeds(seeds)
    store = store or default_store()
    out = out or default_out()
    if not store.exists():
        raise _fail(f"no results store at {store} (run `icml24 reproduce` first, or pass --store or set {STORE_ENV})")
    try:
        rs = ResultStore(store, readonly=True)  # report only reads: it works on a read-only store
        # Without names, only the papers with stored rows are looked at: a paper the store does not hold is
        # never imported, so its missing extra costs nothing.
        among = None if slugs else set(rs.slugs())
        repros = _load(_resolve(list(slugs or []), scale, include_demonstrations=True, among=among))
        names = list(repros)
        # Per paper and scale: the share of that scale's jobs in the store. Scales share jobs (a smoke job
        # is also one of full's), so "has a job" is not enough: each paper is reported at its most complete
        # scale, the largest on a tie.
        coverage = {s: {sc: _coverage(repros[s], sc, seeds, rs) for sc in REPORT_SCALE_ORDER
                        if sc in repros[s].scales} for s in names}  # fmt: skip
        best = {s: max(cov, key=lambda sc, cov=cov: (cov[sc], -REPORT_SCALE_ORDER.index(sc)))
                for s, cov in coverage.items() if any(cov.values())}  # fmt: skip
        chosen: dict[str, str] = {}
        for s in names:
            if scale is not None:
                if coverage[s].get(scale, 0) > 0 or slugs:
                    chosen[s] = scale
            elif s in best:
                chosen[s] = best[s]
            elif slugs:  # a named paper is reported even with no stored jobs (the report says they are missing)
                chosen[s] = "quick" if "quick" in repros[s].scales else repros[s].scales[0]
        chosen = {s: chosen[s] for s in names if s in chosen}
        if not chosen:
            held = [sc for sc in REPORT_SCALE_ORDER if sc in best.values()]
            holds = ", ".join(f"{sc} ({sum(b == sc for b in best.values())} paper(s))" for sc in held)
            if holds:
                raise _fail(f"no jobs of scale {scale!r} in {store}; it holds {holds}: pass that --scale", code=1)
            raise _fail(f"no jobs in {store} for this version of icml24: nothing to report", code=1)
        counts = {sc: sum(v == sc for v in chosen.values()) for sc in dict.fromkeys(chosen.values())}
        console.print(
            f"Reporting {len(chosen)} paper(s) from {store}: "
            + ", ".join(f"{n} at scale {sc!r}" for sc, n in counts.items()) + "."
        )  # fmt: skip
        reports = [analyze_paper(slug, sc, seeds, rs) for slug, sc in chosen.items()]
    except StoreError as exc:
        raise _fail(str(exc)) from None
    html_path = _write_report(reports, out)
    for r in reports:
        console.print(_verdict_line(r))
    console.print(f"Report: {html_path.resolve()}")
    corrupt = sum(is_corrupt(e) for r in reports for e in r.errors)
    if corrupt:
        raise _fail(
            f"{corrupt} stored row(s) failed their checksum and were not used (see the report); rerun "
            "`icml24 reproduce` with the same options to recompute them",
            code=1,
        )


@app.command()
def compare(
    store_a: Annotated[Path, typer.Argument(help="The first results store (e.g. the default kernels).")],
    store_b: Annotated[Path, typer.Argument(help="The second (e.g. a rerun under ATEN_CPU_CAPABILITY=avx2).")],
    slugs: Annotated[list[str] | None, typer.Argument(help="Papers (default: every paper either store holds).")] = None,
    scale: ScaleOpt = "quick",
    seeds: SeedsOpt = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the comparison as JSON here.")] = None,
) -> None:
    """Compare two stores verdict by verdict and check by check; a verdict that differs is fragile.

    To rerun a paper under another floating-point kernel set: `ATEN_CPU_CAPABILITY=avx2 icml24 reproduce SLUG
    --store other.sqlite` (the variable reaches the worker processes; each job records the capability it ran
    with), then `icml24 compare runs/icml24.sqlite other.sqlite SLUG`.
    """
    import json

    from icml24.common.compare import diff_papers
    from icml24.common.report import analyze_paper, slugs_with_jobs
    from icml24.common.store import ResultStore, StoreError

    for path in (store_a, store_b):
        if not path.exists():
            raise _fail(f"no results store at {path}")
    names = _resolve(list(slugs or []), scale, include_demonstrations=True)
    try:
        stores = [ResultStore(store_a, readonly=True), ResultStore(store_b, readonly=True)]
        # Named papers are analysed in both stores; otherwise those with jobs of this scale in either.
        held = [set(names) if slugs else set(slugs_with_jobs(names, scale, seeds, rs)) for rs in stores]
        names = [n for n in names if n in held[0] | held[1]]
        if not names:
            raise _fail(f"neither store holds jobs of scale {scale!r}: nothing to compare", code=1)
        diffs = []
        for slug in names:
            a, b = (analyze_paper(slug, scale, seeds, rs) if slug in h else None for rs, h in zip(stores, held))
            diffs.append(diff_papers(a, b))
    except StoreError as exc:
        raise _fail(str(exc)) from None
    from rich.table import Table as RichTable

    table = RichTable("paper", "verdict A", "verdict B", "decisive checks differing", "")
    for d in diffs:
        flips = [c.id for c in d.checks if c.decisive and not c.same_verdict]
        mark = "[red]fragile[/]" if d.fragile else ("same" if d.verdict_a and d.verdict_b else "only one store")
        table.add_row(d.slug, d.verdict_a or "-", d.verdict_b or "-", escape(", ".join(flips)) or "-", mark)
    console.print(table)
    for label, d_envs in (("A", {e for d in diffs for e in d.environments_a}),
                          ("B", {e for d in diffs for e in d.environments_b})):  # fmt: skip
        console.print(f"Store {label} environments: {escape('; '.join(sorted(d_envs)) or 'not recorded')}")
    fragile = [d.slug for d in diffs if d.fragile]
    console.print(f"{len(fragile)} of {len(diffs)} paper(s) fragile{': ' + ', '.join(fragile) if fragile else ''}.")
    same = [d.slug for d in diffs if d.same_kernels]
    if same:
        kernels = "; ".join(sorted({k for d in diffs if d.same_kernels for k in d.kernels_a}))
        console.print(f"[yellow]Warning:[/] {len(same)} paper(s) ran with the same kernels in both stores ({escape(kernels)}): "
                      "for them this compares two runs, not two kernel sets (a capability the CPU lacks falls back "
                      "to the one it has; ATEN_CPU_CAPABILITY=default is the non-vectorised set): "
                      + escape(", ".join(same)))  # fmt: skip
    if json_out is not None:
        json_out.write_text(json.dumps({"scale": scale, "store_a": str(store_a), "store_b": str(store_b),
                                        "papers": [d.to_dict() for d in diffs]}, indent=1, default=str))  # fmt: skip


@app.command()
def readme(
    slugs: Annotated[list[str] | None, typer.Argument(help="Papers (default: every catalogue paper the store holds).")] = None,
    scale: ScaleOpt = "quick",
    seeds: SeedsOpt = None,
    store: StoreOpt = None,
    second: Annotated[Path | None, typer.Option("--second", help="A store of the same runs under another kernel set "
                                                "(e.g. ATEN_CPU_CAPABILITY=default): says whether each verdict held.")] = None,
    second_how: Annotated[str, typer.Option("--second-how", help="How the second store was run, in words.")] = "",
    command: Annotated[str, typer.Option("--command", help="The reproduce command that filled the store.")] = "",
    note: Annotated[str, typer.Option("--note", help="A sentence added to the block (the machine's load, say).")] = "",
    write: Annotated[bool, typer.Option("--write", help="Write the blocks into the READMEs (else print them).")] = False,
) -> None:
    """Write each paper's measured-results block (verdict, check table, commit, fingerprint, environment, and
    the second kernel set) into its README from the store, between `<!-- icml24:results scale=... -->` markers."""
    from icml24.common.readme_results import paper_block, update_readme
    from icml24.common.report import slugs_with_jobs
    from icml24.common.store import ResultStore, StoreError

    _check_seeds(seeds)
    store = store or default_store()
    for path in (store, second):
        if path is not None and not path.exists():
            raise _fail(f"no results store at {path}")
    try:
        rs = ResultStore(store, readonly=True)
        rs_b = ResultStore(second, readonly=True) if second is not None else None
        names = _resolve(list(slugs or []), scale, among=None if slugs else set(rs.slugs()))
        names = names if slugs else slugs_with_jobs(names, scale, seeds, rs)
        for slug in names:
            if catalogue.readme_path(slug) is None:
                _skip_line(f"{slug}: no README in the catalogue; skipped")
                continue
            how = command or f"icml24 reproduce --scale {scale}"
            report, block = paper_block(slug, scale, seeds, rs, command=how, note=note, second=rs_b,
                                        second_how=second_how)  # fmt: skip
            if not write:
                sys.stdout.write(block + "\n\n")
                continue
            if report.state == "not_run":
                _skip_line(f"{slug}: no finished job of scale {scale!r} in the store; README left as it is")
                continue
            changed = update_readme(catalogue.readme_path(slug), block, scale)
            console.print(f"{slug}: {report.verdict_text}; README {'updated' if changed else 'unchanged'}")
    except (StoreError, ValueError) as exc:
        raise _fail(str(exc)) from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
