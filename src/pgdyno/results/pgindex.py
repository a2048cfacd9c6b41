"""The index of runs in a shared PostgreSQL database (``--results-db``): the SQLite index's
interface over psycopg 3, so that a team and a fleet keep one history.

The schema is versioned: numbered SQL files (``migrations/NNNN_name.sql``) shipped with
pgdyno, each applied once, in order, in a transaction of its own, and recorded in
``schema_migrations``. A database that a newer pgdyno has migrated is refused: its rows may
mean what this version cannot read. The DSN appears only redacted (``location``), in every
message and error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from importlib.abc import Traversable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgdyno import __version__
from pgdyno.errors import UsageError
from pgdyno.redact import redact
from pgdyno.results.index import ROW_COLUMNS, RunRow, listing_sql, lookup_sql

MIGRATION_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
_LOCK_KEY = 0x70676479_6E6F  # "pgdyno": pg_advisory_xact_lock while migrating
"""Two pgdyno processes (two hosts of a fleet) migrating one database at once take turns."""
_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text NOT NULL        -- the pgdyno version that applied it
)"""
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""How manifests write times (results.rundir.utc_now), so both backends list the same text."""
_TIMES = ("started_at", "ended_at")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def shipped_migrations() -> list[Migration]:
    return read_migrations(resources.files("pgdyno.results").joinpath("migrations"))


def read_migrations(folder: Traversable) -> list[Migration]:
    """Every ``NNNN_name.sql`` of ``folder``, by version; two files of one version are a
    packaging error, named."""
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        match = MIGRATION_FILE.fullmatch(entry.name)
        if match is None:
            continue
        version = int(match.group(1))
        if version in found:
            raise UsageError(f"{folder}: two migrations numbered {version:04d} "
                             f"({found[version].name}, {match.group(2)})")
        found[version] = Migration(version, match.group(2), entry.read_text())
    return [found[v] for v in sorted(found)]


def migrate(conn: psycopg.Connection, migrations: Sequence[Migration], where: str) -> list[int]:
    """Apply the migrations ``conn``'s database lacks, each in one transaction; the versions
    applied. Refuses a database whose schema is newer than the newest of ``migrations``."""
    latest = max((m.version for m in migrations), default=0)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(_SCHEMA_MIGRATIONS)
        current = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
    if current is not None and current > latest:
        raise UsageError(f"{where}: the results database's schema is version {current}, newer "
                         f"than this pgdyno's ({latest}); upgrade pgdyno to use it")
    applied = []
    for migration in sorted(migrations, key=lambda m: m.version):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            done = conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s",
                                (migration.version,)).fetchone()
            if done:
                continue  # applied earlier, or by another pgdyno while this one waited
            conn.execute(migration.sql)  # no parameters: sent as is, several statements
            conn.execute("INSERT INTO schema_migrations (version, name, applied_by) "
                         "VALUES (%s, %s, %s)", (migration.version, migration.name,
                                                 f"pgdyno {__version__}"))
            applied.append(migration.version)
    return applied


class PgRunIndex:
    """The runs table of a PostgreSQL database, migrated on first use."""

    exists = True
    """Always there to query (an empty table lists no runs), unlike a missing SQLite file."""

    def __init__(self, dsn: str, option: str = "--results-db",
                 migrations: Sequence[Migration] | None = None) -> None:
        self._dsn = dsn
        self.option = option
        self._migrations = list(migrations) if migrations is not None \
            else shipped_migrations()
        self._migrated = False

    @property
    def location(self) -> str:
        return redact(self._dsn)

    @property
    def where(self) -> str:
        return f"{self.option} {self.location}"

    @contextmanager
    def _connect(self) -> Iterator[psycopg.Connection]:
        """A connection with the schema up to date; every database failure leaves as one
        line naming the (redacted) database."""
        try:
            with psycopg.connect(self._dsn, connect_timeout=15,
                                 application_name="pgdyno") as conn:
                if not self._migrated:
                    migrate(conn, self._migrations, self.where)
                    self._migrated = True
                yield conn
        except psycopg.Error as exc:
            detail = redact(" ".join(str(exc).split())) or type(exc).__name__
            raise UsageError(f"{self.where}: {detail}") from None

    def check(self) -> None:
        """Reachable, and migrated (or refused as too new)."""
        with self._connect():
            pass

    def applied_versions(self) -> list[int]:
        with self._connect() as conn:
            return [r[0] for r in conn.execute(
                "SELECT version FROM schema_migrations ORDER BY version")]

    def upsert(self, row: RunRow) -> None:
        self.upsert_many([row])

    def upsert_many(self, rows: Sequence[RunRow]) -> int:
        """Every row in one transaction (all or none); how many. A run is its (run_id,
        host): pushing the same runs again updates them."""
        columns = ", ".join(ROW_COLUMNS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in ROW_COLUMNS
                            if c not in ("run_id", "host"))
        sql = (f"INSERT INTO runs ({columns}) VALUES ({', '.join(['%s'] * len(ROW_COLUMNS))}) "
               f"ON CONFLICT (run_id, host) DO UPDATE SET {updates}, recorded_at = now()")
        params = [self._params(row) for row in rows]
        with self._connect() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(sql, params)
        return len(params)

    def delete(self, run_id: str, host: str | None = None) -> None:
        """Forget a run whose directory is gone (refused before its first iteration)."""
        with self._connect() as conn, conn.transaction():
            conn.execute("DELETE FROM runs WHERE run_id = %s AND host = %s",
                         (run_id, host or ""))

    def _params(self, row: RunRow) -> list[Any]:
        values: dict[str, Any] = {name: getattr(row, name) for name in ROW_COLUMNS}
        values["host"] = row.host or ""  # part of the key: never NULL
        for name in _TIMES:
            values[name] = _parse_time(values[name], row.run_id, name)
        values["settings"] = Jsonb(row.settings) if row.settings is not None else None
        return [values[name] for name in ROW_COLUMNS]

    def query(self, workload: str | None = None, context: str | None = None,
              status: str | None = None, limit: int = 100) -> list[RunRow]:
        sql, params = listing_sql(", ".join(ROW_COLUMNS), "%s", workload, context, status,
                                  limit)
        with self._connect() as conn:
            return [_row(r) for r in conn.execute(sql, params)]

    def get(self, run_id: str) -> RunRow | None:
        """The run with this id, or ending with it (the newest, when several hosts have
        one)."""
        sql, params = lookup_sql(", ".join(ROW_COLUMNS), "%s", run_id)
        with self._connect() as conn:
            row = conn.execute(sql, params).fetchone()
        return _row(row) if row else None


def _parse_time(text: str | None, run_id: str, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"run {run_id}: {name} {text!r} is not a time (accepted: "
                         "2026-01-31T12:00:00Z); rebuild its manifest or leave it out") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _row(values: Sequence[Any]) -> RunRow:
    data = dict(zip(ROW_COLUMNS, values, strict=True))
    for name in _TIMES:
        if data[name] is not None:
            data[name] = data[name].astimezone(UTC).strftime(_TIME_FORMAT)
    data["host"] = data["host"] or None  # "" stands for unknown in the key
    return RunRow(**data)
