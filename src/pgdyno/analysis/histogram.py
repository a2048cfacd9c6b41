"""An exact, mergeable latency histogram with bounded memory.

pgbench logs latencies in whole microseconds, so counting each distinct value gives
exact percentiles while memory grows with the number of *distinct* latencies (tens of
thousands in practice), not with the number of transactions (millions).

Percentiles use the nearest-rank definition: the smallest latency x such that at least
p% of transactions took x or less (numpy's ``method="inverted_cdf"``, with the rank
computed in exact arithmetic).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

# numpy is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import numpy as np


PERCENTILES = (50.0, 75.0, 80.0, 90.0, 95.0, 99.0, 99.9)


def nearest_rank(p: float, n: int) -> int:
    """1-based rank of the p-th percentile among n values: ceil(p/100 · n), computed exactly.

    Exact fractions matter: in floating point 99.9/100 · 200000 is 199800.00000000003,
    which would pick the next value up.
    """
    return max(1, math.ceil(Fraction(str(p)) * n / 100))


@dataclass
class LatencyHistogram:
    counts: Counter = field(default_factory=Counter)
    """latency in µs -> number of transactions."""
    n: int = 0
    total_us: float = 0.0
    total_sq_us: float = 0.0
    bucketed: bool = False
    """The counts are HdrHistogram buckets (keyed by each bucket's top), not exact values:
    percentiles are within ``hdr.RELATIVE_PRECISION`` above the exact ones."""
    exact_min_us: float | None = None
    exact_max_us: float | None = None
    """Known exactly even when the counts are bucketed (kept per second)."""

    def add_array(self, latencies_us: np.ndarray) -> None:
        import numpy as np

        if latencies_us.size == 0:
            return
        values = latencies_us.astype(np.int64, copy=False)
        uniq, cnt = np.unique(values, return_counts=True)
        self.counts.update(dict(zip(uniq.tolist(), cnt.tolist(), strict=True)))
        self.n += int(values.size)
        if self.exact_min_us is not None:
            self.exact_min_us = min(self.exact_min_us, float(uniq[0]))
        if self.exact_max_us is not None:
            self.exact_max_us = max(self.exact_max_us, float(uniq[-1]))
        as_float = values.astype(np.float64)
        self.total_us += float(as_float.sum())
        self.total_sq_us += float(np.square(as_float).sum())

    def merge(self, other: LatencyHistogram) -> None:
        if other.n and (self.bucketed or other.bucketed):
            self.exact_min_us = _extreme(min, self.min_us if self.n else None, other.min_us)
            self.exact_max_us = _extreme(max, self.max_us if self.n else None, other.max_us)
        self.counts.update(other.counts)
        self.n += other.n
        self.total_us += other.total_us
        self.total_sq_us += other.total_sq_us
        self.bucketed = self.bucketed or other.bucketed

    @property
    def mean_us(self) -> float:
        return self.total_us / self.n if self.n else math.nan

    @property
    def stddev_us(self) -> float:
        """Population standard deviation, as pgbench prints it."""
        if not self.n:
            return math.nan
        variance = self.total_sq_us / self.n - self.mean_us**2
        return math.sqrt(max(variance, 0.0))

    def sorted_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        values = np.fromiter(sorted(self.counts), dtype=np.int64, count=len(self.counts))
        counts = np.array([self.counts[v] for v in values.tolist()], dtype=np.int64)
        return values, counts

    def percentiles_us(self, ps: tuple[float, ...] = PERCENTILES) -> dict[float, float]:
        import numpy as np

        if not self.n or not self.counts:  # no counts: moments only (pgbench's aggregates)
            return {p: math.nan for p in ps}
        values, counts = self.sorted_arrays()
        cumulative = np.cumsum(counts)
        out = {}
        for p in ps:
            rank = nearest_rank(p, self.n)
            out[p] = float(values[np.searchsorted(cumulative, rank)])
        return out

    @property
    def min_us(self) -> float:
        if self.exact_min_us is not None:
            return self.exact_min_us
        return float(min(self.counts)) if self.counts else math.nan

    @property
    def max_us(self) -> float:
        if self.exact_max_us is not None:
            return self.exact_max_us
        return float(max(self.counts)) if self.counts else math.nan

    def percentile_curve(self, points: int = 200) -> list[tuple[float, float]]:
        """(percentile, latency µs) pairs, dense towards the tail (for the percentile plot)."""
        import numpy as np

        if not self.n or not self.counts:
            return []
        # 1 - 10^-x spacing puts as many points between p99 and p99.99 as between p0 and p90.
        xs = np.linspace(0.0, 4.0, points)
        ps = tuple(float(min(100.0 * (1 - 10 ** (-x)), 100.0)) for x in xs)
        got = self.percentiles_us(ps)
        return [(p, got[p]) for p in ps]


def _extreme(pick, mine: float | None, theirs: float) -> float:
    return theirs if mine is None or math.isnan(mine) else pick(mine, theirs)
