"""The report of a TPROC-C warehouse sweep (real-vs-ideal tables), from its runs.

One row per warehouse count and VU count: NOPM (mean and spread over iterations), TPM,
and in compliant mode the ideal NOPM, real/ideal, efficiency and the 90th percentile
response time of each transaction type, pooled over the iterations' measured windows.
Every figure is read from the runs' own summaries and raw files, so the sweep report
can always be rebuilt (``pgdyno report SWEEP_DIR``).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.ticker import MaxNLocator

from pgdyno import serde
from pgdyno.reports import html
from pgdyno.reports.document import Document, Section, Table
from pgdyno.reports.plots import plt, save_figure
from pgdyno.results.manifest import load_manifest
from pgdyno.results.rundir import RunDirectory, write_json_atomic
from pgdyno.results.sweepdir import SweepRecord
from pgdyno.units import alike, format_ms, format_ratio_pct, rounded
from pgdyno.workloads import tprocc
from pgdyno.workloads.tprocc.report import (
    iteration_windows,
    pooled_response_stats,
    read_conditions,
)

SCHEMA_VERSION = 1
SHORT = {"new_order": "NO", "payment": "P", "order_status": "OS", "delivery": "D",
         "stock_level": "SL"}


@dataclass
class SweepRow:
    warehouses: int
    clients: int
    run: str | None
    status: str
    iterations: int = 0
    nopm_mean: float | None = None
    nopm_stddev: float | None = None
    tpm_mean: float | None = None
    efficiency: float | None = None
    ideal_nopm: float | None = None
    real_vs_ideal: float | None = None
    p90_ms: dict[str, float] = field(default_factory=dict)
    """90th percentile response time per transaction type (compliant mode)."""
    consistency: str = "–"


@dataclass
class SweepSummary:
    schema_version: int
    context: str
    status: str
    keying_thinking: bool
    time_scale: float
    threshold: float
    rows: list[SweepRow]
    saturation_warehouses: int | None
    """The smallest W whose real/ideal is below the threshold (None: none in the sweep)."""


def summarise_sweep(sweep_dir: Path, record: SweepRecord) -> SweepSummary:
    rows: list[SweepRow] = []
    for step in record.steps:
        run_dir = sweep_dir.parent / step.run if step.run else None
        if run_dir is None or not (run_dir / "raw" / "run.json").is_file():
            rows += [SweepRow(step.size, c, step.run, step.status) for c in step.clients]
            continue
        rows += _rows_of_run(run_dir, step.size, step.status, record)
    return SweepSummary(
        schema_version=SCHEMA_VERSION, context=record.context, status=record.status,
        keying_thinking=_keying_thinking(record), time_scale=_time_scale(record),
        threshold=tprocc.SATURATION_RATIO, rows=rows,
        saturation_warehouses=saturation_point(rows, tprocc.SATURATION_RATIO))


def _keying_thinking(record: SweepRecord) -> bool:
    return bool(record.workload_options.get("keying_thinking", False))


def _time_scale(record: SweepRecord) -> float:
    return float(record.workload_options.get("time_scale", 1.0))


def saturation_point(rows: list[SweepRow], threshold: float) -> int | None:
    """The smallest warehouse count whose real/ideal is below ``threshold``."""
    below = [r.warehouses for r in rows
             if r.real_vs_ideal is not None and r.real_vs_ideal < threshold]
    return min(below) if below else None


def _rows_of_run(run_dir: Path, warehouses: int, status: str,
                 record: SweepRecord) -> list[SweepRow]:
    summary_path = run_dir / "summary.json"
    if not summary_path.is_file():  # the run loop and `pgdyno report` build it first
        return [SweepRow(warehouses, c, run_dir.name, status)
                for c in load_manifest(run_dir).options.clients]
    summary = json.loads(summary_path.read_text())
    plan = RunDirectory(run_dir).load_plan()
    windows = iteration_windows(plan, run_dir)
    consistency = _consistency(run_dir)
    mix = plan.parameters.get("mix")
    finished = {(it["clients"], it["iteration"]) for it in summary["iterations"]
                if it["status"] == "ok"}
    rows = []
    for clients in summary["client_counts"]:
        extras = [it["metrics"] for it in summary["iterations"]
                  if it["clients"] == clients and it["status"] == "ok" and "nopm" in it["metrics"]]
        row = SweepRow(warehouses, clients, run_dir.name, status, iterations=len(extras),
                       consistency=consistency)
        if extras:
            nopms = [e["nopm"] for e in extras]
            row.nopm_mean = statistics.fmean(nopms)
            row.nopm_stddev = statistics.stdev(nopms) if len(nopms) > 1 else None
            row.tpm_mean = statistics.fmean(e["tpm"] for e in extras)
        if _keying_thinking(record):
            if row.nopm_mean is not None:  # only paced terminals have a ceiling
                row.efficiency = tprocc.efficiency(row.nopm_mean, warehouses,
                                                   _time_scale(record))
            row.ideal_nopm = tprocc.ideal_nopm(warehouses, tprocc.Mix.parse(mix) if mix else None,
                                               _time_scale(record))
            if row.nopm_mean is not None:
                row.real_vs_ideal = row.nopm_mean / row.ideal_nopm
            ok = [v for key, v in sorted(windows.items()) if key[0] == clients and key in finished]
            row.p90_ms = {s.transaction: s.p90_ms for s in pooled_response_stats(ok)}
        rows.append(row)
    return rows


def _consistency(run_dir: Path) -> str:
    path = run_dir / "raw" / "consistency.json"
    if not path.is_file():
        return "–"
    conditions = read_conditions(path)
    failed = [str(c["number"]) for c in conditions if not c["passed"]]
    return "pass" if not failed else "FAIL " + ",".join(failed)


def build_sweep_report(sweep_dir: Path) -> SweepSummary:
    """sweep_summary.json, report.md, report.html and plots/ in the sweep directory."""
    record = SweepRecord.load(sweep_dir)
    summary = summarise_sweep(sweep_dir, record)
    write_json_atomic(sweep_dir / "sweep_summary.json", serde.to_dict(summary))
    images = {}
    plot = _plot(summary, sweep_dir / "plots" / "sweep_nopm.png")
    if plot is not None:
        images["nopm"] = str(plot.relative_to(sweep_dir))
    doc = sweep_document(summary, record, images)
    html.write_document(doc, sweep_dir)
    return summary


def sweep_document(summary: SweepSummary, record: SweepRecord,
                   images: dict[str, str]) -> Document:
    compliant = summary.keying_thinking
    headline = Section("Result", paragraphs=[_headline(summary)])
    types = [t for t in tprocc.TRANSACTIONS if any(t in r.p90_ms for r in summary.rows)]
    headers = ["Warehouses", "VUs", "NOPM", "± sd", "TPM"]
    if compliant:
        headers += ["Ideal NOPM", "Real/ideal", "Efficiency %",
                    *[f"p90 {SHORT[t]} ms" for t in types]]
    headers += ["Consistency", "Status", "Run"]
    rows = []
    for r in summary.rows:
        # The deviation at its mean's precision, in the column beside it.
        row = [str(r.warehouses), str(r.clients), *alike(r.nopm_mean, r.nopm_stddev, digits=1),
               rounded(r.tpm_mean, 0)]
        if compliant:
            row += [rounded(r.ideal_nopm, 1), format_ratio_pct(r.real_vs_ideal),
                    rounded(100 * r.efficiency if r.efficiency is not None else None, 1),
                    *[format_ms(r.p90_ms.get(t)) for t in types]]
        row += [r.consistency, r.status, f"../{r.run}/report.md" if r.run else "–"]
        rows.append(row)
    table = Section("Warehouse sweep", tables=[Table(headers, rows)], paragraphs=[
        "NOPM and TPM are means over each run's iterations (database-measured, as in the runs' "
        "reports)." + (
            f" Ideal NOPM = what 10 terminals per warehouse reach with zero response time under "
            f"the keying and think times (× {summary.time_scale:g}); efficiency = NOPM ÷ "
            f"(12.86 × W ÷ {summary.time_scale:g}); p90 columns are the "
            "server's response time per transaction type (NO New-Order, P Payment, "
            "OS Order-Status, D Delivery, SL Stock-Level), pooled over the measured windows."
            if compliant else " Without keying and think times there is no ideal line, so "
            "no efficiency or real/ideal.")])
    for caption, key in (("Real against ideal NOPM" if compliant else "NOPM by warehouses",
                          "nopm"),):
        if key in images:
            table.images.append((caption, images[key]))
    about = Section("Sweep", tables=[Table(["Key", "Value"], [
        ["Context", record.context], ["Status", record.status],
        ["Started", record.started_at], ["Ended", record.ended_at or "–"],
        ["Config", record.config],
        ["Mode", "compliant (keying and think times)" if compliant else "no keying or think"],
        ["Time scale", f"{_time_scale(record):g}"]])])
    return Document(title=f"pgdyno TPROC-C warehouse sweep: "
                          f"{', '.join(str(s.size) for s in record.steps)} warehouses",
                    sections=[headline, table, about])


def _headline(summary: SweepSummary) -> str:
    measured = [r for r in summary.rows if r.nopm_mean is not None]
    if not measured:
        return "No warehouse count finished; see the runs' reports."
    if not summary.keying_thinking:
        best = max(measured, key=lambda r: r.nopm_mean or 0)
        return (f"Highest NOPM {best.nopm_mean:,.0f} at {best.warehouses} warehouses and "
                f"{best.clients} VUs (no keying or think times, so there is no ideal line).")
    if summary.saturation_warehouses is None:
        top = max(r.warehouses for r in measured if r.real_vs_ideal is not None)
        return (f"Real/ideal stays at or above {summary.threshold:.0%} up to {top} "
                "warehouses: no saturation in this range; extend the sweep to find it.")
    at = summary.saturation_warehouses
    below = next(r for r in measured if r.warehouses == at)
    ok = [r.warehouses for r in measured if r.real_vs_ideal is not None
          and r.real_vs_ideal >= summary.threshold and r.warehouses < at]
    return (f"Real/ideal drops below {summary.threshold:.0%} at {at} warehouses "
            f"({format_ratio_pct(below.real_vs_ideal)}: {below.nopm_mean:,.0f} of "
            f"{below.ideal_nopm:,.0f} "
            f"ideal NOPM)" + (f"; the largest count that keeps up is {max(ok)} warehouses."
                              if ok else "; no count in the sweep keeps up."))


def _plot(summary: SweepSummary, path: Path) -> Path | None:
    measured = [r for r in summary.rows if r.nopm_mean is not None]
    if not measured:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for clients in sorted({r.clients for r in measured}) if not summary.keying_thinking else [0]:
        rows = [r for r in measured if summary.keying_thinking or r.clients == clients]
        ax.errorbar([r.warehouses for r in rows], [r.nopm_mean for r in rows],
                    yerr=[0 if r.nopm_stddev is None or math.isnan(r.nopm_stddev)
                          else r.nopm_stddev for r in rows],
                    marker="o", capsize=3,
                    label="real NOPM" if summary.keying_thinking else f"{clients} VUs")
    if summary.keying_thinking:
        # The ideal grows in proportion to W: draw it from the origin.
        ideal = [(0, 0.0), *sorted((r.warehouses, r.ideal_nopm) for r in summary.rows
                                   if r.ideal_nopm is not None)]
        ax.plot([w for w, _ in ideal], [v for _, v in ideal], "k--", label="ideal NOPM")
        ax.plot([w for w, _ in ideal], [summary.threshold * v for _, v in ideal], ":",
                color="grey", label=f"{summary.threshold:.0%} of ideal")
        for r in measured:
            if r.real_vs_ideal is not None:
                ax.annotate(f"{r.real_vs_ideal:.0%}", (r.warehouses, r.nopm_mean),
                            textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax.set(xlabel="warehouses", ylabel="new orders per minute",
           title="Real against ideal NOPM" if summary.keying_thinking else "NOPM by warehouses")
    ax.set_xlim(left=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
