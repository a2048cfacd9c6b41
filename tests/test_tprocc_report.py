"""TPROC-C's figures and report section on constructed raw files: compliant runs are judged
by NOPM, real/ideal and the server's response times; efficiency exists only for them, at
their time scale."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from pgdyno.analysis.summary import IterationSummary, LatencyStats, RunSummary
from pgdyno.options import BenchOptions
from pgdyno.results.rundir import IterationRecord, RunPlan
from pgdyno.workloads.tprocc.plugin import Tprocc, TproccOptions
from pgdyno.workloads.tprocc.report import tprocc_sections, window_metrics

T0 = 1_800_000_000.0
# Calls the server timed: (seconds after T0 they ended, type, ms). Two end outside the
# 60 s window and must not count.
CALLS = [(1.0, "new_order", 3.0), (2.0, "new_order", 5.0), (3.0, "payment", 1.0),
         (4.0, "payment", 2.0), (5.0, "new_order", 40.0), (6.0, "order_status", 2.5),
         (7.0, "delivery", 11.0), (8.0, "stock_level", 6.0), (9.0, "payment", 1.5),
         (10.0, "new_order", 4.0), (-1.0, "new_order", 900.0), (61.0, "payment", 800.0)]


def _nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered) / 100)) - 1]


def _plan(keying: bool, scale: float = 0.01) -> RunPlan:
    params = {"warehouses": 1, "mix": "45,43,4,4,4", "all_warehouses": False,
              "keying_thinking": keying, "time_scale": scale if keying else 1.0}
    record = IterationRecord(clients=10, iteration=1, threads=2, status="ok", command=[],
                             log_files=[], stdout_file="raw/pgbench/c10-i1/stdout.txt",
                             stderr_file="raw/pgbench/c10-i1/stderr.txt", returncode=0,
                             started_at="")
    return RunPlan(schema_version=1, workload="tprocc", context="c", records=[record],
                   parameters=params)


def _iteration_dir(run: Path, new_orders: int = 1200) -> Path:
    it_dir = run / "raw" / "pgbench" / "c10-i1"
    it_dir.mkdir(parents=True)

    def snap(dt: float, orders: int, commits: int) -> dict:
        return {"taken_at": T0 + dt, "snapshot": {"time_s": T0 + dt, "sum_next_o_id": orders,
                                                  "xact_commit": commits, "xact_rollback": 0}}

    start, end = snap(0.0, 3000, 100), snap(60.0, 3000 + new_orders, 2900)
    (it_dir / "window.json").write_text(json.dumps(
        {"start": start, "end": end, "series": [start, end], "interval_s": 60}))
    with gzip.open(it_dir / "response_times.tsv.gz", "wt") as f:
        f.write("end_epoch\tpid\ttransaction\tms\n")
        for dt, kind, ms in CALLS:
            f.write(f"{T0 + dt:.3f}\t7\t{kind}\t{ms:.3f}\n")
    return it_dir


def test_compliant_metrics_are_the_servers_and_the_scaled_ideal(tmp_path: Path) -> None:
    it_dir = _iteration_dir(tmp_path)
    m = window_metrics(_plan(True), it_dir)
    # 1,200 new orders in 60 s; the ideal of 10 terminals at a 0.01 time scale.
    assert m["nopm"] == pytest.approx(1200.0)
    cycle_s = (0.45 * 30 + 0.43 * 15 + 0.04 * 12 + 0.04 * 7 + 0.04 * 7) * 0.01
    ideal = 10 * 0.45 * 60 / cycle_s
    assert m["ideal_nopm"] == pytest.approx(ideal)
    assert m["real_vs_ideal"] == pytest.approx(1200 / ideal)
    # Efficiency against 12.86 per warehouse at this time scale (was 9,417% unscaled).
    assert m["efficiency"] == pytest.approx(1200 / (12.86 / 0.01), rel=1e-3)
    assert m["efficiency"] < 1.5
    # Latency figures are the server's, over the calls inside the window.
    inside = [ms for dt, _, ms in CALLS if 0 <= dt < 60]
    assert m["latency_avg_ms"] == pytest.approx(sum(inside) / len(inside))
    for key, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)):
        assert m[f"latency_{key}_ms"] == pytest.approx(_nearest_rank(inside, p)), key
    assert m["rt_p90_ms_new_order"] == pytest.approx(
        _nearest_rank([ms for dt, k, ms in CALLS if 0 <= dt < 60 and k == "new_order"], 90))


def test_compliant_metrics_without_server_times_have_no_latency(tmp_path: Path) -> None:
    it_dir = _iteration_dir(tmp_path)
    (it_dir / "response_times.tsv.gz").unlink()
    m = window_metrics(_plan(True), it_dir)
    # NaN rather than pgbench's latency, which holds the keying and think sleeps.
    assert all(math.isnan(m[k]) for k in ("latency_avg_ms", "latency_p90_ms",
                                          "latency_p99_ms"))


def test_free_running_metrics_have_no_efficiency_or_ideal(tmp_path: Path) -> None:
    m = window_metrics(_plan(False), _iteration_dir(tmp_path, new_orders=50_000))
    assert m["nopm"] == pytest.approx(50_000.0)
    assert not {"efficiency", "ideal_nopm", "real_vs_ideal", "latency_p99_ms"} & set(m)


def _summary(metrics: dict[str, float]) -> RunSummary:
    lat = LatencyStats(1, 207.0, 207.0, 0.0, 1.0, 500.0, {"p99": 500.0})
    it = IterationSummary(
        clients=10, iteration=1, status="ok", duration_s=60, warmup_s=0,
        window_start_epoch=T0, transactions=5760, failed=0, serialization_failures=0,
        deadlock_failures=0, retried=0, retries=0, skipped=0, late=0, tps_mean=96.0,
        tps_median=96.0, tps_stddev=1.0, tps_min=90.0, tps_max=100.0, interval_tps=[96.0],
        latency=lat, lag=None, scripts=[], timeline=[], log_files=[], metrics=metrics)
    return RunSummary(schema_version=2, workload="tprocc", context="c", status="ok",
                      client_counts=[10], per_clients=[], iterations=[it])


def test_compliant_section_leads_with_nopm_real_over_ideal_and_server_p90(
        tmp_path: Path) -> None:
    plan = _plan(True)
    m = window_metrics(plan, _iteration_dir(tmp_path))
    (section,) = tprocc_sections(_summary(m), plan, tmp_path)
    assert section.title == "TPROC-C: 1 warehouse"
    lead = section.tables[0]
    assert lead.headers[:5] == ["Terminals", "NOPM", "NOPM stddev", "Ideal NOPM", "Real/ideal"]
    assert lead.headers[5:10] == ["p90 NO ms", "p90 P ms", "p90 OS ms", "p90 D ms",
                                  "p90 SL ms"]
    row = dict(zip(lead.headers, lead.rows[0], strict=True))
    assert row["NOPM"] == "1,200" and row["Real/ideal"] == f"{100 * m['real_vs_ideal']:.1f}%"
    assert row["p90 NO ms"] == f"{m['rt_p90_ms_new_order']:.2f}"
    text = " ".join(section.paragraphs) + json.dumps([t.headers for t in section.tables])
    assert "12.86 × warehouses ÷ time scale 0.01" in text and "scale 10" not in text.lower()
    # pgbench's TPS (96) and its 207 ms latency, which hold the sleeps, are nowhere.
    cells = json.dumps([t.rows for t in section.tables])
    assert "207" not in cells and "96.0" not in cells


def test_free_running_section_has_no_efficiency(tmp_path: Path) -> None:
    plan = _plan(False)
    m = window_metrics(plan, _iteration_dir(tmp_path, new_orders=50_000))
    (section,) = tprocc_sections(_summary(m), plan, tmp_path)
    headers = [h for table in section.tables for h in table.headers]
    assert "Efficiency %" not in headers and "Real/ideal" not in headers
    assert "no efficiency or real/ideal" in section.paragraphs[0]


def test_plugin_paces_the_verdict_and_drops_the_common_sections_when_compliant() -> None:
    plugin = Tprocc()
    def opts(**kw: object) -> BenchOptions:
        return BenchOptions(workload="tprocc", clients=(10,), threads=None, duration_s=60,
                            warmup_s=5, iterations=1, workload_options=TproccOptions(**kw))

    compliant = opts(warehouses=1, keying_thinking=True, time_scale=0.01)
    free = opts(warehouses=1)
    assert plugin.common_report(compliant) is False
    assert plugin.common_report(free) is True and plugin.common_report() is True
    figures = {"nopm": 1164.0, "ideal_nopm": 1286.3, "real_vs_ideal": 0.905}
    paced = plugin.pacing(_plan(True), figures)
    assert paced is not None and paced.real_over_ideal == 0.905 and paced.keeps_up
    assert paced.rate == "NOPM 1,164 of 1,286 ideal"
    assert plugin.pacing(_plan(False), {"nopm": 50_000.0}) is None
