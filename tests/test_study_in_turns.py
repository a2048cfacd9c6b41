"""A study whose workload's load can be paused compares its two configs in turns of one
second: the study's verdict is the comparison's, recomputed here from the sides' own
per-second files, and each side's figure is the headline of its turns (its runs' figures
count the paused seconds too), with no latency or bottleneck verdict of its own."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from pgdyno.compare.alternate import Turn, pair_values, pairs_in
from pgdyno.study.model import StudyRecord
from tests.conftest import make_shared_dir, run_campaign
from tests.test_compare_alternating import _seconds_ok

STUDY = """
[campaign]
name = "turns"
workloads = ["tpcb"]
clients = [2]
repeat = 1
[bench]
duration = 5
warmup = 1
iterations = 1
[bench.tpcb]
scale = 1
[[config]]
label = "a"
[[config]]
label = "b"
[study]
question = "Do two identical configs differ?"
pairs = 2
"""


@pytest.fixture(scope="module")
def study(workdir: Path) -> dict:
    root = make_shared_dir("pgdyno-study-turns-")
    results, printed = run_campaign(STUDY, root, workdir, timeout=400)
    folder = results / "campaigns" / "turns" / "study"
    return {"results": results, "printed": printed, "folder": folder,
            "record": StudyRecord.load(folder),
            "blocks": json.loads((results / "campaigns" / "turns" / "blocks-tpcb"
                                  / "blocks.json").read_text())}


@pytest.mark.server
def test_auto_takes_turns_and_the_verdict_recomputes_from_the_sides_seconds(
        study: dict) -> None:
    rec = study["blocks"]
    assert rec["design"] == "alternating" and rec["missed_switches"] == 0
    turns = rec["turns"]
    assert len(turns) == 2 * 2 * pairs_in(1, 5)  # two blocks of two pairs
    runs = {"A": Path(rec["baseline_run"]), "B": Path(rec["candidate_run"])}
    counted = {(side, block): _seconds_ok(run, block) for side, run in runs.items()
               for block in (1, 2)}
    for t in turns:  # each turn is its side's transactions in that second
        assert t["value"] == counted[(t["side"], t["block"])].get(t["second"], 0), t
    a, b, _ = pair_values([Turn(**t) for t in turns])
    d = np.log(np.array(b)) - np.log(np.array(a))
    result = next(w for w in study["record"].workloads if w.workload == "tpcb")
    row = result.comparison.metric("tps")
    assert row.sample == "second" and row.baseline_n == len(a) == 4
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    by_hand = np.median(walsh) if row.method == "paired-hl" else d.mean()
    assert row.change_pct == pytest.approx(100 * math.expm1(by_hand), abs=1e-6)
    assert row.ci_low_pct < row.change_pct < row.ci_high_pct
    # Only the headline is compared: the runs' latencies hold the pauses.
    assert [m.metric for m in result.comparison.metrics] == ["tps"]


@pytest.mark.server
def test_each_side_is_the_headline_of_its_turns_without_a_verdict_of_its_own(
        study: dict) -> None:
    rec = study["blocks"]
    result = next(w for w in study["record"].workloads if w.workload == "tpcb")
    for side, key in zip(result.sides, ("A", "B"), strict=True):
        assert side.took_turns and side.bottleneck is None and side.contaminated == []
        per_block = [statistics.fmean(t["value"] for t in rec["turns"]
                                      if t["side"] == key and t["block"] == block)
                     for block in (1, 2)]
        assert [f.name for f in side.figures] == ["tps"]
        assert side.figures[0].values == pytest.approx(per_block)
        assert side.figures[0].mean == pytest.approx(statistics.fmean(per_block))
        # the run's own figure counts its paused seconds: about half the turns' rate
        run_tps = json.loads((Path(rec["baseline_run"] if key == "A" else
                                   rec["candidate_run"]) / "summary.json").read_text())
        own = statistics.fmean(it["metrics"]["tps"] for it in run_tps["iterations"])
        assert own < 0.8 * side.figures[0].mean
    assert not [f for f in study["record"].findings
                if f.kind in ("bottleneck", "latency_range")]


@pytest.mark.server
def test_the_report_says_the_loads_took_turns(study: dict) -> None:
    md = (study["folder"] / "study.md").read_text()
    assert "the two loads taking turns of one second (alternating; auto:" in md
    assert "4 pairs of neighbouring seconds in 2 blocks of 5 s" in md
    assert md.count("its load took turns of one second with the other side's") == 2
    journal = [json.loads(line) for line in (study["results"] / "campaigns" / "turns"
                                              / "journal.jsonl").read_text().splitlines()]
    design = next(e for e in journal if e.get("event") == "design")
    assert design["design"] == "alternating" and design["why"].startswith("auto:")


def _seeds(run_dir: Path) -> list[str]:
    """The --random-seed of each measured pgbench of a run, in order."""
    commands = json.loads((run_dir / "manifest.json").read_text())["commands"]
    return [word.split("=", 1)[1] for c in commands if " -T " in c
            for word in c.split() if word.startswith("--random-seed=")]


@pytest.mark.server
def test_each_blocks_two_loads_draw_from_one_seed(study: dict) -> None:
    """Common random numbers: block i of both sides runs pgbench with the comparison's
    seed + i - 1, so a pair's two loads draw the same keys and transactions."""
    rec = study["blocks"]
    a, b = (_seeds(Path(rec[key])) for key in ("baseline_run", "candidate_run"))
    assert a == b == [str(rec["seed"]), str(rec["seed"] + 1)]
    assert rec["common_seed"] == rec["seed"]
    page = (study["folder"] / "compare-tpcb" / "compare.md").read_text()
    assert (f"Both sides' pgbench drew from one seed a block ({rec['seed']} in the first, "
            "one more in each next)") in page
