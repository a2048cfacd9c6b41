"""The comparison statistics on synthetic samples with known answers (no server needed)."""

from __future__ import annotations

import math
import random

import pytest

from pgdyno.compare.settings_diff import changes_block, settings_diff
from pgdyno.compare.stats import (
    FASTER,
    HIGHER,
    LOWER,
    SAME,
    SLOWER,
    UNDETERMINED,
    estimate_change,
    t_quantile,
    welch,
)


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 1, 12.706205), (0.975, 2, 4.302653), (0.975, 4, 2.776445),
    (0.975, 10, 2.228139), (0.995, 3, 5.840909), (0.95, 30, 1.697261),
    (0.975, 1e7, 1.959964), (0.025, 5, -2.570582),
])
def test_t_quantiles_match_tables(p: float, df: float, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-6)


def test_welch_against_hand_computation() -> None:
    x, y = [10.0, 12.0, 14.0], [20.0, 21.0, 22.0, 23.0]
    diff, se, df = welch(x, y)
    vx, vy = 4.0 / 3, (5.0 / 3) / 4  # sample variances 4 and 5/3, divided by n
    assert diff == pytest.approx(21.5 - 12.0)
    assert se == pytest.approx(math.sqrt(vx + vy))
    assert df == pytest.approx((vx + vy) ** 2 / (vx**2 / 2 + vy**2 / 3))


def test_known_ratio_interval() -> None:
    # logs of A: ln 100 ± 0.01, of B: ln 120 ± 0.01 (sd 0.01, n 3 each): ratio exactly 1.2
    a = [100 * math.exp(d) for d in (-0.01, 0.0, 0.01)]
    b = [120 * math.exp(d) for d in (-0.01, 0.0, 0.01)]
    est = estimate_change(a, b)
    se = math.sqrt(2 * 0.01**2 / 3)
    t = t_quantile(0.975, 4.0)  # equal variances and sizes: Welch df = 2n - 2
    assert est.df == pytest.approx(4.0)
    assert est.change_pct == pytest.approx(20.0)
    assert est.low_pct == pytest.approx(100 * (1.2 * math.exp(-t * se) - 1))
    assert est.high_pct == pytest.approx(100 * (1.2 * math.exp(t * se) - 1))
    assert est.verdict == FASTER
    assert est.noise_pct == pytest.approx(1.0)
    assert est.method == "welch-log"


def test_direction_names_the_verdict() -> None:
    low, high = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]
    assert estimate_change(low, high, direction=1).verdict == FASTER
    assert estimate_change(high, low, direction=1).verdict == SLOWER
    assert estimate_change(low, high, direction=-1).verdict == SLOWER  # latency went up
    assert estimate_change(high, low, direction=-1).verdict == FASTER
    assert estimate_change(low, high, direction=0).verdict == HIGHER
    assert estimate_change(high, low, direction=0).verdict == LOWER


def test_difference_inside_the_noise_is_not_a_difference() -> None:
    est = estimate_change([1000, 1100, 900], [1050, 1150, 950])
    assert est.verdict == SAME
    assert est.low_pct < 0 < est.high_pct
    assert est.noise_pct > 5


@pytest.mark.parametrize(("a", "b", "why"), [
    ([100.0], [120.0, 121.0], "at least 2 values"),
    ([100.0, 101.0], [], "at least 2 values"),
    ([100.0, 100.0], [120.0, 120.0], "no variation"),
    ([100.0, float("nan")], [120.0, 118.0], "at least 2 values"),
])
def test_too_little_data_is_undetermined(a: list[float], b: list[float], why: str) -> None:
    est = estimate_change(a, b)
    assert est.verdict == UNDETERMINED
    assert why in est.reason
    assert math.isnan(est.low_pct)


def test_zero_values_fall_back_to_difference_of_means() -> None:
    est = estimate_change([0.0, 1.0, 0.0, 1.0], [5.0, 6.0, 5.0, 6.0], direction=0)
    assert est.method == "welch-diff"
    assert est.verdict == HIGHER
    assert estimate_change([0.0, 0.0], [0.0, 1.0]).verdict == UNDETERMINED  # mean 0: no %


def test_false_positive_rate_is_near_the_nominal_level() -> None:
    """A/A on 2000 synthetic pairs of 3 vs 3 normal samples: about 5% called different."""
    rng = random.Random(7)
    calls = 0
    for _ in range(2000):
        a = [rng.gauss(1000, 50) for _ in range(3)]
        b = [rng.gauss(1000, 50) for _ in range(3)]
        calls += estimate_change(a, b).verdict != SAME
    assert 0.025 < calls / 2000 < 0.075


def test_power_on_a_real_shift() -> None:
    rng = random.Random(11)
    hits = sum(estimate_change([rng.gauss(1000, 30) for _ in range(4)],
                               [rng.gauss(800, 30) for _ in range(4)]).verdict == SLOWER
               for _ in range(200))
    assert hits > 190


def test_interval_covers_the_true_ratio() -> None:
    rng = random.Random(3)
    covered = 0
    for _ in range(1000):
        a = [math.exp(rng.gauss(math.log(500), 0.05)) for _ in range(4)]
        b = [math.exp(rng.gauss(math.log(550), 0.05)) for _ in range(5)]
        est = estimate_change(a, b)
        covered += est.low_pct <= 10.0 <= est.high_pct
    assert 0.92 < covered / 1000 < 0.98


def test_settings_diff_ignores_volatile_and_reports_layers() -> None:
    a = {"config": {"name": "default"}, "options": {"clients": [4], "scale": 1},
         "server": {"version": "18.1", "non_default_settings": {
             "port": "1", "synchronous_commit": "on", "work_mem": "4096 kB"}}}
    b = {"config": {"name": "tuned", "sources": {"work_mem": "tuned: 25% rule"}},
         "options": {"clients": [8], "scale": 1},
         "server": {"version": "18.1", "non_default_settings": {
             "port": "2", "synchronous_commit": "off", "shared_buffers": "1GB",
             "work_mem": "8192 kB"}}}
    changes = settings_diff(a, b)
    got = {(c.layer, c.name): (c.before, c.after) for c in changes}
    assert got == {("postgresql", "shared_buffers"): ("(default)", "1GB"),
                   ("postgresql", "synchronous_commit"): ("on", "off"),
                   ("postgresql", "work_mem"): ("4096 kB", "8192 kB"),
                   ("config", "config"): ("default", "tuned"),
                   ("benchmark", "clients"): ("4", "8")}
    work_mem = next(c for c in changes if c.name == "work_mem")
    assert work_mem.rationale == "tuned: 25% rule"
    block = changes_block(changes)
    assert "synchronous_commit = off" in block and "# Was on" in block
