"""The shared results database on a real PostgreSQL started by pgdyno's
own target code: versioned migrations from empty, the same `pgdyno runs` listing from the
SQLite index and from PostgreSQL for the same real runs, `--sync-to`, and CSV / JSON /
Parquet exports read back with csv, json and duckdb. The DSN carries a password (the test
server trusts local connections, so any password is accepted): it must never be written."""

from __future__ import annotations

import csv
import json
import socket
import statistics
import threading
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import psycopg
import pytest

from pgdyno.errors import UsageError
from pgdyno.results.index import ROW_COLUMNS, RunIndex, RunRow
from pgdyno.results.pgindex import Migration, PgRunIndex, migrate, shipped_migrations
from pgdyno.targets.local import LocalServer
from tests.conftest import make_shared_dir, scratch_database
from tests.conftest import run_cli_here as run_here
from tests.recompute import recompute_iteration
from tests.settings_text import recorded, stock, with_stock
from tests.test_reindex import LOOKUP_ROWS, LOOKUPS

pytestmark = pytest.mark.server

SECRET = "s3cret-Pa55"
BENCH = ["bench", "tpcb", "--scale", "1", "--duration", "2", "--warmup", "0",
         "--iterations", "1", "--no-progress"]


def uri(server: LocalServer, dbname: str) -> str:
    conn = server.connection(via="tcp")
    return f"postgresql://{conn.user}:{SECRET}@127.0.0.1:{conn.port}/{dbname}"


def plain(server: LocalServer, dbname: str) -> str:
    """The same database for the test's own psycopg reads (no password needed: trust)."""
    return server.admin_connection().conninfo(dbname)


@pytest.fixture
def empty_db(server: LocalServer) -> Iterator[str]:
    yield from (uri(server, c.dbname) for c in scratch_database(server, "pgdyno_rdb_empty"))


@dataclass
class Made:
    results: Path
    dsn: str
    plain: str
    server: LocalServer
    outputs: list[str]


@pytest.fixture(scope="module")
def made(server: LocalServer, workdir: Path) -> Iterator[Made]:
    """Two real tiny TPC-B runs writing to a shared database: one given --results-db, the
    other PGDYNO_RESULTS_DB (and another setting, so their settings differ)."""
    for info in scratch_database(server, "pgdyno_rdb_runs"):
        results = make_shared_dir("pgdyno-resultsdb-")
        dsn = uri(server, info.dbname)
        first = run_here([*BENCH, "--clients", "1", "--results-dir", str(results),
                          "--results-db", dsn], workdir)
        assert first.returncode == 0, first.stderr[-3000:]
        second = run_here([*BENCH, "--clients", "2", "--set", "work_mem=8MB",
                           "--results-dir", str(results)], workdir,
                          env={"PGDYNO_RESULTS_DB": dsn})
        assert second.returncode == 0, second.stderr[-3000:]
        yield Made(results, dsn, plain(server, info.dbname), server,
                   [first.stdout, first.stderr, second.stdout, second.stderr])


def _table_rows(conninfo: str) -> list[dict]:
    with psycopg.connect(conninfo) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as c:
        return c.execute("SELECT * FROM runs ORDER BY started_at, run_id").fetchall()


# ----- migrations -------------------------------------------------------------------------

