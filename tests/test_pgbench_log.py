"""The log parser against a small recorded sample, recomputed by hand in the test."""

from __future__ import annotations

import gzip
import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.analysis.pgbench_log import iter_rows, summarise_logs

SAMPLE = Path(__file__).parent / "data" / "pgbench_rate_retries.log"


def test_sample_with_lag_and_retries(tmp_path: Path) -> None:
    gz = tmp_path / "tx.1.gz"
    gz.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    stats = summarise_logs([gz], warmup_s=0, duration_s=3, has_lag=True, has_retries=True,
                           latency_limit_ms=2.0)
    # Earliest start: first line ends at ...600.100000 after 1500 µs.
    assert math.isclose(stats.window_start, 1795346600.1 - 0.0015, abs_tol=1e-6)
    ok = [1500, 2500, 3000, 1200, 800, 40000, 700]
    assert stats.overall.histogram.n == len(ok)
    assert stats.overall.failed == 2  # "failed" and "serialization"
    assert stats.overall.serialization_failures == 1
    assert stats.overall.skipped == 1
    assert stats.overall.retried == 4 and stats.overall.retries == 8
    assert stats.overall.late == 3  # 2500, 3000 and 40000 µs exceed 2 ms
    assert stats.overall.histogram.mean_us == np.mean(ok)
    assert math.isclose(stats.overall.histogram.stddev_us, float(np.std(ok)))
    pct = stats.overall.histogram.percentiles_us((50.0, 90.0, 99.0))
    for p, value in pct.items():
        assert value == np.percentile(ok, p, method="inverted_cdf")
    assert sorted(stats.per_script) == [0, 1]
    assert stats.per_script[1].histogram.n == 3
    # Seconds after window start (…600.0985): ends at .1, .3 | 1.1, 1.5 | 2.1, 2.4 and 2.8
    assert stats.interval_ok.tolist() == [2, 2, 3]


def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "tx.2"
    path.write_text(SAMPLE.read_text() + "0 6 1234 0 17953")
    rows = np.vstack(list(iter_rows(path, 8)))
    assert rows.shape == (10, 8)


def test_histogram_percentiles_match_numpy_on_random_data() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(7, 1, 200_000).astype(np.int64)
    hist = LatencyHistogram()
    for chunk in np.array_split(values, 7):
        hist.add_array(chunk)
    ordered = np.sort(values)
    for p, got in hist.percentiles_us().items():
        rank = math.ceil(Fraction(str(p)) * len(values) / 100)  # nearest rank, exactly
        assert got == ordered[rank - 1]
    assert math.isclose(hist.mean_us, values.mean())
    assert math.isclose(hist.stddev_us, values.std(), rel_tol=1e-9)


def test_aggregate_lines_of_pgbench_18() -> None:
    """Two lines pgbench 18 wrote with -R 500 --aggregate-interval 1 (recorded here)."""
    from pgdyno.analysis.per_second import ALL_SCRIPTS, aggregate_rows

    data = (b"1795425385 154 37602 11009614 34 843 16686 2198418 5 463 0 0 0 0 0\n"
            b"1795425386 251 64341 22710903 67 2285 28582 3685584 10 523 3 2 5 1 1\n")
    rows, first = aggregate_rows(data, None)
    assert first == 1795425385 and [r.second for r in rows] == [0, 1]
    second = rows[1]
    assert (second.script, second.ok, second.latency_sum_us, second.latency_sumsq_us,
            second.latency_min_us, second.latency_max_us) == (ALL_SCRIPTS, 251, 64341,
                                                              22710903, 67, 2285)
    assert (second.lag_sum_us, second.lag_max_us, second.skipped, second.retried,
            second.retries, second.serialization, second.deadlock, second.failed) == (
        28582, 523, 3, 2, 5, 1, 1, 2)
    # A later chunk of the same thread keeps counting from its first interval.
    more, _ = aggregate_rows(b"1795425390 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", first)
    assert more[0].second == 5 and more[0].latency_min_us == -1
