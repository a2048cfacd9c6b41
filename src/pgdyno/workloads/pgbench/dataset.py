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


@dataclass(frozen=True)
class InitResult:
    reused: bool
    scale: int
    seconds: float
    command: list[str]


def initialise(conn: ConnectionInfo, install: PgInstall, scale: int, force: bool,
               log_path: Path) -> InitResult:
    """Build the pgbench tables at ``scale``, or reuse a pgdyno-made dataset of that scale."""
    size_key = f"scale={scale}"
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        state = dataset.inspect(db, DATASET_NAME, size_key, PGBENCH_TABLES)
        if state.reusable:
            return InitResult(reused=True, scale=scale, seconds=0.0, command=[])
        dataset.check_can_initialise(state, conn.dbname, force)
        dataset.refuse_name_collisions(PGBENCH_TABLES, state, "pgbench's")
        dataset.claim(db, DATASET_NAME, size_key, PGBENCH_TABLES, __version__)
    # Server-side generation (G) is several times faster than client-side COPY.
    cmd = [install.program("pgbench"), *conn.client_args(), "-i", "-s", str(scale),
           "-I", "dtGvp", "-q", conn.dbname]
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
