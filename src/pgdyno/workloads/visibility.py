"""Pages a load's VACUUM left out of the visibility map, and the passes that finish them
(shared by the loaders that vacuum their tables: TPROC-C, OLTP).

VACUUM prunes a page and marks it all-visible only under the page's cleanup lock, and on a
page that needs no freezing it does not wait for that lock: a page another process holds
pinned at that moment (the checkpointer or the background writer writing it out, a scan)
is read without pruning and left out of the map. A run on such a table starts with index-
only scans that visit the heap for those pages, and its first VACUUM does the load's work
(once in CI: 15 of item's 1,300 pages). A plain VACUUM of the tables left short skips the
runs of pages the map covers and rarely meets the same pin twice.

The shortfall is read from ``pg_class`` (relpages and relallvisible, which VACUUM sets when
it ends), for the load's own tables only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pgdyno.targets.connection import ConnectionInfo

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    from psycopg import sql

EXTRA_PASSES = 2
"""VACUUMs after the load's own, at most, of the tables still short: a pinned page is
pinned for milliseconds, so a second pass almost always finds it free."""


def not_all_visible(target: ConnectionInfo, tables: Sequence[str]) -> list[str]:
    """``tables`` (names as the connection resolves them) with a page not all-visible, in
    the order given."""
    import psycopg

    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        short = {row[0] for row in conn.execute(
            """SELECT t FROM unnest(%s::text[]) AS t
                 JOIN pg_class c ON c.oid = to_regclass(t)
                WHERE c.relallvisible < c.relpages""", (list(tables),))}
    return [t for t in tables if t in short]


def vacuum_statement(table: str) -> sql.Composed:
    """A plain VACUUM: the statistics are the load's ANALYZE's, still current."""
    from psycopg import sql

    return sql.SQL("VACUUM {}").format(sql.Identifier(table))


def finish(target: ConnectionInfo, tables: Sequence[str],
           vacuum: Callable[[list[str]], None]) -> list[str]:
    """Vacuum the tables still short (``vacuum(names)``, the loader's own pool) until none
    is or ``EXTRA_PASSES`` have run; the tables still short then (the run goes ahead: its
    first VACUUM will finish them)."""
    short = not_all_visible(target, tables)
    for _ in range(EXTRA_PASSES):
        if not short:
            break
        vacuum(short)
        short = not_all_visible(target, short)
    return short
