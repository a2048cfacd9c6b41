"""``pgdyno bench cpu``: the host's CPU baseline with ``sysbench cpu``; no server needed.

Each iteration runs sysbench for warm-up + duration seconds at ``--clients`` threads
(default: every core), with per-second reports and a latency histogram. Its events/s,
events/s per core and latency are the run's figures; the per-core figure is what the
context report projects other instance sizes from.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.analysis.summary import (
    SCHEMA_VERSION,
    ClientSummary,
    IterationSummary,
    LatencyStats,
    RunSummary,
    TimelinePoint,
    histogram_bins,
    stability_warnings,
)
from pgdyno.errors import RunFailed
from pgdyno.reports.document import Section, Table
from pgdyno.results.rundir import (
    IterationRecord,
    RunDirectory,
    RunPlan,
    read_window_start,
    write_window_start,
)
from pgdyno.units import alike, rounded
from pgdyno.workloads.base import (
    HIGHER,
    LOWER,
    BenchOptions,
    IterationProgress,
    MetricSpec,
    Prepared,
    RunContext,
    Step,
    Workload,
    add_telemetry,
    option,
)
from pgdyno.workloads.checks import check_positive
from pgdyno.workloads.cpu import sysbench
from pgdyno.workloads.engine.process import last_error_line, run_program

# numpy and matplotlib (reports.plots) are imported where used: every start of pgdyno
# loads this module (with the workload plugins), and start-up stays fast.
STDOUT = "stdout.txt"
PER_CORE = "events_per_s_per_core"
"""The host's measured per-core speed: the CPU baseline the context report projects other
instance sizes from."""


@dataclass(frozen=True)
class CpuOptions:
    max_prime: int = option(20000, "cpu: sysbench --cpu-max-prime (work per event)")


class Cpu(Workload):
    name: ClassVar[str] = "cpu"
    description: ClassVar[str] = "the host's CPU baseline: sysbench cpu (events/s per core)"
    rank: ClassVar[int] = 90
    needs_server: ClassVar[bool] = False
    engine: ClassVar[str] = "program"
    engine_dir: ClassVar[str] = "sysbench"
    tuning: ClassVar[tuple[str, bool]] = ("oltp", False)
    options_type: ClassVar[type] = CpuOptions
    size_unit: ClassVar[str] = "primes"
    cpu_baseline_metric: ClassVar[str | None] = PER_CORE
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec("events_per_s", "Events/s", "events/s", HIGHER, headline=True),
        MetricSpec(PER_CORE, "Events/s per core", "events/s", HIGHER),
        MetricSpec("latency_avg_ms", "Latency avg", "ms", LOWER),
        MetricSpec("latency_p95_ms", "Latency p95", "ms", LOWER),
    )

    # ----- options --------------------------------------------------------------------
    def default_clients(self) -> tuple[int, ...]:
        """Threads: one per core this process may use (sysbench's per-core figure needs
        threads ≤ cores)."""
        return (len(os.sched_getaffinity(0)),)

    def options_from_cli(self, raw: dict[str, Any], opts: BenchOptions) -> BenchOptions:
        max_prime = int(raw.get("max_prime", CpuOptions.max_prime))
        check_positive(max_prime, "--max-prime")
        sysbench.find_sysbench()  # a missing program is one line before anything starts
        return dataclasses.replace(opts, workload_options=CpuOptions(max_prime=max_prime))

    def describe_dataset(self, opts: BenchOptions) -> str:
        return f"primes up to {opts.workload_options.max_prime:,} per event"

    # ----- the run --------------------------------------------------------------------
    def prepare(self, ctx: RunContext) -> Prepared:
        program = sysbench.find_sysbench()
        version = sysbench.sysbench_version(program)
        return Prepared(dataset={"kind": "none"},
                        parameters={"sysbench": program, "sysbench_version": version,
                                    "max_prime": ctx.opts.workload_options.max_prime,
                                    "cores": len(os.sched_getaffinity(0))})

    def run_iteration(self, ctx: RunContext, step: Step, record: IterationRecord,
                      progress: IterationProgress) -> None:
        opts = ctx.opts
        it_dir = step.directory(ctx.run_dir.raw, self.engine_dir)
        it_dir.mkdir(parents=True, exist_ok=True)
        program, threads = ctx.plan.parameters["sysbench"], step.clients
        max_prime = opts.workload_options.max_prime
        record.threads = threads
        record.stdout_file = str((it_dir / STDOUT).relative_to(ctx.run_dir.path))
        record.stderr_file = str((it_dir / "stderr.txt").relative_to(ctx.run_dir.path))
        if opts.warmup_s > 0:
            # sysbench 1.0 has no warm-up of its own: a separate run whose output is kept
            # but not counted, so the measured run's totals cover the window exactly.
            warm = sysbench.cpu_command(program, threads=threads, max_prime=max_prime,
                                        seconds=opts.warmup_s)
            ctx.commands.append(" ".join(warm))
            run_program(warm, it_dir / "warmup.txt", it_dir / "warmup-stderr.txt",
                        watch="stdout", on_line=self._progress(progress, 0.0, "warm-up"))
        cmd = sysbench.cpu_command(program, threads=threads, max_prime=max_prime,
                                   seconds=opts.duration_s)
        ctx.commands.append(" ".join(cmd))
        record.command = cmd
        write_window_start(it_dir, time.time())
        outcome = run_program(cmd, it_dir / STDOUT, it_dir / "stderr.txt", watch="stdout",
                              on_line=self._progress(progress, opts.warmup_s, "measuring"))
        record.returncode = outcome.returncode
        record.log_files = [record.stdout_file]
        if outcome.returncode != 0:
            raise RunFailed(f"sysbench cpu exited with code {outcome.returncode} at "
                            f"{step.clients} threads, iteration {step.iteration}: "
                            f"{last_error_line(it_dir / 'stderr.txt')}")

    @staticmethod
    def _progress(progress: IterationProgress, offset_s: float, phase: str):
        def on_line(line: str) -> None:
            if (point := sysbench.parse_interval_line(line)) is not None:
                progress(offset_s + point.t_s, f"{phase} {point.events_per_s:,.0f} events/s")
        return on_line

    # ----- summary and report ---------------------------------------------------------
    def summarise(self, run_dir: RunDirectory, plan: RunPlan, opts: BenchOptions,
                  status: str, cpu_count: int = 1) -> RunSummary:
        cores = int(plan.parameters.get("cores") or cpu_count)
        iterations: list[IterationSummary] = []
        histograms: dict[int, list[LatencyHistogram]] = {}
        for record in plan.records:
            path = run_dir.path / record.stdout_file if record.stdout_file else None
            if path is None or not path.is_file():
                continue
            try:
                result = sysbench.parse_cpu_output(path.read_text(errors="replace"))
            except ValueError:
                continue  # an interrupted iteration printed no report: nothing to count
            hist = _histogram(result)
            it = _iteration(result, hist, record, opts, read_window_start(path.parent), cores)
            add_telemetry(it, path.parent, opts.duration_s, cpu_count)
            iterations.append(it)
            histograms.setdefault(record.clients, []).append(hist)
        per_clients = [_pool(c, [i for i in iterations if i.clients == c], histograms[c])
                       for c in opts.clients if c in histograms]
        return RunSummary(schema_version=SCHEMA_VERSION, workload=plan.workload,
                          context=plan.context, status=status, client_counts=list(opts.clients),
                          per_clients=per_clients, iterations=iterations,
                          warnings=stability_warnings(iterations))

    def common_report(self, opts: BenchOptions | None = None) -> bool:
        return False

    def report_sections(self, summary: RunSummary, run_dir: RunDirectory, plan: RunPlan,
                        opts: BenchOptions) -> list[Section]:
        cores = plan.parameters.get("cores")
        rows = []
        for c in summary.per_clients:
            its = [i for i in summary.iterations if i.clients == c.clients]
            per_core = [i.metrics[PER_CORE] for i in its]
            # The deviation at its mean's precision, in the column beside it.
            rows.append([str(c.clients), str(c.iterations),
                         *alike(c.tps_iteration_mean, c.tps_iteration_stddev, digits=1),
                         rounded(statistics.fmean(per_core), 1), rounded(c.latency.mean_ms, 3),
                         rounded(c.latency.percentiles_ms.get("p95"), 3),
                         rounded(c.latency.percentiles_ms.get("p99"), 3),
                         rounded(c.latency.max_ms, 3)])
        per_it = [[str(i.clients), str(i.iteration), i.status, rounded(i.tps_mean, 1),
                   rounded(i.metrics[PER_CORE], 1), f"{i.transactions:,}",
                   rounded(i.latency.mean_ms, 3), rounded(i.metrics["latency_p95_ms"], 3),
                   rounded(i.latency.max_ms, 3)] for i in summary.iterations]
        section = Section("CPU baseline (sysbench cpu)", paragraphs=[
            f"Each event finds the primes up to {opts.workload_options.max_prime:,} "
            f"(sysbench {plan.parameters.get('sysbench_version')}); {cores} cores usable. "
            "Events/s per core = events/s ÷ min(threads, cores): the figure to project "
            "other instance sizes from. Latency percentiles come from sysbench's histogram "
            "(its bucket width, about 1%); p95 in the iteration table is sysbench's own."],
            tables=[
                Table(["Threads", "Iterations", "Events/s", "Stddev (iterations)",
                       "Events/s per core", "Latency avg (ms)", "p95 (ms)", "p99 (ms)",
                       "Max (ms)"], rows),
                Table(["Threads", "Iteration", "Status", "Events/s", "Per core", "Events",
                       "Latency avg (ms)", "p95 (ms)", "Max (ms)"], per_it,
                      caption="Each iteration's measured run (the warm-up is a separate "
                              "sysbench run, not counted)")])
        plot = _events_plot(summary, run_dir.plots / "cpu_events.png")
        if plot is not None:
            section.images.append(("Events per second over time", "plots/cpu_events.png"))
        return [section]


def _iteration(result: sysbench.CpuResult, hist: LatencyHistogram, record: IterationRecord,
               opts: BenchOptions, window_start: float, cores: int) -> IterationSummary:
    import numpy as np

    eps = np.array([p.events_per_s for p in result.intervals], dtype=np.float64)
    pct = hist.percentiles_us() if hist.n else {}
    latency = LatencyStats(
        count=result.total_events, mean_ms=result.latency_avg_ms,
        median_ms=pct.get(50.0, math.nan) / 1000, stddev_ms=hist.stddev_us / 1000,
        min_ms=result.latency_min_ms, max_ms=result.latency_max_ms,
        percentiles_ms={f"p{p:g}": v / 1000 for p, v in pct.items()})
    timeline = [TimelinePoint(t_s=int(p.t_s), tps=p.events_per_s, latency_mean_ms=math.nan,
                              latency_p99_ms=math.nan, latency_max_ms=math.nan, failed=0,
                              measured=True) for p in result.intervals]
    per_core = result.events_per_s / max(1, min(record.clients, cores))
    return IterationSummary(
        clients=record.clients, iteration=record.iteration, status=record.status,
        duration_s=opts.duration_s, warmup_s=opts.warmup_s, window_start_epoch=window_start,
        transactions=result.total_events, failed=0, serialization_failures=0,
        deadlock_failures=0, retried=0, retries=0, skipped=0, late=0,
        tps_mean=result.events_per_s,
        tps_median=float(np.median(eps)) if eps.size else math.nan,
        tps_stddev=float(eps.std()) if eps.size else math.nan,
        tps_min=float(eps.min()) if eps.size else math.nan,
        tps_max=float(eps.max()) if eps.size else math.nan,
        interval_tps=eps.tolist(), latency=latency, lag=None, scripts=[], timeline=timeline,
        log_files=record.log_files,
        metrics={"events_per_s": result.events_per_s, PER_CORE: per_core,
                 "latency_avg_ms": result.latency_avg_ms,
                 "latency_p95_ms": result.latency_pct_ms})


def _histogram(result: sysbench.CpuResult) -> LatencyHistogram:
    """sysbench's latency histogram as counts per bucket value (µs)."""
    hist = LatencyHistogram()
    for bucket in result.histogram:
        value_us = round(bucket.latency_ms * 1000)
        hist.counts[value_us] += bucket.count
        hist.n += bucket.count
        hist.total_us += value_us * bucket.count
        hist.total_sq_us += float(value_us) ** 2 * bucket.count
    return hist


