"""``--cache prewarmed``: the workload's dataset read into shared_buffers before the first
iteration, with PostgreSQL's own pg_prewarm.

Why: every run on a server pgdyno starts begins with empty shared_buffers, so a short
window may measure the filling of the buffer cache as well as the config: a large
shared_buffers pays for its first touch of every page inside the window. Prewarming moves
that cost before the window. (Measured with bench/cold_trials.py on TPC-B scale 50, 20 s
windows: prewarmed and warm were level for the stock 128 MB and pgtune's 6 GB alike, so it
is not what ranked a configuration search's short trials, bench/RESULTS.md; on data that
must come from disk it can be.)

What is read: the dataset's tables (``Workload.dataset_tables``; a partitioned table's
leaves), their indexes first (every transaction walks them), then their heaps and TOAST,
in that order until shared_buffers would be full: reading more would only evict what was
read first. pg_prewarm is created for the occasion in the workload's own schema when the
database does not have it, and dropped afterwards; a role that cannot create it gets one
line saying how to install it, on a --dsn server before anything is created
(``check_may_prewarm``, from the pre-flight).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

from pgdyno.errors import RunFailed, UsageError
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.units import format_bytes

FILL_SHARE = 0.9
"""Read at most this share of shared_buffers: the rest stays free for what the run's own
writes and catalog reads need."""

RELATIONS_SQL = """
WITH named AS (
    SELECT c.oid, c.relkind FROM unnest(%(tables)s::text[]) AS name
    JOIN pg_class c ON c.oid = to_regclass(name)
), leaves AS (
    SELECT oid FROM named WHERE relkind <> 'p'
    UNION ALL
    SELECT t.relid::oid FROM named n, LATERAL pg_partition_tree(n.oid) AS t
    WHERE n.relkind = 'p' AND t.isleaf
), parts AS (
    SELECT i.indexrelid AS oid, 1 AS rank FROM pg_index i JOIN leaves l ON i.indrelid = l.oid
    UNION ALL SELECT l.oid, 2 FROM leaves l
    UNION ALL SELECT c.reltoastrelid, 3 FROM pg_class c JOIN leaves l ON c.oid = l.oid
              WHERE c.reltoastrelid <> 0
    UNION ALL SELECT i.indexrelid, 3 FROM pg_class c JOIN leaves l ON c.oid = l.oid
              JOIN pg_index i ON i.indrelid = c.reltoastrelid
)
SELECT oid, oid::regclass::text, pg_relation_size(oid)
FROM parts ORDER BY rank, pg_relation_size(oid) DESC
"""
"""The relations to read, in order: indexes, heaps, TOAST (largest first within each)."""


@dataclass(frozen=True)
class PrewarmResult:
    relations: int
    """How many relations were read (whole; empty ones left out)."""
    read_bytes: int
    dataset_bytes: int
    """The size of every relation of the dataset: more than read_bytes when it does not fit."""
    shared_buffers_bytes: int
    seconds: float

    def note(self) -> str:
        whole = ("all of the dataset" if self.read_bytes >= self.dataset_bytes
                 else f"{format_bytes(self.read_bytes)} of the dataset's "
                      f"{format_bytes(self.dataset_bytes)} (what fits)")
        return (f"cache prewarmed: {whole}, {format_bytes(self.read_bytes)} in "
                f"{self.relations} relations, read into shared_buffers "
                f"({format_bytes(self.shared_buffers_bytes)}) with pg_prewarm in "
                f"{self.seconds:.1f} s before the first iteration")


def prewarm(conn: ConnectionInfo, tables: list[str]) -> PrewarmResult:
    """Read ``tables`` (names as the workload writes them, resolved through ``conn``'s
    search path) and their indexes into shared_buffers."""
    started = time.monotonic()
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        schema, created = _ensure_extension(db)
        call = sql.SQL("SELECT {}.pg_prewarm(%s::regclass, 'buffer')").format(
            sql.Identifier(schema))
        try:
            shared = db.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))"
                                ).fetchone()[0]
            relations = db.execute(RELATIONS_SQL, {"tables": tables}).fetchall()
            budget = int(shared * FILL_SHARE)
            read = count = 0
            for oid, _name, size in relations:
                if size == 0 or read + size > budget:
                    continue  # empty; or too big, and a smaller one further on may fit
                db.execute(call, (oid,))
                read += size
                count += 1
        finally:
            if created:
                db.execute("DROP EXTENSION pg_prewarm")
    return PrewarmResult(relations=count, read_bytes=read,
                         dataset_bytes=sum(size for _, _, size in relations),
                         shared_buffers_bytes=shared, seconds=time.monotonic() - started)


EXTENSION_SCHEMA_SQL = ("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                        "ON n.oid = e.extnamespace WHERE e.extname = 'pg_prewarm'")

MAY_PREWARM_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm') AS installed,
       EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm') AS available,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
       COALESCE((SELECT NOT v.superuser
                        OR (COALESCE((to_jsonb(v) ->> 'trusted')::bool, false)
                            AND has_database_privilege(current_database(), 'CREATE'))
                 FROM pg_available_extensions e
                 JOIN pg_available_extension_versions v
                   ON v.name = e.name AND v.version = e.default_version
                 WHERE e.name = 'pg_prewarm'), false) AS may_create,
       current_user
"""
"""Whether this role may use pg_prewarm here without creating anything: it is there, or
the role may create it (a superuser; or a trusted extension and CREATE on the database).
``trusted`` is read through to_jsonb because the column exists from PostgreSQL 13 only."""


def check_may_prewarm(conn: ConnectionInfo) -> None:
    """``--cache prewarmed`` on a server pgdyno does not own (``--dsn``): refused before
    anything is created (a run directory, the dataset in the user's database) when pg_prewarm
    is neither in the database nor creatable by this role. A server pgdyno starts is its own
    (pgdyno's role is its superuser), and does not run yet when this is checked."""
    try:
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            installed, available, superuser, may_create, role = db.execute(
                MAY_PREWARM_SQL).fetchone()
    except psycopg.Error as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"--cache prewarmed: cannot check for pg_prewarm on "
                         f"{conn.describe()} ({reason})") from None
    if installed or (available and (superuser or may_create)):
        return
    why = (f"role {role} may not create it (only a superuser may)" if available else
           "the server does not have it (PostgreSQL's contrib modules are not installed)")
    raise UsageError(f"--cache prewarmed: pg_prewarm is not in this database and {why}; "
                     "install the contrib modules (Debian: postgresql-contrib) and run CREATE "
                     "EXTENSION pg_prewarm as a superuser, or use --cache warm")


def _ensure_extension(db: psycopg.Connection) -> tuple[str, bool]:
    """The schema holding pg_prewarm in this database, and whether it was created here (in
    the first schema of the search path: the workload's own)."""
    if row := db.execute(EXTENSION_SCHEMA_SQL).fetchone():
        return row[0], False
    try:
        db.execute("CREATE EXTENSION pg_prewarm")
        return db.execute(EXTENSION_SCHEMA_SQL).fetchone()[0], True
    except psycopg.Error as exc:
        raise RunFailed(f"--cache prewarmed: pg_prewarm cannot be created in this database "
                        f"({exc.diag.message_primary or exc}); install PostgreSQL's contrib "
                        "modules (Debian: postgresql-contrib) and run CREATE EXTENSION "
                        "pg_prewarm as a superuser, or use --cache warm") from None
