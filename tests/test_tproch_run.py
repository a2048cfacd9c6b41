"""`pgdyno bench tproch` end to end on real servers, every figure recomputed from raw files.

- A run at SF 0.05 with the power test and two throughput streams: geometric means,
  power@SF and throughput@SF recomputed here from queries.csv, refresh.csv and tests.json;
  every query's plan and parameters kept for every stream; the report and its plots.
- A query held past --query-timeout (Q15's view creation waits on a lock this test holds)
  leaves the other 21 and the geomean's missing count right.
- The same queries under enable_hashjoin=off: compare names the plan change beside the
  speedup, charts each stream's geometric mean A against B (recomputed here from the raw
  timings), and writes every change in its one sign convention (B/A − 1).
- What a reader sees: the report opens with the answer, names what ran (a power-only run
  is the power stream alone, not "2 streams"), and shows the load's phases.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.workloads.bulkload import MINIMAL_WAL
from pgdyno.workloads.tproch.schema import DATASET_SCHEMA as TPCH_SCHEMA
from tests.answer import answer, check_load_table, markdown_table, seconds, sections
from tests.conftest import make_shared_dir, scratch_database
from tests.conftest import run_cli_here as run_cli

pytestmark = pytest.mark.server

SF = "0.05"
"""Big enough that the iteration lasts over a second even when the VM is fast (2 s here at
its fast level; at SF 0.01 it took 0.5 s, one host-sample interval, and no resources plot)."""


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def run(workdir: Path) -> Iterator[Path]:
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "tproch", "--scale-factor", SF, "--streams", "2",
                    "--iterations", "1", "--explain-analyze", "--no-progress",
                    "--results-dir", str(results)], make_shared_dir("pgdyno-tproch-"),
                   timeout=600)
    assert proc.returncode == 0, proc.stderr
    yield next(results.glob("*/tproch-*"))


def test_figures_recomputed_from_raw_timings(run: Path) -> None:
    it_dir = run / "raw" / "tproch" / "c2-i1"
    queries = rows(it_dir / "queries.csv")
    refresh = rows(it_dir / "refresh.csv")
    tests = json.loads((it_dir / "tests.json").read_text())
    assert len(queries) == 22 * 3 and all(q["status"] == "ok" for q in queries)
    # Power: RF1, stream 0, RF2; throughput: two refresh pairs beside streams 1 and 2.
    assert [(r["test"], r["function"]) for r in refresh if r["test"] == "power"] == [
        ("power", "RF1"), ("power", "RF2")]
    assert sorted(r["function"] for r in refresh if r["test"] == "throughput") == [
        "RF1", "RF1", "RF2", "RF2"]
    assert len({r["pair"] for r in refresh}) == 3
    power_order = [int(q["query"]) for q in queries if q["test"] == "power"]
    assert power_order == [14, 2, 9, 20, 6, 17, 18, 8, 21, 13, 3, 22, 16, 4, 11, 15, 1, 10,
                           19, 5, 7, 12]
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    m = it["metrics"]
    seconds = [float(q["seconds"]) for q in queries]
    assert m["geomean_s"] == pytest.approx(geomean(seconds))
    power = [float(q["seconds"]) for q in queries if q["test"] == "power"]
    power_rf = [float(r["seconds"]) for r in refresh if r["test"] == "power"]
    assert m["power_geomean_s"] == pytest.approx(geomean(power))
    assert m["power_at_sf"] == pytest.approx(3600 * float(SF) / geomean(power + power_rf))
    ts = tests["throughput"]["end"] - tests["throughput"]["start"]
    assert m["throughput_at_sf"] == pytest.approx(2 * 22 * 3600 / ts * float(SF))
    assert m["qphh_at_sf"] == pytest.approx(math.sqrt(m["power_at_sf"] * m["throughput_at_sf"]))
    q6 = [float(q["seconds"]) for q in queries if q["query"] == "6"]
    assert m["q06_s"] == pytest.approx(geomean(q6))
    assert m["queries_missing"] == 0
    # compare's geomean interval is over streams: one geometric mean per stream.
    per_stream = sorted(geomean([float(q["seconds"]) for q in queries
                                 if (q["test"], q["stream"]) == key])
                        for key in {(q["test"], q["stream"]) for q in queries})
    assert sorted(it["samples"]["geomean_s"]) == pytest.approx(per_stream)


def test_plans_parameters_and_sql_kept_per_stream(run: Path) -> None:
    it_dir = run / "raw" / "tproch" / "c2-i1"
    for stream in (0, 1, 2):
        saved = json.loads((it_dir / "streams" / f"stream-{stream}.json").read_text())
        assert sorted(saved["order"]) == list(range(1, 23))
        assert set(saved["parameters"]) == {str(q) for q in range(1, 23)}
        for q in range(1, 23):
            plan = json.loads((it_dir / "plans" / f"s{stream}-q{q:02d}.json").read_text())
            assert plan[0]["Plan"]["Node Type"]
            assert (it_dir / "sql" / f"s{stream}-q{q:02d}.sql").read_text().strip()
    # Executed plans with buffers for the power stream only.
    analyzed = json.loads((it_dir / "plans" / "s0-q01.analyze.json").read_text())
    assert "Actual Rows" in analyzed[0]["Plan"] and "Shared Hit Blocks" in analyzed[0]["Plan"]
    assert not list((it_dir / "plans").glob("s1-*.analyze.json"))
    # Q15's view is named per stream, so concurrent streams never collide.
    assert "revenue_s1" in (it_dir / "sql" / "s1-q15.sql").read_text()
    s1 = json.loads((it_dir / "streams" / "stream-1.json").read_text())["parameters"]
    s2 = json.loads((it_dir / "streams" / "stream-2.json").read_text())["parameters"]
    assert s1 != s2


def test_report_tables_and_plots(run: Path) -> None:
    md = (run / "report.md").read_text()
    assert "## TPROC-H: tests" in md and "non-audited" in md.lower()
    assert "Pricing Summary Report" in md
    assert "Plan shape" in md
    summary = json.loads((run / "summary.json").read_text())
    geo = summary["iterations"][0]["metrics"]["geomean_s"]
    assert f"{geo:,.3f}" in md
    for name in ("tproch_query_times.png", "tproch_timeline.png", "tproch_resources.png"):
        assert (run / "plots" / "c2-i1" / name).stat().st_size > 5_000, name


def test_report_opens_with_the_answer_names_the_streams_and_shows_the_load(run: Path) -> None:
    md = (run / "report.md").read_text()
    assert sections(md)[0] == "Answer"
    said = dict(answer(md))
    geo = json.loads((run / "summary.json").read_text())["iterations"][0]["metrics"]["geomean_s"]
    best = said["best Geometric mean of query times"]
    assert best.startswith(f"{geo:.3f} s at 2 throughput streams after the power stream (")
    # What ran, in every place a reader looks.
    assert "| Query streams | 2 throughput streams after the power stream |" in md
    assert "### TPROC-H: iteration 1, 2 throughput streams after the power stream" in md
    assert markdown_table(md, "| Streams run |")[2][0] == "power + 2 throughput"
    # The load: the phases' seconds as recorded, rows/s over the rows the load copied.
    manifest = json.loads((run / "manifest.json").read_text())
    copied = sum(manifest["dataset"]["load"]["rows"].values())
    shown = check_load_table(run, rows=copied)
    assert set(shown) == {"data", "keys", "vacuum"}
    assert shown == pytest.approx({k: round(v, 3) for k, v in
                                   manifest["dataset"]["load"]["phase_seconds"].items()},
                                  abs=0.051)
    assert said["load"].startswith("built in ") and f"{copied:,} rows" in said["load"]
    # Built on pgdyno's own server: at wal_level minimal, which the loader itself saw, and
    # the report says so.
    assert manifest["dataset"]["load_record"]["settings"] == {
        **MINIMAL_WAL, "wal_buffers": "64MB", "wal_writer_delay": "10ms"}
    assert manifest["dataset"]["load"]["wal_level"] == "minimal"
    assert "wal_level minimal" in md


def test_power_only_runs_are_one_stream() -> None:
    """--tests power runs the power test's one stream: one iteration of it, named so;
    stream counts for it are refused, since none of them would run."""
    assert build_options("tproch", tests="power").clients == (1,)
    assert build_options("tproch", tests="power", streams="1").clients == (1,)
    with pytest.raises(UsageError, match="--tests power runs the power test's one stream"):
        build_options("tproch", tests="power", streams="2")
    with pytest.raises(UsageError, match="--tests power runs the power test's one stream"):
        build_options("tproch", tests="power", clients="1,2")
    assert build_options("tproch", tests="power,throughput").clients == (2,)


def test_timeout_leaves_the_other_21_and_counts_the_missing(server, workdir: Path) -> None:
    """Q15's CREATE VIEW waits on a view of the same name this test is creating in an open
    transaction; statement_timeout cancels it, the stream goes on."""
    for target in scratch_database(server, "tproch_timeout", TPCH_SCHEMA):
        results = make_shared_dir("pgdyno-results-")
        dsn = target.conninfo()
        first = run_cli(["bench", "tproch", "--dsn", dsn, "--scale-factor", SF, "--tests",
                         "power", "--streams", "1", "--iterations", "1", "--no-telemetry",
                         "--no-progress", "--results-dir", str(results)], workdir, timeout=600)
        assert first.returncode == 0, first.stderr
        blocker = psycopg.connect(dsn)
        try:
            blocker.execute("CREATE VIEW revenue_s0 AS SELECT 1 AS x")  # not committed
            proc = run_cli(["bench", "tproch", "--dsn", dsn, "--scale-factor", SF, "--tests",
                            "power", "--streams", "1", "--iterations", "1", "--no-telemetry",
                            "--query-timeout", "2s", "--no-progress", "--results-dir",
                            str(results)], workdir, timeout=600)
        finally:
            blocker.rollback()
            blocker.close()
        assert proc.returncode == 0, proc.stderr
        run = max(results.glob("*/tproch-*"), key=lambda p: p.name)
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["dataset"]["reused"] is True
        queries = rows(run / "raw" / "tproch" / "c1-i1" / "queries.csv")
        status = {int(q["query"]): q["status"] for q in queries}
        assert status.pop(15) == "timeout"
        assert len(status) == 21 and set(status.values()) == {"ok"}
        m = json.loads((run / "summary.json").read_text())["iterations"][0]["metrics"]
        assert m["queries_missing"] == 1
        assert m["geomean_s"] == pytest.approx(geomean(
            [float(q["seconds"]) for q in queries if q["status"] == "ok"]))
        assert "q15_s" not in m
        md = (run / "report.md").read_text()
        assert "1 queries missing" in md and "Q15 (stream 0, timeout)" in md
        # A power-only run says what ran: the power stream alone.
        assert "| Query streams | the power stream alone |" in md
        assert "### TPROC-H: iteration 1, the power stream alone" in md
        assert markdown_table(md, "| Streams run |")[2][0] == "power only"
        assert "streams" not in proc.stdout.split("report: ")[0].replace(
            "power stream", "")
        # Reused: the build seconds pgdyno's registry holds for it, read here.
        with psycopg.connect(dsn, autocommit=True) as db:
            registry = db.execute(f"SELECT build_seconds FROM {TPCH_SCHEMA}.pgdyno_dataset "
                                  "WHERE workload = 'tproch'").fetchone()[0]
        assert manifest["dataset"]["load_record"] == {
            "reused": True, "seconds": round(registry, 3), "rows": None, "phases": [],
            "settings": {}, "note": ""}
        said = dict(answer(md))
        built = said["load"].removeprefix("reused, not loaded again (built in ")
        assert seconds(built.removesuffix(" by an earlier run)")) == pytest.approx(
            registry, abs=0.051)
        assert "The dataset was reused, not loaded again" in md


def test_compare_names_the_plan_change_of_enable_hashjoin_off(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-results-")
    own = make_shared_dir("pgdyno-tproch-cmp-")
    common = ["--scale-factor", SF, "--tests", "power,throughput", "--streams", "2",
              "--queries", "3,5,10", "--no-refresh", "--iterations", "2", "--no-telemetry",
              "--no-progress", "--results-dir", str(results)]
    a = run_cli(["bench", "tproch", *common], own, timeout=600)
    assert a.returncode == 0, a.stderr
    time.sleep(1)  # distinct run names
    b = run_cli(["bench", "tproch", "--set", "enable_hashjoin=off", *common], own, timeout=600)
    assert b.returncode == 0, b.stderr
    runs = sorted(results.glob("*/tproch-*"), key=lambda p: p.name)
    out = results / "cmp"
    proc = run_cli(["compare", str(runs[0]), str(runs[1]), "--out", str(out),
                    "--results-dir", str(results)], own)
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((out / "compare.json").read_text())
    detail = {r["query"]: r for r in saved["workload_detail"]["queries"]}
    assert set(detail) == {3, 5, 10}
    changed = [r for r in detail.values() if "hash join →" in r["plan_change"]]
    assert changed, [r["plan_change"] for r in detail.values()]
    assert all("hash" not in r["candidate_plan"].split("[")[0] for r in detail.values())
    for q, r in detail.items():
        times = [[float(x["seconds"]) for it in sorted((run / "raw" / "tproch").glob("c*-i*"))
                  for x in rows(it / "queries.csv") if int(x["query"]) == q] for run in runs]
        assert r["speedup"] == pytest.approx(geomean(times[0]) / geomean(times[1]))
    md = (out / "compare.md").read_text()
    assert "Per-query speedup and plan changes" in md
    assert changed[0]["plan_change"] in md
    assert (out / "plots" / "tproch_speedup.png").stat().st_size > 5_000
    geo = {m["metric"]: m for m in saved["metrics"]}["geomean_s"]
    # The power stream and 2 throughput streams, in each of 2 iterations.
    assert geo["sample"] == "stream" and geo["baseline_n"] == 6 and geo["candidate_n"] == 6
    # Each stream's geometric mean, A against B, from the raw timings of every iteration.
    streams = saved["workload_detail"]["streams"]
    keys = [(r["test"], r["stream"]) for r in streams]
    assert keys == [("power", 0), ("throughput", 1), ("throughput", 2)]
    for r in streams:
        times = [[float(x["seconds"]) for it in sorted((run / "raw" / "tproch").glob("c*-i*"))
                  for x in rows(it / "queries.csv")
                  if (x["test"], int(x["stream"])) == (r["test"], r["stream"])]
                 for run in runs]
        assert len(times[0]) == len(times[1]) == 3 * 2  # 3 queries, 2 iterations
        assert r["baseline_s"] == pytest.approx(geomean(times[0]))
        assert r["candidate_s"] == pytest.approx(geomean(times[1]))
        assert r["change_pct"] == pytest.approx(100 * (geomean(times[1]) / geomean(times[0])
                                                       - 1))
    table = markdown_table(md, "| Stream | A geomean (s) |")
    assert [row[0] for row in table[2:]] == ["power", "stream 1", "stream 2"]
    for row, r in zip(table[2:], streams, strict=True):
        assert float(row[1]) == pytest.approx(r["baseline_s"], abs=0.0005)
        assert float(row[2]) == pytest.approx(r["candidate_s"], abs=0.0005)
        word = "slower" if r["change_pct"] > 0 else "faster"
        assert row[3] == f"{r['change_pct']:+.1f}% ({word})" or row[3].endswith("(same)")
    assert (out / "plots" / "tproch_streams.png").stat().st_size > 5_000
    assert "tproch_streams.png" in md
    # One sign convention, stated, and the metrics table's geomean change written in it:
    # B/A − 1 of the value, the word saying better or worse.
    assert md.count("Sign convention: a change is B/A − 1") >= 2  # Method, TPROC-H sections
    metrics = markdown_table(md, "| Metric | A: mean ± sd (n) |")
    assert metrics[0][3] == "Change (B/A − 1)"
    ratio = math.exp(statistics.fmean(math.log(v) for v in geo["candidate_values"])
                     - statistics.fmean(math.log(v) for v in geo["baseline_values"]))
    assert geo["change_pct"] == pytest.approx(100 * (ratio - 1))
    if geo["verdict"] in ("faster", "slower"):
        assert (geo["change_pct"] > 0) == (geo["verdict"] == "slower")
