"""Hardware profiles: what a machine is, as tuning needs it and a report records it.

A profile holds what tuning needs (vCPUs and RAM the database may use, storage volumes for
data and WAL with their kind and limits, network, price) and what a report should record
(CPU model, NUMA nodes, kernel, huge page state, block device queue settings).

The bottom of pgdyno.config: detection (detect.py), the .env and TOML readers (envfile.py,
profiles.py) and the tuning rules build or read these, and this module imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgdyno.config.units import GB
from pgdyno.serde import Serialisable

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
    bus: str = ""
    """How the kernel reaches it: nvme, virtio, xen, scsi, md, dm, mmc ('' if unknown)."""
    kind: str = ""
    """The storage class detection gave it (one of STORAGE_KINDS)."""


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
    """The device's queue/rotational flag as the kernel reports it (virtual disks report 1
    whatever backs them: ``kind`` is the storage class, not this flag)."""
    bus: str = ""
    """nvme, virtio, xen, scsi, md, dm, ... (see BlockDevice.bus)."""


@dataclass
class HardwareProfile(Serialisable):
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
    cpu_events_per_s_per_core: float | None = None
    """sysbench cpu events/s per vCPU at --cpu-max-prime 20000 (``pgdyno bench cpu``'s
    default), measured on this machine: the context report scales a TPS per vCPU measured
    on another CPU by the ratio of the two."""
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
    cpu_source: str = ""
    """How vcpus was found (affinity mask, cgroup CPU quota); '' for profiles that state it."""
    ram_source: str = ""
    """How ram_bytes was found (/proc/meminfo, cgroup memory limit)."""
    cloud: str = ""
    """The cloud the machine runs in: aws, or '' (owned hardware, other clouds, unknown)."""
    os_settings: dict[str, str] = field(default_factory=dict)
    """Current values of the OS settings the rules set, on the machine detection ran on:
    sysctls from /proc/sys (vm.swappiness, kernel.sem, ...) and the nofile/nproc limits.
    Empty for profiles of other machines (catalogue, files)."""
    source: str = ""
    """catalogue:NAME, file:PATH or detect."""

    @property
    def is_aws(self) -> bool:
        """An AWS instance: stated, or implied by its EBS limits (AWS-only keys need it)."""
        return self.cloud == "aws" or self.ebs_gbps is not None or (
            self.ebs_baseline_iops is not None or self.ebs_baseline_gbps is not None)

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
