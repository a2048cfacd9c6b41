"""The passes that finish a load's visibility map, against a real server: a page pinned
while VACUUM passes is left out of the map (the premise), another VACUUM finishes it once
the pin is gone, and one still pinned is reported, not waited for."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import visibility
from tests.conftest import scratch_database

pytestmark = pytest.mark.server


@pytest.fixture()
def db(server: LocalServer) -> Iterator[ConnectionInfo]:
    yield from scratch_database(server, "visibility")


def _pages(target: ConnectionInfo, table: str) -> tuple[int, int]:
    with psycopg.connect(target.conninfo()) as conn:
        return conn.execute("SELECT relpages, relallvisible FROM pg_class WHERE oid = %s::regclass",
                            (table,)).fetchone()


def _vacuum(target: ConnectionInfo, tables: list[str]) -> None:
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        for table in tables:
            conn.execute(visibility.vacuum_statement(table))


def test_a_page_pinned_during_vacuum_is_finished_by_another_pass(db: ConnectionInfo) -> None:
    with psycopg.connect(db.conninfo(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(db.search_path)))
        conn.execute("CREATE TABLE pinned AS SELECT i, repeat('x', 100) AS pad "
                     "FROM generate_series(1, 20000) i")
        conn.execute("CREATE TABLE free AS SELECT i FROM generate_series(1, 5000) i")
        conn.execute("CREATE TABLE empty (i int)")
    passes: list[list[str]] = []

    def vacuum(tables: list[str]) -> None:
        passes.append(tables)
        _vacuum(db, tables)

    # A cursor stopped inside a scan holds its current page pinned; the rows are older
    # than its snapshot, so only the pin keeps VACUUM from marking that page.
    with psycopg.connect(db.conninfo()) as reader:
        reader.execute("DECLARE c CURSOR FOR SELECT * FROM pinned")
        reader.execute("FETCH 1 FROM c")
        _vacuum(db, ["pinned", "free", "empty"])
        pages, visible = _pages(db, "pinned")
        assert pages > 100 and visible < pages
        assert _pages(db, "free")[1] == _pages(db, "free")[0] > 0
        assert visibility.not_all_visible(db, ["free", "pinned", "empty"]) == ["pinned"]
        # Still pinned: every extra pass meets the pin, and the table is reported.
        assert visibility.finish(db, ["pinned", "free", "empty"], vacuum) == ["pinned"]
        assert passes == [["pinned"]] * visibility.EXTRA_PASSES
        reader.rollback()
    passes.clear()
    assert visibility.finish(db, ["pinned", "free", "empty"], vacuum) == []
    assert passes == [["pinned"]]
    pages, visible = _pages(db, "pinned")
    assert visible == pages
    assert visibility.finish(db, ["pinned", "free"], vacuum) == [] and len(passes) == 1
