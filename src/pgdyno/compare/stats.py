"""Is B different from A? Welch's t-interval on per-iteration values, and a verdict.

Why Welch on iterations, and not a bootstrap over 1 s intervals:

- The independent unit of a benchmark is the iteration (its own pgbench process, started
  after a CHECKPOINT). The 1 s intervals inside an iteration are autocorrelated (cache
  warming, a checkpoint, autovacuum move several consecutive seconds together), so pooling
  them as if independent multiplies the sample size by the duration and gives intervals
  that are far too narrow: the "significant" A/A comparison.
- Benchmarks have few iterations (2 to 5). A bootstrap of 3 values has 10 distinct
  resamples and its percentile interval is too narrow for such samples; Student's t with
  Welch's degrees of freedom is exact under normality and honest about small samples
  (t(0.975, 2 df) = 4.30, not 1.96).
- Welch does not assume equal variances or equal sizes: a candidate may be noisier.
- For positive metrics (TPS, latencies) the test runs on logarithms, so the interval is an
  interval of the ratio B/A: symmetric for "faster" and "slower", and directly a change %.
  Metrics with a zero or negative value fall back to the difference of means, in % of A's
  mean (``welch-diff``; the report says so on the row and in its Method paragraph).
- A change in % of a near-zero baseline is noise however it is computed (0.4 against
  0.13 IOPS gave an "interval" of -450% to +317%): below a floor per unit (10 IOPS, 1 MiB/s,
  1 % CPU) or at ~0 the verdict is "too small to compare", with no change and no interval.

When an interval cannot be computed (fewer than two values on a side, no variation at
all, NaN), the verdict is "undetermined", never a difference.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from pgdyno.analysis.tdist import t_quantile
from pgdyno.analysis.telemetry import MIN_IOPS_FOR_CV

FASTER, SLOWER = "faster", "slower"
HIGHER, LOWER = "higher", "lower"
SAME = "no significant difference"
UNDETERMINED = "undetermined"
TOO_SMALL = "too small to compare"
DEFAULT_CONFIDENCE = 0.95
WELCH_LOG, WELCH_DIFF = "welch-log", "welch-diff"

FLOORS: dict[str, float] = {"IOPS": MIN_IOPS_FOR_CV, "MiB/s": 1.0, "%": 1.0}
"""Baseline means below these (by unit) are too small for a change in %: a few stray I/Os
or a sampler's own CPU, not the workload (the IOPS floor is the one below which the run
report leaves out the IOPS CV)."""
NEAR_ZERO = 1e-9
"""A baseline mean this close to 0 makes a change in % undefined, whatever the unit."""


def floor_for(unit: str) -> float:
    """The smallest baseline mean a change in % is given for, in ``unit``."""
    return FLOORS.get(unit, 0.0)


def too_small(baseline_mean: float, unit: str) -> str:
    """Why a change against ``baseline_mean`` is not worth a percentage ('' when it is)."""
    floor = floor_for(unit)
    if math.isnan(baseline_mean):
        return ""
    if abs(baseline_mean) <= NEAR_ZERO:
        return "baseline mean is 0"
    if baseline_mean < floor:
        return (f"baseline mean {with_unit(f'{baseline_mean:.3g}', unit)} is below "
                f"{with_unit(f'{floor:g}', unit)}")
    return ""


def with_unit(number: str, unit: str) -> str:
    """'10 IOPS', '1 MiB/s', but '1%'."""
    return number + ("" if unit == "%" else " ") + unit if unit else number


@dataclass
class SampleStats:
    n: int
    mean: float
    stddev: float
    """Sample standard deviation (n-1); NaN with one value."""
    values: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, values: list[float]) -> SampleStats:
        clean = [float(v) for v in values if v is not None and not math.isnan(v)]
        mean = statistics.fmean(clean) if clean else math.nan
        sd = statistics.stdev(clean) if len(clean) > 1 else math.nan
        return cls(n=len(clean), mean=mean, stddev=sd, values=clean)


@dataclass
class ChangeEstimate:
    """The change of B against A with its confidence interval, in percent of A."""

    change_pct: float
    low_pct: float
    high_pct: float
    noise_pct: float
    """Typical spread of one sample around its side's mean (pooled), in percent."""
    df: float
    method: str
    """``welch-log`` (ratio of geometric means) or ``welch-diff`` (difference of means)."""
    verdict: str
    reason: str = ""


