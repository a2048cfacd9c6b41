"""PNG plots of a run (matplotlib, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

from pgdyno.analysis.summary import IterationSummary, RunSummary, TimelinePoint  # noqa: E402
from pgdyno.reports.document import ClientHeadline  # noqa: E402
from pgdyno.results.rundir import replacing  # noqa: E402

DPI = 110
STYLE = {
    # Titles sit just above the axes. Left to find their place (None), matplotlib measures
    # every y tick label of every axes again in each drawing pass, looking for an offset
    # text ("1e6", "+1.2") that could collide with the title: about a tenth of a report's
    # drawing time. The two settings after it make sure no such text is ever drawn: the
    # tick labels carry their full values instead (no offset, no powers of ten between
    # 1e-6 and 1e9), and no plot here puts ticks or labels above its axes.
    "axes.titley": 1.0,
    "axes.formatter.useoffset": False,
    "axes.formatter.limits": (-6, 9),
}
"""matplotlib settings for every plot pgdyno draws, set once when this module loads."""
matplotlib.rcParams.update(STYLE)
MAX_TPS_BINS = 30
TIME_AXIS = "seconds since the iteration's start (first transaction)"


def make_plots(summary: RunSummary, plots_dir: Path,
               tps_by_clients: list[ClientHeadline] | None = None) -> dict[str, str]:
    """Draw every plot the data allows; returns name -> path relative to the run directory.
    ``tps_by_clients``: TPS at each client count with its interval, as the run's answer
    gives them, for the scaling curve to draw (without: each count's mean ± stddev)."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for name, draw in (("tps_timeline", _tps_timeline), ("tps_histogram", _tps_histogram),
                       ("latency_timeline", _latency_timeline),
                       ("latency_histogram", _latency_histogram),
                       ("latency_percentiles", _percentile_curve),
                       ("scaling", lambda s: _scaling(s, tps_by_clients))):
        fig = draw(summary)
        if fig is None:  # nothing to draw: no stale file from an earlier rendering either
            (plots_dir / f"{name}.png").unlink(missing_ok=True)
            continue
        save_figure(fig, plots_dir / f"{name}.png")
        made[name] = f"plots/{name}.png"
    return made


def save_figure(fig, path: Path) -> Path:
    """Write a figure as PNG (creating its folder) and free it."""
    try:
        save_png(fig, path, dpi=DPI, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def save_png(fig, path: Path, **savefig: Any) -> Path:
    """``fig.savefig`` through a temporary file renamed onto ``path``: an interrupted
    rebuild leaves the old plot or the new one, never a truncated PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        fig.savefig(tmp, format="png", **savefig)
    return path


def series_style(client_counts: list[int], clients: int, iteration: int) -> dict:
    """One colour per client count, one line style per iteration."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    return {"color": colours[sorted(client_counts).index(clients) % len(colours)],
            "linestyle": styles[(iteration - 1) % len(styles)]}


def _series_style(summary: RunSummary, clients: int, iteration: int) -> dict:
    return series_style(list({it.clients for it in summary.iterations}), clients, iteration)


def complete_seconds(it: IterationSummary) -> list[TimelinePoint]:
    """The iteration's timeline without the seconds past the planned end (warm-up plus
    measured window): the last one holds only the transactions that ended late, a fraction
    of a second's worth, which would draw as a cliff."""
    end = it.warmup_s + it.duration_s + 1e-6
    return [p for p in it.timeline if p.t_s + 1 <= end]


