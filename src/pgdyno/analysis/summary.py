"""The numbers of a pgbench run: per iteration, per client count (pooled), and warnings.

Everything here is computed from ``LogStats`` (which comes from the per-second data and,
when kept, the per-transaction logs), so a summary can always be rebuilt from the run
directory's ``raw/`` folder.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgdyno import serde
from pgdyno.analysis.histogram import PERCENTILES, LatencyHistogram
from pgdyno.analysis.merge import DriverFigures
from pgdyno.analysis.pgbench_log import AGGREGATE, EXACT, HISTOGRAM, LogStats, ScriptStats
from pgdyno.analysis.sampled import SampledLatency
from pgdyno.analysis.telemetry import TelemetrySummary
from pgdyno.analysis.verdict import Verdict
from pgdyno.errors import UsageError
from pgdyno.results.manifest import read_versioned

# numpy is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import numpy as np

SCHEMA_VERSION = 3
"""2: per-iteration ``metrics`` declared by the workload (was: ``extras``). 3: a verdict's
evidence is typed (``analysis.verdict.Evidence``: its kind, figures and names; was: lines of
text); a version-2 summary is read without its evidence (``_evidence_was_text``)."""
HIGH_CV = 0.10
"""TPS varying by more than 10% of its mean between 1 s intervals deserves a look."""


def percentile_key(p: float) -> str:
    return f"p{p:g}"


@dataclass
class LatencyStats:
    """Latency of successful transactions, in milliseconds."""

    count: int
    mean_ms: float
    median_ms: float
    stddev_ms: float
    min_ms: float
    max_ms: float
    percentiles_ms: dict[str, float]
    """``p50``, ``p75``, ``p80``, ``p90``, ``p95``, ``p99``, ``p99.9``: nearest-rank."""

    @classmethod
    def from_histogram(cls, hist: LatencyHistogram) -> LatencyStats:
        pct = hist.percentiles_us()
        return cls(
            count=hist.n, mean_ms=_ms(hist.mean_us), median_ms=_ms(pct[50.0]),
            stddev_ms=_ms(hist.stddev_us), min_ms=_ms(hist.min_us), max_ms=_ms(hist.max_us),
            percentiles_ms={percentile_key(p): _ms(pct[p]) for p in PERCENTILES},
        )


@dataclass
class ScriptSummary:
    script_no: int
    name: str
    weight: int
    transactions: int
    failed: int
    retried: int
    tps: float
    latency: LatencyStats


@dataclass
class TimelinePoint:
    """One second of a run, warm-up included (``measured`` false there)."""

    t_s: int
    """Seconds since the first transaction started."""
    tps: float
    latency_mean_ms: float
    latency_p99_ms: float
    """From the second's HdrHistogram (3 significant digits)."""
    latency_max_ms: float
    failed: int
    measured: bool


@dataclass
class StabilityWarning:
    """A reason to distrust or re-run a measurement, with the advice attached."""

    code: str
    message: str
    advice: str


@dataclass
class IterationSummary:
    clients: int
    iteration: int
    status: str
    duration_s: int
    warmup_s: float
    window_start_epoch: float
    transactions: int
    failed: int
    serialization_failures: int
    deadlock_failures: int
    retried: int
    retries: int
    skipped: int
    late: int
    tps_mean: float
    """Mean of the 1 s interval TPS over the measured window (= transactions / duration)."""
    tps_median: float
    tps_stddev: float
    tps_min: float
    tps_max: float
    interval_tps: list[float]
    latency: LatencyStats
    lag: LatencyStats | None
    scripts: list[ScriptSummary]
    timeline: list[TimelinePoint]
    log_files: list[str]
    pgbench_tps: float | None = None
    """tps as pgbench printed it (includes the warm-up): a cross-check, not a result."""
    latency_source: str = EXACT
    """Where the latency percentiles come from: the per-transaction logs (exact) or the
    per-second HdrHistograms (within 0.1% above)."""
    telemetry: TelemetrySummary | None = None
    """Host and server telemetry over the measured window (None when sampling was off)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The workload's declared figures for this iteration (tps, latency_p99_ms, nopm, qps,
    events_per_s...): what compare, campaigns and the run index read."""
    verdict: Verdict | None = None
    contaminated: bool = False
    """Other load on the host took a material share of the CPU or the disks during the
    measured window (``telemetry.contamination``): the figures include another job's
    effect. False when there is no telemetry to tell."""
    contamination: str = ""
    """The figure behind ``contaminated``: "other processes used 0.9 of 2 cores (45% of
    busy CPU)"."""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """Finer samples of a metric than one per iteration (TPROC-H: one geometric mean per
    query stream): compare's interval is computed over these when both sides have them."""
    sampling: SampledLatency | None = None
    """``--tx-logs sample``: the sampling rate pgbench logged at and the 95% bounds of the
    sampled percentiles (None: every transaction was logged)."""
    drivers: list[DriverFigures] = field(default_factory=list)
    """--drivers: each driver host's own figures over the window they all covered (the
    figures above are merged from theirs)."""


