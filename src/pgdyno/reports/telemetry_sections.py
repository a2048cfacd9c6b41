"""Telemetry sections of the run report: typed sections (``reports.document``) and PNG
plots.

Rendering only: every figure comes from a TelemetrySummary and a Verdict computed
elsewhere (pgdyno.analysis.telemetry, pgdyno.analysis.verdict).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from pgdyno.analysis.telemetry import (
    MIN_IOPS_FOR_CV,
    Contamination,
    DeviceSummary,
    RoleInfo,
    Stat,
    TelemetrySummary,
)
from pgdyno.analysis.telemetry.wait_meanings import wait_meaning
from pgdyno.analysis.verdict import Verdict
from pgdyno.reports.archive_sections import archive_sections
from pgdyno.reports.document import (
    Block,
    BulletList,
    Code,
    Image,
    Paragraph,
    Quantity,
    Section,
    Strong,
    Table,
    Text,
)
from pgdyno.reports.evidence import evidence_words
from pgdyno.units import (
    KIB,
    MIB,
    MISSING,
    UNITS_NOTE,
    ByteScale,
    common_scale,
    count,
    fixed,
    format_bytes,
    format_rate,
    format_ratio_pct,
    percent,
)

PLOT_WRITE_IOPS = "write_iops_vs_tps"
PLOT_TOP_ACTIVITY = "top_activity"
PLOT_CPU = "cpu"
COMPLETE_SHARE = 0.75
"""An interval shorter than this share of the sampling interval is partial (the sampler's
last tick at stop): dropped from the plots, where a rate over 40 ms draws a cliff."""
COUNT_UNITS = frozenset({"backends", "connections", "sessions", "pages", "processes"})
"""Hardware-limit units that count things: shown as integers."""
WAIT_COLOURS = {"CPU": "#2ca02c", "IO": "#1f77b4", "LWLock": "#d62728", "Lock": "#8c564b",
                "Client": "#7f7f7f", "IPC": "#e377c2", "BufferPin": "#bcbd22",
                "Timeout": "#17becf", "Activity": "#c7c7c7", "Extension": "#9467bd"}


# ===== plots =============================================================================

def telemetry_plots(summary: TelemetrySummary, plots_dir: Path,
                    tps_timeline: list[tuple[float, float]] | None, *,
                    start: float | None = None, warmup_s: float = 0.0) -> dict[str, Path]:
    """Write the PNG plots that have data; returns plot name -> file.

    ``tps_timeline``: (epoch second at the middle of each complete 1 s interval, TPS).
    ``start``: the iteration's start (epoch): every series of every plot is drawn in
    seconds since then, at the middle of its interval, warm-up (``warmup_s``) shaded.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display; must precede pyplot
    import matplotlib.pyplot as plt

    from pgdyno.reports.plots import save_png

    plots_dir = Path(plots_dir)
    plots_dir.mkdir(parents=True, exist_ok=True)
    axis = TimeAxis(_origin(summary, tps_timeline) if start is None else start, warmup_s,
                    summary.window_end)
    out: dict[str, Path] = {}
    for name, draw in ((PLOT_WRITE_IOPS, _plot_write_iops), (PLOT_TOP_ACTIVITY, _plot_waits),
                       (PLOT_CPU, _plot_cpu)):
        fig, ax = plt.subplots(figsize=(10, 4.2), dpi=100)
        try:
            if axis.warmup_s:  # before drawing, so that each plot's legend names it
                ax.axvspan(0, axis.warmup_s, color="grey", alpha=0.15, zorder=0,
                           label="warm-up")
                ax.axvline(axis.warmup_s, color="grey", ls=":", lw=1, zorder=3)
            if draw(summary, ax, axis, tps_timeline):
                ax.set_xlabel(f"seconds since the iteration's start"
                              f"{' (warm-up shaded)' if axis.warmup_s else ''}")
                ax.set_xlim(0, axis.end - axis.origin if axis.end else None)
                ax.grid(alpha=0.3)
                fig.tight_layout()
                out[name] = save_png(fig, plots_dir / f"{name}.png")
        finally:
            plt.close(fig)
    if summary.archive is not None:  # --archive: the archiver and its memory chart
        from pgdyno.reports.archive_sections import archive_plots

        out.update(archive_plots(summary.archive, plots_dir, axis.origin))
    return out


