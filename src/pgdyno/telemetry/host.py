"""Host sampling: /proc/stat, /proc/diskstats, /proc/meminfo once per interval, and the
cgroup CPU limit.

Each tick stores the raw text (``host_raw.jsonl``) and the figures derived from it against
the previous tick (``cpu.csv``, ``disk.csv``, ``memory.csv``). The analysis recomputes
from the raw text with the same functions (:mod:`pgdyno.analysis.procfs` and
:mod:`pgdyno.analysis.hosttick`), so the CSV files are a convenience.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from pgdyno.analysis import procfs
from pgdyno.analysis.hosttick import IDLE_PREFIXES, HostTick, workload_cores
from pgdyno.telemetry.files import CsvWriter, JsonlWriter

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")

CPU_COLUMNS = ["t", "interval_s", "usr", "nice", "sys", "iowait", "irq", "soft", "steal",
               "idle", "busy", "procs_running", "procs_blocked", "workload_cores"]
DISK_COLUMNS = ["t", "interval_s", "device", "r_s", "w_s", "rkb_s", "wkb_s", "r_await_ms",
                "w_await_ms", "aqu_sz", "util_pct"]
MEM_COLUMNS = ["t", "cached_kb", "dirty_kb", "writeback_kb", "shmem_kb", "mem_total_kb",
               "mem_available_kb", "hugepages_used", "anon_hugepages_kb"]

def read_tick(roots: set[int] | None = None, own_backends: Collection[int] = ()
              ) -> HostTick:
    """One host sample; with ``roots`` (pgdyno's pid and a local postmaster's) also the CPU
    ticks and I/O of every process of their trees, the load driver's named apart, and
    which of the server's processes are the backends of pgdyno's own sessions
    (``own_backends``, their pids as the server gave them)."""
    # Read the three files back to back so they describe the same instant.
    t, mono = time.time(), time.monotonic()
    stat = procfs.keep_stat_lines((PROC / "stat").read_text())
    diskstats = (PROC / "diskstats").read_text()
    meminfo = (PROC / "meminfo").read_text()
    if not roots:
        return HostTick(t, mono, stat, diskstats, meminfo)
    me = os.getpid()
    # Every root but pgdyno's own process is a postmaster (the recorder adds at most one).
    server = next((pid for pid in roots if pid != me), None)
    sample = sample_processes(roots, me, server)
    backends = sorted(str(pid) for pid in own_backends if str(pid) in sample.ticks)
    return HostTick(t, mono, stat, diskstats, meminfo, sample.ticks, workload_io(sample.ticks),
                    _process_ticks(str(me)), _process_io(str(me)), sample.driver, server,
                    backends if server is not None else None)


def workload_io(pids: dict[str, int]) -> dict[str, list[int]]:
    """[bytes read, bytes written] of each of these processes whose /proc/PID/io is readable:
    the benchmark's share of the devices' traffic, to tell a neighbour's I/O from ours."""
    out = {}
    for pid in pids:
        io = _process_io(pid)
        if io is not None:
            out[pid] = io
    return out


def _process_io(pid: str) -> list[int] | None:
    try:
        parsed = procfs.parse_proc_io((PROC / pid / "io").read_text())
    except OSError:  # exited, or another user's process without the rights to read it
        return None
    return list(parsed) if parsed is not None else None


def _process_ticks(pid: str) -> int | None:
    stat = _read_stat(pid)
    return stat.used if stat is not None else None


@dataclass(frozen=True)
class _Stat:
    """What the samplers read from one ``/proc/PID/stat``."""

    name: str
    parent: int
    used: int
    """utime + stime, USER_HZ ticks."""
    threads: int


def _read_stat(pid: str | int) -> _Stat | None:
    """None when the process is gone (exited while we looked)."""
    try:
        # The command name may contain spaces or parentheses: split after the last ")".
        head, _, tail = (PROC / str(pid) / "stat").read_text().rpartition(")")
        fields = tail.split()
        return _Stat(head.partition("(")[2], int(fields[1]), int(fields[11]) + int(fields[12]),
                     int(fields[17]))
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class ProcessSample:
    ticks: dict[str, int]
    """pid -> utime + stime (USER_HZ ticks) of every process of the benchmark."""
    driver: dict[str, str]
    """pid -> command name of those outside the postmaster's tree (pgbench)."""


