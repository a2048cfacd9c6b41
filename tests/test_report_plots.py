"""The run report's plots, drawn from summaries built here and inspected as matplotlib
figures: the TPS histogram, the scaling curve, and one time axis without partial seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pgdyno.analysis import telemetry as t
from pgdyno.reports import markdown, plots, run_report
from pgdyno.reports.document import build_document
from pgdyno.reports.plots import plt
from pgdyno.reports.telemetry_sections import TimeAxis, _plot_cpu, _plot_waits, _plot_write_iops
from pgdyno.results.rundir import RunDirectory
from tests.test_report_rendering import iteration, run_summary, run_view


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ===== 3. TPS histogram ===================================================================

def test_tps_histogram_per_client_count(tmp_path: Path) -> None:
    """The TPS histogram, from the measured 1 s intervals, one panel per
    client count (iterations pooled), axes labelled with units."""
    tps = {2: ([100.0, 110.0, 120.0, 110.0], [105.0, 115.0, 125.0, 95.0]),
           8: ([300.0, 310.0, 290.0, 305.0], [295.0, 300.0, 315.0, 280.0])}
    summary = run_summary([iteration(c, i + 1, values, tail_tps=3.0)
                           for c, runs in tps.items() for i, values in enumerate(runs)])
    made = plots.make_plots(summary, tmp_path / "plots")
    assert made["tps_histogram"] == "plots/tps_histogram.png"
    assert (tmp_path / "plots" / "tps_histogram.png").read_bytes()[:4] == b"\x89PNG"
    fig = plots._tps_histogram(summary)
    axes = fig.axes
    assert len(axes) == 2
    everything = [v for runs in tps.values() for values in runs for v in values]
    edges = np.histogram_bin_edges(everything, bins="auto")
    for ax, (clients, runs) in zip(axes, tps.items(), strict=True):
        pooled = runs[0] + runs[1]  # the warm-up and the partial tail are not in it
        counts, _ = np.histogram(pooled, bins=edges)
        heights = [p.get_height() for p in ax.patches]
        assert heights == pytest.approx(list(100.0 * counts / len(pooled)))
        assert f"{clients} clients" in ax.get_legend().get_texts()[0].get_text()
        assert "%" in ax.get_ylabel()
    assert "TPS" in axes[-1].get_xlabel() and "1 s" in axes[-1].get_xlabel()
    md = markdown.render_document(build_document(summary, run_view(clients=(2, 8)), made))
    assert "](plots/tps_histogram.png)" in md.split("## Transactions per second")[1]


# ===== 4. scaling =========================================================================

def test_scaling_needs_two_client_counts(tmp_path: Path) -> None:
    """The scaling plot needs two client counts: one draws no curve (and leaves no stale
    file behind)."""
    out = tmp_path / "plots"
    out.mkdir()
    (out / "scaling.png").write_bytes(b"stale")
    one = run_summary([iteration(4, 1, [1000.0, 1010.0])])
    assert plots._scaling(one) is None
    made = plots.make_plots(one, out)
    assert "scaling" not in made and not (out / "scaling.png").exists()


def test_scaling_has_integer_ticks_a_legend_and_both_series() -> None:
    """The scaling plot: client ticks at the counts measured, a legend naming both series, each
    series on its own y axis and inside it."""
    summary = run_summary([iteration(c, 1, [v, v]) for c, v in
                           ((1, 900.0), (4, 3000.0), (16, 3900.0), (64, 3950.0))])
    fig = plots._scaling(summary)
    ax, ax2 = fig.axes
    assert list(ax.get_xticks()) == [1, 4, 16, 64]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["1", "4", "16", "64"]
    assert list(ax.xaxis.get_minorticklocs()) == []
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert len(labels) == 2 and "TPS" in labels[0] and "p99" in labels[1]
    tps_top = max(c.tps_mean for c in summary.per_clients)
    p99_top = max(c.latency.percentiles_ms["p99"] for c in summary.per_clients)
    assert ax.get_ylim()[0] == 0 and tps_top < ax.get_ylim()[1]
    assert ax2.get_ylim()[0] == 0 and p99_top < ax2.get_ylim()[1]
    (p99_line,) = ax2.get_lines()
    assert list(p99_line.get_ydata()) == [c.latency.percentiles_ms["p99"]
                                          for c in summary.per_clients]


# ===== 5. one time axis, no partial intervals =============================================

START = 1_000.0
WARMUP = 2
SECONDS = 5


def _telemetry() -> t.TelemetrySummary:
    """Samples every second from 0.05 s after the start, warm-up included, and the
    sampler's last tick at stop 0.03 s after the one before it (a partial interval)."""
    ticks = [START + 0.05 + k for k in range(1, WARMUP + SECONDS + 1)]
    ticks.append(ticks[-1] + 0.03)
    writes = [100.0 * k for k in range(1, len(ticks))] + [9_999.0]
    buckets = [START + 0.5 + k for k in range(WARMUP + SECONDS + 1)]  # the last: partial
    return t.TelemetrySummary(
        window_start=START + WARMUP, window_end=START + WARMUP + SECONDS,
        devices=[t.DeviceSummary("vda", ["data"])], roles=[t.RoleInfo("data", "/d", "vda")],
        series=t.Series(host_t=ticks, cpu_usr=[10.0] * len(ticks),
                        cpu_sys=[5.0] * len(ticks), cpu_iowait=[1.0] * len(ticks),
                        cpu_soft=[0.0] * len(ticks), cpu_other=[0.0] * len(ticks),
                        disk_w_s={"vda": writes}, disk_r_s={"vda": [0.0] * len(ticks)},
                        wait_t=buckets, wait_aas={"CPU": [1.0] * len(buckets)}))


