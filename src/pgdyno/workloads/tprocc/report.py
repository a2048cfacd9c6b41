"""TPROC-C figures from a run's raw files, and their report section.

NOPM and TPM come from the database snapshots taken at the start and the end of each
measured window (``window.json``), not from the driver's counts, and NOPM over time from
the snapshots taken every few seconds in between; per-transaction-type throughput and
latency come from pgbench's per-script log data (the "Per script" table). In compliant
mode pgbench's latency includes the keying and think times, so response times per type
come from the server's duration lines (``response_times.tsv.gz``, see
``pgdyno.workloads.tprocc.response``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pgdyno.analysis.debt import read_debt_readings
from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.analysis.summary import RunSummary
from pgdyno.errors import UsageError
from pgdyno.reports.document import Section, Table
from pgdyno.reports.plots import plt, save_figure, series_style
from pgdyno.results.manifest import read_json_file
from pgdyno.results.rundir import RunPlan
from pgdyno.units import format_ms, format_ratio_pct, rounded
from pgdyno.workloads import tprocc
from pgdyno.workloads.tprocc import Snapshot, response


@dataclass
class Window:
    """The snapshots of one iteration: the window's edges and the series between them."""

    start: Snapshot
    end: Snapshot
    series: list[Snapshot]
    """Every snapshot from start to end (empty in runs from before NOPM over time)."""

    @property
    def points(self) -> list[Snapshot]:
        return self.series or [self.start, self.end]

    @property
    def own_transactions(self) -> int:
        """pgdyno's snapshot transactions counted inside the window, left out of TPM: one
        per snapshot of the series but the end one."""
        return max(0, len(self.series) - 1)

    @property
    def epochs(self) -> tuple[float, float]:
        return self.start.time_s, self.end.time_s


def read_window(plan: RunPlan, it_dir: Path) -> Window | None:
    path = it_dir / "window.json"
    if not path.exists():
        return None
    points = read_json_file(path, "measured window")
    if not isinstance(points, dict):
        raise UsageError(f"{path}: not a pgdyno measured window (a JSON object)")
    if "start" not in points or "end" not in points:
        return None
    try:
        start = Snapshot.from_dict(points["start"]["snapshot"])
        end = Snapshot.from_dict(points["end"]["snapshot"])
        series = [Snapshot.from_dict(p["snapshot"]) for p in points.get("series", [])]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: damaged measured window ({type(exc).__name__}: "
                         f"{exc})") from None
    return Window(start=start, end=end, series=series)


def _debt_readings_in(window: Window, it_dir: Path) -> int:
    """The telemetry's maintenance-debt readings committed inside the window: one
    transaction each in the workload's database (``telemetry.debt``), left out of TPM."""
    start, end = window.epochs
    return sum(1 for r in read_debt_readings(it_dir / "telemetry")
               if start < float(r.get("t_commit", r.get("t", 0.0))) <= end)


def compliant(plan: RunPlan) -> bool:
    """Keying and think times on: terminals paced as TPC-C's, with an ideal to reach."""
    return bool(plan.parameters.get("keying_thinking"))


def window_metrics(plan: RunPlan, it_dir: Path) -> dict[str, float]:
    """nopm and tpm; in compliant mode also efficiency (against the ceiling at the run's
    time scale), the ideal NOPM and real/ideal, the p90 response time per type, and the
    ``latency_*`` figures timed by the server (pgbench's include the keying and think
    sleeps; NaN when the server log was not read, rather than those)."""
    window = read_window(plan, it_dir)
    if window is None:
        return {}
    warehouses = int(plan.parameters["warehouses"])
    metrics = tprocc.throughput(window.start, window.end, warehouses,
                                window.own_transactions + _debt_readings_in(window, it_dir))
    out = {"nopm": metrics.nopm, "tpm": metrics.tpm,
           "new_orders": float(metrics.new_orders), "window_s": metrics.duration_s}
    if not compliant(plan):
        return out
    mix = plan.parameters.get("mix")
    scale = float(plan.parameters.get("time_scale", 1.0))
    ideal = tprocc.against_ideal(metrics, tprocc.Mix.parse(mix) if mix else None, scale)
    out["efficiency"] = tprocc.efficiency(metrics.nopm, warehouses, scale)
    out["ideal_nopm"], out["real_vs_ideal"] = ideal.ideal_nopm, ideal.ratio
    samples = window_samples([(it_dir, window)])
    for stats in response.stats_by_type(samples):
        out[f"rt_p90_ms_{stats.transaction}"] = stats.p90_ms
    return out | server_latency(samples)


