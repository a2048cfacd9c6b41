"""The comparison statistics on synthetic samples with known answers, and the parts of
``compare`` that need no server (rendering, settings, CLI defaults)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from pgdyno.analysis.telemetry import DeviceSummary, Stat, TelemetrySummary
from pgdyno.compare.core import _telemetry_metrics, compare_values, method_note
from pgdyno.compare.model import SCHEMA_VERSION, Comparison, metric_title
from pgdyno.compare.plots import change_bars
from pgdyno.compare.render import write_comparison
from pgdyno.compare.settings_diff import changes_block, diff_block, settings_diff
from pgdyno.compare.stats import (
    FASTER,
    HIGHER,
    LOWER,
    SAME,
    SLOWER,
    TOO_SMALL,
    UNDETERMINED,
    estimate_change,
    t_quantile,
    welch,
)


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 1, 12.706205), (0.975, 2, 4.302653), (0.975, 4, 2.776445),
    (0.975, 10, 2.228139), (0.995, 3, 5.840909), (0.95, 30, 1.697261),
    (0.975, 1e7, 1.959964), (0.025, 5, -2.570582),
])
def test_t_quantiles_match_tables(p: float, df: float, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-6)


def test_welch_against_hand_computation() -> None:
    x, y = [10.0, 12.0, 14.0], [20.0, 21.0, 22.0, 23.0]
    diff, se, df = welch(x, y)
    vx, vy = 4.0 / 3, (5.0 / 3) / 4  # sample variances 4 and 5/3, divided by n
    assert diff == pytest.approx(21.5 - 12.0)
    assert se == pytest.approx(math.sqrt(vx + vy))
    assert df == pytest.approx((vx + vy) ** 2 / (vx**2 / 2 + vy**2 / 3))


def test_known_ratio_interval() -> None:
    # logs of A: ln 100 ± 0.01, of B: ln 120 ± 0.01 (sd 0.01, n 3 each): ratio exactly 1.2
    a = [100 * math.exp(d) for d in (-0.01, 0.0, 0.01)]
    b = [120 * math.exp(d) for d in (-0.01, 0.0, 0.01)]
    est = estimate_change(a, b)
    se = math.sqrt(2 * 0.01**2 / 3)
    t = t_quantile(0.975, 4.0)  # equal variances and sizes: Welch df = 2n - 2
    assert est.df == pytest.approx(4.0)
    assert est.change_pct == pytest.approx(20.0)
    assert est.low_pct == pytest.approx(100 * (1.2 * math.exp(-t * se) - 1))
    assert est.high_pct == pytest.approx(100 * (1.2 * math.exp(t * se) - 1))
    assert est.verdict == FASTER
    assert est.noise_pct == pytest.approx(1.0)
    assert est.method == "welch-log"


def test_direction_names_the_verdict() -> None:
    low, high = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]
    assert estimate_change(low, high, direction=1).verdict == FASTER
    assert estimate_change(high, low, direction=1).verdict == SLOWER
    assert estimate_change(low, high, direction=-1).verdict == SLOWER  # latency went up
    assert estimate_change(high, low, direction=-1).verdict == FASTER
    assert estimate_change(low, high, direction=0).verdict == HIGHER
    assert estimate_change(high, low, direction=0).verdict == LOWER


def test_difference_inside_the_noise_is_not_a_difference() -> None:
    est = estimate_change([1000, 1100, 900], [1050, 1150, 950])
    assert est.verdict == SAME
    assert est.low_pct < 0 < est.high_pct
    assert est.noise_pct > 5


@pytest.mark.parametrize(("a", "b", "why"), [
    ([100.0], [120.0, 121.0], "at least 2 values"),
    ([100.0, 101.0], [], "at least 2 values"),
    ([100.0, 100.0], [120.0, 120.0], "no variation"),
    ([100.0, float("nan")], [120.0, 118.0], "at least 2 values"),
])
def test_too_little_data_is_undetermined(a: list[float], b: list[float], why: str) -> None:
    est = estimate_change(a, b)
    assert est.verdict == UNDETERMINED
    assert why in est.reason
    assert math.isnan(est.low_pct)


def test_zero_values_fall_back_to_difference_of_means() -> None:
    est = estimate_change([0.0, 1.0, 0.0, 1.0], [5.0, 6.0, 5.0, 6.0], direction=0)
    assert est.method == "welch-diff"
    assert est.verdict == HIGHER
    assert estimate_change([0.0, 0.0], [0.0, 1.0]).verdict == TOO_SMALL  # mean 0: no %


def test_false_positive_rate_is_near_the_nominal_level() -> None:
    """A/A on 2000 synthetic pairs of 3 vs 3 normal samples: about 5% called different."""
    rng = random.Random(7)
    calls = 0
    for _ in range(2000):
        a = [rng.gauss(1000, 50) for _ in range(3)]
        b = [rng.gauss(1000, 50) for _ in range(3)]
        calls += estimate_change(a, b).verdict != SAME
    assert 0.025 < calls / 2000 < 0.075


def test_power_on_a_real_shift() -> None:
    rng = random.Random(11)
    hits = sum(estimate_change([rng.gauss(1000, 30) for _ in range(4)],
                               [rng.gauss(800, 30) for _ in range(4)]).verdict == SLOWER
               for _ in range(200))
    assert hits > 190


def test_interval_covers_the_true_ratio() -> None:
    rng = random.Random(3)
    covered = 0
    for _ in range(1000):
        a = [math.exp(rng.gauss(math.log(500), 0.05)) for _ in range(4)]
        b = [math.exp(rng.gauss(math.log(550), 0.05)) for _ in range(5)]
        est = estimate_change(a, b)
        covered += est.low_pct <= 10.0 <= est.high_pct
    assert 0.92 < covered / 1000 < 0.98


def test_settings_diff_ignores_volatile_and_reports_layers() -> None:
    a = {"config": {"name": "default"}, "options": {"clients": [4], "scale": 1},
         "server": {"version": "18.1", "non_default_settings": {
             "port": "1", "synchronous_commit": "on", "work_mem": "4096 kB"}}}
    b = {"config": {"name": "tuned", "sources": {"work_mem": "tuned: 25% rule"}},
         "options": {"clients": [8], "scale": 1},
         "server": {"version": "18.1", "non_default_settings": {
             "port": "2", "synchronous_commit": "off", "shared_buffers": "1GB",
             "work_mem": "8192 kB"}}}
    changes = settings_diff(a, b)
    got = {(c.layer, c.name): (c.before, c.after) for c in changes}
    # natural units, the stock value named (PostgreSQL 18's: shared_buffers 16384 pages of
    # 8 kB = 128 MB, synchronous_commit on, work_mem 4096 kB = 4 MB)
    assert got == {("postgresql", "shared_buffers"): ("128 MB (stock)", "1 GB"),
                   ("postgresql", "synchronous_commit"): ("on (stock)", "off"),
                   ("postgresql", "work_mem"): ("4 MB (stock)", "8 MB"),
                   ("config", "config"): ("default", "tuned"),
                   ("benchmark", "clients"): ("4", "8")}
    work_mem = next(c for c in changes if c.name == "work_mem")
    assert work_mem.rationale == "tuned: 25% rule"
    block = changes_block(changes)
    assert "synchronous_commit = off" in block and "# Was on (stock)" in block
    assert "shared_buffers: 128 MB (stock) → 1 GB" in diff_block(changes).splitlines()
    assert "(default)" not in block + diff_block(changes)


def test_the_stock_value_is_named_where_neither_side_runs_it() -> None:
    """Both sides moved shared_buffers away from the stock value: the stock is said apart,
    from the value the server recorded (boot_val with its unit)."""
    a = _server({"shared_buffers": "131072 8kB"})  # 131072 × 8 kB = 1 GB
    b = _server({"shared_buffers": "786432 8kB", "work_mem": "4096 kB"})  # 6 GB; stock 4 MB
    b["server"]["stock_settings"] = {"shared_buffers": "16384 8kB", "work_mem": "4096 kB"}
    (change,) = settings_diff(a, b)
    assert (change.before, change.after, change.stock) == ("1 GB", "6 GB", "128 MB")
    assert diff_block([change]) == "shared_buffers: 1 GB → 6 GB (stock 128 MB)"
    assert changes_block([change]).endswith("# Was 1 GB; stock 128 MB")


# ----- near-zero metrics, labels, stock settings, one source of defaults -------------------

def _comparison(metrics: list) -> Comparison:
    return Comparison(schema_version=SCHEMA_VERSION, baseline_label="stock",
                      candidate_label="tuned", baseline_runs=["a"], candidate_runs=["b"],
                      confidence=0.95, changes=[], metrics=metrics,
                      method_note=method_note(0.95, metrics, io=False))


def _issue_rows() -> list:
    tps = compare_values(4, "tps", "tx/s", 1, [1000.0, 1010.0, 990.0],
                         [1100.0, 1111.0, 1089.0], label="TPS")
    # the issue's row: 0.4 against 0.13 read IOPS, zeros included
    reads = compare_values(4, "data_read_iops", "IOPS", 0, [0.4, 0.0, 0.8],
                           [0.13, 0.0, 0.26], label="Data read IOPS")
    # above the floor, but a zero on one side: no logarithm, difference of means
    writes = compare_values(4, "data_write_iops", "IOPS", 0, [0.0, 30.0, 30.0],
                            [40.0, 50.0, 45.0], label="Data write IOPS")
    return [tps, reads, writes]


def test_near_zero_metric_is_too_small_to_compare() -> None:
    _, reads, writes = _issue_rows()
    assert reads.verdict == TOO_SMALL
    assert "0.4 IOPS is below 10 IOPS" in reads.reason
    assert math.isnan(reads.change_pct) and math.isnan(reads.ci_low_pct)
    assert not reads.has_ratio_interval
    # the floors per unit, and ~0 for any unit
    assert estimate_change([0.5, 0.6], [5.0, 6.0], unit="MiB/s").verdict == TOO_SMALL
    assert estimate_change([0.2, 0.3], [0.4, 0.5], unit="%").verdict == TOO_SMALL
    assert estimate_change([0.0, 0.0], [3.0, 4.0], unit="ms").verdict == TOO_SMALL
    assert estimate_change([12.0, 13.0], [30.0, 31.0], direction=0,
                           unit="IOPS").verdict == HIGHER
    assert writes.method == "welch-diff" and not writes.has_ratio_interval


def test_chart_keeps_only_ratio_intervals_and_lists_the_rest(tmp_path: Path) -> None:
    rows = _issue_rows()
    cmp = _comparison(rows)
    fig = change_bars(cmp, 4)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["TPS (tx/s)"]
    # +10% ± a few: the axis is not stretched to hundreds of percent by the other rows
    assert all(abs(x) < 30 for x in ax.get_xlim()), ax.get_xlim()
    # a ratio interval from two wild iterations is valid but enormous: cut at the edge
    wild = compare_values(4, "latency_p99_ms", "ms", -1, [1.0, 30.0], [1.0, 90.0],
                          label="Latency p99")
    assert wild.has_ratio_interval and wild.ci_high_pct > 1e4
    ax = change_bars(_comparison([rows[0], wild]), 4).axes[0]
    assert ax.get_xlim()[1] < 1000
    assert f"{wild.ci_high_pct:+,.0f}%" in [t.get_text() for t in ax.texts]
    write_comparison(cmp, [], [], tmp_path)
    md = (tmp_path / "compare.md").read_text()
    chart = md[md.index("### Change per metric"):]
    assert chart.index("plots/change_bars.png") < chart.index("Not in the chart")
    assert ("- Data read IOPS: too small to compare (baseline mean 0.4 IOPS is below 10 "
            "IOPS)") in chart
    assert "- Data write IOPS: difference of means" in chart
    # the table says so, with no change or interval, and Method describes the fallback
    row = next(line for line in md.splitlines() if line.startswith("| Data read IOPS |"))
    assert row.split("|")[4:7] == [" – ", " – ", " too small to compare (baseline mean 0.4 "
                                               "IOPS is below 10 IOPS) "]
    method = md[md.index("## Method"):]
    assert "difference of means" in method and "too small to compare" in method


def test_readers_see_words_with_units_not_keys(tmp_path: Path) -> None:
    cmp = _comparison(_issue_rows())
    write_comparison(cmp, [], [], tmp_path)
    md = (tmp_path / "compare.md").read_text()
    html_text = (tmp_path / "compare.html").read_text()
    for text in (md, html_text):
        for key in ("data_read_iops", "data_write_iops", "tps |"):
            assert key not in text
        assert "TPS (tx/s)" in text and "Data write IOPS" in text
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert [m["metric"] for m in saved["metrics"]] == ["tps", "data_read_iops",
                                                       "data_write_iops"]


def _telemetry(*devices: tuple[str, list[str], float, float]) -> TelemetrySummary:
    t = TelemetrySummary()
    t.devices = [DeviceSummary(name, roles=roles, w_s=Stat(avg=w), r_s=Stat(avg=r))
                 for name, roles, w, r in devices]
    return t


def test_data_and_wal_on_one_device_are_one_row() -> None:
    shared = SimpleNamespace(telemetry=_telemetry(("vda", ["data", "wal"], 500.0, 20.0)))
    metrics = _telemetry_metrics([shared], [shared])
    assert [(m.name, m.label) for m in metrics] == [
        ("cpu_busy_pct", "CPU busy"),
        ("data_wal_write_iops", "Data + WAL (vda) write IOPS"),
        ("data_wal_read_iops", "Data + WAL (vda) read IOPS"),
        ("data_wal_write_iops_cv", "Data + WAL (vda) write IOPS CV"),
        ("wal_mb_s", "WAL written")]
    assert metrics[-1].unit == "MiB/s"
    assert metrics[1].value(shared.telemetry) == 500.0
    apart = SimpleNamespace(telemetry=_telemetry(("vda", ["data"], 300.0, 15.0),
                                                 ("vdb", ["wal"], 200.0, 0.0),
                                                 ("sdz", [], 9.0, 9.0)))
    metrics = _telemetry_metrics([apart], [apart])
    counts = [m for m in metrics[1:-1] if not m.name.endswith("_cv")]
    assert [m.label for m in counts] == [
        "Data (vda) write IOPS", "Data (vda) read IOPS", "WAL (vdb) write IOPS",
        "WAL (vdb) read IOPS"]
    assert [m.value(apart.telemetry) for m in counts] == [300.0, 15.0, 200.0, 0.0]
    assert metric_title("Seq read MiB/s", "MiB/s") == "Seq read MiB/s"
    assert metric_title("Latency p99", "ms") == "Latency p99 (ms)"


def _server(settings: dict[str, str]) -> dict:
    return {"server": {"version": "18.1", "version_num": 180001,
                       "non_default_settings": settings}}


def test_a_stock_value_on_one_side_is_not_a_change() -> None:
    # PostgreSQL 18's documented defaults: autovacuum on, shared_buffers 128MB (16384 pages
    # of 8kB), work_mem 4MB, checkpoint_completion_target 0.9, wal_level replica
    a = _server({"max_connections": "300"})
    b = _server({"max_connections": "300", "autovacuum": "on", "shared_buffers": "16384 8kB",
                 "work_mem": "4096 kB", "checkpoint_completion_target": "0.9",
                 "wal_level": "replica", "synchronous_commit": "off"})
    got = {(c.name, c.before, c.after) for c in settings_diff(a, b)}
    assert got == {("synchronous_commit", "on (stock)", "off")}
    # the other way round, and a real change of a value written on both sides
    got = {(c.name, c.before, c.after) for c in settings_diff(b, a)}
    assert got == {("synchronous_commit", "off", "on (stock)")}
    bigger = _server({"shared_buffers": "131072 8kB", "autovacuum": "off"})
    got = {(c.name, c.before, c.after) for c in settings_diff(a, bigger)}
    assert got == {("max_connections", "300", "100 (stock)"),
                   ("shared_buffers", "128 MB (stock)", "1 GB"),
                   ("autovacuum", "on (stock)", "off")}
    # what pgdyno wrote, when a server did not answer: '128MB' is the stock value too
    wrote_a = {"config": {"pg_settings": {}}}
    wrote_b = {"config": {"pg_settings": {"shared_buffers": "128MB", "work_mem": "64MB"}},
               "server": {"version": "18.1"}}
    got = {(c.name, c.before, c.after) for c in settings_diff(wrote_a, wrote_b)
           if c.layer == "postgresql"}
    assert got == {("work_mem", "4 MB (stock)", "64 MB")}


@pytest.mark.parametrize("command", ["compare", "validate", "scaling-check"])
def test_bench_defaults_have_one_source(command: str) -> None:
    import typer
    from typer.main import get_command
    from typer.testing import CliRunner

    from pgdyno.cli import compare_cmds
    from pgdyno.runner.options import defaults

    app = typer.Typer()
    compare_cmds.register(app)
    cmd = get_command(app).commands[command]
    params = {p.name: p for p in cmd.params}
    expected = defaults()
    for name in ("duration", "warmup", "iterations", "clients", "scale", "protocol", "via",
                 "telemetry", "context"):
        if name in params:
            assert params[name].default == expected[name], (command, name)
    if command != "validate":  # validation runs its own three states
        assert params["iterations"].default == expected["iterations"]
    res = CliRunner().invoke(app, [command, "--help"], terminal_width=200,
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert f"measured seconds per iteration [default: {expected['duration']}]" in flat
    assert f"[default: {expected['warmup']}]" in flat
