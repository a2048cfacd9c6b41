"""The host's side of a run: CPU, devices, memory, other load on the host, SMART.

Averages over the window are ratios of counter deltas (total ticks, total I/Os, total
milliseconds), not means of per-second figures: an average await is "milliseconds spent on
reads ÷ reads", as iostat computes it over a long interval. Peaks and coefficients of
variation come from the per-interval figures, in ``host_raw.jsonl`` and ``smart.json``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from pgdyno.analysis import procfs
from pgdyno.analysis.endurance import endurance_projection
from pgdyno.analysis.hosttick import (
    CLK_TCK,
    IDLE_PREFIXES,
    HostTick,
    sampler_cores,
    workload_cores,
    workload_io,
)
from pgdyno.analysis.telemetry.meta import CpuMeta
from pgdyno.analysis.telemetry.model import (
    MB,
    Contamination,
    CpuPerUnit,
    CpuSummary,
    DeviceSummary,
    MemorySummary,
    SmartChange,
    Stat,
    TelemetrySummary,
)
from pgdyno.analysis.telemetry.raw import delta, in_window, load_json
from pgdyno.results.rawfiles import read_jsonl
from pgdyno.units import format_rate

# ===== statistics helpers ================================================================

def _stat(values: list[float], avg: float | None = None) -> Stat:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return Stat(avg=avg)
    ordered = sorted(vals)
    p95 = ordered[min(len(ordered) - 1, max(0, math.ceil(0.95 * len(ordered)) - 1))]
    return Stat(avg=avg if avg is not None else sum(vals) / len(vals), p95=p95,
                peak=ordered[-1], min=ordered[0])


def _std(values: list[float]) -> float | None:
    if not values:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


MIN_IOPS_FOR_CV = 10.0
"""Below this mean IOPS a coefficient of variation is noise (3 ± 9 IOPS gives "300%", which
reads like a checkpoint storm): the CV is left out and reports say the activity was too low."""


def coefficient_of_variation(values: list[float], floor: float = 0.0) -> float | None:
    """Population σ ÷ μ of the samples; None when the mean is zero or below ``floor``."""
    if not values:
        return None
    mean = sum(values) / len(values)
    if mean <= 0 or mean < floor:
        return None
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(var) / mean


# ===== host ==============================================================================

def host_ticks(tdir: Path, start: float, end: float, interval_s: float) -> list[HostTick]:
    """The window's host samples, partial intervals dropped: a tick less than half an
    interval after the previous one (the final tick taken when the load stops) makes a
    rate over a few milliseconds, a cliff in every plot and noise in every CV."""
    # A tick at most half an interval outside the window still describes the window's edge.
    slack = interval_s / 2
    ticks = [HostTick.from_raw(r) for r in read_jsonl(tdir / "host_raw.jsonl")
             if in_window(float(r["t"]), start, end, slack)]
    kept: list[HostTick] = []
    for tick in ticks:
        if not kept or tick.mono - kept[-1].mono >= interval_s / 2:
            kept.append(tick)
    return kept


def host_summaries(summary: TelemetrySummary, ticks: list[HostTick], cpu: CpuMeta) -> None:
    stats = [procfs.parse_proc_stat(t.stat) for t in ticks]
    disks = [procfs.parse_diskstats(t.diskstats) for t in ticks]
    summary.cpu = cpu_summary(stats, ticks, cpu)
    role_of: dict[str, list[str]] = defaultdict(list)
    for info in summary.roles:
        if info.device:
            role_of[info.device].append(info.role)
    summary.devices = device_summaries(disks, ticks, role_of)
    summary.memory = _memory(ticks)
    summary.contamination = contamination(summary, ticks)


def host_series(summary: TelemetrySummary, ticks: list[HostTick]) -> None:
    """Per-interval CPU and disk rates over ``ticks`` (which may start before the window)."""
    stats = [procfs.parse_proc_stat(t.stat) for t in ticks]
    disks = [procfs.parse_diskstats(t.diskstats) for t in ticks]
    s = summary.series
    s.host_t = [t.t for t in ticks[1:]]
    for prev, cur in zip(stats, stats[1:], strict=False):
        pct = procfs.cpu_percent(prev.cpu, cur.cpu)
        s.cpu_usr.append(pct.usr if pct else 0.0)
        s.cpu_sys.append(pct.sys if pct else 0.0)
        s.cpu_iowait.append(pct.iowait if pct else 0.0)
        s.cpu_soft.append(pct.soft if pct else 0.0)
        s.cpu_other.append(pct.nice + pct.irq + pct.steal if pct else 0.0)
    for dev in summary.devices:
        s.disk_w_s[dev.device], s.disk_r_s[dev.device] = _rate_series(disks, ticks, dev.device)


def cpu_summary(stats: list[procfs.StatSnapshot], ticks: list[HostTick],
                cpu: CpuMeta) -> CpuSummary:
    """The CPU figures over ``stats``, scaled by the capacity ``cpu`` recorded."""
    out = CpuSummary(samples=len(stats) - 1, online_cpus=cpu.online,
                     limit_cores=cpu.limit_cores, effective_cores=cpu.effective_cores)
    intervals = [p for p in (procfs.cpu_percent(a.cpu, b.cpu)
                             for a, b in zip(stats, stats[1:], strict=False)) if p]
    whole = procfs.cpu_percent(stats[0].cpu, stats[-1].cpu)
    for name in ("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle", "busy"):
        avg = getattr(whole, name) if whole else None
        setattr(out, name, _stat([getattr(p, name) for p in intervals], avg))
    if out.busy.avg is not None and out.effective_cores and out.online_cpus:
        busy_cores = out.busy.avg / 100.0 * out.online_cpus
        out.busy_of_limit_pct = 100.0 * busy_cores / out.effective_cores
    workload = [c for c in (workload_cores(a, b)
                            for a, b in zip(ticks, ticks[1:], strict=False))
                if c is not None]
    out.workload_cores = _stat(workload)
    if workload and out.busy.avg and out.online_cpus:
        busy_cores = out.busy.avg / 100.0 * out.online_cpus
        out.workload_share_of_busy_pct = min(100.0, 100.0 * (out.workload_cores.avg or 0.0)
                                             / busy_cores)
    out.run_queue = _stat([float(s.procs_running) for s in stats[1:]])
    out.procs_blocked = _stat([float(s.procs_blocked) for s in stats[1:]])
    return out


# ===== other load on the host ===========================================================

# Another job's load is material when it takes more than this share of what the host did
# and at least this much in absolute terms (a fifth of the busy CPU moved TPS by half in
# measured runs; a quarter core is well above the idle host's background).
OTHER_SHARE_PCT = 20.0
OTHER_MIN_CORES = 0.25
# Below this the devices' unexplained traffic is housekeeping (journal commits, writeback
# of older pages, the odd log line), not a job competing for the disk.
OTHER_MIN_IO_MB_S = 5.0
"""MiB/s, as every ``*_mb_s`` figure of the host summary (MB = 2**20 there)."""
# The I/O comparison needs the benchmark's counters in nearly every interval.
IO_COMPLETE_SHARE = 0.8


def contamination(summary: TelemetrySummary, ticks: list[HostTick]) -> Contamination:
    """Other processes' CPU and disk traffic over the window (see ``Contamination``)."""
    out = Contamination()
    cpu = summary.cpu
    cores = cpu.online_cpus
    if cpu.busy.avg is None or not cores or len(ticks) < 2:
        return out
    wall = ticks[-1].mono - ticks[0].mono
    out.host_cores = cores
    out.busy_cores = cpu.busy.avg / 100.0 * cores
    out.steal_cores = (cpu.steal.avg or 0.0) / 100.0 * cores
    findings = []
    spans = [(b.mono - a.mono, workload_cores(a, b), sampler_cores(a, b))
             for a, b in zip(ticks, ticks[1:], strict=False)]
    if any(w is not None for _, w, _ in spans) and wall > 0:
        # Core-seconds over the window, so the figures are ratios of totals as the CPU
        # percentages are.
        used = sum(dt * w for dt, w, _ in spans if w is not None)
        mine = sum(dt * own for dt, _, own in spans if own is not None)
        out.cpu_attributed = True
        out.sampler_cores = mine / wall
        out.benchmark_cores = (used + mine) / wall
        # Interrupt work (irq, softirq) is not any process's and steal is the hypervisor's.
        process_pct = cpu.busy.avg - (cpu.irq.avg or 0) - (cpu.soft.avg or 0) - (
            cpu.steal.avg or 0)
        out.other_cores = max(0.0, process_pct / 100.0 * cores - out.benchmark_cores)
        split_benchmark_cpu(out, ticks, wall)
        if out.busy_cores > 0:
            harness = out.sampler_cores + (out.sampler_server_cores or 0.0)
            out.harness_share_of_busy_pct = 100.0 * harness / out.busy_cores
        if out.busy_cores > 0:
            out.other_share_of_busy_pct = min(100.0, 100.0 * out.other_cores / out.busy_cores)
        if (out.other_cores >= OTHER_MIN_CORES
                and out.other_share_of_busy_pct > OTHER_SHARE_PCT):
            findings.append(f"other processes used {out.other_cores:.1f} of {cores} cores "
                            f"({out.other_share_of_busy_pct:.0f}% of busy CPU)")
    if (out.busy_cores and out.steal_cores >= OTHER_MIN_CORES
            and 100.0 * out.steal_cores / out.busy_cores > OTHER_SHARE_PCT):
        findings.append(f"the hypervisor gave {out.steal_cores:.1f} of {cores} cores to other "
                        f"machines (steal, {100 * out.steal_cores / out.busy_cores:.0f}% of "
                        "busy CPU)")
    findings += _other_io(out, summary, ticks, wall)
    out.finding = "; ".join(findings)
    out.contaminated = bool(findings)
    return out


