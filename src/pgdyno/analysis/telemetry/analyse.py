"""The entry point: one run's telemetry summarised over a window, from the raw files only."""

from __future__ import annotations

import math
import time
from pathlib import Path

from pgdyno.analysis import procfs
from pgdyno.analysis.archive import analyse_archive
from pgdyno.analysis.telemetry.host import (
    cpu_summary,
    host_series,
    host_summaries,
    host_ticks,
    smart_changes,
)
from pgdyno.analysis.telemetry.limits import hardware_limits
from pgdyno.analysis.telemetry.meta import CpuMeta, TelemetryMeta, read_meta
from pgdyno.analysis.telemetry.model import Mark, RoleInfo, TelemetryGap, TelemetrySummary
from pgdyno.analysis.telemetry.raw import csv_rows
from pgdyno.analysis.telemetry.server import checkpoint_log, pg_stats, wait_summary
from pgdyno.results.capacity import frozen_capacity
from pgdyno.results.rawfiles import read_jsonl


def analyse_telemetry(raw_dir: Path, window: tuple[float, float] | None,
                      series_from: float | None = None) -> TelemetrySummary:
    """Summarise ``raw_dir/telemetry`` over ``window`` (epoch seconds; None = everything).

    The figures cover the window; the time series (``summary.series``) start at
    ``series_from`` when given (the iteration's start, warm-up included), so that plots put
    every series on the same time axis as the iteration's TPS."""
    tdir = Path(raw_dir) / "telemetry"
    summary = TelemetrySummary()
    meta = read_meta(tdir)
    if meta is None:
        summary.notes.append(f"no telemetry in {tdir}")
        return summary
    marks = [Mark(float(r["t"]), r["label"]) for r in csv_rows(tdir / "marks.csv", "t", "label")]
    start = window[0] if window else meta.started_at
    end = window[1] if window else meta.stopped_at or math.inf
    summary.window_start, summary.window_end = (start, end) if window else (None, None)
    summary.marks = marks
    _gaps_and_client(summary, tdir, meta, start, end)
    summary.errors = dict(meta.errors)
    if summary.errors:
        summary.notes.append("sampler errors: " + ", ".join(
            f"{k} ×{v}" for k, v in sorted(summary.errors.items())) + " (errors.jsonl)")
    summary.server_sampled = meta.server is not None
    if meta.server is not None:
        summary.server_version_num = meta.server.version_num
        summary.settings = {k: _setting_text(v) for k, v in meta.server.settings.items()}
    summary.roles = _roles(meta)
    interval_s = meta.config.interval_s

    ticks = host_ticks(tdir, start, end, interval_s)
    if len(ticks) >= 2:
        summary.duration_s = ticks[-1].t - ticks[0].t
        host_summaries(summary, ticks, meta.cpu)
        series_start = min(series_from, start) if series_from is not None else start
        host_series(summary, host_ticks(tdir, series_start, end, interval_s))
    else:
        summary.notes.append("fewer than two host samples in the window")
    if summary.server_sampled:
        hz = meta.config.wait_sample_hz
        summary.waits, wait_t, wait_aas = wait_summary(tdir, start, end, hz)
        summary.series.wait_t, summary.series.wait_aas = wait_t, wait_aas
        if series_from is not None and series_from < start:
            _, wait_t, wait_aas = wait_summary(tdir, series_from, end, hz)
            summary.series.wait_t, summary.series.wait_aas = wait_t, wait_aas
        pg_stats(summary, tdir, start, end, interval_s)
        checkpoint_log(summary, tdir, start, end)
        summary.archive = analyse_archive(tdir, start, end, series_from)
    summary.smart = smart_changes(tdir)
    summary.hardware_limits = hardware_limits(summary, frozen_capacity(tdir))
    if not summary.duration_s and window:
        summary.duration_s = max(0.0, end - start)
    return summary


def _gaps_and_client(summary: TelemetrySummary, tdir: Path, meta: TelemetryMeta, start: float,
                     end: float) -> None:
    """--ssh runs: the telemetry gaps (a lost connection, marked by the sampler) that touch
    the window, as notes too; and the client host's CPU from ``client/host_raw.jsonl``."""
    errors = list(read_jsonl(tdir / "errors.jsonl"))
    open_gaps: dict[str, float] = {}
    for mark in summary.marks:
        kind, _, sampler = mark.label.partition(" ")
        if kind == "telemetry_gap_start":
            open_gaps[sampler] = mark.t
        elif kind == "telemetry_gap_end" and sampler in open_gaps:
            summary.gaps.append(TelemetryGap(sampler, open_gaps.pop(sampler), mark.t))
    summary.gaps += [TelemetryGap(s, t, None) for s, t in open_gaps.items()]
    summary.gaps = [g for g in summary.gaps if g.start <= end and (g.end or end) >= start]
    for gap in summary.gaps:
        first = next((e for e in errors if e.get("sampler") == gap.sampler
                      and float(e.get("t", 0)) >= gap.start - 0.5), None)
        gap.reason = str(first.get("error", "")) if first else ""
        span = (f"{gap.seconds:.1f} s" if gap.seconds is not None
                else "until the end of the iteration")
        summary.notes.append(f"telemetry gap: {gap.sampler} samples missing for {span} from "
                             f"{time.strftime('%H:%M:%S', time.gmtime(gap.start))} UTC"
                             + (f" ({gap.reason})" if gap.reason else ""))
    client_dir = tdir / "client"
    if (client_dir / "host_raw.jsonl").exists():
        ticks = host_ticks(client_dir, start, end, meta.config.interval_s)
        if len(ticks) >= 2:
            stats = [procfs.parse_proc_stat(t.stat) for t in ticks]
            summary.client_cpu = cpu_summary(stats, ticks,
                                             meta.client.cpu if meta.client else CpuMeta())


def _setting_text(value: dict | str) -> str:
    if isinstance(value, dict):
        unit = value.get("unit") or ""
        return f"{value.get('setting')}{(' ' + unit) if unit else ''}"
    return str(value)


def _roles(meta: TelemetryMeta) -> list[RoleInfo]:
    return [RoleInfo(role=role, path=res.path, device=res.top, chain=list(res.chain),
                     physical=list(res.physical), mount_point=res.mount_point,
                     fstype=res.fstype, error=res.error)
            for role, res in meta.devices.items()]
