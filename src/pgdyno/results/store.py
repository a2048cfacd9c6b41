"""Where the index of runs is kept, chosen here and nowhere else: the SQLite file under the
results directory (the default), or a shared PostgreSQL database given by ``--results-db``
or ``PGDYNO_RESULTS_DB``, so that a team and a fleet keep one history.

Both backends have one interface (``RunStore``): ``pgdyno runs`` reads either with the same
filters, and a run writes its row through ``RecordingIndex``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from pgdyno.errors import UsageError
from pgdyno.redact import redact
from pgdyno.results.index import RunIndex, RunRow

RESULTS_DB_ENV = "PGDYNO_RESULTS_DB"
DSN_EXAMPLE = "postgresql://user@host:5432/dbname"


class RunStore(Protocol):
    """An index of runs: the SQLite file (RunIndex) or a PostgreSQL database (PgRunIndex)."""

    @property
    def exists(self) -> bool: ...

    @property
    def location(self) -> str:
        """Where the rows are, for messages (a DSN is redacted)."""
        ...

    def check(self) -> None: ...

    def upsert(self, row: RunRow) -> None: ...

    def upsert_many(self, rows: Sequence[RunRow]) -> int: ...

    def delete(self, run_id: str, host: str | None = None) -> None: ...

    def query(self, workload: str | None = None, context: str | None = None,
              status: str | None = None, limit: int = 100) -> list[RunRow]: ...

    def get(self, run_id: str) -> RunRow | None: ...


def results_db(value: str | None, option: str = "--results-db") -> str | None:
    """The shared database's DSN: ``value`` (an option), else ``PGDYNO_RESULTS_DB``; None:
    the SQLite index. Checked here, before anything runs."""
    if value is None:
        value, option = os.environ.get(RESULTS_DB_ENV), RESULTS_DB_ENV
    if value is None or not value.strip():
        return None
    check_dsn(value, option)
    return value.strip()


def check_dsn(dsn: str, option: str) -> None:
    """A PostgreSQL connection string (URI or keyword=value), or one line naming it
    (redacted: a mistyped DSN may still hold a password)."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    text = dsn.strip()
    is_uri = text.lower().startswith(("postgresql://", "postgres://"))
    try:
        if not is_uri and "=" not in text:
            raise ProgrammingError("not a URI nor keyword=value pairs")
        conninfo_to_dict(text)
    except ProgrammingError:
        raise UsageError(f"{option} {redact(text)}: not a PostgreSQL connection string; "
                         f"accepted: {DSN_EXAMPLE} (the password in ~/.pgpass or "
                         "PGPASSWORD, not on the command line)") from None


def open_index(results_dir: Path, dsn: str | None, option: str = "--results-db") -> RunStore:
    """The index of runs to read: the shared database when a DSN is given, else the SQLite
    index under ``results_dir``."""
    if dsn:
        from pgdyno.results.pgindex import PgRunIndex

        return PgRunIndex(dsn, option)
    return RunIndex(results_dir)


class RecordingIndex:
    """Where a run writes its row: the SQLite index under its results directory, always
    (``report RUN``, ``compare`` and ``note`` find run directories through it), and the
    shared database as well when one is given.

    The shared database is checked before the run starts (an unreachable or too new one is
    bad input); failing later, it costs a warning, never the run: the row is in the local
    index and ``pgdyno runs --sync-to`` pushes it afterwards."""

    def __init__(self, results_dir: Path, dsn: str | None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.local = RunIndex(results_dir)
        self.shared = open_index(results_dir, dsn) if dsn else None
        self._warn = warn or (lambda _line: None)

    def check(self) -> None:
        self.local.check()
        if self.shared is not None:
            self.shared.check()

    def run_id_for(self, run_dir: Path) -> str:
        return self.local.run_id_for(run_dir)

    def upsert(self, row: RunRow) -> None:
        self.local.upsert(row)
        if self.shared is None:
            return
        try:
            self.shared.upsert(row)
        except UsageError as exc:
            self._warn(f"{exc}; run {row.run_id} is in {self.local.path}: push it with "
                       "`pgdyno runs --sync-to DSN`")

    def delete(self, run_id: str, host: str | None = None) -> None:
        """Forget a run in both indexes (its directory is gone); a shared database that
        fails costs a warning."""
        self.local.delete(run_id, host)
        if self.shared is None:
            return
        try:
            self.shared.delete(run_id, host)
        except UsageError as exc:
            self._warn(f"{exc}; run {run_id} was refused and its directory removed, but "
                       "its row is still there")
