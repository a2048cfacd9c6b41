"""Is B different from A, when both were measured in neighbouring blocks? Paired statistics
that hold on a machine whose speed drifts, and a stopping rule that may look at them.

The unit is a pair: one block of A and one of B, run back to back (interleaved) or at the
same time (duet). Whatever level the machine ran at during the pair, both sides saw it;
the pair's difference of logarithms, ``d = ln B − ln A``, cancels it, and its mean over the
pairs estimates the change (exp(mean d) − 1 is the ratio of geometric means, B/A − 1).

Why the interval is not a plain paired t-interval:

- A machine that jumps between speed levels makes most pairs agree closely and a few,
  those with a jump inside them, disagree wildly: a mean and its standard deviation are
  ruled by those few. The estimate is Hodges and Lehmann's (the median of the pairs'
  Walsh averages) and its interval the one that inverts Wilcoxon's signed-rank test, with
  the exact distribution of the statistic: both need only that a pair's difference is
  symmetric about the change, and the randomized order makes it so, since a jump favours
  whichever side ran second, A or B by the draw. The same draw makes the jumps' share of
  neighbouring pairs uncorrelated (each pair's sign is its own coin, and the two pairs of a
  quad have opposite signs, which only makes the interval conservative).
- Pairs can still move together for other reasons (one side's state building up over
  blocks). When the pairs' lag-1 autocorrelation is positive beyond chance (above
  1.96/√n), or too few pairs allow the level asked (the signed-rank interval needs
  2/2ⁿ ≤ α), the interval is the mean of the log ratios with Newey and West's variance
  (Bartlett weights up to ⌊4 (n/100)^(2/9)⌋ lags, never below the independent-pairs
  variance) and Student's t with n − 1 degrees of freedom, and the method says so.
- Stopping once the interval is narrow enough looks at the data more than once, and every
  look is another chance of a false difference. The error rate α is spent in steps
  (``Spending``): a look at the fraction t of the budget may use α(t² − t_prev²), and the
  last look whatever remains, so the looks together never exceed α (Bonferroni's bound
  holds however the looks depend on each other). Each interval shown is at its own level,
  1 − α_k; together they hold at 1 − α.
- The order inside a pair (A then B, or B then A) is randomized in balanced quads (one of
  each order in every two pairs), so an effect of one block on the next (a cache the
  previous block warmed, writes it left behind) cancels when it is the same both ways;
  ``order_check`` compares the two orders' means and says when they disagree, which a
  one-sided carry-over would show.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pgdyno.analysis.tdist import t_quantile
from pgdyno.compare.stats import UNDETERMINED, ChangeEstimate, too_small, verdict_for

PAIRED_HL = "paired-hl"
"""The interval of a paired design: Hodges-Lehmann on the pairs' log ratios, signed-rank."""
PAIRED_LOG = "paired-log"
"""Its fallback: mean of per-pair log ratios, Newey-West variance, Student's t."""
PAIRED_DIFF = "paired-diff"
"""The same on differences of values, in % of A's mean (a value of 0 or less on a side)."""


def pair_up(halves: Iterable[tuple[int, str, float | None, int]]
            ) -> tuple[list[float], list[float], list[bool]]:
    """Each pair's A and B (NaN where a half has no figure) and whether A ran first (or at
    once, a duet's), from the halves' (pair, side, value, position), in pair order; a
    pair missing a side is left out."""
    by_pair: dict[int, dict[str, tuple[float | None, int]]] = {}
    for pair, side, value, position in halves:
        by_pair.setdefault(pair, {})[side] = (value, position)
    a, b, first = [], [], []
    for pair in sorted(by_pair):
        entry = by_pair[pair]
        if "A" not in entry or "B" not in entry:
            continue
        (x, x_at), (y, y_at) = entry["A"], entry["B"]
        a.append(math.nan if x is None else x)
        b.append(math.nan if y is None else y)
        first.append(x_at <= y_at)
    return a, b, first