@dataclass
class ClientSummary:
    """All iterations at one client count, pooled."""

    clients: int
    iterations: int
    tps_mean: float
    """Mean over every 1 s interval of every iteration."""
    tps_median: float
    tps_stddev: float
    tps_iteration_mean: float
    tps_iteration_stddev: float
    transactions: int
    failed: int
    retried: int
    skipped: int
    latency: LatencyStats
    lag: LatencyStats | None
    scripts: list[ScriptSummary]
    latency_histogram: list[list[float]] = field(default_factory=list)
    """[bin start ms, bin end ms, transactions]; 50 equal bins up to p99.9, then the rest."""
    percentile_curve: list[list[float]] = field(default_factory=list)
    """[percentile, latency ms], dense towards the tail."""
    latency_source: str = EXACT


@dataclass
class RunSummary:
    schema_version: int
    workload: str
    context: str
    status: str
    client_counts: list[int]
    per_clients: list[ClientSummary]
    iterations: list[IterationSummary]
    warnings: list[StabilityWarning] = field(default_factory=list)


def load_summary(path: Path) -> RunSummary:
    """summary.json, refused with one line when damaged or of an unknown version. Every
    figure in it was measured: an Infinity is damage (an edit, a bug), refused here before
    a mean, a comparison or a plot trips on it."""
    advice = "; rebuild it with `pgdyno report RUN_DIR`"
    summary = read_versioned(RunSummary, path, SCHEMA_VERSION, "run summary", advice,
                             older={2: _evidence_was_text})
    infinite = serde.first_infinity(summary)
    if infinite is not None:
        raise UsageError(f"{path}: damaged run summary ({infinite}: Infinity where a "
                         f"measured number belongs){advice}")
    return summary


