"""One trial of a search: one normal ``pgdyno bench`` run, and its headline figure charged
for the maintenance debt it leaves.

The figure and its direction are the workload plugin's (``MetricSpec`` with ``headline``:
TPS for pgbench, NOPM for TPROC-C, the geometric mean for TPROC-H), read the way every run
is read (``headline_of``). A run whose config does not start, or that fails, is a failed
trial with its reason; an interrupted one stops the search (Ctrl-C), to be resumed.

The debt penalty (``debt_penalty``; the search guide and the search report state it). A short
window rewards configs that defer work: autovacuum that has not run yet, a checkpoint that
has not come yet. The run's telemetry records what its window left (``MaintenanceDebt``,
from ``telemetry/debt.jsonl``), and the optimiser sees the headline reduced by

    penalty = min(PENALTY_CAP, vacuum share + WAL share)
    vacuum share = (owed dead tuples + [backlog > 0] × growth per minute × window minutes)
                   / (live + dead tuples)
    WAL share    = max(0, WAL since the checkpoint's redo − max_wal_size) / max_wal_size

(owed: dead tuples beyond each table's autovacuum threshold; backlog: tables over it that no
autovacuum worker is on). A higher-is-better figure is multiplied by (1 − penalty), a
lower-is-better one divided by it. Why it is fair: it charges only work the trial left
undone beyond what autovacuum's and the checkpointer's own rules allow, in the share of
rows (or of the checkpoint distance) that work covers: a config that keeps up pays nothing,
the charge grows with every owed row and byte, and it is capped, so debt can rank a
deferring config below one that keeps up but never replaces the measurement.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from pgdyno.analysis.debt import MaintenanceDebt, maintenance_debt
from pgdyno.analysis.summary import load_summary
from pgdyno.errors import RunFailed, RunRefused, UsageError
from pgdyno.options import BenchOptions
from pgdyno.runner.bench import run_bench
from pgdyno.workloads import registry
from pgdyno.workloads.base import HIGHER, MetricSpec, headline_metric


@dataclass
class TrialResult:
    """What one measurement of a config gave."""

    status: str
    """ok or failed."""
    value: float | None
    run_dir: str = ""
    """The run directory ('' when the config was refused before one was made)."""
    reason: str = ""
    seconds: float = 0.0
    raw_value: float | None = None
    """The run's headline before the debt penalty (``value`` is after it)."""
    penalty: DebtPenalty | None = None
    against: dict[str, Any] | None = None
    """A trial measured in blocks: the config it was measured against and the change
    (``search.trial_blocks``); None for a run of its own."""


PENALTY_CAP = 0.5
"""Debt can take at most half of a trial's figure: enough to rank a config that defers all
of its vacuuming below one that keeps up, never enough to make the figure meaningless."""


@dataclass
class DebtPenalty:
    """The share of a trial's figure charged for the debt it leaves, and its parts."""

    share: float
    """min(PENALTY_CAP, vacuum_share + wal_share): 0 for a debt-free trial."""
    vacuum_share: float
    wal_share: float
    debt: MaintenanceDebt | None = None


def debt_penalty(debt: MaintenanceDebt | None) -> DebtPenalty:
    """The penalty rule (module docstring): monotone in each figure, 0 without debt,
    bounded by PENALTY_CAP. No debt recorded (telemetry off): no penalty."""
    if debt is None:
        return DebtPenalty(0.0, 0.0, 0.0, None)
    rows = max(1, debt.rows_end)
    minutes = max(0.0, debt.end_epoch - debt.start_epoch) / 60.0
    growing = (max(0.0, debt.dead_tuples_growth_per_min) * minutes
               if debt.autovacuum_backlog > 0 else 0.0)
    vacuum = (debt.owed_dead_tuples + growing) / rows
    wal = 0.0
    if debt.wal_since_checkpoint_bytes is not None and debt.max_wal_size_bytes > 0:
        wal = (max(0.0, debt.wal_since_checkpoint_bytes - debt.max_wal_size_bytes)
               / debt.max_wal_size_bytes)
    return DebtPenalty(min(PENALTY_CAP, vacuum + wal), vacuum, wal, debt)


def penalised(value: float, share: float, direction: int) -> float:
    """``value`` charged ``share``: less of a higher-is-better figure, more of a lower one."""
    return value * (1.0 - share) if direction > 0 else value / (1.0 - share)


def run_debt(run_dir: str | Path, clients: int | None = None) -> MaintenanceDebt | None:
    """The debt a run left: that of its last iteration (at ``clients`` when given) whose
    telemetry recorded one, computed from the iteration's ``telemetry/debt.jsonl`` over its
    measured window (summary.json's window start and duration)."""
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        return None
    try:
        summary = load_summary(path)
        engine_dir = registry.get(summary.workload).engine_dir
    except (OSError, ValueError, KeyError, TypeError, UsageError):
        return None
    debts = []
    for it in summary.iterations:
        if clients is not None and it.clients != clients:
            continue
        tdir = Path(run_dir) / "raw" / engine_dir / f"c{it.clients}-i{it.iteration}" / "telemetry"
        debt = maintenance_debt(tdir, it.window_start_epoch,
                                it.window_start_epoch + it.duration_s)
        if debt is not None:
            debts.append(debt)
    return debts[-1] if debts else None


def headline_spec(workload: str) -> MetricSpec:
    return headline_metric(registry.get(workload).metrics)


def optuna_direction(spec: MetricSpec) -> str:
    return "maximize" if (spec.direction or HIGHER) > 0 else "minimize"


def measure(base: BenchOptions, config: str, role: dict[str, Any],
            console: Console | None = None) -> TrialResult:
    """Run ``config`` (a named config or a file) with the search's bench options."""
    opts = dataclasses.replace(base, config=config, sets=())
    spec = headline_spec(base.workload)
    started = time.monotonic()
    try:
        result = run_bench(opts, console, role=role)
    except (RunFailed, RunRefused) as exc:
        return TrialResult("failed", None, str(exc.run_dir or ""), first_line(str(exc)),
                           time.monotonic() - started)
    except UsageError as exc:
        # Refused before a run directory existed (the memory budget, a bad value).
        return TrialResult("failed", None, "", first_line(str(exc)), time.monotonic() - started)
    seconds = time.monotonic() - started
    head = result.headline
    if head is None or head.metric != spec.name:
        return TrialResult("failed", None, str(result.run_dir),
                           f"the run has no {spec.label} figure", seconds)
    penalty = debt_penalty(run_debt(result.run_dir, head.clients))
    value = penalised(float(head.value), penalty.share, spec.direction or HIGHER)
    return TrialResult("ok", value, str(result.run_dir), "", seconds,
                       raw_value=float(head.value), penalty=penalty)


def first_line(text: str) -> str:
    """The error's first line and the server's own line after it, joined for a table cell."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[:2])[:400]
