"""The journal and context report of a workload whose headline is not TPS: a real TPROC-H
campaign of two configs, ranked and compared on the geometric mean of query times, where
lower is better (its summary has no pooled per-client rows)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from pgdyno.compare.model import metric_title
from pgdyno.units import figure, signed_pct
from tests.conftest import make_shared_dir, run_campaign
from tests.conftest import run_cli_here as run_cli

pytestmark = pytest.mark.server  # the campaign starts PostgreSQL

CONTEXT = "hc--tproch"
CAMPAIGN = f"""
[campaign]
name = "headline"
context = "{CONTEXT}"
workloads = ["tproch"]
clients = [1]
repeat = 1

[bench]
scale_factor = 0.01
queries = "1,6"
tests = "power"
iterations = 2
telemetry = false

[[config]]
label = "stock"

[[config]]
label = "nohash"
set = ["enable_hashjoin=off", "enable_seqscan=off"]
"""
LABEL = "Geometric mean of query times"


@pytest.fixture(scope="module")
def campaign(workdir: Path) -> Path:
    results, printed = run_campaign(CAMPAIGN, make_shared_dir("pgdyno-headline-"), workdir)
    assert "ran 2, skipped 0" in printed, printed
    res = run_cli(["report", "--context", CONTEXT, "--results-dir", str(results)], workdir)
    assert res.returncode == 0, res.stderr
    return results


def _runs(results: Path) -> list[tuple[str, Path, float]]:
    """(config label, run directory, mean geometric mean over its iterations) in run order,
    recomputed from each run's own files."""
    out = []
    for run in sorted((results / CONTEXT).iterdir()):
        if not (run / "manifest.json").is_file():
            continue
        manifest = json.loads((run / "manifest.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        assert manifest["status"] == "ok" and summary["per_clients"] == []
        values = [it["metrics"]["geomean_s"] for it in summary["iterations"]
                  if it["status"] == "ok"]
        assert len(values) == 2
        out.append((manifest["started_at"], manifest["role"]["label"], run,
                    statistics.fmean(values)))
    return [(label, run, mean) for _, label, run, mean in sorted(out, key=lambda x: x[0])]


def _section(md: str, start: str, end: str) -> str:
    return md[md.index(start):md.index(end)]


def test_best_config_is_the_lowest_geometric_mean(campaign: Path) -> None:
    runs = _runs(campaign)
    assert [label for label, _, _ in runs] == ["stock", "nohash"]
    md = (campaign / CONTEXT / "context-report.md").read_text()
    report = json.loads((campaign / CONTEXT / "context-report.json").read_text())
    label, run, mean = min(runs, key=lambda r: r[2])
    assert report["best_run"] == str(run)
    assert report["headline"]["metric"] == "geomean_s"
    assert report["headline"]["direction"] == -1
    assert report["headline"]["best_config_mean"] == pytest.approx(mean)
    summary = _section(md, "## 1. Summary", "## 2.")
    assert (f"Best config: **{label}**, geometric mean of query times **{figure(mean)} s** "
            "(lower is better)") in summary
    # one row per run in the headline table, with the run's own mean
    for lab, r, m in runs:
        assert f"| {lab} | {r.name} | tproch | 1 | {figure(m)} | 2 |" in summary
    assert "| TPS |" not in summary  # no empty TPS table for a workload without TPS


def test_journal_shows_each_runs_geometric_mean_and_the_change(campaign: Path,
                                                                workdir: Path) -> None:
    runs = _runs(campaign)
    md = (campaign / CONTEXT / "context-report.md").read_text()
    journal = _section(md, "## 4. Benchmark journal", "## 5.")
    for _, _, mean in runs:
        assert f"{LABEL} {figure(mean)} s at 1 clients" in journal
    (_, _, a), (_, _, b) = runs
    assert (f"{LABEL} change vs run 1: {signed_pct(100 * (b / a - 1))} (lower is better; "
            in journal)
    assert "TPS" not in journal
    res = run_cli(["journal", CONTEXT, "--results-dir", str(campaign)], workdir)
    assert res.returncode == 0, res.stderr
    assert f"{LABEL} {figure(runs[0][2])} s at 1 clients" in res.stdout


def test_findings_compare_the_headline_and_tps_sections_say_why(campaign: Path) -> None:
    runs = _runs(campaign)
    md = (campaign / CONTEXT / "context-report.md").read_text()
    report = json.loads((campaign / CONTEXT / "context-report.json").read_text())
    (finding,) = report["findings"]
    m = finding["comparison"]
    assert finding["config"] == "nohash" and finding["headline"] is True
    assert (m["metric"], m["direction"], m["clients"]) == ("geomean_s", -1, 1)
    # tests = "power": one stream per iteration, whose geometric mean is the iteration's
    assert m["baseline_mean"] == pytest.approx(runs[0][2])
    assert m["candidate_mean"] == pytest.approx(runs[1][2])
    findings = _section(md, "## 6. Key findings", "## 7.")
    assert "Each config against **stock**" in findings
    title = metric_title(LABEL, "s")
    assert (f"| nohash: {title} | 1 | {figure(runs[0][2])} | {figure(runs[1][2])} | "
            f"{signed_pct(m['change_pct'])} |") in findings
    if m["verdict"] in ("faster", "slower"):
        assert f"nohash is **{m['verdict']}** than stock at 1 clients" in findings
    for title in ("## 7. Price/performance", "## 10. Scaling projection"):
        body = md[md.index(title):].split("\n## ")[0]
        assert "Does not apply: tproch's headline is the geometric mean of query times " \
               "(s, lower is better), not a throughput in TPS" in body
    assert "No measured TPS" not in md and "Only one config was measured" not in md
    assert report["prices"] == [] and report["per_core_tps"] is None
    assert "workload tproch (psycopg)" in md
