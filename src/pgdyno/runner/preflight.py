"""Pre-flight: bad input refused before a run creates anything, and the workdir's lock.

What the options show (an archive directory out of reach, the workload's own checks), what
an existing server shows (it answers; it has room for the clients), what the filesystem
shows (room for the dataset), then the lock of the workdir a server pgdyno starts lives in,
with the recovery of a killed predecessor. A refusal here leaves no run directory and no
index row (``pgdyno.runner.bench``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console

from pgdyno.config.sizing import PGDYNO_SESSIONS
from pgdyno.config.units import human_bytes
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions
from pgdyno.runner.lock import recover
from pgdyno.runner.prewarm import check_may_prewarm
from pgdyno.targets import PgInstall, Target, archive
from pgdyno.targets.dsn import DsnServer
from pgdyno.targets.osuser import server_user
from pgdyno.telemetry.catalog import CONNECTION_ROOM_SQL
from pgdyno.workloads import registry

SPACE_MARGIN = 1.2
"""Free space a dataset needs beyond its estimated size: WAL written while it is built, and
the estimate's own error."""


def preflight(opts: BenchOptions, install: PgInstall | None) -> None:
    """Bad input the options show before any server is looked at, refused before anything
    is created (``run_bench`` before its run directory, a sweep before its own): an archive
    directory that is a file, on a read-only filesystem or out of the server user's reach,
    the workload's own pre-flight (``check_with_target``: a script pgbench refuses,
    TPROC-H's missing data generator), and pg_prewarm for ``--cache prewarmed`` on a --dsn
    server."""
    spec = archive.spec_of(opts.target)
    if spec.enabled:  # refused with --dsn and --ssh: the server is local, run as server_user()
        archive.check_directory(spec, server_user())
    registry.get(opts.workload).check_with_target(opts, install)
    check_prewarm(opts, install)


def check_prewarm(opts: BenchOptions, install: PgInstall | None) -> None:
    """``--cache prewarmed`` on a --dsn server: pg_prewarm there, or creatable by the DSN's
    role, before the dataset is built in the user's database (here, so that a sweep is
    refused before its directory exists too). A server pgdyno starts is not running yet;
    its role is its superuser, which may create the extension."""
    if (opts.cache != "prewarmed" or opts.target.dsn is None or install is None
            or not registry.get(opts.workload).dataset_tables(opts)):
        return
    server = DsnServer(dsn=opts.target.dsn, install=install)
    server.preflight()  # a server that does not answer: one line naming --dsn
    check_may_prewarm(server.connection())


def check_server(opts: BenchOptions, target: Target) -> None:
    """What the server shows before anything is written: the target's own pre-flight (an
    existing server answers), and room for the clients on a server whose settings pgdyno
    does not write (on one it starts, ``settings.make_room_for_clients`` makes the room)."""
    target.preflight()
    if not target.restartable:
        check_connection_room(opts, target)


def check_connection_room(opts: BenchOptions, target: Target) -> None:
    """Clients an existing server cannot accept are refused before anything is created."""
    with psycopg.connect(target.admin_connection().conninfo(), autocommit=True) as db:
        limit, reserved, in_use = db.execute(CONNECTION_ROOM_SQL).fetchone()
    free = limit - reserved - (in_use - 1)  # our own connection closes before the run
    if max(opts.clients) + PGDYNO_SESSIONS > free:
        raise UsageError(
            f"--clients {max(opts.clients)}: this server accepts at most "
            f"{max(0, free - PGDYNO_SESSIONS)} (max_connections {limit}, {reserved} reserved, "
            f"{in_use - 1} in use by others, {PGDYNO_SESSIONS} for pgdyno's own sessions)")


def check_free_space(dataset_bytes: int | None, data_dir: Path) -> None:
    """Refuse, before anything is built, a dataset the data directory's filesystem cannot
    hold (what is already in the cluster counts: a dataset may be reused or replaced)."""
    if not dataset_bytes:
        return
    existing = data_dir
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    needed = dataset_bytes * SPACE_MARGIN
    if needed <= free:
        return
    # Only then walk the cluster: what it already holds may be reused or replaced.
    held = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file()) \
        if data_dir.is_dir() else 0
    if needed > free + held:
        raise UsageError(f"the dataset needs about {human_bytes(int(needed))} and the "
                         f"filesystem of {existing} has {human_bytes(free)} free; choose a "
                         "smaller --scale/--dataset-size or another --workdir")


def lock_workdir(target: Target | None, console: Console, shared: Any = None) -> Any:
    """The lock of the workdir a server pgdyno starts lives in (here, or on the --ssh host),
    taken; a killed predecessor's server is stopped and its run marked failed first. None
    for an existing server, which has no workdir."""
    lock = target.workdir_lock() if target is not None else None
    if lock is None:
        return None
    previous = lock.acquire()
    if previous is not None:
        for line in recover(previous, shared, lock.stop_orphaned_server):
            console.print(f"[yellow]{line}[/yellow]")
    return lock
