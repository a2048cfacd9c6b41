"""A user's tables survive every workload's --force, wherever the search_path finds them.

The case as a user met it: the role ``alice`` owns a schema ``alice``, first on the
default search_path (``"$user", public``), holding ``alice.pgbench_history`` and
``alice.customer``; ``--force`` used to let pgbench's drop step and TPROC-C's load replace
them. Here every table name of every workload (pgbench, OLTP, TPROC-C, TPROC-H) exists as a
user table, with one row of its own, in the role's schema, in ``public`` and in a third
schema on the search_path; each workload is built and run with ``--force``, on a PostgreSQL
15 server reached with ``--dsn`` as ``alice`` and on the embedded server pgdyno manages
(whose role, ``pgdyno``, owns the schema named after it). Afterwards every user table has
its own column and its one row, and the workload's tables are in pgdyno's schema, filled.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pgdyno.targets.binaries import embedded_install, install_from_dir
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import registry
from pgdyno.workloads.oltp.schema import table_names
from pgdyno.workloads.pgbench.dataset import PGBENCH_TABLES
from pgdyno.workloads.tprocc import schema as tprocc_schema
from pgdyno.workloads.tproch import schema as tproch_schema
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

PG15 = Path("/usr/lib/postgresql/15/bin")
RUN = ["--clients", "1", "--duration", "1", "--warmup", "0", "--iterations", "1",
       "--no-progress", "--force"]
WORKLOADS = {
    "tpcb": (["--scale", "1"], list(PGBENCH_TABLES)),
    "oltp-read-write": (["--tables", "2", "--table-size", "1000"], table_names(2)),
    "tprocc": (["--warehouses", "1"], list(tprocc_schema.TABLES)),
    "tproch": (["--scale-factor", "0.01", "--queries", "1,6", "--tests", "power"],
               list(tproch_schema.TABLES)),
}
ALL_NAMES = sorted({name for _, names in WORKLOADS.values() for name in names})


def _plant_user_tables(db: psycopg.Connection, schemas: list[str], owner: str) -> None:
    """A user table of every workload's names in each schema: one column, one row."""
    for schema in schemas:
        for name in ALL_NAMES:
            table = sql.Identifier(schema, name)
            db.execute(sql.SQL("CREATE TABLE {} (note text)").format(table))
            db.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(table),
                       (f"{owner}'s {schema}.{name}",))
            db.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                table, sql.Identifier(owner)))


def _assert_untouched(db: psycopg.Connection, schemas: list[str], owner: str) -> None:
    for schema in schemas:
        for name in ALL_NAMES:
            table = sql.Identifier(schema, name)
            columns = [r[0] for r in db.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                "AND attnum > 0 AND NOT attisdropped", (f"{schema}.{name}",))]
            rows = db.execute(sql.SQL("SELECT note FROM {}").format(table)).fetchall()
            assert (columns, rows) == (["note"], [(f"{owner}'s {schema}.{name}",)]), \
                f"{schema}.{name}"


def _assert_built_in_pgdyno_schema(db: psycopg.Connection, workload: str) -> None:
    schema = registry.get(workload).dataset_schema
    for name in WORKLOADS[workload][1]:
        count = db.execute(sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier(schema, name))).fetchone()[0]
        if name not in ("history", "new_order", "pgbench_history", "tproch_refresh_state"):
            assert count > 0, name


def _bench(workload: str, workdir: Path, results: Path, *target: str) -> None:
    extra, _ = WORKLOADS[workload]
    out = run_cli(["bench", workload, *extra, *RUN, *target, "--results-dir", str(results)],
                  workdir)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def pg15_with_alice() -> Iterator[tuple[LocalServer, ConnectionInfo]]:
    """A PostgreSQL 15 server (Debian's binaries) whose database ``shop`` belongs to the
    role ``alice``: her own schema first on her search_path, then public, then ``extra``."""
    if not (PG15 / "postgres").exists():
        pytest.skip("Debian's postgresql-15 binaries are not installed (setup.sh installs them)")
    server = LocalServer(install=install_from_dir(PG15), workdir=make_shared_dir("pgdyno-alice-"))
    server.prepare()
    server.start()
    admin = server.admin_connection()
    with psycopg.connect(admin.conninfo(), autocommit=True) as db:
        db.execute("CREATE ROLE alice LOGIN")
        db.execute("CREATE DATABASE shop OWNER alice")
    with psycopg.connect(admin.conninfo("shop"), autocommit=True) as db:
        db.execute("CREATE SCHEMA alice AUTHORIZATION alice")
        db.execute("CREATE SCHEMA extra AUTHORIZATION alice")
        db.execute("""ALTER ROLE alice SET search_path = "$user", public, extra""")
        _plant_user_tables(db, ["alice", "public", "extra"], "alice")
    alice = ConnectionInfo(host=admin.host, port=admin.port, user="alice", dbname="shop")
    yield server, alice
    server.stop()


