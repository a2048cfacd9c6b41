"""What an interleaved comparison of a search can tell apart on the machine it ran on.

The final comparison (and the long validation) runs every config several times under the
same options, interleaved, so the spread of one config's runs is the machine's run-to-run
noise: a shared VM's speed levels, what a short window happens to catch (a checkpoint, an
autovacuum pass), a cold cache. Pooled over the configs, it says:

* the noise: the pooled standard deviation of ln(value) over each config's own runs, in
  percent (for spreads of ±20% and less it equals the spread as a share of the mean to
  within a tenth of itself);
* the resolution: half the width of the 95% interval of two configs' difference with the
  runs each had, t(0.975, 2n − 2) · σ · √(2/n): a lead smaller than this cannot be told
  from noise by this comparison;
* the runs per config that would tell a lead of 5% and of 10% apart from none, with a
  two-sided 5% test and 80% power: n = 2 ((z₀.₉₇₅ + z₀.₈₀) σ / ln(1 + δ))², the textbook
  sample size for the difference of two means;
* the correlation ρ of neighbouring runs' residuals (each run's ln(value) less its config's
  mean, in the order the runs started): running each trial next to a reference run cancels
  the part of the noise that neighbours share, and the difference of such a pair has
  variance 2σ²(1 − ρ) against a lone run's σ². A paired trial costs two runs, so pairing
  makes a trial's figure steadier only when ρ > 0.5.

Searches on a 2-core VM (bench/RESULTS.md) are why this exists: a config's 20-second
runs spread by ±11% on TPROC-C, so a 5% lead needed about a hundred runs a config.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.analysis.summary import load_summary
from pgdyno.analysis.tdist import t_quantile
from pgdyno.errors import UsageError
from pgdyno.results.manifest import load_manifest
from pgdyno.workloads import registry
from pgdyno.workloads.base import headline_of

CONFIDENCE = 0.95
POWER = 0.80
EFFECTS_PCT = (5.0, 10.0)
"""The leads whose runs per config are stated: the leads a search aims for over tuned and pgtune."""
PAIRING_PAYS_ABOVE = 0.5
"""ρ above which a pair's difference (variance 2σ²(1 − ρ)) is steadier than a lone run."""


@dataclass
class Noise:
    """The noise an interleaved comparison measured, and what it implies."""

    sd_pct: float
    """Pooled run-to-run standard deviation of ln(value), in percent."""
    df: int
    """Its degrees of freedom: runs less configs."""
    configs: int
    runs: int
    runs_per_config: int
    """The fewest runs any config had: the comparison's n."""
    resolution_pct: float
    """Half-width of the 95% interval of a difference between two configs at that n."""
    runs_needed: dict[str, int] = field(default_factory=dict)
    """Lead in percent (as text, a JSON key) -> runs per config to tell it apart."""
    neighbour_corr: float | None = None
    """Lag-1 correlation of the runs' residuals in start order (None: too few runs)."""
    window_s: float = 0.0
    """Each run's measured window (its load, without warm-up)."""

    @property
    def pairing_helps(self) -> bool | None:
        if self.neighbour_corr is None:
            return None
        return self.neighbour_corr > PAIRING_PAYS_ABOVE


def noise_of(points: list[tuple[str, float]], window_s: float = 0.0) -> Noise | None:
    """The noise of ``points``: (config label, headline value) in the order the runs
    started. None when no config ran twice or a value is not positive."""
    if any(not (value > 0) for _, value in points):
        return None
    logs: dict[str, list[float]] = {}
    for label, value in points:
        logs.setdefault(label, []).append(math.log(value))
    means = {label: statistics.fmean(xs) for label, xs in logs.items()}
    df = len(points) - len(logs)
    if df < 1 or min(len(xs) for xs in logs.values()) < 2:
        return None
    sum_sq = sum((x - means[label]) ** 2 for label, xs in logs.items() for x in xs)
    sigma = math.sqrt(sum_sq / df)
    n = min(len(xs) for xs in logs.values())
    resolution = t_quantile(0.5 + CONFIDENCE / 2, 2 * n - 2) * sigma * math.sqrt(2 / n)
    residuals = [math.log(value) - means[label] for label, value in points]
    return Noise(sd_pct=100 * sigma, df=df, configs=len(logs), runs=len(points),
                 runs_per_config=n, resolution_pct=100 * resolution,
                 runs_needed={f"{e:g}": runs_needed(sigma, e) for e in EFFECTS_PCT},
                 neighbour_corr=lag1_correlation(residuals), window_s=window_s)


