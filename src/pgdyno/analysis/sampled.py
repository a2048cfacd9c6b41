"""Sampled per-transaction logs (``--tx-logs sample``): the sampling rate, exact counts
from pgbench's progress lines, and distribution-free bounds on the sampled percentiles.

At very high rates pgbench's line per transaction (and pgdyno reading it) costs a few
percent of throughput. With ``--sampling-rate R`` pgbench logs each transaction with
probability R, independently (its own PRNG per thread), so the logged latencies are a
Bernoulli sample of every transaction. Percentiles then come from the sample and carry a
sampling error; this module states it.

A 95% confidence interval for the p-th quantile from n sampled values needs no
assumption about the distribution: the number of sampled values below the true quantile
is binomial (n, p), so the order statistics at ranks ``n·p ± 1.96·sqrt(n·p·(1−p))``
bracket the quantile with about 95% probability (normal approximation of the binomial;
ties between whole-µs latencies only widen the coverage).

TPS and transaction counts are not sampled: pgbench's ``-P 1`` progress lines count every
transaction. With ``--progress-timestamp`` each line carries its epoch time (to the ms),
so an interval's count is its printed TPS (to 0.1) times its length: within
±0.05 + TPS × 0.001 transactions a second, and over a window the timestamps' rounding
cancels between neighbouring seconds.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pgdyno.analysis.histogram import LatencyHistogram
from pgdyno.analysis.pgbench_log import LogStats

# numpy is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import numpy as np

LOGGED_PER_SECOND = 2_000
"""``--tx-logs sample`` (auto) logs about this many transactions a second at most.

What a logged line costs (bench/overhead.py): about 1 µs of pgbench's CPU to write it
and 0.8 µs of pgdyno's to read it. At 2,000 a second that is 3.5 ms of CPU a second,
0.18% of a 2-core host; at 10,000 a second it would be 0.9%. What 2,000 a second buys:
over a 60 s window, 120,000 sampled latencies, whose p99 lies between the true p98.94 and
p99.06 with 95% confidence (``bound_ranks``); a single second's p99 rests on 20 values above it."""
Z_95 = 1.959964
BOUND_PERCENTILES = (50.0, 90.0, 99.0)
SAMPLED = ("a random sample of the transactions (pgbench --sampling-rate; per-iteration "
           "rates and 95% bounds below; per-second percentiles are sampled too); TPS and "
           "counts from pgbench's progress lines, which count every transaction")
"""Where an iteration's latency percentiles come from, in sample mode."""
PROGRESS = re.compile(r"^progress: (?P<t>[\d.]+) s, (?P<tps>[\d.]+) tps", re.MULTILINE)


def choose_sampling_rate(expected_tps: float, logged_per_second: int = LOGGED_PER_SECOND
                         ) -> float:
    """R = min(1, logged_per_second / expected TPS), to 3 significant digits (what
    pgbench is passed); 1 when the rate is unknown."""
    if not expected_tps or expected_tps <= 0 or math.isnan(expected_tps):
        return 1.0
    rate = min(1.0, logged_per_second / expected_tps)
    return float(f"{rate:.3g}")


def bound_ranks(n: int, p: float, z: float = Z_95) -> tuple[int, int]:
    """1-based ranks (low, high) of the order statistics bracketing the p-th percentile of
    the population a sample of n was drawn from: n·q ∓ z·sqrt(n·q·(1−q)), q = p/100,
    widened outwards to whole ranks and clipped to 1..n."""
    low, high = _unclipped_ranks(n, p, z)
    return max(1, low), min(n, high)


def _unclipped_ranks(n: int, p: float, z: float = Z_95) -> tuple[int, int]:
    """The sample holds the quantile between ranks low and high when the binomial count
    of values below it, B, has low <= B < high: hence the + 1."""
    q = p / 100
    half = z * math.sqrt(n * q * (1 - q))
    return math.floor(n * q - half), math.ceil(n * q + half) + 1


def order_statistics(values: np.ndarray, counts: np.ndarray, ranks: list[int]
                     ) -> list[float]:
    """The value at each 1-based rank of a sample given as sorted distinct values and
    their counts."""
    import numpy as np

    cumulative = np.cumsum(counts)
    return [float(values[np.searchsorted(cumulative, r)]) for r in ranks]