def _columns(conninfo: str, table: str) -> list[str]:
    with psycopg.connect(conninfo) as conn:
        return [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position", (table,))]


def _applied(conninfo: str) -> list[tuple]:
    with psycopg.connect(conninfo) as conn:
        return conn.execute("SELECT version, name, applied_at, applied_by "
                            "FROM schema_migrations ORDER BY version").fetchall()


def test_migrations_from_empty_and_idempotent(empty_db: str, server: LocalServer) -> None:
    conninfo = plain(server, "pgdyno_rdb_empty")
    assert _columns(conninfo, "runs") == []  # empty: nothing of pgdyno's there yet
    PgRunIndex(empty_db).check()
    shipped = shipped_migrations()
    assert [m.version for m in shipped] == list(range(1, len(shipped) + 1))
    first = _applied(conninfo)
    assert [(v, n) for v, n, _, _ in first] == [(m.version, m.name) for m in shipped]
    assert all(by.startswith("pgdyno ") for *_, by in first)
    assert set(_columns(conninfo, "runs")) == {*ROW_COLUMNS, "recorded_at"}

    # Applying again changes nothing: the same rows, with their first applied_at.
    PgRunIndex(empty_db).check()
    with psycopg.connect(conninfo) as conn:
        assert migrate(conn, shipped, "test") == []
    assert _applied(conninfo) == first


def test_migrations_apply_in_order_each_in_its_transaction(empty_db: str,
                                                          server: LocalServer) -> None:
    conninfo = plain(server, "pgdyno_rdb_empty")
    shipped = shipped_migrations()
    top = shipped[-1].version
    # Given out of order: 2 needs the column 1 adds, 1 needs the table the shipped ones make.
    extra = [Migration(top + 2, "widen", "ALTER TABLE runs ALTER COLUMN note TYPE varchar(80)"),
             Migration(top + 1, "note", "ALTER TABLE runs ADD COLUMN note text")]
    with psycopg.connect(conninfo) as conn:
        applied = migrate(conn, [*extra, *reversed(shipped)], "test")
    assert applied == [*(m.version for m in shipped), top + 1, top + 2]
    assert "note" in _columns(conninfo, "runs")

    # A migration failing half-way leaves nothing of itself: one transaction each.
    broken = Migration(top + 3, "broken", "ALTER TABLE runs ADD COLUMN half int; SELECT 1/0")
    with psycopg.connect(conninfo) as conn, pytest.raises(psycopg.errors.DivisionByZero):
        migrate(conn, [*shipped, *extra, broken], "test")
    assert "half" not in _columns(conninfo, "runs")
    assert [r[0] for r in _applied(conninfo)][-1] == top + 2


def test_a_newer_schema_is_refused_in_one_line(empty_db: str, server: LocalServer,
                                               workdir: Path) -> None:
    conninfo = plain(server, "pgdyno_rdb_empty")
    newest = shipped_migrations()[-1].version
    with psycopg.connect(conninfo) as conn:
        migrate(conn, [*shipped_migrations(),
                       Migration(newest + 1, "future", "ALTER TABLE runs ADD COLUMN f int")],
                "test")
    with pytest.raises(UsageError) as err:
        PgRunIndex(empty_db).query()
    message = str(err.value)
    assert message == (f"--results-db {empty_db.replace(SECRET, '***')}: the results "
                       f"database's schema is version {newest + 1}, newer than this pgdyno's "
                       f"({newest}); upgrade pgdyno to use it")
    out = run_here(["runs", "--results-db", empty_db], workdir)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"pgdyno: error: {message}"]
    assert SECRET not in out.stderr + out.stdout


def test_two_pgdyno_migrating_at_once_take_turns(empty_db: str, server: LocalServer) -> None:
    """Two hosts of a fleet starting together: each migration applied once, no error."""
    errors: list[BaseException] = []

    def check() -> None:
        try:
            PgRunIndex(empty_db).check()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=check) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    versions = [r[0] for r in _applied(plain(server, "pgdyno_rdb_empty"))]
    assert versions == [m.version for m in shipped_migrations()]


# ----- the runs, in both indexes ----------------------------------------------------------

def test_runs_written_to_postgres_hold_what_the_run_measured(made: Made) -> None:
    rows = _table_rows(made.plain)
    assert len(rows) == 2
    runs = sorted(made.results.glob("*--tpcb/tpcb-*"))
    assert [r["run_id"] for r in rows] == [str(p.relative_to(made.results)) for p in runs]
    for row, run in zip(rows, runs, strict=True):
        summary = json.loads((run / "summary.json").read_text())
        manifest = json.loads((run / "manifest.json").read_text())
        (it,) = summary["iterations"]
        again = recompute_iteration(run, it, 0, 2)
        assert row["headline"] == pytest.approx(again.transactions / 2, rel=1e-9)
        assert row["headline_metric"] == "TPS" and row["headline_unit"] == "tx/s"
        assert row["headline_direction"] == "higher"
        assert row["p99_ms"] == pytest.approx(again.percentile(99), rel=1e-6)
        assert row["status"] == "ok" and row["host"] == socket.gethostname()
        assert row["clients"] == str(it["clients"])
        assert row["verdict"] == (it["verdict"] or {}).get("label")
        assert row["pg_version"] == manifest["server"]["version"]
        assert row["started_at"].strftime("%Y-%m-%dT%H:%M:%SZ") == manifest["started_at"]
    # Settings as jsonb, queried with jsonb operators: the server's own view in natural
    # units, the stock value named: the run's pg_settings and a live
    # server's boot_val, read by the test's own converter.
    with psycopg.connect(made.plain) as conn:
        work_mem = conn.execute("SELECT clients, settings->>'work_mem' FROM runs "
                                "ORDER BY clients").fetchall()
    second = json.loads((runs[1] / "manifest.json").read_text())["server"]
    value = recorded(second["non_default_settings"]["work_mem"])
    assert value == "8 MB"
    assert work_mem == [("1", None), ("2", with_stock(value, stock(made.plain, "work_mem")))]