def welch(x: list[float], y: list[float]) -> tuple[float, float, float]:
    """(mean(y) - mean(x), its standard error, Welch-Satterthwaite degrees of freedom)."""
    nx, ny = len(x), len(y)
    vx, vy = statistics.variance(x) / nx, statistics.variance(y) / ny
    se = math.sqrt(vx + vy)
    denom = (vx * vx / (nx - 1) if vx else 0.0) + (vy * vy / (ny - 1) if vy else 0.0)
    df = (vx + vy) ** 2 / denom if denom else math.inf
    return statistics.fmean(y) - statistics.fmean(x), se, df


def estimate_change(baseline: list[float], candidate: list[float], *, direction: int = 1,
                    confidence: float = DEFAULT_CONFIDENCE, unit: str = "") -> ChangeEstimate:
    """Change of ``candidate`` against ``baseline`` and a verdict.

    ``direction``: +1 when higher is better (TPS), -1 when lower is better (latency),
    0 when neither is (IOPS, CPU): the verdict then says higher/lower. ``unit`` sets the
    floor below which the baseline is too small to compare (see FLOORS).
    """
    a = SampleStats.of(baseline).values
    b = SampleStats.of(candidate).values
    nan = math.nan
    why = too_small(statistics.fmean(a), unit) if a else ""
    if why:
        return ChangeEstimate(nan, nan, nan, nan, nan, "none", TOO_SMALL, why)
    if len(a) < 2 or len(b) < 2:
        return ChangeEstimate(_rough_change(a, b), nan, nan, nan, nan, "none", UNDETERMINED,
                              f"needs at least 2 values per side (have {len(a)} and {len(b)})")
    use_log = min(a) > 0 and min(b) > 0
    xs, ys = ([math.log(v) for v in a], [math.log(v) for v in b]) if use_log else (a, b)
    diff, se, df = welch(xs, ys)
    pooled_sd = math.sqrt((statistics.variance(xs) + statistics.variance(ys)) / 2.0)
    if se == 0.0 or math.isnan(se):
        return ChangeEstimate(_rough_change(a, b), nan, nan, 0.0, nan, "none", UNDETERMINED,
                              "no variation within either side: an interval cannot be computed")
    t = t_quantile(0.5 + confidence / 2.0, df)
    low, high = diff - t * se, diff + t * se
    if use_log:
        change, lo_pct, hi_pct = (100.0 * math.expm1(v) for v in (diff, low, high))
        noise = 100.0 * pooled_sd  # a log-scale sd is a relative spread
        method = WELCH_LOG
    else:
        base = statistics.fmean(a)  # not ~0: too_small() returned above
        change, lo_pct, hi_pct = (100.0 * v / abs(base) for v in (diff, low, high))
        noise = 100.0 * pooled_sd / abs(base)
        method = WELCH_DIFF
    return ChangeEstimate(change, lo_pct, hi_pct, noise, df, method,
                          verdict_for(lo_pct, hi_pct, direction))


def verdict_for(low_pct: float, high_pct: float, direction: int) -> str:
    if math.isnan(low_pct) or math.isnan(high_pct):
        return UNDETERMINED
    if low_pct <= 0.0 <= high_pct:
        return SAME
    up = low_pct > 0.0
    if direction == 0:
        return HIGHER if up else LOWER
    return FASTER if up == (direction > 0) else SLOWER


def _rough_change(a: list[float], b: list[float]) -> float:
    """The point change for display when no interval exists (not a verdict)."""
    if not a or not b:
        return math.nan
    ma = statistics.fmean(a)
    return 100.0 * (statistics.fmean(b) / ma - 1.0) if ma else math.nan
