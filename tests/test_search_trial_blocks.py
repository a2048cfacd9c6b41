"""The search's trials measured against the incumbent in blocks or in turns: which design
runs where, the reference each trial meets, how a trial's pairs are read, and a real search
in turns whose trial figures are recomputed here from the side runs' per-second files."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.search.trial_blocks import reference_for, sides_root, trial_design
from tests.conftest import make_shared_dir, postgres_processes


def _options(results: Path, workdir: Path, **more):
    given = {"scale": 1, "duration": 1, "warmup": 0, "iterations": 1, "clients": "2",
             "telemetry": False,
             **more}
    return build_options("tpcb", results_dir=results, workdir=workdir, progress=False,
                         **given)


def test_auto_runs_trials_in_blocks_where_both_servers_fit(tmp_path: Path) -> None:
    base = _options(tmp_path / "r", tmp_path / "w", duration=30, warmup=10)
    design = trial_design("auto", base, os_changes=False, shared=False)
    # One block of turns, 60 s after 2 s: the trial config measured 30 s, as in a run.
    assert (design.design, design.pairs, design.block_s, design.warmup_s) == (
        "alternating", 1, 60, 2)
    assert "taking turns of one second (30 pairs" in design.sentence()
    # Where the load cannot take turns (a paced run), blocks of 10 s after 2 s.
    paced = _options(tmp_path / "r", tmp_path / "w", duration=30, warmup=10, rate=200)
    design = trial_design("auto", paced, os_changes=False, shared=False)
    assert (design.design, design.pairs, design.block_s, design.warmup_s) == (
        "interleaved", 3, 10, 2)
    assert "against the incumbent" in design.sentence()
    with pytest.raises(UsageError, match=r"^--trial-design alternating: --rate: .*accepted: "
                                         "auto, interleaved or runs$"):
        trial_design("alternating", paced, os_changes=False, shared=False)
    assert trial_design("interleaved", base, os_changes=False, shared=False).why == "asked for"
    assert trial_design("runs", base, os_changes=False, shared=False).design == "runs"


@pytest.mark.parametrize(("os_changes", "shared", "more", "words"), [
    (True, False, {}, "OS knobs are searched"),
    (False, True, {}, "several workers share the study"),
    (False, False, {"cache": "cold"}, "--cache cold drops the OS page cache"),
])
def test_where_blocks_cannot_serve_auto_runs_trials_and_says_why(
        tmp_path: Path, os_changes: bool, shared: bool, more: dict, words: str) -> None:
    base = _options(tmp_path / "r", tmp_path / "w", **more)
    design = trial_design("auto", base, os_changes=os_changes, shared=shared)
    assert design.design == "runs" and words in design.why
    assert design.why.endswith("so each trial is one run")
    with pytest.raises(UsageError, match=r"^--trial-design interleaved: .*accepted: auto or runs$"
                       if os_changes or shared else r"^--trial-design interleaved: .*"
                       "use --trial-design runs$"):
        trial_design("interleaved", base, os_changes=os_changes, shared=shared)


def test_an_unknown_trial_design_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="^--trial-design duet: accepted values are auto, "
                                         "alternating, interleaved, runs$"):
        trial_design("duet", _options(tmp_path / "r", tmp_path / "w"), os_changes=False,
                     shared=False)


@dataclass
class _Row:
    number: int
    status: str
    value: float | None
    raw_value: float | None
    label: str = ""
    config: str = ""


def test_the_reference_is_the_best_trial_with_a_figure_and_never_the_one_measured() -> None:
    rows = [_Row(0, "ok", 100.0, 100.0), _Row(1, "ok", 130.0, 140.0),
            _Row(2, "failed", None, None), _Row(3, "ok", 120.0, 120.0),
            _Row(4, "ok", 150.0, None)]  # recorded before trials kept their raw figure
    assert reference_for(rows, 1).number == 1
    assert reference_for(rows, 1).raw_value == 140.0  # the scale is the raw figure
    assert reference_for(rows, 1, leaving_out=1).number == 3
    assert reference_for(rows, -1).number == 0  # lower is better
    assert reference_for([], 1) is None


def _block_tps(run: Path) -> dict[int, float]:
    summary = json.loads((run / "summary.json").read_text())
    return {it["iteration"]: it["metrics"]["tps"] for it in summary["iterations"]
            if it["status"] == "ok"}


def test_a_search_resumed_with_another_trial_design_is_refused(tmp_path: Path) -> None:
    from pgdyno.config.detect import detect_profile
    from pgdyno.config.setting_specs import snapshot
    from pgdyno.search.run import SearchOptions, _open_record
    from pgdyno.search.space import build_space
    from pgdyno.search.trial_blocks import TrialDesign
    from pgdyno.workloads.base import headline_metric
    from pgdyno.workloads.registry import get

    bench = _options(tmp_path / "r", tmp_path / "w")
    space = build_space(detect_profile(), snapshot(18), clients=1, write_heavy=True,
                        knobs=["work_mem"])
    spec = headline_metric(get("tpcb").metrics)
    opts = SearchOptions(bench=bench, budget=2)
    search_dir = tmp_path / "s"
    runs = TrialDesign("runs", "asked for")
    assert _open_record(search_dir, "s", bench, space, spec, opts, runs).trial_design == "runs"
    record = json.loads((search_dir / "search.json").read_text())
    with pytest.raises(UsageError, match=r"^search s: its trials were measured as runs .*"
                                         r"accepted: --trial-design runs, or a new "
                                         r"--search-name$"):
        _open_record(search_dir, "s", bench, space, spec, opts,
                     TrialDesign("interleaved", "asked for", 2, 1, 0))
    # A record from before trials could run in blocks resumes as runs.
    del record["trial_design"]
    (search_dir / "search.json").write_text(json.dumps(record))
    assert _open_record(search_dir, "s", bench, space, spec, opts, runs).trial_design == "runs"


def _turns_by_hand(record: dict) -> list[tuple[float, float]]:
    """(reference, trial) of each pair of turns, each turn read from its side run's
    per-second file: the transactions that ended in its second."""
    runs = {"A": Path(record["baseline_run"]), "B": Path(record["candidate_run"])}
    iteration = {(b["side"], b["pair"]): b["iteration"] for b in record["blocks"]}
    pairs: dict[int, dict[str, float]] = {}
    for turn in record["turns"]:
        it = iteration[(turn["side"], turn["block"])]
        path = runs[turn["side"]] / "raw" / "pgbench" / f"c2-i{it}" / "seconds.csv"
        with path.open() as fh:
            ok = sum(int(r["ok"]) for r in csv.DictReader(fh)
                     if int(r["second"]) == turn["second"])
        assert turn["value"] == ok
        pairs.setdefault(turn["pair"], {})[turn["side"]] = ok
    return [(p["A"], p["B"]) for _, p in sorted(pairs.items()) if p["A"] and p["B"]]


@pytest.mark.server
def test_a_search_in_turns_recomputed_from_the_side_runs(workdir: Path) -> None:
    from pgdyno.search.run import SearchOptions, run_search
    from pgdyno.search.study import open_or_create, own_rows

    results = make_shared_dir("pgdyno-search-turns-")
    bench = _options(results, workdir, duration=2, warmup=1)
    outcome = run_search(SearchOptions(
        bench=bench, budget=2, baselines=("default",), top=2, reruns=1, compare_pairs=0,
        name="t", knobs=("work_mem",), show_progress=False))
    search_dir = outcome.search_dir
    study, _ = open_or_create(search_dir, "maximize", 0, startup=1)
    first, trial = own_rows(study)
    # The first trial sets the scale: one run, its figure the run's own.
    assert first.against is None and first.raw_value == pytest.approx(
        _block_tps(Path(first.run_dir))[1])
    # The second is measured against it, both loads taking turns of one second.
    against = trial.against
    assert against["trial"] == first.number and against["pairs"] == 2
    record = json.loads((search_dir / against["blocks"]).read_text())
    assert record["design"] == "alternating" and record["orders"] == ["A/B"]
    assert record["candidate_run"] == trial.run_dir
    pairs = _turns_by_hand(record)
    ratio = math.exp(sum(math.log(b / a) for a, b in pairs) / len(pairs))
    assert trial.raw_value == pytest.approx(first.raw_value * ratio, rel=1e-9)
    assert trial.value == pytest.approx(trial.raw_value)  # no telemetry: no debt charged
    for run, side in ((record["baseline_run"], "A"), (record["candidate_run"], "B")):
        role = json.loads((Path(run) / "manifest.json").read_text())["role"]
        assert role["phase"] == "trial" and role["compare_side"] == side
    # Each leading candidate's re-run: in turns too, against the other trial.
    selection = json.loads((search_dir / "select.json").read_text())
    assert len(selection["candidates"]) == 2
    for cand in selection["candidates"]:
        other = trial if int(cand["key"]) == first.number else first
        rerun = json.loads((search_dir / "trials" / f"blocks-{cand['key']}-rerun-1"
                            / "blocks.json").read_text())
        assert rerun["design"] == "alternating"
        role = json.loads((Path(rerun["baseline_run"]) / "manifest.json").read_text())["role"]
        assert role["phase"] == "select" and role["compare_side"] == "A"
        assert rerun["baseline_run"] != other.run_dir  # measured again, not reused
        # In the trials' two clusters, whose datasets were built once.
        assert rerun["side_workdirs"] == record["side_workdirs"]
        assert all(str(sides_root(bench, "t")) in w for w in rerun["side_workdirs"])
        for run in (rerun["baseline_run"], rerun["candidate_run"]):
            manifest = json.loads((Path(run) / "manifest.json").read_text())
            assert manifest["dataset"]["load_record"]["reused"], run
        pairs = _turns_by_hand(rerun)
        assert cand["values"][1] == pytest.approx(other.raw_value * math.exp(
            sum(math.log(b / a) for a, b in pairs) / len(pairs)), rel=1e-9)
    report = (search_dir / "report.md").read_text()
    assert "taking turns of one second" in report and f"trial {first.number} (default)" in report
    # The trials' clusters are gone, and no server was left running.
    assert not sides_root(bench, "t").exists()
    assert not postgres_processes(str(sides_root(bench, "t")))


def test_a_trial_in_interleaved_blocks_pairs_its_blocks_by_number() -> None:
    """Where the loads cannot take turns, a trial's pairs are its blocks': each pair's
    reference and trial headline, pilot and check blocks and failed halves left out."""
    from pgdyno.compare.blocks import Block, BlockRecord
    from pgdyno.search.trial_blocks import pair_figures

    def block(pair: int, side: str, value: float | None, **more) -> Block:
        return Block(pair=pair, side=side, iteration=pair, position=0 if side == "A" else 1,
                     started_at="", seconds=6.0, status=more.pop("status", "ok"),
                     headline=value, **more)

    record = BlockRecord(schema_version=3, design="interleaved", why="", seed=1, block_s=5,
                         warmup_s=1, headline_metric="tps", blocks=[
                             block(1, "A", 100.0), block(1, "B", 110.0),
                             block(2, "B", 90.0), block(2, "A", 80.0),
                             block(3, "A", 100.0), block(3, "B", None),
                             block(4, "A", 100.0), block(4, "B", 95.0, status="failed"),
                             block(5, "A", 70.0, check=True), block(5, "B", 75.0, check=True)])
    assert pair_figures(record) == [(100.0, 110.0), (80.0, 90.0)]
