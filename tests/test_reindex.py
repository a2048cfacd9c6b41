"""`pgdyno runs --reindex`: the index of runs rebuilt from the run directories,
the rows `pgdyno bench` wrote again, a damaged old index moved aside and never deleted."""

from __future__ import annotations

import random
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.results.index import INDEX_FILE, RunIndex, RunRow
from tests.conftest import cpu_runs
from tests.conftest import run_cli_here as run_cli

GARBAGE = b"\xff\xfe\x00" + random.Random(7).randbytes(3000)
ASIDE = re.compile(r"index\.sqlite\.damaged-\d{8}T\d{6}Z(-\d+)?")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real runs and the index `pgdyno bench` wrote for them."""
    return cpu_runs(tmp_path_factory.mktemp("reindex"))


@pytest.fixture
def results(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(pristine, copy)
    return copy


def _rows(index: Path) -> list[tuple]:
    """Every row, read with sqlite3 directly (not through RunIndex)."""
    with sqlite3.connect(index) as conn:
        return sorted(conn.execute("SELECT * FROM runs").fetchall())


def _events_per_s(run_dir: Path) -> float:
    """The headline from sysbench's own output (one client count, one iteration)."""
    (stdout,) = run_dir.glob("raw/sysbench/c1-i1/stdout.txt")
    return float(re.search(r"events per second:\s+([\d.]+)", stdout.read_text()).group(1))


def test_reindex_rebuilds_the_rows_bench_wrote(results: Path) -> None:
    written = _rows(results / INDEX_FILE)
    assert len(written) == 2
    (results / INDEX_FILE).write_bytes(GARBAGE)

    listing = run_cli(["runs", "--results-dir", str(results)], results.parent)
    assert listing.returncode == 2
    assert listing.stderr.strip().splitlines() == [
        f"pgdyno: error: {results / INDEX_FILE}: damaged index of runs (file is not a "
        "database); rebuild it from the run directories with `pgdyno runs --reindex`"]

    out = run_cli(["runs", "--reindex", "--wide", "--results-dir", str(results)],
                  results.parent)
    assert out.returncode == 0, out.stderr
    (aside,) = results.glob(f"{INDEX_FILE}.damaged-*")
    assert ASIDE.fullmatch(aside.name), aside.name
    assert aside.read_bytes() == GARBAGE  # moved, never deleted nor changed
    assert out.stderr.strip().splitlines() == [
        f"index rebuilt: {results / INDEX_FILE}, 2 run(s); the damaged index was moved to "
        f"{aside}"]
    assert _rows(results / INDEX_FILE) == written  # the very rows bench wrote
    for row in written:
        run_dir = results / row[0]
        assert row[8] == pytest.approx(_events_per_s(run_dir))  # headline, from raw output
        assert row[0] in out.stdout  # and listed after the rebuild


def test_reindex_skips_a_damaged_run_and_keeps_the_rest(results: Path) -> None:
    """A run whose manifest cannot be read is left out; one whose summary cannot be read is
    indexed without its headline; each says so in a line naming the file."""
    written = {row[0]: row for row in _rows(results / INDEX_FILE)}
    first, second = sorted(written)
    manifest = results / first / "manifest.json"
    manifest.write_text(manifest.read_text()[:200])
    summary = results / second / "summary.json"
    summary.write_bytes(GARBAGE)

    out = run_cli(["runs", "--reindex", "--results-dir", str(results)], results.parent)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert re.fullmatch(rf"pgdyno: warning: {re.escape(str(manifest))}: cannot read the run "
                        r"manifest: the file is truncated \(its JSON ends early, at line \d+\); "
                        "not indexed", lines[0]), lines[0]
    assert lines[1] == (f"pgdyno: warning: {summary}: cannot read the run summary: binary "
                        "data, not JSON text; rebuild it with `pgdyno report RUN_DIR`; "
                        "indexed without its headline")
    assert lines[2] == f"index rebuilt: {results / INDEX_FILE}, 1 run(s)"
    assert not list(results.glob(f"{INDEX_FILE}.damaged-*"))  # the old index was whole
    (row,) = _rows(results / INDEX_FILE)
    headline, p99 = 8, 9
    assert row[:headline] == written[second][:headline]
    assert row[headline] is None and row[p99] is None
    assert row[headline + 2:] == written[second][headline + 2:]


