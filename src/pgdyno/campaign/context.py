"""The figures of the context report (an instance report, with a scaling projection).

``build_context`` turns a context's runs into a ``ContextReport`` of plain figures, each
carrying the run it came from: the best config and every config against the baseline
(``ranking``), the journal, the validation and scaling checks, prices (``prices``) projected
from the TPS per vCPU, the size projection over other machines (``sizes``), the CPU baseline
(``cpu_baseline``, ``pgdyno bench cpu``) and the recommendations (``recommendations``).
Nothing here measures or renders: :mod:`pgdyno.campaign.context_report` turns the figures
into the report's Markdown, HTML and JSON files.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno import serde
from pgdyno.campaign.cpu_baseline import CpuBaseline, cpu_baseline
from pgdyno.campaign.journal import (
    Headline,
    JournalEntry,
    build_journal,
    headline,
    place_os_events,
)
from pgdyno.campaign.prices import PriceRow, price_rows
from pgdyno.campaign.ranking import (
    Finding,
    best_config,
    findings,
    like_with_like,
    on_server,
)
from pgdyno.campaign.recommendations import Recommendation, recommend
from pgdyno.campaign.scaling import ScalingCheck, load_scaling
from pgdyno.campaign.sizes import SizeScaling, fit_sizes
from pgdyno.campaign.validation import ValidationResult, load_validation
from pgdyno.compare.runs import RunData, context_runs
from pgdyno.provision.journal import ProvisionEvent, read_events
from pgdyno.runner.outcome import outcome_of
from pgdyno.workloads import registry
from pgdyno.workloads.base import headline_of


@dataclass
class WorkloadRow:
    """One workload on this hardware (a row of the executive summary): its best run."""

    context: str
    workload: str
    headline_label: str
    headline_value: float
    headline_unit: str
    qps: float | None
    latency_avg_ms: float | None
    bottleneck: str | None
    clients: int
    run: str


@dataclass
class ContextReport:
    context: str
    runs: list[RunData]
    best: RunData | None
    journal: list[JournalEntry]
    findings: list[Finding]
    baseline_label: str
    validation: ValidationResult | None
    scaling: ScalingCheck | None
    hardware: Any | None
    """The HardwareProfile prices come from (catalogue or file), if any."""
    per_core_tps: float | None
    host_vcpus: int | None
    cpu_baseline: CpuBaseline | None = None
    best_tps: float | None = None
    """Mean TPS of the best config's runs (one value per run, at its best client count):
    a config's typical result, not its luckiest run. None when the headline is not TPS."""
    best_value: float | None = None
    """The same mean of the best config's runs on their headline metric, whatever it is."""
    best_headline: Headline | None = None
    """The best (median) run's headline: which metric, its label, unit and direction."""
    best_runs: list[RunData] = field(default_factory=list)
    prices: list[PriceRow] = field(default_factory=list)
    against: ContextReport | None = None
    notes: list[str] = field(default_factory=list)
    ranked_on: str = ""
    """The workload parameters the configs were ranked at (like with like)."""
    hardware_overview: list[WorkloadRow] = field(default_factory=list)
    os_events_after: list[ProvisionEvent] = field(default_factory=list)
    """OS changes (provision apply, verify, revert) after the last run started."""
    size_scaling: SizeScaling | None = None
    """The workload measured on other machines of the results tree (``pgdyno fleet``)."""
    recommendations: list[Recommendation] = field(default_factory=list)


def build_context(results_dir: Path, context: str, hardware: str | None = None,
                  against: str | None = None) -> ContextReport:
    runs = context_runs(results_dir, context)
    # Every context on this hardware, read once: the CPU baseline and the overview use them.
    siblings = {name: runs if name == context else context_runs(results_dir, name)
                for name in hardware_contexts(results_dir, context)}
    others = sorted((r for name, rs in siblings.items() if name != context for r in rs),
                    key=lambda r: r.started_at)
    baseline = cpu_baseline(runs) or cpu_baseline(others)
    # Configs are ranked on their runs' headline (database throughput, or the workload's
    # declared figure): a baseline without a server (cpu, fio) measures the host, not a
    # config.
    ok = [r for r in runs if r.status == "ok" and headline(r) is not None and on_server(r)]
    regular = [r for r in ok if not r.role.get("validation") and not r.role.get("scaling_check")]
    comparable, ranked_on, left_out = like_with_like(regular or ok)
    best, best_runs, best_value = best_config(comparable)
    best_head = headline(best) if best is not None else None
    best_tps = best_value if best_head is not None and best_head.is_tps else None
    baseline_label, against_baseline = findings(comparable)
    validation = next((v for r in reversed(runs) if (v := load_validation(r.path))), None)
    scaling = next((s for r in reversed(runs) if (s := load_scaling(r.path))), None)
    host_vcpus = (best.manifest.get("host") or {}).get("cpu_count") if best else None
    if best is not None and best.role.get("server_cpus"):  # a pinned scaling-check run
        host_vcpus = len(best.role["server_cpus"])
    per_core = best_tps / host_vcpus if best_tps and host_vcpus else None
    os_events = read_events(results_dir, context)
    report = ContextReport(context=context, runs=runs, best=best,
                           journal=build_journal(runs, os_events),
                           os_events_after=place_os_events(runs, os_events)[1],
                           findings=against_baseline, baseline_label=baseline_label,
                           validation=validation, scaling=scaling,
                           hardware=_hardware(hardware, runs), per_core_tps=per_core,
                           host_vcpus=host_vcpus, best_tps=best_tps, best_runs=best_runs,
                           best_value=best_value, best_headline=best_head,
                           cpu_baseline=baseline, ranked_on=ranked_on,
                           hardware_overview=hardware_overview(siblings))
    if left_out:
        report.notes.append(
            f"{left_out} finished run(s) with other workload parameters were not ranked: "
            f"configs are compared only at {ranked_on}.")
    report.size_scaling = fit_sizes(results_dir, context, best, best_tps)
    report.prices = price_rows(best, best_tps, per_core, host_vcpus, report.hardware,
                               report.size_scaling, baseline)
    report.recommendations = recommend(against_baseline, report.journal, best_tps, validation,
                                       scaling)
    if against:
        report.against = build_context(results_dir, against, hardware=None)
    return report


