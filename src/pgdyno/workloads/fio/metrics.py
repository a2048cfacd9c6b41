"""An iteration's figures: the declared metrics from fio's and pg_test_fsync's results,
and the iteration's summary row."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pgdyno.analysis.summary import IterationSummary, LatencyStats
from pgdyno.results.rundir import WINDOW_FILE, IterationRecord, read_window_start
from pgdyno.workloads.fio.results import JOBS_FILE, FioIteration


def iteration_metrics(fio_it: FioIteration) -> dict[str, float]:
    """The declared metrics of one iteration, from its first place (the data directory's,
    or the device's); figures a run did not measure are left out, never zero."""
    if not fio_it.places:
        return {}
    p = fio_it.places[0]
    out: dict[str, float | None] = {}
    for kind in ("randread", "randwrite", "randrw"):
        peak = p.peak(kind)
        out[f"{kind}_peak_iops"] = peak.iops if peak else None
    for name, key in (("seq-read", "seq_read_mib_s"), ("seq-write", "seq_write_mib_s")):
        job = p.job(name)
        out[key] = job.mib_s if job else None
    for kind in ("randread", "randwrite"):
        qd1 = p.at_depth(kind, 1)
        out[f"{kind}_qd1_iops"] = qd1.iops if qd1 else None
        for depth_name, job in (("qd1", qd1), ("qd32", p.qd32(kind))):
            lat = job.main.latency if job is not None and job.main is not None else None
            out[f"{kind}_{depth_name}_lat_avg_us"] = lat.avg_us if lat else None
            out[f"{kind}_{depth_name}_lat_p99_us"] = lat.p99_us if lat else None
    wal = sorted((j for j in p.jobs if j.kind == "wal" and not j.error),
                 key=lambda j: j.numjobs)
    out["wal_fdatasync_1job_ops_s"] = wal[0].iops if wal else None
    out["wal_fdatasync_njobs_ops_s"] = wal[-1].iops if len(wal) > 1 else None
    methods = p.fsync.sync_methods() if p.fsync is not None else {}
    out["pg_test_fsync_fdatasync_ops_s"] = methods.get("fdatasync")
    return {k: float(v) for k, v in out.items() if v is not None and not math.isnan(v)}


def iteration_summary(record: IterationRecord, fio_it: FioIteration,
                      it_dir: Path) -> IterationSummary:
    metrics = iteration_metrics(fio_it)
    head = metrics.get("randread_peak_iops", math.nan)
    window = read_window_start(it_dir) if (it_dir / WINDOW_FILE).is_file() else 0.0
    jobs_done = [j for p in fio_it.places for j in p.jobs]
    lasted = _lasted(it_dir)
    none = LatencyStats(count=0, mean_ms=math.nan, median_ms=math.nan, stddev_ms=math.nan,
                        min_ms=math.nan, max_ms=math.nan, percentiles_ms={})
    return IterationSummary(
        clients=record.clients, iteration=record.iteration, status=record.status,
        duration_s=int(round(lasted)), warmup_s=0, window_start_epoch=float(window),
        transactions=len(jobs_done), failed=sum(1 for j in jobs_done if j.error),
        serialization_failures=0, deadlock_failures=0, retried=0, retries=0, skipped=0,
        late=0, tps_mean=head, tps_median=head, tps_stddev=0.0, tps_min=head, tps_max=head,
        interval_tps=[], latency=none, lag=None, scripts=[], timeline=[],
        log_files=record.log_files, metrics=metrics)


def _lasted(it_dir: Path) -> float:
    """Seconds from the first job's start to the last one's end."""
    try:
        book = json.loads((it_dir / JOBS_FILE).read_text())
        times = [(j["started"], j["ended"]) for j in book.get("jobs", []) if j.get("ended")]
    except (OSError, ValueError, KeyError):
        return 0.0
    return max(e for _, e in times) - min(s for s, _ in times) if times else 0.0
