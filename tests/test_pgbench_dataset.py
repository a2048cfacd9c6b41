"""pgdyno's pgbench dataset is what bare ``pgbench -i`` makes.

pgdyno builds the tables itself (its own schema, its own drop, its session settings for the
key builds); pgbench's scripts rely on the rows being pgbench's: the same counts, aid
ranges, zero balances, bid of each account and filler. Each figure is read here by SQL from
both databases, the bare one built by the plain ``pgbench -i`` a user would type; the
expected values at scale 1 are typed from pgbench's documentation (100,000 accounts, 10
tellers, 1 branch per scale unit). The load phases pgdyno records are recomputed from
pgbench's own log with a regex of the test's.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.pgbench.dataset import (
    KEY_BUILD_MEMORY,
    ROWS_PER_SCALE,
    initialise,
    session_settings,
)
from tests.conftest import scratch_database

pytestmark = pytest.mark.server

SCALE = 1
FILLER_84 = " " * 84
"""pgbench writes an empty filler; char(84) pads it."""

ACCOUNTS = f"""
SELECT count(*), min(aid), max(aid), sum(abalance), min(abalance), max(abalance),
       count(*) FILTER (WHERE bid = (aid - 1) / 100000 + 1),
       count(*) FILTER (WHERE filler = '{FILLER_84}'), count(DISTINCT filler)
FROM pgbench_accounts"""
TELLERS = """
SELECT count(*), min(tid), max(tid), sum(tbalance),
       count(*) FILTER (WHERE bid = (tid - 1) / 10 + 1), count(filler)
FROM pgbench_tellers"""
BRANCHES = "SELECT count(*), min(bid), max(bid), sum(bbalance), count(filler) FROM pgbench_branches"
HISTORY = "SELECT count(*) FROM pgbench_history"
KEYS = """
SELECT c.relname, pg_get_constraintdef(k.oid)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relname LIKE 'pgbench%' AND c.relnamespace = to_regnamespace(current_schema())
ORDER BY 1, 2"""
COLUMNS = """
SELECT table_name, column_name, data_type, character_maximum_length, is_nullable
FROM information_schema.columns
WHERE table_name LIKE 'pgbench%' AND table_schema = current_schema()
ORDER BY 1, ordinal_position"""
ALL_VISIBLE = """
SELECT relpages, relallvisible FROM pg_class
WHERE relname = 'pgbench_accounts' AND relnamespace = to_regnamespace(current_schema())"""


@pytest.fixture(scope="module")
def ours(server: LocalServer) -> Iterator[ConnectionInfo]:
    yield from scratch_database(server, "pgbench_ours")


@pytest.fixture(scope="module")
def bare(server: LocalServer) -> Iterator[ConnectionInfo]:
    """The tables of a plain ``pgbench -i``, in the database's public schema."""
    for conn in scratch_database(server, "pgbench_bare"):
        plain = conn.in_schema(None)
        subprocess.run([server.install.program("pgbench"), *plain.client_args(), "-i", "-s",
                        str(SCALE), "-q", plain.dbname], env=plain.client_env(), check=True,
                       capture_output=True)
        yield plain


def _figures(conn: ConnectionInfo) -> dict[str, object]:
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        return {name: db.execute(query).fetchall() for name, query in
                [("accounts", ACCOUNTS), ("tellers", TELLERS), ("branches", BRANCHES),
                 ("history", HISTORY), ("keys", KEYS), ("columns", COLUMNS)]}


def test_pgdynos_dataset_is_bare_pgbench_i(server: LocalServer, ours: ConnectionInfo,
                                           bare: ConnectionInfo, tmp_path: Path) -> None:
    log = tmp_path / "init.log"
    result = initialise(ours, server.install, SCALE, force=False, log_path=log)
    assert not result.reused

    built, reference = _figures(ours), _figures(bare)
    assert built == reference
    accounts = 100_000 * SCALE
    assert reference["accounts"] == [(accounts, 1, accounts, 0, 0, 0, accounts, accounts, 1)]
    assert reference["tellers"] == [(10 * SCALE, 1, 10 * SCALE, 0, 10 * SCALE, 0)]
    assert reference["branches"] == [(SCALE, 1, SCALE, 0, 0)]
    assert reference["history"] == [(0,)]
    assert [(table, definition) for table, definition in reference["keys"]
            if definition.startswith("PRIMARY KEY")] == [
        ("pgbench_accounts", "PRIMARY KEY (aid)"), ("pgbench_branches", "PRIMARY KEY (bid)"),
        ("pgbench_tellers", "PRIMARY KEY (tid)")]

    # The rows went in frozen (COPY FREEZE): the vacuum step left every page all-visible.
    with psycopg.connect(ours.conninfo(), autocommit=True) as db:
        pages, visible = db.execute(ALL_VISIBLE).fetchone()
    assert pages > 0 and visible == pages

    # The phases recorded are pgbench's own step timings, recomputed from its log here.
    done = re.search(r"done in [0-9.]+ s \((.*)\)", log.read_text())
    assert done is not None, log.read_text()
    steps = {name.strip(", "): float(v)
             for name, v in re.findall(r"([a-z -]+) ([0-9.]+) s", done.group(1))}
    assert result.phase_seconds == pytest.approx({
        "data": steps["create tables"] + steps["client-side generate"],
        "vacuum": steps["vacuum"], "keys": steps["primary keys"]})
    record = result.load_record()
    counted = sum(row[0][0] for row in (built["accounts"], built["tellers"], built["branches"]))
    assert record.rows == counted == ROWS_PER_SCALE * SCALE
    assert [p.phase for p in record.phases] == ["data", "keys", "vacuum"]
    assert f"PGOPTIONS='-c maintenance_work_mem={KEY_BUILD_MEMORY}'" in result.command


def test_key_build_memory_never_lowers_the_servers(ours: ConnectionInfo) -> None:
    with psycopg.connect(ours.conninfo(), autocommit=True) as db:
        db.execute("SET maintenance_work_mem = '64MB'")
        assert session_settings(db) == {"maintenance_work_mem": KEY_BUILD_MEMORY}
        db.execute("SET maintenance_work_mem = '2GB'")
        assert session_settings(db) == {}