def runs_needed(sigma: float, effect_pct: float) -> int:
    """Runs per config for a two-sided 5% test to find a lead of ``effect_pct`` with 80%
    power, when one run's ln(value) has standard deviation ``sigma``."""
    z = statistics.NormalDist()
    spread = z.inv_cdf(0.5 + CONFIDENCE / 2) + z.inv_cdf(POWER)
    return max(2, math.ceil(2 * (spread * sigma / math.log1p(effect_pct / 100)) ** 2))


MIN_RUNS_FOR_CORRELATION = 8
"""Fewer neighbouring pairs than seven make a correlation too loose to act on."""


def lag1_correlation(xs: list[float]) -> float | None:
    """Pearson's correlation of each value with the next; None for fewer than
    MIN_RUNS_FOR_CORRELATION values or values that do not vary."""
    if len(xs) < MIN_RUNS_FOR_CORRELATION:
        return None
    a, b = xs[:-1], xs[1:]
    try:
        return statistics.correlation(a, b)
    except statistics.StatisticsError:
        return None


def runs_noise(runs: dict[str, list[str]], workload: str, window_s: float) -> Noise | None:
    """The noise of an interleaved comparison's runs (label -> run directories), each run's
    headline read from its summary.json, in the order the runs started."""
    metrics = registry.get(workload).metrics
    started: list[tuple[str, str, float]] = []
    for label, dirs in runs.items():
        for run_dir in dirs:
            try:
                summary = load_summary(Path(run_dir) / "summary.json")
                started_at = load_manifest(Path(run_dir)).started_at
            except (OSError, UsageError, ValueError, KeyError, TypeError):
                continue
            head = headline_of(summary, metrics)
            if head is not None:
                started.append((started_at, label, head.value))
    started.sort(key=lambda row: row[0])
    return noise_of([(label, value) for _, label, value in started], window_s)


TRIAL_SD_FOR_LEAD_PCT = 5.0 / (statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
                               * math.sqrt(2))
"""One run's noise (≈1.8%) at which two single runs 5% apart are told apart: their
difference's 95% interval is then ±5%."""


@dataclass
class SearchNoise:
    """The noise of a search's short comparison and long validation, and the trial window
    its short runs' noise points to."""

    short: Noise | None
    long: Noise | None
    trial_window_s: float | None = None
    """The window at which one run's noise would be TRIAL_SD_FOR_LEAD_PCT, scaling the short
    comparison's noise as 1/√window (a run's figure is a mean over its window)."""
    long_predicted_sd_pct: float | None = None
    """The long runs' noise as that rule predicts it from the short runs' (to set beside
    what the long runs measured: the rule's check)."""


def window_for(noise: Noise, sd_pct: float) -> float | None:
    """The window at which one run's noise would be ``sd_pct``, with noise ∝ 1/√window."""
    if noise.window_s <= 0 or sd_pct <= 0:
        return None
    return noise.window_s * (noise.sd_pct / sd_pct) ** 2


def search_noise(short: Noise | None, long: Noise | None) -> SearchNoise | None:
    if short is None and long is None:
        return None
    out = SearchNoise(short, long)
    if short is not None and short.window_s > 0:
        out.trial_window_s = window_for(short, TRIAL_SD_FOR_LEAD_PCT)
        if long is not None and long.window_s > 0:
            out.long_predicted_sd_pct = short.sd_pct * math.sqrt(short.window_s
                                                                 / long.window_s)
    return out
