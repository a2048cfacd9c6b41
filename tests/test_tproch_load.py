"""TPROC-H loading against a real server, checked against tpchgen-cli and DuckDB.

The dataset is loaded at SF 0.01 by the loader (small: one generator writes every table
to files, each copied), and once more with a generator per table piped into COPY, as
larger datasets are loaded; the same scale factor is generated again here, whole, into
CSV files that DuckDB reads on its own: row counts and per-table checksums must agree.
Each test works in its own database of the shared server, dropped afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import psutil
import psycopg
import pytest
from psycopg import sql

from pgdyno.errors import RunFailed, UsageError
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset
from pgdyno.workloads.tproch import loader as tproch_loader
from pgdyno.workloads.tproch import schema
from pgdyno.workloads.tproch.loader import (
    STAGES,
    CopyJob,
    data_jobs,
    load,
    one_generator,
    plan_parts,
    stage_jobs,
    tpchgen_program,
)
from pgdyno.workloads.tproch.model import LoadOptions, LoadProgress, LoadResult
from pgdyno.workloads.tproch.schema import DATASET_SCHEMA as TPCH_SCHEMA
from tests.conftest import foreign_table_refuses_the_load, scratch_database

SF = 0.01

CHECKSUMS = {
    "region": "count(*), md5(string_agg(r_comment, '|' ORDER BY r_regionkey))",
    "nation": "count(*), sum(n_regionkey), md5(string_agg(rtrim(n_name), '|' "
              "ORDER BY n_nationkey))",
    "supplier": "count(*), sum(s_acctbal), sum(s_nationkey), "
                "md5(string_agg(s_comment, '|' ORDER BY s_suppkey))",
    "customer": "count(*), sum(c_acctbal), count(DISTINCT c_mktsegment), "
                "md5(string_agg(c_address, '|' ORDER BY c_custkey))",
    "part": "count(*), sum(p_retailprice), sum(p_size), "
            "md5(string_agg(p_name, '|' ORDER BY p_partkey))",
    "partsupp": "count(*), sum(ps_supplycost), sum(ps_availqty), count(DISTINCT ps_suppkey)",
    "orders": "count(*), sum(o_totalprice), count(DISTINCT o_custkey), sum(o_orderkey), "
              "min(o_orderdate), max(o_orderdate), "
              "md5(string_agg(o_comment, '|' ORDER BY o_orderkey))",
    "lineitem": "count(*), sum(l_extendedprice), sum(l_quantity), sum(l_discount), "
                "sum(l_tax), count(DISTINCT l_orderkey), sum(l_partkey), sum(l_suppkey), "
                "min(l_shipdate), max(l_receiptdate), "
                "md5(string_agg(l_comment, '|' ORDER BY l_orderkey, l_linenumber))",
}
"""The same SQL runs in PostgreSQL and in DuckDB."""


# ----- the independent oracle: tpchgen-cli's files read by DuckDB ---------------------------

def generate_csv(directory: Path, sf: float) -> Path:
    """Every table, whole, as tpchgen-cli writes them to files."""
    subprocess.run([tpchgen_program(), "csv", "-s", f"{sf:g}", "-o", str(directory),
                    "--quiet"], check=True, capture_output=True)
    return directory


def _duck_type(pg_type: str) -> str:
    if pg_type.startswith(("char", "varchar")):
        return "VARCHAR"
    return pg_type.replace("numeric", "DECIMAL").upper()


def duckdb_tables(csv_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding the eight tables read from ``csv_dir``."""
    db = duckdb.connect()
    for table in schema.DATA_TABLES:
        columns = ", ".join(f"'{name}': '{_duck_type(kind)}'"
                            for name, kind in schema.COLUMNS[table])
        db.execute(f"CREATE TABLE {table} AS SELECT * FROM read_csv("
                   f"'{csv_dir / (table + '.csv')}', header = true, columns = {{{columns}}})")
    return db


def assert_matches_duckdb(target: ConnectionInfo, csv_dir: Path) -> None:
    """Every table's checksums (CHECKSUMS, row counts among them) as DuckDB computes them
    over tpchgen-cli's own files."""
    duck = duckdb_tables(csv_dir)
    with psycopg.connect(target.conninfo()) as conn:
        for table, aggregates in CHECKSUMS.items():
            query = f"SELECT {aggregates} FROM {table}"
            assert conn.execute(query).fetchone() == duck.execute(query).fetchone(), table


def pg_counts(target: ConnectionInfo) -> dict[str, int]:
    with psycopg.connect(target.conninfo()) as conn:
        return {t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t)))
                .fetchone()[0] for t in schema.DATA_TABLES}


