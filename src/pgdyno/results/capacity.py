"""A host's measured storage capacity: what ``pgdyno bench fio`` found each device can do.

One file per host, ``<results dir>/capacity/<hostname>.json``, with one entry per block
device (the device the filesystem sits on, as /proc/diskstats names it), each dated and
naming the run it came from. A later fio run on the same device replaces its entry.

The hardware-limits table and the bottleneck verdict read a run's figures against these:
a run reads the copy frozen into its telemetry directory when it started
(``freeze_into``), so that rebuilding its report later gives the same table even after the
host was measured again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno import serde
from pgdyno.results.manifest import read_versioned
from pgdyno.results.rundir import hostname, write_json_atomic

CAPACITY_SCHEMA_VERSION = 1
CAPACITY_DIR = "capacity"
FROZEN_FILE = "capacity.json"
"""The copy of the host's store in a run's telemetry directory."""


@dataclass
class DeviceCapacity:
    """One device's measured ceiling (the best of the run's iterations' means)."""

    device: str
    """Kernel name of the device under the filesystem (``nvme0n1p2``, ``dm-0``, ``loop3``)."""
    measured_at: str
    """UTC time of the fio run, ISO 8601."""
    run: str
    """The fio run directory the figures come from."""
    path: str = ""
    """The directory (or raw device) fio ran on."""
    model: str = ""
    read_iops_peak: float | None = None
    write_iops_peak: float | None = None
    mixed_iops_peak: float | None = None
    read_iops_qd1: float | None = None
    write_iops_qd1: float | None = None
    read_mib_s: float | None = None
    write_mib_s: float | None = None
    read_lat_qd1_us: float | None = None
    write_lat_qd1_us: float | None = None
    fdatasync_ops_s: float | None = None
    """8 KiB write + fdatasync per second, one job: the commit rate ceiling of one WAL."""

    @property
    def mib_s_peak(self) -> float | None:
        values = [v for v in (self.read_mib_s, self.write_mib_s) if v]
        return max(values) if values else None


@dataclass
class HostCapacity:
    schema_version: int
    host: str
    devices: list[DeviceCapacity] = field(default_factory=list)

    def device(self, name: str | None) -> DeviceCapacity | None:
        return next((d for d in self.devices if d.device == name), None) if name else None


def store_path(results_dir: Path, host: str | None = None) -> Path:
    return Path(results_dir) / CAPACITY_DIR / f"{host or hostname()}.json"


def load_capacity(path: Path) -> HostCapacity | None:
    """The store at ``path``; None when there is none. A damaged one is one line."""
    if not Path(path).is_file():
        return None
    return read_versioned(HostCapacity, Path(path), CAPACITY_SCHEMA_VERSION,
                          "measured storage capacity",
                          "; remove it and run `pgdyno bench fio` again")


def record_capacity(results_dir: Path, measured: list[DeviceCapacity],
                    host: str | None = None) -> Path:
    """Add or replace the devices' entries in the host's store; returns its path."""
    path = store_path(results_dir, host)
    store = load_capacity(path) or HostCapacity(CAPACITY_SCHEMA_VERSION, host or hostname())
    names = {m.device for m in measured}
    store.devices = [d for d in store.devices if d.device not in names] + list(measured)
    store.devices.sort(key=lambda d: d.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, serde.to_dict(store))
    return path


def freeze_into(results_dir: Path, telemetry_dir: Path) -> bool:
    """Copy the host's store into a run's telemetry directory (False: none to copy)."""
    store = load_capacity(store_path(results_dir))
    if store is None:
        return False
    Path(telemetry_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(telemetry_dir) / FROZEN_FILE, serde.to_dict(store))
    return True


def frozen_capacity(telemetry_dir: Path) -> HostCapacity | None:
    """The copy a run took when it started; None without one (or a damaged one: the
    limits then fall back to the catalogue, which the table says)."""
    path = Path(telemetry_dir) / FROZEN_FILE
    try:
        return load_capacity(path)
    except Exception:  # noqa: BLE001 - a damaged copy must not stop a report
        return None


def to_json(store: HostCapacity) -> str:
    return json.dumps(serde.to_dict(store), indent=2)
