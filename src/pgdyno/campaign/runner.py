"""Executing a campaign: cells in interleaved order, a journal, resume after interruption.

The journal (``<results_dir>/campaigns/<name>/journal.jsonl``) is append-only, one JSON
event per line, flushed and fsynced before the next step: a crash or Ctrl-C can lose at
most the event being written, and a cell counts as done only when its ``run-end`` event
says so. On restart, cells that ended ``ok`` (or ``failed``, unless retried) are skipped;
an interrupted cell is run again in a new run directory (the interrupted one is kept,
marked ``interrupted`` by the run loop). A ``run-end`` names its run directory relative to
the results directory (``recorded_run``), so the journal reads the same from anywhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pgdyno.campaign.pairs import (
    DESIGN_EVENT,
    PairDesign,
    PairedWorkload,
    PairResult,
    estimate_paired_seconds,
    paired_workloads,
    run_paired,
)
from pgdyno.campaign.spec import CampaignSpec, Cell
from pgdyno.errors import PgdynoError, RunError, RunInterrupted, UsageError
from pgdyno.options import BenchOptions
from pgdyno.provision.model import ProvisionState
from pgdyno.redact import redact, redact_values
from pgdyno.results.rundir import utc_now
from pgdyno.runner.bench import RUN_OVERHEAD_S
from pgdyno.runner.longstep import long_step

JOURNAL = "journal.jsonl"


@dataclass
class CampaignOutcome:
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    run_dirs: dict[str, str] = field(default_factory=dict)
    journal: Path | None = None
    paired_workloads: list[str] = field(default_factory=list)
    """Workloads measured as block comparisons (their cells all ran in one go)."""


def journal_path(spec: CampaignSpec) -> Path:
    return spec.journal_dir / JOURNAL


def read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash: the cell it belonged to is simply redone
        if isinstance(event, dict):  # every event is an object; anything else is no event
            events.append(event)
    return events


def recorded_run(run_dir: Path, results_dir: Path) -> str:
    """A run directory as the journal records it: relative to the results directory, so
    that the journal still finds its runs from another working directory (``pgdyno report
    --campaign NAME --results-dir DIR``) or once the results directory has moved."""
    try:
        return str(Path(run_dir).resolve().relative_to(Path(results_dir).resolve()))
    except ValueError:  # outside the results directory: only its absolute path names it
        return str(Path(run_dir).resolve())


def run_path(results_dir: Path, recorded: str) -> Path:
    """The run directory a journal event names. Journals record it relative to the results
    directory; older ones relative to the working directory the campaign ran in, so such a
    path is also looked for where every run lives, ``RESULTS/<context>/<run>``."""
    path = Path(recorded)
    found = [results_dir / path, results_dir / path.parent.name / path.name, path]
    return next((p for p in found if p.is_dir()), found[0])


def append_event(path: Path, event: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(redact_values({"at": utc_now(), **event})) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def finished_cells(events: list[dict[str, Any]], results_dir: Path,
                   retry_failed: bool) -> dict[str, dict]:
    """Cells whose last ``run-end`` is ok (or failed when not retrying), by key."""
    done: dict[str, dict] = {}
    for ev in events:
        if ev.get("event") != "run-end" or not isinstance(ev.get("cell"), str):
            continue
        keep = ev.get("status") == "ok" or (ev.get("status") == "failed" and not retry_failed)
        run_dir = ev.get("run_dir")
        if keep and (run_dir is None or run_path(results_dir, str(run_dir)).is_dir()):
            done[ev["cell"]] = ev
        else:
            done.pop(ev["cell"], None)
    return done


def estimate_seconds(spec: CampaignSpec, cells: list[Cell]) -> float:
    """The planned load of ``cells``, each with its own options (a study mixes fio's job
    set, TPROC-C's minutes and TPROC-H's streams), a sweep once per step, plus each run's
    measured overhead; dataset loads are not in it."""
    from pgdyno.runner.sweep import sweep_steps

    total = 0.0
    for cell in cells:
        opts = spec.options_for(cell)
        runs = len(sweep_steps(opts)) or 1
        per_run = (opts.warmup_s + opts.duration_s) * len(opts.clients) * opts.iterations
        total += runs * (per_run + RUN_OVERHEAD_S + 2.0 * len(opts.clients) * opts.iterations)
    return total


def estimate_campaign_seconds(spec: CampaignSpec, todo: list[Cell], pairs: PairDesign | None,
                              paired: dict[str, PairedWorkload]) -> float:
    """The cells run one by one as planned runs, and each workload whose sides are compared
    in blocks as its blocks (their pairs, not the cells' iterations, set its length)."""
    in_blocks = {key for group in paired.values() for key in group.keys}
    alone = estimate_seconds(spec, [c for c in todo if c.key not in in_blocks])
    assert pairs is not None or not paired
    return alone + sum(estimate_paired_seconds(spec, pairs, group)
                       for group in paired.values())


def run_campaign(spec: CampaignSpec, console: Console | None = None,
                 show_progress: bool = True, retry_failed: bool = False,
                 allow_os_changes: bool = False,
                 pairs: PairDesign | None = None) -> CampaignOutcome:
    """Every cell not done yet, in the campaign's order. With ``pairs`` (a study's two
    sides), each workload both sides run is one block comparison where it can be
    (``campaign.pairs``), the rest runs cell by cell."""
    console = console or Console(stderr=True)
    journal = journal_path(spec)
    check_os_changes(spec, allow_os_changes)
    spec.journal_dir.mkdir(parents=True, exist_ok=True)
    revert_leftovers(journal, console)
    if spec.path.is_file():
        # The copy is the campaign as run, minus any DSN password it holds.
        (spec.journal_dir / "campaign.toml").write_text(redact(spec.path.read_text()))
    done = finished_cells(read_journal(journal), spec.results_dir, retry_failed)
    cells = spec.cells()
    todo = [c for c in cells if c.key not in done]
    outcome = CampaignOutcome(journal=journal, skipped=[c.key for c in cells if c.key in done])
    outcome.run_dirs = {k: str(run_path(spec.results_dir, str(ev["run_dir"])))
                        for k, ev in done.items() if ev.get("run_dir")}
    append_event(journal, {"event": "campaign-start", "cells": len(cells),
                           "to_run": [c.key for c in todo], "skipped": outcome.skipped})
    paired, sequential = (paired_workloads(spec, pairs, todo) if pairs is not None
                          else ({}, {}))
    console.print(f"campaign {spec.name}: {len(cells)} runs, {len(outcome.skipped)} already "
                  f"done, {len(todo)} to run (about "
                  f"{estimate_campaign_seconds(spec, todo, pairs, paired) / 60:.1f} min)")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        console=console, disable=not show_progress)
    for workload, why in sequential.items():
        append_event(journal, {"event": DESIGN_EVENT, "workload": workload,
                               "design": "sequential", "why": why})
    with progress:
        task = progress.add_task("campaign", total=len(cells), completed=len(outcome.skipped))
        try:
            pair_of = {key: group for group in paired.values() for key in group.keys}
            for cell in todo:
                group = pair_of.get(cell.key)
                if group is not None and group.workload in outcome.paired_workloads:
                    continue  # measured in its workload's blocks
                if group is not None:
                    progress.update(task, description=f"{cell.workload}: both sides in blocks")
                    _run_pair(spec, pairs, group, journal, outcome, console)
                    progress.advance(task, len([c for c in todo if c.key in group.keys]))
                    continue
                progress.update(task, description=f"{cell.key}")
                with long_step(console, f"campaign run {todo.index(cell) + 1}/{len(todo)}: "
                                        f"{cell.key}", estimate_seconds(spec, [cell]),
                               qualifier="about ", show_progress=show_progress):
                    _run_cell(spec, cell, journal, outcome, console)
                progress.advance(task)
        except KeyboardInterrupt:
            append_event(journal, {"event": "campaign-interrupted"})
            raise RunInterrupted("campaign interrupted between runs; run the same command "
                                 "again to resume") from None
        except RunInterrupted:
            append_event(journal, {"event": "campaign-interrupted"})
            raise
    append_event(journal, {"event": "campaign-end", "ran": outcome.ran,
                           "failed": outcome.failed})
    return outcome