SERVER_LATENCY_KEYS = {"latency_p50_ms": 50.0, "latency_p90_ms": 90.0, "latency_p95_ms": 95.0,
                       "latency_p99_ms": 99.0, "latency_p99.9_ms": 99.9}


def server_latency(samples: list[response.ResponseSample]) -> dict[str, float]:
    """The engine's latency figures (mean and nearest-rank percentiles) over every timed call
    of every type: what a compliant run's transactions took on the server."""
    histogram = LatencyHistogram()
    # The log prints whole microseconds (3 decimals of ms), as pgbench's latencies.
    histogram.add_array(np.rint(np.asarray([s.ms for s in samples], dtype=float) * 1000))
    got = histogram.percentiles_us(tuple(SERVER_LATENCY_KEYS.values()))
    return {"latency_avg_ms": histogram.mean_us / 1000} | {
        key: got[p] / 1000 for key, p in SERVER_LATENCY_KEYS.items()}


def window_samples(windows: list[tuple[Path, Window]]) -> list[response.ResponseSample]:
    """The timed calls that finished inside these iterations' measured windows."""
    samples: list[response.ResponseSample] = []
    for it_dir, window in windows:
        path = it_dir / response.RAW_FILE
        if path.exists():
            lo, hi = window.epochs
            samples += [s for s in response.read_samples(path) if lo <= s.end_epoch < hi]
    return samples


def nopm_over_time(window: Window, warehouses: int) -> list[tuple[float, float]]:
    """(seconds since the window started, at the interval's end; NOPM of the interval)."""
    t0 = window.start.time_s
    return [(b.time_s - t0, m.nopm)
            for b, m in zip(window.points[1:], tprocc.interval_series(window.points, warehouses),
                            strict=True)]


def pooled_response_stats(windows: list[tuple[Path, Window]]) -> list[response.ResponseStats]:
    """Per-type response times over the measured windows of these iterations, pooled."""
    return response.stats_by_type(window_samples(windows))


def tprocc_sections(summary: RunSummary, plan: RunPlan, run_dir: Path) -> list[Section]:
    """The run's TPROC-C section. Compliant runs lead with NOPM, real/ideal and the server's
    p90 response times (pgbench's TPS and latency include the keying and think sleeps, so
    the report's common transaction sections are left out for them); other runs lead with
    NOPM and TPM, and have no efficiency or ideal, which only paced terminals define."""
    w = int(plan.parameters["warehouses"])
    windows = iteration_windows(plan, run_dir)
    paced = compliant(plan)
    section = Section(f"TPROC-C: {w} warehouse{'s' if w != 1 else ''}",
                      paragraphs=[_about(plan, paced)])
    section.tables.append(_headline_table(summary, windows, plan) if paced
                          else _pooled_table(summary))
    section.tables.append(_iteration_table(summary, paced))
    section.tables += _interval_tables(windows, summary, w)
    plot = _nopm_timeline(windows, w, run_dir / "plots" / "tprocc_nopm_timeline.png")
    if plot is not None:
        section.images.append(("NOPM over time (per snapshot interval, measured window)",
                               str(plot.relative_to(run_dir))))
    section.tables += _response_tables(windows, plan)
    consistency = run_dir / "raw" / "consistency.json"
    if consistency.exists():
        section.tables.append(Table(
            ["Condition", "Description", "Result", "Checked", "Violations"],
            [[str(c["number"]), c["description"], "pass" if c["passed"] else "FAIL",
              str(c["checked"]), str(c["violations"])] for c in read_conditions(consistency)],
            caption="TPC-C consistency conditions (clause 3.3.2) after the run"))
    return [section]


