"""The figures of the context report (seed 002, with seed 004's scaling projection).

``build_context`` turns a context's runs into a ``ContextReport`` of plain figures, each
carrying the run it came from: the best config, every config against the baseline, the
journal, the validation and scaling checks, and prices projected from the TPS per vCPU
(adjusted by the CPU baseline, ``pgdyno bench cpu``, when the context holds one and the
instance's profile has its own per-core figure).
Configs are ranked on each run's headline (``journal.headline``): pooled TPS for workloads
with per-client rows, else the workload's declared headline metric in its direction (the
lowest TPROC-H geometric mean of query times wins); prices and the projection need a TPS.
Nothing here measures or renders: :mod:`pgdyno.campaign.context_report` turns the figures
into the report's Markdown, HTML and JSON files.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pgdyno import serde
from pgdyno.campaign.journal import (
    Headline,
    JournalEntry,
    build_journal,
    headline,
    place_os_events,
)
from pgdyno.campaign.scaling import ScalingCheck, load_scaling
from pgdyno.campaign.validation import ValidationResult, load_validation
from pgdyno.compare.core import compare_runs
from pgdyno.compare.model import MetricComparison
from pgdyno.compare.runs import RunData, context_runs
from pgdyno.provision.journal import ProvisionEvent, read_events
from pgdyno.runner.outcome import outcome_of
from pgdyno.workloads import registry
from pgdyno.workloads.base import headline_of

BASELINE_PRIME = 20000
"""The --cpu-max-prime of the per-core figures in hardware profiles (bench cpu's default)."""


@dataclass
class CpuBaseline:
    """The host's per-core CPU speed measured by a CPU baseline run in the context."""

    events_per_s_per_core: float
    """Mean over the run's iterations at its most threads (threads = cores by default)."""
    threads: int
    max_prime: int
    run: str


@dataclass
class MeasuredSize:
    """The same workload measured on another machine (a fleet host, another instance size):
    the best config's TPS in its own context, at its vCPUs."""

    context: str
    hardware: str
    """The context's machine name (``HARDWARE--workload``): an inventory host, a profile."""
    vcpus: int
    cpu_model: str
    tps: float
    run: str


@dataclass
class SizeScaling:
    """TPS against vCPUs measured on several machines with one CPU model, fitted as
    ``tps = coefficient × vcpus ** exponent`` (least squares on the logarithms; exponent 1 is
    linear scaling, below 1 sub-linear). Seed 004 guessed linear; this is measured."""

    points: list[MeasuredSize] = field(default_factory=list)
    """Every machine measured (this one included), fitted or not."""
    fitted: list[str] = field(default_factory=list)
    """Contexts of the points in the fit: this host's CPU model, like-with-like options."""
    exponent: float | None = None
    coefficient: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def projection_exponent(self) -> float | None:
        """The exponent projections use: the fit's, at most 1. Super-linear growth between
        small sizes (a 1-vCPU machine also running the client) would not carry on, and
        extrapolated it would promise absurd figures."""
        return None if self.exponent is None else min(self.exponent, 1.0)

    def tps_at(self, vcpus: int) -> float | None:
        """TPS projected at ``vcpus`` through the fitted curve, anchored at the measured
        point nearest in size (so a measured size is projected as measured)."""
        b = self.projection_exponent
        fitted = [p for p in self.points if p.context in self.fitted]
        if b is None or not fitted:
            return None
        anchor = min(fitted, key=lambda p: (abs(math.log(p.vcpus / vcpus)), -p.vcpus))
        return anchor.tps * (vcpus / anchor.vcpus) ** b

    def extrapolated(self, vcpus: int) -> bool:
        sizes = [p.vcpus for p in self.points if p.context in self.fitted]
        return bool(sizes) and not min(sizes) <= vcpus <= max(sizes)


@dataclass
class PriceRow:
    instance: str
    vcpus: int
    tps: float
    tps_basis: str
    """``measured`` (this host), ``measured (this host is one)`` (same vCPUs and CPU model),
    ``measured on HOST`` (another machine of the results tree with those vCPUs and CPU),
    ``projected from measured sizes`` (the fit of ``SizeScaling``), ``projected, same core
    speed`` (per-core × vCPUs) or ``projected, CPU-adjusted`` (× the instance's events/s per
    core over this host's)."""
    price_month_usd: float | None
    spot_month_usd: float | None

    @property
    def tps_per_usd(self) -> float | None:
        return self.tps / self.price_month_usd if self.price_month_usd else None

    @property
    def spot_tps_per_usd(self) -> float | None:
        return self.tps / self.spot_month_usd if self.spot_month_usd else None


@dataclass
class Finding:
    """One config's metric against the baseline config."""

    config: str
    comparison: MetricComparison
    headline: bool = False
    """The comparison of the runs' headline metric (TPS, or the workload's declared one)."""

    @property
    def is_tps(self) -> bool:
        return self.comparison.metric == "tps"


@dataclass
class WorkloadRow:
    """One workload on this hardware (seed 004's executive summary): its best run."""

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


def build_context(results_dir: Path, context: str, hardware: str | None = None,
                  against: str | None = None) -> ContextReport:
    runs = context_runs(results_dir, context)
    # Every context on this hardware, read once: the CPU baseline and the overview use them.
    siblings = {name: runs if name == context else context_runs(results_dir, name)
                for name in hardware_contexts(results_dir, context)}
    others = sorted((r for name, rs in siblings.items() if name != context for r in rs),
                    key=lambda r: r.started_at)
    cpu_baseline = _cpu_baseline(runs) or _cpu_baseline(others)
    # Configs are ranked on their runs' headline (database throughput, or the workload's
    # declared figure): a baseline without a server (cpu, fio) measures the host, not a
    # config.
    ok = [r for r in runs if r.status == "ok" and headline(r) is not None and _on_server(r)]
    regular = [r for r in ok if not r.role.get("validation") and not r.role.get("scaling_check")]
    comparable, ranked_on, left_out = like_with_like(regular or ok)
    best, best_runs, best_value = _best_config(comparable)
    best_head = headline(best) if best is not None else None
    best_tps = best_value if best_head is not None and best_head.is_tps else None
    baseline_label, findings = _findings(comparable)
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
                           findings=findings, baseline_label=baseline_label,
                           validation=validation, scaling=scaling,
                           hardware=_hardware(hardware, runs), per_core_tps=per_core,
                           host_vcpus=host_vcpus, best_tps=best_tps, best_runs=best_runs,
                           best_value=best_value, best_headline=best_head,
                           cpu_baseline=cpu_baseline, ranked_on=ranked_on,
                           hardware_overview=hardware_overview(siblings))
    if left_out:
        report.notes.append(
            f"{left_out} finished run(s) with other workload parameters were not ranked: "
            f"configs are compared only at {ranked_on}.")
    report.size_scaling = size_scaling(results_dir, report)
    report.prices = _prices(report)
    if against:
        report.against = build_context(results_dir, against, hardware=None)
    return report


