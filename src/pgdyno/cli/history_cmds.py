"""`pgdyno history`: the series of the index of runs over time, their change points, and a
gate for CI (``--fail-on-regression``)."""

from __future__ import annotations

from pathlib import Path

import typer

from pgdyno.errors import UsageError
from pgdyno.workloads.checks import check_choice

REGRESSION = 3
"""Exit code of ``--fail-on-regression``: a watched series' newest level is worse than the
one before by more than the threshold (distinct from 1, a failure, and 2, bad input)."""


def register(app: typer.Typer) -> None:
    app.command("history")(history)


def history(
    context: str | None = typer.Option(None, help="the series of this context"),
    workload: str | None = typer.Option(None, help="the series of this workload"),
    config: str | None = typer.Option(None, help="the series of this config label"),
    clients: str | None = typer.Option(None, help="the series of runs at these client counts, "
                                       "as `pgdyno runs` lists them: 8, or 1,4,8"),
    dataset: str | None = typer.Option(None, help="the series of this dataset: 'scale 1'"),
    host: str | None = typer.Option(None, help="the series of runs made on this host"),
    metric: str | None = typer.Option(None, help="headline (the workload's headline figure: "
                                      "TPS, NOPM, events/s) | p99 (latency, ms); default: both"),
    results_dir: Path = typer.Option(Path("results"), help="root of run directories (its "
                                     "index of runs is read)"),
    results_db: str | None = typer.Option(
        None, "--results-db", help="read the runs of this shared PostgreSQL database "
        "(postgresql://user@host/db; default: $PGDYNO_RESULTS_DB, else the SQLite index of "
        "--results-dir)"),
    output: Path | None = typer.Option(None, "--output", help="where history.html, "
                                       "history.md, history.json and the plots go (default: "
                                       "RESULTS_DIR/history)"),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", metavar="PCT", help="exit 3 when a watched series' "
        "newest level is worse than the level before by more than PCT % (lower throughput, "
        "higher latency)"),
    max_pvalue: float = typer.Option(0.001, "--max-pvalue", help="the t-test p-value a change "
                                     "point must reach"),
    min_segment: int = typer.Option(3, "--min-segment", help="the fewest runs a level must "
                                    "hold for: a shorter one is an outlier, not a change"),
    window: int = typer.Option(20, "--window", help="runs in the change-point method's "
                               "sliding window"),
) -> None:
    """Watch each series of runs over time: print it, plot it with its change points
    (when, from what level to what, by how much, how sure), and write a page of every
    series; --fail-on-regression gates CI on the newest change."""
    from pgdyno.analysis.history import METRICS, DetectionSettings, Selection, watch
    from pgdyno.reports.history import regression_line, terminal_report, write_history
    from pgdyno.results.store import open_index
    from pgdyno.results.store import results_db as results_db_dsn

    if metric is not None:
        check_choice(metric, "--metric", METRICS)
    if fail_on_regression is not None and not fail_on_regression >= 0:
        raise UsageError(f"--fail-on-regression {fail_on_regression:g}: accepted: a percentage "
                         "of 0 or more, such as 5")
    settings = DetectionSettings(max_pvalue=max_pvalue, min_segment=min_segment, window=window)
    selection = Selection(context=context, workload=workload, config=config, dataset=dataset,
                          clients=clients.replace(" ", "") if clients else None, host=host,
                          metric=metric)
    report = watch(open_index(results_dir, results_db_dsn(results_db)), selection, settings)
    for line in terminal_report(report):
        typer.echo(line)
    if not report.series:  # no page either: nothing to show, and no folder made for it
        typer.echo(f"note: no finished run in {report.store} matches the selection", err=True)
        return
    typer.echo(f"html:   {write_history(report, output or results_dir / 'history')}")
    if fail_on_regression is None:
        return
    found = report.regressions(fail_on_regression)
    for series, change in found:
        typer.echo(regression_line(series, change, fail_on_regression))
    if found:
        typer.echo(f"pgdyno: regression: {len(found)} series worse by more than "
                   f"{fail_on_regression:g}% (exit {REGRESSION})", err=True)
        raise typer.Exit(REGRESSION)