# ----- fixtures ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def csv_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_csv(tmp_path_factory.mktemp("tpch"), SF)


@dataclass(frozen=True)
class Loaded:
    target: ConnectionInfo
    result: LoadResult
    reports: list[LoadProgress]
    started: datetime
    """The server's clock when the load began."""
    received: list[float]
    """When each report reached the test (its own monotonic clock), report by report."""


@pytest.fixture(scope="module")
def loaded(server: LocalServer) -> Iterator[Loaded]:
    """SF 0.01 loaded once for the module, with the progress reports it produced."""
    reports: list[LoadProgress] = []
    received: list[float] = []

    def report(progress: LoadProgress) -> None:
        reports.append(progress)
        received.append(time.monotonic())

    for target in scratch_database(server, "tproch_load", TPCH_SCHEMA):
        with psycopg.connect(target.conninfo()) as conn:
            started = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        result = load(target, LoadOptions(scale_factor=SF, workers=2), report)
        yield Loaded(target, result, reports, started, received)


@pytest.fixture()
def scratch_db(server: LocalServer) -> Iterator[ConnectionInfo]:
    yield from scratch_database(server, "tproch_scratch", TPCH_SCHEMA)


# ----- the loaded data ---------------------------------------------------------------------

def test_row_counts_match_the_generator_and_the_specification(loaded, csv_dir: Path) -> None:
    target, result = loaded.target, loaded.result
    counts = pg_counts(target)
    for table in schema.DATA_TABLES:  # lines of the files, header excluded
        with (csv_dir / f"{table}.csv").open("rb") as fh:
            assert counts[table] == sum(1 for _ in fh) - 1, table
    assert {t: counts[t] for t in schema.expected_rows(SF)} == {
        "region": 5, "nation": 25, "supplier": 100, "customer": 1_500, "part": 2_000,
        "partsupp": 8_000, "orders": 15_000}
    low, high = schema.lineitem_range(SF)
    assert low <= counts["lineitem"] <= high
    assert counts["lineitem"] == pytest.approx(60_000, rel=0.02)
    assert result.rows == counts
    assert not result.reused and result.scale_factor == SF and result.workers == 2
    assert set(result.phase_seconds) == {"data", "keys", "vacuum"}
    assert result.rows_per_s == pytest.approx(sum(counts.values()) / result.seconds)
    assert result.to_dict()["rows"]["lineitem"] == counts["lineitem"]
    with psycopg.connect(target.conninfo()) as conn:
        assert result.wal_level == conn.execute(
            "SELECT setting FROM pg_settings WHERE name = 'wal_level'").fetchone()[0]
    assert LoadResult.from_dict(result.to_dict()) == result


def test_checksums_match_duckdb_over_the_same_generator_output(loaded, csv_dir: Path) -> None:
    assert one_generator(SF)  # this load went through files written by one generator
    assert_matches_duckdb(loaded.target, csv_dir)


def test_keys_indexes_and_statistics_exist(loaded) -> None:
    target = loaded.target
    with psycopg.connect(target.conninfo()) as conn:
        keys = {row[0]: row[1] for row in conn.execute(
            """SELECT conrelid::regclass::text, pg_get_constraintdef(oid)
               FROM pg_constraint WHERE contype = 'p'""")}
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes")}
        stats = conn.execute("""SELECT relname, last_analyze IS NOT NULL, last_vacuum IS NOT NULL,
                                       (SELECT reltuples FROM pg_class c WHERE c.oid = relid)
                                FROM pg_stat_user_tables WHERE relname = ANY(%s)""",
                             (list(schema.DATA_TABLES),)).fetchall()
    assert keys["lineitem"] == "PRIMARY KEY (l_orderkey, l_linenumber)"
    assert keys["partsupp"] == "PRIMARY KEY (ps_partkey, ps_suppkey)"
    assert set(schema.TABLES) <= set(keys)
    assert set(schema.INDEXES) <= indexes
    assert len(stats) == len(schema.DATA_TABLES)
    for table, analysed, vacuumed, reltuples in stats:
        assert analysed and vacuumed and reltuples > 0, table


def test_progress_reports_cover_the_phases(loaded) -> None:
    result, reports = loaded.result, loaded.reports
    phases = [r.phase for r in reports]
    assert phases.index("data") < phases.index("keys") < phases.index("vacuum")
    assert phases[-1] == "done"
    data = [r for r in reports if r.phase == "data"]
    assert data[-1].steps_done == data[-1].steps_total == len(data_jobs(SF, result.parts))
    assert [r.rows for r in data] == sorted(r.rows for r in data)
    final = reports[-1]
    assert final.rows == sum(result.rows.values()) and final.rows_per_s > 0
    assert final.rows_total == pytest.approx(final.rows, rel=0.02)  # lineitem estimated
    assert [r.steps_done for r in reports if r.phase == "keys"][-1] == len(
        schema.key_jobs(SF))