def _evidence_was_text(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 to 3: a verdict's evidence was lines of text, with no figures to read back,
    so an older summary is read without it; its verdict, scores and inputs stay (what
    compare, studies and the index read). ``pgdyno report RUN_DIR`` rebuilds the summary
    from the run's raw files, evidence included."""
    for it in data.get("iterations") or []:
        verdict = it.get("verdict") if isinstance(it, dict) else None
        if isinstance(verdict, dict):
            verdict["evidence"] = []
            for candidate in verdict.get("ranked") or []:
                if isinstance(candidate, dict):
                    candidate["evidence"] = []
    return data


@dataclass
class ScriptInfo:
    name: str
    weight: int


def summarise_iteration(stats: LogStats, *, clients: int, iteration: int, status: str,
                        scripts: list[ScriptInfo], log_files: list[str],
                        pgbench_tps: float | None) -> IterationSummary:
    import numpy as np

    tps = stats.interval_ok.astype(np.float64)
    o = stats.overall
    summary = IterationSummary(
        clients=clients, iteration=iteration, status=status, duration_s=stats.duration_s,
        warmup_s=stats.warmup_s, window_start_epoch=stats.window_start,
        transactions=o.histogram.n, failed=o.failed,
        serialization_failures=o.serialization_failures, deadlock_failures=o.deadlock_failures,
        retried=o.retried, retries=o.retries, skipped=o.skipped, late=o.late,
        tps_mean=_mean(tps), tps_median=_median(tps), tps_stddev=_pstdev(tps),
        tps_min=float(tps.min()) if tps.size else math.nan,
        tps_max=float(tps.max()) if tps.size else math.nan,
        interval_tps=tps.tolist(), latency=LatencyStats.from_histogram(o.histogram),
        lag=LatencyStats.from_histogram(o.lag_histogram) if o.lag_histogram.n else None,
        scripts=_script_summaries(stats.per_script, scripts, stats.duration_s),
        timeline=_timeline(stats), log_files=log_files, pgbench_tps=pgbench_tps,
        latency_source=stats.latency_source,
    )
    summary.metrics = transaction_metrics(summary)
    return summary


def transaction_metrics(it: IterationSummary) -> dict[str, float]:
    """TPS and latency figures under the names the pgbench engine declares."""
    out = {"tps": it.tps_mean, "latency_avg_ms": it.latency.mean_ms}
    for key in ("p50", "p90", "p95", "p99", "p99.9"):
        value = it.latency.percentiles_ms.get(key, math.nan)
        if not math.isnan(value):  # none without percentiles (--tx-logs aggregate)
            out[f"latency_{key}_ms"] = value
    return out


def _script_summaries(per_script: dict[int, ScriptStats], scripts: list[ScriptInfo],
                      seconds: float) -> list[ScriptSummary]:
    if len(scripts) < 2 or not per_script:  # none: pgbench aggregated the scripts together
        return []
    out = []
    for no, info in enumerate(scripts):
        s = per_script.get(no, ScriptStats())
        out.append(ScriptSummary(
            script_no=no, name=info.name, weight=info.weight, transactions=s.histogram.n,
            failed=s.failed, retried=s.retried,
            tps=s.histogram.n / seconds if seconds else math.nan,
            latency=LatencyStats.from_histogram(s.histogram)))
    return out


def _timeline(stats: LogStats) -> list[TimelinePoint]:
    import numpy as np

    last = int(np.nonzero(stats.timeline_ok + stats.timeline_failed)[0].max(initial=-1))
    p99 = stats.timeline_p99_us
    points = []
    for sec in range(last + 1):
        n = int(stats.timeline_ok[sec])
        start = stats.timeline_start + sec
        measured = (start >= stats.window_start - 1e-6
                    and start + 1 <= stats.window_start + stats.duration_s + 1e-6)
        points.append(TimelinePoint(
            t_s=sec, tps=float(n),
            latency_mean_ms=_ms(stats.timeline_latency_sum_us[sec] / n) if n else math.nan,
            latency_p99_ms=_ms(p99[sec]), latency_max_ms=_ms(stats.timeline_latency_max_us[sec]),
            failed=int(stats.timeline_failed[sec]), measured=measured))
    return points


def pool_client_count(clients: int, parts: list[tuple[IterationSummary, LogStats]],
                      scripts: list[ScriptInfo]) -> ClientSummary:
    """Merge iterations at one client count: histograms merged, intervals concatenated."""
    import numpy as np

    hist, lag = LatencyHistogram(), LatencyHistogram()
    per_script: dict[int, ScriptStats] = {}
    intervals: list[float] = []
    seconds = 0.0
    for summary, stats in parts:
        hist.merge(stats.overall.histogram)
        lag.merge(stats.overall.lag_histogram)
        intervals.extend(summary.interval_tps)
        seconds += stats.duration_s
        for no, s in stats.per_script.items():
            target = per_script.setdefault(no, ScriptStats())
            target.histogram.merge(s.histogram)
            target.failed += s.failed
            target.retried += s.retried
    iteration_tps = [summary.tps_mean for summary, _ in parts]
    arr = np.array(intervals, dtype=np.float64)
    return ClientSummary(
        clients=clients, iterations=len(parts), tps_mean=_mean(arr), tps_median=_median(arr),
        tps_stddev=_pstdev(arr), tps_iteration_mean=_mean(np.array(iteration_tps)),
        tps_iteration_stddev=(statistics.stdev(iteration_tps) if len(iteration_tps) > 1
                              else math.nan),
        transactions=sum(s.transactions for s, _ in parts),
        failed=sum(s.failed for s, _ in parts), retried=sum(s.retried for s, _ in parts),
        skipped=sum(s.skipped for s, _ in parts),
        latency=LatencyStats.from_histogram(hist),
        lag=LatencyStats.from_histogram(lag) if lag.n else None,
        scripts=_script_summaries(per_script, scripts, seconds),
        latency_histogram=histogram_bins(hist),
        percentile_curve=[[p, _ms(v)] for p, v in hist.percentile_curve()],
        latency_source=(EXACT if not hist.bucketed else HISTOGRAM if hist.counts
                        else AGGREGATE),
    )


def histogram_bins(hist: LatencyHistogram, bins: int = 50) -> list[list[float]]:
    """Equal-width bins from the minimum to p99.9, and one last bin for the tail beyond."""
    import numpy as np

    if not hist.n or not hist.counts:
        return []
    values, counts = hist.sorted_arrays()
    low, high = float(values[0]), hist.percentiles_us((99.9,))[99.9]
    if high <= low:
        return [[_ms(low), _ms(high), float(hist.n)]]
    edges = np.linspace(low, high, bins + 1)
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, bins - 1)
    inside = values <= high
    sums = np.bincount(idx[inside], weights=counts[inside], minlength=bins)
    rows = [[_ms(edges[i]), _ms(edges[i + 1]), float(sums[i])] for i in range(bins)]
    tail = float(counts[~inside].sum())
    if tail:
        rows.append([_ms(high), _ms(float(values[-1])), tail])
    return rows


