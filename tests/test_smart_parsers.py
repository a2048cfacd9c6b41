"""SMART readings from recorded tool output, and the endurance projection's arithmetic.

The samples in tests/data/smart/ are written from the tools' documented formats
(nvme-cli's ``smart-log -o json`` keys, smartctl's ``--json`` schema); the expected values
below are typed out from reading them, not produced by the parser.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pgdyno.analysis.endurance import endurance_projection
from pgdyno.telemetry.smart import (
    parse_nvme_smart_log,
    parse_smartctl,
    read_smart,
)
from pgdyno.workloads.fio.report import smart_section

DATA = Path(__file__).parent / "data" / "smart"


def sample(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_nvme_smart_log() -> None:
    r = parse_nvme_smart_log("nvme0n1", sample("nvme_smart_log.json"))
    assert r.available and r.reason == "nvme smart-log"
    assert r.temperature_c == 37.0  # 310 K
    assert (r.percent_used, r.available_spare_pct) == (12.0, 100.0)
    assert r.host_written_bytes == 12_070_312 * 512_000
    assert r.host_read_bytes == 14_121_094 * 512_000
    assert (r.media_errors, r.error_log_entries, r.critical_warning) == (0, 3, 0)
    assert (r.thermal_t1_transitions, r.thermal_t2_transitions) == (2, 1)
    assert r.thermal_throttle_events == 3
    assert (r.thermal_t1_time_s, r.thermal_t2_time_s) == (40, 5)
    assert r.power_on_hours == 6679


def test_smartctl_nvme() -> None:
    r = parse_smartctl("nvme0n1", sample("smartctl_nvme.json"))
    assert r.available and r.reason == "smartctl (NVMe log)"
    assert (r.temperature_c, r.percent_used, r.available_spare_pct) == (41.0, 3.0, 98.0)
    assert r.host_written_bytes == 4_000_000 * 512_000
    assert (r.media_errors, r.warning_temp_time_min, r.power_on_hours) == (1, 4, 1500)
    # smartctl's log has no thermal transition counts: unknown, never zero.
    assert r.thermal_t1_transitions is None and r.thermal_throttle_events is None


def test_smartctl_ata() -> None:
    r = parse_smartctl("sda", sample("smartctl_ata.json"))
    assert r.available and r.reason == "smartctl (ATA attributes)"
    assert r.temperature_c == 33.0
    assert r.host_written_bytes == 97_656_250_000 * 512
    assert r.host_read_bytes == 195_312_500_000 * 512
    assert (r.percent_used, r.media_errors, r.power_on_hours) == (5.0, 0, 20000)
    assert r.available_spare_pct is None


def test_device_without_smart_says_why() -> None:
    r = parse_smartctl("vda", sample("smartctl_virtual.json"))
    assert not r.available
    assert r.reason == "/dev/vda: Unable to detect device type"
    assert r.temperature_c is None and r.host_written_bytes is None
    loop = read_smart("loop7")
    assert not loop.available and "virtual device" in loop.reason


def test_report_has_one_line_for_a_device_without_smart() -> None:
    reading = parse_smartctl("vda", sample("smartctl_virtual.json")).to_dict()
    section = smart_section([(1, {"before": {"t": 0, "readings": [reading]},
                                  "after": {"t": 60, "readings": [reading]}})])
    assert section.paragraphs == ["vda: SMART not available: /dev/vda: Unable to detect "
                                  "device type."]
    assert not section.tables


def test_report_table_and_projection() -> None:
    before = parse_nvme_smart_log("nvme0n1", sample("nvme_smart_log.json")).to_dict()
    after = dict(before, temperature_c=39.0,
                 host_written_bytes=before["host_written_bytes"] + 2e12)
    section = smart_section([(1, {"before": {"t": 0, "readings": [before]},
                                  "after": {"t": 3600, "readings": [after]}})])
    rows = {row[0]: row[1:] for row in section.tables[0].rows}
    assert rows["Temperature (°C)"] == ["37", "39 (peak 39)"]
    assert rows["Thermal throttle T1 transitions"] == ["2", "2"]
    assert rows["Thermal throttle T2 transitions"] == ["1", "1"]
    assert "55,658 hours" in section.paragraphs[0]  # 6,679 h ÷ 12%
    # Lifetime writes in binary units: 12,070,312 data units of 512,000 bytes = 5.62 TiB,
    # and 2 TB (10^12) more after; one prefix for the row, named in its label.
    tib = 2**40
    w0 = 12_070_312 * 512_000
    assert rows["Host writes (TiB)"] == [f"{w0 / tib:.2f}", f"{(w0 + 2e12) / tib:.2f}"]
    assert not any("GB" in row[0] or "TB" in row[0] for row in section.tables[0].rows)


GB, TB = 1e9, 1e12
W = 12_070_312 * 512_000  # the sample drive's lifetime host writes


@pytest.mark.parametrize(
    ("used", "hours", "written", "run_written", "run_h", "life_h", "left_run_h", "bound"),
    [
        # 12% used after 6,679 h: 6,679 / 0.12 h of life; remaining W*(100/12 - 1) at 1 TB/h.
        (12, 6679, W, 1 * TB, 1.0, 6679 / 0.12, W * (100 / 12 - 1) / TB, False),
        # 50% used, 1,000 h, 10 TB written; the run wrote 20 GB in 0.5 h (40 GB/h).
        (50, 1000, 10 * TB, 20 * GB, 0.5, 2000.0, 10 * TB / (40 * GB), False),
        # 0% means below 1%: projected from 1%, as a lower bound.
        (0, 100, 1 * TB, 1 * GB, 1.0, 10_000.0, 99 * TB / GB, True),
        # Worn out: nothing remains.
        (100, 40_000, 500 * TB, 1 * GB, 1.0, 40_000.0, 0.0, False),
        # The run wrote nothing: no projection at the run's rate.
        (10, 500, 5 * TB, 0.0, 1.0, 5000.0, None, False),
    ])
def test_endurance_projection(used: float, hours: int, written: float, run_written: float,
                              run_h: float, life_h: float, left_run_h: float | None,
                              bound: bool) -> None:
    before = {"host_written_bytes": written - run_written}
    after = {"percent_used": used, "power_on_hours": hours, "host_written_bytes": written}
    p = endurance_projection(before, after, run_h)
    assert math.isclose(p.service_life_h, life_h, rel_tol=1e-9)
    assert math.isclose(p.remaining_h_lifetime_rate, life_h - hours, rel_tol=1e-9,
                        abs_tol=1e-9)
    assert math.isclose(p.lifetime_write_bytes_per_h, written / hours, rel_tol=1e-9)
    if left_run_h is None:
        assert p.remaining_h_run_rate is None
        assert "too little" in p.text
    else:
        assert math.isclose(p.remaining_h_run_rate, left_run_h, rel_tol=1e-9, abs_tol=1e-9)
    assert p.lower_bound is bound
    assert ("at least" in p.text) is bound


def test_endurance_without_the_inputs_says_which() -> None:
    p = endurance_projection({}, {"power_on_hours": 10, "host_written_bytes": None}, 1.0)
    assert p.service_life_h is None
    assert p.text == ("no endurance projection: the drive does not report percentage used, "
                      "host writes.")


def test_every_runs_drive_health_section_has_the_projection(tmp_path: Path) -> None:
    """A database run's telemetry (smart.json before and after, as the recorder writes it)
    gives the same projection as the arithmetic, rendered in the drive-health section."""
    from pgdyno.analysis.telemetry.host import smart_changes
    from pgdyno.reports.markdown import render_sections
    from pgdyno.reports.telemetry_sections import _smart_section
    from pgdyno.telemetry.smart import SmartReading

    before = SmartReading("nvme0n1", True, percent_used=12, power_on_hours=6679,
                          host_written_bytes=W - 2 * GB).to_dict()
    after = {**before, "host_written_bytes": W}
    (tmp_path / "smart.json").write_text(json.dumps({
        "before": {"t": 1000.0, "readings": [before]},
        "after": {"t": 1000.0 + 1800, "readings": [after]}}))
    (change,) = smart_changes(tmp_path)
    expected = endurance_projection(before, after, 0.5)
    # 2 GB (10^9) written in 0.5 h: 4e9 bytes an hour, shown in binary units (3.73 GiB).
    assert change.endurance == expected.text and "this run's 3.73 GiB/h" in expected.text
    assert "GB" not in expected.text and "TB" not in expected.text

    class Summary:  # the section reads only .smart
        smart = [change]

    lines = render_sections(_smart_section(Summary())).splitlines()  # type: ignore[arg-type]
    assert f"- nvme0n1: {expected.text}" in lines