def newey_west_lags(n: int) -> int:
    """The Bartlett window's length for ``n`` pairs (the usual rule, at least 1)."""
    return max(1, math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 2 else 0


def long_run_variance(d: list[float], lags: int) -> float:
    """Newey-West's estimate of the variance of ``d``'s mean times n (autocovariances up
    to ``lags`` with Bartlett weights), not below the plain sample variance."""
    n = len(d)
    mean = statistics.fmean(d)
    centred = [x - mean for x in d]
    gamma0 = sum(x * x for x in centred) / n
    total = gamma0
    for lag in range(1, min(lags, n - 1) + 1):
        cov = sum(centred[i] * centred[i - lag] for i in range(lag, n)) / n
        total += 2.0 * (1.0 - lag / (lags + 1.0)) * cov
    return max(total, statistics.variance(d))


def lag1_autocorrelation(d: list[float]) -> float:
    """The correlation of each pair's difference with the next one's (NaN below 3 pairs)."""
    if len(d) < 3:
        return math.nan
    mean = statistics.fmean(d)
    centred = [x - mean for x in d]
    denom = sum(x * x for x in centred)
    if denom == 0.0:
        return math.nan
    return sum(centred[i] * centred[i - 1] for i in range(1, len(d))) / denom


@dataclass
class PairedEstimate:
    change: ChangeEstimate
    pairs: int
    lags: int
    autocorrelation: float
    """Lag-1 autocorrelation of the pairs' differences."""
    level: float
    """The confidence level of this interval (1 − the α this look spent)."""

    @property
    def half_width_pct(self) -> float:
        """The interval's larger half-width around the change, in % (NaN without one)."""
        c = self.change
        return max(c.high_pct - c.change_pct, c.change_pct - c.low_pct)


def paired_change(baseline: list[float], candidate: list[float], *, level: float,
                  direction: int = 1, unit: str = "") -> PairedEstimate:
    """The change of ``candidate`` against ``baseline``, value i of each a pair, with an
    interval at ``level`` that allows for correlated neighbouring pairs."""
    nan = math.nan
    pairs = [(a, b) for a, b in zip(baseline, candidate, strict=True)
             if _finite(a) and _finite(b)]
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    why = too_small(statistics.fmean(a), unit) if a else ""
    if why:
        from pgdyno.compare.stats import TOO_SMALL

        return PairedEstimate(ChangeEstimate(nan, nan, nan, nan, nan, "none", TOO_SMALL, why),
                              len(pairs), 0, nan, level)
    if len(pairs) < 2:
        return PairedEstimate(ChangeEstimate(nan, nan, nan, nan, nan, "none", UNDETERMINED,
                                             f"needs at least 2 pairs (have {len(pairs)})"),
                              len(pairs), 0, nan, level)
    use_log = min(a) > 0 and min(b) > 0
    d = [math.log(y) - math.log(x) for x, y in pairs] if use_log else [y - x for x, y in pairs]
    n = len(d)
    rho = lag1_autocorrelation(d)
    if use_log and not (rho > 1.96 / math.sqrt(n)):
        robust = hodges_lehmann(d, level)
        if robust is not None:
            centre, low, high = robust
            est = ChangeEstimate(*(100.0 * math.expm1(v) for v in (centre, low, high)),
                                 robust_spread_pct(d), float(n - 1), PAIRED_HL,
                                 verdict_for(100.0 * math.expm1(low),
                                             100.0 * math.expm1(high), direction))
            return PairedEstimate(est, n, 0, rho, level)
    lags = newey_west_lags(n)
    mean = statistics.fmean(d)
    se = math.sqrt(long_run_variance(d, lags) / n)
    if se == 0.0 or math.isnan(se):
        est = ChangeEstimate(_pct(mean, use_log, a), nan, nan, 0.0, nan, "none", UNDETERMINED,
                             "no variation between the pairs: an interval cannot be computed")
        return PairedEstimate(est, n, lags, rho, level)
    t = t_quantile(0.5 + level / 2.0, n - 1)
    low, high = mean - t * se, mean + t * se
    change, lo_pct, hi_pct = (_pct(v, use_log, a) for v in (mean, low, high))
    sd = statistics.stdev(d)
    noise = 100.0 * sd if use_log else 100.0 * sd / abs(statistics.fmean(a))
    est = ChangeEstimate(change, lo_pct, hi_pct, noise, float(n - 1),
                         PAIRED_LOG if use_log else PAIRED_DIFF,
                         verdict_for(lo_pct, hi_pct, direction))
    return PairedEstimate(est, n, lags, rho, level)


@functools.lru_cache(maxsize=256)
def signed_rank_cdf(n: int) -> tuple[float, ...]:
    """P(W ≤ w) for w = 0 … n(n+1)/2, W Wilcoxon's signed-rank statistic of n pairs under
    symmetry about 0: each rank's sign a fair coin."""
    probs = np.zeros(n * (n + 1) // 2 + 1)
    probs[0] = 1.0
    for rank in range(1, n + 1):
        shifted = np.zeros_like(probs)
        shifted[rank:] = probs[:-rank]
        probs = (probs + shifted) / 2.0
    return tuple(np.cumsum(probs))


def hodges_lehmann(d: list[float], level: float) -> tuple[float, float, float] | None:
    """(estimate, low, high): the median of the Walsh averages (dᵢ + dⱼ)/2, i ≤ j, and the
    signed-rank interval at ``level`` (the averages between the c-th smallest and the c-th
    largest, c the largest count with P(W < c) ≤ (1 − level)/2); None when n pairs cannot
    reach ``level``."""
    values = np.asarray(d, dtype=float)
    n = len(values)
    if n < 2:
        return None
    upper = np.triu_indices(n)
    walsh = np.sort(((values[:, None] + values[None, :]) / 2.0)[upper])
    cdf = signed_rank_cdf(n)
    tail = (1.0 - level) / 2.0
    cut = int(np.searchsorted(np.asarray(cdf), tail, side="right"))  # P(W ≤ cut-1) ≤ tail
    if cut < 1:
        return None
    return float(np.median(walsh)), float(walsh[cut - 1]), float(walsh[len(walsh) - cut])


def _pct(value: float, use_log: bool, baseline: list[float]) -> float:
    if use_log:
        return 100.0 * math.expm1(value)
    return 100.0 * value / abs(statistics.fmean(baseline))


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


# ----- spending the error rate over looks ---------------------------------------------

@dataclass
class Spending:
    """α spent in steps as the budget is used: the look at fraction t (of the budget's time
    or of its pairs) may spend α (t² − t_prev²); a final look spends all that is left."""

    alpha: float
    spent: float = 0.0
    last_fraction: float = 0.0

    def look(self, fraction: float, final: bool = False) -> float:
        """The α this look may spend (its interval's level is 1 − that); records it."""
        fraction = min(1.0, max(fraction, self.last_fraction))
        allowed = (self.alpha if final or fraction >= 1.0
                   else self.alpha * fraction * fraction)
        step = max(0.0, allowed - self.spent)
        self.spent += step
        self.last_fraction = fraction
        return step


# ----- does the order inside a pair matter? -------------------------------------------

@dataclass
class OrderCheck:
    """The change estimated from the pairs run A-then-B and from those run B-then-A."""

    ab_pairs: int
    ba_pairs: int
    ab_change_pct: float
    ba_change_pct: float
    gap_low_pct: float
    gap_high_pct: float
    """95% Welch interval of the gap between the two orders' mean log ratios, in %."""
    holds: bool
    """False when the gap's interval excludes 0: one side's block changes the next."""

    @property
    def words(self) -> str:
        if math.isnan(self.gap_low_pct):
            return (f"too few pairs of each order to check ({self.ab_pairs} A-then-B, "
                    f"{self.ba_pairs} B-then-A)")
        gap = f"{self.gap_low_pct:+.1f}% to {self.gap_high_pct:+.1f}%"
        if self.holds:
            return (f"the order inside a pair made no significant difference (A then B "
                    f"{self.ab_change_pct:+.1f}%, B then A {self.ba_change_pct:+.1f}%, "
                    f"gap {gap})")
        return (f"the order inside a pair mattered (A then B {self.ab_change_pct:+.1f}%, "
                f"B then A {self.ba_change_pct:+.1f}%, gap {gap}): one side's block "
                "changes the next one's; the balanced order averages an equal effect out, "
                "an unequal one biases the change")


def order_check(baseline: list[float], candidate: list[float],
                a_first: list[bool]) -> OrderCheck:
    """Compare the pairs whose A block ran first with those whose B block did."""
    d: dict[bool, list[float]] = {True: [], False: []}
    for a, b, first in zip(baseline, candidate, a_first, strict=True):
        if _finite(a) and _finite(b) and a > 0 and b > 0:
            d[first].append(math.log(b) - math.log(a))
    ab, ba = d[True], d[False]
    return OrderCheck(len(ab), len(ba), _mean_change_pct(ab), _mean_change_pct(ba),
                      *_gap(ba, ab))


def _mean_change_pct(logs: list[float]) -> float:
    """The change the mean of some pairs' ln(B/A) says, in % (NaN: no pair)."""
    return 100.0 * math.expm1(statistics.fmean(logs)) if logs else math.nan


def _gap(x: list[float], y: list[float]) -> tuple[float, float, bool]:
    """Welch's 95% interval of mean(y) - mean(x), in % of log ratio, and whether it holds
    0 (NaN ends and True: too few to tell)."""
    from pgdyno.compare.stats import welch

    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan, True
    diff, se, df = welch(x, y)
    if se == 0.0 or math.isnan(se):
        return math.nan, math.nan, True
    t = t_quantile(0.975, df)
    low, high = 100.0 * (diff - t * se), 100.0 * (diff + t * se)
    return low, high, low <= 0.0 <= high


@dataclass
class DuetCheck:
    """A duet's pairs (both sides loaded at once) against its check pairs (each side
    alone, back to back): the change each shows, and the gap between them."""

    duet_pairs: int
    solo_pairs: int
    duet_change_pct: float
    solo_change_pct: float
    gap_low_pct: float
    gap_high_pct: float
    """95% Welch interval of the gap between the solo and duet pairs' mean log ratios."""
    holds: bool
    """False when the gap's interval excludes 0: sharing the machine changed the
    comparison."""

    @property
    def words(self) -> str:
        if math.isnan(self.gap_low_pct):
            return (f"too few check pairs to compare the duet with the sides alone "
                    f"({self.solo_pairs}; one pair in four is one)")
        gap = f"{self.gap_low_pct:+.1f}% to {self.gap_high_pct:+.1f}%"
        both = (f"duet pairs {self.duet_change_pct:+.1f}% ({self.duet_pairs}), the sides "
                f"alone {self.solo_change_pct:+.1f}% ({self.solo_pairs}), gap {gap}")
        if self.holds:
            return f"sharing the machine made no significant difference ({both})"
        return (f"sharing the machine changed the comparison ({both}): one side gains or "
                "loses more than the other when both run at once, so the duet does not "
                "measure what each would do alone")


def duet_check(duet: tuple[list[float], list[float]],
               solo: tuple[list[float], list[float]]) -> DuetCheck:
    """Compare the duet pairs' log ratios B/A with the check pairs' (Welch's interval of
    the gap, 95%)."""
    def logs(pairs: tuple[list[float], list[float]]) -> list[float]:
        return [math.log(b) - math.log(a) for a, b in zip(*pairs, strict=True)
                if _finite(a) and _finite(b) and a > 0 and b > 0]

    d, s = logs(duet), logs(solo)
    return DuetCheck(len(d), len(s), _mean_change_pct(d), _mean_change_pct(s), *_gap(d, s))


def robust_spread_pct(d: list[float]) -> float:
    """The spread of the pairs' log ratios that a few wild pairs do not rule: 1.4826 times
    their median absolute deviation (σ for normal data), in %."""
    centre = statistics.median(d)
    return 100.0 * 1.4826 * statistics.median(abs(x - centre) for x in d)


def seconds_for_precision(half_width_pct: float, seconds: float, precision_pct: float
                          ) -> float:
    """About how long the same design would take for a ±``precision_pct`` interval, from
    the ±``half_width_pct`` it reached in ``seconds`` (a half-width shrinks as 1/√time)."""
    if not (half_width_pct > 0 and seconds > 0 and precision_pct > 0):
        return math.nan
    return seconds * (half_width_pct / precision_pct) ** 2
