"""The search's noise and resolution (search/noise.py), against figures computed here with
numpy, a published t table and the normal distribution's power."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from pgdyno.search.noise import (
    TRIAL_SD_FOR_LEAD_PCT,
    lag1_correlation,
    noise_of,
    runs_needed,
    search_noise,
    window_for,
)

# Three configs, six runs each, interleaved as the comparison runs them (A B C C B A ...).
VALUES = {"A": [100, 112, 95, 104, 99, 108], "B": [90, 97, 101, 88, 94, 99],
          "C": [120, 111, 118, 125, 109, 116]}
ORDER = ["A", "B", "C", "C", "B", "A"] * 3


def _points() -> list[tuple[str, float]]:
    taken = {k: iter(v) for k, v in VALUES.items()}
    return [(label, float(next(taken[label]))) for label in ORDER]


def test_noise_is_the_pooled_sd_of_the_logs_and_resolution_uses_t() -> None:
    noise = noise_of(_points(), window_s=20)
    assert noise is not None
    logs = [np.log(v) for v in VALUES.values()]
    pooled = sum(((x - x.mean()) ** 2).sum() for x in logs) / (18 - 3)
    assert noise.df == 15 and noise.configs == 3 and noise.runs == 18
    assert noise.sd_pct == pytest.approx(100 * math.sqrt(pooled))
    # t(0.975, 10) = 2.228 (published tables): six runs a side, 2n - 2 degrees of freedom
    assert noise.resolution_pct == pytest.approx(
        2.228 * noise.sd_pct * math.sqrt(2 / 6), rel=1e-3)
    assert noise.window_s == 20


def test_runs_needed_is_the_fewest_with_80_percent_power() -> None:
    z = statistics.NormalDist()
    for sigma in (0.01, 0.05, 0.126):
        for lead in (5.0, 10.0):
            n = runs_needed(sigma, lead)
            delta = math.log1p(lead / 100)

            def power(k: int, sigma: float = sigma, delta: float = delta) -> float:
                return z.cdf(delta / (sigma * math.sqrt(2 / k)) - 1.959964)

            assert power(n) >= 0.80
            assert n == 2 or power(n - 1) < 0.80


def test_neighbour_correlation_matches_numpy_and_needs_eight_runs() -> None:
    rng = np.random.default_rng(7)
    level = np.repeat(rng.normal(0, 1, 10), 2)  # two runs share each speed level
    xs = list(level + rng.normal(0, 0.3, 20))
    assert lag1_correlation(xs) == pytest.approx(np.corrcoef(xs[:-1], xs[1:])[0, 1])
    assert lag1_correlation(xs) > 0.2
    assert lag1_correlation(xs[:7]) is None
    assert lag1_correlation([1.0] * 10) is None


def test_pairing_pays_only_above_half_correlation() -> None:
    """A VM speed level that holds for several runs correlates neighbours; the rule says
    pairing helps exactly when a pair's difference varies less than a lone run."""
    rng = np.random.default_rng(3)
    points = []
    for _ in range(4):
        level = rng.normal(0, 0.10)
        for _ in range(3):
            points += [("A", math.exp(4 + level + rng.normal(0, 0.02))),
                       ("B", math.exp(4.05 + level + rng.normal(0, 0.02)))]
    noise = noise_of(points)
    assert noise is not None and noise.pairing_helps is True
    residual = np.array([math.log(v) for _, v in points])
    a, b = residual[0::2], residual[1::2]
    assert np.var(b - a, ddof=1) < np.var(residual[0::2], ddof=1)  # pairs are steadier

    independent = [("A" if i % 2 else "B", math.exp(4 + rng.normal(0, 0.1)))
                   for i in range(24)]
    noise = noise_of(independent)
    assert noise is not None and noise.pairing_helps is False


def test_nothing_to_say_without_repeated_runs_or_with_a_non_positive_value() -> None:
    assert noise_of([("A", 1.0), ("B", 2.0)]) is None
    assert noise_of([("A", 1.0), ("A", 0.0), ("B", 2.0), ("B", 2.0)]) is None


def test_the_trial_window_scales_noise_as_one_over_root_window() -> None:
    short = noise_of(_points(), window_s=20)
    long = noise_of(_points(), window_s=900)
    assert short is not None and long is not None
    both = search_noise(short, long)
    assert both is not None
    window = window_for(short, TRIAL_SD_FOR_LEAD_PCT)
    assert both.trial_window_s == pytest.approx(window)
    assert short.sd_pct * math.sqrt(20 / window) == pytest.approx(TRIAL_SD_FOR_LEAD_PCT)
    # two single trials 5% apart: their difference's 95% interval is +-5% at that noise
    assert 1.959964 * TRIAL_SD_FOR_LEAD_PCT * math.sqrt(2) == pytest.approx(5.0, rel=1e-5)
    assert both.long_predicted_sd_pct == pytest.approx(short.sd_pct * math.sqrt(20 / 900))
    assert search_noise(None, None) is None
