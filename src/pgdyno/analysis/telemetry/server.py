"""The server's side of a run: wait events, the statistics views (database, WAL, I/O,
checkpointer) and the checkpoints of the server log, from ``waits.jsonl``,
``pg_stats.jsonl`` and ``checkpoints.csv``."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from pgdyno.analysis.telemetry.model import (
    CPU_EVENT,
    CheckpointEvent,
    CheckpointSummary,
    DatabaseSummary,
    IoRow,
    TelemetrySummary,
    WaitShare,
    WaitSummary,
    WalSummary,
)
from pgdyno.analysis.telemetry.raw import csv_rows, delta, in_window
from pgdyno.results.rawfiles import read_jsonl

# Wait samples are bucketed per second for the "top activity" plot.
WAIT_BUCKET_S = 1.0


# ===== wait events =======================================================================

def classify_wait(wait_type: str, wait_event: str) -> tuple[str, str]:
    """(class, event) of an active session; no wait event means running on CPU."""
    if not wait_type:
        return CPU_EVENT, CPU_EVENT
    return wait_type, wait_event


def wait_summary(tdir: Path, start: float, end: float,
           hz: float) -> tuple[WaitSummary, list[float], dict[str, list[float]]]:
    """The wait events sampled (at ``hz``) between ``start`` and ``end``."""
    out = WaitSummary(sample_hz=hz)
    client: dict[tuple[str, str], int] = defaultdict(int)
    workers: dict[tuple[str, str], int] = defaultdict(int)
    buckets: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    bucket_ticks: dict[int, int] = defaultdict(int)
    connections = idle_in_xact = 0
    for tick in read_jsonl(tdir / "waits.jsonl"):
        t = float(tick["t"])
        if not start <= t <= end:
            continue
        out.ticks += 1
        bucket = int(t // WAIT_BUCKET_S)
        bucket_ticks[bucket] += 1
        for backend_type, state, wtype, wevent, count in tick.get("rows", []):
            count = int(count)
            if backend_type == "io worker":
                if wtype != "Activity":  # Activity:IoWorkerMain is an idle worker
                    workers[classify_wait(wtype, wevent)] += count
                continue
            if backend_type == "client backend":
                connections += count
                if state.startswith("idle in transaction"):
                    idle_in_xact += count
            if state == "active":
                key = classify_wait(wtype, wevent)
                client[key] += count
                buckets[bucket][key[0]] += count
    if out.ticks == 0:
        return out, [], {}
    out.aas = sum(client.values()) / out.ticks
    out.connections_avg = connections / out.ticks
    out.idle_in_transaction_avg = idle_in_xact / out.ticks
    out.io_workers_busy_avg = sum(workers.values()) / out.ticks
    out.by_event = _shares(client, out.ticks)
    out.by_class = _class_shares(client, out.ticks)
    out.io_workers = _shares(workers, out.ticks)
    classes = sorted({c for b in buckets.values() for c in b})
    times = sorted(bucket_ticks)
    series = {c: [buckets[b].get(c, 0) / bucket_ticks[b] for b in times] for c in classes}
    return out, [(b + 0.5) * WAIT_BUCKET_S for b in times], series


def _shares(counts: dict[tuple[str, str], int], ticks: int) -> list[WaitShare]:
    total = sum(counts.values()) or 1
    rows = [WaitShare(c, e, n / ticks, 100.0 * n / total) for (c, e), n in counts.items()]
    return sorted(rows, key=lambda r: -r.aas)


def _class_shares(counts: dict[tuple[str, str], int], ticks: int) -> list[WaitShare]:
    per_class: dict[tuple[str, str], int] = defaultdict(int)
    for (cls, _event), n in counts.items():
        per_class[(cls, "")] += n
    return _shares(per_class, ticks)


# ===== PostgreSQL statistics =============================================================

def pg_stats(summary: TelemetrySummary, tdir: Path, start: float, end: float,
              interval_s: float) -> None:
    snaps = [s for s in read_jsonl(tdir / "pg_stats.jsonl")
             if in_window(float(s["t"]), start, end, interval_s / 2)]
    if len(snaps) < 2:
        summary.notes.append("fewer than two statistics snapshots in the window")
        return
    first, last = snaps[0], snaps[-1]
    wall = float(last["mono"]) - float(first["mono"])
    for view in ("database", "checkpointer", "wal"):
        a, b = (first.get(view) or {}), (last.get(view) or {})
        if a.get("stats_reset") != b.get("stats_reset"):
            summary.notes.append(f"{view} statistics were reset during the window: "
                                 "its deltas are not meaningful")
    summary.database = _database(first.get("database") or {}, last.get("database") or {}, wall)
    summary.wal = _wal(first.get("wal") or {}, last.get("wal") or {}, wall)
    summary.io = _io_delta(first.get("io") or [], last.get("io") or [])
    _checkpoint_stats(summary.checkpoints, first.get("checkpointer") or {},
                      last.get("checkpointer") or {}, summary.io)


def _per_s(value: float | None, wall: float) -> float | None:
    return value / wall if value is not None and wall > 0 else None


def _database(a: dict, b: dict, wall: float) -> DatabaseSummary:
    read, hit = delta(a, b, "blks_read"), delta(a, b, "blks_hit")
    active = delta(a, b, "active_time")
    return DatabaseSummary(
        commits_per_s=_per_s(delta(a, b, "xact_commit"), wall),
        rollbacks_per_s=_per_s(delta(a, b, "xact_rollback"), wall),
        blks_read_per_s=_per_s(read, wall),
        cache_hit_pct=100.0 * hit / (hit + read) if read is not None and hit and hit + read
        else None,
        temp_bytes=delta(a, b, "temp_bytes"),
        deadlocks=delta(a, b, "deadlocks"),
        # active_time is in ms and is flushed by each backend when its transaction ends.
        active_time_aas=active / 1000.0 / wall if active is not None and wall > 0 else None,
        blk_read_time_ms=delta(a, b, "blk_read_time"),
        blk_write_time_ms=delta(a, b, "blk_write_time"),
    )


def _wal(a: dict, b: dict, wall: float) -> WalSummary:
    records, fpi = delta(a, b, "wal_records"), delta(a, b, "wal_fpi")
    nbytes, syncs = delta(a, b, "wal_bytes"), delta(a, b, "wal_sync")
    return WalSummary(
        bytes_per_s=_per_s(nbytes, wall), bytes_total=nbytes, records=records, fpi=fpi,
        fpi_ratio=fpi / records if fpi is not None and records else None,
        buffers_full=delta(a, b, "wal_buffers_full"), writes=delta(a, b, "wal_write"),
        syncs=syncs, syncs_per_s=_per_s(syncs, wall),
        write_time_ms=delta(a, b, "wal_write_time_ms"),
        sync_time_ms=delta(a, b, "wal_sync_time_ms"),
    )


IO_FIELDS = {"reads": "reads", "read_bytes": "read_bytes", "read_time": "read_time_ms",
             "writes": "writes", "write_bytes": "write_bytes", "write_time": "write_time_ms",
             "extends": "extends", "fsyncs": "fsyncs", "fsync_time": "fsync_time_ms",
             "hits": "hits", "evictions": "evictions"}


def _io_delta(a_rows: list[dict], b_rows: list[dict]) -> list[IoRow]:
    """pg_stat_io deltas summed over contexts, per backend type and object."""
    totals: dict[tuple[str, str], IoRow] = {}
    for sign, rows in ((-1.0, a_rows), (1.0, b_rows)):
        for row in rows:
            key = (row["backend_type"], row["object"])
            acc = totals.setdefault(key, IoRow(*key))
            for src, dst in IO_FIELDS.items():
                if row.get(src) is not None:
                    setattr(acc, dst, getattr(acc, dst) + sign * float(row[src]))
    moved = [r for r in totals.values()
             if any(getattr(r, f) for f in ("reads", "writes", "extends", "fsyncs", "hits"))]
    return sorted(moved, key=lambda r: (r.backend_type, r.object))


BACKEND_WRITERS = ("client backend", "autovacuum worker", "background worker", "parallel worker")


def _checkpoint_stats(out: CheckpointSummary, a: dict, b: dict, io: list[IoRow]) -> None:
    out.stats_timed = delta(a, b, "num_timed")
    out.stats_requested = delta(a, b, "num_requested")
    out.write_time_ms = delta(a, b, "write_time_ms")
    out.sync_time_ms = delta(a, b, "sync_time_ms")
    out.buffers_checkpoint = delta(a, b, "buffers_checkpoint")
    out.buffers_bgwriter = delta(a, b, "buffers_clean")
    out.maxwritten_clean = delta(a, b, "maxwritten_clean")
    out.buffers_alloc = delta(a, b, "buffers_alloc")
    out.buffers_backend = delta(a, b, "buffers_backend")
    if out.buffers_backend is None and io:
        # PG17+ dropped buffers_backend; pg_stat_io counts the same writes.
        out.buffers_backend = sum(r.writes for r in io
                                  if r.backend_type in BACKEND_WRITERS and r.object == "relation")


# ===== checkpoints from the log ==========================================================

def checkpoint_log(summary: TelemetrySummary, tdir: Path, start: float, end: float) -> None:
    out = summary.checkpoints
    rows = csv_rows(tdir / "checkpoints.csv", "t", "event")
    pending: CheckpointEvent | None = None
    events: list[CheckpointEvent] = []
    for row in rows:
        t = float(row["t"])
        if row["event"] == "start":
            pending = CheckpointEvent(t_start=t, t_end=None, reason=row.get("reason") or "")
            events.append(pending)
        elif row["event"] == "complete":
            ev = pending or CheckpointEvent(t_start=None, t_end=None, reason="")
            if pending is None:
                events.append(ev)
            ev.t_end = t
            ev.buffers = _opt_int(row.get("buffers"))
            ev.write_s = _opt_float(row.get("write_s"))
            ev.sync_s = _opt_float(row.get("sync_s"))
            ev.total_s = _opt_float(row.get("total_s"))
            ev.distance_kb = _opt_int(row.get("distance_kb"))
            pending = None
        elif row["event"] == "too_frequent" and start <= t <= end:
            out.too_frequent_warnings += 1
    # A checkpoint belongs to the window when it overlaps it.
    inside = [e for e in events
              if (e.t_start or e.t_end or 0) <= end and (e.t_end or e.t_start or 0) >= start]
    out.events = inside
    started = [e for e in inside if e.t_start is not None and start <= e.t_start <= end]
    out.started = len(started)
    out.timed = sum(1 for e in started if "time" in e.reason.split())
    out.requested = out.started - out.timed
    out.wal_triggered = sum(1 for e in started if "wal" in e.reason.split())
    out.write_s = sum(e.write_s or 0.0 for e in inside)
    out.sync_s = sum(e.sync_s or 0.0 for e in inside)
    starts = sorted(e.t_start for e in started if e.t_start is not None)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    out.min_interval_s = min(gaps) if gaps else None


def _opt_float(text: str | None) -> float | None:
    """A number of a telemetry row; None when empty, absent or damaged."""
    try:
        return float(text) if text not in ("", None) else None
    except ValueError:
        return None


def _opt_int(text: str | None) -> int | None:
    value = _opt_float(text)
    return int(value) if value is not None and math.isfinite(value) else None