def test_phases_are_recorded_back_to_back_and_match_the_servers_clock(loaded) -> None:
    """Data, keys and vacuum are consecutive windows that add up to the load; the last
    VACUUM ANALYZE the server recorded falls in the vacuum window, and every table's
    statistics come from after its data (the analysis saw all of its rows)."""
    result = loaded.result
    assert list(result.phase_seconds) == list(STAGES)
    # Each phase reports as it begins, and the load once it is done: the time between
    # those reports, on the test's own clock, is each phase's length.
    begun = {}
    for progress, at in zip(loaded.reports, loaded.received, strict=True):
        begun.setdefault(progress.phase, at)
    bounds = [begun[phase] for phase in (*STAGES, "done")]
    by_clock = {phase: end - start for phase, start, end in zip(STAGES, bounds, bounds[1:],
                                                                strict=False)}
    assert result.phase_seconds == pytest.approx(by_clock, abs=0.05)
    assert sum(result.phase_seconds.values()) == pytest.approx(result.seconds, abs=0.25)
    # The run's load record carries them, and the rows the database holds.
    counts = pg_counts(loaded.target)
    record = result.load_record()
    assert record.rows == sum(counts[t] for t in schema.DATA_TABLES)
    assert [(p.phase, p.seconds, p.rows_per_s) for p in record.phases] == [
        (phase, round(result.phase_seconds[phase], 3),
         round(record.rows / result.phase_seconds[phase], 1)) for phase in STAGES]
    with psycopg.connect(loaded.target.conninfo()) as conn:
        stats = conn.execute("""SELECT relname, last_vacuum, last_analyze, n_live_tup,
                                       (SELECT reltuples FROM pg_class c WHERE c.oid = relid)
                                FROM pg_stat_user_tables WHERE relname = ANY(%s)""",
                             (list(schema.DATA_TABLES),)).fetchall()
    vacuum_starts = loaded.started + timedelta(
        seconds=result.phase_seconds["data"] + result.phase_seconds["keys"] - 0.25)
    vacuum_ends = loaded.started + timedelta(seconds=result.seconds + 1)
    assert vacuum_starts <= max(row[1] for row in stats) <= vacuum_ends
    for table, vacuumed, analysed, live, reltuples in stats:
        assert loaded.started < vacuumed <= analysed <= vacuum_ends, table
        assert live == counts[table] and reltuples == counts[table], table


def test_stage_jobs_follow_their_tables_data() -> None:
    """Keys in the order the tables' data should be in (at 2 workers the small tables'
    while lineitem streams), every key before any vacuum: the order the pool relies on
    to finish."""
    data = data_jobs(1, plan_parts(1, 2))
    later = stage_jobs(1, data, 2)
    stages = [job.stage for job in later]
    assert stages == sorted(stages, key=STAGES.index)
    assert stages.count("keys") == len(schema.key_jobs(1))
    vacuums = [j.table for j in later if j.stage == "vacuum"]
    assert vacuums[:4] == ["orders", "partsupp", "customer", "part"]
    assert vacuums[-1] == "lineitem" and set(vacuums) == set(schema.DATA_TABLES)
    keys = [j.table for j in later if j.stage == "keys"]
    assert keys[0] == "orders" and keys[-2:] == ["lineitem", "lineitem"]
    # One worker copies lineitem first: its keys come first too.
    alone = [j.table for j in stage_jobs(1, data, 1) if j.stage == "keys"]
    assert alone[:2] == ["lineitem", "lineitem"]
    # The last build (lineitem's unsorted index) alone gets the other connections' cores.
    assert [j.parallel_workers for j in later] == [None] * len(later)
    helped = stage_jobs(1, data, 2, LoadOptions(scale_factor=1).last_build_workers(2))
    assert [(j.table, j.parallel_workers) for j in helped if j.parallel_workers] == [
        ("lineitem", 1)]
    assert "l_partkey" in [j for j in helped if j.stage == "keys"][-1].statement.as_string()
    assert LoadOptions(scale_factor=1).last_build_workers(1) is None
    assert LoadOptions(scale_factor=1, max_parallel_maintenance_workers=2
                       ).last_build_workers(4) is None
    assert LoadOptions(scale_factor=1, last_build_parallel=False).last_build_workers(4) is None


