"""One trial of a search: one normal ``pgdyno bench`` run, and its headline figure.

The figure and its direction are the workload plugin's (``MetricSpec`` with ``headline``:
TPS for pgbench, NOPM for TPROC-C, the geometric mean for TPROC-H), read the way every run
is read (``headline_of``). A run whose config does not start, or that fails, is a failed
trial with its reason; an interrupted one stops the search (Ctrl-C), to be resumed.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console

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
    return TrialResult("ok", float(head.value), str(result.run_dir), "", seconds)


def first_line(text: str) -> str:
    """The error's first line and the server's own line after it, joined for a table cell."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[:2])[:400]