def _about(plan: RunPlan, paced: bool) -> str:
    text = ("NOPM = new orders per minute from Δsum(d_next_o_id); TPM = Δ(xact_commit + "
            "xact_rollback) per minute; both over the measured window, read from the "
            "database. ")
    if paced:
        scale = float(plan.parameters.get("time_scale", 1.0))
        scaled = f" ÷ time scale {scale:g}" if scale != 1.0 else ""
        text += ("Ideal NOPM = what 10 terminals per warehouse reach with zero response time "
                 "under these keying and think times; real/ideal at or above "
                 f"{tprocc.SATURATION_RATIO:.0%} means the system keeps up. Efficiency = "
                 f"NOPM ÷ (12.86 × warehouses{scaled}). Response times are the server's "
                 "duration of each call: pgbench's transaction latency includes the keying "
                 "and think times in this mode, so its TPS and latency are not shown. ")
    else:
        text += ("Without keying and think times the terminals run flat out: there is no "
                 "ideal line, so no efficiency or real/ideal. ")
    return text + f"Mix {plan.parameters.get('mix')}, {_mode(plan)}."


def _headline_table(summary: RunSummary, windows: IterationWindows, plan: RunPlan) -> Table:
    """Per terminal count: NOPM, real/ideal and the server-timed p90 per transaction type."""
    rows = []
    for clients in summary.client_counts:
        its = [it for it in summary.iterations if it.clients == clients and "nopm" in it.metrics]
        if not its:
            continue
        nopms = [it.metrics["nopm"] for it in its]
        ratios = [it.metrics["real_vs_ideal"] for it in its if "real_vs_ideal" in it.metrics]
        ideal = next((it.metrics["ideal_nopm"] for it in its if "ideal_nopm" in it.metrics),
                     None)
        stats = {s.transaction: s for s in pooled_response_stats(
            [v for (c, _), v in sorted(windows.items()) if c == clients])}
        rows.append([str(clients), rounded(statistics.fmean(nopms), 0),
                     rounded(statistics.stdev(nopms) if len(nopms) > 1 else None, 0),
                     rounded(ideal, 0),
                     format_ratio_pct(statistics.fmean(ratios) if ratios else None),
                     *[format_ms(stats[t].p90_ms) if t in stats else "–"
                       for t in tprocc.TRANSACTIONS],
                     rounded(statistics.fmean(it.metrics["tpm"] for it in its), 0), str(len(its))])
    return Table(["Terminals", "NOPM", "NOPM stddev", "Ideal NOPM", "Real/ideal",
                  *[f"p90 {SHORT[t]} ms" for t in tprocc.TRANSACTIONS], "TPM", "Iterations"],
                 rows, caption="Result: NOPM against the ideal, and the 90th percentile "
                 "response time the server measured per transaction type (NO New-Order, "
                 "P Payment, OS Order-Status, D Delivery, SL Stock-Level)")


SHORT = {"new_order": "NO", "payment": "P", "order_status": "OS", "delivery": "D",
         "stock_level": "SL"}


def _pooled_table(summary: RunSummary) -> Table:
    rows = []
    for clients in summary.client_counts:
        its = [it for it in summary.iterations if it.clients == clients and "nopm" in it.metrics]
        if its:
            nopms = [it.metrics["nopm"] for it in its]
            sd = statistics.stdev(nopms) if len(nopms) > 1 else math.nan
            rows.append([str(clients), rounded(statistics.fmean(nopms), 0), rounded(sd, 0),
                         rounded(statistics.fmean(it.metrics["tpm"] for it in its), 0),
                         str(len(nopms))])
    return Table(["VUs", "NOPM mean", "NOPM stddev", "TPM mean", "Iterations"], rows)


def _iteration_table(summary: RunSummary, paced: bool) -> Table:
    headers = ["Terminals" if paced else "VUs", "Iteration", "NOPM", "TPM"]
    if paced:
        headers += ["Real/ideal", "Efficiency %", "Latency avg (ms, server)",
                    "p99 (ms, server)"]
    rows = []
    for it in summary.iterations:
        e = it.metrics
        row = [str(it.clients), str(it.iteration), rounded(e.get("nopm"), 0),
               rounded(e.get("tpm"), 0)]
        if paced:
            row += [format_ratio_pct(e.get("real_vs_ideal")),
                    rounded(100 * e["efficiency"] if "efficiency" in e else None, 1),
                    format_ms(e.get("latency_avg_ms")), format_ms(e.get("latency_p99_ms"))]
        rows.append(row + [rounded(e.get("window_s"), 1)])
    return Table(headers + ["Window (s)"], rows, caption="Per iteration")


IterationWindows = dict[tuple[int, int], tuple[Path, Window]]
"""(clients, iteration) -> (iteration directory, snapshots)."""


