"""sysbench cpu: command line, parser on recorded outputs of this host, and one real run.

Expected values are typed out from reading tests/data/sysbench_cpu_*.txt (recorded with
Debian's sysbench 1.0.20, --cpu-max-prime=20000), not produced by the parser.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from pgdyno import serde
from pgdyno.errors import UsageError
from pgdyno.workloads.cpu.sysbench import (
    CpuInterval,
    CpuResult,
    HistogramBucket,
    cpu_command,
    find_sysbench,
    parse_cpu_output,
    parse_interval_line,
    sysbench_version,
)

DATA = Path(__file__).parent / "data"
ONE_THREAD = DATA / "sysbench_cpu_1thread.txt"
TWO_THREADS = DATA / "sysbench_cpu_2threads.txt"
HISTOGRAM = DATA / "sysbench_cpu_2threads_histogram.txt"
NO_PERCENTILE = DATA / "sysbench_cpu_no_percentile.txt"

needs_sysbench = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v sysbench"], capture_output=True).returncode != 0,
    reason="sysbench is not installed")


def check_consistency(r: CpuResult, *, quiet_host: bool = True) -> None:
    """Relations between figures that sysbench computes separately.

    ``quiet_host=False`` drops avg <= percentile: when other processes preempt the run,
    a few events wait whole scheduler slices and the mean can exceed the 95th percentile."""
    assert r.events_per_s > 0
    assert math.isclose(r.events_per_s, r.total_events / r.total_time_s, rel_tol=0.01)
    assert r.latency_min_ms <= r.latency_avg_ms <= r.latency_max_ms
    if r.latency_pct:
        assert r.latency_min_ms <= r.latency_pct_ms <= r.latency_max_ms
        assert r.latency_avg_ms <= r.latency_pct_ms or not quiet_host
    assert math.isclose(r.fairness_events_avg * r.threads, r.total_events, rel_tol=1e-6)
    # Every thread is busy computing for the whole run: latency sum = thread time.
    assert math.isclose(r.latency_sum_ms, r.fairness_time_avg_s * r.threads * 1000,
                        rel_tol=0.01)
    check_intervals(r)
    if r.histogram:
        assert sum(b.count for b in r.histogram) == r.total_events
        values = [b.latency_ms for b in r.histogram]
        assert values == sorted(values)
        mean = sum(b.latency_ms * b.count for b in r.histogram) / r.total_events
        assert math.isclose(mean, r.latency_avg_ms, rel_tol=0.05)


def check_intervals(r: CpuResult) -> None:
    """Interval rates add up to the run's events when their lines cover the whole run.

    sysbench often drops the last interval line (the run ends before its report); the
    lines that remain then account for part of the events only, and since the rate of
    a loaded host varies from second to second, only an upper bound holds."""
    if not r.intervals:
        return
    assert all(i.threads == r.threads for i in r.intervals)
    steps = [b.t_s - a.t_s for a, b in zip(r.intervals, r.intervals[1:], strict=False)]
    length = r.intervals[0].t_s
    assert all(math.isclose(s, length) for s in steps)
    events_in_intervals = sum(i.events_per_s for i in r.intervals) * length
    if r.intervals[-1].t_s >= round(r.total_time_s):
        assert math.isclose(events_in_intervals, r.total_events, rel_tol=0.05)
    else:
        assert events_in_intervals <= r.total_events * 1.05


def test_one_thread_sample() -> None:
    r = parse_cpu_output(ONE_THREAD.read_text())
    assert r.sysbench_version == "1.0.20"
    assert (r.threads, r.max_prime) == (1, 20000)
    assert r.events_per_s == 1790.25
    assert (r.total_time_s, r.total_events) == (3.0011, 5374)
    assert (r.latency_min_ms, r.latency_avg_ms, r.latency_max_ms) == (0.53, 0.56, 1.78)
    assert (r.latency_pct, r.latency_pct_ms, r.latency_sum_ms) == (95, 0.58, 2998.77)
    assert (r.fairness_events_avg, r.fairness_events_stddev) == (5374.0, 0.0)
    assert (r.fairness_time_avg_s, r.fairness_time_stddev_s) == (2.9988, 0.0)
    # A 3 s run whose 3 s line sysbench did not print.
    assert r.intervals == [CpuInterval(1.0, 1, 1765.27, 0.59), CpuInterval(2.0, 1, 1805.68, 0.58)]
    assert r.histogram == []
    check_consistency(r)


def test_two_threads_sample() -> None:
    r = parse_cpu_output(TWO_THREADS.read_text())
    assert (r.threads, r.max_prime) == (2, 20000)
    assert r.events_per_s == 3353.46
    assert (r.total_time_s, r.total_events) == (3.0012, 10067)
    assert (r.latency_min_ms, r.latency_avg_ms, r.latency_max_ms) == (0.54, 0.60, 7.04)
    assert (r.latency_pct, r.latency_pct_ms, r.latency_sum_ms) == (95, 0.62, 5996.10)
    assert (r.fairness_events_avg, r.fairness_events_stddev) == (5033.5, 9.5)
    assert (r.fairness_time_avg_s, r.fairness_time_stddev_s) == (2.998, 0.0)
    assert r.intervals == [CpuInterval(1.0, 2, 3354.49, 0.63), CpuInterval(2.0, 2, 3386.65, 0.61),
                           CpuInterval(3.0, 2, 3320.85, 0.62)]
    check_consistency(r)
    # All three lines present: their plain sum is the run's events (10062 vs 10067).
    assert math.isclose(sum(i.events_per_s for i in r.intervals), r.total_events, rel_tol=0.05)


def test_histogram_sample() -> None:
    r = parse_cpu_output(HISTOGRAM.read_text())
    assert r.events_per_s == 3534.41
    assert (r.total_time_s, r.total_events) == (3.0021, 10613)
    assert (r.latency_min_ms, r.latency_avg_ms, r.latency_max_ms) == (0.53, 0.57, 6.92)
    assert (r.latency_pct_ms, r.latency_sum_ms) == (0.59, 5996.67)
    assert (r.fairness_events_avg, r.fairness_events_stddev) == (5306.5, 3.5)
    assert len(r.intervals) == 3
    assert len(r.histogram) == 55
    assert r.histogram[:3] == [HistogramBucket(0.536, 179), HistogramBucket(0.546, 2777),
                               HistogramBucket(0.556, 4236)]
    assert r.histogram[-1] == HistogramBucket(6.913, 2)
    check_consistency(r)


def test_percentile_disabled_sample() -> None:
    r = parse_cpu_output(NO_PERCENTILE.read_text())
    assert r.latency_pct == 0 and math.isnan(r.latency_pct_ms)
    assert (r.total_events, r.latency_max_ms) == (3434, 1.33)
    assert len(r.intervals) == 1 and math.isnan(r.intervals[0].latency_pct_ms)
    assert r.intervals[0].events_per_s == 1709.84
    check_consistency(r)


def test_serde_round_trip_keeps_types() -> None:
    r = parse_cpu_output(HISTOGRAM.read_text())
    back = serde.from_dict(CpuResult, serde.to_dict(r))
    assert back == r
    assert isinstance(back.histogram[0], HistogramBucket)
    assert isinstance(back.histogram[0].count, int)
    nopct = serde.from_dict(CpuResult, serde.to_dict(parse_cpu_output(NO_PERCENTILE.read_text())))
    assert math.isnan(nopct.latency_pct_ms)


def test_interval_line() -> None:
    assert parse_interval_line("[ 1s ] thds: 2 eps: 2345.12 lat (ms,95%): 0.87\n") == \
        CpuInterval(t_s=1.0, threads=2, events_per_s=2345.12, latency_pct_ms=0.87)
    assert parse_interval_line("[ 120s ] thds: 16 eps: 30012.00 lat (ms,99%): 1.20") == \
        CpuInterval(120.0, 16, 30012.0, 1.2)
    off = parse_interval_line("[ 1s ] thds: 1 eps: 1709.84 lat (ms,0%): 0.00")
    assert off is not None and math.isnan(off.latency_pct_ms)
    for other in ("", "Threads started!", "CPU speed:", "    events per second:  1790.25",
                  "[ 1s ] thds: 2 eps: 2345.12", "       0.536 |**      179"):
        assert parse_interval_line(other) is None


@pytest.mark.parametrize("cut_before, missing", [
    ("Threads fairness:", "'Threads fairness' section"),
    ("Latency (ms):", "'Latency (ms)' section"),
    ("CPU speed:", "'CPU speed' section"),
])
def test_truncated_output(cut_before: str, missing: str) -> None:
    text = ONE_THREAD.read_text()
    with pytest.raises(ValueError, match=r"^sysbench cpu output has no .*truncated") as err:
        parse_cpu_output(text[:text.index(cut_before) + 3])  # cut inside the heading
    assert missing in str(err.value) and "\n" not in str(err.value)


def test_cut_in_the_middle() -> None:
    text = HISTOGRAM.read_text()
    with pytest.raises(ValueError, match="'CPU speed' section") as err:
        parse_cpu_output(text[:len(text) // 2])  # inside the histogram
    assert "\n" not in str(err.value)


def test_missing_line_names_section() -> None:
    text = ONE_THREAD.read_text()
    without_sum = "\n".join(ln for ln in text.splitlines() if "sum:" not in ln)
    with pytest.raises(ValueError, match=r"'Latency \(ms\)' section has no 'sum' line"):
        parse_cpu_output(without_sum)
    without_options = "\n".join(ln for ln in text.splitlines() if "Prime numbers" not in ln)
    with pytest.raises(ValueError, match="'Prime numbers limit:'"):
        parse_cpu_output(without_options)
    with pytest.raises(ValueError, match="'CPU speed' section"):
        parse_cpu_output("FATAL: something went wrong\n")


def test_cpu_command() -> None:
    assert cpu_command("/usr/bin/sysbench", threads=4, max_prime=20000, seconds=30) == [
        "/usr/bin/sysbench", "cpu", "--cpu-max-prime=20000", "--threads=4", "--time=30",
        "--events=0", "--report-interval=1", "--percentile=95", "--histogram=on", "run"]
    cmd = cpu_command("sysbench", threads=1, max_prime=10000, seconds=5, report_interval_s=0,
                      percentile=99, histogram=False)
    assert "--report-interval=0" in cmd and "--percentile=99" in cmd and "--histogram=off" in cmd
    for bad in ({"seconds": 0}, {"threads": 0}, {"percentile": 101}):
        kwargs = {"threads": 1, "max_prime": 20000, "seconds": 1} | bad
        with pytest.raises(UsageError):
            cpu_command("sysbench", **kwargs)


def test_find_sysbench_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError) as err:
        find_sysbench()
    message = str(err.value)
    assert "\n" not in message
    assert "apt install sysbench" in message
    assert err.value.exit_code == 2


def test_sysbench_version_of_a_non_sysbench(tmp_path: Path) -> None:
    fake = tmp_path / "sysbench"
    fake.write_text("#!/bin/sh\necho 'usage: nothing'\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(UsageError, match="did not print a sysbench version"):
        sysbench_version(str(fake))


@needs_sysbench
def test_real_run() -> None:
    path = find_sysbench()
    version = sysbench_version(path)
    assert version[0].isdigit()
    cmd = cpu_command(path, threads=1, max_prime=20000, seconds=2)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True)
    r = parse_cpu_output(proc.stdout)
    assert r.sysbench_version == version
    assert (r.threads, r.max_prime) == (1, 20000)
    assert 1.9 < r.total_time_s < 2.5
    assert r.latency_pct == 95
    assert len(r.intervals) >= 1  # the 1 s line; the 2 s one is often not printed
    assert r.histogram  # --histogram=on by default
    check_consistency(r, quiet_host=False)  # other tests may run alongside
