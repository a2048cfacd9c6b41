"""End to end: `pgdyno bench` against a real embedded server, checked from the raw logs."""

from __future__ import annotations

import json
import math
import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli
from tests.recompute import recompute

pytestmark = pytest.mark.server  # every test here starts PostgreSQL


@pytest.fixture(scope="module")
def sweep_run(workdir: Path) -> Path:
    """Two client counts × two iterations, short, with warm-up: a report's per-client and
    per-iteration tables. Scale 1, the session's other TPC-B runs' dataset: reused, where
    another scale would replace it (one pgbench dataset a cluster) for them to build again."""
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "tpcb", "--clients", "1,3", "--iterations", "2", "--duration", "3",
                    "--warmup", "1", "--scale", "1", "--results-dir", str(results),
                    "--no-progress", "--context", "test--tpcb"], workdir)
    assert proc.returncode == 0, proc.stderr
    runs = list((results / "test--tpcb").iterdir())
    assert len(runs) == 1
    return runs[0]


def test_summary_equals_independent_recomputation(sweep_run: Path) -> None:
    summary = json.loads((sweep_run / "summary.json").read_text())
    plan = json.loads((sweep_run / "raw" / "run.json").read_text())
    assert len(summary["iterations"]) == 4
    for it, record in zip(summary["iterations"], plan["records"], strict=True):
        raw = recompute([sweep_run / f for f in record["log_files"]], warmup_s=1, duration_s=3,
                        origin=record["origin_epoch"])
        assert it["transactions"] == raw.transactions > 0
        assert it["interval_tps"] == raw.interval_tps
        assert math.isclose(it["tps_mean"], statistics.fmean(raw.interval_tps))
        assert math.isclose(it["tps_median"], statistics.median(raw.interval_tps))
        assert math.isclose(it["tps_stddev"], statistics.pstdev(raw.interval_tps))
        lat = it["latency"]
        assert math.isclose(lat["mean_ms"], raw.latencies_ms.mean(), rel_tol=1e-9)
        assert math.isclose(lat["stddev_ms"], raw.latencies_ms.std(), rel_tol=1e-6)
        assert lat["max_ms"] == raw.latencies_ms.max()
        for key, p in (("p50", 50), ("p75", 75), ("p80", 80), ("p90", 90), ("p95", 95),
                       ("p99", 99), ("p99.9", 99.9)):
            assert lat["percentiles_ms"][key] == raw.percentile(p), key
    pooled = {c["clients"]: c for c in summary["per_clients"]}
    assert sorted(pooled) == [1, 3]
    for clients, c in pooled.items():
        its = [i for i in summary["iterations"] if i["clients"] == clients]
        assert c["transactions"] == sum(i["transactions"] for i in its)
        every_interval = [t for i in its for t in i["interval_tps"]]
        assert math.isclose(c["tps_mean"], statistics.fmean(every_interval))
        assert math.isclose(c["tps_iteration_stddev"],
                            statistics.stdev([i["tps_mean"] for i in its]))


def test_report_has_seed_tables_and_plots(sweep_run: Path) -> None:
    summary = json.loads((sweep_run / "summary.json").read_text())
    md = (sweep_run / "report.md").read_text()
    assert "| Clients | Average | Median | StdDev |" in md
    assert "| Clients | 50th | 75th | 80th | 90th | 95th | 99th | 99.9th | Max |" in md
    for c in summary["per_clients"]:
        p99 = c["latency"]["percentiles_ms"]["p99"]
        assert f"| {c['clients']} | " in md
        assert f"{p99:.3f}" in md
    for name in ("tps_timeline", "latency_histogram", "latency_percentiles", "scaling"):
        png = sweep_run / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plots/{name}.png" in md

    class Collector(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[str] = []
            self.images: list[str] = []
            self.tables = 0

        def handle_starttag(self, tag, attrs):
            if tag not in ("img", "meta", "br", "wbr"):  # void elements
                self.stack.append(tag)
            if tag == "img":
                self.images.append(dict(attrs)["src"])
            self.tables += tag == "table"

        def handle_startendtag(self, tag, attrs):  # <img ... /> opens nothing
            if tag == "img":
                self.images.append(dict(attrs)["src"])

        def handle_endtag(self, tag):
            assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}>"
            self.stack.pop()

    parser = Collector()
    parser.feed((sweep_run / "report.html").read_text())
    assert parser.stack == []
    assert len(parser.images) >= 4 + 3 * 2  # run plots, then telemetry plots per client count
    assert all(src.startswith("data:image/png;base64,") for src in parser.images)
    assert parser.tables >= 5


def test_manifest_and_index(sweep_run: Path, workdir: Path) -> None:
    manifest = json.loads((sweep_run / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert manifest["server"]["version"].startswith("18")
    assert manifest["server"]["non_default_settings"]["log_checkpoints"] == "on"
    assert manifest["host"]["cpu_count"] >= 1 and manifest["host"]["ram_bytes"] > 0
    assert len([c for c in manifest["commands"] if " -T 4 " in c]) == 4
    assert manifest["started_at"] <= manifest["ended_at"]
    results = sweep_run.parent.parent
    listing = run_cli(["runs", "--results-dir", str(results), "--workload", "tpcb"], workdir)
    assert listing.returncode == 0 and sweep_run.name in listing.stdout
    none = run_cli(["runs", "--results-dir", str(results), "--status", "failed"], workdir)
    assert sweep_run.name not in none.stdout
    one = run_cli(["runs", sweep_run.name, "--results-dir", str(results)], workdir)
    assert one.returncode == 0 and "ok" in one.stdout


def test_report_rebuilds_from_raw(sweep_run: Path, workdir: Path) -> None:
    before = json.loads((sweep_run / "summary.json").read_text())
    for name in ("summary.json", "report.md", "report.html"):
        (sweep_run / name).unlink()
    for png in (sweep_run / "plots").glob("*.png"):
        png.unlink()
    proc = run_cli(["report", str(sweep_run)], workdir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((sweep_run / "summary.json").read_text()) == before
    assert (sweep_run / "plots" / "tps_timeline.png").exists()
    assert (sweep_run / "report.html").exists()
