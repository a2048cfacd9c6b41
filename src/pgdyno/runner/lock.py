"""Recovery from a pgdyno that was killed while it held a workdir's lock.

The lock is the target's (``Target.workdir_lock``: ``targets.lock.WorkdirLock`` here,
``targets.remote.RemoteLock`` on an --ssh host); the content a killed run left in it names
its run: the server it left running is stopped and its run marked ``failed`` ("pgdyno was
killed") in the run directory and in the index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.results.index import RunIndex
from pgdyno.results.manifest import read_json_file
from pgdyno.results.rundir import utc_now, write_json_atomic
from pgdyno.targets.local import stop_orphaned_server
from pgdyno.targets.lock import Holder
from pgdyno.targets.remote import RemoteHolder


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
