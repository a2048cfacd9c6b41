"""The pgbench tables: built by ``pgbench -i`` in the server, reused at the same scale."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pgdyno import __version__
from pgdyno.errors import RunFailed
from pgdyno.targets import ConnectionInfo, PgInstall
from pgdyno.workloads import dataset

PGBENCH_TABLES = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history"]
DATASET_NAME = "pgbench"
INIT_STEPS = "tGvp"
"""pgbench -i's steps: create tables, generate server-side, vacuum, primary keys; never
``d`` (pgbench's DROP resolves names through the search_path: pgdyno drops its own)."""


@dataclass(frozen=True)
class InitResult:
    reused: bool
    scale: int
    seconds: float
    command: list[str]


def initialise(conn: ConnectionInfo, install: PgInstall, scale: int, force: bool,
               log_path: Path) -> InitResult:
    """Build the pgbench tables at ``scale``, or reuse a pgdyno-made dataset of that scale.

    pgdyno drops its own previous tables itself (schema-qualified, after checking its
    schema's marker), so pgbench's own drop step (``-I d``, an unqualified DROP that follows
    the search_path) never runs; pgbench creates the tables in pgdyno's schema through the
    connection's search_path."""
    size_key = f"scale={scale}"
    conn = dataset.scoped(conn)
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        state = dataset.inspect(db, DATASET_NAME, size_key, PGBENCH_TABLES)
        if state.reusable:
            return InitResult(reused=True, scale=scale, seconds=0.0, command=[])
        dataset.prepare_build(db, state, DATASET_NAME, size_key, PGBENCH_TABLES,
                              force=force, what="pgbench's")
    # Server-side generation (G) is several times faster than client-side COPY.
    cmd = [install.program("pgbench"), *conn.client_args(), "-i", "-s", str(scale),
           "-I", INIT_STEPS, "-q", conn.dbname]
    started = time.monotonic()
    with log_path.open("w") as log:
        result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                env=conn.client_env(), check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
        raise RunFailed(f"pgbench -i failed (exit {result.returncode}): {' | '.join(tail)}")
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        dataset.record(db, DATASET_NAME, size_key, PGBENCH_TABLES, seconds, __version__)
    return InitResult(reused=False, scale=scale, seconds=seconds, command=cmd)
