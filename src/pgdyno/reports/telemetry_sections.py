"""Telemetry sections of the run report: Markdown text and PNG plots.

Rendering only: every figure comes from a TelemetrySummary and a Verdict computed
elsewhere (pgdyno.analysis.telemetry, pgdyno.analysis.verdict).
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.analysis.telemetry import DeviceSummary, Stat, TelemetrySummary
from pgdyno.analysis.verdict import Verdict

PLOT_WRITE_IOPS = "write_iops_vs_tps"
PLOT_TOP_ACTIVITY = "top_activity"
PLOT_CPU = "cpu"
WAIT_COLOURS = {"CPU": "#2ca02c", "IO": "#1f77b4", "LWLock": "#d62728", "Lock": "#8c564b",
                "Client": "#7f7f7f", "IPC": "#e377c2", "BufferPin": "#bcbd22",
                "Timeout": "#17becf", "Activity": "#c7c7c7", "Extension": "#9467bd"}


# ===== plots =============================================================================

def telemetry_plots(summary: TelemetrySummary, plots_dir: Path,
                    tps_timeline: list[tuple[float, float]] | None) -> dict[str, Path]:
    """Write the PNG plots that have data; returns plot name -> file."""
    import matplotlib

    matplotlib.use("Agg")  # no display; must precede pyplot
    import matplotlib.pyplot as plt

    plots_dir = Path(plots_dir)
    plots_dir.mkdir(parents=True, exist_ok=True)
    origin = _origin(summary, tps_timeline)
    out: dict[str, Path] = {}
    for name, draw in ((PLOT_WRITE_IOPS, _plot_write_iops), (PLOT_TOP_ACTIVITY, _plot_waits),
                       (PLOT_CPU, _plot_cpu)):
        fig, ax = plt.subplots(figsize=(10, 4.2), dpi=100)
        try:
            if draw(summary, ax, origin, tps_timeline):
                ax.set_xlabel("seconds since start")
                ax.grid(alpha=0.3)
                fig.tight_layout()
                path = plots_dir / f"{name}.png"
                fig.savefig(path)
                out[name] = path
        finally:
            plt.close(fig)
    return out


def _origin(summary: TelemetrySummary, tps: list[tuple[float, float]] | None) -> float:
    candidates = [summary.window_start] if summary.window_start else []
    if summary.series.host_t:
        candidates.append(summary.series.host_t[0] - 1.0)
    if tps:
        candidates.append(tps[0][0])
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


def _plot_write_iops(summary: TelemetrySummary, ax, origin: float,  # noqa: ANN001
                     tps: list[tuple[float, float]] | None) -> bool:
    s = summary.series
    shown = [d for d in summary.devices if d.roles and d.device in s.disk_w_s]
    if not shown or not s.host_t:
        return False
    xs = [t - origin for t in s.host_t]
    for dev in shown:
        ax.plot(xs, s.disk_w_s[dev.device], label=f"{dev.device} ({'+'.join(dev.roles)}) w/s")
    ax.set_ylabel("write IOPS")
    _mark_checkpoints(summary, ax, origin)
    if tps:
        ax2 = ax.twinx()
        ax2.plot([t - origin for t, _ in tps], [v for _, v in tps], color="black", lw=1,
                 alpha=0.7, label="TPS")
        ax2.set_ylabel("TPS")
        ax2.set_ylim(bottom=0)
        ax2.legend(loc="upper right", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Write IOPS over time vs TPS (checkpoints shaded)")
    return True


def _plot_waits(summary: TelemetrySummary, ax, origin: float,  # noqa: ANN001
                _tps: list[tuple[float, float]] | None) -> bool:
    s = summary.series
    if not s.wait_t or not s.wait_aas:
        return False
    classes = sorted(s.wait_aas, key=lambda c: -sum(s.wait_aas[c]))
    xs = [t - origin for t in s.wait_t]
    ax.stackplot(xs, [s.wait_aas[c] for c in classes], labels=classes,
                 colors=[WAIT_COLOURS.get(c, "#aec7e8") for c in classes], alpha=0.85)
    ax.set_ylabel("average active sessions")
    if summary.cpu.effective_cores:
        ax.axhline(summary.cpu.effective_cores, color="black", ls="--", lw=1, label="CPU cores")
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    ax.set_title("Top activity: active sessions by wait class")
    return True


def _plot_cpu(summary: TelemetrySummary, ax, origin: float,  # noqa: ANN001
              _tps: list[tuple[float, float]] | None) -> bool:
    s = summary.series
    if not s.host_t:
        return False
    xs = [t - origin for t in s.host_t]
    parts = [("usr", s.cpu_usr), ("sys", s.cpu_sys), ("soft", s.cpu_soft),
             ("iowait", s.cpu_iowait), ("nice+irq+steal", s.cpu_other)]
    ax.stackplot(xs, [p[1] for p in parts], labels=[p[0] for p in parts], alpha=0.85)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of all CPUs")
    ax.legend(loc="upper left", fontsize=8, ncol=5)
    ax.set_title("CPU over time")
    return True


# ===== Markdown ==========================================================================

def _f(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100.0 * value:.1f}%"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines + [""]


def _plot(plot_names: dict[str, str], name: str, alt: str) -> list[str]:
    return [f"![{alt}]({plot_names[name]})", ""] if name in plot_names else []


def telemetry_markdown(summary: TelemetrySummary, verdict: Verdict | None,
                       plot_names: dict[str, str]) -> str:
    parts: list[list[str]] = [
        _verdict_section(verdict) if verdict is not None else [],
        _cpu_section(summary, plot_names),
        _disk_section(summary, plot_names),
        _wait_section(summary, plot_names) if summary.server_sampled else [],
        _checkpoint_section(summary) if summary.server_sampled else [],
        _memory_section(summary),
        _limits_section(summary),
        _smart_section(summary),
    ]
    if summary.notes:
        parts.append(["### Telemetry notes", ""] + [f"- {n}" for n in summary.notes] + [""])
    return "\n".join(line for part in parts for line in part).rstrip() + "\n"


def _verdict_section(v: Verdict) -> list[str]:
    lines = ["## Bottleneck verdict", "", f"**{v.label}**", ""]
    lines += [f"- {e}" for e in v.evidence]
    lines += ["", f"Next step: {v.next_step}", ""]
    rows = [[str(i + 1), c.label, f"{c.score:.2f}", "; ".join(c.evidence[:1])]
            for i, c in enumerate(v.ranked)]
    return lines + _table(["rank", "class", "score", "first evidence"], rows)


def _cpu_section(s: TelemetrySummary, plot_names: dict[str, str]) -> list[str]:
    c = s.cpu
    cap = f"{c.online_cpus} CPUs" + (f", cgroup quota {c.limit_cores:g} cores"
                                     if c.limit_cores else "")
    lines = ["## CPU breakdown", "", f"{cap}; {c.samples} samples of 1 s; averages are over "
             "the whole window, peaks and p95 over the 1 s samples.", ""]
    rows = []
    for label, stat in (("%usr", c.usr), ("%nice", c.nice), ("%sys", c.sys), ("%soft", c.soft),
                        ("%irq", c.irq), ("%iowait", c.iowait), ("%steal", c.steal),
                        ("%idle", c.idle), ("busy (100 - idle - iowait)", c.busy)):
        rows.append([label, _f(stat.avg), _f(stat.p95), _f(stat.peak)])
    rows.append(["run queue (procs_running)", _f(c.run_queue.avg), _f(c.run_queue.p95),
                 _f(c.run_queue.peak, 0)])
    return lines + _table(["component", "avg", "p95", "peak"], rows) + _plot(
        plot_names, PLOT_CPU, "CPU over time")


def _dev_row(dev: DeviceSummary, roles: str) -> list[str]:
    def a(stat: Stat, digits: int = 1) -> str:
        return f"{_f(stat.avg, digits)} ({_f(stat.peak, digits)})"

    return [dev.device, roles, a(dev.r_s, 0), a(dev.w_s, 0), a(dev.rmb_s), a(dev.wmb_s),
            a(dev.r_await_ms, 2), a(dev.w_await_ms, 2), a(dev.aqu_sz, 2), a(dev.util_pct)]


def _disk_section(s: TelemetrySummary, plot_names: dict[str, str]) -> list[str]:
    lines = ["## Disk I/O per device and role", ""]
    for info in s.roles:
        where = info.device or f"unresolved ({info.error})"
        chain = " → ".join(info.chain) if len(info.chain) > 1 else ""
        lines.append(f"- **{info.role}**: `{info.path}` on {where}"
                     + (f" ({chain})" if chain else "")
                     + (f", {info.fstype} at {info.mount_point}" if info.fstype else ""))
    lines.append("")
    header = ["device", "role", "r/s", "w/s", "rMB/s", "wMB/s", "r_await ms", "w_await ms",
              "aqu-sz", "%util"]
    rows = [_dev_row(d, "+".join(d.roles) or "-") for d in s.devices]
    lines += ["Average over the window (peak 1 s value in brackets).", ""]
    lines += _table(header, rows)
    role_devs = [d for d in s.devices if d.roles]
    if role_devs:
        lines += ["### I/O consistency (1 s samples)", ""]
        cv_rows = []
        for label, attr in (("write IOPS mean", "w_s"), ("read IOPS mean", "r_s")):
            cv_rows.append([label] + [_f(getattr(d, attr).avg, 0) for d in role_devs])
        cv_rows.append(["write IOPS std dev"] + [_f(d.write_iops_std, 0) for d in role_devs])
        cv_rows.append(["write IOPS CV"] + [_pct(d.write_iops_cv) for d in role_devs])
        cv_rows.append(["read IOPS CV"] + [_pct(d.read_iops_cv) for d in role_devs])
        header = ["metric"] + [f"{d.device} ({'+'.join(d.roles)})" for d in role_devs]
        lines += _table(header, cv_rows)
    return lines + _plot(plot_names, PLOT_WRITE_IOPS, "Write IOPS over time vs TPS")


def _wait_section(s: TelemetrySummary, plot_names: dict[str, str]) -> list[str]:
    w = s.waits
    lines = ["## Wait events", ""]
    if not w.ticks:
        return lines + ["No wait-event samples in the window.", ""]
    lines += [f"{w.ticks} samples at {w.sample_hz:g} Hz; average active sessions (AAS) "
              f"{w.aas:.2f} of {w.connections_avg:.1f} connected client sessions "
              f"({w.idle_in_transaction_avg:.2f} idle in transaction). Active sessions with "
              "no wait event are on CPU.", ""]
    lines += _table(["wait class", "AAS", "% of active time"],
                    [[r.wait_class, _f(r.aas, 2), _f(r.pct)] for r in w.by_class])
    lines += _table(["wait class", "event", "AAS", "% of active time"],
                    [[r.wait_class, r.event, _f(r.aas, 2), _f(r.pct)] for r in w.by_event[:15]])
    if w.io_workers:
        lines += [f"I/O workers (PG18 io_method = worker) busy {w.io_workers_busy_avg:.2f} "
                  "on average:", ""]
        lines += _table(["wait class", "event", "busy workers", "%"],
                        [[r.wait_class, r.event, _f(r.aas, 2), _f(r.pct)]
                         for r in w.io_workers])
    return lines + _plot(plot_names, PLOT_TOP_ACTIVITY, "Top activity")


def _checkpoint_section(s: TelemetrySummary) -> list[str]:
    c, w = s.checkpoints, s.wal
    lines = ["## Checkpoints and WAL", ""]
    rows = [
        ["checkpoints started (server log)", str(c.started)],
        ["timed / requested (of which forced by WAL volume)",
         f"{c.timed} / {c.requested} ({c.wal_triggered})"],
        ["timed / requested (statistics views)",
         f"{_f(c.stats_timed, 0)} / {_f(c.stats_requested, 0)}"],
        ["'checkpoints are occurring too frequently' warnings", str(c.too_frequent_warnings)],
        ["shortest interval between checkpoints", f"{_f(c.min_interval_s)} s"],
        ["checkpoint write / sync time (log)", f"{c.write_s:.2f} s / {c.sync_s:.2f} s"],
        ["checkpoint write / sync time (views)",
         f"{_f(c.write_time_ms, 0)} ms / {_f(c.sync_time_ms, 0)} ms"],
        ["buffers written by checkpointer / bgwriter / backends",
         f"{_f(c.buffers_checkpoint, 0)} / {_f(c.buffers_bgwriter, 0)} / "
         f"{_f(c.buffers_backend, 0)}"],
        ["bgwriter stops (maxwritten_clean)", _f(c.maxwritten_clean, 0)],
        ["WAL bytes per second", f"{_f((w.bytes_per_s or 0) / 1e6, 2)} MB/s"
         if w.bytes_per_s is not None else "n/a"],
        ["WAL records / full-page images", f"{_f(w.records, 0)} / {_f(w.fpi, 0)}"],
        ["full-page-image ratio (FPI ÷ records)", _pct(w.fpi_ratio)],
        ["WAL writes / syncs", f"{_f(w.writes, 0)} / {_f(w.syncs, 0)}"],
        ["WAL write / sync time", f"{_f(w.write_time_ms, 0)} ms / {_f(w.sync_time_ms, 0)} ms"
         + (" (track_wal_io_timing off)" if s.settings.get("track_wal_io_timing") == "off"
            else "")],
        ["WAL buffers full", _f(w.buffers_full, 0)],
    ]
    lines += _table(["metric", "value"], rows)
    d = s.database
    lines += _table(["database", "value"], [
        ["commits / s", _f(d.commits_per_s)], ["rollbacks / s", _f(d.rollbacks_per_s)],
        ["shared-buffer hit ratio", f"{_f(d.cache_hit_pct, 2)}%"],
        ["blocks read / s", _f(d.blks_read_per_s, 0)],
        ["temp bytes", _f(d.temp_bytes, 0)], ["deadlocks", _f(d.deadlocks, 0)],
        ["active time ÷ wall (server-side AAS)", _f(d.active_time_aas, 2)],
    ])
    if s.io:
        lines += ["pg_stat_io over the window (summed over contexts):", ""]
        lines += _table(
            ["backend type", "object", "reads", "read MB", "writes", "write MB", "extends",
             "fsyncs", "hits"],
            [[r.backend_type, r.object, _f(r.reads, 0), _f(r.read_bytes / 1e6),
              _f(r.writes, 0), _f(r.write_bytes / 1e6), _f(r.extends, 0), _f(r.fsyncs, 0),
              _f(r.hits, 0)] for r in s.io])
    return lines


def _memory_section(s: TelemetrySummary) -> list[str]:
    m = s.memory
    if not m.samples:
        return []
    mb = 1024.0
    rows = [[label, _f((st.avg or 0) / mb), _f((st.peak or 0) / mb)]
            for label, st in (("page cache (Cached)", m.cached_kb), ("Dirty", m.dirty_kb),
                              ("Writeback", m.writeback_kb), ("shared memory", m.shmem_kb))]
    rows.append(["huge pages in use (pages)", _f(m.hugepages_used.avg, 0),
                 _f(m.hugepages_used.peak, 0)])
    return ["## Memory", ""] + _table(["item (MiB)", "avg", "peak"], rows)


def _limits_section(s: TelemetrySummary) -> list[str]:
    if not s.hardware_limits:
        return []
    rows = [[h.resource, f"{_f(h.capacity)} {h.unit}", _f(h.used_avg, 2), _f(h.used_peak, 2),
             f"{_f(h.pct_avg)}%", h.note] for h in s.hardware_limits]
    return ["## Hardware limits", ""] + _table(
        ["resource", "capacity", "used (avg)", "used (peak)", "% of capacity", "note"], rows)


def _smart_section(s: TelemetrySummary) -> list[str]:
    if not s.smart:
        return []
    rows = []
    for d in s.smart:
        if not d.available:
            rows.append([d.device, f"not available: {d.reason}", "", "", "", ""])
            continue
        rows.append([d.device, f"{_f(d.temperature_before_c, 0)} → "
                     f"{_f(d.temperature_after_c, 0)} °C",
                     _f((d.read_bytes or 0) / 1e9, 2), _f((d.written_bytes or 0) / 1e9, 2),
                     f"{_f(d.percent_used_before, 0)} → {_f(d.percent_used_after, 0)}%",
                     f"{d.media_errors_after if d.media_errors_after is not None else 'n/a'} "
                     f"/ {d.throttle_events if d.throttle_events is not None else 'n/a'}"])
    return ["## Drive health (SMART, before → after)", ""] + _table(
        ["device", "temperature", "host reads GB", "host writes GB", "percentage used",
         "media errors / throttle events"], rows)