def iteration_windows(plan: RunPlan, run_dir: Path) -> IterationWindows:
    out: IterationWindows = {}
    for record in plan.records:
        it_dir = (run_dir / record.stdout_file).parent
        window = read_window(plan, it_dir)
        if window is not None:
            out[(record.clients, record.iteration)] = (it_dir, window)
    return out


def _interval_tables(windows: IterationWindows, summary: RunSummary,
                     warehouses: int) -> list[Table]:
    rows = []
    for (clients, iteration), (_, window) in sorted(windows.items()):
        values = [v for _, v in nopm_over_time(window, warehouses)]
        if len(values) < 2:
            continue
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if mean else math.nan
        rows.append([str(clients), str(iteration), str(len(values)),
                     rounded(min(values), 0), rounded(statistics.median(values), 0),
                     rounded(max(values), 0), rounded(100 * cv, 1)])
    if not rows:
        return []
    return [Table(["VUs", "Iteration", "Intervals", "Min NOPM", "Median NOPM", "Max NOPM",
                   "CV %"], rows, caption="NOPM over time: spread of the per-interval NOPM "
                   "(database snapshots every few seconds) inside each measured window")]


def _nopm_timeline(windows: IterationWindows, warehouses: int, path: Path) -> Path | None:
    series = {key: nopm_over_time(window, warehouses) for key, (_, window) in windows.items()}
    if not any(len(points) > 1 for points in series.values()):
        return None
    vus = list({clients for clients, _ in series})
    fig, ax = plt.subplots(figsize=(9, 4))
    for (clients, iteration), points in sorted(series.items()):
        if not points:
            continue
        # Each value holds over its interval: from the previous snapshot to its own.
        ax.step([0.0] + [t for t, _ in points], [points[0][1]] + [v for _, v in points],
                where="pre", lw=1.2, label=f"{clients} VUs #{iteration}",
                **series_style(vus, clients, iteration))
    ax.set(xlabel="seconds since the measured window started", ylabel="NOPM",
           title="New orders per minute, per interval")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def _response_tables(windows: IterationWindows, plan: RunPlan) -> list[Table]:
    if not plan.parameters.get("keying_thinking"):
        return []
    tables = []
    for clients in sorted({c for c, _ in windows}):
        stats = pooled_response_stats([v for (c, _), v in sorted(windows.items()) if c == clients])
        if not stats:
            continue
        tables.append(Table(
            ["Transaction", "Count", "Mean ms", "p50 ms", "p90 ms", "p95 ms", "p99 ms",
             "Max ms", "TPC-C p90 limit", "Within"],
            [[s.transaction, str(s.count), format_ms(s.mean_ms),
              format_ms(s.percentiles_ms["p50"]), format_ms(s.p90_ms),
              format_ms(s.percentiles_ms["p95"]), format_ms(s.percentiles_ms["p99"]),
              format_ms(s.max_ms), f"{s.limit_p90_s:g} s", "yes" if s.within_limit else "NO"]
             for s in stats],
            caption=f"Response time per transaction type, {clients} terminals, all iterations' "
                    "measured windows: the server's duration of each call (pgbench's latency "
                    "includes keying and think times in this mode)"))
    if not tables:
        tables.append(Table(["Response times"], [[
            "not measured: they come from the server log, which pgdyno reads only on the "
            "servers it starts (embedded, --pg-bin)"]]))
    return tables


def _mode(plan: RunPlan) -> str:
    keying = ("keying and think times on" if plan.parameters.get("keying_thinking")
              else "no keying or think times")
    spread = ("each transaction on any warehouse" if plan.parameters.get("all_warehouses")
              else "home warehouse per user")
    return f"{keying}, {spread}"


_CONDITION_KEYS = ("number", "description", "passed", "checked", "violations")


def read_conditions(path: Path) -> list[dict]:
    """The consistency conditions checked after the run; a damaged file is one line naming
    it."""
    data = read_json_file(path, "consistency check")
    conditions = data.get("conditions") if isinstance(data, dict) else None
    if not isinstance(conditions, list) or not all(
            isinstance(c, dict) and all(k in c for k in _CONDITION_KEYS) for c in conditions):
        raise UsageError(f"{path}: not a pgdyno consistency check (conditions: "
                         f"{', '.join(_CONDITION_KEYS)})")
    return conditions
