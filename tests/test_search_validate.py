"""The search's debt-aware objective and its long-window validation.

Pure tests of the penalty rule and the window rule; one small real search whose only
trial turns autovacuum off (so it wins the short window by construction) and whose long
validation (2 s runs, the cycle rule off) reports that config's dead tuples, as the test
reads them from the runs' raw debt.jsonl, and overturns it: its debt grows without bound.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest

from pgdyno.analysis.debt import MaintenanceDebt
from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.search.command import parse_validate_against
from pgdyno.search.objective import PENALTY_CAP, debt_penalty, penalised, run_debt
from pgdyno.search.run import SearchOptions, run_search
from pgdyno.search.study import rows
from pgdyno.search.validate_long import (
    CycleFacts,
    plan_validation,
    plan_words,
    rounds_for,
    unbounded,
    window_rule,
)
from tests.conftest import make_shared_dir

GiB = 2**30


def _debt(**kw) -> MaintenanceDebt:
    base = dict(start_epoch=0.0, end_epoch=60.0, tables=4, live_tuples_end=1000,
                dead_tuples_start=0, dead_tuples_end=0, dead_tuples_growth_per_min=0.0,
                tables_over_threshold=0, owed_dead_tuples=0, autovacuum_workers=0,
                autovacuum_backlog=0, autovacuum=True, wal_since_checkpoint_bytes=0.5 * GiB,
                max_wal_size_bytes=1.0 * GiB, checkpoint_timeout_s=300.0,
                autovacuum_naptime_s=60.0)
    return MaintenanceDebt(**(base | kw))


def test_penalty_is_zero_without_debt_monotone_and_bounded() -> None:
    assert debt_penalty(None).share == 0.0
    assert debt_penalty(_debt()).share == 0.0  # dead tuples within threshold, WAL within
    owed = debt_penalty(_debt(dead_tuples_end=300, owed_dead_tuples=200,
                              tables_over_threshold=1, autovacuum_backlog=1,
                              dead_tuples_growth_per_min=50.0))
    # (200 owed + 50/min × 1 min of growth while a table waits) / (1000 live + 300 dead)
    assert owed.vacuum_share == pytest.approx(250 / 1300)
    more = debt_penalty(_debt(dead_tuples_end=300, owed_dead_tuples=250,
                              tables_over_threshold=1, autovacuum_backlog=1,
                              dead_tuples_growth_per_min=50.0))
    assert more.share > owed.share
    wal = debt_penalty(_debt(wal_since_checkpoint_bytes=1.25 * GiB))
    assert wal.wal_share == pytest.approx(0.25) and wal.share == pytest.approx(0.25)
    huge = debt_penalty(_debt(owed_dead_tuples=10**6, dead_tuples_end=10**6,
                              wal_since_checkpoint_bytes=9 * GiB))
    assert huge.share == PENALTY_CAP
    assert penalised(1000.0, 0.2, 1) == pytest.approx(800.0)
    assert penalised(10.0, 0.2, -1) == pytest.approx(12.5)  # lower is better: a longer time


def test_window_rule_raises_to_two_cycles_of_the_slowest_config() -> None:
    quick = CycleFacts("tuned", 300.0, 4 * GiB, 15.0, wal_bytes_per_s=None)
    slow = CycleFacts("winner", 1800.0, 1 * GiB, 60.0, wal_bytes_per_s=1e6)
    # the winner's checkpoints come when max_wal_size fills: 1 GiB at 1 MB/s
    rule = window_rule(600.0, [quick, slow])
    assert rule.slowest == "winner" and rule.checkpoint_cycle_s == pytest.approx(GiB / 1e6)
    assert rule.window_s == math.ceil(2 * GiB / 1e6) and rule.raised and "raised" in rule.note
    assert rule.rounds == 4  # 600 s holds no two-cycle window: the fewest runs, raised
    assert "in 4 runs a config" in rule.note and "143 min of load a config" in rule.note
    # 4 h holds six windows of two cycles (2,147 s): six runs of 2,400 s
    long_enough = window_rule(4 * 3600.0, [quick, slow])
    assert long_enough.rounds == 6 and long_enough.window_s == 2400
    assert not long_enough.raised
    as_asked = window_rule(40.0, [quick, slow], enforce=False)
    assert as_asked.window_s == 10 and not as_asked.raised and "not seen" in as_asked.note
    assert as_asked.rounds == 4


def test_validation_rounds_grow_with_the_load_asked_from_four_to_eight() -> None:
    """An hour against a two-cycle need of 300 s: eight runs (twelve fit); of 600 s: six;
    of 900 s or more: four, the fewest, raised; unknown cycles: four."""
    assert [rounds_for(3600.0, need, True) for need in (300.0, 450.0, 600.0, 900.0, 2000.0)
            ] == [8, 8, 6, 4, 4]
    assert rounds_for(1800.0, 0.0, True) == 4 and rounds_for(1800.0, 100.0, False) == 4
    quick = CycleFacts("tuned", 200.0, 4 * GiB, 60.0)  # two cycles: 400 s
    rule = window_rule(1800.0, [quick])
    assert rule.rounds == 4 and rule.window_s == 450 and not rule.raised and rule.note == ""
    plan = plan_validation({"winner": "w.toml", "tuned": "tuned"}, 1800.0, {})
    assert plan.rule.rounds == 4 and plan.order == ["winner", "tuned", "tuned", "winner"] * 2


def test_a_default_validation_that_holds_two_windows_runs_four_and_says_so() -> None:
    """TPC-B's tuned checkpoints every 324 s: 30 minutes hold two 648 s windows, which
    would leave the paired interval one degree of freedom (t = 12.7); the validation runs
    four a config, 43 minutes, and its note and plan say so."""
    tuned = CycleFacts("tuned", 324.0, 4 * GiB, 15.0)
    rule = window_rule(1800.0, [tuned])
    assert (rule.rounds, rule.window_s, rule.raised) == (4, 648, True)
    assert rule.load_s == 4 * 648
    assert rule.note == ("each run was raised from 450 s to 648 s: 2 checkpoint cycles "
                         "(324 s each) and 2 autovacuum cycles (15 s each) of tuned, in 4 "
                         "runs a config (the fewest whose comparison decides): 43 min of "
                         "load a config where 30 min were asked")
    val = plan_validation({"winner": "w.toml", "pgtune": "pgtune", "tuned": "tuned"},
                          1800.0, {}, design="interleaved")
    val.rule = rule
    # two comparisons of four pairs, each pair two blocks of 5 s warm-up and 648 s
    assert plan_words(val, 5.0) == (
        "long validation: pgtune, tuned each against winner in 4 pairs of interleaved "
        "windows of 653 s, both servers up at once (2 comparison(s) left), about 174 min "
        "of load")
    val.rule = window_rule(4 * 3600.0, [tuned])  # room for eight: it may stop sooner
    assert val.rule.rounds == 8 and "in up to 8 pairs" in plan_words(val, 5.0)


def test_unbounded_debt() -> None:
    waiting = dict(autovacuum_backlog=2, dead_tuples_growth_per_min=100.0,
                   dead_tuples_end=500, owed_dead_tuples=300)
    assert "autovacuum is off" in unbounded(_debt(autovacuum=False, **waiting))
    assert unbounded(_debt(end_epoch=60.0, **waiting)) == ""  # less than two naptimes
    assert "not caught up" in unbounded(_debt(end_epoch=130.0, **waiting))
    assert unbounded(_debt(autovacuum=False)) == ""  # nothing over its threshold
    assert unbounded(_debt(end_epoch=130.0, autovacuum_backlog=2,
                           dead_tuples_growth_per_min=-5.0)) == ""  # being worked off
    # TPC-B's hot little tables (bench/search_goal.py's validation of the stock config):
    # two tables always over their threshold, 5,106 owed on 13.4 million live tuples.
    tpcb = dict(end_epoch=901.0, autovacuum_backlog=2, tables_over_threshold=2,
                dead_tuples_growth_per_min=1708.4, dead_tuples_end=251_992,
                owed_dead_tuples=5_106, live_tuples_end=13_432_104)
    assert unbounded(_debt(**tpcb)) == ""
    assert "not caught up" in unbounded(_debt(**(tpcb | {"owed_dead_tuples": 200_000})))
    assert "autovacuum is off" in unbounded(_debt(**(tpcb | {"autovacuum": False})))


def _dead_at_end(run_dir: str) -> int:
    """The workload's dead tuples in the run's last debt reading (of its last iteration),
    read by the test."""
    path = max(Path(run_dir).glob("raw/*/c*-i*/telemetry/debt.jsonl"),
               key=lambda p: int(p.parent.parent.name.rsplit("-i", 1)[1]))
    last = [json.loads(line) for line in path.read_text().splitlines()][-1]
    assert last.get("final") is True
    return sum(t["n_dead_tup"] for t in last["tables"]
               if t["schemaname"].startswith("pgdyno_"))


@pytest.mark.server
def test_long_validation_overturns_a_winner_that_defers_autovacuum(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-search-validate-")
    bench = build_options("tpcb", scale=1, duration=2, warmup=1, iterations=1, clients="2",
                          results_dir=results, workdir=workdir, progress=False)
    outcome = run_search(SearchOptions(
        bench=bench, budget=1, baselines=(), top=1, reruns=0, compare_pairs=0, name="v",
        knobs=("shared_buffers",), fixes=("autovacuum=off",), validate_s=8.0,
        validate_cycles=False, validate_against=("tuned",), show_progress=False))
    search_dir = outcome.search_dir
    val = json.loads((search_dir / "validate.json").read_text())
    winner = next(iter(val["sides"]))
    # Both servers fit: tuned meets the winner in 4 pairs of interleaved 2 s windows.
    assert val["rule"]["window_s"] == 2 and val["rule"]["rounds"] == 4
    assert val["design"] == "interleaved" and val["order"] == [] and list(val["blocks"]) == [
        "tuned"]
    record = json.loads((search_dir / val["blocks"]["tuned"]["record"]).read_text())
    assert sorted(record["orders"]) == ["AB", "AB", "BA", "BA"] and record["block_s"] == 2
    assert set(val["sides"]) == {winner, "tuned"}
    assert "trial 0" in winner and outcome.winner_label == "trial 0"
    results_by = {r["label"]: r for r in val["results"]}
    won = results_by[winner]
    # its long-window dead tuples, as the last run's raw readings give them
    assert won["debt"]["dead_tuples_end"] == _dead_at_end(val["runs"][winner][-1])
    assert won["debt"]["autovacuum"] is False and won["debt"]["autovacuum_backlog"] > 0
    assert "autovacuum is off" in won["unbounded"]
    assert val["holds"] is False and val["recommended"] != winner
    assert "does not hold" in outcome.recommendation
    report = (search_dir / "report.md").read_text()
    assert "Long-window validation" in report and "does not hold" in report
    assert "Each baseline met the winner in 4 pairs of 2 s windows, both servers up" in report
    assert (search_dir / "plots" / "validation.png").stat().st_size > 0
    # the long windows' noise, recomputed from their own TPS (two configs, four each)
    logs = {label: [math.log(it["metrics"]["tps"]) for p in paths for it in json.loads(
        (Path(p) / "summary.json").read_text())["iterations"]]
        for label, paths in val["runs"].items()}
    assert sorted(len(xs) for xs in logs.values()) == [4, 4]
    pooled = sum((x - sum(xs) / len(xs)) ** 2 for xs in logs.values() for x in xs) / 6
    assert val["noise"]["df"] == 6 and val["noise"]["window_s"] == 2
    assert val["noise"]["sd_pct"] == pytest.approx(100 * math.sqrt(pooled))
    assert "## Noise and resolution" in report and "| Long validation | 2 |" in report

    # the trial's figure: its run's TPS charged by the rule, recomputed here
    study = optuna.load_study(study_name="search",
                              storage=f"sqlite:///{search_dir / 'study.db'}")
    trial = rows(study)[0]
    summary = json.loads((Path(trial.run_dir) / "summary.json").read_text())
    tps = summary["iterations"][0]["metrics"]["tps"]
    debt = run_debt(trial.run_dir)
    assert debt is not None and debt.dead_tuples_end == _dead_at_end(trial.run_dir)
    rows_end = debt.live_tuples_end + debt.dead_tuples_end
    minutes = (debt.end_epoch - debt.start_epoch) / 60
    growth = debt.dead_tuples_growth_per_min * minutes if debt.autovacuum_backlog else 0.0
    vacuum = (debt.owed_dead_tuples + max(0.0, growth)) / rows_end
    wal = max(0.0, (debt.wal_since_checkpoint_bytes or 0) - debt.max_wal_size_bytes) \
        / debt.max_wal_size_bytes
    share = min(PENALTY_CAP, vacuum + wal)
    assert share > 0
    assert trial.value == pytest.approx(tps * (1 - share))


def test_validate_against_names_the_baselines_and_always_keeps_tuned() -> None:
    assert parse_validate_against("tuned") == ("tuned",)
    assert parse_validate_against(" pgtune , tuned ") == ("pgtune", "tuned")
    assert parse_validate_against("default") == ("default", "tuned")
    with pytest.raises(UsageError, match="accepted: one or more of default, pgtune, tuned"):
        parse_validate_against("tuned,fast")