@dataclass
class QuantileBound:
    """A sampled percentile with its distribution-free 95% confidence bounds, in ms."""

    percentile: float
    value_ms: float
    """Nearest rank of the sample (what the latency tables show)."""
    low_ms: float
    high_ms: float
    low_rank: int
    high_rank: int
    """1-based ranks in the sorted sample of the bounds: recomputable from the logs."""
    open_ended: bool = False
    """A bound clipped to the sample's minimum or maximum: too few samples for 95%."""


@dataclass
class SampledLatency:
    """One iteration's sampling: the rate pgbench was given, what it logged, the bounds."""

    sampling_rate: float
    sampled: int
    """Successful transactions of the measured window in the sample."""
    transactions: int
    """Successful transactions of the measured window (progress lines: all of them)."""
    expected_tps: float | None = None
    """The rate R was chosen from (auto), None when given."""
    bounds: list[QuantileBound] = field(default_factory=list)


def sampled_latency(hist: LatencyHistogram, sampling_rate: float, transactions: int,
                    expected_tps: float | None = None,
                    percentiles: tuple[float, ...] = BOUND_PERCENTILES) -> SampledLatency:
    """Bounds of ``percentiles`` from the sample's histogram (exact values when the logs
    were kept, HdrHistogram bucket tops otherwise)."""
    out = SampledLatency(sampling_rate, hist.n, transactions, expected_tps)
    if not hist.n or not hist.counts:
        return out
    values, counts = hist.sorted_arrays()
    point = hist.percentiles_us(percentiles)
    for p in percentiles:
        low_rank, high_rank = bound_ranks(hist.n, p)
        low, high = order_statistics(values, counts, [low_rank, high_rank])
        raw_low, raw_high = _unclipped_ranks(hist.n, p)
        clipped = raw_low < 1 or raw_high > hist.n
        out.bounds.append(QuantileBound(p, point[p] / 1000, low / 1000, high / 1000,
                                        low_rank, high_rank, clipped))
    return out


def progress_counts(stderr: str, origin_epoch: float) -> dict[int, int]:
    """Successful transactions per second of an iteration from pgbench's ``-P 1
    --progress-timestamp`` lines: each line's TPS times its interval, filed under the
    second (since ``origin_epoch``) its interval ends closest to the end of. The first
    interval's start is not printed: taken as 1 s before its end."""
    out: dict[int, int] = {}
    previous: float | None = None
    for match in PROGRESS.finditer(stderr):
        end = float(match["t"])
        length = end - previous if previous is not None else 1.0
        previous = end
        second = round(end - origin_epoch) - 1
        out[second] = out.get(second, 0) + round(float(match["tps"]) * length)
    return out


def with_progress_counts(stats: LogStats, counts: dict[int, int]) -> LogStats:
    """An iteration's statistics from sampled logs with every second's successful count
    replaced by pgbench's own (``progress_counts``): TPS exact; each second's latency sum
    scaled with its count, so its mean stays the sample's."""
    import numpy as np

    length = max([len(stats.timeline_ok), *[s + 1 for s in counts if s >= 0]])
    ok = np.zeros(length, dtype=np.int64)
    for second, n in counts.items():
        if second >= 0:
            ok[second] = n
    sampled = _padded(stats.timeline_ok, length).astype(np.float64)
    scale = np.divide(ok, sampled, out=np.zeros(length), where=sampled > 0)
    window = int(stats.warmup_s)
    return dataclasses.replace(
        stats, interval_ok=_padded(ok[window:], stats.duration_s),
        timeline_ok=ok, timeline_failed=_padded(stats.timeline_failed, length),
        timeline_latency_sum_us=_padded(stats.timeline_latency_sum_us, length) * scale,
        timeline_latency_max_us=_padded(stats.timeline_latency_max_us, length),
        timeline_p99_us=_padded(stats.timeline_p99_us, length, math.nan),
        latency_source=SAMPLED)


def _padded(values: np.ndarray, length: int, fill: float = 0) -> np.ndarray:
    import numpy as np

    out = np.full(length, fill, dtype=values.dtype if fill == 0 else np.float64)
    out[:min(length, len(values))] = values[:length]
    return out