def hardware_contexts(results_dir: Path, context: str) -> list[str]:
    """The contexts measured on this context's hardware (named HARDWARE--*); none for a
    context not named that way. A CPU baseline measured once (``pgdyno bench cpu``, context
    HARDWARE--cpu) serves them all."""
    if "--" not in context:
        return []
    hardware = context.split("--")[0]
    return [f.name for f in sorted(results_dir.glob(f"{hardware}--*")) if f.is_dir()]


def hardware_overview(siblings: dict[str, list[RunData]]) -> list[WorkloadRow]:
    """Every workload measured on this hardware (its contexts' runs by name): the best
    finished run of each, headline, QPS, average latency and bottleneck."""
    rows = [_best_of_context(name, runs) for name, runs in siblings.items()]
    return [r for r in rows if r is not None]


def _best_of_context(context: str, runs: list[RunData]) -> WorkloadRow | None:
    best: tuple[float, WorkloadRow] | None = None
    for run in runs:
        if run.status != "ok" or run.summary is None or run.workload not in registry.names():
            continue
        workload = registry.get(run.workload)
        head = headline_of(run.summary, workload.metrics)
        if head is None:
            continue
        outcome = outcome_of(run.summary, head, "")
        at = [it for it in run.summary.iterations
              if it.clients == head.clients and it.status == "ok"]
        qps = [it.metrics["qps"] for it in at if "qps" in it.metrics]
        pooled = run.clients(head.clients)
        row = WorkloadRow(
            context=context, workload=run.workload, headline_label=head.label,
            headline_value=head.value, headline_unit=head.unit,
            qps=statistics.fmean(qps) if qps else None,
            latency_avg_ms=pooled.latency.mean_ms if pooled and pooled.latency.count else None,
            bottleneck=outcome.verdict, clients=head.clients, run=str(run.path))
        direction = next((m.direction for m in workload.metrics if m.name == head.metric), 1)
        score = (direction or 1) * head.value
        if best is None or score > best[0]:
            best = (score, row)
    return best[1] if best else None


def _hardware(name: str | None, runs: list[RunData]) -> Any | None:
    name = name or next((r.role.get("hardware") for r in runs if r.role.get("hardware")), None)
    if not name:
        return None
    from pgdyno.config import load_hardware

    return load_hardware(name)


def journal_context(results_dir: Path, context: str) -> ContextReport:
    """A report holding only the runs and their journal (``pgdyno journal CONTEXT``): the
    journal shows no findings or prices, and computing them runs a comparison per config."""
    runs = context_runs(results_dir, context)
    os_events = read_events(results_dir, context)
    return ContextReport(context=context, runs=runs, best=None,
                         journal=build_journal(runs, os_events),
                         findings=[], baseline_label="", validation=None, scaling=None,
                         hardware=None, per_core_tps=None, host_vcpus=None,
                         os_events_after=place_os_events(runs, os_events)[1])


def report_json(rep: ContextReport) -> dict[str, Any]:
    """The figures as ``context-report.json`` stores them (schema_version'd)."""
    return {
        "schema_version": 1, "context": rep.context,
        "runs": [str(r.path) for r in rep.runs],
        "best_run": str(rep.best.path) if rep.best else None,
        "per_core_tps": rep.per_core_tps, "host_vcpus": rep.host_vcpus,
        "headline": ({"metric": h.metric, "label": h.label, "unit": h.unit,
                      "direction": h.direction, "best_config_mean": rep.best_value}
                     if (h := rep.best_headline) is not None else None),
        "cpu_baseline": serde.to_dict(rep.cpu_baseline) if rep.cpu_baseline else None,
        "ranked_on": rep.ranked_on,
        "hardware_overview": serde.to_dict(rep.hardware_overview),
        "findings": serde.to_dict(rep.findings),
        "prices": [{**serde.to_dict(p), "tps_per_usd": p.tps_per_usd,
                    "spot_tps_per_usd": p.spot_tps_per_usd} for p in rep.prices],
        "validation": serde.to_dict(rep.validation) if rep.validation else None,
        "scaling": serde.to_dict(rep.scaling) if rep.scaling else None,
        "size_scaling": serde.to_dict(rep.size_scaling) if rep.size_scaling else None,
        "recommendations": serde.to_dict(rep.recommendations),
    }
