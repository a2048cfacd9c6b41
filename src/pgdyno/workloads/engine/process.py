"""Running a load program (pgbench, sysbench) as a child process, the way every engine does.

The child runs in its own session, so Ctrl-C reaches pgdyno first and pgdyno decides how
to stop it (SIGINT, then SIGTERM, then SIGKILL). One of its streams is read line by line as
it arrives (progress lines for the progress bar) and copied to a file; the other goes to a
file directly. Both files stay in the run directory as raw data.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int
    seconds: float


def run_program(cmd: list[str], stdout_path: Path, stderr_path: Path, *,
                env: dict[str, str] | None = None, watch: str = "stderr",
                on_line: Callable[[str], None] | None = None,
                on_start: Callable[[int], None] | None = None) -> ProcessOutcome:
    """Run ``cmd`` to its end, streaming the ``watch`` stream ("stdout" or "stderr") to
    ``on_line``; ``on_start`` is told the child's pid (its process group's) as it starts.
    Ctrl-C stops the child and is re-raised once it has exited."""
    started = time.monotonic()
    with stdout_path.open("w") as out, stderr_path.open("w") as err:
        watched, other = (out, err) if watch == "stdout" else (err, out)
        pipes = {"stdout": subprocess.PIPE if watch == "stdout" else other,
                 "stderr": subprocess.PIPE if watch == "stderr" else other}
        proc = subprocess.Popen(cmd, text=True, env=env, start_new_session=True, **pipes)
        stream = proc.stdout if watch == "stdout" else proc.stderr
        reader = threading.Thread(target=_pump, args=(stream, watched, on_line), daemon=True)
        reader.start()
        try:
            if on_start is not None:
                on_start(proc.pid)
            proc.wait()
        except KeyboardInterrupt:
            stop(proc)
            reader.join(5)
            raise
        reader.join(5)
    return ProcessOutcome(returncode=proc.returncode, seconds=time.monotonic() - started)


def raise_open_files(needed: int) -> str:
    """Raise this process's soft limit on open files to ``needed`` (children inherit it:
    pgbench holds a socket per client), within the hard limit. Returns a note when the hard
    limit is too low, else ""."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return ""
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft >= needed:
        return ""
    return (f"open files limited to {soft} (hard limit {hard}), {needed} needed: raise it "
            "(ulimit -Hn, or LimitNOFILE= / limits.conf) for this many clients")


def _pump(stream, copy_to, on_line: Callable[[str], None] | None) -> None:
    for line in stream:
        copy_to.write(line)
        copy_to.flush()
        if on_line is not None:
            with contextlib.suppress(Exception):  # a progress bar must never stop a run
                on_line(line)


def stop(proc: subprocess.Popen) -> None:
    """SIGINT first (pgbench and sysbench exit cleanly), then SIGTERM, then SIGKILL; each
    with a SIGCONT, since a comparison may have paused the child, which then would not
    act on the others."""
    for sig, wait in ((signal.SIGINT, 5), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
            proc.send_signal(signal.SIGCONT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)


def last_error_line(path: Path) -> str:
    """The line of a program's error output that says what went wrong."""
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return next((line for line in reversed(lines) if "error" in line.lower()),
                lines[-1] if lines else "")