def size_scaling(results_dir: Path, report: ContextReport) -> SizeScaling | None:
    """This workload's best config measured on the other machines of the results tree
    (contexts ``OTHER--WORKLOAD``, as `pgdyno fleet` names them), with like-with-like
    parameters; fitted against vCPUs over the machines with this host's CPU model. None
    when no other machine measured it (or the headline is not TPS)."""
    if report.best is None or report.best_tps is None or "--" not in report.context:
        return None
    hardware, workload = report.context.split("--", 1)
    key = parameters_key(report.best)
    here = _measured_size(report.context, report.best, report.best_tps)
    out = SizeScaling(points=[here])
    for ctx_dir in sorted(results_dir.glob(f"*--{workload}")):
        if ctx_dir.name == report.context or not ctx_dir.is_dir():
            continue
        runs = [r for r in context_runs(results_dir, ctx_dir.name)
                if r.status == "ok" and _on_server(r) and not r.role.get("validation")
                and not r.role.get("scaling_check")]
        alike = [r for r in runs if parameters_key(r) == key]
        best, _, value = _best_config(alike)
        head = headline(best) if best is not None else None
        if best is None or head is None or not head.is_tps or value is None:
            if runs:
                out.notes.append(f"{ctx_dir.name}: no finished run at "
                                 f"{describe_parameters(report.best)}")
            continue
        out.points.append(_measured_size(ctx_dir.name, best, value))
    if len(out.points) < 2:
        return None
    same = [p for p in out.points if p.vcpus > 0 and same_cpu(p.cpu_model, here.cpu_model)]
    out.notes += [f"{p.context}: not in the fit (CPU {p.cpu_model or 'unknown'}, not this "
                  "host's)" for p in out.points if p not in same]
    if len({p.vcpus for p in same}) >= 2:
        slope, intercept = np.polyfit(np.log([p.vcpus for p in same]),
                                      np.log([p.tps for p in same]), 1)
        out.exponent, out.coefficient = float(slope), float(np.exp(intercept))
        out.fitted = [p.context for p in same]
    else:
        out.notes.append("one vCPU count with this host's CPU model: nothing to fit")
    return out


