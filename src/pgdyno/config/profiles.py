"""Hardware profiles: what a machine is, from the built-in catalogue, a TOML file or detection.

A profile holds what tuning needs (vCPUs and RAM the database may use, storage volumes for
data and WAL with their kind and limits, network, price) and what a report should record
(CPU model, NUMA nodes, kernel, huge page state, block device queue settings).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pgdyno.config.units import GB, parse_size
from pgdyno.errors import UsageError
from pgdyno.serde import from_dict, to_dict

CATALOGUE_DIR = "catalogue"
STORAGE_KINDS = ("nvme", "ssd", "san", "hdd")
"""pgtune's storage classes: local NVMe, SATA/SAS SSD, network/virtual block storage, disk."""


@dataclass
class BlockDevice:
    """A block device as the kernel shows it in /sys/block."""

    name: str
    model: str = ""
    size_bytes: int = 0
    rotational: bool = False
    nvme: bool = False
    scheduler: str = ""
    schedulers: list[str] = field(default_factory=list)
    nr_requests: int | None = None
    read_ahead_kb: int | None = None
    max_sectors_kb: int | None = None
    rq_affinity: int | None = None
    add_random: int | None = None
    nomerges: int | None = None
    raid_level: str = ""
    """For md devices: raid0, raid1, raid10, ..."""
    raid_members: list[str] = field(default_factory=list)


@dataclass
class Volume:
    """Where data or WAL lives: a device (or RAID set) with its limits and filesystem."""

    kind: str = "ssd"
    """nvme, ssd, san (network or virtual block storage, e.g. EBS), hdd."""
    description: str = ""
    mount: str = ""
    device: str = ""
    model: str = ""
    size_bytes: int | None = None
    disk_count: int = 1
    raid_level: str = ""
    """'' for a single device, else 0, 1, 10, 5, 6."""
    iops: int | None = None
    """Sustained IOPS limit of the whole volume (provisioned or measured), if known."""
    bandwidth_mb_s: float | None = None
    fstype: str = ""
    mount_options: str = ""
    scheduler: str = ""
    nr_requests: int | None = None
    read_ahead_kb: int | None = None
    max_sectors_kb: int | None = None
    rotational: bool | None = None


@dataclass
class HardwareProfile:
    """A machine as pgdyno tunes and reports it. Sizes are bytes, bandwidths as named."""

    name: str
    vcpus: int
    ram_bytes: int
    """RAM the database may use: the cgroup limit when it is lower than the host's."""
    description: str = ""
    cpu_model: str = ""
    arch: str = ""
    numa_nodes: int = 1
    network_gbps: float | None = None
    ebs_gbps: float | None = None
    """Instance-level storage bandwidth cap (burst), Gbit/s, for network-attached volumes."""
    ebs_baseline_gbps: float | None = None
    ebs_baseline_iops: int | None = None
    price_month_usd: float | None = None
    spot_price_month_usd: float | None = None
    price_note: str = ""
    tps_per_core: float | None = None
    """A measured TPC-B TPS per vCPU on this machine, for the CPU-bound TPS estimate."""
    data: Volume | None = None
    wal: Volume | None = None
    devices: list[BlockDevice] = field(default_factory=list)
    os: str = "linux"
    kernel: str = ""
    huge_page_size_kb: int = 2048
    huge_pages_total: int = 0
    """Huge pages reserved (vm.nr_hugepages) on the machine."""
    transparent_hugepages: str = ""
    host_vcpus: int | None = None
    host_ram_bytes: int | None = None
    limits_source: str = ""
    """How vcpus and ram_bytes were found (cgroup files, catalogue, ...)."""
    source: str = ""
    """catalogue:NAME, file:PATH or detect."""

    @property
    def ram_gb(self) -> float:
        return self.ram_bytes / GB

    @property
    def data_volume(self) -> Volume:
        return self.data or Volume()

    @property
    def wal_volume(self) -> Volume:
        """The WAL volume; the data volume when WAL shares it."""
        return self.wal or self.data_volume

    @property
    def separate_wal(self) -> bool:
        return self.wal is not None

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareProfile:
        return from_dict(cls, data)


# ----- TOML files --------------------------------------------------------------------------------

def catalogue_names() -> list[str]:
    folder = resources.files("pgdyno.config").joinpath(CATALOGUE_DIR)
    return sorted(e.name[:-5] for e in folder.iterdir() if e.name.endswith(".toml"))


def load_hardware(spec: str) -> HardwareProfile:
    """A profile by catalogue name, TOML file, .env file, or ``detect`` for this host."""
    if spec == "detect":
        from pgdyno.config.detect import detect_profile
        return detect_profile()
    if spec in catalogue_names():
        text = resources.files("pgdyno.config").joinpath(CATALOGUE_DIR, f"{spec}.toml").read_text()
        return profile_from_toml(text, origin=f"catalogue {spec}", source=f"catalogue:{spec}")
    path = Path(spec)
    if path.is_file():
        if path.suffix == ".env" or path.name.endswith(".env"):
            from pgdyno.config.envfile import profile_from_env
            return profile_from_env(path.read_text(), origin=str(path))
        return profile_from_toml(path.read_text(), origin=str(path), source=f"file:{path}")
    raise UsageError(f"--hardware {spec}: no such profile or file; accepted: detect, "
                     f"{', '.join(catalogue_names())}, or a .toml/.env file")


_SIZE_KEYS = {"ram": "ram_bytes", "size": "size_bytes"}


def profile_from_toml(text: str, origin: str, source: str = "") -> HardwareProfile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{origin}: not valid TOML ({exc})") from None
    table = data.get("hardware", data)
    try:
        fixed = _sizes_to_bytes(dict(table), origin)
        for vol in ("data", "wal"):
            if isinstance(fixed.get(vol), dict):
                fixed[vol] = _sizes_to_bytes(fixed[vol], f"{origin} [{vol}]")
                kind = fixed[vol].get("kind", "ssd")
                if kind not in STORAGE_KINDS:
                    raise UsageError(f"{origin}: [{vol}] kind = {kind!r}; accepted: "
                                     f"{', '.join(STORAGE_KINDS)}")
        fixed.setdefault("source", source)
        profile = HardwareProfile.from_dict(fixed)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{origin}: {' '.join(str(exc).split())}; see the catalogue files "
                         "for the accepted keys (name, vcpus, ram, [data], [wal], ...)") from None
    if profile.vcpus < 1 or profile.ram_bytes < 256 * 1024 * 1024:
        raise UsageError(f"{origin}: vcpus must be >= 1 and ram >= 256MB")
    return profile


def _sizes_to_bytes(table: dict[str, Any], origin: str) -> dict[str, Any]:
    for key, target in _SIZE_KEYS.items():
        if key in table:
            try:
                table[target] = parse_size(str(table.pop(key)))
            except ValueError as exc:
                raise UsageError(f"{origin}: {key}: {exc}") from None
    return table


def profile_to_toml(profile: HardwareProfile) -> str:
    """A TOML file that :func:`profile_from_toml` reads back to the same profile."""
    data = profile.to_dict()
    lines = [f"# Hardware profile {profile.name} ({profile.source or 'pgdyno'})"]
    tables: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) or (isinstance(value, list) and value
                                       and isinstance(value[0], dict)):
            tables[key] = value
        elif value is not None:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables.items():
        rows = value if isinstance(value, list) else [value]
        for row in rows:
            lines.append("")
            lines.append(f"[[{key}]]" if isinstance(value, list) else f"[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in row.items() if v is not None]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
