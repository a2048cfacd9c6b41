"""A comparison as a report Document, and the files of a comparison directory."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from pgdyno import serde
from pgdyno.compare.model import Comparison, MetricComparison
from pgdyno.compare.plots import comparison_plots
from pgdyno.compare.runs import RunData
from pgdyno.compare.settings_diff import changes_block
from pgdyno.compare.stats import UNDETERMINED
from pgdyno.reports import html, markdown
from pgdyno.reports.document import Document, Section, Table, fmt
from pgdyno.results.rundir import safe_name, write_json_atomic


def pct(value: float, digits: int = 1) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:+.{digits}f}%"


def interval(m: MetricComparison) -> str:
    if math.isnan(m.ci_low_pct):
        return "–"
    return f"[{pct(m.ci_low_pct)}, {pct(m.ci_high_pct)}]"


def verdict_text(m: MetricComparison) -> str:
    if m.verdict == UNDETERMINED:
        return f"undetermined ({m.reason})"
    noise = f"noise ±{m.noise_pct:.1f}%" if not math.isnan(m.noise_pct) else ""
    return f"{m.verdict} ({noise})" if noise else m.verdict


def headline(cmp: Comparison) -> list[str]:
    """One line per client count for the workload's headline figure: NOPM for TPROC-C
    (measured by the database), TPS for pgbench workloads."""
    lines = []
    name = "nopm" if any(m.metric == "nopm" for m in cmp.metrics) else "tps"
    for m in cmp.metrics:
        if m.metric != name:
            continue
        lines.append(f"{m.clients} clients: {name.upper()} {fmt(m.baseline_mean, 1)} → "
                     f"{fmt(m.candidate_mean, 1)}, change {pct(m.change_pct)} "
                     f"{100 * cmp.confidence:.0f}% interval {interval(m)}: "
                     f"**{verdict_text(m)}**")
    return lines


def metrics_table(cmp: Comparison, clients: int) -> Table:
    rows = []
    for m in cmp.metrics:
        if m.clients != clients:
            continue
        rows.append([m.metric, _side(m.baseline_mean, m.baseline_stddev, m.baseline_n),
                     _side(m.candidate_mean, m.candidate_stddev, m.candidate_n),
                     pct(m.change_pct), interval(m), verdict_text(m)])
    label = f"{clients} clients" if clients else "Whole runs (one value per run)"
    return Table(["Metric", "A: mean ± sd (n)", "B: mean ± sd (n)", "Change",
                  f"{100 * cmp.confidence:.0f}% interval", "Verdict"], rows, caption=label)


def _side(mean: float, sd: float, n: int) -> str:
    return f"{fmt(mean, 3)} ± {fmt(sd, 3)} ({n})"


def build_compare_document(cmp: Comparison, images: dict[str, str]) -> Document:
    changes = Section("What changed (A → B)", preformatted=[changes_block(cmp.changes)])
    if cmp.changes:
        changes.tables.append(Table(["Layer", "Setting", "A", "B", "Source of B's value"],
                                    [[c.layer, c.name, c.before, c.after, c.rationale]
                                     for c in cmp.changes]))
    verdict = Section("Verdict", paragraphs=[f"A (baseline): {cmp.baseline_label}; "
                                             f"B (candidate): {cmp.candidate_label}.",
                                             *headline(cmp)])
    verdict.paragraphs += [f"Note: {n}" for n in cmp.notes]
    metrics = Section("Metrics")
    for clients in sorted({m.clients for m in cmp.metrics}, key=lambda c: (c == 0, c)):
        metrics.tables.append(metrics_table(cmp, clients))
    for name, caption in (("change_bars", "Change per metric with its interval"),
                          ("tps_timelines", "TPS over time, both sides"),
                          ("percentile_curves", "Latency percentile curves")):
        if name in images:
            metrics.images.append((caption, images[name]))
    method = Section("Method", paragraphs=[cmp.method_note])
    files = Section("Runs", tables=[Table(
        ["Side", "Run"], [["A", r] for r in cmp.baseline_runs]
        + [["B", r] for r in cmp.candidate_runs])])
    return Document(title=f"pgdyno compare: {cmp.baseline_label} vs {cmp.candidate_label}",
                    sections=[changes, verdict, metrics, method, files])


def write_comparison(cmp: Comparison, baseline: list[RunData], candidate: list[RunData],
                     out_dir: Path) -> Path:
    """compare.json, compare.md, compare.html and plots/ in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "compare.json", serde.to_dict(cmp))
    counts = [m.clients for m in cmp.metrics if m.metric == "tps"]
    images = (comparison_plots(cmp, baseline, candidate, max(counts), out_dir)
              if counts else {})
    doc = build_compare_document(cmp, images)
    (out_dir / "compare.md").write_text(markdown.render_document(doc))
    (out_dir / "compare.html").write_text(html.render_document(doc, out_dir))
    return out_dir


def default_out_dir(results_dir: Path, a: RunData, b: RunData) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = safe_name(f"{a.path.name}--vs--{b.path.name}-{stamp}")
    return results_dir / "comparisons" / name