def sample_processes(roots: set[int], me: int, server: int | None) -> ProcessSample:
    """utime + stime of every process in the trees of ``roots`` (``me``, the sampler, left
    out: its own cost is recorded apart, as ``sampler_ticks``, and measured by
    bench/overhead.py). A process belongs to the first root met walking up from it: the
    server's when that is the postmaster ``server`` (so an embedded server started by
    pgdyno is the server's, not the driver's), the load driver's when it is ``me``.

    The trees are walked down from the roots through ``/proc/PID/task/TID/children``: a
    few reads per process of the benchmark, where scanning all of /proc reads every
    process on the host each second (a quarter of the samplers' CPU on a quiet host, more
    on a busy one). Kernels without that file get the scan."""
    if not (PROC / str(me) / "task" / str(me) / "children").exists():
        return _scan_processes(roots, me, server)
    ticks: dict[str, int] = {}
    driver: dict[str, str] = {}
    for root in roots:
        for pid, name, used in _walk(root, roots - {root}):
            if pid == me:
                continue
            ticks[str(pid)] = used
            if root != server:
                driver[str(pid)] = name
    return ProcessSample(ticks, driver)


def _walk(root: int, stop: set[int]) -> Iterator[tuple[int, str, int]]:
    """(pid, command name, utime + stime) of ``root`` and its descendants, not descending
    into ``stop`` (the other roots' trees are theirs)."""
    pending = [root]
    while pending:
        pid = pending.pop()
        stat = _read_stat(pid)
        if stat is None:
            continue
        yield pid, stat.name, stat.used
        # A child is listed under the thread that forked it: one file for a process of one
        # thread (a backend, pgbench with -j 1), one per thread otherwise.
        tasks = [str(pid)] if stat.threads == 1 else _tasks(pid)
        for tid in tasks:
            with contextlib.suppress(OSError, ValueError):
                children = (PROC / str(pid) / "task" / tid / "children").read_text().split()
                pending += [child for child in map(int, children) if child not in stop]


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(PROC / str(pid) / "task")
    except OSError:
        return []


def _scan_processes(roots: set[int], me: int, server: int | None) -> ProcessSample:
    """``sample_processes`` from /proc/PID/stat of every process on the host."""
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    name: dict[int, str] = {}
    for entry in PROC.iterdir():
        stat = _read_stat(entry.name) if entry.name.isdigit() else None
        if stat is None:
            continue
        pid = int(entry.name)
        parent[pid], cpu[pid], name[pid] = stat.parent, stat.used, stat.name
    ticks: dict[str, int] = {}
    driver: dict[str, str] = {}
    for pid, used in cpu.items():
        root = _root_of(pid, parent, roots)
        if root is None or pid == me:
            continue
        ticks[str(pid)] = used
        if root != server:
            driver[str(pid)] = name[pid]
    return ProcessSample(ticks, driver)


def _root_of(pid: int, parent: dict[int, int], roots: set[int]) -> int | None:
    node, depth = pid, 0
    while node > 1 and depth < 64:
        if node in roots:
            return node
        node, depth = parent.get(node, 0), depth + 1
    return None


