"""One host sample as stored in ``host_raw.jsonl``, and the figures computed from two of them.

The sampler (:mod:`pgdyno.telemetry.host`) writes these ticks and the analysis reads them
back; both compute from the same definitions here so the CSV files and the summaries agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# USER_HZ, the unit of the per-process CPU ticks: a kernel ABI constant (100 on the usual
# architectures), so the value read where the analysis runs is the recording host's too.
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Devices that never do I/O (unused loop/ram devices) are not worth a row per second.
IDLE_PREFIXES = ("loop", "ram", "zram")


@dataclass(frozen=True)
class HostTick:
    t: float
    mono: float
    stat: str
    diskstats: str
    meminfo: str
    workload_ticks: dict[str, int] = field(default_factory=dict)
    """pid -> utime + stime (USER_HZ ticks) of each process of the benchmark: this
    process's descendants (pgbench, an embedded server) and the postmaster's tree."""
    workload_io: dict[str, list[int]] = field(default_factory=dict)
    """pid -> [bytes read from storage, bytes written] (/proc/PID/io) of the same processes,
    where readable (another user's processes need root)."""
    sampler_ticks: int | None = None
    """utime + stime of pgdyno's own process (its samplers and run loop, every thread): the
    benchmark's cost, not a neighbour's, though not part of ``workload_ticks``."""
    sampler_io: list[int] | None = None
    driver_pids: dict[str, str] | None = None
    """pid -> command name of the benchmark's processes outside the server's tree: the load
    driver (pgbench) that pgdyno started. The other pids of ``workload_ticks`` are the
    server's (its postmaster and every backend). None in runs recorded before the split."""
    server_pid: int | None = None
    """The postmaster whose tree was sampled; None: no server on this host (a remote one)."""
    sampler_backends: list[str] | None = None
    """pids among ``workload_ticks`` of the server backends that serve pgdyno's own
    sampling sessions (wait sampling, statistics, debt): the server side of pgdyno's cost.
    None in runs recorded before they were told apart."""

    @classmethod
    def from_raw(cls, raw: dict) -> HostTick:
        return cls(raw["t"], raw["mono"], raw["stat"], raw["diskstats"], raw["meminfo"],
                   raw.get("workload_ticks") or {}, raw.get("workload_io") or {},
                   raw.get("sampler_ticks"), raw.get("sampler_io"), raw.get("driver_pids"),
                   raw.get("server_pid"), raw.get("sampler_backends"))


def workload_cores(prev: HostTick, cur: HostTick) -> float | None:
    """CPU cores used by the benchmark's processes between two ticks (processes present at
    both; one that exited in between loses its last interval)."""
    if not cur.workload_ticks or cur.mono <= prev.mono:
        return None
    used = sum(max(0, ticks - prev.workload_ticks[pid])
               for pid, ticks in cur.workload_ticks.items() if pid in prev.workload_ticks)
    return used / CLK_TCK / (cur.mono - prev.mono)


def sampler_cores(prev: HostTick, cur: HostTick) -> float | None:
    """CPU cores used by pgdyno's own process between two ticks (None: not recorded)."""
    if prev.sampler_ticks is None or cur.sampler_ticks is None or cur.mono <= prev.mono:
        return None
    return max(0, cur.sampler_ticks - prev.sampler_ticks) / CLK_TCK / (cur.mono - prev.mono)


@dataclass(frozen=True)
class IoDelta:
    """Bytes the benchmark's processes (and pgdyno's own) moved to or from storage between
    two ticks."""

    read: int
    written: int
    complete: bool
    """Every process present at both ticks had its /proc/PID/io read at both."""


def workload_io(prev: HostTick, cur: HostTick) -> IoDelta | None:
    """The benchmark's storage I/O between two ticks, counted like its CPU (processes present
    at both ticks); None when no I/O counters were recorded."""
    if not cur.workload_io and cur.sampler_io is None:
        return None
    read = written = 0
    complete = True
    for pid in cur.workload_ticks.keys() & prev.workload_ticks.keys():
        a, b = prev.workload_io.get(pid), cur.workload_io.get(pid)
        if a is None or b is None:
            complete = False
            continue
        read += max(0, b[0] - a[0])
        written += max(0, b[1] - a[1])
    if prev.sampler_io is not None and cur.sampler_io is not None:
        read += max(0, cur.sampler_io[0] - prev.sampler_io[0])
        written += max(0, cur.sampler_io[1] - prev.sampler_io[1])
    return IoDelta(read, written, complete)
