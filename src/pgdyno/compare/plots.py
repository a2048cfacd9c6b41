"""Comparison plots: TPS timelines on one axis, percentile curves, change bars with intervals."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pgdyno.compare.model import Comparison, MetricComparison  # noqa: E402
from pgdyno.compare.runs import RunData  # noqa: E402
from pgdyno.compare.stats import FASTER, HIGHER, LOWER, SLOWER  # noqa: E402

DPI = 110
COLOURS = {"A": "tab:blue", "B": "tab:orange"}
VERDICT_COLOURS = {FASTER: "tab:green", SLOWER: "tab:red", HIGHER: "tab:purple",
                   LOWER: "tab:purple"}


def comparison_plots(comparison: Comparison, baseline: list[RunData], candidate: list[RunData],
                     clients: int, out_dir: Path) -> dict[str, str]:
    """Draw the plots the data allows; name -> path relative to ``out_dir``."""
    plots = out_dir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for name, fig in (("tps_timelines", _timelines(baseline, candidate, clients, comparison)),
                      ("percentile_curves", _percentiles(baseline, candidate, clients,
                                                         comparison)),
                      ("change_bars", _change_bars(comparison, clients))):
        if fig is None:
            continue
        fig.savefig(plots / f"{name}.png", dpi=DPI, bbox_inches="tight")
        plt.close(fig)
        made[name] = f"plots/{name}.png"
    return made


def _timelines(a: list[RunData], b: list[RunData], clients: int, cmp: Comparison):
    fig, ax = plt.subplots(figsize=(9, 4))
    drawn = False
    for side, runs, label in (("A", a, cmp.baseline_label), ("B", b, cmp.candidate_label)):
        first = True
        for run in runs:
            for it in run.iterations(clients):
                # the last second is usually partial (pgbench stopping): not a drop in TPS
                points = [p for p in it.timeline if p.t_s < it.warmup_s + it.duration_s]
                xs = [p.t_s for p in points]
                ax.plot(xs, [p.tps for p in points], lw=1, alpha=0.8, color=COLOURS[side],
                        label=f"{side}: {label}" if first else None)
                first, drawn = False, True
    if not drawn:
        plt.close(fig)
        return None
    ax.set(xlabel="seconds since the iteration started (warm-up included)",
           ylabel="transactions per second", title=f"TPS over time, {clients} clients "
           "(every iteration of both sides)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _percentiles(a: list[RunData], b: list[RunData], clients: int, cmp: Comparison):
    fig, ax = plt.subplots(figsize=(9, 4))
    drawn = False
    for side, runs, label in (("A", a, cmp.baseline_label), ("B", b, cmp.candidate_label)):
        first = True
        for run in runs:
            c = run.clients(clients)
            if c is None or not c.percentile_curve:
                continue
            x = [-math.log10(max(1 - p / 100.0, 1e-4)) for p, _ in c.percentile_curve]
            ax.plot(x, [v for _, v in c.percentile_curve], color=COLOURS[side], alpha=0.8,
                    label=f"{side}: {label}" if first else None)
            first, drawn = False, True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xticks([0, 1, 2, 3, 4], ["0%", "90%", "99%", "99.9%", "99.99%"])
    ax.set(xlabel="percentile", ylabel="latency (ms)",
           title=f"Latency by percentile, {clients} clients (one curve per run)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _change_bars(cmp: Comparison, clients: int):
    rows: list[MetricComparison] = [m for m in cmp.metrics
                                    if m.clients in (clients, 0) and not math.isnan(m.change_pct)]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    ys = list(range(len(rows)))[::-1]
    for y, m in zip(ys, rows, strict=True):
        colour = VERDICT_COLOURS.get(m.verdict, "tab:gray")
        ax.barh(y, m.change_pct, color=colour, alpha=0.7)
        if not math.isnan(m.ci_low_pct):
            ax.errorbar(m.change_pct, y, xerr=[[m.change_pct - m.ci_low_pct],
                                               [m.ci_high_pct - m.change_pct]],
                        fmt="none", ecolor="black", capsize=4)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys, [f"{m.metric}" + ("" if m.clients else " (run)") for m in rows])
    ax.set(xlabel=f"change B vs A (%), bars: {100 * cmp.confidence:.0f}% interval",
           title=f"Change per metric, {clients} clients (green faster, red slower, "
           "grey no significant difference or undetermined)")
    ax.grid(alpha=0.3, axis="x")
    return fig