def test_second_load_of_the_same_size_is_reused(loaded) -> None:
    target, first = loaded.target, loaded.result
    started = time.monotonic()
    again = load(target, LoadOptions(scale_factor=SF))
    assert again.reused and again.rows == {} and time.monotonic() - started < 2
    with psycopg.connect(target.conninfo()) as conn:
        state = dataset.inspect(conn, schema.WORKLOAD, "sf=0.01", list(schema.TABLES),
                                schema.DATASET_SCHEMA)
    assert state.reusable and state.recorded_size == "sf=0.01"
    assert first.seconds > again.seconds


# ----- refusals and failures ---------------------------------------------------------------

def test_foreign_tables_refuse_the_load_unless_forced(scratch_db: ConnectionInfo) -> None:
    result = foreign_table_refuses_the_load(scratch_db, lambda force: load(
        scratch_db, LoadOptions(scale_factor=SF, force=force, workers=1)))
    assert result.rows["orders"] == 15_000
    assert set(result.parts.values()) == {1}  # one worker: every table whole, frozen
    with psycopg.connect(scratch_db.conninfo(), autocommit=True) as conn:
        # Copied with FREEZE: every page is all-visible and all-frozen already.
        conn.execute("CREATE EXTENSION pg_visibility")
        for table in schema.DATA_TABLES:
            pages, visible, frozen = conn.execute(
                "SELECT pg_relation_size(%s) / 8192, * FROM pg_visibility_map_summary(%s)",
                (table, table)).fetchone()
            assert pages == visible == frozen > 0, table


def test_force_builds_beside_a_users_table_of_our_name(scratch_db: ConnectionInfo) -> None:
    user = scratch_db.in_schema(None)
    with psycopg.connect(user.conninfo(), autocommit=True) as conn:
        conn.execute("CREATE TABLE lineitem (precious text)")
        conn.execute("INSERT INTO lineitem VALUES ('mine')")
    result = load(scratch_db, LoadOptions(scale_factor=SF, force=True))
    assert result.rows["lineitem"] > 0
    with psycopg.connect(user.conninfo()) as conn:
        assert conn.execute("SELECT * FROM public.lineitem").fetchall() == [("mine",)]
        assert conn.execute("SELECT count(*) FROM pgdyno_tpch.lineitem").fetchone()[0] \
            == result.rows["lineitem"]


def test_a_missing_tpchgen_cli_is_one_line(scratch_db: ConnectionInfo, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="pip install tpchgen-cli") as missing:
        load(scratch_db, LoadOptions(scale_factor=SF))
    assert "\n" not in str(missing.value)
    with psycopg.connect(scratch_db.conninfo()) as conn:  # nothing was created
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname NOT IN "
                            "('pg_catalog', 'information_schema')").fetchone() == (0,)


def _generators() -> list[psutil.Process]:
    """tpchgen-cli processes started by this process (the test server's backends are
    children too, and come and go while we look)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.name() == "tpchgen-cli":
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def test_a_killed_generator_stops_the_load_in_one_line(scratch_db: ConnectionInfo, csv_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every table streams from its own generator, as larger datasets load (the
    one-generator threshold lowered to nothing): at SF 0.1 one killed stops the load; the
    reload after it, at SF 0.01, must match DuckDB."""
    monkeypatch.setattr(tproch_loader, "ONE_GENERATOR_BYTES", 0)
    assert not one_generator(0.1) and not one_generator(SF)
    killed: list[int] = []

    def kill_one(report: LoadProgress) -> None:
        if report.phase == "data" and report.rows > 0 and not killed:
            for proc in _generators()[:1]:
                proc.kill()
                killed.append(proc.pid)

    with pytest.raises(RunFailed) as failed:
        load(scratch_db, LoadOptions(scale_factor=0.1, workers=2), kill_one)
    message = str(failed.value)
    assert killed and "\n" not in message
    assert "tpchgen-cli failed generating" in message and "exit -9" in message
    assert _generators() == []  # the other generator was killed too
    with psycopg.connect(scratch_db.conninfo()) as conn:
        state = dataset.inspect(conn, schema.WORKLOAD, "sf=0.1", list(schema.TABLES),
                                schema.DATASET_SCHEMA)
        busy = conn.execute("""SELECT count(*) FROM pg_stat_activity
                               WHERE datname = current_database()
                                 AND pid <> pg_backend_pid()""").fetchone()[0]
        lineitem = conn.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    assert not state.reusable and not state.foreign_tables and busy == 0
    assert lineitem < schema.lineitem_range(0.1)[0]  # rolled back, or never complete
    # The interrupted load is rebuilt without --force.
    result = load(scratch_db, LoadOptions(scale_factor=SF, workers=2))
    assert not result.reused and result.rows == pg_counts(scratch_db)
    assert_matches_duckdb(scratch_db, csv_dir)


