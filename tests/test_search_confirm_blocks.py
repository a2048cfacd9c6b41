"""The search's final comparison in blocks: the winner meets each baseline with both
servers up at once, and its verdict is the pairs' (recomputed here from the side runs'
own per-block figures), its noise the blocks'. Resumed, a comparison already made is kept.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.results.rundir import write_json_atomic
from pgdyno.runner.options import build_options
from pgdyno.search.confirm import (
    block_budget_s,
    confirmation_design,
    load_confirmation,
    plan_confirmation,
    run_confirmation,
)
from tests.conftest import make_shared_dir, postgres_processes
from tests.test_compare_design import _by_hand, _hl_by_hand


def _options(results: Path, workdir: Path, **more):
    return build_options("tpcb", scale=1, duration=1, warmup=0, clients="2", telemetry=False,
                         results_dir=results, workdir=workdir, progress=False, **more)


def test_the_design_follows_compare_and_a_winner_with_os_settings_runs_whole_runs(
        tmp_path: Path) -> None:
    base = _options(tmp_path / "r", tmp_path / "w")
    assert confirmation_design("auto", base, False)[0] == "interleaved"  # no pilot
    assert confirmation_design("duet", base, False) == ("duet", "asked for")
    design, why = confirmation_design("auto", base, True)
    assert design == "sequential" and "changes OS settings" in why
    with pytest.raises(UsageError, match="^--compare-design interleaved: the winner changes"):
        confirmation_design("interleaved", base, True)
    cold = _options(tmp_path / "r", tmp_path / "w", cache="cold")
    assert confirmation_design("auto", cold, False)[0] == "sequential"
    # The blocks get the time the whole-run rounds would have taken (here 2 × 3 × 9 s).
    assert block_budget_s(plan_confirmation("w", "default", 3), base) == 54.0


def _block_tps(run: Path) -> dict[int, float]:
    summary = json.loads((run / "summary.json").read_text())
    return {it["iteration"]: it["metrics"]["tps"] for it in summary["iterations"]
            if it["status"] == "ok"}


@pytest.mark.server
def test_blocks_against_the_baseline_recomputed_and_kept_on_resume(workdir: Path) -> None:
    root = make_shared_dir("pgdyno-confirm-blocks-")
    search_dir = root / "search"
    search_dir.mkdir()
    base = _options(root / "results", workdir)
    # The winner is tuned, so one baseline is left: pgtune.
    conf = plan_confirmation("tuned", "tuned", pairs=1, design="interleaved",
                             why="asked for")
    path = search_dir / "confirm.json"
    before = [p.name for p in workdir.iterdir() if p.name.startswith("compare-")]

    def save(c) -> None:  # noqa: ANN001 - a Confirmation
        write_json_atomic(path, c.to_dict())

    run_confirmation(conf, base, search_dir, {"search": "t", "phase": "compare"}, None, save)
    conf = load_confirmation(path)
    assert conf is not None and conf.design == "interleaved"
    assert list(conf.blocks) == ["pgtune"] and conf.runs == {
        "tuned": [conf.blocks["pgtune"].winner_run],
        "pgtune": [conf.blocks["pgtune"].baseline_run]}
    record = json.loads((search_dir / conf.blocks["pgtune"].record).read_text())
    assert record["stop"] in ("budget spent", "precision reached")
    # The verdict: the pairs' change and interval from the side runs' own figures.
    a = _block_tps(Path(conf.blocks["pgtune"].baseline_run))
    b = _block_tps(Path(conf.blocks["pgtune"].winner_run))
    pairs = sorted(set(a) & set(b))
    assert len(pairs) >= 2
    (verdict,) = conf.verdicts
    cmp = json.loads((search_dir / "compare-vs-pgtune" / "compare.json").read_text())
    row = next(m for m in cmp["metrics"] if m["metric"] == "tps")
    by_hand = _hl_by_hand if row["method"] == "paired-hl" else _by_hand
    change, low, high = by_hand([a[i] for i in pairs], [b[i] for i in pairs],
                                cmp["design"]["level"])
    assert (verdict.change_pct, verdict.ci_low_pct, verdict.ci_high_pct) == pytest.approx(
        (change, low, high), abs=1e-6)
    assert verdict.baseline == "pgtune" and verdict.candidate == "tuned"
    assert "## How this was measured" in (search_dir / "compare-vs-pgtune" /
                                         "compare.md").read_text()
    # The noise: the pooled spread of ln(TPS) over each config's blocks.
    logs = {side: [math.log(v) for v in values.values()] for side, values in (("A", a),
                                                                              ("B", b))}
    df = sum(len(x) for x in logs.values()) - 2
    pooled = sum((x - statistics.fmean(xs)) ** 2 for xs in logs.values() for x in xs) / df
    assert conf.noise is not None and conf.noise.window_s == 1
    assert conf.noise.sd_pct == pytest.approx(100 * math.sqrt(pooled))
    assert conf.recommended == "tuned"
    # Resumed (the search run again): the comparison made is kept, nothing runs again.
    again = run_confirmation(conf, base, search_dir, {"search": "t"}, None, save)
    assert again.runs == conf.runs and again.verdicts == conf.verdicts
    # Both clusters are gone.
    made = [p for p in workdir.iterdir() if p.name.startswith("compare-")
            and p.name not in before]
    assert made == [] and postgres_processes(str(workdir / "compare-")) == []
