"""Comparison plots: TPS timelines on one axis, percentile curves, change bars with intervals,
and write IOPS over time of both sides (the checkpoint-storm picture)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pgdyno.compare.io_profile import IoProfile  # noqa: E402
from pgdyno.compare.model import Comparison, MetricComparison  # noqa: E402
from pgdyno.compare.runs import RunData  # noqa: E402
from pgdyno.compare.stats import FASTER, HIGHER, LOWER, SLOWER  # noqa: E402
from pgdyno.reports.plots import save_figure  # noqa: E402 - also sets the plots' style

COLOURS = {"A": "tab:blue", "B": "tab:orange"}
LINE_STYLES = ("-", "--", ":", "-.")
VERDICT_COLOURS = {FASTER: "tab:green", SLOWER: "tab:red", HIGHER: "tab:purple",
                   LOWER: "tab:purple"}


def comparison_plots(comparison: Comparison, baseline: list[RunData], candidate: list[RunData],
                     clients: int, out_dir: Path) -> dict[str, str]:
    """Draw the plots the data allows; name -> path relative to ``out_dir``."""
    plots = out_dir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    turns = comparison.design is not None and comparison.design.blocks is not None \
        and comparison.design.blocks.turns
    # Under turns the runs' timelines are half pauses and their latencies include them:
    # the turns themselves are the picture.
    over_time = ((("turns", _turns(comparison)),) if turns else
                 (("tps_timelines", _timelines(baseline, candidate, clients, comparison)),
                  ("percentile_curves", _percentiles(baseline, candidate, clients,
                                                     comparison))))
    for name, fig in (*over_time,
                      ("change_bars", change_bars(comparison, clients)),
                      ("write_iops_overlay", write_iops_overlay(comparison, clients))):
        if fig is None:
            continue
        save_figure(fig, plots / f"{name}.png")
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


def _turns(cmp: Comparison):
    """Each turn's headline, both sides, in the order they ran; and each pair's ratio."""
    assert cmp.design is not None and cmp.design.blocks is not None
    rec = cmp.design.blocks
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    for side, label in (("A", cmp.baseline_label), ("B", cmp.candidate_label)):
        points = [(t.pair, t.value) for t in rec.turns if t.side == side and t.value]
        top.plot([x for x, _ in points], [v for _, v in points], ".", ms=3, alpha=0.7,
                 color=COLOURS[side], label=f"{side}: {label}")
    by_pair: dict[int, dict[str, float]] = {}
    for t in rec.turns:
        if t.value:
            by_pair.setdefault(t.pair, {})[t.side] = t.value
    ratios = [(pair, 100 * (v["B"] / v["A"] - 1)) for pair, v in sorted(by_pair.items())
              if "A" in v and "B" in v]
    bottom.plot([x for x, _ in ratios], [r for _, r in ratios], ".", ms=3, color="tab:gray")
    bottom.axhline(0, color="black", lw=0.8)
    bottom.axhline(cmp.design.blocks.looks[-1].change_pct if rec.looks else 0,
                   color="tab:green", lw=1, label="change (all pairs)")
    head = next((m for m in cmp.metrics if m.metric == rec.headline_metric), None)
    label = f"{head.label} ({head.unit})" if head is not None else rec.headline_metric
    top.set(ylabel=f"{label} in its second",
            title="Each side's one-second turns, in the order they ran")
    bottom.set(xlabel="pair (two neighbouring seconds)", ylabel="B/A − 1 (%)")
    for ax in (top, bottom):
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


def change_bars(cmp: Comparison, clients: int):
    """Bars of the rows with an interval of the ratio B/A only: a difference-of-means row
    near zero (-450% … +317%) would squash every other bar; the report lists those under
    the chart. An interval wider than the axis (two iterations give t = 12.7) is cut at the
    edge with an arrow and its end written beside it, so it cannot squash the others either."""
    rows: list[MetricComparison] = [m for m in cmp.metrics
                                    if m.clients in (clients, 0) and m.has_ratio_interval]
    if not rows:
        return None
    low_edge, high_edge = chart_range(rows)
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    ys = list(range(len(rows)))[::-1]
    for y, m in zip(ys, rows, strict=True):
        colour = VERDICT_COLOURS.get(m.verdict, "tab:gray")
        change = min(max(m.change_pct, low_edge), high_edge)
        ax.barh(y, change, color=colour, alpha=0.7)
        lo, hi = max(m.ci_low_pct, low_edge), min(m.ci_high_pct, high_edge)
        ax.errorbar(change, y, xerr=[[max(change - lo, 0.0)], [max(hi - change, 0.0)]],
                    fmt="none", ecolor="black", capsize=4)
        for end, edge, marker, align in ((m.ci_high_pct, high_edge, ">", "right"),
                                         (m.ci_low_pct, low_edge, "<", "left")):
            if end != min(max(end, low_edge), high_edge):
                ax.plot([edge], [y], marker=marker, color="black", ms=6)
                ax.annotate(f"{end:+,.0f}%", (edge, y), xytext=(0, 7),
                            textcoords="offset points", ha=align, fontsize=7)
    ax.set_xlim(low_edge, high_edge)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys, [m.title + ("" if m.clients else " (whole runs)") for m in rows])
    ax.set(xlabel=f"change B vs A (%), bars: {100 * cmp.confidence:.0f}% interval "
           "(arrows: cut at the edge)",
           title=f"Change per metric, {clients} clients (green faster, red slower, "
           "purple higher/lower, grey no significant difference)")
    ax.grid(alpha=0.3, axis="x")
    return fig


def chart_range(rows: list[MetricComparison]) -> tuple[float, float]:
    """The chart's x range: every change, and the intervals up to three times the largest
    change (at least ±50%); a ratio never goes below -100%."""
    changes = [m.change_pct for m in rows]
    reach = max(50.0, 3.0 * max(abs(c) for c in changes))
    ends = [v for m in rows for v in (m.ci_low_pct, m.ci_high_pct) if abs(v) <= reach]
    low = min([0.0, *changes, *ends])
    high = max([0.0, *changes, *ends])
    pad = 0.05 * (high - low or 1.0)
    return max(low - pad, -105.0), high + pad


def write_iops_overlay(cmp: Comparison, clients: int):
    """Write IOPS second by second, one line per iteration of each run, both sides on one
    axis per device: a checkpoint storm shows as spikes on one side only."""
    profiles: list[IoProfile] = [p for p in cmp.io_profiles
                                 if p.clients == clients and any(t.seconds for t in p.traces)]
    if not profiles:
        return None
    fig, axes = plt.subplots(len(profiles), 1, figsize=(9, 3.6 * len(profiles)), squeeze=False)
    for ax, profile in zip(axes[:, 0], profiles, strict=True):
        several = {(t.side, t.run) for t in profile.traces if t.iteration > 1}
        labels = {"A": cmp.baseline_label, "B": cmp.candidate_label}
        # one colour per side, one line style per run of that side
        styles: dict[tuple[str, str], str] = {}
        for trace in profile.traces:
            side_runs = sum(1 for side, _ in styles if side == trace.side)
            style = styles.setdefault((trace.side, trace.run),
                                      LINE_STYLES[side_runs % len(LINE_STYLES)])
            name = f"{trace.side} ({labels[trace.side]}): {trace.run}"
            if (trace.side, trace.run) in several:
                name += f" #{trace.iteration}"
            ax.plot(trace.seconds, trace.write_iops, lw=1.2, alpha=0.85, ls=style,
                    color=COLOURS[trace.side], label=name)
        ax.set(xlabel="seconds since the measured window's start (s)",
               ylabel="write IOPS (writes/s)",
               title=f"Write IOPS over time, {profile.group}, {clients} clients")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
