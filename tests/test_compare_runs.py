"""Compare on a real server: A/A gives a well-formed interval, synchronous_commit=on is slower.

One interleaved session (A B B A, two runs per side, two iterations each) serves every test:
A is simple-update with synchronous_commit=off (and maintenance_work_mem=96MB, which the
load never uses, for a setting with a unit), B the stock settings, 4 clients.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pgdyno.compare.core import compare_runs
from pgdyno.compare.interleave import Side, abba_order, run_interleaved
from pgdyno.compare.model import SCHEMA_VERSION
from pgdyno.compare.runs import load_run
from pgdyno.compare.stats import SAME, SLOWER, verdict_for
from pgdyno.runner.options import build_options
from tests.answer import markdown_table
from tests.conftest import make_shared_dir, postgres_processes
from tests.settings_text import recorded, stock


# The tests that take this fixture carry the server mark: it runs four benches.
@pytest.fixture(scope="module")
def session(workdir: Path) -> tuple[Path, list[Path], list[Path]]:
    results = make_shared_dir("pgdyno-compare-")
    # No warm-up: synchronous_commit's effect dwarfs a first second's ramp, and the other
    # checks are on what the runs recorded.
    base = build_options("simple-update", clients="4", iterations=2, duration=2, warmup=0,
                         scale=1, results_dir=results, progress=False, telemetry=False,
                         context="cmp--simple-update", workdir=workdir)
    async_side = Side("async", sets=("synchronous_commit=off", "maintenance_work_mem=96MB"))
    done = run_interleaved(base, async_side, Side("stock"), pairs=2, console=Console(quiet=True))
    assert not done.failed
    assert len(done.baseline) == len(done.candidate) == 2
    return results, done.baseline, done.candidate


def test_abba_order() -> None:
    assert abba_order(3) == ["A", "B", "B", "A", "A", "B"]


@pytest.mark.server
def test_runs_ran_in_abba_order(session) -> None:
    _, a, b = session
    roles = {p: json.loads((p / "manifest.json").read_text())["role"] for p in a + b}
    order = sorted(roles, key=lambda p: roles[p]["order"])
    assert [roles[p]["compare_side"] for p in order] == ["A", "B", "B", "A"]


@pytest.mark.server
def test_same_config_twice_gives_an_interval_and_its_verdict(session) -> None:
    """A/A: only what holds every time is asserted.

    Whether the 95% interval of two runs of one config contains 0 is chance: 5% of A/A pairs
    exclude it by design, so "no significant difference" here would fail one run in twenty.
    That rate is checked with a fixed seed in test_compare_stats; here the interval must be
    well formed, the verdict must be the one it implies, and identical samples on both sides
    must give an interval around 0.
    """
    _, a, _ = session
    first, second = load_run(a[0]), load_run(a[1])
    cmp = compare_runs([first], [second])
    tps = cmp.metric("tps", 4)
    assert tps.baseline_n == tps.candidate_n == 2
    assert math.isfinite(tps.ci_low_pct) and math.isfinite(tps.ci_high_pct), tps
    assert tps.ci_low_pct <= tps.change_pct <= tps.ci_high_pct
    assert tps.verdict == verdict_for(tps.ci_low_pct, tps.ci_high_pct, tps.direction), tps
    assert not [c for c in cmp.changes if c.layer == "postgresql"]
    itself = compare_runs([first], [first]).metric("tps", 4)
    assert itself.change_pct == pytest.approx(0.0, abs=1e-9)
    assert itself.ci_low_pct < 0 < itself.ci_high_pct and itself.verdict == SAME, itself


@pytest.mark.server
def test_synchronous_commit_on_is_slower(session) -> None:
    _, a, b = session
    cmp = compare_runs([load_run(p) for p in a], [load_run(p) for p in b])
    tps = cmp.metric("tps", 4)
    assert tps.baseline_n == tps.candidate_n == 4
    assert tps.verdict == SLOWER, tps
    assert tps.ci_high_pct < 0, "the interval excludes 0"
    assert tps.ci_low_pct <= tps.change_pct <= tps.ci_high_pct
    sync = [c for c in cmp.changes if c.name == "synchronous_commit"]
    assert sync and sync[0].before == "off" and sync[0].after == "on (stock)"
    # each sample is an iteration's tps_mean from summary.json (traceable)
    recorded = sorted(it["tps_mean"] for p in a
                      for it in json.loads((p / "summary.json").read_text())["iterations"])
    assert sorted(tps.baseline_values) == pytest.approx(recorded)


@pytest.mark.server
def test_compare_cli_writes_report_with_changes_first(session, server) -> None:
    import typer

    from pgdyno.cli import compare_cmds

    results, a, b = session
    app = typer.Typer()
    compare_cmds.register(app)
    out = results / "cmp-out"
    res = CliRunner().invoke(app, ["compare", f"{a[0]},{a[1]}", f"{b[0]},{b[1]}",
                                   "--results-dir", str(results), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "slower" in res.output
    md = (out / "compare.md").read_text()
    assert md.index("What changed") < md.index("Verdict") < md.index("Metrics")
    # Settings in natural units, the stock value named: A's value as its
    # server recorded it in pg_settings, the stock one from a live server's boot_val, both
    # read by the test's own converter.
    recorded_a = json.loads((a[0] / "manifest.json").read_text())["server"][
        "non_default_settings"]
    conninfo = server.admin_connection().conninfo()
    mwm_a, mwm_stock = recorded(recorded_a["maintenance_work_mem"]), \
        stock(conninfo, "maintenance_work_mem")
    assert mwm_a == "96 MB" and mwm_stock != mwm_a
    sync_stock = stock(conninfo, "synchronous_commit")
    lines = md.splitlines()
    assert f"maintenance_work_mem: {mwm_a} → {mwm_stock} (stock)" in lines
    assert f"synchronous_commit: off → {sync_stock} (stock)" in lines
    rows = markdown_table(md, "| Layer | Setting | A | B |")
    assert ["postgresql", "maintenance_work_mem", mwm_a, f"{mwm_stock} (stock)", ""] in rows
    assert "(default)" not in md
    # The run report tables each setting beside its stock value.
    report_rows = markdown_table((a[0] / "report.md").read_text(),
                                 "| Setting | Stock | Value | Source / rationale |")
    assert ["maintenance_work_mem", mwm_stock, mwm_a] in [r[:3] for r in report_rows]
    assert ["synchronous_commit", sync_stock, "off"] in [r[:3] for r in report_rows]
    for name in ("tps_timelines", "percentile_curves", "change_bars"):
        assert (out / "plots" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    saved = json.loads((out / "compare.json").read_text())
    assert saved["schema_version"] == SCHEMA_VERSION
    assert any(m["metric"] == "latency_p99_ms" for m in saved["metrics"])
    assert "<img" in (out / "compare.html").read_text()


@pytest.mark.server
def test_compare_by_run_id_and_bad_input(session) -> None:
    import typer

    from pgdyno.cli import compare_cmds

    results, a, b = session
    app = typer.Typer()
    compare_cmds.register(app)
    res = CliRunner().invoke(app, ["compare", a[0].name, "nonexistent-run",
                                   "--results-dir", str(results)])
    assert res.exit_code != 0
    assert "nonexistent-run" in str(res.exception)
    assert postgres_processes(str(results)) == []
