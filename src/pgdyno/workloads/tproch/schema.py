"""The TPROC-H schema: TPC-H's eight tables, their keys and indexes, and pgdyno's state table.

Column types follow the TPC-H specification (clause 1.4): ``numeric(15,2)`` for every
decimal, ``date`` for dates, ``char(n)`` for fixed text and ``varchar(n)`` for variable
text. Identifiers are ``integer``, except the order key: dbgen's order keys are sparse
(four key values per order), so they pass 2^31 from SF 358 on and are ``bigint``.

Tables are created bare; keys and indexes are built after the data (``key_jobs``) as
independent jobs, largest first. The indexes are the primary keys plus one index per
foreign key that a primary key does not already lead with, i.e. what a DBA would create
for the joins of the 22 queries and for the refresh functions:

- nation(n_regionkey), supplier(s_nationkey), customer(c_nationkey);
- partsupp(ps_suppkey) (ps_partkey leads the primary key);
- orders(o_custkey);
- lineitem(l_partkey, l_suppkey), the composite foreign key to partsupp (l_orderkey leads
  the primary key (l_orderkey, l_linenumber)).

FOREIGN KEY constraints are *not* declared (the specification leaves them optional):
validating them would add a full join per constraint to every load, and their triggers
would add work to the refresh functions that other TPC-H-derived tools do not measure.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pgdyno.errors import UsageError
from pgdyno.workloads.keys import KeyJob
from pgdyno.workloads.keys import index as _index
from pgdyno.workloads.keys import primary_key as _pk

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

WORKLOAD = "tproch"
"""The name the dataset is recorded under (pgdyno_dataset.workload)."""
DATASET_SCHEMA = "pgdyno_tpch"
"""pgdyno's schema for TPROC-H: its customer and orders are not TPROC-C's, and both
datasets stay (a study runs both against one database)."""

REFRESH_TABLE = "tproch_refresh"
"""pgdyno's bookkeeping of the refresh pairs applied to this dataset (see refresh.py)."""

DATA_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders",
               "lineitem")
"""The eight TPC-H tables, in the order of the specification."""

TABLES = (*DATA_TABLES, REFRESH_TABLE)
"""Every table the dataset is made of (recorded in the dataset registry)."""

BASE_ROWS = {
    "supplier": 10_000,
    "customer": 150_000,
    "part": 200_000,
    "partsupp": 800_000,
    "orders": 1_500_000,
}
"""Rows per unit of scale factor (clause 4.2.5); region and nation are fixed."""

FIXED_ROWS = {"region": 5, "nation": 25}

LINEITEMS_PER_ORDER = (1, 7)
"""Each order has 1 to 7 lineitems, uniformly: about 4 (6,000,000 x SF in all)."""

MIN_SCALE_FACTOR = 0.0001
"""The smallest scale factor that gives every table at least one row (one supplier)."""

MAX_SCALE_FACTOR = 100_000.0
"""dbgen's own ceiling (about 100 TB of raw data)."""

COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "region": (
        ("r_regionkey", "integer"), ("r_name", "char(25)"), ("r_comment", "varchar(152)")),
    "nation": (
        ("n_nationkey", "integer"), ("n_name", "char(25)"), ("n_regionkey", "integer"),
        ("n_comment", "varchar(152)")),
    "supplier": (
        ("s_suppkey", "integer"), ("s_name", "char(25)"), ("s_address", "varchar(40)"),
        ("s_nationkey", "integer"), ("s_phone", "char(15)"), ("s_acctbal", "numeric(15,2)"),
        ("s_comment", "varchar(101)")),
    "customer": (
        ("c_custkey", "integer"), ("c_name", "varchar(25)"), ("c_address", "varchar(40)"),
        ("c_nationkey", "integer"), ("c_phone", "char(15)"), ("c_acctbal", "numeric(15,2)"),
        ("c_mktsegment", "char(10)"), ("c_comment", "varchar(117)")),
    "part": (
        ("p_partkey", "integer"), ("p_name", "varchar(55)"), ("p_mfgr", "char(25)"),
        ("p_brand", "char(10)"), ("p_type", "varchar(25)"), ("p_size", "integer"),
        ("p_container", "char(10)"), ("p_retailprice", "numeric(15,2)"),
        ("p_comment", "varchar(23)")),
    "partsupp": (
        ("ps_partkey", "integer"), ("ps_suppkey", "integer"), ("ps_availqty", "integer"),
        ("ps_supplycost", "numeric(15,2)"), ("ps_comment", "varchar(199)")),
    "orders": (
        ("o_orderkey", "bigint"), ("o_custkey", "integer"), ("o_orderstatus", "char(1)"),
        ("o_totalprice", "numeric(15,2)"), ("o_orderdate", "date"),
        ("o_orderpriority", "char(15)"), ("o_clerk", "char(15)"),
        ("o_shippriority", "integer"), ("o_comment", "varchar(79)")),
    "lineitem": (
        ("l_orderkey", "bigint"), ("l_partkey", "integer"), ("l_suppkey", "integer"),
        ("l_linenumber", "integer"), ("l_quantity", "numeric(15,2)"),
        ("l_extendedprice", "numeric(15,2)"), ("l_discount", "numeric(15,2)"),
        ("l_tax", "numeric(15,2)"), ("l_returnflag", "char(1)"), ("l_linestatus", "char(1)"),
        ("l_shipdate", "date"), ("l_commitdate", "date"), ("l_receiptdate", "date"),
        ("l_shipinstruct", "char(25)"), ("l_shipmode", "char(10)"),
        ("l_comment", "varchar(44)")),
}
"""Columns of each data table in tpchgen-cli's CSV order (the same as the specification)."""

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}

