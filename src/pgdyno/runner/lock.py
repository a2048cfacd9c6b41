"""One pgdyno at a time per workdir, and recovery from one that was killed.

``<workdir>/pgdyno.lock`` is held with ``flock`` while a run uses the workdir's servers.
The kernel releases the lock when its process dies, even by SIGKILL, so:

- a second pgdyno on the same workdir finds the lock held and refuses in one line, naming
  the running one (two runs on one cluster would corrupt each other's measurements);
- the file's content names the run that holds it, and is emptied when the run ends; a
  pgdyno that acquires the lock and finds content left behind knows its predecessor was
  killed: it stops the servers that one left running and marks its run ``failed``
  ("pgdyno was killed") in the run directory and in the index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.results.index import RunIndex
from pgdyno.results.manifest import read_json_file
from pgdyno.results.rundir import utc_now, write_json_atomic
from pgdyno.targets.local import running_postmaster, stop_postmaster
from pgdyno.targets.remote import RemoteHolder

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
    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.path = self.workdir / LOCK_FILE
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
                  "started_at": utc_now(), "data_dir": str(data_dir)}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(record).encode(), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # a clean end leaves nothing to recover
        os.close(self._fd)  # closing drops the flock
        self._fd = None


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


def recover(holder: Holder | RemoteHolder, shared: Any = None,
            stop_server: Callable[[Path], int | None] | None = None) -> list[str]:
    """After a killed pgdyno: stop the server it left, mark its run failed; what was done.
    ``shared``: the shared results database of the run that recovers (--results-db), told
    too (the killed run's own DSN is never written down, so it cannot be known).
    ``holder``: this workdir's, or a remote workdir's (its run directory is marked only when
    it is on this machine); ``stop_server``: how to stop the server of its data directory
    (default: a postmaster on this machine; RemoteLock.stop_orphaned_server on the host)."""
    stop = stop_server or stop_orphaned_server
    pid = stop(Path(holder.data_dir)) if holder.data_dir else None
    done = ([f"stopped the server left running by a killed pgdyno (postmaster pid {pid})"]
            if pid is not None else [])
    client = getattr(holder, "client", socket.gethostname())
    if client != socket.gethostname():
        done.append(f"run {holder.run_dir} of the killed pgdyno (pid {holder.pid}) is on "
                    f"{client}: its manifest there still says running")
    elif mark_killed(Path(holder.run_dir), Path(holder.results_dir), holder.pid, shared):
        done.append(f"marked run {holder.run_dir} failed: pgdyno (pid {holder.pid}) was killed")
    return done


def stop_orphaned_server(data_dir: Path) -> int | None:
    """Fast-shut-down the live postmaster of ``data_dir``, if any; its pid."""
    pid = running_postmaster(data_dir)
    if pid is not None:
        stop_postmaster(pid)
    return pid


def mark_killed(run_dir: Path, results_dir: Path, pid: int, shared: Any = None) -> bool:
    """A run still ``running`` whose pgdyno is gone becomes ``failed``, with the reason, in
    its manifest, its results directory's index and ``shared`` (a shared index) if given."""
    manifest_path = run_dir / "manifest.json"
    try:
        manifest = read_json_file(manifest_path, "run manifest")
    except UsageError:
        return False
    if not isinstance(manifest, dict) or manifest.get("status") != "running":
        return False
    reason = (f"pgdyno was killed (pid {pid}) while this run was running; the files it "
              "wrote before are kept")
    manifest.update(status="failed", ended_at=utc_now(), reason=reason)
    write_json_atomic(manifest_path, manifest)
    index = RunIndex(results_dir)
    with contextlib.suppress(Exception):  # a damaged index is rebuilt by `runs --reindex`
        row = index.get(index.run_id_for(run_dir))
        if row is not None:
            row = dataclasses.replace(row, status="failed", ended_at=manifest["ended_at"])
            index.upsert(row)
            if shared is not None:
                shared.upsert(row)
    return True
