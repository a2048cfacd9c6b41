"""The host's measured storage capacity from a fio run: what later runs' device IOPS and
bandwidth are read against (``pgdyno.results.capacity``)."""

from __future__ import annotations

import statistics
from typing import Any

from pgdyno.results.capacity import DeviceCapacity
from pgdyno.workloads.fio.metrics import iteration_metrics
from pgdyno.workloads.fio.results import FioIteration


def capacity_of(its: list[FioIteration], run: str, when: str) -> list[DeviceCapacity]:
    """Per device measured: each figure's mean over the iterations."""
    by_device: dict[str, list[tuple[Any, dict[str, float]]]] = {}
    for fio_it in its:
        for place in fio_it.places:
            if place.device is None:
                continue
            one = FioIteration(fio_it.fio_version, fio_it.engine, fio_it.runtime_s,
                               fio_it.ramp_s, [place])
            by_device.setdefault(place.device, []).append((place, iteration_metrics(one)))
    out = []
    for device, entries in by_device.items():
        def mean(key: str, entries=entries) -> float | None:
            values = [m[key] for _, m in entries if key in m]
            return statistics.fmean(values) if values else None
        place = entries[0][0]
        out.append(DeviceCapacity(
            device=device, measured_at=when, run=run, path=place.path,
            read_iops_peak=mean("randread_peak_iops"),
            write_iops_peak=mean("randwrite_peak_iops"),
            mixed_iops_peak=mean("randrw_peak_iops"),
            read_iops_qd1=mean("randread_qd1_iops"), write_iops_qd1=mean("randwrite_qd1_iops"),
            read_mib_s=mean("seq_read_mib_s"), write_mib_s=mean("seq_write_mib_s"),
            read_lat_qd1_us=mean("randread_qd1_lat_avg_us"),
            write_lat_qd1_us=mean("randwrite_qd1_lat_avg_us"),
            fdatasync_ops_s=mean("wal_fdatasync_1job_ops_s")))
    return out
