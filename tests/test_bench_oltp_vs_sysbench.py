"""bench/oltp_vs_sysbench.py's own arithmetic: the bare pgbench command it derives from
pgdyno's, and its reading of pgbench's progress lines (the interval of its pair ratios and
the server's CPU are the bench harness's: tests/test_bench_harness.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPT = BENCH / "oltp_vs_sysbench.py"


@pytest.fixture(scope="module")
def bench():
    if str(BENCH) not in sys.path:  # as when run as a program: its harness beside it
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("oltp_vs_sysbench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bare_command_drops_the_log_and_keeps_the_load(bench):
    pgdyno = ["/pg/bin/pgbench", "-h", "/sock", "-p", "5432", "-U", "pgdyno", "-c", "8",
              "-j", "2", "-T", "4", "-P", "1", "-l", "--log-prefix", "/run/raw/tx",
              "--sampling-rate", "0.25", "-M", "prepared", "--max-tries", "10", "-f",
              "/run/raw/scripts/oltp-read-only.pgbench@1", "pgdyno"]
    assert bench.bare_command(pgdyno, 25) == [
        "/pg/bin/pgbench", "-h", "/sock", "-p", "5432", "-U", "pgdyno", "-c", "8", "-j", "2",
        "-T", "25", "-P", "1", "-M", "prepared", "--max-tries", "10", "-f",
        "/run/raw/scripts/oltp-read-only.pgbench@1", "pgdyno"]
    aggregated = ["pgbench", "-T", "4", "-l", "--aggregate-interval", "1", "-c", "2", "db"]
    assert bench.bare_command(aggregated, 9) == ["pgbench", "-T", "9", "-c", "2", "db"]


def test_bare_pgbench_progress_lines_are_read(bench):
    stderr = ("pgbench (18.6)\n"
              "progress: 1.0 s, 2412.9 tps, lat 3.301 ms stddev 1.210, 0 failed\n"
              "progress: 2.0 s, 2822.0 tps, lat 2.830 ms stddev 0.911, 0 failed\n")
    assert bench._PROGRESS.findall(stderr) == [("1.0", "2412.9"), ("2.0", "2822.0")]
