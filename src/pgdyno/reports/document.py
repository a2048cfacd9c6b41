"""The report as data: sections of paragraphs, tables and images, built once from a summary.

Markdown and HTML renderers walk the same ``Document``, so the two formats can never
disagree about a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pgdyno.analysis.summary import RunSummary, five_second_table
from pgdyno.results.manifest import BenchOptions
from pgdyno.results.rundir import RunPlan

PCT_COLUMNS = ("p50", "p75", "p80", "p90", "p95", "p99", "p99.9")


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Section:
    title: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    """(caption, path relative to the run directory)."""
    preformatted: list[str] = field(default_factory=list)
    markdown: str = ""
    """Markdown produced by another module (telemetry sections)."""


@dataclass
class Document:
    title: str
    sections: list[Section]


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


@dataclass
class RunView:
    """What the run report shows besides the summary: its record and options."""

    manifest: dict
    plan: RunPlan
    opts: BenchOptions
    dataset: str
    """The workload's words for its dataset: "scale 10", "10 warehouses"."""


def build_document(summary: RunSummary, run: RunView, images: dict[str, str],
                   insights: list[Section] | tuple = (), transactions: bool = True) -> Document:
    """The report; ``insights`` (the workload's own, telemetry, verdicts) go after the
    throughput and latency. ``transactions``: whether the pgbench-style transaction sections
    apply (a program workload such as cpu brings all its figures in ``insights``)."""
    sections = [_overview(summary, run, transactions), _environment(run)]
    if transactions:
        sections += [_tps(summary, images), _latency(summary, images)]
        if run.opts.rate_tps is not None:
            sections.append(_fixed_rate(summary, run.opts))
        if any(c.scripts for c in summary.per_clients):
            sections.append(_scripts(summary))
    sections += list(insights)
    if transactions:
        sections += [_iterations(summary), _timeline(summary)]
    if summary.warnings:
        sections.append(_warnings(summary))
    sections.append(_files(run.manifest, run.plan))
    return Document(title=f"pgdyno: {run.plan.workload} on {run.plan.context}",
                    sections=sections)


def _overview(summary: RunSummary, run: RunView, transactions: bool) -> Section:
    manifest = run.manifest
    status = manifest.get("status", "unknown")
    paras = [f"Status **{status}**, {manifest.get('started_at')} → {manifest.get('ended_at')}."]
    if manifest.get("reason"):
        paras.append(f"Reason: {manifest['reason']}")
    paras += [f"Note: {n}" for n in manifest.get("notes", [])]
    if not transactions:
        return Section("Summary", paragraphs=paras)
    rows = [[str(c.clients), fmt(c.tps_mean, 1), fmt(c.tps_iteration_stddev, 1),
             fmt(c.latency.mean_ms, 3), fmt(c.latency.percentiles_ms.get("p99"), 3),
             str(c.transactions), str(c.failed)] for c in summary.per_clients]
    table = Table(["Clients", "TPS", "TPS stddev (iterations)", "Latency avg (ms)",
                   "p99 (ms)", "Transactions", "Failed"], rows)
    return Section("Summary", paragraphs=paras, tables=[table])


def _environment(run: RunView) -> Section:
    manifest, plan, opts = run.manifest, run.plan, run.opts
    host = manifest.get("host") or {}
    server = manifest.get("server") or {}
    target = manifest.get("target") or {}
    config = manifest.get("config") or {}
    dataset = manifest.get("dataset") or {}
    ram_gb = (host.get("ram_bytes") or 0) / 2**30
    env_rows = [
        ["Host", f"{host.get('hostname')} ({host.get('os')})"],
        ["CPU", f"{host.get('cpu_model')} × {host.get('cpu_count')}"],
        ["RAM", f"{ram_gb:.1f} GiB"],
        ["Kernel", str(host.get("kernel"))],
        ["PostgreSQL", str(server.get("version", "–"))],
    ]
    if target:
        env_rows += [
            ["Target", f"{target.get('kind')} ({target.get('pg_bin')})"],
            ["Connection", str(manifest.get("connection") or "–")],
            ["Config", str(config.get("name", "default"))],
        ]
    scripts = ", ".join(f"{s['name']}@{s['weight']}" for s in plan.scripts)
    env_rows.append(["Workload", plan.workload + (f": {scripts}" if scripts else "")])
    if run.dataset:
        built = ("reused" if dataset.get("reused") else "built") if dataset else ""
        env_rows.append(["Dataset", run.dataset + (f" ({built})" if built else "")])
    env_rows += [
        ["Clients", ", ".join(str(c) for c in opts.clients)],
        ["Duration / warm-up", f"{opts.duration_s} s measured after {opts.warmup_s} s warm-up"],
        ["Iterations", str(opts.iterations)],
    ]
    if target:
        env_rows += [["Protocol", opts.protocol], ["Cache", opts.cache]]
    if opts.rate_tps is not None:
        env_rows.append(["Fixed rate", f"{opts.rate_tps:g} tps, latency limit "
                                       f"{opts.latency_limit_ms or '–'} ms"])
    settings = server.get("non_default_settings") or {}
    setting_rows = [[k, v, (config.get("sources") or {}).get(k, "")]
                    for k, v in settings.items()]
    return Section("Environment and configuration", tables=[
        Table(["Item", "Value"], env_rows),
        Table(["Setting", "Value", "Source / rationale"], setting_rows,
              caption="Non-default server settings (pg_settings, source not default)"),
    ])