def split_benchmark_cpu(out: Contamination, ticks: list[HostTick], wall: float) -> None:
    """The benchmark's cores split into the server's, the load driver's and the server
    backends of pgdyno's own sessions, counted as ``workload_cores`` counts them (each
    interval, the processes present at both ticks), so the three add up to the
    benchmark's figure. Left None in runs recorded before the
    ticks named the driver's processes."""
    if wall <= 0 or any(t.driver_pids is None for t in ticks):
        return
    server = driver = own = 0
    programs: set[str] = set()
    for prev, cur in zip(ticks, ticks[1:], strict=False):
        if not cur.workload_ticks or cur.mono <= prev.mono:
            continue  # as workload_cores: no figure for this interval
        mine = set(cur.sampler_backends or ())
        for pid, used in cur.workload_ticks.items():
            if pid not in prev.workload_ticks:
                continue
            spent = max(0, used - prev.workload_ticks[pid])
            if pid in (cur.driver_pids or {}):
                driver += spent
                if spent:
                    programs.add((cur.driver_pids or {})[pid])
            elif pid in mine:
                own += spent
            else:
                server += spent
    out.driver_cores = driver / CLK_TCK / wall
    out.driver_programs = sorted(programs)
    local_server = all(t.server_pid is not None for t in ticks)
    out.server_cores = server / CLK_TCK / wall if local_server else None
    told_apart = local_server and all(t.sampler_backends is not None for t in ticks)
    out.sampler_server_cores = own / CLK_TCK / wall if told_apart else None


