"""The alternating design: both loads at once, taking turns of one second.

The turns' order and rounding are checked on their own; the switching on two real
processes that write down when they ran; and one real comparison at tiny scale, whose
every turn is recomputed from the sides' per-second files, whose pausing is checked
against the per-transaction logs (a side's transactions end in its own seconds), and
whose interval is recomputed by hand.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pgdyno.compare import alternate
from pgdyno.compare.alternate import (
    Turns,
    lead_seconds,
    pair_values,
    pairs_in,
    turn_order,
    turns_of,
)
from pgdyno.compare.blocks import choose_design
from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.workloads import registry
from tests.conftest import postgres_processes

PGDYNO = [sys.executable, "-m", "pgdyno"]


def test_turns_start_with_an_unmeasured_lead_then_pairs_in_balanced_quads() -> None:
    for seed in range(20):
        order = turn_order(2, 8, random.Random(seed))
        lead, measured = order[:2], order[2:]
        assert sorted(lead) == ["A", "B"]
        assert len(measured) == 16
        pairs = ["".join(measured[i:i + 2]) for i in range(0, 16, 2)]
        assert all(p in ("AB", "BA") for p in pairs)
        # Every quad holds one pair of each order: neither side always runs first.
        assert all(sorted(pairs[i:i + 2]) == ["AB", "BA"] for i in range(0, 8, 2))
    orders = {tuple(turn_order(1, 8, random.Random(s))) for s in range(20)}
    assert len(orders) > 5  # drawn, not fixed


def test_a_block_holds_whole_quads_after_its_lead() -> None:
    assert lead_seconds(0) == 1 and lead_seconds(3) == 3
    assert pairs_in(1, 60) == 30  # 60 measured seconds: 30 pairs
    assert pairs_in(1, 9) == 4  # 9 s: 4 pairs (8 s), the ninth unmeasured
    assert pairs_in(0, 8) == 2  # 7 s after the 1 s lead: 3 pairs, rounded to a quad
    assert pairs_in(2, 2) == 0


def test_each_turn_is_its_sides_second_and_a_missed_switch_or_stall_has_no_figure() -> None:
    order = ["A", "B", "A", "B", "B", "A", "A", "B", "B", "A"]  # lead of 2, 4 pairs
    a = [float(100 + s) for s in range(10)]
    b = [float(200 + s) for s in range(10)]
    b[8] = 0.0  # a second in which B finished nothing
    turns = turns_of(3, 11, order, 2, {"A": a, "B": b}, missed={5})
    assert [(t.pair, t.side, t.second, t.position) for t in turns] == [
        (11, "A", 2, 0), (11, "B", 3, 1), (12, "B", 4, 0), (12, "A", 5, 1),
        (13, "A", 6, 0), (13, "B", 7, 1), (14, "B", 8, 0), (14, "A", 9, 1)]
    assert all(t.block == 3 for t in turns)
    got = {t.second: t.value for t in turns}
    assert got == {2: 102.0, 3: 203.0, 4: 204.0, 5: None, 6: 106.0, 7: 207.0, 8: None,
                   9: 109.0}
    xa, xb, a_first = pair_values(turns)
    assert xa[0] == 102.0 and xb[0] == 203.0 and a_first == [True, False, True, False]
    assert math.isnan(xa[1]) and math.isnan(xb[3])


_CHILD = """
import sys, time
out = open(sys.argv[1], "w", buffering=1)
while True:
    out.write(f"{time.time():.4f}\\n")
    time.sleep(0.005)
"""


def test_the_switches_stop_one_process_group_and_continue_the_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real processes that write the time every 5 ms: each writes only in its own
    turns, and both run again once the turns are over. Turns of a quarter second: the same
    switches as a run's one-second turns, in a quarter of the time."""
    turn = 0.25
    monkeypatch.setattr(alternate, "TURN_S", turn)
    logs = {side: tmp_path / f"{side}.txt" for side in "AB"}
    procs = {side: subprocess.Popen([sys.executable, "-c", _CHILD, str(path)],
                                    start_new_session=True) for side, path in logs.items()}
    try:
        time.sleep(0.3)
        order = turn_order(1, 2, random.Random(5))  # a turn's lead + a quad of turns
        start = time.time() + 0.2
        turns = Turns(start, order, lambda side: procs[side].pid, lambda t: time.sleep(t))
        turns.run()
        time.sleep(0.3)
        assert all(p.poll() is None for p in procs.values())
    finally:
        for p in procs.values():
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    end = start + len(order) * turn
    assert turns.missed == [] and max(turns.late_ms) < 50
    # A side runs on past a switch until its stop lands: the switch's lateness as
    # recorded, plus a few ms for the signal to reach a process on the other core.
    slack = max(turns.late_ms) / 1000 + 0.005
    for side, path in logs.items():
        stamps = [float(line) for line in path.read_text().split()]
        inside = [t for t in stamps if start + 0.05 < t < end - 0.05]
        clear = [t for t in inside if (t - start) % turn > slack]
        own = {int((t - start) / turn) for t in clear}
        # Stamps only in the side's own turns, once each switch has landed.
        assert own == {s for s, who in enumerate(order) if who == side}, side
        assert len(inside) > 60 * turn * len(own)  # it ran through each of its turns
        assert any(t > end + 0.1 for t in stamps)  # continued at the end
    assert all(p.returncode == -signal.SIGKILL for p in procs.values())