def postmaster_pid(data_dir: Path | None) -> int | None:
    try:
        return int((Path(data_dir) / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError, TypeError):
        return None


def local_postmaster(backend_pid: int | None) -> int | None:
    """The postmaster of a server on this host, found from one of its backends' pid (as
    ``pg_backend_pid()`` gives it over a DSN connection): the backend's parent, when both
    are local ``postgres`` processes. None for a remote server or an unknown pid."""
    if backend_pid is None:
        return None
    try:
        comm = (PROC / str(backend_pid) / "comm").read_text().strip()
        parent = int((PROC / str(backend_pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        parent_comm = (PROC / str(parent) / "comm").read_text().strip()
    except (OSError, IndexError, ValueError):
        return None
    return parent if comm == parent_comm == "postgres" else None


def disk_devices_of_interest(disks: dict[str, procfs.DiskCounters], keep: set[str]) -> list[str]:
    names = []
    for name, c in disks.items():
        idle = name.startswith(IDLE_PREFIXES) and c.reads == 0 and c.writes == 0
        if name in keep or not idle:
            names.append(name)
    return names


def derive(prev: HostTick, cur: HostTick, keep: set[str]) -> tuple[list, list[list], list]:
    """(cpu row, disk rows, memory row) for the interval ending at ``cur``."""
    dt = cur.mono - prev.mono
    s0, s1 = procfs.parse_proc_stat(prev.stat), procfs.parse_proc_stat(cur.stat)
    pct = procfs.cpu_percent(s0.cpu, s1.cpu)
    cpu_row: list = [cur.t, dt]
    if pct is None:
        cpu_row += [None] * 9
    else:
        cpu_row += [pct.usr, pct.nice, pct.sys, pct.iowait, pct.irq, pct.soft, pct.steal,
                    pct.idle, pct.busy]
    cpu_row += [s1.procs_running, s1.procs_blocked, workload_cores(prev, cur)]
    d0, d1 = procfs.parse_diskstats(prev.diskstats), procfs.parse_diskstats(cur.diskstats)
    disk_rows = []
    for name in disk_devices_of_interest(d1, keep):
        if name not in d0:
            continue
        rates = procfs.disk_rates(d0[name], d1[name], dt)
        if rates is None:
            continue
        disk_rows.append([cur.t, dt, name, rates.r_s, rates.w_s, rates.rkb_s, rates.wkb_s,
                          rates.r_await_ms, rates.w_await_ms, rates.aqu_sz, rates.util_pct])
    mem = procfs.parse_meminfo(cur.meminfo)
    mem_row = [cur.t] + [mem.get(c) for c in MEM_COLUMNS[1:7]]
    mem_row += [procfs.hugepages_used(mem), mem.get("anon_hugepages_kb")]
    return cpu_row, disk_rows, mem_row


class HostWriters:
    def __init__(self, out: Path) -> None:
        self.raw = JsonlWriter(out / "host_raw.jsonl")
        self.cpu = CsvWriter(out / "cpu.csv", CPU_COLUMNS)
        self.disk = CsvWriter(out / "disk.csv", DISK_COLUMNS)
        self.mem = CsvWriter(out / "memory.csv", MEM_COLUMNS)

    def close(self) -> None:
        for writer in (self.raw, self.cpu, self.disk, self.mem):
            writer.close()


# ----- CPU capacity ----------------------------------------------------------------------

@dataclass(frozen=True)
class CpuCapacity:
    online: int
    """CPUs this process may run on (affinity), as mpstat counts them."""
    limit_cores: float | None
    """The cgroup CPU quota in cores, when one applies (e.g. 1.5 for 150000/100000)."""
    source: str

    @property
    def effective_cores(self) -> float:
        return min(self.online, self.limit_cores) if self.limit_cores else float(self.online)


def cpu_capacity() -> CpuCapacity:
    try:
        online = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        online = os.cpu_count() or 1
    limit, source = _cgroup_cpu_limit()
    return CpuCapacity(online=online, limit_cores=limit, source=source)


def _cgroup_cpu_limit() -> tuple[float | None, str]:
    """Tightest quota on this process's cgroup path (limits nest), v2 or v1."""
    try:
        lines = (PROC / "self" / "cgroup").read_text().splitlines()
    except OSError as exc:
        return None, f"cgroup not readable: {exc}"
    best: tuple[float | None, str] = (None, "no cgroup CPU quota")
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and controllers == "":
            candidates = [(CGROUP_ROOT / p.lstrip("/") / "cpu.max", "v2") for p in _ancestors(path)]
        elif "cpu" in controllers.split(","):
            base = CGROUP_ROOT / "cpu"
            if not base.exists():
                base = CGROUP_ROOT / controllers
            candidates = [(base / p.lstrip("/") / "cpu.cfs_quota_us", "v1")
                          for p in _ancestors(path)]
        else:
            continue
        for file, kind in candidates:
            cores = _read_quota(file, kind)
            if cores is not None and (best[0] is None or cores < best[0]):
                best = (cores, f"cgroup {kind} {file}")
    return best


def _ancestors(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def _read_quota(file: Path, kind: str) -> float | None:
    try:
        if kind == "v2":
            quota, _, period = file.read_text().strip().partition(" ")
            if quota == "max":
                return None
            return int(quota) / int(period or "100000")
        quota_us = int(file.read_text().strip())
        if quota_us <= 0:
            return None
        period_us = int((file.parent / "cpu.cfs_period_us").read_text().strip())
        return quota_us / period_us
    except (OSError, ValueError):
        return None
