"""`pgdyno bench tprocc` end to end: NOPM from the database, per-type data, consistency."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.conftest import make_shared_dir, run_cli


def test_bench_tprocc_nopm_types_and_consistency(workdir: Path) -> None:
    own = make_shared_dir("pgdyno-tprocc-")
    results = make_shared_dir("pgdyno-results-")
    proc = run_cli(["bench", "tprocc", "--warehouses", "1", "--vus", "2", "--rampup", "1",
                    "--duration", "4", "--iterations", "1", "--no-progress",
                    "--results-dir", str(results)], own)
    assert proc.returncode == 0, proc.stderr
    run = next(results.glob("*/tprocc-*"))
    summary = json.loads((run / "summary.json").read_text())
    it = summary["iterations"][0]
    window = json.loads((run / "raw" / "pgbench" / "c2-i1" / "window.json").read_text())
    start, end = window["start"]["snapshot"], window["end"]["snapshot"]
    minutes = (end["time_s"] - start["time_s"]) / 60
    assert math.isclose(it["extras"]["nopm"],
                        (end["sum_next_o_id"] - start["sum_next_o_id"]) / minutes)
    assert math.isclose(it["extras"]["efficiency"], it["extras"]["nopm"] / (12.86 * 1))
    scripts = {s["name"]: s for s in it["scripts"]}
    assert list(scripts) == ["new_order", "new_order_rollback", "payment", "order_status",
                             "delivery", "stock_level"]
    # The database's new orders and the driver's committed New-Orders agree to within the
    # few transactions in flight at each end of the window.
    driver_nopm = scripts["new_order"]["transactions"] / (it["duration_s"] / 60)
    assert abs(driver_nopm - it["extras"]["nopm"]) / it["extras"]["nopm"] < 0.15
    consistency = json.loads((run / "raw" / "consistency.json").read_text())
    assert all(c["passed"] for c in consistency["conditions"])
    md = (run / "report.md").read_text()
    assert "## TPROC-C: 1 warehouses" in md and "| 4 | sum(o_ol_cnt)" in md
    assert f"{it['extras']['nopm']:,.0f}" in md
    again = run_cli(["bench", "tprocc", "--warehouses", "1", "--vus", "2", "--rampup", "0",
                     "--duration", "1", "--iterations", "1", "--no-progress", "--no-telemetry",
                     "--results-dir", str(results)], own)
    assert again.returncode == 0, again.stderr
    manifests = [json.loads(m.read_text()) for m in results.glob("*/*/manifest.json")]
    assert sorted(m["dataset"]["reused"] for m in manifests) == [False, True]


def test_tprocc_bad_options_are_one_line_errors(workdir: Path) -> None:
    for args, word in ((["--warehouses", "0"], "--warehouses"),
                       (["--mix", "50,50"], "mix"),
                       (["--keying-thinking", "--warehouses", "2", "--vus", "5"], "--vus"),
                       (["--script", "x.sql"], "--script")):
        proc = run_cli(["bench", "tprocc", *args], workdir)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and word in proc.stderr
    wrong = run_cli(["bench", "tpcb", "--warehouses", "3"], workdir)
    assert wrong.returncode == 2 and "tprocc" in wrong.stderr