class TimeAxis:
    """The one time axis of an iteration's plots: seconds since its start."""

    def __init__(self, origin: float, warmup_s: float = 0.0, end: float | None = None) -> None:
        self.origin = origin
        self.warmup_s = warmup_s
        self.end = end
        """Epoch end of the data (the measured window's end), when known."""

    def host_points(self, times: list[float]) -> list[tuple[int, float]]:
        """(index, x) of the complete host intervals; ``times`` are the ends of intervals
        (the sampler's ticks), so the first interval's length is taken as the usual one."""
        if not times:
            return []
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        nominal = statistics.median(gaps) if gaps else 1.0
        out = []
        for i, t in enumerate(times):
            length = gaps[i - 1] if i else nominal
            if length >= COMPLETE_SHARE * nominal:
                out.append((i, t - length / 2 - self.origin))
        return out

    def bucket_points(self, centres: list[float], width: float = 1.0) -> list[tuple[int, float]]:
        """(index, x) of the buckets (centred on ``centres``) mostly inside the data's span."""
        end = self.end if self.end is not None else float("inf")
        out = []
        for i, c in enumerate(centres):
            covered = min(c + width / 2, end) - max(c - width / 2, self.origin)
            if covered >= COMPLETE_SHARE * width:
                out.append((i, c - self.origin))
        return out


def _origin(summary: TelemetrySummary, tps: list[tuple[float, float]] | None) -> float:
    """Without the iteration's start: the earliest of the window and the series."""
    candidates = [summary.window_start] if summary.window_start else []
    if summary.series.host_t:
        candidates.append(summary.series.host_t[0] - 1.0)
    if tps:
        candidates.append(tps[0][0] - 0.5)
    return min(candidates) if candidates else 0.0


def _mark_checkpoints(summary: TelemetrySummary, ax, origin: float) -> None:  # noqa: ANN001
    first = True
    for ev in summary.checkpoints.events:
        start = ev.t_start if ev.t_start is not None else ev.t_end
        end = ev.t_end if ev.t_end is not None else start
        if start is None or end is None:
            continue
        ax.axvspan(start - origin, max(end, start + 0.05) - origin, color="orange", alpha=0.25,
                   label="checkpoint" if first else None)
        first = False


