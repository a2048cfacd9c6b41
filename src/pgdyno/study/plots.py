"""The study's charts: absolute side-by-side bars of every workload's headline figure (what
readers expect: NOPM default against tuned, TPS of each pgbench workload), the change of
each with its interval, and the headline by client count."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pgdyno.compare.model import metric_title  # noqa: E402
from pgdyno.compare.plots import VERDICT_COLOURS  # noqa: E402
from pgdyno.reports.plots import save_figure  # noqa: E402
from pgdyno.study.conclusions import headline_comparison  # noqa: E402
from pgdyno.study.model import StudyRecord, WorkloadResult  # noqa: E402

SIDE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def study_plots(record: StudyRecord, plots_dir: Path) -> dict[str, str]:
    """name -> path relative to the study directory, for the plots the data allows."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    figures = {"headline_bars": _headline_bars(record), "change_bars": _change_bars(record),
               "scaling_all": _scaling_all(record)}
    for result in record.workloads:
        figures[f"scaling_{result.workload}"] = _scaling(result)
    return {name: f"{plots_dir.name}/{save_figure(fig, plots_dir / f'{name}.png').name}"
            for name, fig in figures.items() if fig is not None}


def _measured(result: WorkloadResult) -> bool:
    return any(s.figure(result.headline) is not None for s in result.sides)


def _headline_bars(record: StudyRecord):
    """One panel per workload and charted metric (the headline, then the plugin's
    chart_metrics: NOPM and TPM for TPROC-C), bars per side."""
    panels = [(r, name) for r in record.workloads if _measured(r)
              for name in (r.chart_metrics or [r.headline])
              if any(s.figure(name) is not None for s in r.sides)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels) + 1, 3.8),
                             squeeze=False)
    for ax, (result, name) in zip(axes[0], panels, strict=True):
        sides = [(s.label, s.figure(name)) for s in result.sides]
        sides = [(label, f) for label, f in sides if f is not None]
        xs = list(range(len(sides)))
        ax.bar(xs, [f.mean for _, f in sides], yerr=[f.stddev for _, f in sides],
               color=SIDE_COLOURS[:len(sides)], capsize=5, alpha=0.85)
        for x, (_, f) in zip(xs, sides, strict=True):
            ax.annotate(f"{f.mean:,.0f}" if abs(f.mean) >= 100 else f"{f.mean:.3g}",
                        (x, f.mean), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs, [label for label, _ in sides], rotation=15)
        first = sides[0][1]
        ax.set(title=f"{result.workload}: {first.label}",
               ylabel=metric_title(first.label, first.unit))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("Headline figures per workload and config (mean ± one standard deviation)")
    fig.tight_layout()
    return fig


def _scaling_all(record: StudyRecord):
    """Every workload's headline by client count on one axis, when they share its unit
    (one chart across TPC-B, simple-update and select-only)."""
    lines = []
    for result in record.workloads:
        for side in result.sides:
            fig_ = side.figure(result.headline)
            if fig_ is not None and len(side.by_clients) > 1:
                lines.append((f"{result.workload} ({side.label})", fig_, side.by_clients))
    units = {f.unit for _, f, _ in lines}
    if len(lines) < 2 or len(units) != 1:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for colour, (label, _, by) in zip(plt.cm.tab10.colors, lines, strict=False):
        counts = sorted(by, key=int)
        ax.plot([int(c) for c in counts], [by[c] for c in counts], marker="o", color=colour,
                label=label)
    first = lines[0][1]
    ax.set(xlabel="clients", ylabel=metric_title(first.label, first.unit),
           title=f"{first.label} by client count, every workload")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _change_bars(record: StudyRecord):
    rows = [(r.workload, m) for r in record.workloads
            if (m := headline_comparison(r)) is not None and m.has_ratio_interval]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, (_, m) in zip(ys, rows, strict=True):
        ax.barh(y, m.change_pct, color=VERDICT_COLOURS.get(m.verdict, "tab:gray"), alpha=0.7)
        ax.errorbar(m.change_pct, y, xerr=[[m.change_pct - m.ci_low_pct],
                                           [m.ci_high_pct - m.change_pct]],
                    fmt="none", ecolor="black", capsize=4)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys, [f"{w}: {m.title}" for w, m in rows])
    widest = max(max(abs(m.ci_low_pct), abs(m.ci_high_pct)) for _, m in rows)
    if math.isfinite(widest) and widest > 0:
        ax.set_xlim(-1.1 * widest, 1.1 * widest)
    ax.set(xlabel=f"change of {record.candidate} against {record.baseline} (%), "
                  "bars: 95% interval",
           title="Headline change per workload (grey: no significant difference)")
    ax.grid(alpha=0.3, axis="x")
    return fig


def _scaling(result: WorkloadResult):
    sides = [s for s in result.sides if len(s.by_clients) > 1]
    if not sides:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for colour, side in zip(SIDE_COLOURS, sides, strict=False):
        counts = sorted(side.by_clients, key=int)
        ax.plot([int(c) for c in counts], [side.by_clients[c] for c in counts], marker="o",
                color=colour, label=side.label)
    fig_ = sides[0].figure(result.headline)
    unit = f" ({fig_.unit})" if fig_ is not None else ""
    label = fig_.label if fig_ is not None else result.headline
    ax.set(xlabel="clients", ylabel=f"{label}{unit}",
           title=f"{result.workload}: {label} by client count")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig
