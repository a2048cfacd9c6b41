"""The TPROC-C schema: nine tables, their keys and secondary indexes, and the functions.

Tables are created bare; keys and indexes are built after the data (KEY_JOBS), as
independent jobs that the loader spreads over its connections. order_line can be
hash-partitioned by warehouse, which keeps each partition's index build and vacuum
small for large warehouse counts.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from pgdyno.workloads.keys import KeyJob
from pgdyno.workloads.keys import index as _index
from pgdyno.workloads.keys import primary_key as _pk

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

WORKLOAD = "tprocc"
"""The name the dataset is recorded under (pgdyno_dataset.workload)."""

TABLES = ("warehouse", "district", "customer", "history", "new_order", "orders",
          "order_line", "item", "stock")

# TPC-C cardinalities (clause 4.2.2 / 1.2); order_line varies with the random line counts.
ROWS_PER_WAREHOUSE = {
    "warehouse": 1,
    "district": 10,
    "customer": 30_000,
    "history": 30_000,
    "new_order": 9_000,
    "orders": 30_000,
    "stock": 100_000,
}
ITEMS = 100_000
ORDER_LINES_PER_ORDER = (5, 15)

LOAD_C_LAST = 157
"""Load-time NURand constant for last names (clause 2.1.6): fixed, so that every run can
choose its own constant against it without reading anything from the database."""

PARTITION_THRESHOLD_WAREHOUSES = 200

_ORDER_LINE = """
CREATE TABLE order_line (
    ol_o_id        integer NOT NULL,
    ol_d_id        integer NOT NULL,
    ol_w_id        integer NOT NULL,
    ol_number      integer NOT NULL,
    ol_i_id        integer,
    ol_supply_w_id integer,
    ol_delivery_d  timestamp,
    ol_quantity    integer,
    ol_amount      numeric(6, 2),
    ol_dist_info   char(24)
)"""


def auto_partitions(warehouses: int) -> int:
    """Partitions of order_line when the user did not say: none for small datasets."""
    if warehouses < PARTITION_THRESHOLD_WAREHOUSES:
        return 0
    return min(64, max(16, warehouses // 100))


def sql_text(name: str) -> str:
    return resources.files(__package__).joinpath("sql", name).read_text()


def create_tables(conn: psycopg.Connection, partitions: int) -> None:
    from psycopg import sql

    conn.execute(sql_text("tables.sql"))
    if partitions <= 0:
        conn.execute(_ORDER_LINE)
        return
    conn.execute(_ORDER_LINE + " PARTITION BY HASH (ol_w_id)")
    for remainder in range(partitions):
        conn.execute(sql.SQL(
            "CREATE TABLE {} PARTITION OF order_line FOR VALUES WITH (MODULUS {}, REMAINDER {})"
        ).format(sql.Identifier(partition_name(remainder)), sql.Literal(partitions),
                 sql.Literal(remainder)))


def partition_name(remainder: int) -> str:
    return f"order_line_p{remainder}"


def install_functions(conn: psycopg.Connection) -> None:
    """(Re)create the loader and transaction functions; safe to call before every run."""
    conn.execute(sql_text("loader.sql"))
    conn.execute(sql_text("transactions.sql"))


ORDER_LINE_KEY = ("ol_w_id", "ol_d_id", "ol_o_id", "ol_number")


def key_jobs(warehouses: int, partitions: int) -> tuple[list[KeyJob], list[KeyJob]]:
    """Independent jobs, largest first, and the jobs that must follow them.

    Weights are rough rows-to-index per warehouse, used only to start the big builds
    first so that the parallel phase ends evenly.
    """
    jobs = [
        _pk("stock", ("s_w_id", "s_i_id"), 100_000),
        _pk("customer", ("c_w_id", "c_d_id", "c_id"), 30_000),
        _index("customer", "customer_name_idx",
               ("c_w_id", "c_d_id", "c_last", "c_first", "c_id"), 45_000),
        _pk("orders", ("o_w_id", "o_d_id", "o_id"), 30_000),
        _index("orders", "orders_customer_idx", ("o_w_id", "o_d_id", "o_c_id", "o_id"), 30_000),
        _pk("new_order", ("no_w_id", "no_d_id", "no_o_id"), 9_000),
        _pk("district", ("d_w_id", "d_id"), 10),
        _pk("warehouse", ("w_id",), 1),
        _pk("item", ("i_id",), ITEMS / warehouses),
    ]
    after: list[KeyJob] = []
    if partitions <= 0:
        jobs.append(_pk("order_line", ORDER_LINE_KEY, 300_000))
    else:
        # Each partition's key is built in parallel; the parent's key then only attaches them.
        jobs += [_pk(partition_name(r), ORDER_LINE_KEY, 300_000 / partitions)
                 for r in range(partitions)]
        after.append(_pk("order_line", ORDER_LINE_KEY, 0))
    jobs.sort(key=lambda job: job.weight, reverse=True)
    return jobs, after


def leaf_tables(partitions: int) -> list[str]:
    """The tables that hold rows: order_line's partitions in place of order_line."""
    leaves = [t for t in TABLES if t != "order_line"]
    leaves += [partition_name(r) for r in range(partitions)] if partitions > 0 else ["order_line"]
    return leaves


def autovacuum_statements(partitions: int, enabled: bool) -> list[sql.Composed]:
    """Autovacuum off for the load, back to the server's default after it.

    A table filling up with inserts is vacuumed and analyzed by autovacuum over and over
    (every autovacuum_vacuum_insert_threshold rows plus a fifth of the table): work the
    load's own VACUUM ANALYZE repeats at its end. RESET leaves no storage parameter behind,
    so the run afterwards sees the tables exactly as if the option had never been set."""
    from psycopg import sql

    template = ("ALTER TABLE {} SET (autovacuum_enabled = off)" if not enabled
                else "ALTER TABLE {} RESET (autovacuum_enabled)")
    return [sql.SQL(template).format(sql.Identifier(t)) for t in leaf_tables(partitions)]


def vacuum_tables(partitions: int) -> list[str]:
    """The tables with heap pages, largest first: order_line's partitions in its place."""
    big = ["stock"]
    big += [partition_name(r) for r in range(partitions)] if partitions > 0 else ["order_line"]
    return big + ["customer", "orders", "history", "new_order", "item", "district", "warehouse"]


def vacuum_statements(partitions: int, server_version_num: int) -> list[sql.Composed]:
    """VACUUM ANALYZE per table, largest first; partitions one by one (in parallel), then
    statistics for the partitioned parent alone where the server can (ANALYZE ONLY, 18+)."""
    from psycopg import sql

    statements = [sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(t))
                  for t in vacuum_tables(partitions)]
    if partitions > 0 and server_version_num >= 180000:
        statements.append(sql.SQL("ANALYZE ONLY {}").format(sql.Identifier("order_line")))
    return statements


def expected_rows(warehouses: int) -> dict[str, int]:
    """Exact row counts right after a load, except order_line (see order_line_range)."""
    counts = {table: n * warehouses for table, n in ROWS_PER_WAREHOUSE.items()}
    counts["item"] = ITEMS
    return counts


def order_line_range(warehouses: int) -> tuple[int, int]:
    orders = ROWS_PER_WAREHOUSE["orders"] * warehouses
    return orders * ORDER_LINES_PER_ORDER[0], orders * ORDER_LINES_PER_ORDER[1]
