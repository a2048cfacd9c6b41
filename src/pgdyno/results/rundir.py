"""The run directory: ``results/<context>/<workload>-<UTC time>/``.

::

    manifest.json   host, kernel, CPU, RAM, PostgreSQL version, every non-default setting,
                    the exact command lines, pgdyno version, start and end, status
                    (written at start, updated at end)
    raw/run.json    the plan and each iteration's record: what reports are rebuilt from
    raw/<engine>/c<clients>-i<iteration>/
                    per iteration: the engine's output, stdout.txt, stderr.txt, telemetry/;
                    for pgbench:
                    seconds.csv    per second and script: exact counts (ok, failed,
                                   skipped, retried, late) and latency sum, sum of
                                   squares, min, max
                    latency.hlog   per second and script: an HdrHistogram of the latencies
                                   (3 significant digits), HdrHistogram's standard log
                                   format
                    tx.*.gz        pgbench's per-transaction logs, for iterations of up to
                                   --tx-logs transactions (default 1,000,000)
    summary.json    every statistic, recomputed from raw/ by `pgdyno report`
    report.md, report.html (self-contained, images embedded), plots/*.png
    notes.md        notes added with `pgdyno note`

Beside the runs, ``results/index.sqlite`` is the index behind ``pgdyno runs`` (or a shared
PostgreSQL database: ``--results-db``).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgdyno import serde
from pgdyno.errors import UsageError
from pgdyno.results.manifest import read_json_file, read_versioned

PLAN_SCHEMA_VERSION = 1
STATUSES = ("running", "ok", "failed", "interrupted")
# Space set aside when a run starts and given back at its end, so that the final
# manifest and plan can still be written when the run has filled the disk.
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 1 << 20


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


@dataclass
class IterationRecord:
    """What happened in one pgbench invocation, as the report rebuild needs it."""

    clients: int
    iteration: int
    threads: int
    status: str
    command: list[str]
    log_files: list[str]
    """Relative to the run directory."""
    stdout_file: str
    stderr_file: str
    returncode: int | None
    started_at: str
    ended_at: str | None = None
    pgbench_tps: float | None = None
    note: str = ""
    origin_epoch: float | None = None
    """Epoch at which pgbench was launched: second 0 of the iteration (None: recorded before
    pgdyno kept it; the earliest transaction start in the logs is used)."""
    latency_files: list[str] = field(default_factory=list)
    """The per-second data (seconds.csv, latency.hlog), kept whatever the run's length."""
    transactions_logged: int = 0
    log_reader_cpu_s: float | None = None
    """CPU seconds pgdyno's log reader used during the iteration."""