def cpu_per_unit(out: Contamination, unit: str, units_per_s: float) -> CpuPerUnit | None:
    """CPU-seconds per unit of work of the server and the driver (see ``CpuPerUnit``);
    None when the split or the rate is unknown."""
    if out.driver_cores is None or units_per_s <= 0:
        return None
    server = out.server_cores / units_per_s if out.server_cores is not None else None
    driver = out.driver_cores / units_per_s
    share = 100.0 * driver / server if server else None
    return CpuPerUnit(unit=unit, units_per_s=units_per_s, server_cpu_s=server,
                      driver_cpu_s=driver, driver_share_pct=share)


def _other_io(out: Contamination, summary: TelemetrySummary, ticks: list[HostTick],
              wall: float) -> list[str]:
    """Fills the I/O figures; the finding when another job's disk traffic is material."""
    devices = [d for d in summary.devices if d.roles]
    deltas = [workload_io(a, b) for a, b in zip(ticks, ticks[1:], strict=False)]
    known = [d for d in deltas if d is not None and d.complete]
    if not devices or wall <= 0 or not deltas or len(known) < IO_COMPLETE_SHARE * len(deltas):
        return []
    out.io_attributed = True
    ours_read = sum(d.read for d in deltas if d is not None) / MB
    ours_written = sum(d.written for d in deltas if d is not None) / MB
    dev_read = sum(d.read_mb for d in devices)
    dev_written = sum(d.written_mb for d in devices)
    # Pages dirtied before the window and written back during it are not ours to explain
    # (nor anyone's in it); pages we dirtied that are still in memory never reached a device.
    m0, m1 = procfs.parse_meminfo(ticks[0].meminfo), procfs.parse_meminfo(ticks[-1].meminfo)
    pending = ((m1.get("dirty_kb", 0) + m1.get("writeback_kb", 0))
               - (m0.get("dirty_kb", 0) + m0.get("writeback_kb", 0))) / 1024
    other = max(0.0, dev_read - ours_read) + max(0.0, dev_written + pending - ours_written)
    total = dev_read + dev_written
    out.device_mb_s = total / wall
    out.benchmark_io_mb_s = (ours_read + ours_written) / wall
    out.other_io_mb_s = min(other, total) / wall
    out.other_io_share_pct = 100.0 * min(other, total) / total if total > 0 else 0.0
    if out.other_io_mb_s < OTHER_MIN_IO_MB_S or out.other_io_share_pct <= OTHER_SHARE_PCT:
        return []
    names = "+".join(d.device for d in devices)
    return [f"other processes did {format_rate(out.other_io_mb_s * MB)} of the {names} "
            f"device's {format_rate(out.device_mb_s * MB)} ({out.other_io_share_pct:.0f}%)"]


