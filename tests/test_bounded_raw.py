"""Bounded raw data on a real run: per-second files always, logs up to --tx-logs, and a
report rebuilt from the per-second files alone whose percentiles match the exact ones
recomputed from the logs within HdrHistogram's stated precision."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli
from tests.recompute import recompute_iteration

pytestmark = pytest.mark.server

WARMUP, DURATION = 1, 3
PERCENTILES = {"p50": 50, "p75": 75, "p80": 80, "p90": 90, "p95": 95, "p99": 99,
               "p99.9": 99.9}
HLOG_BYTES_PER_SECOND = 4096
"""The stated bound of latency.hlog + seconds.csv, per second and script (the docs)."""


def _bench(workdir: Path, *extra: str) -> Path:
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "select-only", "--scale", "1", "--clients", "2",
                    "--duration", str(DURATION), "--warmup", str(WARMUP), "--iterations", "1",
                    "--no-progress", "--results-dir", str(results), *extra], workdir)
    assert proc.returncode == 0, proc.stderr
    return next(results.glob("*/*/manifest.json")).parent


def _nearest_rank(sorted_values: np.ndarray, p: float) -> float:
    return float(sorted_values[math.ceil(Fraction(str(p)) * len(sorted_values) / 100) - 1])


def _hlog_window(path: Path, origin: float) -> HdrHistogram:
    """The window's histogram read with the hdrhistogram package's own log reader."""
    merged = HdrHistogram(1, 3_600_000_000, 3)
    reader = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000, 3))
    while (hist := reader.get_next_interval_histogram()) is not None:
        second = round(hist.get_start_time_stamp() / 1000 - origin)
        if hist.get_tag().startswith("script") and WARMUP <= second < WARMUP + DURATION:
            merged.add(hist)
    return merged


def test_report_rebuilt_from_per_second_data_alone(workdir: Path) -> None:
    run = _bench(workdir, "--tx-logs", "all")
    plan = json.loads((run / "raw" / "run.json").read_text())
    record = plan["records"][0]
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    exact = recompute_iteration(run, it, WARMUP, DURATION)
    ordered = np.sort(exact.latencies_ms * 1000)  # µs
    # With every log kept, the report's percentiles are the exact ones.
    assert it["latency_source"].startswith("the per-transaction logs")
    for key, p in PERCENTILES.items():
        assert it["latency"]["percentiles_ms"][key] == _nearest_rank(ordered, p) / 1000

    # The same run without its logs: `pgdyno report` rebuilds from the per-second files.
    bounded = run.with_name(run.name + "-bounded")
    shutil.copytree(run, bounded)
    for log in record["log_files"]:
        (bounded / log).unlink()
    proc = run_cli(["report", str(bounded)], workdir)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((bounded / "summary.json").read_text())
    got = summary["iterations"][0]
    assert got["latency_source"].startswith("the per-second HdrHistograms")
    # Counts, TPS per interval, mean, min and max are exact from the per-second counts.
    assert got["transactions"] == exact.transactions > 1000
    assert got["interval_tps"] == exact.interval_tps
    assert math.isclose(got["latency"]["mean_ms"], float(exact.latencies_ms.mean()),
                        rel_tol=1e-9)
    assert got["latency"]["min_ms"] == ordered[0] / 1000
    assert got["latency"]["max_ms"] == ordered[-1] / 1000
    # Percentiles: within the stated precision of the exact ones (never below, < 0.1%
    # above), and equal to those of the histogram log read by hdrhistogram's own reader.
    window = _hlog_window(bounded / record["latency_files"][1], record["origin_epoch"])
    assert window.get_total_count() == exact.transactions
    for key, p in PERCENTILES.items():
        reported_us = round(got["latency"]["percentiles_ms"][key] * 1000)
        truth = _nearest_rank(ordered, p)
        assert truth <= reported_us <= truth * (1 + 1 / 1024), key
        rank = math.ceil(Fraction(str(p)) * window.get_total_count() / 100)
        from_log = next(v.value_iterated_to for v in window.get_recorded_iterator()
                        if v.total_count_to_this_value >= rank)
        assert reported_us == from_log, key
    for client, pooled in zip(summary["per_clients"], json.loads(
            (run / "summary.json").read_text())["per_clients"], strict=True):
        assert client["transactions"] == pooled["transactions"]
    md = (bounded / "report.md").read_text()
    assert "from the per-second HdrHistograms (3 significant digits" in md
    p99 = f"{got['latency']['percentiles_ms']['p99']:.3f}"
    assert p99 in md


def test_logs_past_the_cap_are_not_kept_and_raw_data_stays_bounded(workdir: Path) -> None:
    run = _bench(workdir, "--tx-logs", "1000")
    record = json.loads((run / "raw" / "run.json").read_text())["records"][0]
    it_dir = run / "raw" / "pgbench" / "c2-i1"
    assert record["log_files"] == [] and not list(it_dir.glob("tx.*"))
    assert record["transactions_logged"] > 1000
    assert "per-transaction logs not kept" in record["note"]
    seconds = WARMUP + DURATION + 2  # pgbench's last partial second, and slack
    kept = sum((run / f).stat().st_size for f in record["latency_files"])
    assert kept <= HLOG_BYTES_PER_SECOND * seconds, kept
    # Everything the iteration keeps, telemetry included, is far below the logs' size
    # (~7 bytes a transaction gzip'd, 35 plain).
    everything = sum(p.stat().st_size for p in it_dir.rglob("*") if p.is_file())
    assert everything < 2 * record["transactions_logged"], (everything, record)
    summary = json.loads((run / "summary.json").read_text())
    counted = sum(r.ok + r.failed + r.skipped for r in _seconds(it_dir).values())
    assert counted == record["transactions_logged"]
    assert summary["iterations"][0]["transactions"] == sum(
        r.ok for k, r in _seconds(it_dir).items() if WARMUP <= k[0] < WARMUP + DURATION)


def _seconds(it_dir: Path) -> dict:
    from pgdyno.analysis.per_second import read_seconds

    return read_seconds(it_dir / "seconds.csv")


def test_aggregate_mode_counts_exactly_without_percentiles(workdir: Path) -> None:
    """--tx-logs aggregate: pgbench writes a line a second per thread, no line per
    transaction; TPS, average and extremes are exact, recomputed here from those lines."""
    run = _bench(workdir, "--tx-logs", "aggregate")
    record = json.loads((run / "raw" / "run.json").read_text())["records"][0]
    assert any("--aggregate-interval" in a for a in record["command"])
    ok = [0] * DURATION
    latency_sum = maximum = 0
    for log in record["log_files"]:
        with gzip.open(run / log, "rt") as fh:
            lines = [line.split() for line in fh if line.strip()]
        first = int(lines[0][0])
        for v in lines:
            k = int(v[0]) - first - WARMUP  # line k of a thread is its second k
            if 0 <= k < DURATION:
                ok[k] += int(v[1])
                latency_sum += int(v[2])
                maximum = max(maximum, int(v[5]))
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    assert it["interval_tps"] == ok and it["transactions"] == sum(ok) > 100
    assert math.isclose(it["latency"]["mean_ms"], latency_sum / sum(ok) / 1000, rel_tol=1e-12)
    assert it["latency"]["max_ms"] == maximum / 1000
    assert all(v is None for v in it["latency"]["percentiles_ms"].values())
    assert not any(k.startswith("latency_p") for k in it["metrics"])
    assert "no percentiles" in (run / "report.md").read_text()


def test_aggregate_refuses_a_latency_limit(tmp_path: Path) -> None:
    out = run_cli(["bench", "tpcb", "--tx-logs", "aggregate", "--rate", "10",
                   "--latency-limit", "5", "--results-dir", str(tmp_path / "r")],
                  tmp_path / "work")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "pgdyno: error: --tx-logs aggregate counts no late transactions: drop "
        "--latency-limit, or keep pgbench's per-transaction logs"]
