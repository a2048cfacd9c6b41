"""Long steps say what they will do, for how long and why, and keep saying they are at it.

A real campaign run whose stderr is a log (captured, not a terminal) announces its run
before it starts and prints lines while it runs and when it ends, whose figures agree with
the campaign's own journal. The search's long validation says why its runs are longer than
asked, with the cycles the test computes from the settings it gives.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from pgdyno.compare.blocks import BlockPlan
from pgdyno.options import BenchOptions
from pgdyno.runner.longstep import long_step
from pgdyno.search.validate_long import CycleFacts, window_rule, window_words
from tests.conftest import make_shared_dir, run_cli_here

CAMPAIGN = """
[campaign]
name = "heard"
workloads = ["cpu"]
clients = [1]
repeat = 1
[bench]
duration = 5
warmup = 0
iterations = 1
telemetry = false
[[config]]
label = "a"
"""
"""One five-second run of the CPU baseline (no server): long enough for a log's lines."""


@pytest.mark.server
def test_a_campaign_run_is_announced_and_heard_of_in_a_log() -> None:
    root = make_shared_dir("pgdyno-heard-")
    (root / "campaign.toml").write_text(CAMPAIGN)
    proc = run_cli_here(["campaign", str(root / "campaign.toml"), "--results-dir",
                         str(root / "results")], root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [json.loads(line) for line in next(root.glob("results/**/journal.jsonl"))
              .read_text().splitlines()]
    (end,) = [e for e in events if e["event"] == "run-end"]
    key = re.escape(end["cell"])
    lines = proc.stderr.splitlines()
    announced = [m for line in lines
                 if (m := re.fullmatch(rf"campaign run 1/1: {key}, about ([\d,]+) s", line))]
    assert len(announced) == 1, proc.stderr
    planned = int(announced[0].group(1).replace(",", ""))
    assert planned >= 5  # at least its measured window
    beats = [(float(m.group(1)), int(m.group(2)), int(m.group(3))) for line in lines
             if (m := re.fullmatch(rf"campaign run 1/1: {key}, ([\d.]+) s of about "
                                   rf"([\d,]+) s \((\d+)%\)", line))]
    assert beats, proc.stderr
    for elapsed, of, pct in beats:
        assert of == planned and abs(pct - 100 * elapsed / planned) <= 1
    assert [b[0] for b in beats] == sorted(b[0] for b in beats)
    done = [float(m.group(1)) for line in lines
            if (m := re.fullmatch(rf"campaign run 1/1: {key}, done in ([\d.]+) s", line))]
    # The journal's seconds are the run's, taken inside the step: the step's, a bit more.
    assert len(done) == 1 and end["seconds"] - 0.1 <= done[0] <= end["seconds"] + 2, (
        done, end["seconds"])
    assert beats[-1][0] <= done[0]
    said = [line for line in lines if line.startswith(f"campaign run 1/1: {end['cell']},")]
    assert said[0] == announced[0].group(0) and " done in " in said[-1]  # first and last


def test_the_long_validation_says_why_its_runs_are_longer_than_asked() -> None:
    """--validate 1m between configs whose slowest checkpoints every 900 s: four runs a
    config, each asked 15 s, raised to two 900 s checkpoint cycles."""
    facts = [CycleFacts("tuned", checkpoint_timeout_s=900, max_wal_size_bytes=2**30,
                        autovacuum_naptime_s=60),
             CycleFacts("pgtune", checkpoint_timeout_s=300, max_wal_size_bytes=2**30,
                        autovacuum_naptime_s=60)]
    rule = window_rule(60, facts)
    assert (rule.rounds, rule.window_s) == (4, 2 * 900)
    why = window_words(rule, warmup_s=10)
    assert why == ("10 s warm-up and a 1,800 s window, raised from 15 s to hold 2 checkpoint "
                   "cycles (900 s each) and 2 autovacuum cycles (60 s each) of tuned")
    out = io.StringIO()  # not a terminal, as a log is not
    console = Console(file=out, width=80)
    with long_step(console, "long validation: run 1/6, tuned", 10 + rule.window_s, why):
        pass
    assert out.getvalue().splitlines()[0] == f"long validation: run 1/6, tuned, 1,810 s ({why})"


def test_an_unchanged_window_gives_no_reason_and_one_left_short_says_so() -> None:
    facts = [CycleFacts("tuned", 300, 2**30, 60)]
    rule = window_rule(3600, facts)
    assert not rule.raised and window_words(rule, 0) == f"a {rule.window_s:,} s window"
    short = window_rule(60, facts, enforce=False)  # 15 s runs; the cycles need 2 × 300 s
    assert window_words(short, 0) == ("a 15 s window as asked, shorter than the 600 s of 2 "
                                      "checkpoint and autovacuum cycles of tuned")


def test_a_block_comparison_announces_its_budget_or_its_pairs_time() -> None:
    """A budget is said as the most it measures; without one, the pairs' blocks: two a
    pair interleaved (one side after the other), one in a duet (both sides at once)."""
    opts = BenchOptions(workload="tpcb", clients=(4,), threads=None, duration_s=10,
                        warmup_s=2, iterations=1)
    assert BlockPlan("interleaved", pairs=6, budget_s=300).measuring_time(opts) == (300, "up to ")
    assert BlockPlan("interleaved", pairs=6).measuring_time(opts) == (6 * 2 * 12, "about ")
    assert BlockPlan("duet", pairs=6).measuring_time(opts) == (6 * 12, "about ")
