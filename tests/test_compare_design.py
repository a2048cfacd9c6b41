"""Block designs of `pgdyno compare`: the schedule, the paired interval against one computed
here from the blocks' raw per-second files, the stopping rule's error rate on a simulated
two-level machine, and a real interleaved A/A comparison (its design and checks in
compare.json, both clusters gone afterwards, a Ctrl-C that stops both servers)."""

from __future__ import annotations

import csv
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pgdyno.analysis.tdist import t_quantile
from pgdyno.compare.blocks import (
    DUET,
    DUET_CHECK_EVERY,
    INTERLEAVED,
    BlockPlan,
    Stopper,
    choose_design,
    no_pilot_why,
    pilot_choice,
    pilot_fits,
    schedule,
)
from pgdyno.compare.paired import (
    Spending,
    duet_check,
    long_run_variance,
    newey_west_lags,
    order_check,
    paired_change,
)
from pgdyno.errors import UsageError
from tests.conftest import postgres_processes, run_cli_here

PGDYNO = [sys.executable, "-m", "pgdyno"]


# ----- the schedule ---------------------------------------------------------------------

def test_schedule_alternates_in_balanced_randomized_quads() -> None:
    orders = schedule(40, INTERLEAVED, random.Random(1))
    assert len(orders) == 40
    for i in range(0, 40, 2):  # every quad runs each order once: both sides first as often
        assert sorted(orders[i:i + 2]) == ["AB", "BA"]
    # Each pair holds one block of each side: no side runs twice without the other between
    # more than at a quad's edge (… B | B …), never three in a row.
    blocks = "".join(orders)
    assert "AAA" not in blocks and "BBB" not in blocks
    assert orders != schedule(40, INTERLEAVED, random.Random(2))  # drawn, not fixed
    assert orders == schedule(40, INTERLEAVED, random.Random(1))  # the seed repeats it
    firsts = {tuple(schedule(4, INTERLEAVED, random.Random(s))[:2]) for s in range(50)}
    assert firsts == {("AB", "BA"), ("BA", "AB")}  # both quad orders are drawn


def test_duet_runs_both_sides_in_every_block_but_its_check_pairs() -> None:
    """Three duet pairs, then a check pair of the sides alone, whose orders are drawn in
    balanced quads as interleaved pairs are; the pilot's duet pairs have no checks."""
    orders = schedule(16, DUET, random.Random(0))
    checks = orders[DUET_CHECK_EVERY - 1::DUET_CHECK_EVERY]
    assert [o for i, o in enumerate(orders) if i % DUET_CHECK_EVERY != 3] == ["A+B"] * 12
    assert sorted(checks[:2]) == sorted(checks[2:]) == ["AB", "BA"]  # balanced
    assert schedule(5, DUET, random.Random(0), checks=False) == ["A+B"] * 5


# ----- the paired interval --------------------------------------------------------------

