"""PostgreSQL sampling: wait events (active session history) and statistics snapshots.

Each sampler owns one autocommit connection, named ``pgdyno-telemetry`` so that the wait
sampler leaves the telemetry connections themselves out of the picture.
"""

from __future__ import annotations

import time

import psycopg

from pgdyno.targets.connection import ConnectionInfo
from pgdyno.telemetry import catalog

CONNECT_TIMEOUT_S = 5
# A statistics query slower than this means the server is in trouble; give up on that tick
# rather than pile up behind it.
STATEMENT_TIMEOUT_MS = 2000


def connect(conn: ConnectionInfo, dbname: str | None = None) -> psycopg.Connection:
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


def sample_waits(pg: psycopg.Connection) -> list[list]:
    """Grouped rows: [backend_type, state, wait_event_type, wait_event, count]."""
    params = {"types": list(catalog.SAMPLED_BACKEND_TYPES), "app": catalog.APPLICATION_NAME}
    cur = pg.execute(catalog.WAIT_SAMPLE_SQL, params, prepare=True)
    return [list(row) for row in cur.fetchall()]


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