def stability_warnings(iterations: list[IterationSummary]) -> list[StabilityWarning]:
    """Typed reasons to distrust a result; saved in summary.json, shown in the report.

    Other load on the host comes first: it makes every other figure suspect."""
    other_load: list[StabilityWarning] = []
    out: list[StabilityWarning] = []
    for it in iterations:
        label = f"{it.clients} clients, iteration {it.iteration}"
        if it.contaminated:
            other_load.append(StabilityWarning(
                "other-load", f"{label}: {it.contamination} during the measured window",
                "re-run on a quiet host (or with the other job stopped): these figures "
                "include its effect"))
        if it.tps_mean and it.tps_stddev / it.tps_mean > HIGH_CV:
            out.append(_variation_warning(it, label))
        if it.failed:
            out.append(StabilityWarning(
                "failures", f"{label}: {it.failed} transactions failed",
                "check the server log; use --max-tries for serialization failures"))
        if it.status != "ok":
            out.append(StabilityWarning(
                "incomplete", f"{label}: iteration {it.status}; figures cover what was logged",
                "re-run it"))
    counts = {it.clients for it in iterations}
    for clients in sorted(counts):
        runs = [it for it in iterations if it.clients == clients]
        if len(runs) < 3:
            out.append(StabilityWarning(
                "few-iterations", f"{clients} clients: {len(runs)} iteration(s)",
                "use --iterations 3 or more before comparing configurations"))
            break
        first, rest = runs[0].tps_mean, [r.tps_mean for r in runs[1:]]
        if first < 0.9 * statistics.median(rest):
            out.append(StabilityWarning(
                "slow-first-iteration",
                f"{clients} clients: the first iteration was "
                f"{100 * (1 - first / statistics.median(rest)):.0f}% slower than the median "
                "of the others", "the cache was cold: add --warmup"))
    return other_load + out


SLOW_START_SHARE = 0.2
"""A slow start: the first fifth of the window's intervals, on average, 20% (twice HIGH_CV)
or more below the median of the rest."""


def variation_causes(it: IterationSummary) -> list[tuple[str, str]]:
    """(cause, advice) for an iteration whose TPS varied, from what was found in its window
    only: other load when the host was contaminated, checkpoints when any overlapped the
    window, warm-up when the first intervals are the low ones."""
    causes = []
    if it.contaminated:
        causes.append((f"other load on the host ({it.contamination})",
                       "re-run on a quiet host"))
    ckpts = len(it.telemetry.checkpoints.events) if it.telemetry is not None else 0
    if ckpts:
        causes.append((f"{ckpts} checkpoint{'s' if ckpts > 1 else ''} in the window",
                       "measure over whole checkpoint cycles (--duration) or spread them "
                       "(max_wal_size, checkpoint_completion_target)"))
    if slow_start(it.interval_tps):
        causes.append(("the first intervals are the slow ones (warm-up)",
                       "lengthen --warmup"))
    return causes


def slow_start(intervals: list[float]) -> bool:
    if len(intervals) < 2:
        return False
    head = max(1, len(intervals) // 5)
    rest = statistics.median(intervals[head:])
    return rest > 0 and statistics.fmean(intervals[:head]) < (1 - SLOW_START_SHARE) * rest


def _variation_warning(it: IterationSummary, label: str) -> StabilityWarning:
    message = (f"{label}: TPS varied by {100 * it.tps_stddev / it.tps_mean:.0f}% "
               "(stddev/mean) between 1 s intervals")
    causes = variation_causes(it)
    if causes:
        return StabilityWarning("high-tps-cv", f"{message}; cause: "
                                + "; ".join(c for c, _ in causes),
                                "; ".join(a for _, a in causes))
    if it.telemetry is None:
        return StabilityWarning("high-tps-cv", f"{message}; no telemetry to tell the cause",
                                "re-run with telemetry, which shows checkpoints and other "
                                "load on the host")
    return StabilityWarning("high-tps-cv", f"{message}; no other load, checkpoint or slow "
                            "start in the window", "look at the timeline and the wait events "
                            "for stalls; lengthen --duration")


def five_second_table(timeline: list[TimelinePoint], window: int = 5) -> list[tuple[int, float]]:
    """(end second, mean TPS) per 5 s block, as seed reports print a run's timeline."""
    rows = []
    for end in range(window, len(timeline) + 1, window):
        block = timeline[end - window:end]
        rows.append((end, sum(p.tps for p in block) / window))
    return rows


def _ms(us: float) -> float:
    return us / 1000.0 if not math.isnan(us) else math.nan


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if a.size else math.nan


def _median(a: np.ndarray) -> float:
    import numpy as np

    return float(np.median(a)) if a.size else math.nan


def _pstdev(a: np.ndarray) -> float:
    return float(a.std()) if a.size else math.nan
