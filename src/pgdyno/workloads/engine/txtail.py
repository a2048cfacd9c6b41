"""Following pgbench's per-transaction logs while pgbench writes them.

pgbench writes one log per thread (``tx.PID``, ``tx.PID.1``...). A thread of pgdyno's reads
what each has grown by, once a second, bins it into seconds (``per_second``) and
appends the finished seconds to ``seconds.csv`` and ``latency.hlog``: the bounded raw data
every run keeps. pgbench never waits for it: the logs are ordinary files, so a reader
that falls behind costs disk space for a while, never throughput.

The logs themselves are kept (gzipped after the iteration) while the iteration has logged
at most ``cap`` transactions; past the cap they are dropped: the part already read is
released as the reader goes (``fallocate`` punches it out of the file, so the disk holds
only what is not yet read), and the files are deleted at the end. ``cap`` None keeps them
all (``--tx-logs all``).

The thread runs at a lower priority (nice) than pgbench and the server: its work can wait
for an idle moment, theirs is the measurement.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from pgdyno.analysis.per_second import LogLayout, SecondBinner, SecondsWriter, aggregate_rows
from pgdyno.analysis.pgbench_log import parse_block

POLL_S = 1.0
"""Each pass costs about a millisecond whatever it reads (the glob, a read and a parse per
log, the binning): at four passes a second the reader used 4.8 ms of CPU a second to follow
2,400 sampled lines a second, at one 1.9 ms. A second later on disk is
all that the live line gives up."""
READ_BYTES = 2 << 20
"""60,000 lines: numpy's parsing at full speed, and what one file holds unreleased."""
STALE_SECONDS = 30
"""A second this far behind the newest is written even when one thread's log has not yet
passed it: pgbench buffers each log (a few KB), so a slow thread's lines arrive late; they
then form a second part of that second, which the readers merge."""
NICE = 10
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
PAGE = 4096


@dataclass
class TailResult:
    transactions: int
    """Log lines read (every transaction, failed and skipped included)."""
    bytes_read: int
    logs_kept: bool
    cpu_s: float
    """CPU time of the reader thread."""
    clamped: int
    """Latencies above the histograms' range (one hour), recorded as one hour."""
    note: str = ""


@dataclass
class _Followed:
    """One log being followed: where reading stopped, what is not yet a whole line."""

    path: Path
    fh: BinaryIO
    offset: int = 0
    rest: bytes = b""
    released: int = 0
    """Bytes at the start already punched out (after the cap)."""
    newest_second: int = -1
    first_interval: int | None = None
    """Aggregate logs: the epoch second pgbench printed for the thread's first interval."""