@pytest.mark.parametrize("state", ["missing", "directory", "newer"])
def test_reindex_builds_or_replaces_the_index(results: Path, state: str) -> None:
    index = results / INDEX_FILE
    written = _rows(index)
    if state == "missing":
        index.unlink()
    elif state == "directory":
        index.unlink()
        (index / "inside").mkdir(parents=True)
    else:  # as a newer pgdyno would have written it
        with sqlite3.connect(index) as conn:
            conn.execute("PRAGMA user_version = 99")
    out = run_cli(["runs", "--reindex", "--results-dir", str(results)], results.parent)
    assert out.returncode == 0, out.stderr
    assert _rows(index) == written
    aside = list(results.glob(f"{INDEX_FILE}.damaged-*"))
    assert len(aside) == (0 if state == "missing" else 1)
    if state == "directory":
        assert (aside[0] / "inside").is_dir()
    if state == "newer":
        with sqlite3.connect(aside[0]) as conn:
            assert conn.execute("PRAGMA user_version").fetchone() == (99,)
            assert len(conn.execute("SELECT * FROM runs").fetchall()) == 2


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_runs_limit_must_be_one_or_more(tmp_path: Path, limit: str) -> None:
    out = run_cli(["runs", "--limit", limit, "--results-dir", str(tmp_path)], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"pgdyno: error: --limit {limit}: must be 1 or more"]


# ----- RunIndex itself, on indexes made here ----------------------------------------------

def _row(run_id: str, started_at: str = "2026-01-01T00:00:00Z") -> RunRow:
    return RunRow(run_id=run_id, context="c", workload="cpu", status="ok",
                  started_at=started_at, ended_at=None, config=None, clients="1",
                  headline=1000.0, p99_ms=None, pg_version=None)


LOOKUP_ROWS = [("ctx_a/tpcb-1", "2026-01-01T00:00:00Z"), ("ctx_b/tpcb-1", "2026-01-02T00:00:00Z"),
               ("tpcb-1", "2025-12-31T00:00:00Z"), ("c/xpcb-2", "2026-01-03T00:00:00Z")]
LOOKUPS = {
    "tpcb-1": "tpcb-1",  # the exact id wins over the two newer runs ending with it
    "/tpcb-1": "ctx_b/tpcb-1",  # a suffix: the newest of the runs ending with it
    "ctx_a/tpcb-1": "ctx_a/tpcb-1",
    "_pcb-2": None,  # "_" is a character, not LIKE's any-character wildcard
    "%-2": None,
    "pcb-2": "c/xpcb-2",
}
"""Run ids (with their start times) and what ``get`` answers for each reference."""


def test_get_prefers_the_exact_id_then_the_newest_suffix(tmp_path: Path) -> None:
    index = RunIndex(tmp_path)
    for run_id, started in LOOKUP_ROWS:
        index.upsert(_row(run_id, started))
    got = {ref: getattr(index.get(ref), "run_id", None) for ref in LOOKUPS}
    assert got == LOOKUPS


def test_a_damaged_index_moves_aside_with_its_journal(tmp_path: Path) -> None:
    """SQLite would roll a journal left beside the new index back into it: the journal of
    a damaged index goes with it."""
    (tmp_path / INDEX_FILE).write_bytes(GARBAGE)
    (tmp_path / f"{INDEX_FILE}-journal").write_bytes(b"journal of the damaged index")
    moved = RunIndex(tmp_path).rebuild([_row("c/a")])
    assert moved is not None and moved.read_bytes() == GARBAGE
    assert Path(f"{moved}-journal").read_bytes() == b"journal of the damaged index"
    assert not (tmp_path / f"{INDEX_FILE}-journal").exists()
    assert [r.run_id for r in RunIndex(tmp_path).query()] == ["c/a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [INDEX_FILE, moved.name, f"{moved.name}-journal"])  # no temporary file left


def test_an_index_written_before_its_version_is_read_and_upgraded(tmp_path: Path) -> None:
    """Indexes of earlier pgdyno (user_version 0, a tps column) still list their runs."""
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, context TEXT NOT NULL, "
                     "workload TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,"
                     " ended_at TEXT, config TEXT, clients TEXT, tps REAL, p99_ms REAL, "
                     "pg_version TEXT)")
        conn.execute("INSERT INTO runs VALUES ('c/old', 'c', 'tpcb', 'ok', 't', NULL, "
                     "'default', '8', 1234.5, 2.5, '18.0')")
    (row,) = RunIndex(tmp_path).query()
    assert (row.run_id, row.headline, row.p99_ms) == ("c/old", 1234.5, 2.5)
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)


def test_reading_an_index_does_not_write_it(tmp_path: Path) -> None:
    """A read-only results directory can be listed: reading an up-to-date index writes
    nothing (the schema is created or migrated only when something is missing; any write
    would change the header's change counter)."""
    RunIndex(tmp_path).upsert(_row("c/a"))
    index = tmp_path / INDEX_FILE
    before = index.read_bytes()
    assert [r.run_id for r in RunIndex(tmp_path).query()] == ["c/a"]
    assert RunIndex(tmp_path).get("a") is not None
    assert index.read_bytes() == before


def test_an_index_without_its_table_is_refused(tmp_path: Path) -> None:
    """Listing another program's database as "no runs" would hide the runs on disk."""
    with sqlite3.connect(tmp_path / INDEX_FILE) as conn:
        conn.execute("CREATE TABLE other (x)")
    with pytest.raises(UsageError, match="not an index of runs .a database without the runs "
                                         "table.; rebuild it"):
        RunIndex(tmp_path).query()
