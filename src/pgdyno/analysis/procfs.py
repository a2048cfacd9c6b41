"""Parsers for /proc/stat, /proc/diskstats and /proc/meminfo, and the mpstat/iostat formulas.

Pure functions on text, so that the analysis can recompute every series from the raw
snapshots kept in the run directory, and tests can check them on recorded samples.
"""

from __future__ import annotations

from dataclasses import dataclass

SECTOR_BYTES = 512
# Fields of a "cpu" line in /proc/stat, in order (USER_HZ ticks).
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
              "guest", "guest_nice")
# Lines of /proc/stat worth keeping: the "intr" and "softirq" lines are long and unused.
STAT_KEEP_PREFIXES = ("cpu", "procs_running", "procs_blocked", "ctxt")


@dataclass(frozen=True)
class CpuTimes:
    """One cpu line of /proc/stat, ticks since boot."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0
    guest: int = 0
    guest_nice: int = 0

    @property
    def total(self) -> int:
        # guest and guest_nice are already included in user and nice.
        return (self.user + self.nice + self.system + self.idle + self.iowait + self.irq
                + self.softirq + self.steal)


@dataclass(frozen=True)
class StatSnapshot:
    cpu: CpuTimes
    """The aggregate "cpu" line."""
    per_cpu: dict[str, CpuTimes]
    procs_running: int
    procs_blocked: int
    ctxt: int


@dataclass(frozen=True)
class CpuPercent:
    """mpstat-style percentages over one interval; they sum to 100."""

    usr: float
    nice: float
    sys: float
    iowait: float
    irq: float
    soft: float
    steal: float
    idle: float

    @property
    def busy(self) -> float:
        """Everything except idle and iowait: time the CPUs did work."""
        return 100.0 - self.idle - self.iowait


def keep_stat_lines(text: str) -> str:
    """The part of /proc/stat that is stored raw (cpu lines, run queue, context switches)."""
    return "\n".join(line for line in text.splitlines() if line.startswith(STAT_KEEP_PREFIXES))


def parse_proc_stat(text: str) -> StatSnapshot:
    cpu = CpuTimes()
    per_cpu: dict[str, CpuTimes] = {}
    scalars = {"procs_running": 0, "procs_blocked": 0, "ctxt": 0}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key = parts[0]
        if key.startswith("cpu"):
            values = [int(v) for v in parts[1:1 + len(CPU_FIELDS)]]
            values += [0] * (len(CPU_FIELDS) - len(values))  # old kernels have fewer fields
            times = CpuTimes(*values)
            if key == "cpu":
                cpu = times
            else:
                per_cpu[key] = times
        elif key in scalars and len(parts) > 1:
            scalars[key] = int(parts[1])
    return StatSnapshot(cpu=cpu, per_cpu=per_cpu, **scalars)


def cpu_percent(prev: CpuTimes, cur: CpuTimes) -> CpuPercent | None:
    """mpstat's formulas; None when no tick elapsed (the interval says nothing)."""
    total = cur.total - prev.total
    if total <= 0:
        return None

    def pct(delta: int) -> float:
        return 100.0 * max(delta, 0) / total

    return CpuPercent(
        usr=pct((cur.user - cur.guest) - (prev.user - prev.guest)),
        nice=pct((cur.nice - cur.guest_nice) - (prev.nice - prev.guest_nice)),
        sys=pct(cur.system - prev.system),
        iowait=pct(cur.iowait - prev.iowait),
        irq=pct(cur.irq - prev.irq),
        soft=pct(cur.softirq - prev.softirq),
        steal=pct(cur.steal - prev.steal),
        idle=pct(cur.idle - prev.idle),
    )


@dataclass(frozen=True)
class DiskCounters:
    """One line of /proc/diskstats (fields 1-11; discards and flushes are not used)."""

    major: int
    minor: int
    name: str
    reads: int
    reads_merged: int
    sectors_read: int
    read_ms: int
    writes: int
    writes_merged: int
    sectors_written: int
    write_ms: int
    in_flight: int
    io_ms: int
    weighted_ms: int


@dataclass(frozen=True)
class DiskRates:
    """iostat -x figures for one device over one interval."""

    r_s: float
    w_s: float
    rkb_s: float
    wkb_s: float
    r_await_ms: float
    w_await_ms: float
    aqu_sz: float
    util_pct: float


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    devices: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        nums = [int(v) for v in parts[3:14]]
        devices[parts[2]] = DiskCounters(int(parts[0]), int(parts[1]), parts[2], *nums)
    return devices


def disk_rates(prev: DiskCounters, cur: DiskCounters, dt_s: float) -> DiskRates | None:
    """iostat's formulas; None for a non-positive interval or a counter reset."""
    if dt_s <= 0:
        return None
    d_reads = cur.reads - prev.reads
    d_writes = cur.writes - prev.writes
    if d_reads < 0 or d_writes < 0:
        return None  # device re-created or counters wrapped: skip this interval
    return DiskRates(
        r_s=d_reads / dt_s,
        w_s=d_writes / dt_s,
        rkb_s=(cur.sectors_read - prev.sectors_read) * SECTOR_BYTES / 1024 / dt_s,
        wkb_s=(cur.sectors_written - prev.sectors_written) * SECTOR_BYTES / 1024 / dt_s,
        r_await_ms=(cur.read_ms - prev.read_ms) / d_reads if d_reads else 0.0,
        w_await_ms=(cur.write_ms - prev.write_ms) / d_writes if d_writes else 0.0,
        aqu_sz=(cur.weighted_ms - prev.weighted_ms) / (1000.0 * dt_s),
        # A device busy for the whole interval can report slightly more than 100%.
        util_pct=min(100.0, 100.0 * (cur.io_ms - prev.io_ms) / (1000.0 * dt_s)),
    )


MEMINFO_KEYS = {
    "Cached": "cached_kb",
    "Dirty": "dirty_kb",
    "Writeback": "writeback_kb",
    "Shmem": "shmem_kb",
    "MemTotal": "mem_total_kb",
    "MemAvailable": "mem_available_kb",
    "AnonHugePages": "anon_hugepages_kb",
    "HugePages_Total": "hugepages_total",
    "HugePages_Free": "hugepages_free",
    "HugePages_Rsvd": "hugepages_rsvd",
    "Hugepagesize": "hugepage_size_kb",
}


def parse_meminfo(text: str) -> dict[str, int]:
    """The fields pgdyno reports, renamed with their unit (kB, or a page count)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        name = MEMINFO_KEYS.get(key.strip())
        if name is not None and rest.split():
            values[name] = int(rest.split()[0])
    return values


def hugepages_used(mem: dict[str, int]) -> int:
    """Huge pages in use, counting reserved ones (allocated to a mapping, not yet touched)."""
    return (mem.get("hugepages_total", 0) - mem.get("hugepages_free", 0)
            + mem.get("hugepages_rsvd", 0))


def parse_proc_io(text: str) -> tuple[int, int] | None:
    """(bytes read from storage, bytes written to storage) of one process from
    /proc/PID/io; None when the fields are missing.

    ``read_bytes`` counts reads the block layer had to do (page-cache hits are not in
    it); ``write_bytes`` counts pages the process dirtied, less ``cancelled_write_bytes``
    (pages truncated before they were written back)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if rest.strip().isdigit():
            fields[key.strip()] = int(rest)
    if "read_bytes" not in fields or "write_bytes" not in fields:
        return None
    return (fields["read_bytes"],
            max(0, fields["write_bytes"] - fields.get("cancelled_write_bytes", 0)))
