"""PostgreSQL sampling: wait events (active session history) and statistics snapshots.

Each sampler owns one autocommit connection, named ``pgdyno-telemetry`` so that the wait
sampler leaves the telemetry connections themselves out of the picture.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pgdyno.targets.connection import ConnectionInfo
from pgdyno.telemetry import catalog

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_S = 5
# A statistics query slower than this means the server is in trouble; give up on that tick
# rather than pile up behind it.
STATEMENT_TIMEOUT_MS = 2000


def connect(conn: ConnectionInfo, dbname: str | None = None) -> psycopg.Connection:
    import psycopg

    pg = psycopg.connect(conn.conninfo(dbname), autocommit=True,
                         connect_timeout=CONNECT_TIMEOUT_S,
                         application_name=catalog.APPLICATION_NAME)
    pg.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
    # Telemetry must not wait on locks a benchmark holds, nor take part in parallel plans.
    pg.execute("SET lock_timeout = 500")
    pg.execute("SET max_parallel_workers_per_gather = 0")
    return pg


def server_version_num(pg: psycopg.Connection) -> int:
    row = pg.execute("SELECT current_setting('server_version_num')::int").fetchone()
    return int(row[0]) if row else 0


def read_settings(pg: psycopg.Connection) -> dict[str, dict[str, str | None]]:
    rows = pg.execute(catalog.SETTINGS_SQL, {"names": list(catalog.SETTINGS_OF_INTEREST)})
    return {name: {"setting": setting, "unit": unit} for name, setting, unit in rows}


class WaitSampler:
    """The wait sampling query, ten times a second, through libpq itself: grouped rows
    ``[backend_type, state, wait_event_type, wait_event, count]``. One sampler per
    sampling thread: it prepares its statement once on each connection it is given.

    psycopg's cursor (parameters adapted, rows typed, a cursor object) cost 0.30 ms of
    pgdyno's CPU a sample at 80,000 TPS on 2 cores; the statement prepared once per
    connection and run on psycopg's own libpq connection, 0.09 ms: at 10 Hz, 2 ms of CPU a
    second spared, a tenth of a percent of a 2-core host. The parameters and
    the five columns are text (the last a count), so there is nothing to adapt."""

    def __init__(self) -> None:
        self._prepared_on: object | None = None
        self._preparations = 0
        self._name = b""

    def sample(self, pg: psycopg.Connection) -> list[list]:
        import psycopg

        raw = pg.pgconn
        if self._prepared_on is not raw:
            # A new name each time: after a failed sample the old one may still exist.
            self._preparations += 1
            self._name = b"pgdyno_waits_%d" % self._preparations
            _check(raw.prepare(self._name, catalog.WAIT_SAMPLE_SQL.encode()))
            self._prepared_on = raw
        try:
            res = _check(raw.exec_prepared(self._name, catalog.wait_sample_params()))
        except psycopg.Error:
            self._prepared_on = None  # prepared again at the next tick, in case it is gone
            raise
        rows = []
        for i in range(res.ntuples):
            texts = [(res.get_value(i, j) or b"").decode() for j in range(4)]
            rows.append([*texts, int(res.get_value(i, 4) or 0)])
        return rows


def _check(res: psycopg.pq.abc.PGresult) -> psycopg.pq.abc.PGresult:
    """A libpq result that is not a success raised as psycopg would raise it."""
    import psycopg

    if res.status not in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
        message = (res.error_message or b"").decode(errors="replace").strip()
        raise psycopg.OperationalError(message or f"libpq status {res.status.name}")
    return res


def snapshot_stats(pg: psycopg.Connection, cat: catalog.Catalog, dbname: str) -> dict:
    """One snapshot of the single-row views and pg_stat_io, stamped when it was taken."""
    snap: dict = {"t": time.time(), "mono": time.monotonic()}
    with pg.transaction():
        # One transaction, so that a counter read by two queries (pg_stat_io feeds the WAL
        # query on PG18) is fetched once and cannot disagree with itself.
        for name, sql in cat.snapshot_queries().items():
            cur = pg.execute(sql, {"dbname": dbname}, prepare=True)
            row = cur.fetchone()
            cols = [d.name for d in cur.description or []]
            snap[name] = dict(zip(cols, row, strict=True)) if row else None
        io_sql = cat.io_sql()
        if io_sql is not None:
            cur = pg.execute(io_sql, prepare=True)
            cols = [d.name for d in cur.description or []]
            snap["io"] = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    return snap
