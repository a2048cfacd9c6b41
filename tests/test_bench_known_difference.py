"""The known-difference script's oracle: the ratio it reads from a mixed run's seconds, and
the statements whose work it compares (the same plan, the count set in two ways)."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import psycopg

from pgdyno.analysis.per_second import SecondRow
from pgdyno.targets.local import LocalServer
from tests.test_bench_harness import BENCH, load_script

known = load_script(BENCH / "known_difference.py")


def _write_seconds(path: Path, rows: list[SecondRow]) -> None:
    names = list(SecondRow.__dataclass_fields__)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(names)
        for row in rows:
            out.writerow([getattr(row, n) for n in names])


def test_the_ratio_is_each_seconds_mean_latency_of_the_baseline_over_the_candidates(
        tmp_path: Path) -> None:
    path = tmp_path / "seconds.csv"
    _write_seconds(path, [
        SecondRow(second=0, script=0, ok=100, latency_sum_us=150_000),  # 1.5 ms
        SecondRow(second=0, script=1, ok=90, latency_sum_us=144_000),  # 1.6 ms
        SecondRow(second=1, script=0, ok=50, latency_sum_us=100_000),  # 2.0 ms (a slow s)
        SecondRow(second=1, script=1, ok=40, latency_sum_us=84_000),  # 2.1 ms
        SecondRow(second=2, script=0, ok=10, latency_sum_us=20_000),  # only the baseline
        SecondRow(second=3, script=1, ok=0, failed=3),  # nothing finished
        SecondRow(second=3, script=0, ok=7, latency_sum_us=7_000),
    ])
    ratios = known.latency_ratios(path)
    assert ratios == [1.5 / 1.6, 2.0 / 2.1]
    mean, low, high = known.ratio_interval(ratios)
    assert math.isclose(mean, math.exp(statistics.fmean(math.log(r) for r in ratios)))
    assert low < mean < high and mean < 1  # slower in both seconds (two: a wide interval)


def test_both_statements_sum_the_same_series_with_the_same_plan(server: LocalServer) -> None:
    n = 1234
    with psycopg.connect(server.connection().conninfo(), autocommit=True) as db:
        oracle = known.ORACLE_SQL.format(n=n).rstrip(";\n")
        (total,), = db.execute(oracle).fetchall()
        assert total == n * (n + 1) // 2
        # The oracle's statement leaves the count set, as the server's setting would.
        assert db.execute("SHOW pgdyno.work").fetchone() == (str(n),)
        db.execute("SET pgdyno.work = 4321")
        (total,), = db.execute(known.WORK_SQL.rstrip(";\n")).fetchall()
        assert total == 4321 * 4322 // 2
        # The same plan; the planner sees the setting's count (a stable function) but not
        # the one set_config makes (a volatile one), and neither plan is costly enough
        # for JIT compilation at the script's counts, whose work differs only in the count.
        db.execute("SET pgdyno.work = 21000")
        plans = [db.execute(f"EXPLAIN (FORMAT JSON) {sql}").fetchone()[0][0]["Plan"]
                 for sql in (known.ORACLE_SQL.format(n=21000).rstrip(";\n"),
                             known.WORK_SQL.rstrip(";\n"))]
        shapes = [(p["Node Type"], [c["Node Type"] for c in p["Plans"]]) for p in plans]
        assert shapes[0] == shapes[1] == ("Aggregate", ["Function Scan"]), shapes
        (jit_above,), = db.execute("SELECT setting::float FROM pg_settings "
                                   "WHERE name = 'jit_above_cost'").fetchall()
        assert max(p["Total Cost"] for p in plans) < jit_above
