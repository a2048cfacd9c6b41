"""Without a server: the export formats of `pgdyno runs` on rows made
here, the SQLite index's new columns, and the refusals of a bad or unreachable results
database, each one line with the password masked."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.results.export import EXPORT_COLUMNS, parquet_table, to_csv, to_json, write_export
from pgdyno.results.index import INDEX_FILE, RunIndex, RunRow
from pgdyno.results.store import RecordingIndex, check_dsn, results_db
from tests.conftest import run_cli_here as run_here

SECRET = "hunter2"
UNREACHABLE = f"postgresql://alice:{SECRET}@127.0.0.1:1/results"
"""Port 1 on loopback: refused at once, nothing listens there."""

ROWS = [
    RunRow(run_id="box--tpcb/tpcb-20260102T030405Z", context="box--tpcb", workload="tpcb",
           status="ok", started_at="2026-01-02T03:04:05Z", ended_at="2026-01-02T03:05:00Z",
           config="tuned", clients="4,8", headline=1234.5678901234567, p99_ms=0.1 + 0.2,
           pg_version="18.1", headline_metric="TPS", headline_unit="tx/s",
           dataset="scale 10", host="db-1", headline_direction="higher",
           verdict="WAL write/sync", settings={"work_mem": "8192 kB", "a, \"b\"": "x"}),
    RunRow(run_id="box--cpu/cpu-20260101T000000Z", context="box--cpu", workload="cpu",
           status="failed", started_at="2026-01-01T00:00:00Z", ended_at=None, config=None,
           clients="2", headline=None, p99_ms=None, pg_version=None),
]


def test_every_field_of_a_run_is_exported() -> None:
    assert sorted(EXPORT_COLUMNS) == sorted(f.name for f in fields(RunRow))


def test_csv_text() -> None:
    text = to_csv(ROWS)
    lines = text.splitlines()
    assert lines[0] == ",".join(EXPORT_COLUMNS)
    assert lines[1] == (
        'box--tpcb/tpcb-20260102T030405Z,db-1,box--tpcb,tpcb,ok,2026-01-02T03:04:05Z,'
        '2026-01-02T03:05:00Z,tuned,scale 10,"4,8",TPS,1234.5678901234567,tx/s,higher,'
        '0.30000000000000004,WAL write/sync,18.1,'
        '"{""a, \\""b\\"""": ""x"", ""work_mem"": ""8192 kB""}"')
    assert lines[2] == ("box--cpu/cpu-20260101T000000Z,,box--cpu,cpu,failed,"
                        "2026-01-01T00:00:00Z,,,,2,,,,,,,,")
    back = list(csv.DictReader(io.StringIO(text)))
    assert float(back[0]["headline"]) == ROWS[0].headline  # exact, not rounded
    assert json.loads(back[0]["settings"]) == ROWS[0].settings


def test_json_document() -> None:
    doc = json.loads(to_json(ROWS, "postgresql://alice:***@h/db"))
    assert doc["schema_version"] == 1 and doc["source"] == "postgresql://alice:***@h/db"
    assert doc["columns"] == list(EXPORT_COLUMNS)
    assert list(doc["runs"][0]) == list(EXPORT_COLUMNS)
    assert [RunRow(**r) for r in doc["runs"]] == ROWS
    assert doc["runs"][1]["headline"] is None


