"""Rebuild a run's summary, plots and reports from its raw files (``pgdyno report RUN``)."""

from __future__ import annotations

import json
from pathlib import Path

from pgdyno import serde
from pgdyno.analysis.pgbench_log import LogStats, summarise_logs
from pgdyno.analysis.summary import (
    SCHEMA_VERSION,
    IterationSummary,
    RunSummary,
    ScriptInfo,
    pool_client_count,
    stability_warnings,
    summarise_iteration,
)
from pgdyno.errors import UsageError
from pgdyno.reports import html, markdown, plots
from pgdyno.results.rundir import RunDirectory, RunPlan


def summarise_run(run_dir: RunDirectory, plan: RunPlan, status: str) -> RunSummary:
    scripts = [ScriptInfo(name=s["name"], weight=s["weight"]) for s in plan.scripts]
    parts: dict[int, list[tuple[IterationSummary, LogStats]]] = {}
    iterations = []
    for record in plan.records:
        paths = [run_dir.path / f for f in record.log_files]
        if not paths:
            continue
        stats = summarise_logs(paths, warmup_s=plan.warmup_s, duration_s=plan.duration_s,
                               has_lag=plan.has_lag_column, has_retries=plan.has_retries_column,
                               latency_limit_ms=plan.latency_limit_ms)
        summary = summarise_iteration(stats, clients=record.clients, iteration=record.iteration,
                                      status=record.status, scripts=scripts,
                                      log_files=record.log_files, pgbench_tps=record.pgbench_tps)
        iterations.append(summary)
        parts.setdefault(record.clients, []).append((summary, stats))
    per_clients = [pool_client_count(c, parts[c], scripts)
                   for c in plan.client_counts if c in parts]
    return RunSummary(schema_version=SCHEMA_VERSION, workload=plan.workload,
                      context=plan.context, status=status, client_counts=plan.client_counts,
                      per_clients=per_clients, iterations=iterations,
                      warnings=stability_warnings(iterations))


def build_reports(path: Path) -> RunSummary:
    run_dir = RunDirectory(Path(path))
    if not (run_dir.raw / "run.json").is_file():
        raise UsageError(f"{path}: not a pgdyno run directory (raw/run.json is missing)")
    manifest = json.loads((run_dir.path / "manifest.json").read_text())
    plan = run_dir.load_plan()
    summary = summarise_run(run_dir, plan, manifest.get("status", "unknown"))
    run_dir.write_json("summary.json", serde.to_dict(summary))
    images = plots.make_plots(summary, run_dir.plots)
    (run_dir.path / "report.md").write_text(markdown.render(summary, manifest, plan, images))
    (run_dir.path / "report.html").write_text(
        html.render(summary, manifest, plan, images, base_dir=run_dir.path))
    return summary
