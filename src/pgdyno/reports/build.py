"""Rebuild a run's summary, plots and reports from its raw files (``pgdyno report RUN``)."""

from __future__ import annotations

import json
import re
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
from pgdyno.analysis.telemetry import analyse_telemetry
from pgdyno.analysis.verdict import decide_bottleneck
from pgdyno.errors import UsageError
from pgdyno.reports import html, markdown, plots
from pgdyno.reports.document import Section, Table, fmt
from pgdyno.reports.telemetry_sections import telemetry_markdown, telemetry_plots
from pgdyno.reports.tprocc import pooled_extras, tprocc_sections, window_metrics
from pgdyno.results.rundir import RunDirectory, RunPlan


def summarise_run(run_dir: RunDirectory, plan: RunPlan, status: str,
                  cpu_count: int = 1) -> RunSummary:
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
        it_dir = (run_dir.path / record.stdout_file).parent
        summary.extras = window_metrics(plan, it_dir)
        if (it_dir / "telemetry" / "meta.json").exists():
            window = (summary.window_start_epoch, summary.window_start_epoch + plan.duration_s)
            summary.telemetry = analyse_telemetry(it_dir, window)
            summary.verdict = decide_bottleneck(summary.telemetry, record.clients, cpu_count)
        iterations.append(summary)
        parts.setdefault(record.clients, []).append((summary, stats))
    per_clients = [pool_client_count(c, parts[c], scripts)
                   for c in plan.client_counts if c in parts]
    run = RunSummary(schema_version=SCHEMA_VERSION, workload=plan.workload,
                     context=plan.context, status=status, client_counts=plan.client_counts,
                     per_clients=per_clients, iterations=iterations,
                     warnings=stability_warnings(iterations))
    run.extras = pooled_extras(run)
    return run


def build_reports(path: Path) -> RunSummary:
    run_dir = RunDirectory(Path(path))
    if not (run_dir.raw / "run.json").is_file():
        raise UsageError(f"{path}: not a pgdyno run directory (raw/run.json is missing)")
    manifest = json.loads((run_dir.path / "manifest.json").read_text())
    plan = run_dir.load_plan()
    cpu_count = int((manifest.get("host") or {}).get("cpu_count") or 1)
    summary = summarise_run(run_dir, plan, manifest.get("status", "unknown"), cpu_count)
    run_dir.write_json("summary.json", serde.to_dict(summary))
    images = plots.make_plots(summary, run_dir.plots)
    extra = tprocc_sections(summary, plan, run_dir.path) + telemetry_report_sections(summary,
                                                                                  run_dir)
    (run_dir.path / "report.md").write_text(
        markdown.render(summary, manifest, plan, images, extra))
    (run_dir.path / "report.html").write_text(
        html.render(summary, manifest, plan, images, extra, base_dir=run_dir.path))
    return summary


def telemetry_report_sections(summary: RunSummary, run_dir: RunDirectory) -> list[Section]:
    """A verdict table for every iteration, then full telemetry for one per client count.

    The iteration shown in full is the one with the median TPS at that client count:
    the most typical, not the best.
    """
    observed = [it for it in summary.iterations if it.telemetry is not None]
    if not observed:
        return []
    rows = []
    for it in observed:
        v = it.verdict
        rows.append([str(it.clients), str(it.iteration), fmt(it.tps_mean, 1),
                     v.label if v else "–", (v.evidence[0] if v and v.evidence else "")])
    sections = [Section("Bottleneck verdicts", tables=[Table(
        ["Clients", "Iteration", "TPS", "Verdict", "Main evidence"], rows)])]
    for clients in summary.client_counts:
        runs = sorted((it for it in observed if it.clients == clients), key=lambda i: i.tps_mean)
        if not runs:
            continue
        it = runs[(len(runs) - 1) // 2]
        assert it.telemetry is not None
        label = f"c{it.clients}-i{it.iteration}"
        tps = [(it.window_start_epoch - it.warmup_s + p.t_s, p.tps) for p in it.timeline]
        made = telemetry_plots(it.telemetry, run_dir.plots / label, tps)
        names = {k: str(v.relative_to(run_dir.path)) for k, v in made.items()}
        sections.append(Section(
            f"Telemetry: {it.clients} clients (iteration {it.iteration}, median TPS)",
            markdown=_demote(telemetry_markdown(it.telemetry, it.verdict, names))))
    return sections


def _demote(text: str) -> str:
    """Nest another module's Markdown headings one level under the section holding them."""
    return re.sub(r"^(#{1,5}) ", r"#\1 ", text, flags=re.MULTILINE)