def _run_pair(spec: CampaignSpec, plan: PairDesign | None, group: PairedWorkload,
              journal: Path, outcome: CampaignOutcome, console: Console) -> None:
    """A workload's two sides as one block comparison; each cell's run-end says how it
    ended (the later repetitions' cells: measured in these blocks)."""
    assert plan is not None
    outcome.paired_workloads.append(group.workload)
    for cell in (group.baseline, group.candidate):
        append_event(journal, {"event": "run-start", "cell": cell.key})
    started = time.monotonic()
    sides = (group.baseline, group.candidate)
    try:
        result = run_paired(spec, plan, group, lambda ev: append_event(journal, ev), console)
    except RunInterrupted as exc:
        for cell in sides:
            _finish(journal, cell, "interrupted", str(exc), None, started, spec.results_dir)
        raise
    except KeyboardInterrupt:
        for cell in sides:
            _finish(journal, cell, "interrupted", "Ctrl-C", None, started, spec.results_dir)
        raise RunInterrupted(f"campaign interrupted during {group.workload}'s blocks; run "
                             "the same command again to resume") from None
    except PgdynoError as exc:
        result = PairResult("failed", str(exc), None, None)
    for cell, run_dir in zip(sides, (result.baseline_dir, result.candidate_dir),
                             strict=True):
        _finish(journal, cell, result.status, result.reason, run_dir, started,
                spec.results_dir, shared_time=cell is not group.baseline)
        _tally(outcome, cell, result.status, result.reason, run_dir, console)
    for cell in group.covered:
        _finish(journal, cell, result.status,
                f"measured in the blocks of {group.baseline.key} and {group.candidate.key}",
                None, started, spec.results_dir, shared_time=True)
        (outcome.ran if result.status == "ok" else outcome.failed).append(cell.key)


