"""The index of runs under a results directory (SQLite), behind ``pgdyno runs``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError

INDEX_FILE = "index.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,   -- run directory relative to the results root
    context      TEXT NOT NULL,
    workload     TEXT NOT NULL,
    status       TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    ended_at     TEXT,
    config       TEXT,
    clients      TEXT,
    headline     REAL,               -- the workload's headline metric (TPS, NOPM, events/s)
    p99_ms       REAL,
    pg_version   TEXT,
    headline_metric TEXT,
    headline_unit   TEXT,
    dataset      TEXT                -- "scale 10", "10 warehouses", ...
)"""
# Indexes written before the workload plugins had a TPS column and no dataset.
_MIGRATIONS = (
    ("headline", "ALTER TABLE runs RENAME COLUMN tps TO headline"),
    ("headline_metric", "ALTER TABLE runs ADD COLUMN headline_metric TEXT"),
    ("headline_unit", "ALTER TABLE runs ADD COLUMN headline_unit TEXT"),
    ("dataset", "ALTER TABLE runs ADD COLUMN dataset TEXT"),
)
_COLUMNS = ("run_id, context, workload, status, started_at, ended_at, config, clients, "
            "headline, p99_ms, pg_version, headline_metric, headline_unit, dataset")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    context: str
    workload: str
    status: str
    started_at: str
    ended_at: str | None
    config: str | None
    clients: str | None
    headline: float | None
    """The workload's headline figure at its best client count."""
    p99_ms: float | None
    pg_version: str | None
    headline_metric: str | None = None
    """Its label: TPS, NOPM, events/s."""
    headline_unit: str | None = None
    dataset: str | None = None


class RunIndex:
    def __init__(self, results_dir: Path) -> None:
        self.root = results_dir
        self.path = results_dir / INDEX_FILE

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute(_SCHEMA)
        present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        for column, statement in _MIGRATIONS:
            if column not in present:
                conn.execute(statement)
        return conn

    def upsert(self, row: RunRow) -> None:
        with closing(self._connect()) as conn, conn:
            conn.execute(
                f"INSERT OR REPLACE INTO runs ({_COLUMNS}) VALUES ({','.join('?' * 14)})",
                (row.run_id, row.context, row.workload, row.status, row.started_at,
                 row.ended_at, row.config, row.clients, row.headline, row.p99_ms,
                 row.pg_version, row.headline_metric, row.headline_unit, row.dataset))

    def query(self, workload: str | None = None, context: str | None = None,
              status: str | None = None, limit: int = 100) -> list[RunRow]:
        if not self.path.exists():
            return []
        where, params = [], []
        for column, value in (("workload", workload), ("context", context), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")  # column names are fixed above, values bound
                params.append(value)
        sql = f"SELECT {_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC LIMIT ?"
        params.append(limit)
        with closing(self._connect()) as conn:
            return [RunRow(*r) for r in conn.execute(sql, params)]

    def get(self, run_id: str) -> RunRow | None:
        if not self.path.exists():
            return None
        with closing(self._connect()) as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ? OR run_id LIKE ?",
                               (run_id, f"%{run_id}")).fetchone()
        return RunRow(*row) if row else None

    def run_id_for(self, run_dir: Path) -> str:
        try:
            return str(run_dir.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(run_dir.resolve())


def find_run(ref: str | Path, results_dir: Path) -> Path:
    """A run given as a directory, or as the id (or its suffix) ``pgdyno runs`` prints."""
    path = Path(ref)
    if (path / "manifest.json").is_file():
        return path
    row = RunIndex(results_dir).get(str(ref))
    if row is not None:
        candidate = Path(row.run_id)
        if not candidate.is_absolute():
            candidate = results_dir / candidate
        if (candidate / "manifest.json").is_file():
            return candidate
    raise UsageError(f"run {ref}: neither a run directory nor a run in {results_dir}; "
                     "list runs with `pgdyno runs`")
