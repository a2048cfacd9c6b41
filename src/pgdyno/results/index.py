"""The index of runs under a results directory (SQLite), behind ``pgdyno runs``."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
    dataset      TEXT,               -- "scale 10", "10 warehouses", ...
    host         TEXT,               -- the machine the run was made on
    headline_direction TEXT,         -- higher | lower (is better)
    verdict      TEXT,               -- the bottleneck verdict at the peak
    settings     TEXT                -- JSON: the server's non-default settings
)"""
# Indexes written before the workload plugins had a TPS column and no dataset.
_MIGRATIONS = (
    ("headline", "ALTER TABLE runs RENAME COLUMN tps TO headline"),
    ("headline_metric", "ALTER TABLE runs ADD COLUMN headline_metric TEXT"),
    ("headline_unit", "ALTER TABLE runs ADD COLUMN headline_unit TEXT"),
    ("dataset", "ALTER TABLE runs ADD COLUMN dataset TEXT"),
    # What the shared results database keeps, kept here too.
    ("host", "ALTER TABLE runs ADD COLUMN host TEXT"),
    ("headline_direction", "ALTER TABLE runs ADD COLUMN headline_direction TEXT"),
    ("verdict", "ALTER TABLE runs ADD COLUMN verdict TEXT"),
    ("settings", "ALTER TABLE runs ADD COLUMN settings TEXT"),
)
ROW_COLUMNS = ("run_id", "context", "workload", "status", "started_at", "ended_at", "config",
               "clients", "headline", "p99_ms", "pg_version", "headline_metric",
               "headline_unit", "dataset", "host", "headline_direction", "verdict", "settings")
"""RunRow's fields in the order both index backends store and read them."""
_COLUMNS = ", ".join(ROW_COLUMNS)


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
    host: str | None = None
    """The hostname of the machine the run was made on (from its manifest)."""
    headline_direction: str | None = None
    """``higher`` or ``lower`` is better (None: the metric has no direction)."""
    verdict: str | None = None
    """The bottleneck verdict of the median iteration at the peak client count."""
    settings: dict[str, str] | None = field(default=None, hash=False)
    """The server's non-default settings during the run (passwords masked)."""


