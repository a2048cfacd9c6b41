"""Guarding and reusing datasets: pgdyno creates, and drops, only what it can prove is its own.

Every workload's objects live in a schema of pgdyno's own (``pgdyno_bench``; TPROC-H,
whose ``customer`` and ``orders`` are not TPROC-C's, in ``pgdyno_tpch``), created by pgdyno
with an ownership marker (its comment). Workload connections resolve unqualified names in
that schema only (``search_path=pgdyno_bench``, for psycopg and for pgbench through
``PGOPTIONS``), so a user's ``alice.customer`` or ``public.pgbench_history`` is never found
by name, never dropped, never filled, whatever the role's search_path says.

Every dataset pgdyno builds is recorded in its schema's ``pgdyno_dataset`` (workload, size
key, the tables it made). Before building, pgdyno lists the user tables in the whole
database; any table not recorded there is *foreign*, and initialisation stops with a clear
error unless the user passed ``--force`` (which lets the workload be built beside them, in
its own schema). A table of a workload's name inside pgdyno's schema that pgdyno did not
record stops the build even with ``--force``. Before any DROP, pgdyno checks the schema's
marker and drops schema-qualified names only. A recorded dataset of the same size whose
tables all still exist is reused instead of rebuilt.

Datasets of pgdyno before the schema (recorded in ``public.pgdyno_dataset``) still count as
pgdyno's, so they are not foreign; they are never dropped or reused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pgdyno import __version__
from pgdyno.errors import UsageError
from pgdyno.targets.connection import ConnectionInfo

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

SCHEMA = "pgdyno_bench"
"""pgdyno's own schema in the workload database (not ``pgdyno``: that is the embedded
server's role, and so the role's own ``"$user"`` schema, the user's place)."""
MARKER = ("created by pgdyno for its workload tables; pgdyno drops only the tables "
          "recorded in this schema's pgdyno_dataset")
"""The schema's comment: the proof that the schema is pgdyno's, checked before any DROP."""
REGISTRY_TABLE = "pgdyno_dataset"
LEGACY_REGISTRY = f"public.{REGISTRY_TABLE}"
"""Where releases before the schema recorded their datasets."""

_CREATE_REGISTRY = """
CREATE TABLE IF NOT EXISTS {}.{} (
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

_SCHEMA_MARKER = """
SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s"""
_MARKED_SCHEMAS = """
SELECT nspname FROM pg_namespace WHERE obj_description(oid, 'pg_namespace') = %s
ORDER BY 1"""


def scoped(conn: ConnectionInfo, schema: str = SCHEMA) -> ConnectionInfo:
    """The workload's way in: unqualified names resolve in pgdyno's schema only."""
    return conn.in_schema(schema)


def qualified(table: str, schema: str = SCHEMA) -> str:
    """``pgdyno_bench.table`` (a table name as the workloads write it, unqualified)."""
    return table if "." in table else f"{schema}.{table}"


@dataclass(frozen=True)
class DatasetState:
    """What the database holds before a workload initialises."""

    reusable: bool
    """A pgdyno dataset of this workload and size exists with all its tables."""
    recorded_size: str | None
    foreign_tables: tuple[str, ...]
    """Schema-qualified tables pgdyno did not create, anywhere in the database."""
    ours: tuple[str, ...] = ()
    """Schema-qualified tables recorded in the registry of ``schema`` (all its workloads)."""
    schema: str = SCHEMA
    """The schema of pgdyno's this workload builds in."""
    build_seconds: float | None = None
    """The seconds the recorded build of this workload took (None: none recorded), which a
    reused dataset's load record names."""


def inspect(conn: psycopg.Connection, workload: str, size_key: str,
            tables: list[str], schema: str = SCHEMA) -> DatasetState:
    """Look at the database without changing it."""
    from psycopg import sql

    present = {row[0] for row in conn.execute(_USER_TABLES)}
    ours: set[str] = set()
    recorded_size = None
    registries = [(LEGACY_REGISTRY, "public")] + [
        (f"{name}.{REGISTRY_TABLE}", name)
        for (name,) in conn.execute(_MARKED_SCHEMAS, (MARKER,))]
    for registry, home in registries:
        if registry not in present:
            continue
        ours.add(registry)
        for wl, size, recorded in conn.execute(sql.SQL(
                "SELECT workload, size_key, tables FROM {}.{}").format(
                    sql.Identifier(home), sql.Identifier(REGISTRY_TABLE))):
            ours.update(qualified(t, home) for t in recorded)
            if wl == workload and home == schema:
                recorded_size = size
    foreign = tuple(sorted(present - ours))
    wanted = {qualified(t, schema) for t in tables}
    reusable = (recorded_size == size_key and wanted <= present
                and schema_is_ours(conn, schema))
    return DatasetState(reusable, recorded_size, foreign,
                        tuple(sorted(t for t in ours if t.startswith(f"{schema}."))), schema,
                        _build_seconds(conn, workload, schema) if reusable else None)


def _build_seconds(conn: psycopg.Connection, workload: str, schema: str) -> float | None:
    """The recorded build's seconds of ``workload`` in ``schema``'s registry."""
    from psycopg import sql

    row = conn.execute(sql.SQL("SELECT build_seconds FROM {}.{} WHERE workload = %s").format(
        sql.Identifier(schema), sql.Identifier(REGISTRY_TABLE)), (workload,)).fetchone()
    return float(row[0]) if row and row[0] is not None else None


def check_can_initialise(state: DatasetState, dbname: str, force: bool) -> None:
    """Refuse to build into a database holding tables pgdyno did not create."""
    if state.foreign_tables and not force:
        shown = ", ".join(state.foreign_tables[:5])
        more = f" and {len(state.foreign_tables) - 5} more" if len(state.foreign_tables) > 5 else ""
        raise UsageError(
            f"database {dbname} holds tables pgdyno did not create ({shown}{more}); "
            "refusing to initialise a workload there: use another database or --force "
            "(which builds in pgdyno's own schema and never touches them)"
        )


