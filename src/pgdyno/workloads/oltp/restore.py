"""Give the sbtest tables back their rows before a run: ids 1..table_size, no others.

oltp-delete removes rows for good (sysbench's oltp_delete never puts them back) and
oltp-insert adds rows past table_size; the read-write transactions keep the count. The
tables are reused from run to run, so without this every run after a delete would read a
table with holes (point selects finding nothing) and every run after an insert a larger
one. Before each run of an sbtest workload: rows past table_size go, missing ids come back
with fresh values drawn as the build draws them (``schema._INSERT_ROWS``), and the
sequence an insert run uses (sysbench's SERIAL) restarts after table_size. Its cost is one
anti-join over each table's primary key (tens of milliseconds per 100,000 rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pgdyno.targets.connection import ConnectionInfo
from pgdyno.workloads import dataset
from pgdyno.workloads.oltp.schema import (
    _INSERT_ROWS,
    C_VALUE_SQL,
    PAD_VALUE_SQL,
    SPEC_ITER,
    special_rand,
    table_names,
)

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

_MISSING = " WHERE NOT EXISTS (SELECT 1 FROM {table} AS kept WHERE kept.id = draws.id)"


def sequence_name(table: str) -> str:
    """As PostgreSQL names the sequence of sysbench's ``id SERIAL``."""
    return f"{table}_id_seq"


@dataclass
class Restored:
    removed: int = 0
    """Rows past table_size deleted (an insert run's)."""
    added: int = 0
    """Missing ids inserted again (a delete run's)."""


def restore_rows(conn: ConnectionInfo, tables: int, table_size: int) -> Restored:
    """Every table back to ids 1..table_size (values of restored rows drawn afresh)."""
    import psycopg
    from psycopg import sql

    spec = special_rand(table_size)
    params = {"span": spec.span, "t": spec.t, "iter_mult": spec.iter_mult,
              "hot_width": spec.hot_width, "hot_offset": spec.hot_offset,
              "first": 1, "last": table_size}
    done = Restored()
    with psycopg.connect(dataset.scoped(conn).conninfo(), autocommit=True) as db:
        for table in table_names(tables):
            name = sql.Identifier(table)
            cur = db.execute(sql.SQL("DELETE FROM {} WHERE id > %s").format(name),
                             (table_size,))
            done.removed += max(cur.rowcount, 0)
            insert = sql.SQL(_INSERT_ROWS + _MISSING).format(
                table=name, uniform_sum=sql.SQL(" + ".join(["random()"] * SPEC_ITER)),
                c=sql.SQL(C_VALUE_SQL), pad=sql.SQL(PAD_VALUE_SQL))
            cur = db.execute(insert, params)
            done.added += max(cur.rowcount, 0)
            if _has_sequence(db, table):
                db.execute("SELECT setval(%s, %s)",
                           (f"{dataset.SCHEMA}.{sequence_name(table)}", table_size))
    return done


def ensure_sequences(conn: ConnectionInfo, tables: int, table_size: int) -> None:
    """sysbench's ``id SERIAL``: a sequence owned by each table's id, its default, starting
    after table_size (the build leaves it out: only oltp-insert draws ids from it)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dataset.scoped(conn).conninfo(), autocommit=True) as db:
        for table in table_names(tables):
            seq = sql.Identifier(dataset.SCHEMA, sequence_name(table))
            db.execute(sql.SQL("CREATE SEQUENCE IF NOT EXISTS {} OWNED BY {}.id").format(
                seq, sql.Identifier(dataset.SCHEMA, table)))
            qualified = sql.Literal(f"{dataset.SCHEMA}.{sequence_name(table)}")
            owner = sql.Identifier(dataset.SCHEMA, table)
            db.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN id SET DEFAULT nextval({})")
                       .format(owner, qualified))
            db.execute(sql.SQL("SELECT setval({}, greatest(%s, (SELECT coalesce(max(id), 0) "
                               "FROM {})))").format(qualified, owner), (table_size,))


def _has_sequence(db: psycopg.Connection, table: str) -> bool:
    row = db.execute("SELECT to_regclass(%s) IS NOT NULL",
                     (f"{dataset.SCHEMA}.{sequence_name(table)}",)).fetchone()
    return bool(row and row[0])
