"""Resources against their limits: CPU, each role device (against the host's measured
capacity when there is one), memory and connections."""

from __future__ import annotations

from pgdyno.analysis.telemetry.model import MB, DeviceSummary, HardwareLimit, TelemetrySummary
from pgdyno.results.capacity import DeviceCapacity, HostCapacity


def hardware_limits(s: TelemetrySummary,
                     capacity: HostCapacity | None = None) -> list[HardwareLimit]:
    """CPU, each role device, memory and connections against their limits. A device's
    IOPS and bandwidth are read against the host's measured capacity (``pgdyno bench fio``,
    the copy the run froze when it started) when there is one; %util is kept beside them,
    since it understates devices that serve requests in parallel (NVMe, cloud volumes)."""
    rows = []
    cpu = s.cpu
    if cpu.busy.avg is not None and cpu.online_cpus:
        cap = cpu.effective_cores or float(cpu.online_cpus)
        used = cpu.busy.avg / 100.0 * cpu.online_cpus
        peak = (cpu.busy.peak or 0.0) / 100.0 * cpu.online_cpus
        note = f"cgroup quota {cpu.limit_cores:g} cores" if cpu.limit_cores else "online CPUs"
        rows.append(HardwareLimit("CPU", cap, "cores", used, peak, 100.0 * used / cap, note,
                                  kind="cpu"))
    for role, dev in _role_devices(s):
        measured = capacity.device(dev.device) if capacity is not None else None
        iops = (dev.r_s.avg or 0) + (dev.w_s.avg or 0)
        mib_s = (dev.rmb_s.avg or 0) + (dev.wmb_s.avg or 0)
        note = (f"{iops:,.0f} IOPS, {mib_s:,.1f} MiB/s, aqu-sz {dev.aqu_sz.avg or 0:.2f}; "
                + ("%util understates devices that serve requests in parallel: see the "
                   "measured rows" if measured is not None else
                   f"IOPS limit unknown: no fio measurement of {dev.device} "
                   "(run `pgdyno bench fio`)"))
        rows.append(HardwareLimit(
            f"{role} device {dev.device} busy time", 100.0, "%util", dev.util_pct.avg,
            dev.util_pct.peak, dev.util_pct.avg, note, kind="util", device=dev.device,
            role=role))
        if measured is not None:
            rows += _measured_rows(role, dev, measured)
    mem = s.memory
    if mem.mem_total_kb and mem.cached_kb.avg is not None:
        total_gb = mem.mem_total_kb / MB
        cached = (mem.cached_kb.avg or 0) / MB
        rows.append(HardwareLimit("Memory (page cache incl. shared memory)", total_gb, "GiB",
                                  cached, (mem.cached_kb.peak or 0) / MB,
                                  100.0 * cached / total_gb if total_gb else None,
                                  f"shared memory {(mem.shmem_kb.avg or 0) / MB:.2f} GiB",
                                  kind="memory"))
    max_conn = s.settings.get("max_connections")
    if max_conn and s.waits.ticks:
        cap_conn = float(max_conn.split()[0])
        rows.append(HardwareLimit("Connections", cap_conn, "backends", s.waits.connections_avg,
                                  None, 100.0 * s.waits.connections_avg / cap_conn,
                                  f"{s.waits.aas:.1f} active on average",
                                  kind="connections"))
    return rows


def _role_devices(s: TelemetrySummary) -> list[tuple[str, DeviceSummary]]:
    """(roles, device) once per device: data and WAL on one device are one row, "data+wal"."""
    out: dict[str, tuple[list[str], DeviceSummary]] = {}
    for info in s.roles:
        dev = s.role_device(info.role)
        if dev is not None:
            out.setdefault(dev.device, ([], dev))[0].append(info.role)
    return [("+".join(roles), dev) for roles, dev in out.values()]


def _measured_rows(role: str, dev: DeviceSummary,
                   cap: DeviceCapacity) -> list[HardwareLimit]:
    """Reads, writes, their mix and bandwidth against what fio measured on the device.

    The mix's ceiling weighs the measured peaks by this run's own shares of reads and
    writes (time per I/O adds up: 1 / (reads/R + writes/W)); the same for bandwidth."""
    when = f"measured {cap.measured_at[:10]} by fio"
    rows = []
    r_s, w_s = dev.r_s.avg or 0.0, dev.w_s.avg or 0.0
    peak_r, peak_w = dev.r_s.peak, dev.w_s.peak
    for kind, label, used, peak, limit in (
            ("read_iops", "random read IOPS", r_s, peak_r, cap.read_iops_peak),
            ("write_iops", "random write IOPS", w_s, peak_w, cap.write_iops_peak)):
        if limit:
            rows.append(HardwareLimit(
                f"{role} device {dev.device} {label}", limit, "IOPS", used, peak,
                100.0 * used / limit, f"{when} (4 KiB, peak of its queue-depth sweep)",
                basis="measured", kind=kind, device=dev.device, role=role))
    mix = _mixed_limit(r_s, w_s, cap.read_iops_peak, cap.write_iops_peak)
    if mix is not None and r_s and w_s:
        total = r_s + w_s
        rows.append(HardwareLimit(
            f"{role} device {dev.device} IOPS at this run's mix", mix, "IOPS", total,
            None, 100.0 * total / mix,
            f"{when}; {100 * r_s / total:.0f}% reads: 1 / (reads/R + writes/W)",
            basis="measured", kind="iops", device=dev.device, role=role))
    rmb, wmb = dev.rmb_s.avg or 0.0, dev.wmb_s.avg or 0.0
    bandwidth = _mixed_limit(rmb, wmb, cap.read_mib_s, cap.write_mib_s)
    if bandwidth is not None and rmb + wmb > 0:
        rows.append(HardwareLimit(
            f"{role} device {dev.device} bandwidth", bandwidth, "MiB/s", rmb + wmb, None,
            100.0 * (rmb + wmb) / bandwidth,
            f"{when} (1 MiB sequential, weighted by this run's read/write bytes)",
            basis="measured", kind="mib_s", device=dev.device, role=role))
    return rows


def _mixed_limit(reads: float, writes: float, read_cap: float | None,
                 write_cap: float | None) -> float | None:
    total = reads + writes
    if total <= 0:
        return read_cap if not writes else None
    time_per_unit = 0.0
    for share, cap in ((reads / total, read_cap), (writes / total, write_cap)):
        if share > 0:
            if not cap:
                return None
            time_per_unit += share / cap
    return 1.0 / time_per_unit if time_per_unit else None

