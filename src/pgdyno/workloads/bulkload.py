"""Spaced checkpoints for a bulk load on a server pgdyno owns.

With data checksums (initdb's default from PostgreSQL 18) or ``wal_log_hints``, the first
change of a page after a checkpoint, even setting a hint bit, writes the whole page to WAL.
A load that checkpoints every ``max_wal_size`` (1 GB stock) therefore writes most freshly
filled pages twice more: when the index builds' heap scans set the rows' hint bits, and
when VACUUM sets their visibility bits. At TPROC-C W=100 that was 17.8 of the load's
27.4 GB of WAL, in the keys and vacuum phases (bench/tprocc_load.py).

On a server pgdyno started on this machine, the load runs with checkpoints spaced to its
own WAL: the server's include file gets ``max_wal_size`` of three times the load's expected
WAL (a checkpoint is requested once about max_wal_size / (1 + checkpoint_completion_target)
is written) and ``checkpoint_timeout`` of an hour, reloaded. So that pg_wal cannot fill the
disk, max_wal_size is at most half the free space of the WAL's filesystem, and never below
the config's own. The loader ends with a CHECKPOINT (timed as the load's last phase), then
the config's own include file is written back and reloaded, before anything is measured.

Nothing is left behind: the include file is rewritten from the config at every server
start, so even a load killed half-way leaves the next run the config under test. A server
pgdyno does not own (``--dsn``), or one on an ``--ssh`` host, keeps its settings; the note
says so.

``minimal_wal`` (every dataset build; ``--load-wal configured`` turns it off): on such a
server the build runs with ``wal_level = minimal`` (and ``max_wal_senders = 0``, which it
needs; wal_buffers raised to 64 MB and wal_writer_delay lowered to 10 ms where the config's
are not so already), set by a restart before
the build and undone by another after it. PostgreSQL then writes no WAL for a table created
or truncated in the transaction that fills it, nor for a new index: each is synced to disk
at commit instead. pgbench -i's COPY FREEZE and TPROC-H's are such transactions. Measured
with bench/load_wal.py, medians of three interleaved rounds: pgbench scale 300 (4.7 GB)
18.0 s instead of 24.8 s (data step 11.8 s instead of 16.2 s), 33 MB of WAL in all instead
of 3.7 GB; TPROC-H SF 1 19.8 s instead of 21.9 s, 15 MB of WAL instead of 1.4 GB. A restart
takes about 0.2 s. TPROC-C's and OLTP's rows are inserted by other transactions than the
one that made their tables, so they are still WAL-logged (and their loads keep the spaced
checkpoints inside this), but two things still pay there: at minimal PostgreSQL drops each
finished WAL segment from the page cache (no replica or archive will read it), so a 10 GB
load does not also fill the page cache with 10 GB of WAL the kernel must then reclaim; and
the larger wal_buffers, emptied by the WAL writer every 10 ms, let the backends hand their
WAL over instead of writing and waiting for a full 4 MB buffer themselves. At TPROC-C W=100
the load took 117 to 119 s at minimal, 97 to 107 s with the wal_buffers too and 89 to 99 s
with the writer delay as well, against 130 to 140 s (server system CPU 49 to 57 s, 41 to
45 s, against 68 to 75 s). TPROC-C's and OLTP's plugins take both through ``logged_load``.
Not with archive_mode on (the archive would miss the build), and no restart for a dataset
that is reused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno.errors import TargetError
from pgdyno.results.load import LoadRecord
from pgdyno.targets import Target
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.units import format_bytes
from pgdyno.workloads import dataset
from pgdyno.workloads.base import RunContext

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

CHECKPOINT_TIMEOUT = "1h"
REQUEST_SHARE = 3
"""max_wal_size over the expected WAL: a checkpoint is requested at about max_wal_size /
(1 + checkpoint_completion_target), so three times the WAL keeps the load to none with
half again for an estimate that falls short."""
RELOAD_WAIT_S = 5.0
FREE_SHARE = 2
"""max_wal_size at most the WAL filesystem's free space over this: pg_wal holds about the
expected WAL, so half the free space stays free."""


MINIMAL_WAL = {"wal_level": "minimal", "max_wal_senders": "0"}
"""The load's WAL settings on a server pgdyno owns (a restart each way)."""
LOAD_WAL_BUFFERS = 64 * 2**20
"""wal_buffers of such a load when the config's own is smaller (stock: 4 MB, a 32nd of
shared_buffers). Where the load still writes WAL (TPROC-C's and OLTP's rows), 4 MB fills
in milliseconds and the backends write and wait for it themselves; at TPROC-C W=100 the
larger buffer took the data phase from 82 to 65 s and the server's system CPU from 57 to
42 s (bench/tprocc_load.py). It costs 64 MB of shared memory for the load alone."""
LOAD_WAL_WRITER_DELAY_MS = 10
"""wal_writer_delay of such a load when the config's own is longer (stock: 200 ms): the WAL
writer empties those buffers every 10 ms, so the loading backends seldom find them full.
At TPROC-C W=100 the data phase took 58 to 60 s against 64 to 67 s without it."""