def _timeline_plot(summary: RunSummary, value, ylabel: str, title: str):
    if not summary.iterations:
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for it in summary.iterations:
        points = complete_seconds(it)
        # Point k covers the interval [k, k+1): draw it at the interval's middle.
        ax.plot([p.t_s + 0.5 for p in points], [value(p) for p in points], lw=1.2,
                label=f"{it.clients} clients #{it.iteration}",
                **_series_style(summary, it.clients, it.iteration))
    warmup = summary.iterations[0].warmup_s
    if warmup:
        ax.axvspan(0, warmup, color="grey", alpha=0.15, label="warm-up (excluded)")
    ax.set(xlabel=TIME_AXIS, ylabel=ylabel, title=title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return fig


def _tps_timeline(summary: RunSummary):
    return _timeline_plot(summary, lambda p: p.tps, "transactions per second",
                          "TPS over time (1 s intervals)")


def _latency_timeline(summary: RunSummary):
    return _timeline_plot(summary, lambda p: p.latency_mean_ms, "mean latency (ms)",
                          "Mean latency per second")


def _latency_histogram(summary: RunSummary):
    if not any(c.latency_histogram for c in summary.per_clients):
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for c in summary.per_clients:
        rows = [r for r in c.latency_histogram[:50]]  # the tail bin beyond p99.9 is in tables
        if not rows:
            continue
        lefts = [r[0] for r in rows]
        widths = [r[1] - r[0] for r in rows]
        share = [100.0 * r[2] / c.latency.count for r in rows]
        ax.bar(lefts, share, width=widths, align="edge", alpha=0.5, label=f"{c.clients} clients")
    ax.set(xlabel="latency (ms), up to p99.9", ylabel="% of transactions",
           title="Latency histogram")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _percentile_curve(summary: RunSummary):
    if not any(c.percentile_curve for c in summary.per_clients):
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for c in summary.per_clients:
        if not c.percentile_curve:
            continue
        x = [-math.log10(max(1 - p / 100.0, 1e-4)) for p, _ in c.percentile_curve]
        ax.plot(x, [v for _, v in c.percentile_curve], label=f"{c.clients} clients")
    ax.set_xticks([0, 1, 2, 3, 4], ["0%", "90%", "99%", "99.9%", "99.99%"])
    ax.set(xlabel="percentile", ylabel="latency (ms)", title="Latency by percentile")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _tps_histogram(summary: RunSummary):
    """The "TPS Histogram": how the per-second TPS of the measured window spread,
    one panel per client count (all its iterations pooled), on one shared TPS axis."""
    per_count = [(c, [v for it in summary.iterations if it.clients == c
                      for v in it.interval_tps]) for c in summary.client_counts]
    per_count = [(c, values) for c, values in per_count if values]
    if not per_count:
        return None
    edges = tps_bin_edges([v for _, values in per_count for v in values])
    fig, axes = plt.subplots(len(per_count), 1, sharex=True, squeeze=False,
                             figsize=(9, 1.2 + 1.6 * len(per_count)))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (ax, (clients, values)) in enumerate(zip(axes[:, 0], per_count, strict=True)):
        weights = [100.0 / len(values)] * len(values)
        ax.hist(values, bins=edges, weights=weights, color=colours[i % len(colours)],
                alpha=0.8, label=f"{clients:,} clients ({len(values):,} s)")
        mean = sum(values) / len(values)
        ax.axvline(mean, color="black", ls="--", lw=1, label=f"mean {mean:,.0f} TPS")
        ax.set_ylabel("% of seconds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0, 0].set_title("TPS histogram: transactions per second in each 1 s interval "
                         "of the measured window")
    axes[-1, 0].set_xlabel("TPS (transactions completed in a 1 s interval)")
    return fig


def tps_bin_edges(values: list[float]) -> np.ndarray:
    """Shared bins for every panel: numpy's choice, at most MAX_TPS_BINS."""
    low, high = min(values), max(values)
    if high - low < 1:  # one value (or all equal): a bin either side of it
        return np.array([low - 1.0, low, low + 1.0])
    edges = np.histogram_bin_edges(values, bins="auto")
    if len(edges) - 1 > MAX_TPS_BINS:
        edges = np.linspace(low, high, MAX_TPS_BINS + 1)
    return edges


def _scaling(summary: RunSummary, by_clients: list[ClientHeadline] | None = None):
    """TPS (left axis) and p99 latency (right axis) against clients; a curve needs two
    client counts at least. With ``by_clients`` (the answer's figures): their means, 95%
    intervals and p99, the figures the report's answer shows beside the curve; without,
    each count's mean ± stddev across iterations and its p99 over every transaction."""
    if by_clients is not None and len(by_clients) >= 2:
        clients = [c.clients for c in by_clients]
        tps_values = [c.mean for c in by_clients]
        low = [c.mean - c.interval[0] if c.interval else 0.0 for c in by_clients]
        high = [c.interval[1] - c.mean if c.interval else 0.0 for c in by_clients]
        p99_values = [math.nan if c.p99_ms is None else c.p99_ms for c in by_clients]
        tps_label = "TPS (mean of the iterations, 95% interval)"
        p99_label = "p99 latency (ms, mean of the iterations)"
    elif len(summary.per_clients) >= 2:
        clients = [c.clients for c in summary.per_clients]
        tps_values = [c.tps_mean for c in summary.per_clients]
        low = high = [0 if math.isnan(c.tps_iteration_stddev) else c.tps_iteration_stddev
                      for c in summary.per_clients]
        p99_values = [c.latency.percentiles_ms.get("p99", math.nan)
                      for c in summary.per_clients]
        tps_label = "TPS (mean ± stddev across iterations)"
        p99_label = "p99 latency (ms)"
    else:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    tps = ax.errorbar(clients, tps_values, yerr=[low, high], marker="o", color="tab:blue",
                      capsize=3, label=tps_label)
    ax.set(xlabel="clients", title="Throughput and p99 latency by clients")
    ax.set_ylabel("TPS (transactions/s)", color="tab:blue")
    # Both axes from zero with headroom, so neither series sits on the frame (an interval
    # reaching below zero, from few iterations, is cut there).
    ax.set_ylim(0, _top([v + e for v, e in zip(tps_values, high, strict=True)]))
    ax2 = ax.twinx()
    (p99,) = ax2.plot(clients, p99_values, marker="s", ls="--", color="tab:red",
                      label=p99_label)
    ax2.set_ylabel("p99 latency (ms)", color="tab:red")
    ax2.set_ylim(0, _top(p99_values))
    ax.set_xscale("log" if max(clients) / min(clients) >= 8 else "linear")
    # Ticks at the client counts measured, as integers; no log-scale minor ticks.
    ax.set_xticks(clients, [f"{c:,}" for c in clients])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3)
    # Below the axes: inside, it would cover one series or the other.
    ax.legend(handles=[tps, p99], fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              ncol=2, frameon=False)
    return fig


def _top(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return 1.15 * max(finite) if finite and max(finite) > 0 else 1.0
