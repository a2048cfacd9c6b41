"""The index of runs under a results directory (SQLite), behind ``pgdyno runs``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

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
    tps          REAL,
    p99_ms       REAL,
    pg_version   TEXT
)"""


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
    tps: float | None
    p99_ms: float | None
    pg_version: str | None


class RunIndex:
    def __init__(self, results_dir: Path) -> None:
        self.root = results_dir
        self.path = results_dir / INDEX_FILE

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute(_SCHEMA)
        return conn

    def upsert(self, row: RunRow) -> None:
        with closing(self._connect()) as conn, conn:
            conn.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (row.run_id, row.context, row.workload, row.status, row.started_at,
                 row.ended_at, row.config, row.clients, row.tps, row.p99_ms, row.pg_version))

    def query(self, workload: str | None = None, context: str | None = None,
              status: str | None = None, limit: int = 100) -> list[RunRow]:
        if not self.path.exists():
            return []
        where, params = [], []
        for column, value in (("workload", workload), ("context", context), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")  # column names are fixed above, values bound
                params.append(value)
        sql = "SELECT * FROM runs"
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
            row = conn.execute("SELECT * FROM runs WHERE run_id = ? OR run_id LIKE ?",
                               (run_id, f"%{run_id}")).fetchone()
        return RunRow(*row) if row else None

    def run_id_for(self, run_dir: Path) -> str:
        try:
            return str(run_dir.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(run_dir.resolve())
