"""Workers of a shared search on this host: ``pgdyno tune --search ... --workers N``.

The lead (the command the user ran) starts N-1 copies of its own command line as workers
(``--worker``): the same search and study names, each with its own workdir (one pgdyno per
workdir: each worker starts its own server). They share the study through ``--storage``;
the lead runs trials too, waits for theirs, then selects, compares and reports.

Trials measured at once on one host disturb each other (CPU, disk, memory): N local workers
prove the sharing and suit hosts with room to spare; ``pgdyno fleet search`` puts one
worker on each of several identical hosts instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from pgdyno.errors import UsageError

_DROP_WITH_VALUE = ("--workers",)
_DROP_FLAGS = ("--worker",)


def worker_argv(argv: Sequence[str], search: str, study: str, workdir: Path) -> list[str]:
    """``argv`` (pgdyno's arguments, without the program) as a worker's: --workers left
    out, --worker, the search's and study's names and the worker's own workdir added (an
    option given twice takes its last value)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _DROP_WITH_VALUE:
            skip = True
            continue
        if arg in _DROP_FLAGS or any(arg.startswith(f"{d}=") for d in _DROP_WITH_VALUE):
            continue
        out.append(arg)
    return [*out, "--worker", "--search-name", search, "--study-name", study,
            "--workdir", str(workdir), "--no-progress"]


def start_local_workers(argv: Sequence[str], count: int, search: str, study: str,
                        base_workdir: Path, log_dir: Path) -> list[subprocess.Popen]:
    """``count`` worker processes of this command line, each logging to
    ``log_dir/worker-I.log``."""
    if count < 0:
        raise UsageError(f"--workers {count + 1}: accepted: 1 or more")
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for i in range(1, count + 1):
        workdir = base_workdir / f"worker-{i}"
        log = (log_dir / f"worker-{i}.log").open("w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pgdyno", *worker_argv(argv, search, study, workdir)],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ), close_fds=True))
        log.close()
    return procs


def wait_for_workers(procs: list[subprocess.Popen]) -> list[int]:
    """Their exit codes, once all have ended."""
    return [p.wait() for p in procs]
