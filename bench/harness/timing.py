"""Clocks and CPU counters: wall seconds of a step, and CPU seconds from the kernel's
accounting, which a shared machine's speed changes disturb far less than wall time."""

from __future__ import annotations

import resource
import time
from types import TracebackType

import psutil


class Stopwatch:
    """Wall seconds of a block (a monotonic clock)::

        with Stopwatch() as watch:
            step()
        watch.seconds
    """

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.monotonic()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.seconds = time.monotonic() - self.started


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's reaped children (the programs it ran
    and waited for): a driver's CPU is the difference around its run."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process tree so far: the root's own, its reaped children's (a
    server's exited backends) and every live process under it. A process that exits
    while it is read is counted once its parent reaps it."""
    root = psutil.Process(pid)
    times = root.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in root.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.Error:
            continue
        total += child_times.user + child_times.system
    return total


def wait_for_children(pid: int, at_most: int, timeout_s: float = 10.0) -> None:
    """Until ``pid`` has at most ``at_most`` live children (a server's backends of a step
    that has ended, exited and reaped), or ``timeout_s`` has passed: read before that, an
    exited backend's CPU is in neither count."""
    root = psutil.Process(pid)
    deadline = time.monotonic() + timeout_s
    while len(root.children()) > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
