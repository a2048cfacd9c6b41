"""The host's measured capacity: the store, and its readers (hardware limits, tune's I/O
budget, the context report's table), on figures typed out here."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pgdyno.analysis.telemetry import (
    DeviceSummary,
    RoleInfo,
    Stat,
    TelemetrySummary,
)
from pgdyno.analysis.telemetry.limits import hardware_limits
from pgdyno.config.hardware import HardwareProfile, Volume
from pgdyno.config.model import TuneInputs
from pgdyno.config.sizing import _io_lines
from pgdyno.errors import UsageError
from pgdyno.results.capacity import (
    CAPACITY_SCHEMA_VERSION,
    DeviceCapacity,
    HostCapacity,
    freeze_into,
    frozen_capacity,
    load_capacity,
    record_capacity,
    store_path,
)

SDB = DeviceCapacity(device="sdb1", measured_at="2026-01-02T03:04:05Z", run="r1",
                     read_iops_peak=10_000, write_iops_peak=5_000, read_mib_s=400,
                     write_mib_s=200)


def test_store_round_trip_and_replace(tmp_path: Path) -> None:
    path = record_capacity(tmp_path, [SDB, dataclasses.replace(SDB, device="nvme0n1")], "h")
    assert path == store_path(tmp_path, "h")
    again = dataclasses.replace(SDB, run="r2", write_iops_peak=6_000)
    record_capacity(tmp_path, [again], "h")
    store = load_capacity(path)
    assert store == HostCapacity(CAPACITY_SCHEMA_VERSION, "h",
                                 [dataclasses.replace(SDB, device="nvme0n1"), again])
    assert json.loads(path.read_text())["schema_version"] == CAPACITY_SCHEMA_VERSION


def test_damaged_or_other_version_is_one_line(tmp_path: Path) -> None:
    path = store_path(tmp_path, "h")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 99, "host": "h", "devices": []}))
    with pytest.raises(UsageError) as err:
        load_capacity(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    assert frozen_capacity(tmp_path) is None  # no copy: the limits say "unknown"


def test_freeze_into_copies_the_store(tmp_path: Path) -> None:
    record_capacity(tmp_path, [SDB])
    telemetry = tmp_path / "run" / "telemetry"
    assert freeze_into(tmp_path, telemetry)
    assert frozen_capacity(telemetry).device("sdb1") == SDB


def summary(r_s: float, w_s: float, rmb: float, wmb: float) -> TelemetrySummary:
    dev = DeviceSummary(device="sdb1", roles=["data"], r_s=Stat(avg=r_s, peak=r_s * 1.5),
                        w_s=Stat(avg=w_s, peak=w_s * 2), rmb_s=Stat(avg=rmb),
                        wmb_s=Stat(avg=wmb), util_pct=Stat(avg=40.0, peak=60.0),
                        aqu_sz=Stat(avg=1.0))
    return TelemetrySummary(devices=[dev], roles=[
        RoleInfo("data", "/d", "sdb1"), RoleInfo("wal", "/d/pg_wal", "sdb1")])


def test_hardware_limits_against_measured_capacity() -> None:
    rows = hardware_limits(summary(3_000, 4_500, 12.0, 30.0),
                           HostCapacity(1, "h", [SDB]))
    by_kind = {r.kind: r for r in rows}
    assert by_kind["util"].resource == "data+wal device sdb1 busy time"  # one row per device
    write = by_kind["write_iops"]
    assert (write.capacity, write.used_avg, write.used_peak) == (5_000, 4_500, 9_000)
    assert write.pct_avg == pytest.approx(90.0)
    assert write.basis == "measured" and "2026-01-02" in write.note
    # 40% reads: 1 / (0.4/10,000 + 0.6/5,000) = 6,250 IOPS; 7,500 used = 120%.
    mix = by_kind["iops"]
    assert mix.capacity == pytest.approx(6_250.0)
    assert mix.pct_avg == pytest.approx(120.0)
    # Bytes: 12 of 42 MiB/s read: 1 / ((12/42)/400 + (30/42)/200) = 233.33 MiB/s.
    assert by_kind["mib_s"].capacity == pytest.approx(1 / ((12 / 42) / 400 + (30 / 42) / 200))


def test_hardware_limits_without_measurement_say_so() -> None:
    rows = hardware_limits(summary(100, 100, 1.0, 1.0), None)
    assert [r.kind for r in rows] == ["util"]
    assert "no fio measurement of sdb1" in rows[0].note


def inputs(source: str, device: str, iops: int | None = None) -> TuneInputs:
    hw = HardwareProfile(name="h", vcpus=2, ram_bytes=2**33, source=source,
                         data=Volume(kind="ssd", device=device, iops=iops))
    return TuneInputs(hardware=hw, workload="tpcb", db_type="oltp", write_heavy=True,
                      pg_major=18)


def test_tune_budget_uses_measured_then_catalogue(tmp_path: Path) -> None:
    record_capacity(tmp_path, [SDB])
    measured = _io_lines(inputs("detect", "/dev/sdb"), tmp_path)[0]
    assert measured.value == ("10,000 read IOPS, 5,000 write IOPS, 400 MiB/s read, "
                              "200 MiB/s write (measured)")
    assert "measured 2026-01-02" in measured.formula
    catalogue = _io_lines(inputs("catalogue:r8g.xlarge", "/dev/sdb", 3_000), tmp_path)[0]
    assert catalogue.value.startswith("3,000 (catalogue) IOPS")
    unknown = _io_lines(inputs("detect", "/dev/sdc"), tmp_path)[0]
    assert unknown.value.startswith("unknown (run the fio baseline)")