INDEX_SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of the index (0: written before it was recorded)."""
REINDEX = "rebuild it from the run directories with `pgdyno runs --reindex`"
_SIDE_FILES = ("-journal", "-wal", "-shm")
"""SQLite's files beside a database: moved with it, since a journal left beside the new
index would be rolled back into it."""


class RunIndex:
    def __init__(self, results_dir: Path) -> None:
        self.root = Path(results_dir)
        self.path = self.root / INDEX_FILE

    @property
    def exists(self) -> bool:
        return self.path.exists() or self.path.is_symlink()

    @contextmanager
    def _open(self, write: bool, untouched: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection to the index; every SQLite failure leaves as one line naming the
        file. Reading needs a complete index; writing creates or migrates it. ``untouched``:
        read the file as it is, without migrating it or rolling back a journal beside it
        (which SQLite would otherwise do, or delete as invalid): the file may be damaged."""
        if self.path.is_dir():
            raise UsageError(f"{self.path}: a directory is where the index of runs should be; "
                             f"{REINDEX}")
        try:
            with closing(self._connect(untouched)) as conn:
                self._check_version(conn)
                if write:
                    self._create(conn)
                else:
                    self._require_table(conn, migrate=not untouched)
                yield conn
        except sqlite3.Error as exc:
            raise self._damage(exc) from None

    def _connect(self, untouched: bool) -> sqlite3.Connection:
        if untouched:
            uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
            return sqlite3.connect(uri, uri=True)
        return sqlite3.connect(self.path, timeout=30)

    def _check_version(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > INDEX_SCHEMA_VERSION:
            raise UsageError(f"{self.path}: index of runs schema_version {version} is not "
                             f"supported (this pgdyno reads {INDEX_SCHEMA_VERSION}); {REINDEX}")

    def _create(self, conn: sqlite3.Connection) -> None:
        """The table, its columns and the version; written only when one is missing, so
        that reading an index never writes it (a read-only results directory)."""
        present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == INDEX_SCHEMA_VERSION and {c for c, _ in _MIGRATIONS} <= present:
            return
        with conn:
            conn.execute(_SCHEMA)
            present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
            for column, statement in _MIGRATIONS:
                if column not in present:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {INDEX_SCHEMA_VERSION}")

    def _require_table(self, conn: sqlite3.Connection, migrate: bool = True) -> None:
        """An index without its table was cut short or is another program's database:
        listing it as "no runs" would hide the runs on disk."""
        found = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                             "AND name = 'runs'").fetchone()[0]
        if not found:
            what = ("the file is empty" if self.path.stat().st_size == 0
                    else "a database without the runs table")
            raise UsageError(f"{self.path}: not an index of runs ({what}); {REINDEX}")
        present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        if migrate and not {c for c, _ in _MIGRATIONS} <= present:
            self._create(conn)  # an index of an older pgdyno gets its new columns

    def _damage(self, exc: sqlite3.Error) -> UsageError:
        detail = " ".join(str(exc).split())
        if "locked" in detail or "busy" in detail:
            return UsageError(f"{self.path}: the index of runs is busy ({detail}): another "
                              "pgdyno is writing it; try again")
        cut = self._truncation()
        return UsageError(f"{self.path}: damaged index of runs ({cut or detail}); {REINDEX}")

    def _truncation(self) -> str | None:
        """Says so when the file is shorter than its header says: SQLite only calls that
        "malformed", which does not tell the user that the file was cut."""
        try:
            with self.path.open("rb") as fh:
                header = fh.read(100)
            size = self.path.stat().st_size
        except OSError:
            return None
        if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
            return None
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        expected = page_size * int.from_bytes(header[28:32], "big")
        if size < expected:
            return f"the file is truncated: {size:,} of its {expected:,} bytes"
        return None

    def check(self, untouched: bool = False) -> None:
        """Raise the one-line UsageError of a damaged index (None: whole, or absent)."""
        if not self.exists:
            return
        with self._open(write=False, untouched=untouched) as conn:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
            conn.execute("SELECT * FROM runs").fetchall()
        if problems != ["ok"]:
            raise UsageError(f"{self.path}: damaged index of runs ({'; '.join(problems[:2])}); "
                             f"{REINDEX}")

    def upsert(self, row: RunRow) -> None:
        with self._open(write=True) as conn, conn:
            _insert(conn, row)

    def upsert_many(self, rows: list[RunRow]) -> int:
        """Every row, in one transaction; how many."""
        with self._open(write=True) as conn, conn:
            for row in rows:
                _insert(conn, row)
        return len(rows)

    def delete(self, run_id: str, host: str | None = None) -> None:
        """Forget a run whose directory is gone (refused before its first iteration)."""
        if not self.exists:
            return
        with self._open(write=True) as conn, conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    @property
    def location(self) -> str:
        """Where the rows are, for messages."""
        return str(self.path)

    def query(self, workload: str | None = None, context: str | None = None,
              status: str | None = None, limit: int = 100) -> list[RunRow]:
        if not self.exists:
            return []
        self.check()  # a truncated index would otherwise list some runs and hide others
        sql, params = listing_sql(_COLUMNS, "?", workload, context, status, limit)
        with self._open(write=False) as conn:
            return [_row(r) for r in conn.execute(sql, params)]

    def get(self, run_id: str) -> RunRow | None:
        if not self.exists:
            return None
        with self._open(write=False) as conn:
            sql, params = lookup_sql(_COLUMNS, "?", run_id)
            row = conn.execute(sql, params).fetchone()
        return _row(row) if row else None

    def run_id_for(self, run_dir: Path) -> str:
        try:
            return str(run_dir.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(run_dir.resolve())

    def rebuild(self, rows: list[RunRow]) -> Path | None:
        """Replace the index by one holding ``rows``, written beside it and renamed into
        place. A damaged old index is moved aside (``index.sqlite.damaged-<time>``, never
        deleted) and its path returned; a whole one is replaced."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{INDEX_FILE}.new-{os.getpid()}"
        for leftover in (tmp, *(Path(f"{tmp}{s}") for s in _SIDE_FILES)):
            leftover.unlink(missing_ok=True)
        try:
            with closing(sqlite3.connect(tmp)) as conn:
                self._create(conn)
                with conn:
                    for row in rows:
                        _insert(conn, row)
            moved = self._move_aside_if_damaged()
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return moved

    def _move_aside_if_damaged(self) -> Path | None:
        if not self.exists:
            return None
        try:
            self.check(untouched=True)
        except UsageError:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            aside = self.root / f"{INDEX_FILE}.damaged-{stamp}"
            suffix = 1
            while aside.exists() or aside.is_symlink():
                suffix += 1
                aside = self.root / f"{INDEX_FILE}.damaged-{stamp}-{suffix}"
            os.rename(self.path, aside)
            for side in _SIDE_FILES:
                if Path(f"{self.path}{side}").exists():
                    os.rename(f"{self.path}{side}", f"{aside}{side}")
            return aside
        # A whole index is replaced; its journal, if any, must not outlive it.
        for side in _SIDE_FILES:
            Path(f"{self.path}{side}").unlink(missing_ok=True)
        return None


def listing_sql(columns: str, placeholder: str, workload: str | None, context: str | None,
                status: str | None, limit: int) -> tuple[str, list[Any]]:
    """``pgdyno runs``' query, newest first, for either backend (``?`` for SQLite, ``%s``
    for psycopg): the filter column names are fixed here, the values bound."""
    where, params = [], []
    for column, value in (("workload", workload), ("context", context), ("status", status)):
        if value is not None:
            where.append(f"{column} = {placeholder}")
            params.append(value)
    sql = f"SELECT {columns} FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY started_at DESC, run_id DESC LIMIT {placeholder}"
    return sql, [*params, limit]


def lookup_sql(columns: str, placeholder: str, run_id: str) -> tuple[str, list[Any]]:
    """``get``'s query for either backend: the run with this id, else the newest run whose
    id ends with it (``_`` and ``%`` in the id are literal characters, not wildcards). The
    exact id always wins, so a suffix can never pick another run over the one named."""
    pattern = "%" + run_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    sql = (f"SELECT {columns} FROM runs WHERE run_id = {placeholder} "
           f"OR run_id LIKE {placeholder} ESCAPE '\\' "
           f"ORDER BY run_id = {placeholder} DESC, started_at DESC, run_id DESC LIMIT 1")
    return sql, [run_id, pattern, run_id]


def _insert(conn: sqlite3.Connection, row: RunRow) -> None:
    values = [getattr(row, name) for name in ROW_COLUMNS]
    values[-1] = (json.dumps(row.settings, sort_keys=True) if row.settings is not None
                  else None)
    conn.execute(
        f"INSERT OR REPLACE INTO runs ({_COLUMNS}) VALUES ({','.join('?' * len(ROW_COLUMNS))})",
        values)


def _row(values: tuple) -> RunRow:
    """A RunRow from the columns of ROW_COLUMNS (settings: JSON text in SQLite)."""
    data = dict(zip(ROW_COLUMNS, values, strict=True))
    text = data["settings"]
    try:
        data["settings"] = json.loads(text) if text else None
    except ValueError:
        data["settings"] = None  # damaged text in one cell: the rest of the row stands
    return RunRow(**data)


def find_run(ref: str | Path, results_dir: Path) -> Path:
    """A run given as a directory, or as the id (or its suffix) ``pgdyno runs`` prints.

    A directory is taken as given: a missing manifest is named here, a damaged one by
    whoever reads it."""
    path = Path(ref)
    if path.is_dir():
        manifest = path / "manifest.json"
        if manifest.exists() or manifest.is_symlink():
            return path
        raise UsageError(f"{manifest}: missing; {path} is not a complete pgdyno run directory")
    index = RunIndex(results_dir)
    if not index.exists:
        raise UsageError(f"run {ref}: not a run directory, and {index.path} is missing (the "
                         "index of runs); give the run's directory, or build the index with "
                         "`pgdyno runs --reindex`")
    row = index.get(str(ref))
    if row is not None:
        candidate = Path(row.run_id)
        if not candidate.is_absolute():
            candidate = results_dir / candidate
        if (candidate / "manifest.json").exists():
            return candidate
    raise UsageError(f"run {ref}: neither a run directory nor a run in {results_dir}; "
                     "list runs with `pgdyno runs`")


def run_manifests(results_dir: Path) -> list[Path]:
    """Every run's manifest under ``results_dir`` (``CONTEXT/RUN/manifest.json``)."""
    return sorted(Path(results_dir).glob("*/*/manifest.json"))