INDEXES: dict[str, tuple[str, tuple[str, ...]]] = {
    "nation_regionkey_idx": ("nation", ("n_regionkey",)),
    "supplier_nationkey_idx": ("supplier", ("s_nationkey",)),
    "customer_nationkey_idx": ("customer", ("c_nationkey",)),
    "partsupp_suppkey_idx": ("partsupp", ("ps_suppkey",)),
    "orders_custkey_idx": ("orders", ("o_custkey",)),
    "lineitem_part_supp_idx": ("lineitem", ("l_partkey", "l_suppkey")),
}
"""Secondary indexes by name: (table, columns)."""

_REFRESH_DDL = f"""
CREATE TABLE {REFRESH_TABLE} (
    pair        integer PRIMARY KEY,
    seed        bigint NOT NULL,
    orders      integer NOT NULL,
    rf1_at      timestamptz NOT NULL DEFAULT now(),
    rf2_at      timestamptz
)"""


def check_scale_factor(sf: float) -> float:
    """A scale factor tpchgen-cli accepts and whose data the primary keys accept, or one
    line saying why not."""
    if not MIN_SCALE_FACTOR <= sf <= MAX_SCALE_FACTOR:
        raise UsageError(f"--scale-factor {sf:g}: expected a number from {MIN_SCALE_FACTOR:g} "
                         f"to {MAX_SCALE_FACTOR:g} (1 is about 1 GB of raw data)")
    if not _distinct_suppliers(sf):
        raise UsageError(f"--scale-factor {sf:g}: at this size dbgen's formula gives some parts "
                         "the same supplier twice (duplicate partsupp keys); use 0.01, or 0.03 "
                         "or more")
    return sf


def supplier_of(partkey: int, i: int, suppliers: int) -> int:
    """The i-th (0..3) supplier of a part: ps_suppkey's formula (clause 4.2.3)."""
    return (partkey + i * (suppliers // 4 + (partkey - 1) // suppliers)) % suppliers + 1


SAFE_SUPPLIERS = 240
"""From this many suppliers on (SF 0.024), the four suppliers of every part differ: the
formula's step (suppliers // 4 + at most 19) stays below a third of the suppliers."""


@functools.cache
def _distinct_suppliers(sf: float) -> bool:
    suppliers = int(sf * BASE_ROWS["supplier"])
    if suppliers >= SAFE_SUPPLIERS:
        return True
    parts = int(sf * BASE_ROWS["part"])
    return all(len({supplier_of(p, i, suppliers) for i in range(4)}) == 4
               for p in range(1, parts + 1))


def size_key(sf: float) -> str:
    """How the dataset's size is recorded: ``sf=1``, ``sf=0.01``."""
    return f"sf={check_scale_factor(sf):g}"


def expected_rows(sf: float) -> dict[str, int]:
    """Exact row counts right after a load, except lineitem (see lineitem_range).

    tpchgen-cli, like dbgen, truncates ``base x SF`` computed in double precision, so the
    same arithmetic here gives its counts for fractional scale factors too."""
    check_scale_factor(sf)
    counts = dict(FIXED_ROWS)
    counts.update({table: int(sf * base) for table, base in BASE_ROWS.items()})
    return counts


def lineitem_range(sf: float) -> tuple[int, int]:
    """Bounds of the lineitem count: 1 to 7 per order."""
    orders = expected_rows(sf)["orders"]
    return orders * LINEITEMS_PER_ORDER[0], orders * LINEITEMS_PER_ORDER[1]


def approx_rows(sf: float) -> dict[str, int]:
    """Every table's count, lineitem's estimated (4 per order): totals for progress bars."""
    counts = expected_rows(sf)
    counts["lineitem"] = counts["orders"] * 4
    return counts


def create_table_statement(table: str) -> sql.Composed:
    from psycopg import sql

    columns = sql.SQL(", ").join(
        sql.SQL("{} {} NOT NULL").format(sql.Identifier(name), sql.SQL(kind))
        for name, kind in COLUMNS[table])
    return sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(table), columns)


def create_tables(conn: psycopg.Connection) -> None:
    """The eight data tables (bare: keys come after the data) and the refresh state table."""
    for table in DATA_TABLES:
        conn.execute(create_table_statement(table))
    conn.execute(_REFRESH_DDL)


def key_jobs(sf: float) -> list[KeyJob]:
    """Primary keys and indexes, largest first (weights: rows to sort, roughly), so that
    the long lineitem builds start at once and the small ones fill in around them."""
    rows = approx_rows(sf)
    jobs = [_pk(table, columns, rows[table] * len(columns))
            for table, columns in PRIMARY_KEYS.items()]
    jobs += [_index(table, name, columns, rows[table] * len(columns))
             for name, (table, columns) in INDEXES.items()]
    jobs.sort(key=lambda job: job.weight, reverse=True)
    return jobs


def vacuum_statement(table: str) -> sql.Composed:
    """VACUUM ANALYZE of one data table (the state table is empty)."""
    from psycopg import sql

    return sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table))