def test_the_design_is_refused_in_one_line_where_the_loads_cannot_take_turns(
        tmp_path: Path) -> None:
    opts = build_options("tpcb", workdir=tmp_path, results_dir=tmp_path, clients="4",
                         duration=30, warmup=1)
    tpcb, tprocc = registry.get("tpcb"), registry.get("tprocc")
    assert tpcb.turn_blocker(opts) == ""
    assert choose_design("alternating", opts, True, 10**8, 2**34,
                         turn_blocker=tpcb.turn_blocker(opts)) == ("alternating", "asked for")
    assert registry.get("fio").turn_blocker(opts).endswith("cannot be paused and counted "
                                                           "second by second")
    with pytest.raises(UsageError, match="compares the headline only"):
        choose_design("alternating", opts, True, 10**8, 2**34)  # a caller offering none
    for option, words in ((dict(tx_logs="sample:0.1"), "--tx-logs sample"),
                          (dict(rate=500), "--rate: a paused pgbench falls behind"),
                          (dict(duration=2), "no quad of turns")):
        other = build_options("tpcb", workdir=tmp_path, results_dir=tmp_path, clients="4",
                              **{"duration": 30, "warmup": 1, **option})
        with pytest.raises(UsageError, match=words):
            choose_design("alternating", other, True, 10**8, 2**34,
                          turn_blocker=tpcb.turn_blocker(other))
        assert choose_design("auto", other, True, 10**8, 2**34,
                             turn_blocker=tpcb.turn_blocker(other))[0] != "alternating"
    paced = build_options("tprocc", workdir=tmp_path, results_dir=tmp_path, clients="10",
                          duration=30, warmup=1, keying_thinking=True)
    assert "keying and think times pace the terminals" in tprocc.turn_blocker(paced)
    done = subprocess.run([*PGDYNO, "compare", "cpu", "--baseline", "default", "--candidate",
                           "default", "--design", "alternating", "--results-dir",
                           str(tmp_path), "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# ----- one real comparison ----------------------------------------------------------------

def _seconds_ok(run_dir: Path, iteration: int) -> dict[int, int]:
    path = run_dir / "raw" / "pgbench" / f"c2-i{iteration}" / "seconds.csv"
    out: dict[int, int] = {}
    with path.open() as fh:
        for row in csv.DictReader(fh):
            out[int(row["second"])] = out.get(int(row["second"]), 0) + int(row["ok"])
    return out


def _tx_end_seconds(run_dir: Path, iteration: int, origin: float) -> list[int]:
    """The second (from the origin) in which each logged transaction ended."""
    out = []
    for path in (run_dir / "raw" / "pgbench" / f"c2-i{iteration}").glob("tx.*.gz"):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                f = line.split()
                out.append(math.floor(int(f[4]) + int(f[5]) / 1e6 - origin))
    return out


@pytest.fixture(scope="module")
def alternating_aa(tmp_path_factory: pytest.TempPathFactory, workdir: Path) -> dict:
    tmp = tmp_path_factory.mktemp("alternating")
    results, out = tmp / "results", tmp / "cmp"
    before = [p.name for p in workdir.iterdir() if p.name.startswith("compare-")]
    done = subprocess.run(
        [*PGDYNO, "compare", "tpcb", "--baseline", "default", "--candidate", "default",
         "--design", "alternating", "--scale", "1", "--clients", "2", "--duration", "9",
         "--warmup", "1", "--pairs", "1", "--order-seed", "7", "--no-telemetry",
         "--results-dir", str(results), "--workdir", str(workdir), "--out", str(out)],
        capture_output=True, text=True, timeout=400)
    return {"done": done, "out": out, "workdir": workdir, "before": before}


@pytest.mark.server
def test_every_turn_is_its_sides_per_second_count_and_the_interval_recomputes(
        alternating_aa: dict) -> None:
    done, out = alternating_aa["done"], alternating_aa["out"]
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    cmp = json.loads((out / "compare.json").read_text())
    design, rec = cmp["design"], cmp["design"]["blocks"]
    assert design["design"] == "alternating" and rec["schema_version"] == 3
    assert rec["orders"] == ["A/B"] and rec["missed_switches"] == 0
    assert max(rec["switch_late_ms"]) < 100
    turns = rec["turns"]
    assert len(turns) == 2 * pairs_in(1, 9) == design["pairs"] * 2 == 8
    runs = {"A": Path(rec["baseline_run"]), "B": Path(rec["candidate_run"])}
    seconds = {(side, 1): _seconds_ok(run, 1) for side, run in runs.items()}
    for t in turns:  # each turn: its side's transactions ended in that second
        assert t["value"] == seconds[(t["side"], t["block"])].get(t["second"], 0), t
    a, b, _ = pair_values([_turn(t) for t in turns])
    d = np.log(np.array(b)) - np.log(np.array(a))
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    row = next(m for m in cmp["metrics"] if m["metric"] == "tps")
    assert row["sample"] == "second" and row["baseline_n"] == len(a)
    if row["method"] == "paired-hl":
        assert row["change_pct"] == pytest.approx(100 * math.expm1(np.median(walsh)),
                                                  abs=1e-6)
    else:
        assert row["change_pct"] == pytest.approx(100 * math.expm1(d.mean()), abs=1e-6)
    assert row["ci_low_pct"] < row["change_pct"] < row["ci_high_pct"]
    # Only the headline is compared: the runs' latencies include the pauses.
    assert [m["metric"] for m in cmp["metrics"]] == ["tps"]
    md = (out / "compare.md").read_text()
    assert "Design: alternating (asked for)" in md
    assert "every second one side's load generator was stopped" in md
    assert "Each value is one second of one side's load" in md
    # The turns are the picture; the runs' timelines (half pauses) and latency curves are not.
    assert (out / "plots" / "turns.png").stat().st_size > 10_000
    assert not (out / "plots" / "percentile_curves.png").exists()
    assert "![Each side's turns and each pair's ratio](plots/turns.png)" in md


@pytest.mark.server
def test_a_paused_side_finishes_nothing_in_the_other_sides_seconds(
        alternating_aa: dict) -> None:
    """The oracle of the pausing: pgbench's own per-transaction logs. In the measured
    seconds, each side's transactions end in its own turns (those in flight at a switch
    finish the moment it continues, within its turn)."""
    cmp = json.loads((alternating_aa["out"] / "compare.json").read_text())
    rec = cmp["design"]["blocks"]
    runs = {"A": Path(rec["baseline_run"]), "B": Path(rec["candidate_run"])}
    for side, run in runs.items():
        records = json.loads((run / "raw" / "run.json").read_text())["records"]
        for record in records:
            block = record["iteration"]
            own = {t["second"] for t in rec["turns"] if t["block"] == block
                   and t["side"] == side}
            other = {t["second"] for t in rec["turns"] if t["block"] == block
                     and t["side"] != side}
            ends = _tx_end_seconds(run, block, record["origin_epoch"])
            in_own = sum(1 for s in ends if s in own)
            in_other = sum(1 for s in ends if s in other)
            assert in_own > 100 * len(own)  # it ran through its turns
            assert in_other <= 0.002 * in_own, (side, block, in_own, in_other)
    # Each side's own report says that its load took turns.
    for run in runs.values():
        assert "its load was stopped every other second" in (run / "report.md").read_text()
    # Both origins are the common start: the sides' seconds are the same seconds.
    origins = [json.loads((run / "raw" / "run.json").read_text())["records"][0]["origin_epoch"]
               for run in runs.values()]
    assert origins[0] == origins[1]


@pytest.mark.server
def test_after_the_comparison_no_server_or_cluster_is_left(alternating_aa: dict) -> None:
    workdir, before = alternating_aa["workdir"], alternating_aa["before"]
    assert [p.name for p in workdir.iterdir() if p.name.startswith("compare-")] == before
    rec = json.loads((alternating_aa["out"] / "compare.json").read_text())["design"]["blocks"]
    for side_dir in rec["side_workdirs"]:
        assert postgres_processes(side_dir) == []


def _turn(data: dict):
    from pgdyno.compare.alternate import Turn

    return Turn(**data)


@pytest.mark.server
def test_ctrl_c_during_the_turns_continues_and_stops_both_loads(tmp_path: Path,
                                                                 workdir: Path) -> None:
    """Interrupted while one side's pgbench is stopped: both loads end (a stopped process
    would not act on its SIGINT), both servers stop and the runs are kept, interrupted."""
    results = tmp_path / "results"
    before = [p.name for p in workdir.iterdir() if p.name.startswith("compare-")]
    proc = subprocess.Popen(
        [*PGDYNO, "compare", "tpcb", "--baseline", "default", "--candidate", "default",
         "--design", "alternating", "--scale", "1", "--clients", "2", "--duration", "60",
         "--warmup", "1", "--pairs", "2", "--no-telemetry", "--results-dir", str(results),
         "--workdir", str(workdir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # both loads are taking turns
            if len(list(results.glob("*/tpcb-*/raw/pgbench/c2-i1/seconds.csv"))) >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the turns did not start")
        time.sleep(1.5)  # inside the measured turns, one side stopped
        roots = [p for p in workdir.iterdir() if p.name.startswith("compare-")
                 and p.name not in before]
        assert len(roots) == 1
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole group
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not roots[0].exists() and postgres_processes(str(roots[0])) == []
    statuses = sorted(json.loads(m.read_text())["status"]
                      for m in results.glob("*/tpcb-*/manifest.json"))
    assert statuses == ["interrupted", "interrupted"]
    left = subprocess.run(["pgrep", "-f", str(roots[0])], capture_output=True, text=True)
    assert left.stdout.strip() == ""  # no pgbench of theirs, stopped or running


def test_a_record_from_before_the_turns_is_still_read(tmp_path: Path) -> None:
    """blocks.json of version 2 (no turns) and 1 (no check pairs) are read as they are; a
    newer one is refused in one line."""
    from pgdyno.compare.blocks import read_block_record

    old = {"schema_version": 2, "design": "interleaved", "why": "asked for", "seed": 3,
           "block_s": 5, "warmup_s": 1, "headline_metric": "tps", "orders": ["AB"],
           "blocks": [{"pair": 1, "side": s, "iteration": 1, "position": i,
                       "started_at": "2026-11-27T10:00:00Z", "seconds": 6.0,
                       "status": "ok", "headline": 100.0 + i, "pilot": False,
                       "check": False} for i, s in enumerate("AB")]}
    for version in (1, 2):
        path = tmp_path / f"v{version}.json"
        path.write_text(json.dumps({**old, "schema_version": version}))
        record = read_block_record(path)
        assert record.turns == [] and [b.headline for b in record.blocks] == [100.0, 101.0]
    newer = tmp_path / "v9.json"
    newer.write_text(json.dumps({**old, "schema_version": 9}))
    with pytest.raises(UsageError, match="a newer pgdyno wrote it"):
        read_block_record(newer)


@pytest.mark.server
def test_a_killed_comparison_leaves_no_stopped_load_behind(tmp_path: Path,
                                                          workdir: Path) -> None:
    """The comparison's process killed outright (kill -9) while one side's pgbench is
    stopped: each side hears of it (its parent-death signal), continues and ends its load,
    stops its server and keeps its partial run, interrupted."""
    results = tmp_path / "results"
    before = {p.name for p in workdir.iterdir() if p.name.startswith("compare-")}
    proc = subprocess.Popen(
        [*PGDYNO, "compare", "tpcb", "--baseline", "default", "--candidate", "default",
         "--design", "alternating", "--scale", "1", "--clients", "2", "--duration", "60",
         "--warmup", "1", "--pairs", "1", "--no-telemetry", "--results-dir", str(results),
         "--workdir", str(workdir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(results.glob("*/tpcb-*/raw/pgbench/c2-i1/seconds.csv"))) < 2:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the turns did not start"
            time.sleep(0.5)
        time.sleep(1.5)
        (root,) = [p for p in workdir.iterdir() if p.name.startswith("compare-")
                   and p.name not in before]
        proc.kill()  # the comparison alone: its sides are sessions of their own
        proc.wait(10)
        deadline = time.monotonic() + 60
        while postgres_processes(str(root)) or _pgbench_of(root):
            assert time.monotonic() < deadline, "a side's server or load was left running"
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
    statuses = sorted(json.loads(m.read_text())["status"]
                      for m in results.glob("*/tpcb-*/manifest.json"))
    assert statuses == ["interrupted", "interrupted"]
    shutil.rmtree(root)  # the comparison that would have removed the clusters was killed


def _pgbench_of(root: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-f", f"pgbench .*{root}"], capture_output=True,
                           text=True)
    return found.stdout.split()
