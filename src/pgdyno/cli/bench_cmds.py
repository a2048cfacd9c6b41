"""`pgdyno bench`, `pgdyno report` and `pgdyno runs`: the command line of the run loop and
of the results index.

`bench` takes the common option table and every workload's own (pgdyno.runner.options),
builds BenchOptions, calls run_bench (or run_sweep) and prints where the report is; `report`
rebuilds a run's, a context's or a study's report; `runs` lists, shows, exports, reindexes
or pushes the runs of the index. A Ctrl-C in a rebuild, a reindex or a push is one line
saying what was left.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from pgdyno.cli import signals
from pgdyno.errors import PgdynoError, RunInterrupted, UsageError
from pgdyno.results.index import RunRow, run_manifests
from pgdyno.results.names import check_dir_name
from pgdyno.results.rundir import STATUSES
from pgdyno.results.store import RunStore
from pgdyno.workloads.checks import check_choice

# What a command uses (rich, the runner, the reports, psycopg...) is imported inside it:
# every start builds every command, and start-up stays fast (tests/test_startup.py).


def register(app: typer.Typer) -> None:
    app.command("bench", help=_bench_help())(_bench_command())
    app.command("report")(report)
    app.command("runs")(runs)
    app.command("driver-bin", hidden=True)(driver_bin)


def driver_bin(
    directory: Path = typer.Argument(..., help="the iteration's directory on this driver"),
    origin: float = typer.Option(..., help="the epoch pgbench was launched at here"),
    lag: bool = typer.Option(False, help="the logs have a schedule-lag column (--rate)"),
    retries: bool = typer.Option(False, help="the logs have a retries column"),
    latency_limit: float | None = typer.Option(None, help="--latency-limit of the run, ms"),
    expect_version: str | None = typer.Option(None, help="refuse unless pgdyno is this "
                                              "version (the files are read by that one)"),
) -> None:
    """On a driver host of --drivers: bin pgbench's logs in DIRECTORY into its per-second
    files (seconds.csv, latency.hlog), and print how many transactions they held."""
    from pgdyno import __version__
    from pgdyno.analysis.per_second import LogLayout
    from pgdyno.workloads.engine.drivers import bin_driver_logs

    if expect_version is not None and expect_version != __version__:
        raise UsageError(f"driver-bin --expect-version {expect_version}: this pgdyno is "
                         f"{__version__}")
    if not directory.is_dir():
        raise UsageError(f"driver-bin {directory}: no such directory")
    typer.echo(bin_driver_logs(directory, origin, LogLayout(has_lag=lag, has_retries=retries),
                               latency_limit))


def _bench_help() -> str:
    from pgdyno.workloads import registry

    lines = ["Run a workload, sample telemetry, and write the run directory and report.", "",
             "Workloads:", ""]
    lines += [f"  {name}: {w.description}" for name, w in registry.WORKLOADS.items()]
    return "\n\n".join(lines[:2]) + "\n\n" + "\n\n".join(lines[2:])


def bench_parameters(leave_out: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    """``pgdyno bench``'s options as keyword parameters of a typer command: the common
    table plus every workload's own (``compare`` runs its sides with the same ones)."""
    from pgdyno.runner.options import all_options, cli_annotation

    params = []
    for opt in all_options():
        if opt.name in leave_out:
            continue
        flag = opt.cli_flag
        if opt.type is bool:  # --telemetry/--no-telemetry
            flag = f"{flag}/--no-{flag[2:]}"
        params.append(inspect.Parameter(
            opt.name, inspect.Parameter.KEYWORD_ONLY, annotation=cli_annotation(opt),
            default=typer.Option(list(opt.default) if isinstance(opt.default, tuple)
                                 else opt.default, flag, help=opt.help)))
    return params


