"""The maintenance debt a measured window leaves behind, from ``telemetry/debt.jsonl``.

A short window can be fast because it defers work: autovacuum that has not yet run (dead
tuples pile up) and a checkpoint that has not yet come (WAL since its redo point grows).
``MaintenanceDebt`` holds what the window's last reading (taken as the load stopped) says
is owed, and how fast the dead tuples grew between the reading nearest the window's start
and that last one. The workload's tables only: those in pgdyno's schemas (``pgdyno_*``).

A table is over its autovacuum threshold when its dead tuples exceed
``autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × reltuples`` (capped by
PG18's ``autovacuum_vacuum_max_threshold``), as autovacuum itself decides (per-table
storage parameters are not read: pgdyno's workloads set none). Its dead tuples beyond the
threshold are "owed"; the backlog is the tables over it less the workers at work (all of
them when autovacuum is off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.results.rawfiles import read_jsonl

DEBT_FILE = "debt.jsonl"
WORKLOAD_SCHEMA_PREFIX = "pgdyno_"
"""The workloads build in pgdyno_bench (pgbench, OLTP, TPROC-C) and pgdyno_tpch (TPROC-H)."""


@dataclass
class MaintenanceDebt:
    """What a measured window leaves for autovacuum and the next checkpoint."""

    start_epoch: float
    end_epoch: float
    """The readings used: nearest the window's start, and the last (as the load stopped)."""
    tables: int
    live_tuples_end: int
    dead_tuples_start: int
    dead_tuples_end: int
    dead_tuples_growth_per_min: float
    """(dead_tuples_end - dead_tuples_start) / the minutes between the two readings."""
    tables_over_threshold: int
    owed_dead_tuples: int
    """Σ over tables of max(0, n_dead_tup − its autovacuum threshold), at the end."""
    autovacuum_workers: int
    """Autovacuum workers at work at the end."""
    autovacuum_backlog: int
    """Tables over their threshold that no worker is on: max(0, over − workers), or every
    one of them when autovacuum is off."""
    autovacuum: bool
    wal_since_checkpoint_bytes: float | None
    """WAL since the last checkpoint's redo point (None: no right to pg_control_checkpoint)."""
    max_wal_size_bytes: float
    checkpoint_timeout_s: float
    autovacuum_naptime_s: float
    series_t: list[float] = field(default_factory=list)
    series_dead_tuples: list[int] = field(default_factory=list)
    """Dead tuples of the workload's tables at each reading of the window (epoch seconds)."""

    @property
    def rows_end(self) -> int:
        return self.live_tuples_end + self.dead_tuples_end


def threshold(reltuples: float, server: dict[str, Any]) -> float:
    """autovacuum's vacuum threshold of a table of ``reltuples`` rows."""
    value = (float(server["vacuum_threshold"])
             + float(server["vacuum_scale_factor"]) * max(0.0, float(reltuples)))
    cap = server.get("vacuum_max_threshold")
    if cap is not None and float(cap) >= 0:
        value = min(value, float(cap))
    return value


def workload_tables(reading: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in reading.get("tables") or []
            if str(t.get("schemaname", "")).startswith(WORKLOAD_SCHEMA_PREFIX)]


def dead_of(reading: dict[str, Any]) -> int:
    return sum(int(t["n_dead_tup"] or 0) for t in workload_tables(reading))


def read_debt_readings(telemetry_dir: Path) -> list[dict[str, Any]]:
    path = Path(telemetry_dir) / DEBT_FILE
    if not path.exists():
        return []
    return [r for r in read_jsonl(path) if isinstance(r, dict) and "server" in r]


def maintenance_debt(telemetry_dir: Path, start: float, end: float) -> MaintenanceDebt | None:
    """The debt of the window [start, end] (epoch seconds) from its readings; None when the
    window has no reading at its end."""
    readings = sorted(read_debt_readings(telemetry_dir), key=lambda r: float(r["t"]))
    return debt_of_readings(readings, start, end)


def debt_of_readings(readings: list[dict[str, Any]], start: float,
                     end: float) -> MaintenanceDebt | None:
    after = [r for r in readings if float(r["t"]) >= start - 1.0]
    if not after:
        return None
    last = after[-1]
    first = min(after, key=lambda r: abs(float(r["t"]) - start))
    server = last["server"]
    tables = workload_tables(last)
    over = [t for t in tables if int(t["n_dead_tup"] or 0) > threshold(t["reltuples"], server)]
    owed = sum(int(t["n_dead_tup"] or 0) - threshold(t["reltuples"], server) for t in over)
    workers = int(server.get("autovacuum_workers") or 0)
    on = bool(server.get("autovacuum"))
    minutes = (float(last["t"]) - float(first["t"])) / 60.0
    dead_start, dead_end = dead_of(first), dead_of(last)
    window = [r for r in after if float(r["t"]) >= float(first["t"])]
    wal = server.get("wal_since_redo_bytes")
    return MaintenanceDebt(
        start_epoch=float(first["t"]), end_epoch=float(last["t"]), tables=len(tables),
        live_tuples_end=sum(int(t["n_live_tup"] or 0) for t in tables),
        dead_tuples_start=dead_start, dead_tuples_end=dead_end,
        dead_tuples_growth_per_min=(dead_end - dead_start) / minutes if minutes > 0 else 0.0,
        tables_over_threshold=len(over), owed_dead_tuples=round(owed),
        autovacuum_workers=workers,
        autovacuum_backlog=max(0, len(over) - workers) if on else len(over),
        autovacuum=on, wal_since_checkpoint_bytes=None if wal is None else float(wal),
        max_wal_size_bytes=float(server["max_wal_size_bytes"]),
        checkpoint_timeout_s=float(server["checkpoint_timeout_s"]),
        autovacuum_naptime_s=float(server["autovacuum_naptime_s"]),
        series_t=[float(r["t"]) for r in window],
        series_dead_tuples=[dead_of(r) for r in window])
