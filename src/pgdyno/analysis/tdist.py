"""Student's t distribution: quantiles and the CDF, in pure Python.

Used for the interval of a run's headline across its iterations and for compare's Welch
intervals. Hand-written because the only alternative is SciPy, a large dependency for two
functions; the regularised incomplete beta by Lentz's continued fraction is exact to
~1e-12, which a test checks against published t tables.
"""

from __future__ import annotations

import math
import statistics


def t_quantile(p: float, df: float) -> float:
    """Quantile of Student's t distribution (two-sided use: p = 1 - alpha/2)."""
    if not 0.0 < p < 1.0 or not df > 0:
        return math.nan
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):  # bisection: monotone, and precision is what matters here
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def t_cdf(t: float, df: float) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b), by its continued fraction (modified Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    # The continued fraction converges fast for x < (a+1)/(a+b+2); use symmetry otherwise.
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * result / a


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Two-sided t interval of the mean of ``values`` (None with fewer than two)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = (t_quantile(1 - (1 - confidence) / 2, len(values) - 1)
            * statistics.stdev(values) / math.sqrt(len(values)))
    return mean - half, mean + half
