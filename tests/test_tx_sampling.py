"""--tx-logs sample: pgbench logs a random fraction R of transactions; the percentiles'
stated 95% bounds hold against every transaction's log, and a sampled run's R, sample
size, counts and bounds are what its own raw files give."""

from __future__ import annotations

import gzip
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.analysis.sampled import (
    bound_ranks,
    choose_sampling_rate,
    progress_counts,
    sampled_latency,
)
from tests.conftest import make_shared_dir, run_cli_here
from tests.recompute import origin_of, recompute_iteration

WARMUP, DURATION = 1, 3
PERCENTILES = (50.0, 90.0, 99.0)


def _order_statistic(sorted_values: np.ndarray, rank: int) -> float:
    return float(sorted_values[rank - 1])


def _nearest_rank(p: float, n: int) -> int:
    return math.ceil(Fraction(str(p)) * n / 100)


def _ranks(n: int, p: float) -> tuple[int, int]:
    """The ranks as the documentation states them, written out here: n·q ∓ 1.96·sqrt(n·q·(1−q)),
    outwards to whole ranks (the upper one past the last count below), clipped to 1..n."""
    q = p / 100
    half = 1.959964 * math.sqrt(n * q * (1 - q))
    return max(1, math.floor(n * q - half)), min(n, math.ceil(n * q + half) + 1)


# ----- the bound itself, on simulated draws -----------------------------------------------

@pytest.mark.parametrize("p", PERCENTILES)
def test_bound_covers_the_true_quantile_95_percent_of_the_time(p: float) -> None:
    """1,000 samples of 2,000 from an exponential distribution, whose p-th quantile is
    −ln(1 − p/100): the order statistics at the stated ranks bracket it in about 95%."""
    rng = np.random.default_rng(28)
    true_quantile = -math.log(1 - p / 100)
    low_rank, high_rank = bound_ranks(2000, p)
    assert (low_rank, high_rank) == _ranks(2000, p)
    covered = 0
    for _ in range(1000):
        draw = np.sort(rng.exponential(size=2000))
        covered += draw[low_rank - 1] <= true_quantile <= draw[high_rank - 1]
    assert 0.93 <= covered / 1000 <= 0.975


def test_bound_ranks_clip_to_the_sample() -> None:
    assert bound_ranks(10, 99.0) == (9, 10)  # 9.9 ∓ 0.62: the top one past the last
    assert bound_ranks(1, 50.0) == (1, 1)


def test_sampling_rate_from_the_expected_rate() -> None:
    assert choose_sampling_rate(100_000) == 0.02
    assert choose_sampling_rate(30_000) == 0.0667
    assert choose_sampling_rate(5_000) == 0.4
    assert choose_sampling_rate(2_000) == 1.0
    assert choose_sampling_rate(math.nan) == 1.0


def test_progress_lines_give_each_second_its_count() -> None:
    """pgbench -P 1 --progress-timestamp (recorded from pgbench 18): TPS times each
    interval's length, filed under the second the interval ends closest to."""
    stderr = ("starting vacuum...end.\n"
              "progress: 1795622636.480 s, 64685.0 tps, lat 0.031 ms stddev 0.192, 0 failed\n"
              "progress: 1795622637.483 s, 59890.7 tps, lat 0.033 ms stddev 0.153, 0 failed\n"
              "progress: 1795622638.480 s, 61036.4 tps, lat 0.032 ms stddev 0.245, 0 failed\n")
    assert progress_counts(stderr, 1795622635.469) == {
        0: 64685, 1: round(59890.7 * 1.003), 2: round(61036.4 * 0.997)}


# ----- real runs --------------------------------------------------------------------------

def _bench(workdir: Path, *extra: str) -> Path:
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli_here(["bench", "select-only", "--scale", "1", "--clients", "2",
                         "--duration", str(DURATION), "--warmup", str(WARMUP), "--iterations",
                         "1", "--no-progress", "--no-telemetry", "--results-dir",
                         str(results), *extra], workdir)
    assert proc.returncode == 0, proc.stderr
    return next(results.glob("*/*/manifest.json")).parent