@pytest.mark.server
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_dsn_force_leaves_alices_tables_alone(pg15_with_alice, workload: str,
                                               workdir: Path) -> None:
    _, alice = pg15_with_alice
    dsn = f"postgresql://alice@/shop?host={alice.host}&port={alice.port}"
    _bench(workload, workdir, make_shared_dir("pgdyno-results-"), "--dsn", dsn)
    with psycopg.connect(alice.conninfo()) as db:
        _assert_untouched(db, ["alice", "public", "extra"], "alice")
        _assert_built_in_pgdyno_schema(db, workload)
        # The tables pgdyno made are recorded as its own, in its own schema.
        schema = registry.get(workload).dataset_schema
        recorded = [t for (tables,) in db.execute(sql.SQL(
            "SELECT tables FROM {}.pgdyno_dataset").format(sql.Identifier(schema)))
            for t in tables]
    assert recorded and all(t.startswith(f"{schema}.") for t in recorded)


@pytest.mark.server
def test_embedded_force_leaves_the_roles_own_schema_alone() -> None:
    """The managed server's role is ``pgdyno``: its own schema ``pgdyno`` (first on the
    search_path), public and another schema hold a table of every workload name."""
    own = make_shared_dir("pgdyno-embedded-user-")
    server = LocalServer(install=embedded_install(), workdir=own)
    server.prepare()
    server.start()
    admin = server.admin_connection()
    with psycopg.connect(admin.conninfo(), autocommit=True) as db:
        db.execute("CREATE SCHEMA pgdyno")
        db.execute("CREATE SCHEMA extra")
        db.execute(f"""ALTER DATABASE {admin.dbname} SET search_path = "$user", public, extra""")
        _plant_user_tables(db, ["pgdyno", "public", "extra"], admin.user)
    server.stop()
    results = make_shared_dir("pgdyno-results-")
    for workload in WORKLOADS:
        _bench(workload, own, results)
    server.start()
    admin = server.admin_connection()  # a new port each start
    try:
        with psycopg.connect(admin.conninfo()) as db:
            _assert_untouched(db, ["pgdyno", "public", "extra"], admin.user)
            for workload in WORKLOADS:
                _assert_built_in_pgdyno_schema(db, workload)
    finally:
        server.stop()


@pytest.mark.server
def test_a_schema_of_pgdyno_s_name_that_is_not_pgdyno_s_is_refused(pg15_with_alice,
                                                                  workdir: Path) -> None:
    server, alice = pg15_with_alice
    admin = server.admin_connection()
    with psycopg.connect(admin.conninfo(), autocommit=True) as db:
        db.execute("CREATE DATABASE impostor OWNER alice")
    with psycopg.connect(alice.conninfo("impostor"), autocommit=True) as db:
        db.execute("CREATE SCHEMA pgdyno_bench")
        db.execute("CREATE TABLE pgdyno_bench.pgbench_accounts (note text)")
        db.execute("INSERT INTO pgdyno_bench.pgbench_accounts VALUES ('mine')")
    dsn = f"postgresql://alice@/impostor?host={alice.host}&port={alice.port}"
    out = run_cli(["bench", "tpcb", *WORKLOADS["tpcb"][0], *RUN, "--dsn", dsn,
                   "--results-dir", str(make_shared_dir("pgdyno-results-"))], workdir)
    assert out.returncode == 2
    assert "pgdyno_bench" in out.stderr and "Traceback" not in out.stderr
    with psycopg.connect(alice.conninfo("impostor")) as db:
        assert db.execute("SELECT note FROM pgdyno_bench.pgbench_accounts").fetchall() \
            == [("mine",)]
