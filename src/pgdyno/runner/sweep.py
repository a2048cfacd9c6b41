"""A sweep over a workload's dataset size: one ordinary run per size, one sweep report.

The workload says which sizes the options ask for (``sweep_steps``; TPROC-C's
``--warehouses 10,20,30``) and builds the sweep report (``build_sweep_report``; TPROC-C
puts real against ideal NOPM side by side and finds where real/ideal drops below 90%).
Each size is a complete, ordinary run (its own dataset, iterations, telemetry, verdicts
and report), in ascending order so that each load grows on the last one's machine state
the same way every time. The sweep directory beside them holds ``sweep.json``: which runs
belong to the sweep and how each ended. ``pgdyno report SWEEP_DIR`` rebuilds the report
from the runs' raw files.

A run that fails does not end the sweep (a larger W may fail for its own reasons, such
as disk space); Ctrl-C does, and the report is built from what finished.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from pgdyno import serde
from pgdyno.errors import RunFailed, RunInterrupted, UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.rundir import new_stamped_dir, utc_now
from pgdyno.results.sweepdir import SCHEMA_VERSION, SweepRecord, SweepStep
from pgdyno.runner.bench import context_of, run_bench
from pgdyno.runner.preflight import preflight
from pgdyno.runner.report import build_sweep_reports
from pgdyno.targets import install_for
from pgdyno.workloads import registry


def sweep_steps(opts: BenchOptions) -> list[tuple[int, BenchOptions]]:
    """The runs of a sweep the options ask for ((size, options) each); empty for one run."""
    return registry.get(opts.workload).sweep_steps(opts)


def run_sweep(opts: BenchOptions, console: Console | None = None,
              role: dict | None = None) -> Path:
    """Run every step of the sweep and write the sweep report; returns the sweep directory.
    ``role`` (a campaign cell) goes into every step's manifest beside the sweep's own."""
    steps = sweep_steps(opts)
    if not steps:
        raise UsageError(f"{opts.workload}: these options ask for one run, not a sweep")
    workload = registry.get(opts.workload)
    # Bad input ends the sweep before its directory exists: inside it, a step's refusal
    # would only fail that step (as a step may fail for its own reasons, disk space).
    preflight(opts, install_for(opts.target) if workload.needs_server else None)
    console = console or Console(stderr=True)
    context = context_of(opts)
    opts = dataclasses.replace(opts, context=context)
    unit = workload.size_unit
    sweep_dir, record = new_sweep(opts)
    options = {size: dataclasses.replace(step, context=context) for size, step in steps}
    interrupted: RunInterrupted | None = None
    try:
        for step in record.steps:
            console.print(f"[bold]sweep:[/bold] {step.size} {unit}, "
                          f"{','.join(map(str, step.clients))} clients")
            step.status = "running"
            record.save(sweep_dir)
            try:
                result = run_bench(options[step.size], console,
                                   role={**(role or {}), "sweep": sweep_dir.name,
                                         "step": step.size})
                step.run, step.status = result.run_dir.name, result.status
            except RunInterrupted as exc:
                step.status, step.reason = "interrupted", str(exc)
                step.run = exc.run_dir.name if exc.run_dir else None
                interrupted = exc
                break
            except (RunFailed, UsageError) as exc:
                step.status, step.reason = "failed", str(exc)
                run_dir = exc.run_dir if isinstance(exc, RunFailed) else None
                step.run = run_dir.name if run_dir else None
                console.print(f"[red]sweep: {step.size} {unit} failed:[/red] {exc}")
            record.save(sweep_dir)
    finally:
        record.status = overall_status(record, interrupted is not None)
        record.ended_at = utc_now()
        record.save(sweep_dir)
        build_sweep_reports(sweep_dir)
    if interrupted is not None:
        raise RunInterrupted(f"sweep interrupted; finished runs and the report are in "
                             f"{sweep_dir}", sweep_dir)
    return sweep_dir


def new_sweep(opts: BenchOptions) -> tuple[Path, SweepRecord]:
    """The sweep directory of ``opts`` and its record, every step pending, saved: what
    `pgdyno bench` and a study's block comparisons (one per step) fill in."""
    context = context_of(opts)
    sweep_dir = new_stamped_dir(opts.results_dir, context, f"{opts.workload}-sweep")
    record = SweepRecord(
        schema_version=SCHEMA_VERSION, context=context, status="running", started_at=utc_now(),
        ended_at=None, config=opts.config, workload=opts.workload,
        size_unit=registry.get(opts.workload).size_unit,
        workload_options=serde.to_dict(opts.workload_options),
        steps=[SweepStep(size=size, clients=list(step.clients))
               for size, step in sweep_steps(opts)])
    record.save(sweep_dir)
    return sweep_dir, record


def overall_status(record: SweepRecord, interrupted: bool) -> str:
    if interrupted:
        return "interrupted"
    statuses = {s.status for s in record.steps}
    return "ok" if statuses == {"ok"} else "partial" if "ok" in statuses else "failed"