def test_parquet_types_and_values(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "runs.parquet"
    assert write_export(ROWS, "parquet", path, "here") == ""
    con = duckdb.connect()
    got = con.execute(f"SELECT run_id, headline, p99_ms, epoch(started_at), ended_at IS NULL, "
                      f"settings FROM '{path}'").fetchall()
    assert got == [
        (ROWS[0].run_id, ROWS[0].headline, ROWS[0].p99_ms, 1767323045.0, False,
         json.dumps(ROWS[0].settings, sort_keys=True)),
        (ROWS[1].run_id, None, None, 1767225600.0, True, None)]
    # The same schema with no rows: a dashboard's query still finds its columns.
    empty = parquet_table([], "here")
    assert empty.num_rows == 0 and empty.schema.names == list(EXPORT_COLUMNS)
    assert str(empty.schema.field("started_at").type) == "timestamp[s, tz=UTC]"
    assert empty.schema.metadata[b"pgdyno.schema_version"] == b"1"


def test_parquet_without_pyarrow_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    with pytest.raises(UsageError) as err:
        parquet_table(ROWS, "here")
    assert str(err.value) == ("--format parquet needs pyarrow, which is not installed: "
                              "pip install 'pgdyno[parquet]' (or pip install pyarrow)")


def test_runs_format_refusals(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    base = ["runs", "--results-dir", str(results)]
    bad = run_here([*base, "--format", "xml"], tmp_path, env={"PGDYNO_RESULTS_DB": ""})
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "pgdyno: error: --format xml: accepted values are table, csv, json, parquet"]
    binary = run_here([*base, "--format", "parquet"], tmp_path, env={"PGDYNO_RESULTS_DB": ""})
    assert binary.returncode == 2
    assert binary.stderr.splitlines() == [
        "pgdyno: error: --format parquet writes a binary file: give --output FILE.parquet"]
    empty = run_here([*base, "--format", "csv"], tmp_path, env={"PGDYNO_RESULTS_DB": ""})
    assert empty.returncode == 0 and empty.stdout == ",".join(EXPORT_COLUMNS) + "\n"


# ----- the SQLite index's new columns -----------------------------------------------------

def test_rows_round_trip_through_sqlite(tmp_path: Path) -> None:
    index = RunIndex(tmp_path)
    assert index.upsert_many(ROWS) == 2
    assert index.query() == ROWS  # newest first, every field as written


def test_an_older_index_gains_the_new_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    """An index written before the shared results database: 14 columns; its rows stay, the
    new fields empty."""
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, context TEXT NOT NULL, "
                     "workload TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL, "
                     "ended_at TEXT, config TEXT, clients TEXT, headline REAL, p99_ms REAL, "
                     "pg_version TEXT, headline_metric TEXT, headline_unit TEXT, "
                     "dataset TEXT)")
        conn.execute("INSERT INTO runs VALUES ('c/a', 'c', 'cpu', 'ok', "
                     "'2026-01-01T00:00:00Z', NULL, NULL, '2', 99.5, NULL, NULL, "
                     "'events/s', 'events/s', NULL)")
        conn.execute("PRAGMA user_version = 1")
    (row,) = RunIndex(tmp_path).query()
    assert (row.run_id, row.headline, row.host, row.verdict, row.settings) == \
        ("c/a", 99.5, None, None, None)
    RunIndex(tmp_path).upsert(ROWS[0])
    assert RunIndex(tmp_path).get(ROWS[0].run_id) == ROWS[0]


# ----- bad or unreachable databases -------------------------------------------------------

@pytest.mark.parametrize("dsn", ["results.db", "postgresql://alice:hunter2@h/db?nosuch=1",
                                 "host=h password=hunter2 nosuch=1"])
def test_a_bad_dsn_is_one_line_without_its_password(dsn: str) -> None:
    with pytest.raises(UsageError) as err:
        check_dsn(dsn, "--results-db")
    message = str(err.value)
    assert SECRET not in message and "\n" not in message
    assert message.startswith("--results-db ") and "not a PostgreSQL connection string" in message


def test_the_environment_variable_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGDYNO_RESULTS_DB", UNREACHABLE)
    assert results_db(None) == UNREACHABLE
    assert results_db("postgresql://other/db") == "postgresql://other/db"
    monkeypatch.setenv("PGDYNO_RESULTS_DB", "  ")
    assert results_db(None) is None
    monkeypatch.setenv("PGDYNO_RESULTS_DB", "nonsense")
    with pytest.raises(UsageError, match=r"^PGDYNO_RESULTS_DB nonsense: not a PostgreSQL"):
        results_db(None)


def test_a_lost_database_costs_a_warning_not_the_row(tmp_path: Path) -> None:
    warnings: list[str] = []
    index = RecordingIndex(tmp_path, UNREACHABLE, warn=warnings.append)
    index.upsert(ROWS[0])
    assert RunIndex(tmp_path).query() == [ROWS[0]]
    (line,) = warnings
    assert SECRET not in line and "postgresql://alice:***@127.0.0.1:1/results" in line
    assert line.endswith(f"run {ROWS[0].run_id} is in {tmp_path / INDEX_FILE}: push it with "
                         "`pgdyno runs --sync-to DSN`")


def test_bench_refuses_an_unreachable_database_before_it_runs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    out = run_here(["bench", "cpu", "--clients", "1", "--duration", "1", "--warmup", "0",
                    "--iterations", "1", "--no-telemetry", "--no-progress",
                    "--results-dir", str(results), "--results-db", UNREACHABLE], tmp_path)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("pgdyno: error: --results-db postgresql://alice:***@127.0.0.1:1/"
                           "results: ")
    assert SECRET not in out.stderr + out.stdout
    assert "Connection refused" in line
    assert not results.exists()  # refused before a run directory was made
    listing = run_here(["runs", "--results-dir", str(results), "--results-db", UNREACHABLE],
                       tmp_path)
    assert listing.returncode == 2 and SECRET not in listing.stderr
