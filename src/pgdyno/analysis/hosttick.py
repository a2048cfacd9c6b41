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

    @classmethod
    def from_raw(cls, raw: dict) -> HostTick:
        return cls(raw["t"], raw["mono"], raw["stat"], raw["diskstats"], raw["meminfo"],
                   raw.get("workload_ticks") or {})


def workload_cores(prev: HostTick, cur: HostTick) -> float | None:
    """CPU cores used by the benchmark's processes between two ticks (processes present at
    both; one that exited in between loses its last interval)."""
    if not cur.workload_ticks or cur.mono <= prev.mono:
        return None
    used = sum(max(0, ticks - prev.workload_ticks[pid])
               for pid, ticks in cur.workload_ticks.items() if pid in prev.workload_ticks)
    return used / CLK_TCK / (cur.mono - prev.mono)