@pytest.mark.server
def test_stated_bounds_hold_against_the_full_log(workdir: Path) -> None:
    """One run logging every transaction; the sampling pgbench does (each transaction
    kept with probability R, independently) applied here 200 times with seeded draws:
    the full log's percentiles fall inside the bounds pgdyno states for each sample in
    at least 90% of the draws (95% stated, with the draws' own spread)."""
    run = _bench(workdir, "--tx-logs", "all")
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    full = np.sort(recompute_iteration(run, it, WARMUP, DURATION).latencies_ms)
    assert full.size > 10_000
    truth = {p: _order_statistic(full, _nearest_rank(p, full.size)) for p in PERCENTILES}
    rate = 0.05  # what auto chooses at 40,000 TPS
    rng = np.random.default_rng(5)
    covered = dict.fromkeys(PERCENTILES, 0)
    draws = 200
    for _ in range(draws):
        sample = full[rng.random(full.size) < rate]
        hist = LatencyHistogram()
        hist.add_array(np.rint(sample * 1000).astype(np.int64))
        stated = sampled_latency(hist, rate, full.size)
        assert stated.sampled == sample.size
        for b in stated.bounds:
            covered[b.percentile] += b.low_ms <= truth[b.percentile] <= b.high_ms
    assert all(c / draws >= 0.90 for c in covered.values()), covered


@pytest.mark.server
def test_sampled_run_states_what_its_raw_files_give(workdir: Path) -> None:
    """--tx-logs sample (auto): R from the probe's rate in sampling.json and in pgbench's
    command; counts from the progress lines in stderr.txt; the sample size and the bounds'
    order statistics from the sampled logs, all recomputed here."""
    run = _bench(workdir, "--tx-logs", "sample")
    it_dir = run / "raw" / "pgbench" / "c2-i1"
    saved = json.loads((it_dir / "sampling.json").read_text())
    rate = saved["sampling_rate"]
    assert saved["expected_from"] == "a 1 s probe"
    assert rate == float(f"{min(1.0, 2_000 / saved['expected_tps']):.3g}") < 1
    record = json.loads((run / "raw" / "run.json").read_text())["records"][0]
    command = record["command"]
    assert float(command[command.index("--sampling-rate") + 1]) == rate
    it = json.loads((run / "summary.json").read_text())["iterations"][0]
    sampling = it["sampling"]
    assert sampling["sampling_rate"] == rate

    origin = origin_of(run, 2, 1)
    per_second = [0] * DURATION
    previous = None
    for t, tps in re.findall(r"^progress: ([\d.]+) s, ([\d.]+) tps",
                             (it_dir / "stderr.txt").read_text(), re.MULTILINE):
        length = float(t) - previous if previous is not None else 1.0
        previous = float(t)
        second = round(float(t) - origin) - 1 - WARMUP
        if 0 <= second < DURATION:
            per_second[second] += round(float(tps) * length)
    assert it["interval_tps"] == per_second and it["transactions"] == sum(per_second)
    assert sampling["transactions"] == sum(per_second)

    sample = np.sort(recompute_iteration(run, it, WARMUP, DURATION).latencies_ms)
    assert sampling["sampled"] == sample.size == it["latency"]["count"]
    expected, spread = rate * sum(per_second), math.sqrt(sum(per_second) * rate * (1 - rate))
    assert abs(sample.size - expected) < 6 * spread + 0.01 * expected  # R is what was logged
    for b in sampling["bounds"]:
        low, high = _ranks(sample.size, b["percentile"])
        assert (b["low_rank"], b["high_rank"]) == (low, high)
        assert b["low_ms"] == _order_statistic(sample, low)
        assert b["high_ms"] == _order_statistic(sample, high)
        point = _order_statistic(sample, _nearest_rank(b["percentile"], sample.size))
        assert b["value_ms"] == point == it["latency"]["percentiles_ms"][f"p{b['percentile']:g}"]
    assert "random sample of the transactions" in it["latency_source"]
    report = (run / "report.md").read_text()
    assert f"| 2 | 1 | {rate:g} | {sample.size:,} |" in report
    with gzip.open(run / it["log_files"][0], "rt") as fh:
        assert fh.readline().split()[2].isdigit()  # a real pgbench log line


@pytest.mark.parametrize(("value", "extra", "words"), [
    ("sample:2", [], "0 < R <= 1"),
    ("sample:often", [], "0 < R <= 1"),
    ("sample", ["--rate", "10", "--latency-limit", "5"], "late transactions of the sample"),
])
def test_bad_sampling_is_one_line(tmp_path: Path, value: str, extra: list[str],
                                  words: str) -> None:
    from tests.conftest import run_cli_here

    out = run_cli_here(["bench", "select-only", "--tx-logs", value, *extra,
                        "--results-dir", str(tmp_path / "r")], tmp_path / "work")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "--tx-logs" in lines[0], out.stderr
    assert not (tmp_path / "r").exists()
