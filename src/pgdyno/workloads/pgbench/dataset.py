"""The pgbench tables: built by ``pgbench -i`` in the server, reused at the same scale."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno import __version__
from pgdyno.errors import RunFailed
from pgdyno.results import load
from pgdyno.targets import ConnectionInfo, PgInstall
from pgdyno.workloads import dataset

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

PGBENCH_TABLES = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history"]
DATASET_NAME = "pgbench"
INIT_STEPS = "tgvp"
"""pgbench -i's steps: create tables, generate client-side, vacuum, primary keys; never
``d`` (pgbench's DROP resolves names through the search_path: pgdyno drops its own).

Client-side (``g``), not server-side (``G``): pgbench's COPY runs with FREEZE in the
transaction that truncates the tables (PostgreSQL 14 and later), so the rows go in frozen
and all-visible, WAL is written a page at a time, and the vacuum step has nothing left to
freeze; ``G``'s INSERT ... SELECT logs every row and leaves VACUUM to dirty every page
(hint bits, visibility map). On 2 cores at 200 and 300 MB (bench/pgbench_init.py, two
interleaved rounds) ``g`` built the dataset in 3.5 and 5.4 s where ``G`` took 5.1 and
8.8 s, and its vacuum step took 0.4-0.6 s where ``G``'s took 0.8-1.6 s."""
KEY_BUILD_MEMORY = "512MB"
"""maintenance_work_mem of pgbench -i's session (never below the server's own): the primary
key of pgbench_accounts sorts every aid, and at 64MB (PostgreSQL's default), shared by the
parallel build's participants, that sort spills to disk from scale 5 on (trace_sort). At
scale 60, four interleaved builds each: 1.92 server CPU seconds at 512MB against 2.01 at
64MB, and 1GB no better."""


ROWS_PER_SCALE = 100_000 + 10 + 1
"""pgbench_accounts, pgbench_tellers and pgbench_branches rows per scale unit."""
STEP_PHASES = {"drop tables": "data", "create tables": "data", "client-side generate": "data",
               "server-side generate": "data", "vacuum": "vacuum", "primary keys": "keys",
               "foreign keys": "keys"}
"""pgbench -i's timed steps (its closing "done in" line) by load phase (results.load)."""
_DONE = re.compile(r"^done in [0-9.]+ s \((?P<steps>[^)]*)\)", re.MULTILINE)
_STEP = re.compile(r"(?P<name>[a-z -]+?) (?P<seconds>[0-9.]+) s")


@dataclass(frozen=True)
class InitResult:
    reused: bool
    scale: int
    seconds: float
    command: list[str]
    """The command as a user would type it, with the session settings it ran with."""
    phase_seconds: dict[str, float] = field(default_factory=dict)
    """Seconds per load phase, from pgbench's own timing of its steps."""
    recorded_seconds: float | None = None
    """Reused: the seconds its build took, as the dataset registry recorded them."""

    def load_record(self) -> load.LoadRecord:
        """The load in the shape every workload records it (``results.load``)."""
        if self.reused:
            return load.reused(self.recorded_seconds)
        return load.built(self.scale * ROWS_PER_SCALE, self.seconds, self.phase_seconds)


def init_phases(log_text: str) -> dict[str, float]:
    """Seconds per load phase from ``pgbench -i``'s last "done in 1.2 s (create tables 0.01
    s, server-side generate 0.8 s, vacuum 0.2 s, primary keys 0.2 s)." line; empty when it
    printed none."""
    found = list(_DONE.finditer(log_text))
    if not found:
        return {}
    phases: dict[str, float] = {}
    for step in _STEP.finditer(found[-1].group("steps")):
        phase = STEP_PHASES.get(step.group("name").strip().lstrip(", ").strip())
        if phase is not None:
            phases[phase] = phases.get(phase, 0.0) + float(step.group("seconds"))
    return phases


def initialise(conn: ConnectionInfo, install: PgInstall, scale: int, force: bool,
               log_path: Path) -> InitResult:
    """Build the pgbench tables at ``scale``, or reuse a pgdyno-made dataset of that scale.

    pgdyno drops its own previous tables itself (schema-qualified, after checking its
    schema's marker), so pgbench's own drop step (``-I d``, an unqualified DROP that follows
    the search_path) never runs; pgbench creates the tables in pgdyno's schema through the
    connection's search_path."""
    import psycopg

    size_key = f"scale={scale}"
    conn = dataset.scoped(conn)
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        state = dataset.inspect(db, DATASET_NAME, size_key, PGBENCH_TABLES)
        if state.reusable:
            return InitResult(reused=True, scale=scale, seconds=0.0, command=[],
                              recorded_seconds=state.build_seconds)
        dataset.prepare_build(db, state, DATASET_NAME, size_key, PGBENCH_TABLES,
                              force=force, what="pgbench's")
        settings = session_settings(db)
    cmd = [install.program("pgbench"), *conn.client_args(), "-i", "-s", str(scale),
           "-I", INIT_STEPS, "-q", conn.dbname]
    env = conn.client_env()
    options = " ".join(f"-c {name}={value}" for name, value in settings.items())
    if options:
        env["PGOPTIONS"] = " ".join(filter(None, [env.get("PGOPTIONS", ""), options]))
    started = time.monotonic()
    with log_path.open("w") as log:
        result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
        raise RunFailed(f"pgbench -i failed (exit {result.returncode}): {' | '.join(tail)}")
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        dataset.record(db, DATASET_NAME, size_key, PGBENCH_TABLES, seconds, __version__)
    shown = [f"PGOPTIONS='{options}'", *cmd] if options else cmd
    return InitResult(reused=False, scale=scale, seconds=seconds, command=shown,
                      phase_seconds=init_phases(log_path.read_text(errors="replace")))


def session_settings(db: psycopg.Connection) -> dict[str, str]:
    """The settings pgbench -i's session runs with: KEY_BUILD_MEMORY for the key builds,
    unless the server already gives maintenance work more."""
    wanted, current = db.execute(
        "SELECT pg_size_bytes(%s), pg_size_bytes(current_setting('maintenance_work_mem'))",
        (KEY_BUILD_MEMORY,)).fetchone()
    return {"maintenance_work_mem": KEY_BUILD_MEMORY} if current < wanted else {}