def refuse_name_collisions(tables: list[str], state: DatasetState, what: str) -> None:
    """Even with --force, never drop or overwrite a table pgdyno did not create: only one
    inside pgdyno's own schema could ever be reached by a workload's name, so only such a
    table stops the build (``what``: "pgbench's", "TPROC-C's")."""
    clashing = sorted({qualified(t, state.schema) for t in tables}.intersection(
        state.foreign_tables))
    if clashing:
        raise UsageError(
            f"pgdyno's schema {state.schema} holds tables named like {what} "
            f"({', '.join(clashing)}) that pgdyno did not create; refusing to replace them, "
            "even with --force: use another database, or move them out of that schema")


def schema_is_ours(conn: psycopg.Connection, schema: str = SCHEMA) -> bool:
    row = conn.execute(_SCHEMA_MARKER, (schema,)).fetchone()
    return row is not None and row[0] == MARKER


def ensure_schema(conn: psycopg.Connection, schema: str = SCHEMA) -> None:
    """Create pgdyno's schema with its marker, or check that the one there is pgdyno's."""
    import psycopg
    from psycopg import sql

    row = conn.execute(_SCHEMA_MARKER, (schema,)).fetchone()
    dbname = conn.info.dbname
    if row is not None:
        if row[0] != MARKER:
            raise UsageError(
                f"database {dbname} has a schema {schema} that pgdyno did not create (its "
                "comment is not pgdyno's marker); refusing to build or drop anything in it: "
                "use another database, or rename that schema")
        return
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(schema), sql.Literal(MARKER)))
    except psycopg.errors.InsufficientPrivilege:
        user = conn.info.user
        raise UsageError(
            f"role {user} may not create pgdyno's schema {schema} in database {dbname}; "
            f"grant it (GRANT CREATE ON DATABASE {dbname} TO {user}) or use a database "
            "where it may") from None


def prepare_build(conn: psycopg.Connection, state: DatasetState, workload: str,
                  size_key: str, tables: list[str], *, force: bool, what: str) -> None:
    """Everything before a (re)build: the guards, pgdyno's schema, the claim on ``tables``,
    and the drop of pgdyno's own previous tables of those names."""
    check_can_initialise(state, conn.info.dbname, force)
    refuse_name_collisions(tables, state, what)
    ensure_schema(conn, state.schema)
    claim(conn, workload, size_key, tables, state.schema)
    drop_tables(conn, tables, what, state.schema)


def drop_tables(conn: psycopg.Connection, tables: list[str], what: str,
                schema: str = SCHEMA) -> None:
    """Drop pgdyno's own tables of these names: schema-qualified, after the marker check,
    and without CASCADE, so that a view or key of the user's that depends on one stops the
    rebuild with an error instead of disappearing with it."""
    import psycopg
    from psycopg import sql

    if not schema_is_ours(conn, schema):
        raise UsageError(f"schema {schema} in database {conn.info.dbname} is not pgdyno's "
                         "(no marker); refusing to drop anything in it")
    for table in tables:
        try:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table.split(".")[-1])))
        except psycopg.errors.DependentObjectsStillExist as exc:
            raise UsageError(
                f"cannot rebuild {what} tables: other objects depend on table "
                f"{qualified(table, schema)} ({exc.diag.message_detail or exc}); drop them or use "
                "another database") from None


def record(conn: psycopg.Connection, workload: str, size_key: str, tables: list[str],
           build_seconds: float, version: str, schema: str = SCHEMA) -> None:
    """Remember a dataset pgdyno just built (after a successful initialisation)."""
    from psycopg import sql

    registry = (sql.Identifier(schema), sql.Identifier(REGISTRY_TABLE))
    conn.execute(sql.SQL(_CREATE_REGISTRY).format(*registry))
    conn.execute(sql.SQL(
        """INSERT INTO {}.{} (workload, size_key, tables, build_seconds, pgdyno_version)
            VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT (workload) DO UPDATE SET size_key = EXCLUDED.size_key,
                tables = EXCLUDED.tables, created_at = now(),
                build_seconds = EXCLUDED.build_seconds,
                pgdyno_version = EXCLUDED.pgdyno_version""").format(*registry),
        (workload, size_key, [qualified(t, schema) for t in tables], build_seconds, version),
    )


def claim(conn: psycopg.Connection, workload: str, size_key: str, tables: list[str],
          schema: str = SCHEMA) -> None:
    """Record the tables a build is about to make, before it touches anything, under a
    size that never matches: an interrupted build (Ctrl-C, a crash) is then neither
    reused nor mistaken for foreign tables, and the next run rebuilds it without --force."""
    record(conn, workload, f"{size_key} {INCOMPLETE}", tables, 0.0, __version__, schema)


INCOMPLETE = "(incomplete)"


def check_database(conn: ConnectionInfo, workload: str, size_key: str, tables: list[str],
                   *, force: bool, what: str, schema: str = SCHEMA) -> None:
    """The build's refusals, read from a database that is up already (``--dsn``) without
    changing anything: run before the run directory exists, so that bad input creates
    nothing. A server that does not answer is left to the target's own check."""
    import psycopg

    try:
        db = psycopg.connect(scoped(conn, schema).conninfo(), autocommit=True,
                             connect_timeout=5)
    except psycopg.OperationalError:
        return
    with db:
        state = inspect(db, workload, size_key, tables, schema)
        if not state.reusable:
            check_can_initialise(state, db.info.dbname, force)
            refuse_name_collisions(tables, state, what)
