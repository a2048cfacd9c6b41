"""TPROC-H refresh pairs (RF1 then RF2) against a real server, replayed in DuckDB.

One SF 0.01 dataset is loaded for the module, and copied (CREATE DATABASE ... TEMPLATE)
for the DuckDB replay, which needs the untouched population; tests apply the pairs
next_pair gives, so they never depend on each other's order.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import psycopg
import pytest
from psycopg import sql

from pgdyno.errors import RunFailed, UsageError
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.tproch import refresh, schema
from pgdyno.workloads.tproch.loader import load
from pgdyno.workloads.tproch.model import LoadOptions, RefreshSet
from pgdyno.workloads.tproch.schema import DATASET_SCHEMA as TPCH_SCHEMA
from tests.conftest import scratch_database
from tests.test_tproch_load import _duck_type, duckdb_tables, generate_csv

SF = 0.01
PER_PAIR = 15
"""SF x 1,500 orders per pair."""

FIGURES = """SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM lineitem),
                    (SELECT sum(l_extendedprice) FROM lineitem),
                    (SELECT sum(o_totalprice) FROM orders),
                    (SELECT sum(l_quantity) FROM lineitem),
                    (SELECT count(DISTINCT o_custkey) FROM orders)"""
"""What PostgreSQL and DuckDB must agree on after each refresh function."""


@pytest.fixture(scope="module")
def csv_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_csv(tmp_path_factory.mktemp("tpch"), SF)


@pytest.fixture(scope="module")
def dbs(server: LocalServer) -> Iterator[tuple[ConnectionInfo, ConnectionInfo]]:
    """The loaded dataset, and an untouched copy of it for the replay."""
    for target in scratch_database(server, "tproch_refresh", TPCH_SCHEMA):
        load(target, LoadOptions(scale_factor=SF, workers=2))
        copy = "tproch_refresh_replay"
        admin = server.admin_connection().conninfo("postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(copy)))
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(copy), sql.Identifier(target.dbname)))
        yield target, target.with_dbname(copy)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(copy)))


@pytest.fixture()
def db(dbs) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dbs[0].conninfo(), autocommit=True) as conn:
        yield conn


def _counts(conn: psycopg.Connection) -> tuple[int, int]:
    return conn.execute("SELECT (SELECT count(*) FROM orders), "
                        "(SELECT count(*) FROM lineitem)").fetchone()


def _one(conn: psycopg.Connection, query: str, params: tuple = ()) -> object:
    return conn.execute(query, params).fetchone()[0]


# ----- keys --------------------------------------------------------------------------------

def test_original_keys_follow_dbgen_sparse_formula(csv_dir: Path) -> None:
    with (csv_dir / "orders.csv").open() as fh:
        keys = [int(row["o_orderkey"]) for row in csv.DictReader(fh)]
    assert keys == [refresh.original_order_key(i) for i in range(15_000)]
    assert keys[:9] == [1, 2, 3, 4, 5, 6, 7, 32, 33] and keys[-1] == 60_000
    free = [refresh.free_order_key(slot) for slot in range(3 * len(keys))]
    assert free[:3] == [8, 9, 10] and free[24] == 40
    assert free == sorted(set(free)) and not set(free) & set(keys)
    assert all(key & 0b11000 for key in free) and not any(key & 0b11000 for key in keys)


def test_pairs_never_collide() -> None:
    cycle = 15_000 // PER_PAIR
    inserted = [refresh.new_order_keys(SF, pair) for pair in range(1, cycle + 2)]
    flat = [key for keys in inserted for key in keys]
    assert all(len(keys) == PER_PAIR for keys in inserted)
    assert len(set(flat)) == len(flat)
    originals = {refresh.original_order_key(i) for i in range(15_000)}
    assert not set(flat) & originals
    deleted = [key for pair in range(1, cycle + 1)
               for key in refresh.deleted_order_keys(SF, pair)]
    assert sorted(deleted) == sorted(originals)  # every original order exactly once
    # Then the orders of the first pairs go, in the order they came.
    assert refresh.deleted_order_keys(SF, cycle + 1) == inserted[0]
    assert refresh.orders_per_pair(1) == 1_500 and refresh.orders_per_pair(0.0137) == 21


def test_two_pairs_prepared_together_apply_in_turn(db: psycopg.Connection) -> None:
    before = _counts(db)
    first = refresh.next_pair(db)
    sets = [refresh.prepare_pair(db, SF, pair, seed=11) for pair in (first, first + 1)]
    assert not set(sets[0].delete_keys) & set(sets[1].delete_keys)
    for rs in sets:
        assert refresh.rf1(db, rs) == PER_PAIR
    assert _counts(db)[0] == before[0] + 2 * PER_PAIR
    for rs in sets:
        assert refresh.rf2(db, rs) == PER_PAIR
    assert _counts(db) == before
    assert refresh.next_pair(db) == first + 2 and refresh.unfinished_pairs(db) == []


# ----- RF1 and RF2 -------------------------------------------------------------------------

def test_rf1_rows_are_consistent_and_rf2_restores_the_counts(db: psycopg.Connection) -> None:
    before = _counts(db)
    pair = refresh.next_pair(db)
    rs = refresh.prepare_pair(db, SF, pair, seed=7)
    assert rs.new_orders == len(rs.delete_keys) == PER_PAIR
    assert rs.new_lineitems == rs.delete_lineitems
    assert _counts(db) == before  # preparing changes nothing

    assert refresh.rf1(db, rs) == PER_PAIR
    assert _counts(db) == (before[0] + PER_PAIR, before[1] + rs.new_lineitems)
    assert refresh.unfinished_pairs(db) == [pair]
    keys = list(refresh.new_order_keys(SF, pair))
    new = "o_orderkey = ANY(%s::bigint[])"
    assert _one(db, f"SELECT count(*) FROM orders JOIN customer ON c_custkey = o_custkey "
                    f"WHERE {new} AND o_custkey %% 3 <> 0", (keys,)) == PER_PAIR
    # Every lineitem is one of a partsupp row, and is priced from its part.
    assert _one(db, """SELECT count(*) FROM lineitem
                       JOIN partsupp ON ps_partkey = l_partkey AND ps_suppkey = l_suppkey
                       JOIN part ON p_partkey = l_partkey
                       JOIN supplier ON s_suppkey = l_suppkey
                       WHERE l_orderkey = ANY(%s::bigint[])
                         AND l_extendedprice = l_quantity * p_retailprice
                         AND l_quantity BETWEEN 1 AND 50
                         AND l_discount BETWEEN 0 AND 0.10 AND l_tax BETWEEN 0 AND 0.08
                         AND length(l_comment) BETWEEN 1 AND 43""",
                (keys,)) == rs.new_lineitems
    # Per order: lines numbered 1..n, dates, flags and statuses by the rules, dbgen's total.
    bad = db.execute(f"""
        SELECT o_orderkey FROM orders JOIN lineitem ON l_orderkey = o_orderkey
        WHERE {new}
        GROUP BY o_orderkey, o_totalprice, o_orderstatus, o_orderdate, o_comment
        HAVING count(*) <> max(l_linenumber) OR min(l_linenumber) <> 1
            OR o_totalprice * 100 <> sum(((l_extendedprice * 100)::bigint
                   * (100 - (l_discount * 100)::bigint) / 100)
                   * (100 + (l_tax * 100)::bigint) / 100)
            OR o_orderstatus <> CASE WHEN bool_and(l_linestatus = 'F') THEN 'F'
                                     WHEN bool_and(l_linestatus = 'O') THEN 'O' ELSE 'P' END
            OR o_orderdate NOT BETWEEN '1992-01-01' AND '1998-08-02'
            OR length(o_comment) NOT BETWEEN 1 AND 78
            OR bool_or(l_shipdate - o_orderdate NOT BETWEEN 1 AND 121
                       OR l_commitdate - o_orderdate NOT BETWEEN 30 AND 90
                       OR l_receiptdate - l_shipdate NOT BETWEEN 1 AND 30
                       OR l_linestatus <> CASE WHEN l_shipdate > '1995-06-17' THEN 'O'
                                               ELSE 'F' END
                       OR (l_receiptdate > '1995-06-17') <> (l_returnflag = 'N'))""",
                     (keys,)).fetchall()
    assert bad == []

    assert refresh.rf2(db, rs) == PER_PAIR
    assert _counts(db) == before
    assert _one(db, "SELECT count(*) FROM lineitem WHERE l_orderkey = ANY(%s::bigint[])",
                (list(rs.delete_keys),)) == 0
    assert refresh.unfinished_pairs(db) == [] and refresh.next_pair(db) == pair + 1


def test_a_pair_is_never_applied_twice(db: psycopg.Connection) -> None:
    pair = refresh.next_pair(db)
    rs = refresh.prepare_pair(db, SF, pair, seed=3)
    refresh.rf1(db, rs)
    refresh.rf2(db, rs)
    after = _counts(db)
    with pytest.raises(UsageError, match=f"pair {pair} was already applied") as refused:
        refresh.prepare_pair(db, SF, pair, seed=3)
    assert "\n" not in str(refused.value)
    with pytest.raises(psycopg.errors.UniqueViolation):
        refresh.rf1(db, rs)
    with pytest.raises(RunFailed, match=f"found 0 of its {PER_PAIR} orders") as failed:
        refresh.rf2(db, rs)
    assert "\n" not in str(failed.value)
    assert _counts(db) == after  # both rolled back
    with pytest.raises(UsageError, match="numbered from 1"):
        refresh.prepare_pair(db, SF, 0, seed=3)


def test_a_pair_stopped_after_rf1_is_finished_later(db: psycopg.Connection) -> None:
    before = _counts(db)
    pair = refresh.next_pair(db)
    rs = refresh.prepare_pair(db, SF, pair, seed=5)
    refresh.rf1(db, rs)
    # The run stops here; the next one sees the pair unfinished and finishes it.
    assert refresh.next_pair(db) == pair + 1 and refresh.unfinished_pairs(db) == [pair]
    again = refresh.prepare_pair(db, SF, pair, seed=5)
    assert again.rf1_applied and again.orders_csv == rs.orders_csv
    with pytest.raises(UsageError, match="RF1 was already applied"):
        refresh.rf1(db, again)
    assert refresh.rf2(db, again) == PER_PAIR
    assert _counts(db) == before and refresh.unfinished_pairs(db) == []


def test_pairs_are_deterministic(db: psycopg.Connection) -> None:
    pair = refresh.next_pair(db)
    one = refresh.prepare_pair(db, SF, pair, seed=42)
    assert refresh.prepare_pair(db, SF, pair, seed=42) == one
    other = refresh.prepare_pair(db, SF, pair, seed=43)
    assert other.delete_keys == one.delete_keys and other.new_lineitems == one.new_lineitems
    assert other.orders_csv != one.orders_csv
    assert [line.split(",")[0] for line in other.orders_csv.splitlines()] == [
        str(key) for key in refresh.new_order_keys(SF, pair)]


# ----- the raw data, replayed in DuckDB ----------------------------------------------------

def _duck_insert(duck: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    columns = ", ".join(f"'{name}': '{_duck_type(kind)}'" for name, kind in schema.COLUMNS[table])
    duck.execute(f"INSERT INTO {table} SELECT * FROM read_csv('{path}', header = true, "
                 f"columns = {{{columns}}})")


def _replay(duck: duckdb.DuckDBPyConnection, files: dict[str, Path], function: str) -> None:
    if function == "RF1":
        _duck_insert(duck, "orders", files["rf1-orders"])
        _duck_insert(duck, "lineitem", files["rf1-lineitem"])
        return
    keys = f"SELECT o_orderkey FROM read_csv('{files['rf2-orderkeys']}', header = true)"
    duck.execute(f"DELETE FROM lineitem WHERE l_orderkey IN ({keys})")
    duck.execute(f"DELETE FROM orders WHERE o_orderkey IN ({keys})")


def _saved(rs: RefreshSet, directory: Path) -> dict[str, Path]:
    paths = rs.save(directory)
    return {path.name.removeprefix(f"refresh-{rs.pair:04d}-").removesuffix(".csv.gz"): path
            for path in paths}


def test_saved_pairs_are_gzipd_csv_of_what_copy_received(db: psycopg.Connection,
                                                         tmp_path: Path) -> None:
    """The raw data of a pair is kept gzip'd, and is byte for byte (after its header) the
    text COPY got; saving it again gives the same bytes. The report says whose rows
    they are: tpchgen-cli makes none."""
    rs = refresh.prepare_pair(db, SF, refresh.next_pair(db), seed=99)
    files = _saved(rs, tmp_path)
    texts = {}
    for name, path in files.items():
        raw = path.read_bytes()
        assert path.suffixes == [".csv", ".gz"] and raw[:2] == b"\x1f\x8b", name
        texts[name] = gzip.decompress(raw).decode()
        assert len(raw) < len(texts[name]), name
    header, _, body = texts["rf1-orders"].partition("\n")
    assert header.split(",") == [name for name, _ in schema.COLUMNS["orders"]]
    assert body == rs.orders_csv and len(body.splitlines()) == rs.new_orders
    assert texts["rf1-lineitem"].partition("\n")[2] == rs.lineitem_csv
    assert texts["rf2-orderkeys"].split() == ["o_orderkey", *map(str, rs.delete_keys)]
    assert _saved(rs, tmp_path / "again")["rf1-lineitem"].read_bytes() == \
        files["rf1-lineitem"].read_bytes()
    assert not list(tmp_path.glob("*.csv"))  # nothing kept uncompressed
    assert "pgdyno's own generator" in refresh.ROWS_SOURCE
    assert "tpchgen-cli generates no refresh data" in refresh.ROWS_SOURCE


def test_saved_pairs_replay_in_duckdb_to_the_same_figures(dbs, csv_dir: Path,
                                                          tmp_path: Path) -> None:
    duck = duckdb_tables(csv_dir)
    with psycopg.connect(dbs[1].conninfo(), autocommit=True) as conn:
        original = conn.execute(FIGURES).fetchone()
        assert original == duck.execute(FIGURES).fetchone()
        for pair in (refresh.next_pair(conn), refresh.next_pair(conn) + 1):
            rs = refresh.prepare_pair(conn, SF, pair, seed=2024)
            files = _saved(rs, tmp_path)
            assert set(files) == {"rf1-orders", "rf1-lineitem", "rf2-orderkeys"}
            for function, apply in (("RF1", refresh.rf1), ("RF2", refresh.rf2)):
                apply(conn, rs)
                _replay(duck, files, function)
                figures = conn.execute(FIGURES).fetchone()
                assert figures == duck.execute(FIGURES).fetchone(), (pair, function)
            assert figures[:2] == original[:2]  # the counts are back
            assert figures[2] != original[2] and isinstance(figures[2], Decimal)
        newest = conn.execute("SELECT max(o_orderdate) FROM orders").fetchone()[0]
    assert newest <= date(1998, 8, 2)