def _bench_command():
    """``pgdyno bench``: its options are the common table plus every workload's own."""
    from pgdyno.workloads import registry

    params = [inspect.Parameter(
        "workload", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str,
        default=typer.Argument(..., help=" | ".join(registry.names()))),
        *bench_parameters()]

    def bench(**kw: Any) -> None:
        from rich.console import Console

        from pgdyno.runner.bench import run_bench
        from pgdyno.runner.options import build_options
        from pgdyno.runner.outcome import terminal_lines
        from pgdyno.runner.sweep import run_sweep, sweep_steps

        opts = build_options(**kw)
        console = Console(stderr=True)
        if sweep_steps(opts):
            sweep_dir = run_sweep(opts, console)
            typer.echo(f"report: {sweep_dir / 'report.md'}")
            typer.echo(f"html:   {sweep_dir / 'report.html'}")
            return
        result = run_bench(opts, console)
        if result.report_error:  # a run whose figures nobody can read did not succeed
            raise PgdynoError(f"{result.run_dir}: the summary and report were not built "
                              f"({result.report_error.splitlines()[0]}); the raw files are "
                              f"kept: `pgdyno report {result.run_dir}` builds them")
        report = result.run_dir / "report.md"
        lines = (terminal_lines(result.outcome, report) if result.outcome is not None
                 else [f"report: {report}"])
        for line in lines:
            typer.echo(line)
        typer.echo(f"html:   {result.run_dir / 'report.html'}")

    bench.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    bench.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    bench.__doc__ = "Run a workload, sample telemetry, and write the run directory and report."
    return bench


def report(
    run_dir: str | None = typer.Argument(
        None, help="a run directory, a run as `pgdyno runs` lists it, or a sweep directory"),
    context: str | None = typer.Option(None, help="assemble the report of a whole context"),
    results_dir: Path = typer.Option(Path("results"), help="root of run directories"),
    hardware: str | None = typer.Option(None, help="hardware profile for prices (--context)"),
    against: str | None = typer.Option(None, help="another context to compare (--context)"),
    campaign: str | None = typer.Option(None, help="rebuild the study report of a campaign "
                                                   "(its [campaign] name)"),
    size: str | None = typer.Option(None, help="with --campaign: the size it ran at"),
) -> None:
    """Rebuild a run's summary, plots and reports from raw files, a context's report, or a
    study's report."""
    if campaign is not None:
        from pgdyno.study.run import rebuild_study

        _, out = rebuild_study(campaign, results_dir, size)
        typer.echo(f"study: {out}")
        return
    if context is not None:
        from pgdyno.campaign.context import build_context
        from pgdyno.campaign.context_report import write_context_report

        for name, option in ((context, "--context"), (against, "--against")):
            if name is not None:  # folders of --results-dir; the report goes into the first
                check_dir_name(name, option, "box--tpcb")
        rep = build_context(results_dir, context, hardware=hardware, against=against)
        out = write_context_report(rep, results_dir / context)
        typer.echo(f"report: {out}")
        return
    if run_dir is None:
        raise UsageError("report needs a RUN_DIR, or --context NAME for a context report")
    from pgdyno.runner.report import rebuild, report_target

    target = report_target(run_dir, results_dir)
    with _interrupted(f"report of {target} interrupted; each of its files is the previous "
                      "one or the new one, whole: run `pgdyno report` again to finish", target):
        typer.echo(f"report: {rebuild(target)}")


@contextmanager
def _interrupted(message: str, path: Path | None = None) -> Iterator[None]:
    """Ctrl-C (or SIGTERM) as a RunInterrupted error: its exit code is the signal's (130)
    and its line says what was left. (typer turns a KeyboardInterrupt it sees into a
    returned exit code, which ``app(standalone_mode=False)`` hands back unnoticed: exit 0.)"""
    try:
        yield
    except KeyboardInterrupt:
        raise RunInterrupted(message, path) from None
    except Exception as exc:
        # A signal that lands inside a C extension can surface as the extension's own error
        # with the KeyboardInterrupt dropped (matplotlib's Agg: "Invalid bounding box").
        if signals.first_signal() is None:
            raise
        raise RunInterrupted(message, path) from exc


