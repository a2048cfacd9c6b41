"""``--cache prewarmed`` (runner.prewarm) on a real server: the server's own buffer cache
(pg_buffercache) is the oracle for what was read into shared_buffers."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgdyno.errors import RunFailed
from pgdyno.runner.prewarm import FILL_SHARE, prewarm
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from tests.conftest import own_cluster_run, scratch_database

pytestmark = pytest.mark.server
SHARED = 32 * 2**20
BLOCK = 8192

DATASET = [
    "CREATE TABLE small (id int PRIMARY KEY, pad text)",
    "INSERT INTO small SELECT g, repeat('s', 100) FROM generate_series(1, 20000) g",
    "CREATE TABLE parts (id int PRIMARY KEY, pad text) PARTITION BY RANGE (id)",
    "CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (1) TO (10001)",
    "CREATE TABLE parts_2 PARTITION OF parts FOR VALUES FROM (10001) TO (20001)",
    "INSERT INTO parts SELECT g, repeat('p', 100) FROM generate_series(1, 20000) g",
    "CREATE TABLE toasty (id int PRIMARY KEY, doc text)",
    "ALTER TABLE toasty ALTER COLUMN doc SET STORAGE EXTERNAL",  # out of line, uncompressed
    "INSERT INTO toasty SELECT g, repeat(md5(g::text), 3000) FROM generate_series(1, 20) g",
    "CREATE TABLE big (id int, pad text)",  # 40 MB: more than the 32 MB of shared_buffers
    "INSERT INTO big SELECT g, repeat('b', 100) FROM generate_series(1, 300000) g",
]
TABLES = ["small", "parts", "toasty", "big"]


@pytest.fixture(scope="module")
def small_cache_server(workdir: Path) -> Iterator[LocalServer]:
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="prewarm",
                      settings={"shared_buffers": "32MB"})
    srv.prepare()
    srv.start()
    yield srv
    srv.stop()


def _cached(conn: ConnectionInfo) -> dict[str, tuple[int, int]]:
    """Relation -> (its blocks in shared_buffers, its blocks on disk), as the server
    counts them, for every relation in the workload's schema and their TOAST."""
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        rows = db.execute(
            "WITH mine AS (SELECT c.reltoastrelid FROM pg_class c JOIN pg_namespace n "
            "              ON n.oid = c.relnamespace WHERE n.nspname = 'pgdyno_bench') "
            "SELECT c.oid::regclass::text, count(b.bufferid), "
            "       pg_relation_size(c.oid) / 8192 "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN public.pg_buffercache b ON b.relfilenode = pg_relation_filenode(c.oid) "
            "     AND b.reldatabase = (SELECT oid FROM pg_database "
            "                          WHERE datname = current_database()) "
            "WHERE (n.nspname = 'pgdyno_bench' OR c.oid IN (SELECT reltoastrelid FROM mine) "
            "       OR c.oid IN (SELECT indexrelid FROM pg_index "
            "                    WHERE indrelid IN (SELECT reltoastrelid FROM mine))) "
            "  AND c.relkind IN ('r', 'i', 't') AND pg_relation_size(c.oid) > 0 "
            "GROUP BY 1, 3").fetchall()
    return {name: (cached, blocks) for name, cached, blocks in rows}