def _tps(summary: RunSummary, images: dict[str, str]) -> Section:
    rows = [[str(c.clients), fmt(c.tps_mean, 1), fmt(c.tps_median, 1), fmt(c.tps_stddev, 1),
             f"{fmt(c.tps_iteration_mean, 1)} ± {fmt(c.tps_iteration_stddev, 1)}",
             str(c.iterations)] for c in summary.per_clients]
    section = Section("Transactions per second", tables=[Table(
        ["Clients", "Average", "Median", "StdDev", "Mean ± stddev across iterations",
         "Iterations"], rows,
        caption="Average, median and stddev over every 1 s interval of every iteration")])
    for name, caption in (("tps_timeline", "TPS over time"),
                          ("scaling", "TPS and p99 latency against clients")):
        if name in images:
            section.images.append((caption, images[name]))
    return section


def _latency(summary: RunSummary, images: dict[str, str]) -> Section:
    basic = [[str(c.clients), fmt(c.latency.mean_ms, 3), fmt(c.latency.median_ms, 3),
              fmt(c.latency.stddev_ms, 3)] for c in summary.per_clients]
    pct = [[str(c.clients), *[fmt(c.latency.percentiles_ms.get(k), 3) for k in PCT_COLUMNS],
            fmt(c.latency.max_ms, 3)] for c in summary.per_clients]
    section = Section("Transaction latency (ms)", tables=[
        Table(["Clients", "Average", "Median", "StdDev"], basic),
        Table(["Clients", "50th", "75th", "80th", "90th", "95th", "99th", "99.9th", "Max"], pct,
              caption="Percentiles (nearest rank) of every successful transaction"),
    ])
    for name, caption in (("latency_histogram", "Latency histogram"),
                          ("latency_percentiles", "Latency percentiles"),
                          ("latency_timeline", "Latency over time")):
        if name in images:
            section.images.append((caption, images[name]))
    return section


def _fixed_rate(summary: RunSummary, opts: BenchOptions) -> Section:
    rows = []
    for c in summary.per_clients:
        lag = c.lag
        rows.append([str(c.clients), f"{opts.rate_tps:g}", fmt(c.tps_mean, 1),
                     fmt(lag.mean_ms if lag else None, 3),
                     fmt(lag.percentiles_ms.get("p99") if lag else None, 3),
                     fmt(lag.max_ms if lag else None, 3), str(c.skipped),
                     str(sum(it.late for it in summary.iterations if it.clients == c.clients))])
    return Section("Fixed-rate schedule", paragraphs=[
        "Latency is measured from each transaction's scheduled start (pgbench -R), so stalls "
        "are not hidden by the client waiting (no coordinated omission)."],
        tables=[Table(["Clients", "Target TPS", "Achieved TPS", "Lag avg (ms)", "Lag p99 (ms)",
                       "Lag max (ms)", "Skipped", "Late"], rows)])


def _scripts(summary: RunSummary) -> Section:
    rows = []
    for c in summary.per_clients:
        for s in c.scripts:
            rows.append([str(c.clients), s.name, str(s.weight), str(s.transactions),
                         fmt(s.tps, 1), fmt(s.latency.mean_ms, 3),
                         fmt(s.latency.percentiles_ms.get("p90"), 3),
                         fmt(s.latency.percentiles_ms.get("p99"), 3), str(s.failed)])
    return Section("Per script", tables=[Table(
        ["Clients", "Script", "Weight", "Transactions", "TPS", "Latency avg (ms)", "p90 (ms)",
         "p99 (ms)", "Failed"], rows)])


def _iterations(summary: RunSummary) -> Section:
    rows = [[str(it.clients), str(it.iteration), it.status, fmt(it.tps_mean, 1),
             fmt(it.tps_median, 1), fmt(it.tps_stddev, 1), fmt(it.latency.mean_ms, 3),
             fmt(it.latency.percentiles_ms.get("p99"), 3), str(it.failed), str(it.retried),
             fmt(it.pgbench_tps, 1)] for it in summary.iterations]
    return Section("Iterations", tables=[Table(
        ["Clients", "Iteration", "Status", "TPS avg", "TPS median", "TPS stddev",
         "Latency avg (ms)", "p99 (ms)", "Failed", "Retried", "pgbench tps (incl. warm-up)"],
        rows)])


def _timeline(summary: RunSummary) -> Section:
    section = Section("Timeline (5 s)", paragraphs=[
        "Mean TPS per 5 s block since the first transaction, warm-up included."])
    for it in summary.iterations:
        lines = [f"{end:>4}s: {tps:>10,.0f} TPS" for end, tps in five_second_table(it.timeline)]
        section.preformatted.append(f"{it.clients} clients, iteration {it.iteration}\n"
                                    + "\n".join(lines))
    return section


def _warnings(summary: RunSummary) -> Section:
    rows = [[w.code, w.message, w.advice] for w in summary.warnings]
    return Section("Stability warnings", tables=[Table(["Code", "Finding", "Advice"], rows)])


def _files(manifest: dict, plan: RunPlan) -> Section:
    rows = [[f"{r.clients} clients #{r.iteration}", r.status, ", ".join(r.log_files[:3])
             + (" …" if len(r.log_files) > 3 else "")] for r in plan.records]
    return Section("Commands and files", tables=[Table(["Iteration", "Status", "Logs"], rows)],
                   preformatted=["\n".join(manifest.get("commands", []))])
