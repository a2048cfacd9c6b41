"""pgbench as the load engine: dataset initialisation and one measured iteration.

The iteration runs pgbench as a child process in its own session (so Ctrl-C reaches
pgdyno first and pgdyno decides how to stop), reads its ``-P 1`` progress lines as they
arrive for the progress bar, and keeps stdout, stderr and the per-transaction logs.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pgdyno import __version__
from pgdyno.errors import RunFailed
from pgdyno.runner.options import BenchOptions, ScriptSpec
from pgdyno.targets import ConnectionInfo, PgInstall
from pgdyno.workloads import dataset

PGBENCH_TABLES = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history"]
DATASET_NAME = "pgbench"
_PROGRESS = re.compile(r"^progress: (?P<t>[\d.]+) s, (?P<tps>[\d.]+) tps, lat (?P<lat>[\d.]+) ms")
_TPS = re.compile(r"^tps = (?P<tps>[\d.]+)", re.MULTILINE)


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
        dataset.forget(db, DATASET_NAME)
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


@dataclass(frozen=True)
class IterationPlan:
    clients: int
    iteration: int
    threads: int
    seconds: int
    """pgbench -T: warm-up plus measured duration."""
    log_prefix: Path


def pgbench_command(install: PgInstall, conn: ConnectionInfo, opts: BenchOptions,
                    scripts: tuple[ScriptSpec, ...], plan: IterationPlan) -> list[str]:
    cmd = [install.program("pgbench"), *conn.client_args(),
           "-c", str(plan.clients), "-j", str(plan.threads), "-T", str(plan.seconds),
           "-P", "1", "-l", "--log-prefix", str(plan.log_prefix), "-M", opts.protocol]
    if opts.rate_tps is not None:
        cmd += ["-R", f"{opts.rate_tps:g}"]
    if opts.latency_limit_ms is not None:
        cmd += ["--latency-limit", f"{opts.latency_limit_ms:g}"]
    if opts.max_tries != 1:
        cmd += ["--max-tries", str(opts.max_tries)]
    for spec in scripts:
        cmd += spec.pgbench_args()
    cmd.append(conn.dbname)
    return cmd


@dataclass
class PgbenchOutcome:
    returncode: int
    interrupted: bool
    pgbench_tps: float | None
    seconds: float


def run_pgbench(cmd: list[str], conn: ConnectionInfo, stdout_path: Path, stderr_path: Path,
                on_progress: Callable[[float, float, float], None] | None = None,
                session_options: str | None = None) -> PgbenchOutcome:
    """Run one pgbench, streaming its progress; Ctrl-C stops it and is re-raised after.

    ``session_options`` become PGOPTIONS: settings for pgbench's sessions only."""
    started = time.monotonic()
    env = conn.client_env()
    if session_options:
        env["PGOPTIONS"] = session_options
    with stdout_path.open("w") as out, stderr_path.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        reader = threading.Thread(target=_pump, args=(proc, err, on_progress), daemon=True)
        reader.start()
        try:
            proc.wait()
        except KeyboardInterrupt:
            _stop(proc)
            reader.join(5)
            raise
        reader.join(5)
    text = stdout_path.read_text(errors="replace")
    match = _TPS.search(text)
    return PgbenchOutcome(returncode=proc.returncode, interrupted=False,
                          pgbench_tps=float(match.group("tps")) if match else None,
                          seconds=time.monotonic() - started)


def _pump(proc: subprocess.Popen, err, on_progress) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        err.write(line)
        err.flush()
        match = _PROGRESS.match(line)
        if match and on_progress is not None:
            with contextlib.suppress(Exception):  # a progress bar must never stop a run
                on_progress(float(match["t"]), float(match["tps"]), float(match["lat"]))


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT first (pgbench exits), then SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, 5), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