def test_the_dataset_is_read_into_shared_buffers_indexes_first(small_cache_server) -> None:
    for conn in scratch_database(small_cache_server, "prewarm_effect"):
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            db.execute("CREATE SCHEMA IF NOT EXISTS pgdyno_bench")
            for statement in DATASET:
                db.execute(statement)
            db.execute("CHECKPOINT")
            db.execute("CREATE EXTENSION pg_buffercache SCHEMA public")
            db.execute("SELECT public.pg_buffercache_evict_all()")  # empty shared_buffers
        before = _cached(conn)
        assert before["small"][0] == 0 and before["big"][0] == 0, before

        result = prewarm(conn, TABLES)

        after = _cached(conn)
        fits = {name: blocks for name, (_, blocks) in after.items() if name != "big"}
        # Every index, heap and TOAST relation of the dataset but the 40 MB table, whole.
        for name, blocks in fits.items():
            assert after[name][0] == blocks, (name, after[name], after, result)
        assert {"small", "parts_1", "parts_2", "toasty", "small_pkey", "parts_1_pkey"} <= set(
            fits)
        assert any(name.startswith("pg_toast.") for name in fits)
        # The big heap does not fit (it would evict what came first) and is skipped.
        assert after["big"][0] < 0.1 * after["big"][1], after["big"]
        assert result.read_bytes == sum(fits.values()) * BLOCK
        assert result.dataset_bytes == result.read_bytes + after["big"][1] * BLOCK
        assert result.read_bytes <= FILL_SHARE * SHARED
        assert result.shared_buffers_bytes == SHARED
        assert result.relations == len(fits)
        assert "of the dataset's" in result.note() and "(what fits)" in result.note()
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:  # nothing left behind
            assert db.execute("SELECT count(*) FROM pg_extension WHERE extname = "
                              "'pg_prewarm'").fetchone()[0] == 0


def test_a_run_with_cache_prewarmed_says_what_it_read() -> None:
    """Through pgdyno bench: the run's notes and report say what was read (all of pgbench's
    dataset fits the stock 128 MB), before the first iteration."""
    with own_cluster_run("pgdyno-prewarm", "tpcb", "--scale", "1", "--cache",
                         "prewarmed") as (run, _):
        manifest = json.loads((run / "manifest.json").read_text())
        (note,) = [n for n in manifest["notes"] if n.startswith("cache prewarmed:")]
        relations = int(re.search(r" in (\d+) relations", note).group(1))
        # Three primary keys and the three tables with rows (pgbench_history is empty
        # before the run, and so are the TOAST relations: nothing to read there).
        assert note.startswith("cache prewarmed: all of the dataset, ") and relations == 6
        assert "(128 MiB)" in note and "before the first iteration" in note
        assert "Note: cache prewarmed: all of the dataset, " in (run / "report.md").read_text()
        assert manifest["options"]["cache"] == "prewarmed"


def test_a_role_that_cannot_create_the_extension_gets_one_line(small_cache_server) -> None:
    """pg_prewarm is not a trusted extension: a plain role (a --dsn user's, say) may not
    create it. The run fails with one line naming the cause, how to install the extension
    and --cache warm, and leaves the database as it was."""
    for conn in scratch_database(small_cache_server, "prewarm_refused"):
        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            db.execute("DROP ROLE IF EXISTS prewarm_plain")
            db.execute("CREATE ROLE prewarm_plain LOGIN")
            db.execute("CREATE SCHEMA IF NOT EXISTS pgdyno_bench AUTHORIZATION prewarm_plain")
            db.execute("GRANT CREATE ON DATABASE prewarm_refused TO prewarm_plain")
        plain = dataclasses.replace(conn, user="prewarm_plain")
        with psycopg.connect(plain.conninfo(), autocommit=True) as db:
            db.execute("CREATE TABLE small (id int PRIMARY KEY)")
        try:
            with pytest.raises(RunFailed) as failure:
                prewarm(plain, ["small"])
            message = str(failure.value)
            assert "\n" not in message
            assert message.startswith("--cache prewarmed: pg_prewarm cannot be created in "
                                      "this database (permission denied to create extension "
                                      '"pg_prewarm")')
            assert "postgresql-contrib" in message and "--cache warm" in message
            with psycopg.connect(conn.conninfo(), autocommit=True) as db:
                assert db.execute("SELECT count(*) FROM pg_extension WHERE extname = "
                                  "'pg_prewarm'").fetchone()[0] == 0
        finally:
            with psycopg.connect(conn.conninfo(), autocommit=True) as db:
                db.execute("DROP SCHEMA pgdyno_bench CASCADE")
                db.execute("REVOKE CREATE ON DATABASE prewarm_refused FROM prewarm_plain")
                db.execute("DROP ROLE prewarm_plain")
