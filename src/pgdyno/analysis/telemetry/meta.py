"""``telemetry/meta.json``: what one iteration's telemetry was recorded with, and on what.

The recorder (``pgdyno.telemetry.recorder``) writes a ``TelemetryMeta`` when sampling starts,
again when the samplers first reach the server, and when sampling stops; the analysis reads
it back through ``read_meta``. The model lives here, below the recorder, because the
analysis that reads it may not import the recorder's layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno import serde
from pgdyno.analysis.telemetry.raw import load_json
from pgdyno.results.manifest import check_version
from pgdyno.serde import Serialisable

META_SCHEMA_VERSION = 1
META_FILE = "meta.json"


@dataclass(frozen=True)
class TelemetryConfig:
    """How the recorder samples (its options, saved with what it recorded)."""

    enabled: bool = True
    interval_s: float = 1.0
    """Period of the host samplers and the statistics snapshots."""
    wait_sample_hz: float = 10.0
    """Rate of pg_stat_activity sampling; 0 turns wait sampling off."""
    smart: bool = True
    """Read SMART before and after the run, when the devices have it."""


@dataclass
class HostMeta:
    """The machine the host samplers read: the database host's with --ssh."""

    hostname: str = ""
    kernel: str = ""
    machine: str = ""


@dataclass
class CpuMeta:
    """The CPU capacity of the sampled machine, as the CPU figures are scaled by."""

    online: int = 0
    """CPUs the recording process may run on (affinity); with --ssh, the host's online
    CPUs."""
    limit_cores: float | None = None
    """The cgroup CPU quota in cores, when one applies."""
    source: str = ""
    """Where the quota was read (a cgroup file), or ``ssh HOST``."""
    effective_cores: float = 0.0
    """The cores the machine could give: the online CPUs, or the quota when lower."""


@dataclass
class DeviceMeta:
    """One directory resolved to its block devices: the keys of
    ``pgdyno.telemetry.devices.DeviceResolution``, which the recorder saves here."""

    path: str = ""
    top: str | None = None
    """The device the file system is on, as /proc/diskstats names it."""
    chain: list[str] = field(default_factory=list)
    physical: list[str] = field(default_factory=list)
    """The whole disks at the bottom of the chain (SMART candidates)."""
    mount_point: str | None = None
    fstype: str | None = None
    error: str | None = None
    """Why the path could not be resolved, when it could not."""


@dataclass
class ServerMeta:
    """The server the samplers connected to."""

    connection: str = ""
    """The connection as pgdyno describes it (host, port, user, database; never a password)."""
    version_num: int | None = None
    """server_version_num; None until the samplers first connected."""
    supported: bool | None = None
    """Whether the statistics catalogue knows this major version."""
    settings: dict[str, Any] = field(default_factory=dict)
    """name -> {"setting", "unit"}: the settings the analysis needs, read on first connect."""


@dataclass
class ClientMeta:
    """With --ssh, the machine pgdyno ran on (the host figures are the database host's)."""

    host: HostMeta = field(default_factory=HostMeta)
    cpu: CpuMeta = field(default_factory=CpuMeta)


@dataclass
class RemoteFacts:
    """Who and what the database host is, read over ssh."""

    destination: str
    user: str = ""
    hostname: str = ""
    kernel: str = ""
    machine: str = ""
    online_cpus: int = 0


@dataclass
class RemoteMeta(RemoteFacts):
    """The database host of an --ssh run, with what its directories are stored on."""

    via: str = "ssh"
    storage: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """role -> the identity of each device in its chain, read on the host."""
    server_log: str | None = None
    """The server log on the host, read from the run's offset for checkpoints."""


@dataclass
class TelemetryMeta(Serialisable):
    """``meta.json``: the sampling settings, the machine and devices sampled, the server,
    and how many times each sampler failed."""

    schema_version: int = META_SCHEMA_VERSION
    started_at: float = 0.0
    """When sampling started (epoch seconds)."""
    config: TelemetryConfig = field(default_factory=TelemetryConfig)
    host: HostMeta = field(default_factory=HostMeta)
    cpu: CpuMeta = field(default_factory=CpuMeta)
    devices: dict[str, DeviceMeta] = field(default_factory=dict)
    """role (data, wal, archive) -> its devices."""
    server: ServerMeta | None = None
    """None when no server was sampled."""
    server_log: str | None = None
    server_log_offset: int = 0
    """Bytes of the server log before the run: its checkpoint lines are read from here."""
    client: ClientMeta | None = None
    remote: RemoteMeta | None = None
    stopped_at: float | None = None
    """When sampling stopped; None when the recorder never stopped (a killed run)."""
    errors: dict[str, int] = field(default_factory=dict)
    """sampler -> failures (each in errors.jsonl)."""


def read_meta(tdir: Path) -> TelemetryMeta | None:
    """The ``meta.json`` of a telemetry directory; None when it is absent or damaged
    (telemetry is context: the report is built without it), one line naming the file
    (``UsageError``) when it carries a schema_version this pgdyno does not read."""
    path = Path(tdir) / META_FILE
    data = load_json(path)
    if "schema_version" not in data:
        return None
    data = check_version(data, META_SCHEMA_VERSION, path, "telemetry metadata")
    try:
        return serde.from_dict(TelemetryMeta, data)
    except (KeyError, TypeError, ValueError):  # serde.SchemaError: an edited file
        return None