REFUSE_FULL_QUANTITIES = """
CREATE FUNCTION public.refuse_full_quantities() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE created record;
BEGIN
  FOR created IN SELECT object_identity FROM pg_event_trigger_ddl_commands()
                 WHERE object_type = 'table' AND object_identity LIKE '%.lineitem' LOOP
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT quantity_below_50 CHECK (l_quantity < 50)',
                   created.object_identity);
  END LOOP;
END $$;
CREATE EVENT TRIGGER refuse_full_quantities ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION public.refuse_full_quantities();
"""
"""The loader creates its own tables: this gives the lineitem it creates a constraint that
about one row in fifty breaks (l_quantity runs from 1 to 50), so its COPY fails."""


def test_a_copy_error_stops_the_load_in_one_line(scratch_db: ConnectionInfo) -> None:
    with psycopg.connect(scratch_db.in_schema(None).conninfo(), autocommit=True) as conn:
        conn.execute(REFUSE_FULL_QUANTITIES)
    with pytest.raises(RunFailed, match='COPY failed: new row for relation "lineitem" violates '
                                        'check constraint "quantity_below_50"') as failed:
        load(scratch_db, LoadOptions(scale_factor=SF, workers=2))
    assert "\n" not in str(failed.value)
    assert _generators() == []
    with psycopg.connect(scratch_db.conninfo()) as conn:
        state = dataset.inspect(conn, schema.WORKLOAD, "sf=0.01", list(schema.TABLES),
                                schema.DATASET_SCHEMA)
        busy = conn.execute("""SELECT count(*) FROM pg_stat_activity
                               WHERE datname = current_database()
                                 AND pid <> pg_backend_pid()""").fetchone()[0]
        lineitem = conn.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    assert not state.reusable and busy == 0 and lineitem == 0  # rolled back


# ----- sizes and plans ---------------------------------------------------------------------

def test_sizes_and_scale_factors() -> None:
    assert schema.expected_rows(1) == {
        "region": 5, "nation": 25, "supplier": 10_000, "customer": 150_000, "part": 200_000,
        "partsupp": 800_000, "orders": 1_500_000}
    # What tpchgen-cli 4.0 wrote at this scale factor.
    assert schema.expected_rows(0.0137) == {
        "region": 5, "nation": 25, "supplier": 137, "customer": 2_055, "part": 2_740,
        "partsupp": 10_960, "orders": 20_550}
    assert schema.lineitem_range(1) == (1_500_000, 10_500_000)
    assert schema.size_key(1) == "sf=1" and schema.size_key(0.01) == "sf=0.01"
    assert LoadOptions(scale_factor=10).size_key == "sf=10"
    for bad in (0, -1, 0.00001, 1e6, 0.001, 0.005):
        with pytest.raises(UsageError, match="--scale-factor") as refused:
            LoadOptions(scale_factor=bad)
        assert "\n" not in str(refused.value)
    # Below SF 0.024 dbgen's partsupp formula can repeat a supplier of a part.
    with pytest.raises(UsageError, match="duplicate partsupp keys"):
        schema.check_scale_factor(0.001)
    assert schema.check_scale_factor(0.02) == 0.02
    with pytest.raises(UsageError, match="--load-workers"):
        LoadOptions(scale_factor=1, workers=0)


def test_only_big_tables_are_cut_into_parts() -> None:
    assert set(plan_parts(0.01, 2).values()) == {1}  # small: every table whole
    # Small datasets come from one generator start: up to SF 0.18 (200 MB of CSV).
    assert one_generator(0.01) and one_generator(0.1) and one_generator(0.18)
    assert not one_generator(0.19) and not one_generator(1)
    assert set(plan_parts(10, 1).values()) == {1}  # one worker: nothing to balance
    assert set(plan_parts(10, 2).values()) == {1}  # lineitem whole beats two unfrozen parts
    assert plan_parts(10, 4)["lineitem"] == 2
    parts = plan_parts(10, 16)
    assert parts["lineitem"] > parts["orders"] > 1 and parts["customer"] == 1
    jobs = data_jobs(10, parts)
    assert jobs[-1] == CopyJob(("region", "nation"))
    assert [j.weight for j in jobs] == sorted((j.weight for j in jobs), reverse=True)
    assert sum(1 for j in jobs if j.tables == ("lineitem",)) == parts["lineitem"]
    assert all(not j.freeze for j in jobs if j.tables == ("lineitem",))
    assert CopyJob(("part",)).freeze