@dataclass
class LoadSpacing:
    """What the load ran with: the settings it changed (empty: none) and why, or why not."""

    settings: dict[str, str] = field(default_factory=dict)
    note: str = ""
    closing_checkpoint: bool = False
    """Checkpoints were deferred: the load ends with a CHECKPOINT of its own."""

    @property
    def applied(self) -> bool:
        return bool(self.settings)

    def stamp(self, record: LoadRecord) -> LoadRecord:
        """The load record with what this load ran with (a reused dataset: as it is)."""
        if record.reused:
            return record
        return dataclasses.replace(record, settings=dict(self.settings), note=self.note)

    def then(self, inner: LoadSpacing) -> LoadSpacing:
        """What a load inside both this and ``inner`` ran with (``inner``'s settings win,
        both notes kept)."""
        notes = [n for n in (self.note, inner.note) if n]
        return LoadSpacing(settings={**self.settings, **inner.settings}, note="; ".join(notes),
                           closing_checkpoint=self.closing_checkpoint or inner.closing_checkpoint)


def spacing_for(expected_wal_bytes: int, current_max_wal_bytes: int,
                free_bytes: int) -> tuple[dict[str, str], str]:
    """The settings of a load expected to write ``expected_wal_bytes`` of WAL ({}: none,
    with the reason)."""
    wanted = REQUEST_SHARE * expected_wal_bytes
    cap = free_bytes // FREE_SHARE
    size = min(wanted, cap)
    if size <= current_max_wal_bytes:
        why = ("the config's max_wal_size already spaces them" if wanted <= current_max_wal_bytes
               else f"half the WAL filesystem's free space ({format_bytes(cap)}) is no more "
                    f"than the config's max_wal_size")
        return {}, f"checkpoints left as configured: {why}"
    mb = size // 2**20
    return ({"max_wal_size": f"{mb}MB", "checkpoint_timeout": CHECKPOINT_TIMEOUT},
            f"the load ran with max_wal_size {format_bytes(mb * 2**20)} and checkpoint_timeout "
            f"{CHECKPOINT_TIMEOUT} (for about {format_bytes(expected_wal_bytes)} of WAL: no "
            "hint-bit page images after a checkpoint) and ended with a CHECKPOINT; the "
            "config's own settings were back before the measured run")


REUSED = "reused"
MINIMAL_NOTE = ("the load ran with wal_level minimal and max_wal_senders 0, set by a server "
                "restart (tables filled in the transaction that created or truncated them, "
                "and new indexes, wrote no WAL and were synced to disk at commit); the "
                "config's own settings were back, by another restart, before the measured run")


@contextlib.contextmanager
def minimal_wal(ctx: RunContext,
                dataset_tables: tuple[str, str, list[str]] | None) -> Iterator[LoadSpacing]:
    """Run the body (a load through ``ctx.conn``) with ``load_wal_settings`` (MINIMAL_WAL,
    larger wal_buffers, shorter wal_writer_delay) when pgdyno owns the server here,
    archiving is off and the dataset (the workload's ``dataset_tables``) is not there to
    reuse; the config's own settings are written back and the server restarted however the
    body ends. ``ctx.conn`` follows the restarts."""
    server = owned_here(ctx)
    wanted, why_not = _minimal_settings(ctx, server, dataset_tables)
    if why_not:
        yield LoadSpacing(note=why_not if why_not != REUSED else "")
        return
    assert server is not None
    original = dict(server.settings)
    server.write_settings({**original, **wanted})
    try:
        ctx.restart_server()
        started = ""
    except TargetError as exc:
        server.write_settings(original)
        ctx.restart_server()
        started = str(exc).strip().splitlines()[0] if str(exc).strip() else "no reason given"
    if started:
        yield LoadSpacing(note="wal_level left as configured: the server did not start with "
                               f"wal_level minimal ({started})")
        return
    try:
        yield LoadSpacing(settings=wanted, note=minimal_note(wanted))
    finally:
        server.write_settings(original)
        ctx.restart_server()


def minimal_note(settings: dict[str, str]) -> str:
    """The load record's note for a load at ``settings`` (load_wal_settings)."""
    extra = [f"{name} {settings[name]}" for name in ("wal_buffers", "wal_writer_delay")
             if name in settings]
    if not extra:
        return MINIMAL_NOTE
    told = (", with " + " and ".join(extra) + " (the WAL the load still writes goes out "
            "in larger, more frequent background writes)")
    return MINIMAL_NOTE.replace("max_wal_senders 0", "max_wal_senders 0" + told, 1)