def runs(
    run_id: str | None = typer.Argument(None, help="show one run (id or directory suffix)"),
    workload: str | None = typer.Option(None), context: str | None = typer.Option(None),
    status: str | None = typer.Option(None, help="ok | failed | interrupted | running"),
    results_dir: Path = typer.Option(Path("results")), limit: int = typer.Option(50),
    reindex: bool = typer.Option(False, "--reindex", help="rebuild the index from the run "
                                 "directories (a damaged index is moved aside, not deleted)"),
    results_db: str | None = typer.Option(
        None, "--results-db", help="list the runs of this shared PostgreSQL database "
        "(postgresql://user@host/db; default: $PGDYNO_RESULTS_DB, else the SQLite index of "
        "--results-dir)"),
    fmt: str = typer.Option("table", "--format", help="table | csv | json | parquet"),
    output: Path | None = typer.Option(None, "--output", help="write the list to this file "
                                       "(parquet needs one)"),
    sync_to: str | None = typer.Option(
        None, "--sync-to", help="push the runs under --results-dir (their directories, e.g. "
        "a fleet's fetched results; --workload, --context, --status apply) into this "
        "PostgreSQL database"),
    wide: bool = typer.Option(False, "--wide", help="full run ids and every column, however "
                              "wide the terminal (default: short names, fitted to $COLUMNS "
                              "or the terminal)"),
) -> None:
    """List past runs from the results index (or a shared database), export them, or show
    one."""
    from rich.console import Console
    from rich.markup import escape

    from pgdyno.results.export import FORMATS, write_export
    from pgdyno.results.store import check_dsn, open_index
    from pgdyno.results.store import results_db as results_db_dsn

    if status is not None:
        check_choice(status, "--status", STATUSES)
    check_choice(fmt, "--format", FORMATS)
    if run_id is not None and not run_id.strip():  # as a suffix it would match any run
        raise UsageError(f"run {run_id!r}: an empty run id; accepted: a run's id or the end "
                         "of it, as `pgdyno runs` lists them")
    if limit < 1:
        raise UsageError(f"--limit {limit}: must be 1 or more")
    if reindex:
        with _interrupted("reindex interrupted; nothing was deleted: run `pgdyno runs "
                          "--reindex` again to finish"):
            _reindex(results_dir)
    if sync_to is not None:
        check_dsn(sync_to, "--sync-to")
        _push(results_dir, open_index(results_dir, sync_to, "--sync-to"), workload, context,
              status)
        return
    index = open_index(results_dir, results_db_dsn(results_db))
    console = Console()
    if run_id is not None:
        row = index.get(run_id)
        if row is None:
            raise UsageError(f"run {run_id}: not in {index.location}; list runs with "
                             "`pgdyno runs`")
        for key, value in row.__dict__.items():
            if key == "settings" and value is not None:  # one order whichever backend
                value = json.dumps(value, sort_keys=True)
            console.print(f"[bold]{key:>18}[/bold]  {escape(str(value))}", highlight=False)
        return
    rows = index.query(workload=workload, context=context, status=status, limit=limit)
    on_disk = [] if index.exists else run_manifests(results_dir)
    if on_disk:
        typer.echo(f"note: no index of runs at {index.location}; `pgdyno runs --reindex` "
                   f"builds it from the {len(on_disk)} run directories there", err=True)
    if fmt != "table":
        text = write_export(rows, fmt, output, index.location)
        if text:
            typer.echo(text, nl=False)
        else:
            typer.echo(f"{len(rows)} run(s) written to {output}", err=True)
        return
    _print_table(rows, output, wide)


def _print_table(rows: list[RunRow], output: Path | None, wide: bool) -> None:
    from pgdyno.results.listing import build_listing, dropped_note, render

    listing = build_listing(rows, None if wide or output is not None else _terminal_width())
    text = "".join(f"{line}\n" for line in render(listing))
    if output is None:
        typer.echo(text, nl=False)
        note = dropped_note(listing)
        if note is not None:
            typer.echo(note, err=True)
        return
    from pgdyno.results.export import write_text

    write_text(output, text)
    typer.echo(f"{len(rows)} run(s) written to {output}", err=True)


def _terminal_width() -> int | None:
    """$COLUMNS when set (a terminal or not), else the terminal's width; None (no limit)
    when printing into a pipe without $COLUMNS, as ``docker ps`` or ``git log`` do, so that
    grep and awk see every column."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def _push(results_dir: Path, store: RunStore, workload: str | None, context: str | None,
          status: str | None) -> None:
    from pgdyno.runner.report import push_runs

    with _interrupted("push interrupted; it is one transaction: nothing was written, run "
                      "`pgdyno runs --sync-to` again"):
        done = push_runs(results_dir, store, workload=workload, context=context,
                         status=status)
    for problem in done.problems:
        typer.echo(f"pgdyno: warning: {' '.join(problem.split())}", err=True)
    typer.echo(f"pushed {done.runs} run(s) from {results_dir} to {done.store}", err=True)


def _reindex(results_dir: Path) -> None:
    from pgdyno.runner.report import reindex

    done = reindex(results_dir)
    for problem in done.problems:
        typer.echo(f"pgdyno: warning: {' '.join(problem.split())}", err=True)
    moved = f"; the damaged index was moved to {done.damaged_index}" if done.damaged_index \
        else ""
    typer.echo(f"index rebuilt: {done.index}, {done.runs} run(s){moved}", err=True)