def _tally(outcome: CampaignOutcome, cell: Cell, status: str, reason: str,
           run_dir: Path | None, console: Console) -> None:
    if status == "ok":
        outcome.ran.append(cell.key)
    else:
        outcome.failed.append(cell.key)
        console.print(f"[red]{cell.key} failed:[/red] {reason}")
    if run_dir is not None:
        outcome.run_dirs[cell.key] = str(run_dir)


def _run_cell(spec: CampaignSpec, cell: Cell, journal: Path, outcome: CampaignOutcome,
              console: Console) -> None:
    opts = spec.options_for(cell)
    role = {"campaign": spec.name, "cell": cell.key, "label": cell.config.label,
            "repetition": cell.repetition, "config": cell.config.config,
            "sets": list(cell.config.sets), "hardware": spec.hardware}
    if cell.config.os:
        role["os"] = dict(cell.config.os)
    append_event(journal, {"event": "run-start", "cell": cell.key})
    started = time.monotonic()
    status, reason, run_dir = "ok", "", None
    try:
        with os_settings(spec, cell, opts, journal):
            run_dir, status, reason = _run(opts, role)
    except RunInterrupted as exc:
        _finish(journal, cell, "interrupted", str(exc), exc.run_dir, started,
                spec.results_dir)
        raise
    except PgdynoError as exc:  # a failed run, a server that would not start, a bad value
        status, reason = "failed", str(exc)
        run_dir = exc.run_dir if isinstance(exc, RunError) else None
    except KeyboardInterrupt:  # between the run loop's own handlers (start, stop, report)
        _finish(journal, cell, "interrupted", "Ctrl-C", None, started, spec.results_dir)
        raise RunInterrupted(f"campaign interrupted during {cell.key}; run the same command "
                             "again to resume") from None
    _finish(journal, cell, status, reason, run_dir, started, spec.results_dir)
    _tally(outcome, cell, status, reason, run_dir, console)


def _run(opts: BenchOptions, role: dict[str, Any]) -> tuple[Path, str, str]:
    """One run, or a sweep (``warehouses = "1,2,4"``): its directory, status and why."""
    from pgdyno.results.sweepdir import SweepRecord
    from pgdyno.runner.bench import run_bench
    from pgdyno.runner.sweep import run_sweep, sweep_steps

    quiet = Console(stderr=True, quiet=True)
    if not sweep_steps(opts):
        return run_bench(opts, quiet, role=role).run_dir, "ok", ""
    sweep_dir = run_sweep(opts, quiet, role=role)
    record = SweepRecord.load(sweep_dir)
    if record.status == "ok":
        return sweep_dir, "ok", ""
    failed = [f"{s.size}: {s.reason or s.status}" for s in record.steps if s.status != "ok"]
    return sweep_dir, "failed", f"sweep {record.status}; " + "; ".join(failed)


# ----- OS settings of a cell ([config.os]) ------------------------------------------------------

def check_os_changes(spec: CampaignSpec, allowed: bool) -> None:
    """A campaign that changes the OS runs only when the user said so, and as root."""
    from pgdyno.provision import NeedsRoot
    from pgdyno.provision.system import is_root

    changing = [c.label for c in spec.configs if c.os]
    if not changing:
        return
    if not allowed:
        raise UsageError(f"campaign {spec.path}: [[config]] {', '.join(changing)} change OS "
                         "settings ([config.os]); accepted: pgdyno campaign --allow-os-changes "
                         "(applied before each of their cells, reverted after; needs root)")
    if not is_root():
        raise NeedsRoot(f"campaign {spec.path}: [config.os] needs root (euid {os.geteuid()}) "
                        "to change kernel settings; run it as root or remove [config.os]")