def _pool(clients: int, its: list[IterationSummary],
          hists: list[LatencyHistogram]) -> ClientSummary:
    import numpy as np

    merged = LatencyHistogram()
    for h in hists:
        merged.merge(h)
    eps = [i.tps_mean for i in its]
    intervals = np.array([v for i in its for v in i.interval_tps], dtype=np.float64)
    latency = (LatencyStats.from_histogram(merged) if merged.n else its[0].latency)
    latency.mean_ms = statistics.fmean(i.latency.mean_ms for i in its)  # sysbench's exact mean
    latency.min_ms = min(i.latency.min_ms for i in its)
    latency.max_ms = max(i.latency.max_ms for i in its)
    return ClientSummary(
        clients=clients, iterations=len(its),
        tps_mean=float(intervals.mean()) if intervals.size else statistics.fmean(eps),
        tps_median=float(np.median(intervals)) if intervals.size else math.nan,
        tps_stddev=float(intervals.std()) if intervals.size else math.nan,
        tps_iteration_mean=statistics.fmean(eps),
        tps_iteration_stddev=statistics.stdev(eps) if len(eps) > 1 else math.nan,
        transactions=sum(i.transactions for i in its), failed=0, retried=0, skipped=0,
        latency=latency, lag=None, scripts=[], latency_histogram=histogram_bins(merged),
        percentile_curve=[[p, v / 1000] for p, v in merged.percentile_curve()] if merged.n
        else [])


def _events_plot(summary: RunSummary, path: Path) -> Path | None:
    from pgdyno.reports.plots import plt, save_figure, series_style

    series = [(it, [(p.t_s, p.tps) for p in it.timeline]) for it in summary.iterations]
    if not any(points for _, points in series):
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for it, points in series:
        ax.plot([t for t, _ in points], [v for _, v in points], lw=1.2, marker="o", ms=3,
                label=f"{it.clients} threads #{it.iteration}",
                **series_style(summary.client_counts, it.clients, it.iteration))
    ax.set(xlabel="seconds into the measured run", ylabel="events/s",
           title="sysbench cpu: events per second")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)
