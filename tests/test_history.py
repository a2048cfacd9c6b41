"""`pgdyno history` on series with level shifts planted by the test, written into a real
SQLite index of runs: each shift is found at the run it was planted at, with the size the
test recomputes from the values it wrote; a series without a shift, and one with a single
outlier, have none; `--fail-on-regression` exits 3 only past its threshold; bad options are
one line. No server: the runs are rows of the index, as a run writes them."""

from __future__ import annotations

import json
import re
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from pgdyno.analysis.history import (
    HISTORY_SCHEMA_VERSION,
    DetectionSettings,
    change_indexes,
    load_history,
)
from pgdyno.errors import UsageError
from pgdyno.results.index import RunIndex, RunRow
from tests.conftest import run_cli_here

START = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
LEVEL_TPS = 3000.0
NOISE_TPS = 45.0  # 1.5%: a quiet machine's run-to-run spread
LEVEL_P99 = 5.0
NOISE_P99 = 0.08


def row(i: int, tps: float, p99: float, *, context: str = "box--tpcb", config: str = "default",
        clients: str = "8", host: str = "box", workload: str = "tpcb") -> RunRow:
    """The index row of the i-th nightly run, as `pgdyno bench` writes it."""
    when = START + timedelta(days=i)
    return RunRow(run_id=f"{context}/{workload}-{when:%Y%m%dT%H%M%SZ}", context=context,
                  workload=workload, status="ok", started_at=f"{when:%Y-%m-%dT%H:%M:%SZ}",
                  ended_at=f"{when + timedelta(minutes=5):%Y-%m-%dT%H:%M:%SZ}", config=config,
                  clients=clients, headline=tps, p99_ms=p99, pg_version="18.1",
                  headline_metric="TPS", headline_unit="transactions/s", dataset="scale 10",
                  host=host, headline_direction="higher")


def noisy(n: int, level: float, sd: float, seed: int) -> np.ndarray:
    return level + np.random.default_rng(seed).normal(0.0, sd, n)


def write_index(root: Path, rows: list[RunRow]) -> Path:
    results = root / "results"
    results.mkdir()
    RunIndex(results).upsert_many(rows)
    return results


def history(results: Path, *args: str):
    out = run_cli_here(["history", "--results-dir", str(results), *args], results.parent)
    return out, results / "history"


def changes_of(out_dir: Path, metric: str = "headline") -> list:
    report = load_history(out_dir / "history.json")
    (series,) = [s for s in report.series if s.key.metric == metric]
    return series.change_points