@contextlib.contextmanager
def os_settings(spec: CampaignSpec, cell: Cell, opts: BenchOptions,
                journal: Path) -> Iterator[None]:
    """The cell's OS settings applied around its run and reverted after, whatever happens;
    both in the campaign's journal and in the context's provision events."""
    if not cell.config.os:
        yield
        return
    from pgdyno.provision import apply_settings
    from pgdyno.runner.bench import context_of
    from pgdyno.targets import default_workdir

    context = context_of(opts)
    workdir = opts.target.workdir or default_workdir()
    settings = dict(cell.config.os)
    shown = ", ".join(f"{k}={v}" for k, v in cell.config.os)

    def intent(state: ProvisionState) -> None:
        # Before the first change: a campaign killed mid-apply is reverted on its restart.
        append_event(journal, {"event": "os-apply-start", "cell": cell.key,
                               "state": state.path})

    try:
        state = apply_settings(settings, workdir, origin=f"[[config]] {cell.config.label}",
                               context=context, on_start=intent)
    except PgdynoError as exc:
        _provision_event(spec, context, "apply", exc.exit_code, f"{cell.key}: {exc}")
        raise
    if state is None:  # everything already at target: nothing to undo
        append_event(journal, {"event": "os-apply", "cell": cell.key, "changed": 0})
        yield
        return
    append_event(journal, {"event": "os-apply", "cell": cell.key, "state": state.path,
                           "changed": len(state.steps)})
    _provision_event(spec, context, "apply", 0, f"{cell.key}: applied {shown}",
                     state.path, len(state.steps))
    try:
        yield
    finally:
        _revert(journal, state.path, cell.key, spec, context)


def _revert(journal: Path, state_file: str, cell_key: str, spec: CampaignSpec | None,
            context: str) -> None:
    from pgdyno.provision import revert

    try:
        report = revert(state_file)
        summary = f"{cell_key}: restored {'; '.join(report.restored) or 'nothing'}"
        code = 0 if not report.failed else 1
        if report.failed:
            summary += f"; could not restore: {'; '.join(report.failed)}"
    except PgdynoError as exc:
        summary, code = f"{cell_key}: {exc}", exc.exit_code
    append_event(journal, {"event": "os-revert", "cell": cell_key, "state": state_file,
                           "status": "ok" if code == 0 else "failed", "summary": summary})
    if spec is not None and context:
        _provision_event(spec, context, "revert", code, summary, state_file)
    if code != 0:
        raise RunError(f"campaign: OS settings of {cell_key} not reverted: {summary}; "
                       f"pgdyno provision revert {state_file}")


def revert_leftovers(journal: Path, console: Console) -> None:
    """An earlier campaign process that died inside a cell with OS settings, or while
    applying them, left them applied: revert them before anything runs (its state file,
    named in the journal before the first change, says what to restore)."""
    from pgdyno.provision.state import load_state

    pending: dict[str, str] = {}
    for ev in read_journal(journal):
        if ev.get("event") in ("os-apply-start", "os-apply") and ev.get("state"):
            pending[ev["state"]] = ev.get("cell", "")
        elif ev.get("event") == "os-revert":
            pending.pop(ev.get("state", ""), None)
    for state_file, cell_key in pending.items():
        try:
            state = load_state(Path(state_file))
        except PgdynoError:
            continue
        if state.status in ("reverted", "rolled back"):
            continue
        console.print(f"campaign: reverting the OS settings {cell_key} left applied "
                      f"({state_file})")
        _revert(journal, state_file, cell_key, None, state.context)


def _provision_event(spec: CampaignSpec, context: str, action: str, code: int, summary: str,
                     state_file: str = "", changed: int = 0) -> None:
    from pgdyno.provision import record_event

    with contextlib.suppress(OSError):  # the journal line is a record, never a failure
        record_event(spec.results_dir, context, action, exit_status=code, summary=summary,
                     state_file=state_file, changed=changed, config=f"campaign {spec.name}",
                     hardware=spec.hardware or "")


def _finish(journal: Path, cell: Cell, status: str, reason: str, run_dir: Path | None,
            started: float, results_dir: Path, shared_time: bool = False) -> None:
    """The cell's run-end event. ``shared_time``: its seconds are another cell's too (the
    sides of one block comparison), so that a sum of the cells' time counts them once."""
    event = {"event": "run-end", "cell": cell.key, "status": status, "reason": reason,
             "run_dir": recorded_run(run_dir, results_dir) if run_dir else None,
             "seconds": round(time.monotonic() - started, 1)}
    if shared_time:
        event["shared_time"] = True
    append_event(journal, event)