@dataclass
class LogTail:
    directory: Path
    prefix: str
    origin_epoch: float
    layout: LogLayout
    latency_limit_ms: float | None
    cap: int | None
    aggregate: bool = False
    """pgbench writes per-second aggregates (--aggregate-interval 1), not transactions."""
    transactions: int = 0
    bytes_read: int = 0
    dropping: bool = False
    cpu_s: float = 0.0
    failure: str = ""
    followed: dict[Path, _Followed] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.binner = SecondBinner(self.origin_epoch, self.layout, self.latency_limit_ms)
        self.writer = SecondsWriter(self.directory, self.origin_epoch)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pgdyno-log-tail", daemon=True)
        self.dropping = self.cap == 0
        self.can_release = True

    # ----- the thread ---------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def finish(self) -> TailResult:
        """Read to the end (pgbench has exited), write every second, release or keep."""
        self.stopped.set()
        self.thread.join()
        for f in self.followed.values():
            f.fh.close()
        try:
            self.writer.close()
        except OSError as exc:
            # A full disk: the seconds not written are named in the note, and the logs are
            # still handed back, so that the record keeps what fit.
            self.failure = self.failure or f"{type(exc).__name__}: {exc}"
        # pgbench's aggregate logs are a line a second: always kept.
        kept = self.aggregate or not self.dropping
        if not kept:
            for f in self.followed.values():
                f.path.unlink(missing_ok=True)
        return TailResult(self.transactions, self.bytes_read, kept, self.cpu_s,
                          self.binner.clamped, self._note())

    def _run(self) -> None:
        with contextlib.suppress(OSError):  # a priority we cannot lower is no reason to stop
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        try:
            while not self.stopped.wait(POLL_S):
                self._pass()
            self._pass()
            self.writer.write(self.binner.flush())
        except Exception as exc:  # noqa: BLE001 - the run goes on; the note says what is missing
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            self.cpu_s = time.thread_time()

    def _pass(self) -> None:
        for path in sorted(self.directory.glob(self.prefix + ".*")):
            if path.suffix == ".gz" or path in self.followed:
                continue
            self.followed[path] = _Followed(path, path.open("rb"))
        for f in self.followed.values():
            self._read(f)
        self._write_finished_seconds()

    def _read(self, f: _Followed) -> None:
        """Up to the end of the file, releasing as it goes once past the cap: a file that
        grows as fast as it is read must not hold all it has grown by."""
        while block := f.fh.read(READ_BYTES):
            f.offset += len(block)
            self.bytes_read += len(block)
            data = f.rest + block
            cut = data.rfind(b"\n") + 1
            data, f.rest = data[:cut], data[cut:]
            if data and self.aggregate:
                self._add_aggregates(f, data)
            elif data:
                rows = parse_block(data, self.layout.columns)
                self.transactions += len(rows)
                self.binner.add(rows)
                if len(rows):
                    f.newest_second = max(f.newest_second,
                                          int(self.binner.seconds_of(rows[-1:])[0]))
            if self.cap is not None and self.transactions > self.cap:
                self.dropping = True
            if self.dropping:
                for other in self.followed.values():
                    self._release(other)

    def _add_aggregates(self, f: _Followed, data: bytes) -> None:
        """pgbench's per-second aggregate lines: each a finished second of its thread."""
        rows, f.first_interval = aggregate_rows(data, f.first_interval)
        self.transactions += sum(r.ok + r.failed + r.skipped for r in rows)
        self.writer.write_rows(rows)
        self.writer.flush()

    def _write_finished_seconds(self) -> None:
        """Seconds every log has passed, and those left far behind (STALE_SECONDS)."""
        newest = [f.newest_second for f in self.followed.values() if f.newest_second >= 0]
        if not newest:
            return
        done = max(min(newest), max(newest) - STALE_SECONDS)
        self.writer.write(self.binner.flush(before_second=done))
        self.writer.flush()

    def _release(self, f: _Followed) -> None:
        """Punch out of the file what has been read, in whole pages."""
        upto = (f.offset - len(f.rest)) // PAGE * PAGE
        if not self.can_release or upto <= f.released:
            return
        if punch_hole(f.path, f.released, upto - f.released):
            f.released = upto
        else:
            self.can_release = False

    def _note(self) -> str:
        parts = []
        if self.failure:
            parts.append(f"the log reader stopped ({self.failure}); seconds after it are "
                         "missing")
        if self.aggregate:
            parts.append("pgbench logged per-second aggregates only (--tx-logs aggregate): "
                         "no latency percentiles")
        elif self.dropping:
            parts.append(f"per-transaction logs not kept ({self.transactions:,} transactions; "
                         f"cap {self.cap:,}): latency percentiles from the per-second "
                         "histograms" if self.cap else
                         "per-transaction logs not kept (--tx-logs none)")
        if self.dropping and not self.aggregate and not self.can_release:
            parts.append("this file system cannot punch holes: the logs used their full "
                         "size on disk until the iteration ended")
        if self.binner.clamped:
            parts.append(f"{self.binner.clamped:,} latencies above one hour recorded as one "
                         "hour in the histograms")
        return "; ".join(parts)


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def punch_hole(path: Path, offset: int, length: int) -> bool:
    """Free ``length`` bytes at ``offset`` of a file, keeping its size (Linux fallocate);
    False where the file system cannot (the caller then stops trying)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        done = _libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE,
                               ctypes.c_long(offset), ctypes.c_long(length))
        return done == 0
    finally:
        os.close(fd)