def test_the_same_listing_from_sqlite_and_postgres(made: Made, workdir: Path) -> None:
    local = RunIndex(made.results)
    shared = PgRunIndex(made.dsn)
    assert shared.query() == local.query()
    assert len(local.query()) == 2 and all(r.settings for r in local.query())
    context = local.query()[0].context
    for filters in ({"workload": "tpcb"}, {"status": "ok"}, {"context": context},
                    {"limit": 1}, {"workload": "cpu"}, {"status": "failed"}):
        assert shared.query(**filters) == local.query(**filters), filters
    newest = local.query()[0]
    assert shared.get(newest.run_id.split("/")[-1]) == local.get(newest.run_id) == newest

    base = ["runs", "--results-dir", str(made.results)]
    for args in ([], ["--workload", "tpcb", "--limit", "1"], ["--format", "csv"],
                 [newest.run_id]):
        sqlite_out = run_here([*base, *args], workdir, env={"PGDYNO_RESULTS_DB": ""})
        pg_out = run_here([*base, *args, "--results-db", made.dsn], workdir)
        env_out = run_here([*base, *args], workdir, env={"PGDYNO_RESULTS_DB": made.dsn})
        assert sqlite_out.returncode == pg_out.returncode == env_out.returncode == 0
        assert pg_out.stdout == sqlite_out.stdout == env_out.stdout, args
        assert newest.run_id.split("/")[-1] in pg_out.stdout  # the table: the short name
        if not args:
            assert f"{newest.headline:,.0f} TPS" in pg_out.stdout


def test_get_answers_the_same_from_sqlite_and_postgres(empty_db: str, tmp_path: Path) -> None:
    """A run named by its id or a suffix of it is the same run in either backend."""
    local, shared = RunIndex(tmp_path), PgRunIndex(empty_db)
    for run_id, started in LOOKUP_ROWS:
        row = RunRow(run_id=run_id, context="c", workload="cpu", status="ok",
                     started_at=started, ended_at=None, config=None, clients="1",
                     headline=1000.0, p99_ms=None, pg_version=None)
        local.upsert(row)
        shared.upsert(row)
    for ref, expected in LOOKUPS.items():
        assert getattr(shared.get(ref), "run_id", None) == expected, ref
        assert shared.get(ref) == local.get(ref), ref


def test_sync_to_pushes_local_runs_once(made: Made, server: LocalServer, workdir: Path) -> None:
    for info in scratch_database(server, "pgdyno_rdb_sync"):
        dsn = uri(server, info.dbname)
        base = ["runs", "--results-dir", str(made.results)]
        none = run_here([*base, "--sync-to", dsn, "--workload", "cpu"], workdir)
        assert none.returncode == 0, none.stderr
        assert none.stderr.splitlines() == [
            f"pushed 0 run(s) from {made.results} to {dsn.replace(SECRET, '***')}"]
        for _ in range(2):  # pushing again updates the same rows
            out = run_here([*base, "--sync-to", dsn], workdir)
            assert out.returncode == 0, out.stderr
            assert out.stderr.splitlines() == [
                f"pushed 2 run(s) from {made.results} to {dsn.replace(SECRET, '***')}"]
            assert SECRET not in out.stdout + out.stderr
        assert PgRunIndex(dsn).query() == RunIndex(made.results).query()
        pushed = _table_rows(plain(server, info.dbname))
        direct = _table_rows(made.plain)
        assert [{k: v for k, v in r.items() if k != "recorded_at"} for r in pushed] == \
            [{k: v for k, v in r.items() if k != "recorded_at"} for r in direct]


