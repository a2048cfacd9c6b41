"""Guarding and reusing datasets: pgdyno never initialises over tables it did not create.

Every dataset pgdyno builds is recorded in ``public.pgdyno_dataset`` (workload, size
key, the tables it made). Before building, pgdyno lists the user tables in the target
database; any table not recorded there is *foreign*, and initialisation stops with a
clear error unless the user passed ``--force``. A recorded dataset of the same size
whose tables all still exist is reused instead of rebuilt.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from pgdyno.errors import UsageError

REGISTRY_TABLE = "pgdyno_dataset"

_CREATE_REGISTRY = f"""
CREATE TABLE IF NOT EXISTS public.{REGISTRY_TABLE} (
    workload    text PRIMARY KEY,
    size_key    text NOT NULL,
    tables      text[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    build_seconds double precision,
    pgdyno_version text
)"""

_USER_TABLES = """
SELECT n.nspname || '.' || c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND c.relispartition = false
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%'
ORDER BY 1"""


@dataclass(frozen=True)
class DatasetState:
    """What the database holds before a workload initialises."""

    reusable: bool
    """A pgdyno dataset of this workload and size exists with all its tables."""
    recorded_size: str | None
    foreign_tables: tuple[str, ...]


def inspect(conn: psycopg.Connection, workload: str, size_key: str,
            tables: list[str]) -> DatasetState:
    """Look at the database without changing it."""
    present = {row[0] for row in conn.execute(_USER_TABLES)}
    ours: set[str] = {f"public.{REGISTRY_TABLE}"}
    recorded_size = None
    if f"public.{REGISTRY_TABLE}" in present:
        for wl, size, recorded in conn.execute(
                f"SELECT workload, size_key, tables FROM public.{REGISTRY_TABLE}"):
            ours.update(_qualify(t) for t in recorded)
            if wl == workload:
                recorded_size = size
    foreign = tuple(sorted(present - ours))
    wanted = {_qualify(t) for t in tables}
    reusable = recorded_size == size_key and wanted <= present
    return DatasetState(reusable, recorded_size, foreign)


def check_can_initialise(state: DatasetState, dbname: str, force: bool) -> None:
    """Refuse to build into a database holding tables pgdyno did not create."""
    if state.foreign_tables and not force:
        shown = ", ".join(state.foreign_tables[:5])
        more = f" and {len(state.foreign_tables) - 5} more" if len(state.foreign_tables) > 5 else ""
        raise UsageError(
            f"database {dbname} holds tables pgdyno did not create ({shown}{more}); "
            "refusing to initialise a workload there: use another database or --force"
        )


def refuse_name_collisions(tables: list[str], state: DatasetState, what: str) -> None:
    """Even with --force, never drop or overwrite a table of the user's that has one of the
    workload's names (``what``: "pgbench's", "TPROC-C's"): --force only lets a workload be
    built beside foreign tables, never over them."""
    clashing = sorted({_qualify(t) for t in tables}.intersection(state.foreign_tables))
    if clashing:
        raise UsageError(
            f"the database already has tables named like {what} ({', '.join(clashing)}) "
            "that pgdyno did not create; refusing to replace them, even with --force: "
            "use another database, or rename them")


def record(conn: psycopg.Connection, workload: str, size_key: str, tables: list[str],
           build_seconds: float, version: str) -> None:
    """Remember a dataset pgdyno just built (after a successful initialisation)."""
    conn.execute(_CREATE_REGISTRY)
    conn.execute(
        f"""INSERT INTO public.{REGISTRY_TABLE}
                (workload, size_key, tables, build_seconds, pgdyno_version)
            VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT (workload) DO UPDATE SET size_key = EXCLUDED.size_key,
                tables = EXCLUDED.tables, created_at = now(),
                build_seconds = EXCLUDED.build_seconds,
                pgdyno_version = EXCLUDED.pgdyno_version""",
        (workload, size_key, [_qualify(t) for t in tables], build_seconds, version),
    )


def claim(conn: psycopg.Connection, workload: str, size_key: str, tables: list[str],
          version: str) -> None:
    """Record the tables a build is about to make, before it touches anything, under a
    size that never matches: an interrupted build (Ctrl-C, a crash) is then neither
    reused nor mistaken for foreign tables, and the next run rebuilds it without --force."""
    record(conn, workload, f"{size_key} {INCOMPLETE}", tables, 0.0, version)


INCOMPLETE = "(incomplete)"


def _qualify(table: str) -> str:
    return table if "." in table else f"public.{table}"
