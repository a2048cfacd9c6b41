"""bench/oltp_vs_sysbench.py's own arithmetic: the bare pgbench command it derives from
pgdyno's, and the interval of the pair ratios it quotes (issue 28, item 6)."""

from __future__ import annotations

import importlib.util
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "oltp_vs_sysbench.py"


@pytest.fixture(scope="module")
def bench():
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


def test_ratio_interval_is_a_t_interval_on_the_logs(bench):
    ratios = [1.066, 0.990, 0.970, 1.012, 1.022, 0.952, 0.943, 0.971]
    logs = np.log(ratios)
    t_975_7 = 2.364624  # a published t table: t(0.975, 7 degrees of freedom)
    half = t_975_7 * logs.std(ddof=1) / math.sqrt(len(logs))
    mean, low, high = bench.ratio_interval(ratios)
    assert mean == pytest.approx(math.exp(logs.mean()), rel=1e-12)
    assert low == pytest.approx(math.exp(logs.mean() - half), rel=1e-5)
    assert high == pytest.approx(math.exp(logs.mean() + half), rel=1e-5)
    # The same ratios inverted (sysbench over pgdyno): the interval inverts exactly.
    inverse = bench.ratio_interval([1 / r for r in ratios])
    assert inverse == pytest.approx((1 / mean, 1 / high, 1 / low), rel=1e-9)
    assert bench.ratio_interval([1.25]) == (pytest.approx(1.25), None, None)


def test_server_cpu_counts_live_and_reaped_children(bench):
    """A process tree's CPU: a child burning CPU alive, then the same once reaped; the
    kernel's own count of reaped children (getrusage) is the oracle."""
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    me = os.getpid()
    start = bench.server_cpu_s(me)
    child = subprocess.Popen([sys.executable, "-c", burn + "\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while bench.server_cpu_s(me) - start < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bench.server_cpu_s(me) - start >= 0.4  # alive: read from its /proc entry
    finally:
        child.kill()
        child.wait()
    reaped_before = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])
    before = bench.server_cpu_s(me)
    subprocess.run([sys.executable, "-c", burn], check=True)
    reaped = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]) - reaped_before
    assert reaped >= 0.4
    # Ours, the parent's, grew too meanwhile: the tree's growth is the reaped child's
    # CPU plus at most what this process spent waiting for it.
    assert bench.server_cpu_s(me) - before == pytest.approx(reaped, abs=0.1)