def device_summaries(disks: list[dict[str, procfs.DiskCounters]], ticks: list[HostTick],
             role_of: dict[str, list[str]]) -> list[DeviceSummary]:
    first, last = disks[0], disks[-1]
    wall = ticks[-1].mono - ticks[0].mono
    out = []
    for name, end in last.items():
        begin = first.get(name)
        if begin is None:
            continue
        moved = end.reads != begin.reads or end.writes != begin.writes
        if not moved and name not in role_of and (name.startswith(IDLE_PREFIXES)
                                                   or end.reads + end.writes == 0):
            continue
        rates = [r for r in (procfs.disk_rates(d0[name], d1[name], t1.mono - t0.mono)
                             for d0, d1, t0, t1 in zip(disks, disks[1:], ticks, ticks[1:],
                                                       strict=False)
                             if name in d0 and name in d1) if r]
        whole = procfs.disk_rates(begin, end, wall)
        if whole is None:
            continue
        out.append(DeviceSummary(
            device=name, roles=role_of.get(name, []), samples=len(rates),
            r_s=_stat([r.r_s for r in rates], whole.r_s),
            w_s=_stat([r.w_s for r in rates], whole.w_s),
            rmb_s=_stat([r.rkb_s / 1024 for r in rates], whole.rkb_s / 1024),
            wmb_s=_stat([r.wkb_s / 1024 for r in rates], whole.wkb_s / 1024),
            r_await_ms=_stat([r.r_await_ms for r in rates if r.r_s > 0], whole.r_await_ms),
            w_await_ms=_stat([r.w_await_ms for r in rates if r.w_s > 0], whole.w_await_ms),
            aqu_sz=_stat([r.aqu_sz for r in rates], whole.aqu_sz),
            util_pct=_stat([r.util_pct for r in rates], whole.util_pct),
            read_iops_cv=coefficient_of_variation([r.r_s for r in rates], MIN_IOPS_FOR_CV),
            write_iops_cv=coefficient_of_variation([r.w_s for r in rates], MIN_IOPS_FOR_CV),
            read_iops_std=_std([r.r_s for r in rates]),
            write_iops_std=_std([r.w_s for r in rates]),
            read_mb=(end.sectors_read - begin.sectors_read) * procfs.SECTOR_BYTES / MB,
            written_mb=(end.sectors_written - begin.sectors_written) * procfs.SECTOR_BYTES / MB,
        ))
    # Role devices first, then the busiest.
    out.sort(key=lambda d: (not d.roles, -((d.r_s.avg or 0) + (d.w_s.avg or 0))))
    return out


def _rate_series(disks: list[dict[str, procfs.DiskCounters]], ticks: list[HostTick],
                 name: str) -> tuple[list[float], list[float]]:
    w, r = [], []
    for d0, d1, t0, t1 in zip(disks, disks[1:], ticks, ticks[1:], strict=False):
        rates = (procfs.disk_rates(d0[name], d1[name], t1.mono - t0.mono)
                 if name in d0 and name in d1 else None)
        w.append(rates.w_s if rates else 0.0)
        r.append(rates.r_s if rates else 0.0)
    return w, r


def _memory(ticks: list[HostTick]) -> MemorySummary:
    mems = [procfs.parse_meminfo(t.meminfo) for t in ticks]
    out = MemorySummary(samples=len(mems), mem_total_kb=mems[-1].get("mem_total_kb"))
    for name in ("cached_kb", "dirty_kb", "writeback_kb", "shmem_kb"):
        setattr(out, name, _stat([float(m.get(name, 0)) for m in mems]))
    out.hugepages_used = _stat([float(procfs.hugepages_used(m)) for m in mems])
    return out


# ===== SMART =============================================================================

def smart_changes(tdir: Path) -> list[SmartChange]:
    data = load_json(tdir / "smart.json")
    before = {r["device"]: r for r in (data.get("before") or {}).get("readings", [])}
    after = {r["device"]: r for r in (data.get("after") or {}).get("readings", [])}
    out = []
    for device in sorted(set(before) | set(after)):
        b, a = before.get(device, {}), after.get(device, {})
        available = bool(b.get("available") and a.get("available"))
        reason = (a or b).get("reason", "")
        change = SmartChange(device=device, available=available, reason=reason)
        if available:
            change.temperature_before_c = b.get("temperature_c")
            change.temperature_after_c = a.get("temperature_c")
            change.written_bytes = delta(b, a, "host_written_bytes")
            change.read_bytes = delta(b, a, "host_read_bytes")
            change.percent_used_before = b.get("percent_used")
            change.percent_used_after = a.get("percent_used")
            change.media_errors_before = b.get("media_errors")
            change.media_errors_after = a.get("media_errors")
            throttles = delta(b, a, "thermal_throttle_events")
            change.throttle_events = int(throttles) if throttles is not None else None
            hours = ((data.get("after") or {}).get("t", 0) - (data.get("before") or {}).get(
                "t", 0)) / 3600
            change.endurance = endurance_projection(b, a, hours).text
        out.append(change)
    return out

