"""A dataset's load in the one shape every workload records it, whatever builds it.

pgbench's ``pgbench -i``, the OLTP, TPROC-C and TPROC-H loaders each time their phases in
their own way; each workload's ``prepare`` turns its result into a ``LoadRecord`` and puts
it under its dataset record's ``"load_record"`` key (``manifest["dataset"]``). The run's
closing lines and the run report's Load table read only this shape, so they name no
workload, and a plugin in a package of its own gets both by writing the same record.

Phases, in the order they run: ``data`` (creating and filling the tables), ``keys`` (primary
keys, foreign keys and indexes), ``vacuum`` (VACUUM ANALYZE: visibility map and planner
statistics), ``check`` (TPROC-C's consistency conditions on the new data), ``checkpoint``
(the CHECKPOINT that ends a load run with spaced checkpoints: ``workloads.bulkload``). Each
phase's
rate is the dataset's rows over that phase's seconds: how fast the phase went through the
data, comparable between runs of one workload.

A reused dataset is not loaded again: its record says so, with the seconds its build took
when pgdyno's dataset registry recorded them (``workloads.dataset``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pgdyno.serde import Serialisable

RECORD_KEY = "load_record"
"""Where the record lives in the dataset record of the manifest."""
PHASES = ("data", "keys", "vacuum", "check", "checkpoint")
PHASE_WORDS = {"data": "data", "keys": "keys and indexes", "vacuum": "vacuum and analyze",
               "check": "consistency check", "checkpoint": "closing checkpoint"}
"""Each phase as the terminal and the report name it."""


@dataclass(frozen=True)
class LoadPhase(Serialisable):
    phase: str
    """``data``, ``keys``, ``vacuum`` or ``check`` (PHASES)."""
    seconds: float
    rows_per_s: float | None = None
    """The dataset's rows over this phase's seconds (None: rows or seconds unknown)."""

    @property
    def words(self) -> str:
        return PHASE_WORDS.get(self.phase, self.phase)


@dataclass(frozen=True)
class LoadRecord(Serialisable):
    reused: bool
    """The dataset was there already: nothing was loaded by this run."""
    seconds: float | None
    """The whole load's wall time; for a reused dataset, the build's as pgdyno's dataset
    registry recorded it (None: not recorded)."""
    rows: int | None = None
    """Rows the load wrote, every table (None: reused, or not counted)."""
    phases: list[LoadPhase] = field(default_factory=list)
    """This run's phases, in the order they ran (empty when reused)."""
    settings: dict[str, str] = field(default_factory=dict)
    """Server settings the load ran with in place of the config's (a server pgdyno owns;
    the config's own were back before anything was measured)."""
    note: str = ""
    """Why the load ran with them, or why the server's were kept."""

    @property
    def rows_per_s(self) -> float | None:
        if not self.rows or not self.seconds or self.reused:
            return None
        return self.rows / self.seconds


def built(rows: int | None, seconds: float, phase_seconds: dict[str, float]) -> LoadRecord:
    """The record of a load this run made: ``phase_seconds`` (phase -> seconds, as the
    loaders' ``BuildPhases`` keep them) in PHASES order, then any other phase by name."""
    order = [p for p in PHASES if p in phase_seconds] + sorted(
        p for p in phase_seconds if p not in PHASES)
    phases = [LoadPhase(p, round(phase_seconds[p], 3), _rate(rows, phase_seconds[p]))
              for p in order]
    return LoadRecord(reused=False, seconds=round(seconds, 3), rows=rows, phases=phases)


def reused(recorded_seconds: float | None) -> LoadRecord:
    """The record of a dataset this run reused (``recorded_seconds``: its build's seconds
    from the dataset registry; None or 0 when it did not record them)."""
    seconds = (round(recorded_seconds, 3) if recorded_seconds and
               math.isfinite(recorded_seconds) else None)
    return LoadRecord(reused=True, seconds=seconds)


def _rate(rows: int | None, seconds: float) -> float | None:
    return round(rows / seconds, 1) if rows and seconds > 0 else None


def record_of(dataset: dict[str, Any] | None) -> LoadRecord | None:
    """The load record of a manifest's dataset record (None: no dataset, or a run from
    before the record)."""
    data = (dataset or {}).get(RECORD_KEY)
    if not isinstance(data, dict):
        return None
    try:
        return LoadRecord.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError):  # an edited manifest
        return None


def load_lines(record: LoadRecord) -> list[tuple[str, str]]:
    """(item, sentence) pairs, one for the whole load then one per phase: what the terminal
    prints and the report's Answer section shows."""
    if record.reused:
        built_in = (f"built in {seconds(record.seconds)} by an earlier run"
                    if record.seconds is not None else "its build time was not recorded")
        return [("load", f"reused, not loaded again ({built_in})")]
    head = f"built in {seconds(record.seconds)}"
    if record.rows:
        head += f", {record.rows:,} rows"
        if record.rows_per_s is not None:
            head += f" ({record.rows_per_s:,.0f} rows/s overall)"
    lines = [("load", head)]
    for phase in record.phases:
        text = seconds(phase.seconds)
        if phase.rows_per_s is not None:
            text += f", {phase.rows_per_s:,.0f} rows/s"
        lines.append((f"load {phase.words}", text))
    if record.settings:
        lines.append(("load settings", ", ".join(f"{k}={v}" for k, v in record.settings.items())
                      + " (the config's own before the measured run)"))
    return lines


def seconds(value: float | None) -> str:
    """"27.3 s", "0.23 s", "1 min 12 s": a load's duration as the reader takes it in."""
    if value is None or not math.isfinite(value):
        return "–"
    if value >= 120:
        minutes, rest = divmod(round(value), 60)
        return f"{minutes} min {rest} s"
    return f"{value:.1f} s" if value >= 10 else f"{value:.2f} s"
