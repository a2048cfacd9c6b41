"""The one file a bench script writes: its figures, the options it ran with, and the
environment it ran in (host, CPU, kernel, pgdyno's version and commit, date, command
line), with a schema version that the loader checks.

Written under bench/results/ (ignored by git) as ``NAME-YYYYmmddTHHMMSSZ.json`` unless
``--output`` names another file; rewritten whole after each step a long script finishes,
so an interrupted measurement keeps what it had measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.workspace import BENCH_DIR, ROOT
from pgdyno import __version__ as pgdyno_version
from pgdyno import serde
from pgdyno.config.detect import cpu_model
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import hostname, write_text_atomic

RESULT_SCHEMA_VERSION = 1
RESULTS_DIR = BENCH_DIR / "results"
"""Where figures go unless ``--output`` says otherwise (ignored by git)."""


@dataclass
class Environment:
    """Where and with what the figures were measured."""

    host: str
    cpu_model: str
    cpus: int
    """CPUs this process may run on (its affinity)."""
    kernel: str
    os: str
    python: str
    pgdyno_version: str
    pgdyno_commit: str
    """The checkout's HEAD ("" outside a git checkout)."""
    pgdyno_tree_dirty: bool | None
    """Whether tracked files differed from that commit (None: not known)."""
    date_utc: str
    """When the script started, ISO 8601 in UTC."""
    command_line: list[str] = field(default_factory=list)


@dataclass
class BenchResult:
    schema_version: int
    bench: str
    """The script's name (``overhead`` for bench/overhead.py)."""
    environment: Environment
    options: dict[str, Any] = field(default_factory=dict)
    """The script's options as parsed (defaults included)."""
    figures: dict[str, Any] = field(default_factory=dict)
    """What the script measured, in its own shape."""


def _git(*words: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *words], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def environment(argv: list[str] | None = None, now: datetime | None = None) -> Environment:
    """This machine and this checkout, now; ``argv`` the script's command line."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return Environment(
        host=hostname(), cpu_model=cpu_model(), cpus=len(os.sched_getaffinity(0)),
        kernel=platform.release(), os=platform.platform(), python=platform.python_version(),
        pgdyno_version=pgdyno_version, pgdyno_commit=(commit or "").strip(),
        pgdyno_tree_dirty=None if status is None else bool(status.strip()),
        date_utc=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        command_line=list(sys.argv if argv is None else argv))


def _plain(value: Any) -> Any:
    """An option's value as JSON holds it (paths as text)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class ResultWriter:
    """Writes one script's result file; each ``write`` replaces the file whole."""

    def __init__(self, bench: str, args: argparse.Namespace,
                 argv: list[str] | None = None) -> None:
        self.env = environment(argv)
        stamp = datetime.fromisoformat(self.env.date_utc).strftime("%Y%m%dT%H%M%SZ")
        chosen = getattr(args, "output", None)
        self.path = Path(chosen) if chosen else RESULTS_DIR / f"{bench}-{stamp}.json"
        self.bench = bench
        self.options = {k: _plain(v) for k, v in vars(args).items() if k != "output"}

    def write(self, figures: dict[str, Any]) -> Path:
        """The file with ``figures`` as they are now (a long script calls it after each
        step); returns its path."""
        result = BenchResult(RESULT_SCHEMA_VERSION, self.bench, self.env, self.options,
                             figures)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, json.dumps(serde.to_dict(result), indent=2) + "\n")
        return self.path

    def finish(self, figures: dict[str, Any]) -> Path:
        """The last ``write``, and its path said on stderr."""
        path = self.write(figures)
        print(f"figures written to {path}", file=sys.stderr)
        return path


def load_result(path: Path) -> BenchResult:
    """A result file, refused in one line (``UsageError``) when it is not one or carries
    a schema version this harness does not read."""
    return read_versioned(BenchResult, Path(path), RESULT_SCHEMA_VERSION, "bench result")