@dataclass
class RunPlan:
    """``raw/run.json``: the state of the run loop, from which the report is rebuilt.

    The options the run was started with are in the manifest, once; this holds what the
    run did with them."""

    schema_version: int
    workload: str
    context: str
    scripts: list[dict[str, Any]] = field(default_factory=list)
    """name, weight, builtin or file (copied under raw/scripts/): pgbench workloads."""
    records: list[IterationRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    """Workload parameters (scale, warehouses, mix, tables...) the report needs."""


STARTING_FILES = frozenset({"manifest.json", "raw/run.json", RESERVE_FILE})
"""What a run directory holds before its first iteration: the manifest, the plan, the
reserve. One holding only these measured nothing (``RunDirectory.discard``)."""


@dataclass
class RunDirectory:
    path: Path
    made: tuple[Path, ...] = field(default=(), compare=False)
    """The directories above ``path`` that ``create`` made (the context's, the results
    directory): this invocation's, so ``discard`` may remove them when they are empty."""

    @classmethod
    def create(cls, results_dir: Path, context: str, workload: str) -> RunDirectory:
        made = make_directories(results_dir / safe_name(context), results_dir)
        path = new_stamped_dir(results_dir, context, workload)
        try:
            (path / "raw").mkdir(parents=True)
            (path / RESERVE_FILE).write_bytes(b"\0" * RESERVE_BYTES)
        except OSError as exc:
            raise UsageError(f"--results-dir {results_dir}: not writable ({exc.strerror}); "
                             "give a directory you can write to") from exc
        return cls(path, made)

    def discard(self) -> bool:
        """Remove the run directory of a run refused before its first iteration, and the
        directories ``create`` made for it that are left empty; True when done. Only a
        directory this invocation made (``create``'s exclusive mkdir) whose files are all
        STARTING_FILES is removed (its subdirectories empty once they are gone): any other
        file in it (a workload's, a user's) keeps the whole directory, untouched, and False
        is returned."""
        entries = sorted(self.path.rglob("*"), key=lambda p: len(p.parts), reverse=True)
        files = [p for p in entries if not p.is_dir()]
        if any(str(p.relative_to(self.path)) not in STARTING_FILES for p in files):
            return False
        try:
            for path in files:
                path.unlink()
            for path in entries:  # deepest first; rmdir refuses one that is not empty
                if path.is_dir():
                    path.rmdir()
            self.path.rmdir()
        except OSError:
            return False
        for parent in self.made:  # deepest first; rmdir leaves one that is not empty
            try:
                parent.rmdir()
            except OSError:
                break
        return True

    def release_reserve(self) -> None:
        (self.path / RESERVE_FILE).unlink(missing_ok=True)

    @property
    def raw(self) -> Path:
        return self.path / "raw"

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    def write_json(self, name: str, data: Any) -> None:
        write_json_atomic(self.path / name, data)

    def save_plan(self, plan: RunPlan) -> None:
        write_json_atomic(self.raw / "run.json", serde.to_dict(plan))

    def load_plan(self) -> RunPlan:
        return read_versioned(RunPlan, self.raw / "run.json", PLAN_SCHEMA_VERSION,
                              "run record")


def make_directories(path: Path, results_dir: Path) -> tuple[Path, ...]:
    """``mkdir -p path``, returning the directories made here, deepest first (one made at
    the same moment by another process is not among them)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    made = []
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir()
            except FileExistsError:
                continue
            made.append(directory)
    except OSError as exc:
        raise UsageError(f"--results-dir {results_dir}: not writable ({exc.strerror}); "
                         "give a directory you can write to") from exc
    return tuple(reversed(made))


def new_stamped_dir(results_dir: Path, context: str, prefix: str) -> Path:
    """Create ``results_dir/CONTEXT/PREFIX-YYYYmmddTHHMMSSZ`` (-2, -3... if taken)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = results_dir / safe_name(context)
    try:
        base.mkdir(parents=True, exist_ok=True)
        path = base / f"{safe_name(prefix)}-{stamp}"
        suffix = 1
        while True:
            try:
                path.mkdir()
                return path
            except FileExistsError:
                suffix += 1
                path = base / f"{safe_name(prefix)}-{stamp}-{suffix}"
    except OSError as exc:
        raise UsageError(f"--results-dir {results_dir}: not writable ({exc.strerror}); "
                         "give a directory you can write to") from exc


WINDOW_FILE = "window.json"
"""When an iteration's measured part began, for workloads whose program keeps no clock of
ours (``{"window_start": epoch seconds}``, in the iteration's raw directory)."""


def write_window_start(it_dir: Path, epoch_s: float) -> None:
    write_json_atomic(it_dir / WINDOW_FILE, {"window_start": epoch_s})


def read_window_start(it_dir: Path) -> float:
    """The iteration's ``window_start``; a damaged file is one line naming it."""
    path = it_dir / WINDOW_FILE
    data = read_json_file(path, "iteration window")
    try:
        return float(data["window_start"])
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{path}: not a pgdyno iteration window (expected "
                         "{\"window_start\": epoch seconds})") from None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write through a temporary file and rename, so a crash never leaves half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """``path`` holds either its old content or ``text``, never part of it (Ctrl-C, crash)."""
    with replacing(path) as tmp:
        tmp.write_text(text)


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` for the block to write; renamed onto ``path`` when
    the block ends, removed when it raises (a Ctrl-C too): readers of ``path`` see the old
    file or the new one, whole."""
    path = Path(path)
    # The name is known before the file exists, and the file is made inside the try: a
    # Ctrl-C at any moment, even as it is created, leaves no temporary file behind (with
    # mkstemp, one landing between its return and the try did).
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        # O_EXCL as mkstemp; the mode as any file pgdyno writes (results are read by others).
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def hostname() -> str:
    return socket.gethostname()