# ----- exports ----------------------------------------------------------------------------

def test_exports_round_trip(made: Made, workdir: Path, tmp_path: Path) -> None:
    """Exported from PostgreSQL, read back with csv, json and duckdb, compared with the
    rows of the SQLite index."""
    duckdb = pytest.importorskip("duckdb")
    expected = RunIndex(made.results).query()
    files = {}
    for fmt in ("csv", "json", "parquet"):
        files[fmt] = tmp_path / f"runs.{fmt}"
        out = run_here(["runs", "--results-dir", str(made.results), "--results-db", made.dsn,
                        "--format", fmt, "--output", str(files[fmt])], workdir)
        assert out.returncode == 0, out.stderr
        assert out.stderr.splitlines() == [f"2 run(s) written to {files[fmt]}"]
        assert SECRET.encode() not in files[fmt].read_bytes()

    names = [f.name for f in fields(RunRow)]
    with files["csv"].open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == [n for n in _export_order() if n in names]
    for got, row in zip(table, expected, strict=True):
        for name in names:
            value = getattr(row, name)
            if name == "settings":
                assert json.loads(got[name]) == value
            elif isinstance(value, float):
                assert float(got[name]) == value  # exactly: repr round-trips a double
            else:
                assert got[name] == ("" if value is None else str(value)), name
    # Each setting as the run's server reported it in pg_settings, read by the test's own
    # converter, beside a live server's boot_val: "4 MB (stock) → 8 MB".
    for got in table:
        manifest = json.loads((made.results / got["run_id"] / "manifest.json").read_text())
        settings = manifest["server"]["non_default_settings"]
        shown = json.loads(got["settings"])
        assert sorted(shown) == sorted(settings)
        for name, value in settings.items():
            assert shown[name] == with_stock(recorded(value), stock(made.plain, name)), name
    assert {json.loads(got["settings"]).get("work_mem") for got in table} == {
        None, with_stock("8 MB", stock(made.plain, "work_mem"))}

    doc = json.loads(files["json"].read_text())
    assert doc["schema_version"] == 1 and SECRET not in doc["source"]
    assert [RunRow(**r) for r in doc["runs"]] == expected

    con = duckdb.connect()
    cursor = con.execute("SELECT * EXCLUDE (started_at, ended_at), "
                         "strftime(started_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), "
                         "strftime(ended_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ') "
                         f"FROM read_parquet('{files['parquet']}')")
    cols = [d[0] for d in cursor.description]
    got = [dict(zip(cols, r, strict=True)) for r in cursor.fetchall()]
    for record, row in zip(got, expected, strict=True):
        started, ended = record.pop(cols[-2]), record.pop(cols[-1])
        record["settings"] = json.loads(record["settings"])
        assert RunRow(**record, started_at=started, ended_at=ended) == row
    types = dict(con.execute(f"SELECT name, type FROM parquet_schema('{files['parquet']}') "
                             "WHERE name IN ('headline', 'p99_ms', 'started_at')").fetchall())
    assert types == {"headline": "DOUBLE", "p99_ms": "DOUBLE", "started_at": "INT64"}
    median_tps = statistics.median(r.headline for r in expected)
    assert con.execute(f"SELECT median(headline) FROM '{files['parquet']}'").fetchone()[0] \
        == pytest.approx(median_tps)


def _export_order() -> tuple[str, ...]:
    from pgdyno.results.export import EXPORT_COLUMNS

    return EXPORT_COLUMNS


# ----- passwords --------------------------------------------------------------------------

def test_no_password_anywhere(made: Made, workdir: Path) -> None:
    """Not in the run directories (manifests, logs, reports), not in the local index, not
    in what the runs printed; the database's own rows neither."""
    assert SECRET not in made.dsn.replace(SECRET, "***")
    for text in made.outputs:
        assert SECRET not in text
    for path in made.results.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    manifest = json.loads(next(made.results.glob("*/tpcb-*/manifest.json")).read_text())
    assert "results_db" not in manifest["options"]
    with psycopg.connect(made.plain) as conn:
        dump = conn.execute("SELECT string_agg(t::text, '') FROM runs t").fetchone()[0]
    assert SECRET not in dump