def _measured_size(context: str, run: RunData, tps: float) -> MeasuredSize:
    host = run.manifest.get("host") or {}
    vcpus = len(run.role["server_cpus"]) if run.role.get("server_cpus") else \
        int(host.get("cpu_count") or 0)
    return MeasuredSize(context=context, hardware=context.split("--")[0], vcpus=vcpus,
                        cpu_model=str(host.get("cpu_model") or ""), tps=tps, run=str(run.path))


def _on_server(run: RunData) -> bool:
    return run.workload in registry.names() and registry.get(run.workload).needs_server


def _cpu_baseline(runs: list[RunData]) -> CpuBaseline | None:
    """The latest finished run that measured the host's per-core speed, if any."""
    for run in reversed(runs):
        metric = (registry.get(run.workload).cpu_baseline_metric
                  if run.workload in registry.names() else None)
        its = [it for it in (run.summary.iterations if run.summary else [])
               if it.status == "ok" and metric in it.metrics]
        if run.status != "ok" or not its:
            continue
        threads = max(it.clients for it in its)
        options = (run.manifest.get("options") or {}).get("workload_options") or {}
        return CpuBaseline(
            events_per_s_per_core=statistics.fmean(it.metrics[metric]
                                                   for it in its if it.clients == threads),
            threads=threads, max_prime=int(options.get("max_prime", BASELINE_PRIME)),
            run=str(run.path))
    return None


def parameters_key(run: RunData) -> str:
    """What must match for two runs' headlines to be comparable: the workload and its options
    (scale, warehouses, mix...), the client counts, the measured and warm-up seconds, the
    rate."""
    o = run.manifest.get("options") or {}
    return json.dumps({"workload": run.workload, "workload_options": o.get("workload_options"),
                       "clients": o.get("clients"), "duration_s": o.get("duration_s"),
                       "warmup_s": o.get("warmup_s"), "rate_tps": o.get("rate_tps")},
                      sort_keys=True)


def describe_parameters(run: RunData) -> str:
    o = run.manifest.get("options") or {}
    words = [run.workload]
    words += [f"{k} {v}" for k, v in sorted((o.get("workload_options") or {}).items())
              if isinstance(v, int | float | str) and not isinstance(v, bool) and v != ""]
    words.append(f"clients {','.join(str(c) for c in o.get('clients') or [])}")
    words.append(f"{o.get('duration_s')} s measured")
    if o.get("rate_tps"):
        words.append(f"rate {o['rate_tps']:g} tps")
    return ", ".join(words)


def like_with_like(runs: list[RunData]) -> tuple[list[RunData], str, int]:
    """The runs the configs are ranked over: those sharing one set of workload parameters,
    the set measured with the most configs (then the most runs, then the latest); with how
    it reads and how many runs were left out."""
    groups: dict[str, list[RunData]] = {}
    for r in runs:
        groups.setdefault(parameters_key(r), []).append(r)
    if not groups:
        return [], "", 0
    chosen = max(groups.values(), key=lambda g: (len({r.label for r in g}), len(g),
                                                 max(r.started_at for r in g)))
    return chosen, describe_parameters(chosen[0]), len(runs) - len(chosen)


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


