"""The context report from a real campaign of three configs (one of them breaks the server),
a validation run and a scaling check: every section present, every figure traceable."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import statistics
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pgdyno.campaign.runner import run_campaign
from pgdyno.campaign.scaling import run_scaling_check
from pgdyno.campaign.spec import load_spec
from pgdyno.campaign.validation import run_validation
from pgdyno.compare.runs import read_notes
from pgdyno.units import rounded
from tests.conftest import make_shared_dir, postgres_processes, run_cli_here
from tests.settings_text import recorded, stock, with_stock

pytestmark = pytest.mark.server  # every test here starts PostgreSQL

CONTEXT = "ctx--simple-update"
CPU_CONTEXT = "ctx--cpu"
CAMPAIGN = f"""
[campaign]
name = "ctx"
context = "{CONTEXT}"
hardware = "r8g.large"
workloads = ["simple-update"]
clients = [4]
repeat = 2

[bench]
scale = 1
duration = 2
warmup = 0
iterations = 1
telemetry = false

[[config]]
label = "default"

[[config]]
label = "async"
set = ["synchronous_commit=off", "maintenance_work_mem=96MB"]

[[config]]
label = "broken"
set = ["shared_preload_libraries=pgdyno_no_such_library"]
"""
SECTIONS = ["1. Summary", "2. Configuration matrix", "3. Sizing math", "4. Benchmark journal",
            "5. Validation runs", "6. Key findings", "7. Price/performance",
            "8. Differences against another context", "9. Hardware limits",
            "10. Scaling projection", "11. Recommendations", "12. File references"]


@pytest.fixture(scope="module")
def context(workdir: Path) -> Path:
    results = make_shared_dir("pgdyno-context-")
    spec_file = results / "ctx.toml"
    # the cluster lives in the session's workdir, never in the default one other runs use
    spec_file.write_text(CAMPAIGN.replace("[bench]\n", f"[bench]\nworkdir = \"{workdir}\"\n"))
    spec = load_spec(spec_file, results)
    quiet = Console(quiet=True)
    outcome = run_campaign(spec, quiet, show_progress=False)
    assert sorted(outcome.failed) == ["r1:simple-update:broken", "r2:simple-update:broken"]
    assert len(outcome.ran) == 4
    base = spec.options_for(spec.cells()[0])
    # The cells measure without warm-up (none is read for it); the validation run's
    # warm-up is its 'after CHECKPOINT' window, at least 1 s, and 1 s after it is its warm
    # state (its three iterations: 6 s, not 9).
    validation = run_validation(dataclasses.replace(base, warmup_s=1, duration_s=1), quiet)
    assert [s.name for s in validation.states] == ["cold", "warming", "warm",
                                                   "after CHECKPOINT"]
    assert base.target.workdir == workdir
    check = run_scaling_check(base, quiet)
    assert check.cores == [1, 2] and check.pinned_pids
    assert postgres_processes(str(workdir / "instances" / "pg18-embedded")) == []
    # The host's CPU baseline, in the hardware's own context as `bench cpu` names it.
    cpu = run_cli_here(["bench", "cpu", "--context", CPU_CONTEXT, "--results-dir",
                        str(results), "--duration", "2", "--warmup", "0", "--iterations", "1",
                        "--no-progress"], workdir)
    assert cpu.returncode == 0, cpu.stderr
    # A run of the same workload at other parameters (1 client, not 4): never ranked
    # against the campaign's runs, whatever its TPS.
    other = run_cli_here(["bench", "simple-update", "--context", CONTEXT, "--scale", "1",
                          "--clients", "1", "--duration", "2", "--warmup", "0", "--iterations",
                          "1", "--set", "synchronous_commit=off", "--no-telemetry",
                          "--no-progress", "--results-dir", str(results)], workdir)
    assert other.returncode == 0, other.stderr
    return results


def _report(results: Path) -> str:
    import typer

    from pgdyno.cli import compare_cmds

    app = typer.Typer()
    compare_cmds.register(app)
    res = CliRunner().invoke(app, ["context-report", CONTEXT, "--results-dir", str(results)])
    assert res.exit_code == 0, res.output
    return (results / CONTEXT / "context-report.md").read_text()


def _table(md: str, caption_start: str) -> list[list[str]]:
    lines = md[md.index(f"*{caption_start}"):].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[2:] if rows and rows[1][0].startswith("---") else rows[1:]


def test_every_section_is_present(context: Path) -> None:
    md = _report(context)
    titles = re.findall(r"^## (.+)$", md, re.M)
    assert titles == SECTIONS
    html = (context / CONTEXT / "context-report.html").read_text()
    assert all(t in html for t in ("Benchmark journal", "Price/performance"))


def test_headline_figures_trace_to_summary_json(context: Path) -> None:
    md = _report(context)
    rows = _table(md, "Headline results")
    assert {r[0] for r in rows} >= {"default", "async"}
    for _label, run, clients, tps, lat, sd, p99, tx, failed in rows:
        summary = json.loads((context / CONTEXT / run / "summary.json").read_text())
        c = next(c for c in summary["per_clients"] if c["clients"] == int(clients))
        assert tps == rounded(c["tps_mean"], 1)
        assert lat == rounded(c["latency"]["mean_ms"], 3)
        assert sd == rounded(c["latency"]["stddev_ms"], 3)
        assert p99 == rounded(c["latency"]["percentiles_ms"]["p99"], 3)
        assert tx == str(c["transactions"]) and failed == str(c["failed"])


def test_validation_and_scaling_figures_trace_to_timelines(context: Path) -> None:
    md = _report(context)
    rows = _table(md, "Run ")  # validation table caption: "Run <dir>"
    assert [r[0] for r in rows] == ["cold", "warming", "warm", "after CHECKPOINT"]
    run_dir = Path(md[md.index("*Run ") + 5:].split("*")[0])
    summary = json.loads((run_dir / "summary.json").read_text())
    for state, tps, _lat, seconds, where in rows:
        it_no, first, last = map(int, re.findall(r"\d+", where)[:3])
        it = summary["iterations"][it_no - 1]
        points = [p for p in it["timeline"] if first <= p["t_s"] < last]
        assert int(seconds) == len(points)
        assert tps == rounded(sum(p["tps"] for p in points) / len(points), 1), state
    scaling = _table(md, "Measured check")
    assert [r[0] for r in scaling] == ["1", "2"]
    for _cores, tps, run in scaling:
        summary = json.loads((context / CONTEXT / run / "summary.json").read_text())
        assert tps == rounded(summary["per_clients"][0]["tps_mean"], 1)
    assert "Scaling efficiency 1→2 cores" in md


def test_journal_has_changes_failures_and_rollback(context: Path) -> None:
    md = _report(context)
    journal = md[md.index("## 4. Benchmark journal"):md.index("## 5.")]
    assert "synchronous_commit = off" in journal
    assert "Root cause:" in journal and "pgdyno_no_such_library" in journal
    assert "rolled back: run 5 returned to the settings of run 2" in journal
    assert "Timeline (iteration 1, 1 s means)" in journal  # 3 s runs: 1 s blocks


def test_settings_in_natural_units_with_the_stock_value(context: Path, server) -> None:
    """Settings in natural units: the journal's Was lines and the best run's settings read
    as pg_settings reported them, converted by the test (maintenance_work_mem=96MB is
    98304 kB there), with the stock value (a live server's boot_val) named."""
    md = _report(context)
    conninfo = server.admin_connection().conninfo()
    runs = {p.name: json.loads((p / "manifest.json").read_text())
            for p in (context / CONTEXT).glob("simple-update-*")}
    fast = next(m for m in runs.values() if (m.get("role") or {}).get("label") == "async")
    mwm = recorded(fast["server"]["non_default_settings"]["maintenance_work_mem"])
    mwm_stock, sync_stock = stock(conninfo, "maintenance_work_mem"), \
        stock(conninfo, "synchronous_commit")
    assert mwm == "96 MB" and mwm_stock != mwm
    journal = [" ".join(line.split()) for line in
               md[md.index("## 4. Benchmark journal"):md.index("## 5.")].splitlines()]
    assert f"maintenance_work_mem = {mwm} # Was {mwm_stock} (stock)" in journal
    assert f"maintenance_work_mem = {mwm_stock} (stock) # Was {mwm}" in journal
    assert f"synchronous_commit = off # Was {sync_stock} (stock)" in journal
    caption = next(line for line in md.splitlines() if "effective non-default settings" in line)
    best = runs[caption.split("(run ")[1].rstrip(")*")]
    rows = _table(md, caption.strip("*").split(":")[0] + ": effective")
    assert rows
    for name, shown, _ in rows:
        value = recorded(best["server"]["non_default_settings"][name])
        assert shown == with_stock(value, stock(conninfo, name)).strip(), name
    assert not [line for line in journal if "# Was" in line and "(default)" in line]


def test_prices_and_projection_from_profile(context: Path) -> None:
    md = _report(context)
    prices = md[md.index("## 7. Price/performance"):md.index("## 8.")]
    from pgdyno.config import load_hardware

    large = load_hardware("r8g.large")
    row = next(line for line in prices.splitlines() if line.startswith("| r8g.large |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    tps = float(cells[2].replace(",", ""))
    assert cells[4] == f"${large.price_month_usd:,.2f}"
    assert math.isclose(float(cells[5]), tps / large.price_month_usd, rel_tol=0.01)
    assert "Assumption: throughput grows linearly" in md
    # This x86 VM is not an r8g.large (Graviton4): its figure is measured for this host
    # only; the instance's is projected, whatever the vCPU count.
    from pgdyno.campaign.sizes import same_cpu
    from pgdyno.runner.environment import host_facts

    host_cpu = host_facts().cpu_model
    first = [c.strip() for c in next(line for line in prices.splitlines()
                                     if line.startswith("| this host")).strip("|").split("|")]
    assert first[0] == f"this host ({host_cpu})" and first[3] == "measured"
    if not same_cpu(large.cpu_model, host_cpu):
        assert cells[3].startswith("projected"), cells


def test_key_findings_and_notes(context: Path) -> None:
    import typer

    from pgdyno.cli import compare_cmds

    app = typer.Typer()
    compare_cmds.register(app)
    run = sorted((context / CONTEXT).glob("simple-update-*"))[0]
    res = CliRunner().invoke(app, ["note", str(run), "first run after reboot",
                                   "--results-dir", str(context)])
    assert res.exit_code == 0, res.output
    assert read_notes(run)[-1].endswith("first run after reboot")
    md = _report(context)
    assert "User note:" in md and "first run after reboot" in md
    findings = md[md.index("## 6. Key findings"):md.index("## 7.")]
    assert "async: TPS (tx/s)" in findings
    res = CliRunner().invoke(app, ["journal", CONTEXT, "--results-dir", str(context)])
    assert res.exit_code == 0 and "first run after reboot" in res.output


def test_cpu_baseline_adjusts_the_projection(context: Path) -> None:
    """The cpu run is the host's baseline, not a config; the projection to a profile with
    its own events/s per core scales the TPS per vCPU by the ratio of the two."""
    md = _report(context)
    report = json.loads((context / CONTEXT / "context-report.json").read_text())
    assert "/cpu-" not in report["best_run"]
    cpu_run = next((context / CPU_CONTEXT).glob("cpu-*"))
    threads = max(int(d.name.split("-")[0][1:]) for d in (cpu_run / "raw" / "sysbench").iterdir())
    stdout = (cpu_run / "raw" / "sysbench" / f"c{threads}-i1" / "stdout.txt").read_text()
    eps = float(re.search(r"events per second:\s+([\d.]+)", stdout).group(1))
    per_core = eps / min(threads, len(os.sched_getaffinity(0)))
    assert report["cpu_baseline"]["events_per_s_per_core"] == pytest.approx(per_core)
    sizing = md[md.index("## 3. Sizing math"):md.index("## 4.")]
    assert f"{rounded(per_core, 1)} events/s per vCPU ({cpu_run.name})" in sizing
    from pgdyno.config import load_hardware

    xlarge = load_hardware("r8g.xlarge")
    row = next(r for r in report["prices"] if r["instance"] == "r8g.xlarge")
    assert row["tps_basis"] == "projected, CPU-adjusted"
    expected = report["per_core_tps"] * 4 * xlarge.cpu_events_per_s_per_core / per_core
    assert row["tps"] == pytest.approx(expected)
    assert "CPU-adjusted" in md[md.index("## 10. Scaling projection"):]


def test_configs_are_ranked_like_with_like(context: Path) -> None:
    md = _report(context)
    report = json.loads((context / CONTEXT / "context-report.json").read_text())
    assert report["ranked_on"].startswith("simple-update, scale 1, clients 4, 2 s measured")
    summary = md[md.index("## 1. Summary"):md.index("## 2.")]
    assert "1 finished run(s) with other workload parameters were not ranked" in summary
    findings = md[md.index("## 6. Key findings"):md.index("## 7.")]
    assert "synchronous_commit=off" not in findings  # the 1-client run is in no comparison


def test_hardware_overview_lists_every_workload(context: Path) -> None:
    """The hardware overview: one row per workload measured on this hardware, each
    figure the best run's own (recomputed from its summary.json)."""
    md = _report(context)
    rows = {r[0]: r for r in _table(md, "Executive summary")}
    assert set(rows) == {"simple-update", "cpu"}
    cpu_run = next((context / CPU_CONTEXT).glob("cpu-*"))
    summary = json.loads((cpu_run / "summary.json").read_text())
    (it,) = summary["iterations"]
    assert rows["cpu"][1] == f"{rounded(it['metrics']['events_per_s'], 1)} events/s"
    assert rows["cpu"][4] == "–"  # host-only telemetry: no session verdict
    su = rows["simple-update"]
    run = context / su[6]
    s = json.loads((run / "summary.json").read_text())
    clients = int(su[5])
    tps = statistics.fmean(i["metrics"]["tps"] for i in s["iterations"]
                           if i["clients"] == clients and i["status"] == "ok")
    assert su[1] == f"{rounded(tps, 1)} tx/s"
    pooled = next(c for c in s["per_clients"] if c["clients"] == clients)
    assert su[3] == rounded(pooled["latency"]["mean_ms"], 3)