def _hl_by_hand(a: list[float], b: list[float], level: float) -> tuple[float, float, float]:
    """Hodges-Lehmann's ln(B/A) and its signed-rank interval, the statistic's distribution
    enumerated over every pattern of signs (small n)."""
    import itertools

    d = np.log(np.array(b)) - np.log(np.array(a))
    n = len(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    ranks = np.arange(1, n + 1)
    w = np.array([ranks[list(signs)].sum()
                  for signs in itertools.product([False, True], repeat=n)])
    tail = (1 - level) / 2
    c = 0
    while np.mean(w <= c) <= tail:  # P(W <= c) <= tail: cut one more average each side
        c += 1
    low, high = walsh[c - 1], walsh[len(walsh) - c]
    return tuple(100 * math.expm1(v) for v in (float(np.median(walsh)), low, high))


def _by_hand(a: list[float], b: list[float], level: float) -> tuple[float, float, float]:
    """mean ln(B/A), and its interval with Bartlett-weighted autocovariances."""
    d = np.log(np.array(b)) - np.log(np.array(a))
    n = len(d)
    lags = max(1, int(np.floor(4 * (n / 100) ** (2 / 9))))
    c = d - d.mean()
    lrv = c @ c / n + sum(2 * (1 - k / (lags + 1)) * (c[k:] @ c[:-k]) / n
                          for k in range(1, lags + 1))
    var = max(lrv, d.var(ddof=1))
    half = t_quantile(0.5 + level / 2, n - 1) * math.sqrt(var / n)
    return tuple(100 * math.expm1(v) for v in (d.mean(), d.mean() - half, d.mean() + half))


def test_paired_interval_matches_a_hand_computation() -> None:
    rng = np.random.default_rng(7)
    level = rng.uniform(1.0, 1.5, 14)  # the machine's speed during each pair
    a = list(1000 * level * rng.normal(1, 0.02, 14))
    b = list(1030 * level * rng.normal(1, 0.02, 14))
    b[5] *= 1.4  # a jump of the machine's speed inside one pair
    est = paired_change(a, b, level=0.95)
    assert est.change.method == "paired-hl"
    change, low, high = _hl_by_hand(a, b, 0.95)
    assert est.change.change_pct == pytest.approx(change, rel=1e-9)
    assert est.change.low_pct == pytest.approx(low, rel=1e-9)
    assert est.change.high_pct == pytest.approx(high, rel=1e-9)
    assert est.change.verdict == "faster"  # +3% with ±2% noise per block over 14 pairs
    # The machine's level (±20%) cancels in the pairs, and the pair with the jump does not
    # rule the interval: an unpaired view, or a mean, could not see 3%.
    mean_based = _by_hand(a, b, 0.95)
    assert est.half_width_pct < 3.0
    assert est.half_width_pct < (mean_based[2] - mean_based[1]) / 2


def test_correlated_pairs_fall_back_to_the_newey_west_mean() -> None:
    rng = np.random.default_rng(9)
    drift = np.cumsum(rng.normal(0, 0.02, 30))  # the ratio wanders: pairs move together
    a = list(1000 * rng.normal(1, 0.002, 30))
    b = list(np.array(a) * np.exp(drift))
    est = paired_change(a, b, level=0.95)
    assert est.autocorrelation > 1.96 / math.sqrt(30)
    assert est.change.method == "paired-log"
    change, low, high = _by_hand(a, b, 0.95)
    assert (est.change.change_pct, est.change.low_pct, est.change.high_pct) == \
        pytest.approx((change, low, high), rel=1e-9)


def test_too_few_pairs_for_the_level_fall_back_too() -> None:
    a, b = [100.0, 101.0, 99.0, 100.5], [101.0, 100.0, 100.0, 102.0]
    assert paired_change(a, b, level=0.95).change.method == "paired-log"  # 2/2^4 > 5%
    assert paired_change(a * 2, b * 2, level=0.95).change.method == "paired-hl"


def test_long_run_variance_never_below_the_plain_variance() -> None:
    alternating = [1.0, -1.0] * 10  # negative autocorrelation would shrink it
    assert long_run_variance(alternating, newey_west_lags(20)) >= np.var(alternating, ddof=1)
    trending = list(np.cumsum(np.random.default_rng(3).normal(0, 1, 40)))
    assert long_run_variance(trending, 3) > np.var(trending, ddof=1)


def test_spending_never_exceeds_alpha_and_the_last_look_spends_the_rest() -> None:
    s = Spending(alpha=0.05)
    steps = [s.look(f) for f in (0.2, 0.4, 0.4, 0.6)] + [s.look(0.7, final=True)]
    assert steps[0] == pytest.approx(0.05 * 0.04)
    assert steps[2] == 0.0  # no new fraction, nothing to spend
    assert sum(steps) == pytest.approx(0.05)
    assert s.look(1.0, final=True) == 0.0


def test_order_check_sees_a_one_sided_carry_over() -> None:
    rng = np.random.default_rng(11)
    n = 30
    first = [i % 2 == 0 for i in range(n)]
    a = list(1000 * rng.normal(1, 0.01, n))
    # B's block is 8% slower whenever it runs after A's (A leaves work behind).
    b = [x * (0.92 if f else 1.0) * rng.normal(1, 0.01) for x, f in zip(a, first, strict=True)]
    check = order_check(a, b, first)
    assert not check.holds
    # The gap is A-then-B less B-then-A: about -8.7% (ln 0.92), its interval below 0.
    assert check.gap_low_pct < -8.3 < check.gap_high_pct < 0
    assert check.ab_change_pct == pytest.approx(-8, abs=1) and abs(check.ba_change_pct) < 1
    b_even = [x * rng.normal(1, 0.01) for x in a]
    assert order_check(a, b_even, first).holds


# ----- the stopping rule on a simulated noisy machine ------------------------------------

def _two_level_machine(rng: np.random.Generator, seconds: int) -> np.ndarray:
    """Speed per second: a level of 1.0 or 1.5 (this VM's 2:3) held for ~2 minutes at a time."""
    speed = np.empty(seconds)
    level = 1.0
    for t in range(seconds):
        if rng.random() < 1 / 120:
            level = 2.5 - level
        speed[t] = level
    return speed


def _simulated_comparison(rng: np.random.Generator, plan: BlockPlan, effect: float,
                          block_s: int = 7) -> Stopper:
    speed = _two_level_machine(rng, int(plan.budget_s or 0) + 4 * block_s)
    stopper = Stopper(plan)
    orders = schedule(10_000, INTERLEAVED, random.Random(int(rng.integers(1 << 30))))
    a: list[float] = []
    b: list[float] = []
    t = 0
    for order in orders:
        if t + 2 * block_s > (plan.budget_s or 0):
            break
        got = {}
        for side in order:
            window = speed[t + 2:t + block_s]  # the block's measured seconds
            rate = 1000 * (1 + effect if side == "B" else 1.0)
            got[side] = rate * window.mean() * rng.normal(1, 0.015)
            t += block_s
        a.append(got["A"])
        b.append(got["B"])
        last = t + 2 * block_s > (plan.budget_s or 0)
        if stopper.after_pair(a, b, float(t), last=last):
            break
    stopper.end(a, b, float(t))
    return stopper


def test_stopping_on_precision_keeps_the_error_rate_on_a_two_level_machine() -> None:
    """A/A comparisons that stop as soon as the interval is within ±2% (or after 10
    simulated minutes): the reported interval misses 0 in at most about 5% of them."""
    rng = np.random.default_rng(2026)
    plan = BlockPlan(design=INTERLEAVED, pairs=4, budget_s=600.0, precision_pct=2.0)
    runs = [_simulated_comparison(rng, plan, 0.0) for _ in range(400)]
    misses = sum(1 for s in runs if not (s.looks[-1].low_pct <= 0 <= s.looks[-1].high_pct))
    assert misses / len(runs) <= 0.07, misses
    assert sum(1 for s in runs if s.stop == "precision reached") > 300  # it does stop early
    assert all(s.spending.spent <= 0.05 + 1e-12 for s in runs)


def test_a_known_difference_is_recovered_on_a_two_level_machine() -> None:
    rng = np.random.default_rng(5)
    plan = BlockPlan(design=INTERLEAVED, pairs=4, budget_s=600.0)
    runs = [_simulated_comparison(rng, plan, 0.04) for _ in range(100)]
    covered = sum(1 for s in runs if s.looks[-1].low_pct <= 4.0 <= s.looks[-1].high_pct)
    assert covered >= 90
    assert sum(1 for s in runs if s.looks[-1].low_pct > 0) >= 95  # found, with its sign
    assert np.median([s.looks[-1].high_pct - s.looks[-1].low_pct for s in runs]) < 3.0


# ----- choosing the design --------------------------------------------------------------

def test_auto_picks_interleaved_where_both_servers_fit(tmp_path: Path) -> None:
    from pgdyno.runner.options import build_options

    opts = build_options("tpcb", scale=1, clients="2", workdir=tmp_path)
    design, why = choose_design("auto", opts, True, 20 * 2**20, 8 * 2**30)
    assert design == "auto" and "a pilot of each block design" in why
    design, why = choose_design("auto", opts, True, 6 * 2**30, 8 * 2**30)
    assert design == "sequential" and "would not fit" in why
    sweep = build_options("tpcb", scale=1, clients="1,2", workdir=tmp_path)
    assert choose_design("auto", sweep, True, 2**20, 8 * 2**30)[0] == "sequential"
    with pytest.raises(UsageError, match="--design interleaved: blocks compare one client"):
        choose_design("interleaved", sweep, True, 2**20, 8 * 2**30)
    with pytest.raises(UsageError, match="accepted values are auto, alternating, interleaved"):
        choose_design("parallel", opts, True, 2**20, 8 * 2**30)
    # A load that can be paused: the loads take turns, unless the blocks are too short.
    design, why = choose_design("auto", opts, True, 20 * 2**20, 8 * 2**30, turn_blocker="")
    assert design == "alternating" and "take turns of one second" in why
    short = build_options("tpcb", scale=1, clients="2", workdir=tmp_path, duration=2,
                          warmup=1)
    assert choose_design("auto", short, True, 2**20, 8 * 2**30, turn_blocker="")[0] == "auto"


def test_the_pilot_picks_the_design_that_narrows_faster() -> None:
    # This VM's TPC-B: ±10.9% a pair in 12.4 s interleaved, ±8.2% in 6.3 s as a duet.
    design, why = pilot_choice({INTERLEAVED: (10.9, 12.4), DUET: (8.2, 6.3)})
    assert design == DUET
    assert f"about {(10.9**2 * 12.4) / (8.2**2 * 6.3):.1f}× sooner" in why
    assert pilot_choice({INTERLEAVED: (2.0, 12.0), DUET: (4.0, 6.0)})[0] == INTERLEAVED
    assert pilot_choice({INTERLEAVED: (2.0, 6.0), DUET: (2.0, 6.0)})[0] == INTERLEAVED
    assert pilot_choice({INTERLEAVED: (2.0, 6.0), DUET: (math.inf, 6.0)})[0] == INTERLEAVED


def test_the_pilot_runs_only_where_it_leaves_the_budget_most_of_its_time(
        tmp_path: Path) -> None:
    from pgdyno.runner.options import build_options

    # 5 s blocks after 1 s: 4 interleaved pairs (8 blocks) and 4 duet pairs (4 blocks) of
    # 7 s each with a block's checkpoint and cue: 84 s.
    opts = build_options("tpcb", scale=1, clients="2", duration=5, warmup=1,
                         workdir=tmp_path)
    assert pilot_fits(BlockPlan(design="auto", pairs=4), opts)  # on top of the pairs
    assert pilot_fits(BlockPlan(design="auto", pairs=4, budget_s=336), opts)
    short = BlockPlan(design="auto", pairs=4, budget_s=90)
    assert not pilot_fits(short, opts)
    assert no_pilot_why(short, opts).startswith(
        "auto: both servers fit here, but a pilot of both block designs would take about "
        "84 s of the 90 s budget (more than 25%), so interleaved without one")


@pytest.mark.parametrize("args, message, own_process", [
    (["--precision", "0%"], "--precision 0%: accepted values are a half-width in %", True),
    (["--precision", "two"], "--precision two: accepted values", False),
    (["--budget", "5s"], "--budget 5s: accepted values are a duration of at least 10 s", False),
    (["--budget", "10x"], "--budget 10x: accepted values", False),
    (["--design", "both"], "--design both: accepted values are auto, alternating, "
                           "interleaved, duet, sequential", False),
])
def test_bad_design_options_are_one_line(tmp_path: Path, args: list[str], message: str,
                                         own_process: bool) -> None:
    """One case as a user runs it, in a process of its own; the others through the same
    entry point in this process (the same exit code and stderr, without a second of
    start-up each)."""
    argv = ["compare", "tpcb", "--baseline", "default", *args, "--results-dir",
            str(tmp_path / "r"), "--workdir", str(tmp_path / "w")]
    if own_process:
        done = subprocess.run([*PGDYNO, *argv], capture_output=True, text=True, timeout=60)
    else:
        done = run_cli_here(argv, tmp_path / "w")
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists() and not (tmp_path / "w").exists()


# ----- a real interleaved comparison ----------------------------------------------------

def _block_tps(run_dir: Path, iteration: int, warmup: int, duration: int) -> float:
    """A block's TPS from its per-second file: transactions ended in the measured seconds."""
    path = run_dir / "raw" / "pgbench" / f"c2-i{iteration}" / "seconds.csv"
    with path.open() as fh:
        ok = sum(int(r["ok"]) for r in csv.DictReader(fh)
                 if warmup <= int(r["second"]) < warmup + duration)
    return ok / duration


@pytest.mark.server
def test_interleaved_aa_comparison_from_raw_files(tmp_path: Path, workdir: Path) -> None:
    results = tmp_path / "results"
    out = tmp_path / "cmp"
    before = [p.name for p in workdir.iterdir() if p.name.startswith("compare-")]
    done = subprocess.run(
        [*PGDYNO, "compare", "tpcb", "--baseline", "default", "--candidate", "default",
         "--design", "interleaved", "--scale", "1", "--clients", "2", "--duration", "1",
         "--warmup", "0", "--pairs", "6", "--order-seed", "42",
         "--no-telemetry", "--results-dir", str(results), "--workdir", str(workdir),
         "--out", str(out)], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    cmp = json.loads((out / "compare.json").read_text())
    design = cmp["design"]
    blocks = design["blocks"]
    assert design["design"] == "interleaved" and blocks["seed"] == 42
    assert blocks["orders"] == schedule(len(blocks["orders"]), INTERLEAVED, random.Random(42))
    assert blocks["stop"] == "pairs done" and len(blocks["looks"]) == 1
    pairs = design["pairs"]
    assert pairs == 6
    # The blocks ran in the order drawn: A's and B's blocks never overlapped.
    starts = sorted((b["started_at"], b["side"], b["pair"]) for b in blocks["blocks"])
    assert [s[1] for s in starts] == list("".join(blocks["orders"]))
    # Each block's TPS recomputed from the runs' raw per-second files, and the interval
    # from those values, at the level the last look spent.
    a_dir, b_dir = Path(blocks["baseline_run"]), Path(blocks["candidate_run"])
    a = [_block_tps(a_dir, i, 0, 1) for i in range(1, pairs + 1)]
    b = [_block_tps(b_dir, i, 0, 1) for i in range(1, pairs + 1)]
    level = 1 - blocks["looks"][-1]["alpha"]
    assert design["level"] == pytest.approx(0.95) == level
    row = next(m for m in cmp["metrics"] if m["metric"] == "tps")
    assert row["sample"] == "block"
    # Signed-rank unless the six pairs happened to correlate (then the marked fallback).
    by_hand = _hl_by_hand if row["method"] == "paired-hl" else _by_hand
    assert row["method"] in ("paired-hl", "paired-log")
    change, low, high = by_hand(a, b, level)
    assert row["change_pct"] == pytest.approx(change, abs=1e-6)
    assert row["ci_low_pct"] == pytest.approx(low, abs=1e-6)
    assert row["ci_high_pct"] == pytest.approx(high, abs=1e-6)
    # The checks the report states.
    assert design["order"]["ab_pairs"] + design["order"]["ba_pairs"] == pairs
    assert any(line.startswith("memory:") for line in design["shared"])
    md = (out / "compare.md").read_text()
    assert "## How this was measured" in md and "interval" in md
    # Both runs finished with exactly the blocks they ran; both clusters are gone.
    for run_dir in (a_dir, b_dir):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "ok"
        assert manifest["role"]["design"] == "interleaved"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert len(summary["iterations"]) == pairs
    assert [p.name for p in workdir.iterdir() if p.name.startswith("compare-")] == before


@pytest.mark.server
def test_ctrl_c_stops_both_servers_and_removes_their_clusters(tmp_path: Path,
                                                               workdir: Path) -> None:
    """A duet interrupted after its first blocks: both windows of each block began on one
    cue (after both CHECKPOINTs), and the Ctrl-C stops both servers, keeps both runs
    (interrupted) and removes both clusters."""
    results = tmp_path / "results"
    before = [p.name for p in workdir.iterdir() if p.name.startswith("compare-")]
    proc = subprocess.Popen(
        [*PGDYNO, "compare", "tpcb", "--baseline", "default", "--candidate", "default",
         "--design", "duet", "--scale", "1", "--clients", "2", "--duration", "3",
         "--warmup", "1", "--pairs", "20", "--no-telemetry", "--results-dir", str(results),
         "--workdir", str(workdir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # the first blocks have run on both sides
            if len(list(results.glob("*/tpcb-*/raw/pgbench/c2-i2"))) >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the blocks did not start")
        roots = [p for p in workdir.iterdir() if p.name.startswith("compare-")
                 and p.name not in before]
        assert len(roots) == 1 and len(postgres_processes(str(roots[0]))) >= 2
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole group
        _out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("pgdyno: error: comparison interrupted")
    assert not roots[0].exists()
    assert postgres_processes(str(roots[0])) == []
    statuses = sorted(json.loads(m.read_text())["status"]
                      for m in results.glob("*/tpcb-*/manifest.json"))
    assert statuses == ["interrupted", "interrupted"]
    origins = [{r["iteration"]: r["origin_epoch"] for r in json.loads(
        (run / "raw" / "run.json").read_text())["records"] if r.get("origin_epoch")}
        for run in sorted(m.parent for m in results.glob("*/tpcb-*/manifest.json"))]
    both = sorted(i for i in set(origins[0]) & set(origins[1])
                  if i % DUET_CHECK_EVERY)  # a check pair's blocks run one at a time
    assert len(both) >= 2
    assert all(abs(origins[0][i] - origins[1][i]) < 0.2 for i in both), origins


def test_an_order_effect_turns_the_headline_verdict_undetermined() -> None:
    from pgdyno.compare.core import _assumption_failed, compare_values

    rng = np.random.default_rng(11)
    first = [i % 2 == 0 for i in range(30)]
    a = list(1000 * rng.normal(1, 0.01, 30))
    b = [x * (0.92 if f else 1.0) * rng.normal(1, 0.01) for x, f in zip(a, first, strict=True)]
    rows = [compare_values(4, "tps", "tx/s", 1, a, b, paired_level=0.95)]
    assert rows[0].verdict == "slower"  # what the pairs alone would have said
    check = order_check(a, b, first)
    assert not check.holds
    notes: list[str] = []
    _assumption_failed(rows, "tps", check.words, "--design sequential", notes)
    assert rows[0].verdict == "undetermined"
    assert "the order inside a pair mattered" in rows[0].reason
    assert "--design sequential" in notes[0]


def _duet_record(rng: np.random.Generator, shared_loss: float, pairs: int = 24):
    """A duet's record on a machine whose speed jumps: B is as fast as A alone, and loses
    ``shared_loss`` of its speed when both run at once."""
    from pgdyno.compare.blocks import Block, BlockRecord

    speed = rng.choice([1.0, 1.5], size=pairs)  # one level per pair: a duet's strength
    record = BlockRecord(schema_version=2, design=DUET, why="asked for", seed=1, block_s=5,
                         warmup_s=1, headline_metric="tps")
    for pair, order in enumerate(schedule(pairs, DUET, random.Random(3)), start=1):
        record.orders.append(order)
        check = order != "A+B"
        for position, side in enumerate(["A", "B"] if order == "A+B" else order):
            loss = shared_loss if side == "B" and not check else 0.0
            value = 1000 * speed[pair - 1] * (1 - loss) * rng.normal(1, 0.01)
            record.blocks.append(Block(pair, side, pair, 0 if order == "A+B" else position,
                                       "", 5.0, "ok", float(value), check=check))
    return record


def test_a_duet_that_favours_one_side_turns_the_headline_undetermined() -> None:
    """Sharing the machine costs B 8% that it does not lose alone: the check pairs (each
    side alone) disagree with the duet pairs, and the headline says so instead of -8%; a
    duet whose sharing costs nothing passes its check."""
    from pgdyno.compare.design import _pairs

    rng = np.random.default_rng(7)
    unfair = _duet_record(rng, 0.08)
    duet, solo = _pairs(unfair)[:2], _pairs(unfair, checks=True)[:2]
    assert len(duet[0]) == 18 and len(solo[0]) == 6
    assert unfair.check_pairs() == [4, 8, 12, 16, 20, 24]
    check = duet_check(duet, solo)
    assert not check.holds and check.duet_change_pct == pytest.approx(-8, abs=1.5)
    assert check.solo_change_pct == pytest.approx(0, abs=1.5)
    assert "sharing the machine changed the comparison" in check.words
    even = _duet_record(rng, 0.0)
    fair = duet_check(_pairs(even)[:2], _pairs(even, checks=True)[:2])
    assert fair.holds and "made no significant difference" in fair.words