def _plot_write_iops(summary: TelemetrySummary, ax, axis: TimeAxis,  # noqa: ANN001
                     tps: list[tuple[float, float]] | None) -> bool:
    s = summary.series
    shown = [d for d in summary.devices if d.roles and d.device in s.disk_w_s]
    points = axis.host_points(s.host_t)
    if not shown or not points:
        return False
    for dev in shown:
        ax.plot([x for _, x in points], [s.disk_w_s[dev.device][i] for i, _ in points],
                label=f"{dev.device} ({'+'.join(dev.roles)}) write IOPS")
    ax.set_ylabel("write IOPS (writes/s)")
    _mark_checkpoints(summary, ax, axis.origin)
    if tps:
        ax2 = ax.twinx()
        ax2.plot([t - axis.origin for t, _ in tps], [v for _, v in tps], color="black", lw=1,
                 alpha=0.7, label="TPS")
        ax2.set_ylabel("TPS (transactions/s)")
        ax2.set_ylim(bottom=0)
        ax2.legend(loc="upper right", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Write IOPS over time vs TPS (checkpoints shaded)")
    return True


def _plot_waits(summary: TelemetrySummary, ax, axis: TimeAxis,  # noqa: ANN001
                _tps: list[tuple[float, float]] | None) -> bool:
    s = summary.series
    points = axis.bucket_points(s.wait_t)
    if not points or not s.wait_aas:
        return False
    classes = sorted(s.wait_aas, key=lambda c: -sum(s.wait_aas[c]))
    ax.stackplot([x for _, x in points], [[s.wait_aas[c][i] for i, _ in points]
                                          for c in classes], labels=classes,
                 colors=[WAIT_COLOURS.get(c, "#aec7e8") for c in classes], alpha=0.85)
    ax.set_ylabel("average active sessions")
    if summary.cpu.effective_cores:
        ax.axhline(summary.cpu.effective_cores, color="black", ls="--", lw=1, label="CPU cores")
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    ax.set_title("Top activity: active sessions by wait class")
    return True


def _plot_cpu(summary: TelemetrySummary, ax, axis: TimeAxis,  # noqa: ANN001
              _tps: list[tuple[float, float]] | None) -> bool:
    s = summary.series
    points = axis.host_points(s.host_t)
    if not points:
        return False
    parts = [("usr", s.cpu_usr), ("sys", s.cpu_sys), ("soft", s.cpu_soft),
             ("iowait", s.cpu_iowait), ("nice+irq+steal", s.cpu_other)]
    ax.stackplot([x for _, x in points], [[p[1][i] for i, _ in points] for p in parts],
                 labels=[p[0] for p in parts], alpha=0.85)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of all CPUs")
    ax.legend(loc="upper left", fontsize=8, ncol=5)
    ax.set_title("CPU over time")
    return True


# ===== sections ==========================================================================

def _u(value: float | None, unit: str, digits: int = 1) -> str:
    """A value with its unit, or "–" alone ("n/a s" reads like a value)."""
    return MISSING if value is None else f"{fixed(value, digits)} {unit}"


def _measured(text: str) -> str:
    """A figure with its binary unit ("1.20 GiB/s"): a number in its column, whatever the
    prefix."""
    return text if text == MISSING else Quantity(text)


def _plot(plot_names: dict[str, str], name: str, alt: str) -> list[Image]:
    return [Image(alt, plot_names[name])] if name in plot_names else []


def telemetry_sections(summary: TelemetrySummary, verdict: Verdict | None,
                       plot_names: dict[str, str], level: int = 2) -> list[Section]:
    """The telemetry of one iteration as sections at ``level`` (their own parts one level
    below): the verdict, CPU, disks, waits, checkpoints and WAL, archiving, memory, limits,
    drive health; ``plot_names``: plot name -> image path relative to the page. Each part
    is built at level 2 (its own parts at 3) and moved to ``level`` here."""
    parts = [
        _verdict_section(verdict) if verdict is not None else [],
        _cpu_section(summary, plot_names),
        _disk_section(summary, plot_names),
        _wait_section(summary, plot_names) if summary.server_sampled else [],
        _checkpoint_section(summary) if summary.server_sampled else [],
        archive_sections(summary.archive, plot_names) if summary.archive is not None else [],
        _memory_section(summary),
        _limits_section(summary),
        _smart_section(summary),
    ]
    sections = [section for part in parts for section in part]
    # The units policy closes the figures it applies to, as the last section's last words.
    sections[-1].body.append(Paragraph(UNITS_NOTE))
    if summary.notes:
        sections.append(Section("Telemetry notes", level=3,
                                body=[BulletList(list(summary.notes))]))
    for section in sections:
        section.level += level - 2
    return sections


def _verdict_section(v: Verdict) -> list[Section]:
    rows = [[str(i + 1), c.label, f"{c.score:.2f}",
             evidence_words(c.evidence[0]) if c.evidence else ""]
            for i, c in enumerate(v.ranked)]
    return [Section("Bottleneck verdict", body=[
        Paragraph(Strong(v.label)), BulletList([evidence_words(e) for e in v.evidence]),
        Paragraph(f"Next step: {v.next_step}"),
        Table(["rank", "class", "score", "first evidence"], rows)])]


def _cpu_section(s: TelemetrySummary, plot_names: dict[str, str]) -> list[Section]:
    c = s.cpu
    cap = f"{c.online_cpus} CPUs" + (f", cgroup quota {c.limit_cores:g} cores"
                                     if c.limit_cores else "")
    rows = []
    for label, stat in (("%usr", c.usr), ("%nice", c.nice), ("%sys", c.sys), ("%soft", c.soft),
                        ("%irq", c.irq), ("%iowait", c.iowait), ("%steal", c.steal),
                        ("%idle", c.idle), ("busy (100 - idle - iowait)", c.busy)):
        rows.append([label, fixed(stat.avg), fixed(stat.p95), fixed(stat.peak)])
    rows.append(["run queue (procs_running)", fixed(c.run_queue.avg), fixed(c.run_queue.p95),
                 count(c.run_queue.peak)])
    return [Section("CPU breakdown", body=[
        Paragraph(f"{cap}; {c.samples:,} samples of 1 s; averages are over the whole window, "
                  "peaks and p95 over the 1 s samples."),
        Table(["component", "avg", "p95", "peak"], rows),
        *_plot(plot_names, PLOT_CPU, "CPU over time"), *_whose_cpu(s), *_client_cpu(s)])]


def _client_cpu(s: TelemetrySummary) -> list[Block]:
    """--ssh: the table above is the database host's; the client's CPU is its own series."""
    c = s.client_cpu
    if c is None:
        return []
    rows = [[label, fixed(stat.avg), fixed(stat.p95), fixed(stat.peak)]
            for label, stat in (("%usr", c.usr), ("%sys", c.sys), ("%soft", c.soft),
                                ("busy (100 - idle - iowait)", c.busy))]
    return [Paragraph(f"The client host (where pgbench ran, {c.online_cpus} CPUs; the table "
                      "above is the database host's, read over SSH):"),
            Table(["client CPU", "avg", "p95", "peak"], rows)]


def _whose_cpu(s: TelemetrySummary) -> list[Block]:
    """Who used the busy CPU: the server, the load driver, pgdyno's own samplers (the
    harness's cost), other processes (contamination); per unit of work too when the
    workload names one (TPROC-C: per New-Order)."""
    x = s.contamination
    if not x.cpu_attributed:
        return []
    if x.driver_cores is None:  # recorded before the split
        rows = [["benchmark (server and client)", fixed(x.benchmark_cores - x.sampler_cores, 2)]]
    else:
        rows = [["server (postmaster and backends)", fixed(x.server_cores, 2)
                 if x.server_cores is not None else "not on this host"],
                [f"load driver ({', '.join(x.driver_programs) or 'pgbench'})",
                 fixed(x.driver_cores, 3)]]
    rows.append(["pgdyno (samplers and log reader)", fixed(x.sampler_cores, 3)])
    if x.sampler_server_cores is not None:
        rows.append(["pgdyno's sessions on the server (its sampling queries)",
                     fixed(x.sampler_server_cores, 3)])
    rows += [["other processes", fixed(x.other_cores, 2)],
             ["busy in all", fixed(x.busy_cores, 2)]]
    header = ["process", "cores"]
    words = (f"Whose CPU, in cores: pgdyno's samplers and log reader used "
             f"{1000 * x.sampler_cores:,.0f} ms of CPU per second{_harness(x)}.")
    u = x.per_unit
    if u is not None:
        # The driver's cost per unit of work as a share of the server's, in its own column
        # so that it reads beside the two figures it divides.
        header += [f"CPU ms per {u.unit}", "% of the server's"]
        for row in rows:
            row += [MISSING, MISSING]
        rows[0][2], rows[1][2] = _ms(u.server_cpu_s), _ms(u.driver_cpu_s)
        if u.driver_share_pct is not None:
            rows[0][3], rows[1][3] = "100.0", f"{u.driver_share_pct:.1f}"
        share = ("" if u.driver_share_pct is None else
                 f" the driver spent {u.driver_share_pct:.1f}% of the server's CPU per {u.unit};")
        words += (f" Per {u.unit}:{share} each side's cores over the "
                  f"{u.units_per_s:,.1f} {u.unit}s a second of the window.")
    return [Paragraph(words), Table(header, rows)]


def _harness(x: Contamination) -> str:
    """", its sessions on the server 2 ms: 0.35% of the busy CPU in all" when known."""
    if x.sampler_server_cores is None or x.harness_share_of_busy_pct is None:
        return ""
    return (f", and its sessions on the server {1000 * x.sampler_server_cores:,.0f} ms: "
            f"{x.harness_share_of_busy_pct:.2f}% of the busy CPU in all")


def _ms(seconds: float | None) -> str:
    return "not on this host" if seconds is None else f"{1000 * seconds:,.3f}"


def _dev_row(dev: DeviceSummary, roles: str, read: ByteScale, write: ByteScale) -> list[str]:
    def a(stat: Stat, digits: int = 1) -> str:
        if stat.avg is None:
            return MISSING  # one dash, not "– (–)"
        return f"{fixed(stat.avg, digits)} ({fixed(stat.peak, digits)})"

    def rate(stat: Stat, scale: ByteScale) -> str:
        if stat.avg is None:
            return MISSING
        return f"{scale.number(stat.avg * MIB)} ({scale.number(_mib(stat.peak))})"

    return [dev.device, roles, a(dev.r_s, 0), a(dev.w_s, 0), rate(dev.rmb_s, read),
            rate(dev.wmb_s, write), a(dev.r_await_ms, 2), a(dev.w_await_ms, 2),
            a(dev.aqu_sz, 2), a(dev.util_pct)]


def _mib(value: float | None) -> float | None:
    """A device rate the summary keeps in MiB/s (``rmb_s``, ``wmb_s``), in bytes/s."""
    return None if value is None else value * MIB


def _rate_scale(devices: list[DeviceSummary], attr: str) -> ByteScale:
    """One prefix for a column of device rates, averages and peaks alike."""
    stats = [getattr(d, attr) for d in devices]
    return common_scale([_mib(v) for st in stats for v in (st.avg, st.peak)])


def _role_line(info: RoleInfo) -> Text:
    """"**data**: `/d` on vda (dm-0 → vda), xfs at /d": where a role's directory lives."""
    where = info.device or f"unresolved ({info.error})"
    chain = " → ".join(info.chain) if len(info.chain) > 1 else ""
    return Text.of(Strong(info.role), ": ", Code(info.path), f" on {where}",
                   f" ({chain})" if chain else "",
                   f", {info.fstype} at {info.mount_point}" if info.fstype else "")


def _disk_section(s: TelemetrySummary, plot_names: dict[str, str]) -> list[Section]:
    read, write = _rate_scale(s.devices, "rmb_s"), _rate_scale(s.devices, "wmb_s")
    header = ["device", "role", "r/s", "w/s", f"read {read.rate_unit}",
              f"write {write.rate_unit}", "r_await ms", "w_await ms", "aqu-sz", "%util"]
    rows = [_dev_row(d, "+".join(d.roles) or "-", read, write) for d in s.devices]
    disk = Section("Disk I/O per device and role", body=[
        BulletList([_role_line(info) for info in s.roles]),
        Paragraph("Average over the window (peak 1 s value in brackets)."),
        Table(header, rows)])
    plot = _plot(plot_names, PLOT_WRITE_IOPS, "Write IOPS over time vs TPS")
    role_devs = [d for d in s.devices if d.roles]
    if not role_devs:
        disk.body += plot
        return [disk]
    # One row per device: a CV column that says "too little activity" is then text on its
    # own, and the means beside it stay numbers.
    cv_rows = [[f"{d.device} ({'+'.join(d.roles)})", fixed(d.w_s.avg, 0), fixed(d.r_s.avg, 0),
                fixed(d.write_iops_std, 0), _cv(d.write_iops_cv, d.w_s),
                _cv(d.read_iops_cv, d.r_s)] for d in role_devs]
    return [disk, Section("I/O consistency (1 s samples)", level=3, body=[
        Table(["device", "write IOPS mean", "read IOPS mean", "write IOPS std dev",
               "write IOPS CV", "read IOPS CV"], cv_rows), *plot])]


def _cv(cv: float | None, iops: Stat) -> str:
    """The coefficient of variation, or why there is none: analysis leaves it out below
    MIN_IOPS_FOR_CV, where 3 ± 9 IOPS would read "300%" like a checkpoint storm."""
    if cv is not None:
        return format_ratio_pct(cv)
    mean = iops.avg
    if mean is not None and mean < MIN_IOPS_FOR_CV:
        # One decimal near the threshold, so "mean 10 IOPS < 10" cannot be printed.
        shown = f"{mean:.1f}" if mean >= MIN_IOPS_FOR_CV - 0.5 else f"{mean:.0f}"
        return f"too little activity (mean {shown} IOPS < {MIN_IOPS_FOR_CV:g})"
    return MISSING


def _wait_section(s: TelemetrySummary, plot_names: dict[str, str]) -> list[Section]:
    w = s.waits
    if not w.ticks:
        return [Section("Wait events", body=[Paragraph("No wait-event samples in the window.")])]
    body: list[Block] = [
        Paragraph(f"{w.ticks:,} samples at {w.sample_hz:g} Hz; average active sessions (AAS) "
                  f"{w.aas:.2f} of {w.connections_avg:.1f} connected client sessions "
                  f"({w.idle_in_transaction_avg:.2f} idle in transaction). Active sessions "
                  "with no wait event are on CPU."),
        Table(["wait class", "AAS", "% of active time", "meaning"],
              [[r.wait_class, fixed(r.aas, 2), fixed(r.pct), wait_meaning(r.wait_class)]
               for r in w.by_class]),
        Table(["wait class", "event", "AAS", "% of active time", "meaning"],
              [[r.wait_class, r.event, fixed(r.aas, 2), fixed(r.pct),
                wait_meaning(r.wait_class, r.event)] for r in w.by_event[:15]])]
    if w.io_workers:
        body += [Paragraph(f"I/O workers (PG18 io_method = worker) busy "
                           f"{w.io_workers_busy_avg:.2f} on average:"),
                 Table(["wait class", "event", "busy workers", "%", "meaning"],
                       [[r.wait_class, r.event, fixed(r.aas, 2), fixed(r.pct),
                         wait_meaning(r.wait_class, r.event)] for r in w.io_workers])]
    return [Section("Wait events",
                    body=body + _plot(plot_names, PLOT_TOP_ACTIVITY, "Top activity"))]


def _checkpoint_section(s: TelemetrySummary) -> list[Section]:
    c, w = s.checkpoints, s.wal
    rows = [
        ["checkpoints started (server log)", count(c.started)],
        ["timed / requested (of which forced by WAL volume)",
         f"{count(c.timed)} / {count(c.requested)} ({count(c.wal_triggered)})"],
        ["timed / requested (statistics views)",
         f"{count(c.stats_timed)} / {count(c.stats_requested)}"],
        ["'checkpoints are occurring too frequently' warnings", count(c.too_frequent_warnings)],
        ["shortest interval between checkpoints", _u(c.min_interval_s, "s")],
        ["checkpoint write / sync time (log)", f"{_u(c.write_s, 's', 2)} / "
                                               f"{_u(c.sync_s, 's', 2)}"],
        ["checkpoint write / sync time (views)",
         f"{_u(c.write_time_ms, 'ms', 0)} / {_u(c.sync_time_ms, 'ms', 0)}"],
        ["buffers written by checkpointer / bgwriter / backends",
         f"{count(c.buffers_checkpoint)} / {count(c.buffers_bgwriter)} / "
         f"{count(c.buffers_backend)}"],
        ["bgwriter stops (maxwritten_clean)", count(c.maxwritten_clean)],
        ["WAL written per second", _measured(format_rate(w.bytes_per_s))],
        ["WAL records / full-page images", f"{count(w.records)} / {count(w.fpi)}"],
        ["full-page-image ratio (FPI ÷ records)", format_ratio_pct(w.fpi_ratio)],
        ["WAL writes / syncs", f"{count(w.writes)} / {count(w.syncs)}"],
        # The caveat goes with the label: a value cell holds values only.
        ["WAL write / sync time" + (" (track_wal_io_timing off: not timed)"
                                    if s.settings.get("track_wal_io_timing") == "off" else ""),
         f"{_u(w.write_time_ms, 'ms', 0)} / {_u(w.sync_time_ms, 'ms', 0)}"],
        ["WAL buffers full", count(w.buffers_full)],
    ]
    d = s.database
    body: list[Block] = [Table(["metric", "value"], rows), Table(["database", "value"], [
        ["commits / s", fixed(d.commits_per_s)], ["rollbacks / s", fixed(d.rollbacks_per_s)],
        ["shared-buffer hit ratio", percent(d.cache_hit_pct, 2)],
        ["blocks read / s", fixed(d.blks_read_per_s, 0)],
        ["temp files written", _measured(format_bytes(d.temp_bytes))],
        ["deadlocks", count(d.deadlocks)],
        ["active time ÷ wall (server-side AAS)", fixed(d.active_time_aas, 2)],
    ])]
    if s.io:
        read = common_scale(r.read_bytes for r in s.io)
        write = common_scale(r.write_bytes for r in s.io)
        body += [Paragraph("pg_stat_io over the window (summed over contexts):"), Table(
            ["backend type", "object", "reads", f"read {read.unit}", "writes",
             f"written {write.unit}", "extends", "fsyncs", "hits"],
            [[r.backend_type, r.object, count(r.reads), read.number(r.read_bytes),
              count(r.writes), write.number(r.write_bytes), count(r.extends), count(r.fsyncs),
              count(r.hits)] for r in s.io])]
    return [Section("Checkpoints and WAL", body=body)]


def _memory_section(s: TelemetrySummary) -> list[Section]:
    m = s.memory
    if not m.samples:
        return []

    def as_bytes(kb: float | None) -> float | None:
        return None if kb is None else kb * KIB  # /proc/meminfo's "kB" are KiB

    # Each row its own unit, one prefix for its avg and peak: huge pages are counted in pages.
    rows = []
    for label, st in (("page cache (Cached)", m.cached_kb), ("Dirty", m.dirty_kb),
                      ("Writeback", m.writeback_kb), ("shared memory", m.shmem_kb)):
        avg, peak = as_bytes(st.avg), as_bytes(st.peak)
        scale = common_scale([avg, peak])
        rows.append([label, scale.unit, scale.number(avg), scale.number(peak)])
    rows.append(["huge pages in use", "pages", count(m.hugepages_used.avg),
                 count(m.hugepages_used.peak)])
    return [Section("Memory", body=[Table(["item", "unit", "avg", "peak"], rows)])]


def _limits_section(s: TelemetrySummary) -> list[Section]:
    if not s.hardware_limits:
        return []
    rows = [[h.resource, h.unit, _limit(h.capacity, h.unit, capacity=True),
             _limit(h.used_avg, h.unit), _limit(h.used_peak, h.unit), percent(h.pct_avg),
             h.note] for h in s.hardware_limits]
    return [Section("Hardware limits", body=[Table(
        ["resource", "unit", "capacity", "used (avg)", "used (peak)", "% of capacity", "note"],
        rows)])]


def _limit(value: float | None, unit: str, capacity: bool = False) -> str:
    """Counts (backends) as integers unless an average falls between them; capacities
    without a useless ".0" (2 cores, 100 %util); use with two decimals."""
    if value is None:
        return MISSING
    whole = abs(value - round(value)) < 1e-9
    if unit in COUNT_UNITS or capacity:
        return count(value) if whole else fixed(value, 1)
    return fixed(value, 2)


def _smart_section(s: TelemetrySummary) -> list[Section]:
    if not s.smart:
        return []
    reads = common_scale(d.read_bytes for d in s.smart if d.available)
    writes = common_scale(d.written_bytes for d in s.smart if d.available)
    rows = []
    for d in s.smart:
        if not d.available:
            rows.append([d.device, f"not available: {d.reason}", "", "", "", ""])
            continue
        rows.append([d.device, f"{fixed(d.temperature_before_c, 0)} → "
                     f"{fixed(d.temperature_after_c, 0)} °C",
                     reads.number(d.read_bytes or 0), writes.number(d.written_bytes or 0),
                     f"{fixed(d.percent_used_before, 0)} → {fixed(d.percent_used_after, 0)}"
                     + ("%" if d.percent_used_after is not None else ""),
                     f"{count(d.media_errors_after)} / {count(d.throttle_events)}"])
    section = Section("Drive health (SMART, before → after)", body=[Table(
        ["device", "temperature", f"host reads {reads.unit}", f"host writes {writes.unit}",
         "percentage used", "media errors / throttle events"], rows)])
    endurance = [f"{d.device}: {d.endurance}" for d in s.smart if d.endurance]
    if endurance:
        section.body += [Paragraph("Endurance:"), BulletList(endurance)]
    return [section]