def _best_config(runs: list[RunData]) -> tuple[RunData | None, list[RunData], float | None]:
    """The config with the best mean headline over its runs (the highest TPS, the lowest
    TPROC-H geometric mean: the metric's direction), its runs and that mean, and its
    median run. ``runs`` share one workload and its parameters (``like_with_like``)."""
    heads = {id(r): h for r in runs if (h := headline(r)) is not None}
    by_label: dict[str, list[RunData]] = {}
    for r in runs:
        if id(r) in heads:
            by_label.setdefault(r.label, []).append(r)
    if not by_label:
        return None, [], None
    def mean(group: list[RunData]) -> float:
        return statistics.fmean(heads[id(r)].value for r in group)
    def score(group: list[RunData]) -> float:
        return (heads[id(group[0])].direction or 1) * mean(group)
    label = max(by_label, key=lambda k: score(by_label[k]))
    group = by_label[label]
    ranked = sorted(group, key=lambda r: heads[id(r)].value)
    return ranked[(len(ranked) - 1) // 2], group, mean(group)


def _findings(runs: list[RunData]) -> tuple[str, list[Finding]]:
    """Every other config against the baseline (``default`` when present, else the first)."""
    labels = config_labels(runs)
    if len(labels) < 2:
        return (labels[0] if labels else ""), []
    base = next((lab for lab in labels if lab == "default"), labels[0])
    out: list[Finding] = []
    for label in labels:
        if label == base:
            continue
        for workload in sorted({r.workload for r in runs}):
            a = [r for r in runs if r.label == base and r.workload == workload]
            b = [r for r in runs if r.label == label and r.workload == workload]
            if not a or not b:
                continue
            cmp = compare_runs(a, b, baseline_label=base, candidate_label=label)
            head = headline(a[0])
            if head is None or head.is_tps:
                wanted: tuple[str, ...] = ("tps", "latency_avg_ms", "latency_p99_ms")
            else:
                wanted = (head.metric,)
            out += [Finding(label, m, headline=m.metric == (head.metric if head else "tps"))
                    for m in cmp.metrics if m.metric in wanted]
    return base, out


def _hardware(name: str | None, runs: list[RunData]) -> Any | None:
    name = name or next((r.role.get("hardware") for r in runs if r.role.get("hardware")), None)
    if not name:
        return None
    from pgdyno.config import load_hardware

    return load_hardware(name)


def _catalogue() -> list[Any]:
    from pgdyno.config import load_hardware
    from pgdyno.config.profiles import catalogue_names

    return [load_hardware(n) for n in catalogue_names()]


def _prices(report: ContextReport) -> list[PriceRow]:
    if report.best is None or report.per_core_tps is None:
        return []
    measured = report.best_tps
    profiles = [report.hardware] if report.hardware is not None else []
    family = report.hardware.name.split(".")[0] if report.hardware is not None else None
    for p in _catalogue():
        if (family is None or p.name.startswith(family)) and \
                all(p.name != q.name for q in profiles):
            profiles.append(p)
    host = (report.best.manifest.get("host") or {})
    host_cpu = str(host.get("cpu_model") or "")
    # The figure measured here heads the table as what it is: this host, no price.
    rows = [PriceRow(instance=f"this host ({host_cpu or 'CPU unknown'})",
                     vcpus=report.host_vcpus or 0, tps=measured, tps_basis="measured",
                     price_month_usd=None, spot_month_usd=None)]
    sizes = report.size_scaling
    for p in sorted(profiles, key=lambda p: p.vcpus):
        speed = cpu_speed_ratio(report.cpu_baseline, p.cpu_events_per_s_per_core)
        there = next((m for m in (sizes.points if sizes else []) if m.vcpus == p.vcpus
                      and same_cpu(p.cpu_model, m.cpu_model)), None)
        fitted = sizes.tps_at(p.vcpus) if sizes is not None else None
        if p.vcpus == report.host_vcpus and same_cpu(p.cpu_model, host_cpu):
            tps, basis = measured, "measured (this host is one)"
        elif there is not None:
            tps, basis = there.tps, f"measured on {there.hardware}"
        elif fitted is not None and sizes is not None:
            tps = fitted * (speed or 1.0)
            basis = ("extrapolated" if sizes.extrapolated(p.vcpus) else "projected") + \
                " from measured sizes" + (", CPU-adjusted" if speed else "")
        else:
            tps = report.per_core_tps * p.vcpus * (speed or 1.0)
            basis = "projected, CPU-adjusted" if speed else "projected, same core speed"
        rows.append(PriceRow(instance=p.name, vcpus=p.vcpus, tps=tps, tps_basis=basis,
                             price_month_usd=p.price_month_usd,
                             spot_month_usd=p.spot_price_month_usd))
    return rows


def same_cpu(profile_model: str, host_model: str) -> bool:
    """Whether a profile's CPU model names this host's (a figure measured here then stands
    for the instance; an x86 VM does not measure a Graviton)."""
    a, b = profile_model.lower().strip(), host_model.lower().strip()
    return bool(a and b) and (a in b or b in a)


def cpu_speed_ratio(here: CpuBaseline | None, there_per_core: float | None) -> float | None:
    """How much faster a core of another machine is than this host's (its sysbench cpu
    events/s per core over ours), when both were measured with the same work per event."""
    if here is None or not there_per_core or here.max_prime != BASELINE_PRIME \
            or here.events_per_s_per_core <= 0:
        return None
    return there_per_core / here.events_per_s_per_core


def config_labels(runs: list[RunData]) -> list[str]:
    """The configs of ``runs`` in the order they were first run (the report's row order)."""
    out: list[str] = []
    for r in runs:
        if r.label not in out:
            out.append(r.label)
    return out


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
    }
