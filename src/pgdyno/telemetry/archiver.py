"""The WAL archiver and the page cache, sampled while a run with ``--archive`` runs.

Two samplers on the TelemetryRecorder's threads (its clock, its error log), through its
public interface (``Samplers``); the recorder imports this module, never the reverse:

- ``archiver`` (every ``interval_s``): pg_stat_archiver (archived and failed counts, last
  archived and failed segment), the segment being written (pg_walfile_name of
  pg_current_wal_lsn) and the ``.ready`` files in pg_wal/archive_status (segments written and
  waiting for the archiver) into ``archiver.csv``; and the new lines of pgdyno's archive
  command log (one per segment, its start and end) into ``archive_commands.csv``;
- ``page_cache`` (every ``RESIDENCY_INTERVAL_S``): how many bytes of the archive directory,
  pg_wal and the data directory sit in the page cache, into ``page_cache.csv``. Measured
  with mincore(2) through ctypes, in this process: util-linux ``fincore`` does the same
  per file but costs a process per sample and is not installed everywhere; the cost of each
  sample is recorded beside it (``sample_ms``).

/proc/meminfo (Cached, Dirty, Writeback, Active(file), Inactive(file)) needs no sampler of
its own: the host sampler keeps the whole file every second in ``host_raw.jsonl``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pgdyno.targets.archive import ArchiveSpec, read_log
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.telemetry import pg
from pgdyno.telemetry.catalog import Catalog
from pgdyno.telemetry.files import CsvWriter

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

RESIDENCY_INTERVAL_S = 5.0
ARCHIVER_COLUMNS = ["t", "archived_count", "failed_count", "last_archived_wal",
                    "last_archived_time", "last_failed_wal", "last_failed_time", "current_wal",
                    "wal_lsn_bytes", "ready_count", "segment_bytes"]
"""The columns of ``Catalog.archiver_sql``, in its order."""
COMMAND_COLUMNS = ["segment", "start", "end", "seconds", "outcome", "method"]
CACHE_COLUMNS = ["t", "role", "path", "files", "bytes", "cached_bytes", "sample_ms"]


class Samplers(Protocol):
    """What these samplers run on: the TelemetryRecorder's public interface (its threads,
    clock, server connection and error log), so this module never imports the recorder."""

    out: Path
    conn: ConnectionInfo | None
    sample_dbname: str | None
    data_dir: Path | None
    wal_dir: Path | None
    archive: ArchiveSpec | None

    @property
    def interval_s(self) -> float: ...
    def spawn(self, name: str, target: Callable[[], None]) -> None: ...
    def ticks(self, period_s: float) -> Iterator[None]: ...
    def poll_server(self, name: str, period_s: float,
                    work: Callable[[psycopg.Connection, Catalog], None]) -> None: ...
    def record_error(self, sampler: str, exc: BaseException) -> None: ...
    def connect(self, dbname: str | None) -> psycopg.Connection: ...


def start_archiver(recorder: Samplers) -> None:
    """Spawn the archiver and page-cache samplers on ``recorder``'s threads."""
    spec = recorder.archive
    assert spec is not None
    recorder.spawn("archiver", lambda: _archiver_loop(recorder, spec))
    recorder.spawn("page_cache", lambda: _cache_loop(recorder, spec))


def _archiver_loop(recorder: Samplers, spec: ArchiveSpec) -> None:
    writer = CsvWriter(recorder.out / "archiver.csv", ARCHIVER_COLUMNS)
    commands = CsvWriter(recorder.out / "archive_commands.csv", COMMAND_COLUMNS)
    log = spec.log if spec.pgdyno_copies else None
    # Only this iteration's segments: the log's lines from its size now on.
    offset = log.stat().st_size if log is not None and log.exists() else 0

    def copy_log() -> None:
        nonlocal offset
        if log is None:
            return
        lines, offset = read_log(log, offset)
        for x in lines:
            commands.write([x.segment, x.start, x.end, round(x.seconds, 6), x.outcome,
                            x.method])

    def work(pgconn: psycopg.Connection, cat: Catalog) -> None:
        writer.write(list(pgconn.execute(cat.archiver_sql()).fetchone()))
        copy_log()

    try:
        recorder.poll_server("archiver", recorder.interval_s, work)
        # The last interval, after the load stopped.
        with contextlib.suppress(Exception), \
                recorder.connect(recorder.sample_dbname) as pgconn:
            work(pgconn, Catalog(pg.server_version_num(pgconn)))
    finally:
        writer.close()
        commands.close()


def _cache_loop(recorder: Samplers, spec: ArchiveSpec) -> None:
    writer = CsvWriter(recorder.out / "page_cache.csv", CACHE_COLUMNS)
    roles = residency_roles(recorder.data_dir, recorder.wal_dir, spec.directory)
    try:
        for _ in recorder.ticks(RESIDENCY_INTERVAL_S):
            for role, path, exclude in roles:
                try:
                    began = time.perf_counter()
                    usage = directory_residency(path, exclude)
                    ms = (time.perf_counter() - began) * 1000
                    writer.write([time.time(), role, str(path), usage.files, usage.bytes,
                                  usage.cached_bytes, round(ms, 2)])
                except Exception as exc:  # noqa: BLE001 - telemetry never breaks a run
                    recorder.record_error("page_cache", exc)
    finally:
        writer.close()


def residency_roles(data_dir: Path | None, wal_dir: Path | None,
                    archive_dir: Path | None) -> list[tuple[str, Path, Path | None]]:
    """(role, directory, a subdirectory left out): the data directory without pg_wal, which
    is counted on its own."""
    roles: list[tuple[str, Path, Path | None]] = []
    if archive_dir is not None:
        roles.append(("archive", Path(archive_dir), None))
    if data_dir is not None:
        wal = Path(wal_dir) if wal_dir is not None else Path(data_dir) / "pg_wal"
        roles.append(("wal", wal, None))
        roles.append(("data", Path(data_dir), Path(data_dir) / "pg_wal"))
    return roles


# ----- mincore ------------------------------------------------------------------------

@dataclass(frozen=True)
class Residency:
    files: int
    bytes: int
    cached_bytes: int


PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
MAP_FAILED = ctypes.c_void_p(-1).value


def file_residency(path: Path) -> tuple[int, int]:
    """(size, bytes of it in the page cache) of one regular file, by mincore(2) on a
    read-only shared mapping (mapping does not read the file, so it does not change what it
    measures)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap {path}: {os.strerror(ctypes.get_errno())}")
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore {path}: {os.strerror(err)}")
            resident = pages - bytes(vec).count(0)
        finally:
            _libc.munmap(addr, size)
        return size, resident * PAGE  # whole pages, as the memory they take (and fincore)
    finally:
        os.close(fd)


def directory_residency(root: Path, exclude: Path | None = None) -> Residency:
    """Page-cache residency of every regular file under ``root`` (symlinks not followed; a
    file removed while walking is skipped)."""
    files = total = cached = 0
    stack = [str(root)]
    skip = str(exclude) if exclude is not None else None
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.path == skip:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                try:
                    size, resident = file_residency(Path(entry.path))
                except FileNotFoundError:
                    continue
                files, total, cached = files + 1, total + size, cached + resident
    return Residency(files, total, cached)