def test_every_series_on_one_time_axis_without_partial_intervals() -> None:
    """Disk, CPU, waits and TPS on one time axis, seconds since the iteration's start, each at
    its interval's middle; the sampler's 0.03 s last interval and the last, partial wait
    bucket are not drawn."""
    s = _telemetry()
    axis = TimeAxis(START, WARMUP, s.window_end)
    tps = [(START + k + 0.5, 1000.0) for k in range(WARMUP + SECONDS)]
    fig, ax = plt.subplots()
    assert _plot_write_iops(s, ax, axis, tps)
    disk = ax.get_lines()[0]
    # Interval k runs from tick k-1 to tick k: its middle is 0.05 + k - 0.5 s after the start.
    expected = [0.05 + k - 0.5 for k in range(1, WARMUP + SECONDS + 1)]
    assert list(disk.get_xdata()) == pytest.approx(expected)
    assert 9_999.0 not in list(disk.get_ydata())  # the partial interval's rate
    tps_line = fig.axes[1].get_lines()[0]
    assert list(tps_line.get_xdata()) == pytest.approx([k + 0.5 for k in range(7)])
    fig, ax = plt.subplots()
    assert _plot_cpu(s, ax, axis, None)
    assert sorted({round(x, 6) for x in _stack_x(ax)}) == pytest.approx(expected)
    fig, ax = plt.subplots()
    assert _plot_waits(s, ax, axis, None)
    assert sorted({round(x, 6) for x in _stack_x(ax)}) == pytest.approx(
        [k + 0.5 for k in range(WARMUP + SECONDS)])


def _stack_x(ax) -> list[float]:  # noqa: ANN001
    """x of the vertices of a stackplot's polygons."""
    return [float(x) for coll in ax.collections for path in coll.get_paths()
            for x, _ in path.vertices]


def test_partial_last_second_is_dropped_from_the_run_plots(tmp_path: Path,
                                                           monkeypatch) -> None:  # noqa: ANN001
    """The TPS timeline's last, partial second (transactions that ended after the
    planned end) is not drawn, in the run's plots nor in the telemetry plots, which get
    the iteration's start as their origin and the warm-up."""
    it = iteration(2, 1, [500.0, 520.0, 510.0], warmup_s=WARMUP, start=START, tail_tps=7.0,
                   telemetry=_telemetry())
    summary = run_summary([it])
    fig = plots._tps_timeline(summary)
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("2 clients")]
    assert list(line.get_xdata()) == [0.5, 1.5, 2.5, 3.5, 4.5]
    assert 7.0 not in list(line.get_ydata())
    seen: dict = {}
    real = run_report.telemetry_plots

    def record(summary, plots_dir, tps, **kwargs):  # noqa: ANN001, ANN202
        seen.update(tps=tps, **kwargs)
        return real(summary, plots_dir, tps, **kwargs)

    monkeypatch.setattr(run_report, "telemetry_plots", record)
    sections = run_report.telemetry_report_sections(summary, RunDirectory(tmp_path))
    assert seen["start"] == START and seen["warmup_s"] == WARMUP
    assert seen["tps"] == [(START + k + 0.5, v)
                           for k, v in enumerate([500.0, 500.0, 500.0, 520.0, 510.0])]
    assert (tmp_path / "plots" / "c2-i1" / "write_iops_vs_tps.png").exists()
    assert "plots/c2-i1/write_iops_vs_tps.png" in markdown.render_sections(sections)