def _minimal_settings(ctx: RunContext, server: Target | None,
                      dataset_tables: tuple[str, str, list[str]] | None
                      ) -> tuple[dict[str, str], str]:
    """The load's settings and '' , or {} and why the load keeps the configured wal_level
    (REUSED when there is nothing to load)."""
    import psycopg

    if server is None or ctx.conn is None:
        return {}, "wal_level left as configured: pgdyno does not own a server on this machine"
    if ctx.opts.load_wal == "configured":
        return {}, "wal_level left as configured (--load-wal configured)"
    with psycopg.connect(ctx.conn.conninfo(), autocommit=True) as session:
        level, archiving = session.execute(
            "SELECT current_setting('wal_level'), current_setting('archive_mode')").fetchone()
        wanted = load_wal_settings_for(session)
        if dataset_tables is not None:
            name, size_key, tables = dataset_tables
            if dataset.inspect(session, name, size_key, tables, ctx.dataset_schema).reusable:
                return {}, REUSED
    if level == "minimal":
        return {}, "wal_level is minimal in the config already"
    if archiving != "off":
        return {}, ("wal_level left as configured: archive_mode is on, and the archive would "
                    "miss the load")
    return wanted, ""


def load_wal_settings_for(session: psycopg.Connection) -> dict[str, str]:
    """``load_wal_settings`` for the server ``session`` is connected to, from its own
    wal_buffers and wal_writer_delay."""
    buffers, delay_ms = session.execute(
        "SELECT pg_size_bytes(current_setting('wal_buffers')), setting::int "
        "FROM pg_settings WHERE name = 'wal_writer_delay'").fetchone()
    return load_wal_settings(buffers, delay_ms)


def load_wal_settings(configured_wal_buffers: int, configured_writer_delay_ms: int
                      ) -> dict[str, str]:
    """MINIMAL_WAL, with wal_buffers raised to LOAD_WAL_BUFFERS and wal_writer_delay
    lowered to LOAD_WAL_WRITER_DELAY_MS where the config's own (``configured_wal_buffers``
    bytes, ``configured_writer_delay_ms``) are not already so."""
    settings = dict(MINIMAL_WAL)
    if configured_wal_buffers < LOAD_WAL_BUFFERS:
        settings["wal_buffers"] = f"{LOAD_WAL_BUFFERS // 2**20}MB"
    if configured_writer_delay_ms > LOAD_WAL_WRITER_DELAY_MS:
        settings["wal_writer_delay"] = f"{LOAD_WAL_WRITER_DELAY_MS}ms"
    return settings


@contextlib.contextmanager
def logged_load(ctx: RunContext, dataset_tables: tuple[str, str, list[str]],
                expected_wal_bytes: int) -> Iterator[LoadSpacing]:
    """The settings of a load whose rows are WAL-logged (TPROC-C's, OLTP's: inserted by
    other transactions than the one that made their tables): ``minimal_wal`` around
    ``spaced_checkpoints``, the latter inside the former's restart so that it spaces the
    server the load runs on. Yields what the load ran with, both notes kept; the load ends
    with a CHECKPOINT when ``closing_checkpoint``."""
    with (minimal_wal(ctx, dataset_tables) as wal,
          spaced_checkpoints(owned_here(ctx), ctx.conn, expected_wal_bytes) as spacing):
        yield wal.then(spacing)


def owned_here(ctx: RunContext) -> Target | None:
    """The run's server when pgdyno started it on this machine (None: not its to change)."""
    return ctx.target if ctx.manages_server and ctx.local_server else None


@contextlib.contextmanager
def spaced_checkpoints(server: Target | None, conn: ConnectionInfo,
                       expected_wal_bytes: int) -> Iterator[LoadSpacing]:
    """Run the body (a load through ``conn``) with spaced checkpoints when ``server`` is
    one pgdyno started here (``owned_here``); the config's own settings are written back
    and reloaded however the body ends."""
    import psycopg

    if server is None:
        yield LoadSpacing(note="checkpoints left as configured: pgdyno does not own a server "
                               "on this machine")
        return
    original = dict(server.settings)
    with psycopg.connect(conn.conninfo(), autocommit=True) as session:
        current = session.execute("SELECT pg_size_bytes(current_setting('max_wal_size'))"
                                  ).fetchone()[0]
    settings, note = spacing_for(expected_wal_bytes, current,
                                 _free_bytes(Path(server.effective_wal_dir)))
    if not settings:
        yield LoadSpacing(note=note)
        return
    _apply(server, conn, {**original, **settings}, int(settings["max_wal_size"][:-2]) * 2**20)
    try:
        yield LoadSpacing(settings=settings, note=note, closing_checkpoint=True)
    finally:
        _apply(server, conn, original, current)


def _apply(server: Target, conn: ConnectionInfo, settings: dict[str, str],
           max_wal_bytes: int) -> None:
    """Write the include file, reload, and wait until new sessions see it (the postmaster
    takes the reload in its own time)."""
    import psycopg

    server.write_settings(settings)
    with psycopg.connect(conn.conninfo(), autocommit=True) as session:
        session.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + RELOAD_WAIT_S
    while time.monotonic() < deadline:
        with psycopg.connect(conn.conninfo(), autocommit=True) as session:
            seen = session.execute("SELECT pg_size_bytes(current_setting('max_wal_size'))"
                                   ).fetchone()[0]
        if seen == max_wal_bytes:
            return
        time.sleep(0.05)


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0
