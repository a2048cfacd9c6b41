"""PNG plots of a run (matplotlib, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pgdyno.analysis.summary import RunSummary  # noqa: E402

DPI = 110


def make_plots(summary: RunSummary, plots_dir: Path) -> dict[str, str]:
    """Draw every plot the data allows; returns name -> path relative to the run directory."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for name, draw in (("tps_timeline", _tps_timeline), ("latency_timeline", _latency_timeline),
                       ("latency_histogram", _latency_histogram),
                       ("latency_percentiles", _percentile_curve),
                       ("scaling", _scaling)):
        fig = draw(summary)
        if fig is None:
            continue
        save_figure(fig, plots_dir / f"{name}.png")
        made[name] = f"plots/{name}.png"
    return made


def save_figure(fig, path: Path) -> Path:
    """Write a figure as PNG (creating its folder) and free it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def series_style(client_counts: list[int], clients: int, iteration: int) -> dict:
    """One colour per client count, one line style per iteration."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    return {"color": colours[sorted(client_counts).index(clients) % len(colours)],
            "linestyle": styles[(iteration - 1) % len(styles)]}


def _series_style(summary: RunSummary, clients: int, iteration: int) -> dict:
    return series_style(list({it.clients for it in summary.iterations}), clients, iteration)


def _timeline_plot(summary: RunSummary, value, ylabel: str, title: str):
    if not summary.iterations:
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    for it in summary.iterations:
        # Point k covers the interval [k, k+1): draw it at the interval's middle.
        xs = [p.t_s + 0.5 for p in it.timeline]
        ax.plot(xs, [value(p) for p in it.timeline], lw=1.2,
                label=f"{it.clients} clients #{it.iteration}",
                **_series_style(summary, it.clients, it.iteration))
    warmup = summary.iterations[0].warmup_s
    if warmup:
        ax.axvspan(0, warmup, color="grey", alpha=0.15, label="warm-up (excluded)")
    ax.set(xlabel="seconds since the first transaction", ylabel=ylabel, title=title)
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


def _scaling(summary: RunSummary):
    if len(summary.per_clients) < 1:
        return None
    clients = [c.clients for c in summary.per_clients]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.errorbar(clients, [c.tps_mean for c in summary.per_clients],
                yerr=[0 if math.isnan(c.tps_iteration_stddev) else c.tps_iteration_stddev
                      for c in summary.per_clients], marker="o", color="tab:blue", capsize=3)
    ax.set(xlabel="clients", ylabel="TPS", title="Throughput and p99 latency by clients")
    ax.set_xscale("log" if max(clients) / min(clients) >= 8 else "linear")
    ax2 = ax.twinx()
    ax2.plot(clients, [c.latency.percentiles_ms.get("p99") for c in summary.per_clients],
             marker="s", color="tab:red")
    ax2.set_ylabel("p99 latency (ms)", color="tab:red")
    ax.grid(alpha=0.3)
    return fig
