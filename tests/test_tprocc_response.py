"""Compliant-mode response times: parsing the server's duration lines, per-type statistics,
and the sweep's saturation point."""

from __future__ import annotations

import gzip
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pgdyno.workloads.tprocc import response
from pgdyno.workloads.tprocc.sweep_report import SweepRow, saturation_point

SAMPLE = Path(__file__).parent / "data" / "server_durations.log"


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_duration_lines_give_one_sample_per_call_with_bind_added() -> None:
    samples = list(response.parse_log_lines(SAMPLE.read_text().splitlines()))
    assert [(s.transaction, s.pid) for s in samples] == [
        ("payment", 20051), ("new_order", 20052), ("delivery", 20054), ("new_order", 20055),
        ("stock_level", 20054)]
    # Prepared: bind + execute of the same backend; parse (once per session) left out.
    assert math.isclose(samples[0].ms, 0.057 + 1.250)
    assert math.isclose(samples[1].ms, 0.100 + 4.000)
    # Simple: the whole query string, BEGIN and ROLLBACK included.
    assert samples[3].ms == 2.0
    assert samples[0].end_epoch == epoch("2026-11-22 12:31:34.826")


def test_extract_copies_only_lines_after_the_offset(tmp_path: Path) -> None:
    text = SAMPLE.read_text()
    offset = text.index("2026-11-22 12:31:35.000")
    out = tmp_path / response.RAW_FILE
    assert response.extract(SAMPLE, len(text[:offset].encode()), out) == 3
    with gzip.open(out, "rt") as f:
        assert f.readline() == "end_epoch\tpid\ttransaction\tms\n"
    assert [s.transaction for s in response.read_samples(out)] == [
        "delivery", "new_order", "stock_level"]


def test_a_server_log_in_another_time_zone_is_refused() -> None:
    line = ("2026-11-22 13:31:35.000 CET [1] LOG:  duration: 1.000 ms  statement: "
            "SELECT tprocc_delivery(1, 4);")
    with pytest.raises(ValueError, match="log_timezone"):
        list(response.parse_log_lines([line]))


def test_per_type_percentiles_are_nearest_rank_inside_the_window() -> None:
    samples = [response.ResponseSample(end_epoch=100.0 + i, pid=1, transaction="payment",
                                       ms=float(v))
               for i, v in enumerate([9, 1, 8, 2, 7, 3, 6, 4, 5, 10, 500])]
    stats = response.stats_by_type(samples, window=(100.0, 110.0))  # the 500 ms is outside
    (payment,) = stats
    assert payment.count == 10 and payment.max_ms == 10.0
    assert payment.percentiles_ms == {"p50": 5.0, "p90": 9.0, "p95": 10.0, "p99": 10.0}
    assert payment.within_limit and payment.limit_p90_s == 5.0
    slow = response.stats_by_type([response.ResponseSample(0, 1, "stock_level", 25_000.0)])
    assert not slow[0].within_limit


def test_saturation_is_the_smallest_warehouse_count_below_the_threshold() -> None:
    def row(w: int, ratio: float | None) -> SweepRow:
        return SweepRow(warehouses=w, clients=10 * w, run=None, status="ok",
                        real_vs_ideal=ratio)

    assert saturation_point([row(10, 0.99), row(20, 0.95), row(30, 0.91)], 0.9) is None
    assert saturation_point([row(10, 0.99), row(20, 0.85), row(30, 0.60)], 0.9) == 20
    assert saturation_point([row(10, None), row(20, 0.89)], 0.9) == 20
