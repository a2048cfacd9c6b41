"""The maintenance debt a run leaves, sampled while it runs: ``debt.jsonl``.

One sampler on the TelemetryRecorder's threads (through its public interface, like
``telemetry.archiver``): every ``DEBT_INTERVAL_S`` and once more after the load stopped,
one line with the server's autovacuum and checkpoint settings, the autovacuum workers at
work, the WAL written since the last checkpoint's redo point, and each user table's live
and dead tuples (``pg_stat_user_tables``). The analysis (``pgdyno.analysis.debt``) turns
the readings of a measured window into a ``MaintenanceDebt``.

pg_stat_user_tables is per database, so this sampler connects to the workload's database,
not to the samplers' ``postgres``: each reading is one transaction there, counted in its
xact_commit. Its commit time is recorded (``t_commit``) so that TPROC-C's TPM, which reads
that counter, leaves the readings inside its window out exactly, as it does its own
snapshots.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pgdyno.analysis.debt import DEBT_FILE
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.telemetry import catalog
from pgdyno.telemetry.files import JsonlWriter

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

DEBT_INTERVAL_S = 2.0
"""Often enough for a reading near the start of a short window; rare enough that its
transactions stay out of the way."""


class Samplers(Protocol):
    out: Path
    conn: ConnectionInfo | None

    def spawn(self, name: str, target: Callable[[], None]) -> None: ...
    def ticks(self, period_s: float) -> Iterator[None]: ...
    def record_error(self, sampler: str, exc: BaseException) -> None: ...
    def connect(self, dbname: str | None) -> psycopg.Connection: ...


def start_debt(recorder: Samplers) -> None:
    """Spawn the debt sampler on ``recorder``'s threads."""
    recorder.spawn("debt", lambda: _debt_loop(recorder))


def read_debt(pgconn: psycopg.Connection) -> dict[str, Any]:
    """One reading: {t, server: {...settings, workers, wal_since_redo_bytes}, tables: [...]}."""
    import psycopg

    reading: dict[str, Any] = {"t": time.time()}
    cur = pgconn.execute(catalog.DEBT_SERVER_SQL)
    row = cur.fetchone()
    server = dict(zip([d.name for d in cur.description or []], row or (), strict=False))
    try:
        with pgconn.transaction():  # a savepoint: the reading's one transaction goes on
            wal = pgconn.execute(catalog.DEBT_WAL_SQL).fetchone()
        server["wal_since_redo_bytes"] = float(wal[0]) if wal and wal[0] is not None else None
    except psycopg.Error:  # no right to pg_control_checkpoint(): the figure is missing
        server["wal_since_redo_bytes"] = None
    reading["server"] = server
    cur = pgconn.execute(catalog.DEBT_TABLES_SQL)
    cols = [d.name for d in cur.description or []]
    reading["tables"] = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    return reading


def _one_transaction(pgconn: psycopg.Connection) -> dict[str, Any]:
    """A reading in one transaction of the workload's database, with its commit time."""
    with pgconn.transaction():
        reading = read_debt(pgconn)
    return reading | {"t_commit": time.time()}


def _debt_loop(recorder: Samplers) -> None:
    writer = JsonlWriter(recorder.out / DEBT_FILE)
    pgconn: psycopg.Connection | None = None
    assert recorder.conn is not None
    conn = recorder.conn
    try:
        for _ in recorder.ticks(DEBT_INTERVAL_S):
            try:
                if pgconn is None or pgconn.closed:
                    pgconn = recorder.connect(conn.dbname)
                writer.write(_one_transaction(pgconn))
            except Exception as exc:  # noqa: BLE001 - telemetry never breaks a run
                recorder.record_error("debt", exc)
                if pgconn is not None and (pgconn.closed or pgconn.broken):
                    pgconn = None
        # The reading that ends the window: taken after the load stopped.
        try:
            if pgconn is None or pgconn.closed:
                pgconn = recorder.connect(conn.dbname)
            writer.write(_one_transaction(pgconn) | {"final": True})
        except Exception as exc:  # noqa: BLE001
            recorder.record_error("debt", exc)
    finally:
        if pgconn is not None:
            with contextlib.suppress(Exception):
                pgconn.close()
        writer.close()
