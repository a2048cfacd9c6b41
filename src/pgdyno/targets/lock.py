"""One pgdyno at a time per workdir: ``<workdir>/pgdyno.lock``, held with ``flock``.

The kernel releases the lock when its process dies, even by SIGKILL, so:

- a second pgdyno on the same workdir finds the lock held and refuses in one line, naming
  the running one (two runs on one cluster would corrupt each other's measurements);
- the file's content names the run that holds it, and is emptied when the run ends; a
  pgdyno that acquires the lock and finds content left behind knows its predecessor was
  killed: it stops the server that one left running (``stop_orphaned_server``) and marks
  its run failed (``pgdyno.runner.lock.recover``).

A server pgdyno starts hands out its workdir's lock (``workdir_lock``): this one for a server
on this machine, ``targets.remote.RemoteLock`` on the --ssh host, with the same interface.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgdyno.errors import UsageError

LOCK_FILE = "pgdyno.lock"


@dataclass
class Holder:
    pid: int
    run_dir: str
    results_dir: str
    started_at: str
    data_dir: str = ""
    """The cluster the run used: the one server recovery may stop (others in the workdir,
    such as a --keep server of another instance, are not the killed run's)."""


class WorkdirLock:
    def __init__(self, workdir: Path, stop: Callable[[Path], int | None]) -> None:
        """``stop``: how a killed predecessor's server is stopped, given its data directory
        (``targets.local.stop_orphaned_server``); its postmaster's pid, None when none ran."""
        self.workdir = Path(workdir)
        self.path = self.workdir / LOCK_FILE
        self._stop = stop
        self._fd: int | None = None

    def acquire(self) -> Holder | None:
        """Take the lock or refuse; returns the killed predecessor's record, if any."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            running = (f"pid {holder.pid}, run {holder.run_dir}" if holder
                       else "starting")
            raise UsageError(f"another pgdyno is using workdir {self.workdir} ({running}); "
                             "wait for it to finish, or give this run another --workdir") \
                from None
        self._fd = fd
        return _read(fd)

    def hold_for(self, run_dir: Path, results_dir: Path, data_dir: Path) -> None:
        assert self._fd is not None
        record = {"pid": os.getpid(), "run_dir": str(run_dir), "results_dir": str(results_dir),
                  "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "data_dir": str(data_dir)}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(record).encode(), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # a clean end leaves nothing to recover
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def stop_orphaned_server(self, data_dir: str | Path) -> int | None:
        """Stop the server a killed predecessor left running on ``data_dir``, if any; its
        postmaster's pid."""
        return self._stop(Path(data_dir))


def _read(fd: int) -> Holder | None:
    size = os.fstat(fd).st_size
    if not size:
        return None
    try:
        data = json.loads(os.pread(fd, size, 0))
        return Holder(pid=int(data["pid"]), run_dir=str(data["run_dir"]),
                      results_dir=str(data["results_dir"]), started_at=str(data["started_at"]),
                      data_dir=str(data.get("data_dir") or ""))
    except (ValueError, KeyError, TypeError):
        return None