# ----- planted shifts ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """24 nightly runs: TPS drops by 15% from run 14 (index 13), p99 rises by 30% from run
    19 (index 18), each under its own noise."""
    tps = noisy(24, LEVEL_TPS, NOISE_TPS, seed=11)
    tps[13:] *= 0.85
    p99 = noisy(24, LEVEL_P99, NOISE_P99, seed=12)
    p99[18:] *= 1.30
    root = tmp_path_factory.mktemp("history-planted")
    results = write_index(root, [row(i, t, p) for i, (t, p) in enumerate(zip(tps, p99,
                                                                              strict=True))])
    return results, tps, p99


def test_a_planted_drop_is_found_at_its_run_with_its_size(planted) -> None:
    results, tps, _ = planted
    out, out_dir = history(results, "--metric", "headline")
    assert out.returncode == 0, out.stderr
    (change,) = changes_of(out_dir)
    first_slow = row(13, 0, 0)
    assert change.run_id == first_slow.run_id and change.started_at == first_slow.started_at
    # The levels are the means of the runs on either side, as the test wrote them.
    assert change.before == pytest.approx(statistics.fmean(tps[:13]), rel=1e-9)
    assert change.after == pytest.approx(statistics.fmean(tps[13:]), rel=1e-9)
    expected = (statistics.fmean(tps[13:]) / statistics.fmean(tps[:13]) - 1) * 100
    assert change.change_pct == pytest.approx(expected, abs=0.01)
    assert change.change_pct == pytest.approx(-15.0, abs=1.5)  # the planted size
    assert change.worse_pct == pytest.approx(-expected, abs=0.01)  # lower TPS is worse
    assert change.p_value < 0.001
    # The terminal says it too: the run, both levels, the change, the p-value.
    name = first_slow.run_id.split("/")[1]
    line = next(x for x in out.stdout.splitlines() if x.startswith("At run "))
    assert name in line and f"{expected:+.1f}% (worse)" in line
    assert f"from {statistics.fmean(tps[:13]):,.0f} to {statistics.fmean(tps[13:]):,.0f}" \
        in line


def test_a_planted_latency_rise_is_worse_when_higher(planted) -> None:
    results, _, p99 = planted
    out, out_dir = history(results, "--metric", "p99")
    assert out.returncode == 0, out.stderr
    (change,) = changes_of(out_dir, "p99")
    assert change.run_id == row(18, 0, 0).run_id
    expected = (statistics.fmean(p99[18:]) / statistics.fmean(p99[:18]) - 1) * 100
    assert change.change_pct == pytest.approx(expected, abs=0.01)
    assert change.change_pct == pytest.approx(30.0, abs=3.0)
    assert change.worse_pct == pytest.approx(expected, abs=0.01)  # higher latency is worse


def test_the_table_aligns_numbers_right_and_text_left(planted) -> None:
    results, tps, _ = planted
    out, _ = history(results, "--metric", "headline")
    lines = out.stdout.splitlines()
    header = next(i for i, x in enumerate(lines) if x.lstrip().startswith("#  Run"))
    table = lines[header:header + 25]
    value_end = table[0].index("TPS (transactions/s)") + len("TPS (transactions/s)")
    run_start = table[0].index("Run")
    for i, line in enumerate(table[1:]):
        # Each value ends at its header's end (right-aligned), each run name starts at its
        # header's start (left-aligned); the values are the ones written.
        assert line[:value_end].endswith(f"{tps[i]:,.0f}"), line
        assert line[run_start:].startswith(row(i, 0, 0).run_id.split("/")[1]), line
    assert re.search(r"^14 .* -1\d\.\d%  worse ", table[14])


def test_two_shifts_are_both_found(tmp_path: Path) -> None:
    tps = noisy(30, LEVEL_TPS, NOISE_TPS, seed=21)
    tps[10:] *= 1.20  # an improvement...
    tps[20:] *= 0.75  # ... then a regression
    results = write_index(tmp_path, [row(i, t, LEVEL_P99) for i, t in enumerate(tps)])
    out, out_dir = history(results, "--metric", "headline")
    assert out.returncode == 0, out.stderr
    changes = changes_of(out_dir)
    assert [c.run_id for c in changes] == [row(10, 0, 0).run_id, row(20, 0, 0).run_id]
    assert [c.worse_pct < 0 for c in changes] == [True, False]
    assert changes[1].change_pct == pytest.approx(
        (statistics.fmean(tps[20:]) / statistics.fmean(tps[10:20]) - 1) * 100, abs=0.01)


@pytest.mark.parametrize("seed", [31, 32, 33, 34, 35])
def test_a_series_without_a_shift_has_no_change_point(tmp_path: Path, seed: int) -> None:
    tps = noisy(30, LEVEL_TPS, NOISE_TPS, seed=seed)
    results = write_index(tmp_path, [row(i, t, LEVEL_P99) for i, t in enumerate(tps)])
    out, out_dir = history(results, "--metric", "headline", "--fail-on-regression", "0")
    assert out.returncode == 0, out.stderr
    assert changes_of(out_dir) == []
    assert "no change point: one level" in out.stdout


@pytest.mark.parametrize("where", [9, 19])
def test_a_single_outlier_is_not_a_change_point(tmp_path: Path, where: int) -> None:
    """A run at half the level, in the middle or as the newest run: Otava alone calls the
    newest one a change point (a level of one run); the minimum segment length does not."""
    tps = noisy(20, LEVEL_TPS, NOISE_TPS, seed=41)
    tps[where] = LEVEL_TPS / 2
    if where == 19:
        from otava.analysis import compute_change_points

        bare, _ = compute_change_points(list(tps), window_len=20, max_pvalue=0.001)
        assert [int(c.index) for c in bare] == [19]  # the failure mode guarded against
    results = write_index(tmp_path, [row(i, t, LEVEL_P99) for i, t in enumerate(tps)])
    out, out_dir = history(results, "--metric", "headline", "--fail-on-regression", "5")
    assert out.returncode == 0, out.stdout + out.stderr
    assert changes_of(out_dir) == []


def test_a_new_level_counts_once_it_has_held_for_min_segment_runs() -> None:
    tps = list(noisy(22, LEVEL_TPS, NOISE_TPS, seed=51))
    settings = DetectionSettings(min_segment=3)
    for n in (1, 2):  # the newest one or two runs lower: not yet a level
        assert change_indexes([*tps[:20], *(t * 0.7 for t in tps[20:20 + n])], settings) == []
    found = change_indexes([*tps[:19], *(t * 0.7 for t in tps[19:22])], settings)
    assert [i for i, _ in found] == [19]


def test_a_split_inside_equal_values_is_moved_to_where_the_level_changes() -> None:
    # Recorded from a real series: e-divisive put its split between the two equal first
    # runs, leaving a segment of two, which alone would drop the 20-fold change.
    tps = [1601.0, 1601.0, 1634.0, 80.0, 82.0, 82.0]
    found = change_indexes(tps, DetectionSettings(max_pvalue=0.05))
    assert [i for i, _ in found] == [3]
    assert found[0][1] < 1e-6
    flat = [1601.0, 1601.0, 1634.0, 1601.0, 1602.0, 1600.0]
    assert change_indexes(flat, DetectionSettings(max_pvalue=0.05)) == []


# ----- the CI gate --------------------------------------------------------------------------

def test_fail_on_regression_exit_codes(planted) -> None:
    results, tps, _ = planted
    drop = (1 - statistics.fmean(tps[13:]) / statistics.fmean(tps[:13])) * 100
    failed, _ = history(results, "--metric", "headline", "--fail-on-regression",
                        f"{drop - 2:.1f}")
    assert failed.returncode == 3, failed.stderr
    (line,) = [x for x in failed.stdout.splitlines() if x.startswith("regression: ")]
    assert row(13, 0, 0).run_id in line and f"{drop:.1f}% worse" in line
    assert failed.stderr.splitlines() == [
        f"pgdyno: regression: 1 series worse by more than {drop - 2:.1f}% (exit 3)"]
    passed, _ = history(results, "--metric", "headline", "--fail-on-regression",
                        f"{drop + 2:.1f}")
    assert passed.returncode == 0, passed.stderr
    assert "regression" not in passed.stdout + passed.stderr
    # Without the option a regression is shown, never an exit code.
    assert history(results, "--metric", "headline")[0].returncode == 0


def test_an_improvement_never_fails_the_gate(tmp_path: Path) -> None:
    tps = noisy(16, LEVEL_TPS, NOISE_TPS, seed=61)
    tps[8:] *= 1.5
    p99 = noisy(16, LEVEL_P99, NOISE_P99, seed=62)
    p99[8:] *= 0.6
    results = write_index(tmp_path, [row(i, t, p) for i, (t, p) in enumerate(zip(tps, p99,
                                                                              strict=True))])
    out, out_dir = history(results, "--fail-on-regression", "0")
    assert out.returncode == 0, out.stderr
    assert [c.run_id for c in changes_of(out_dir)] == [row(8, 0, 0).run_id]
    assert [c.run_id for c in changes_of(out_dir, "p99")] == [row(8, 0, 0).run_id]


@pytest.mark.parametrize(("args", "words"), [
    (["--fail-on-regression", "-5"], "--fail-on-regression -5: accepted: a percentage"),
    (["--metric", "tps"], "--metric"),
    (["--min-segment", "1"], "--min-segment 1: accepted: 2 runs or more"),
    (["--max-pvalue", "1.5"], "--max-pvalue 1.5: accepted: a p-value between 0 and 1"),
    (["--window", "4"], "--window 4: accepted: at least twice --min-segment"),
])
def test_bad_options_are_one_line(planted, args: list[str], words: str) -> None:
    out, _ = history(planted[0], *args)
    assert out.returncode == 2
    assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr


# ----- series, the page, the record ---------------------------------------------------------

def test_each_series_is_watched_apart_and_selected_by_its_keys(tmp_path: Path) -> None:
    rows = []
    for i, t in enumerate(noisy(12, LEVEL_TPS, NOISE_TPS, seed=71)):
        rows.append(row(i, t, LEVEL_P99))
        # The same runs of another config, and at another client count, a third lower.
        rows.append(row(i, t * (0.6 if i >= 6 else 1), LEVEL_P99, config="tuned",
                        context="box--tpcb-tuned"))
        rows.append(row(i, t / 3, LEVEL_P99, clients="1", context="box--tpcb-c1"))
    results = write_index(tmp_path, rows)
    out, out_dir = history(results, "--metric", "headline")
    assert out.returncode == 0, out.stderr
    report = load_history(out_dir / "history.json")
    keys = {(s.key.config, s.key.clients): s for s in report.series}
    assert set(keys) == {("default", "8"), ("tuned", "8"), ("default", "1")}
    # A third lower, or 40% lower from run 7 on: each its own series, the others unchanged.
    assert keys["default", "1"].change_points == keys["default", "8"].change_points == []
    assert [c.run_id for c in keys["tuned", "8"].change_points] == [
        row(6, 0, 0, context="box--tpcb-tuned").run_id]
    only, only_dir = history(results, "--config", "tuned", "--metric", "headline",
                             "--fail-on-regression", "10", "--output", str(tmp_path / "one"))
    assert only.returncode == 3
    assert [s.key.config for s in load_history(only_dir.parent.parent / "one" /
                                               "history.json").series] == ["tuned"]
    none, _ = history(results, "--workload", "tproch", "--output", str(tmp_path / "none"))
    assert none.returncode == 0 and "no finished run" in none.stderr
    assert not (tmp_path / "none").exists()


def test_the_page_shows_every_series_with_its_plot(planted) -> None:
    results, _, _ = planted
    out, out_dir = history(results)
    assert out.returncode == 0, out.stderr
    page = (out_dir / "history.html").read_text()
    report = load_history(out_dir / "history.json")
    assert [s.key.metric for s in report.series] == ["headline", "p99"]
    # One section and one embedded PNG per series, each PNG the one written beside it.
    assert page.count('<img alt="') == 2 and page.count("data:image/png;base64,") == 2
    for number in (1, 2):
        png = out_dir / "plots" / f"series-{number:03d}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'id="series-{number}"' in page
    for series in report.series:
        assert series.key.name() in page
    # The change of each series in its words, in the Markdown too.
    markdown = (out_dir / "history.md").read_text()
    assert markdown.count("(worse)**, t-test p-value") == 2
    assert "|---:|---|" in markdown  # "#" right-aligned, "Run" left


def test_the_record_is_versioned(planted, tmp_path: Path) -> None:
    results, _, _ = planted
    _, out_dir = history(results)
    data = json.loads((out_dir / "history.json").read_text())
    assert data["schema_version"] == HISTORY_SCHEMA_VERSION
    data["schema_version"] += 1
    newer = tmp_path / "history.json"
    newer.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="is not supported .a newer pgdyno wrote it"):
        load_history(newer)


def test_the_plot_marks_each_change_with_its_run_levels_and_p_value(tmp_path: Path) -> None:
    """The figure's own artists, read back: labelled axes with the metric's unit, one dashed
    line at each change run's start, its label naming the run, both levels, the change and
    the p-value; each level a line over its runs at the mean of the values written."""
    import matplotlib.dates as mdates

    from pgdyno.reports.history import history_figure
    from pgdyno.reports.plots import plt

    tps = noisy(30, LEVEL_TPS, NOISE_TPS, seed=91)
    tps[10:] *= 1.20
    tps[20:] *= 0.75
    results = write_index(tmp_path, [row(i, t, LEVEL_P99) for i, t in enumerate(tps)])
    _, out_dir = history(results, "--metric", "headline")
    (series,) = load_history(out_dir / "history.json").series
    fig = history_figure(series)
    try:
        (ax,) = fig.axes
        assert ax.get_xlabel() == "run start (UTC)"
        assert ax.get_ylabel() == "TPS (transactions/s)"
        dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        starts = [mdates.date2num(START + timedelta(days=i)) for i in (10, 20)]
        drawn = [mdates.date2num(line.get_xdata()[0]) for line in dashed]
        assert drawn == pytest.approx(starts)
        labels = [t.get_text() for t in ax.texts]
        for index, label, (before, after) in zip((10, 20), labels, [
                (tps[:10], tps[10:20]), (tps[10:20], tps[20:])], strict=True):
            change = (statistics.fmean(after) / statistics.fmean(before) - 1) * 100
            assert row(index, 0, 0).run_id.split("/")[1] in label
            assert f"{statistics.fmean(before):,.0f} → {statistics.fmean(after):,.0f}" in label
            assert f"{change:+.1f}%" in label and "p=" in label
        levels = [segments.get_segments()[0] for segments in ax.collections]
        means = [statistics.fmean(part) for part in (tps[:10], tps[10:20], tps[20:])]
        assert [segment[0][1] for segment in levels] == pytest.approx(means)
    finally:
        plt.close(fig)
