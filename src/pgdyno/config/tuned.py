"""pgdyno's own rules: the full matrix (OS, storage, PostgreSQL) for a machine and a workload.

Each value names the input it came from. Where pgdyno departs from pgtune the rationale
says why: the memory budget bounds work_mem, checkpoints are spaced by the WAL volume's
size rather than a fixed table, CPU-costly WAL compression is avoided on small hosts, and
autovacuum keeps pace with hot small tables in write-heavy work.

Two rules hold for every value: max_connections leaves room for the benchmark's clients,
pgdyno's own sessions and the reserved slots (sizing.ConnectionRoom), and an OS limit is
never set below what the machine already allows (the detected /proc/sys value, else the
kernel's stock one).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pgdyno.config.hardware import HardwareProfile, Volume
from pgdyno.config.matrix_keys import sysctl_key
from pgdyno.config.model import Setting, TuneInputs
from pgdyno.config.setting_specs import SettingSpecs
from pgdyno.config.sizing import (
    BASE_CONNECTIONS,
    BUDGET_RAM_SHARE,
    BUDGET_WORK_MEM_FACTOR,
    AdviceInputs,
    ConnectionRoom,
    connection_room,
    estimate_shared_memory,
    huge_pages_needed,
)
from pgdyno.config.units import GB, MB, fmt_bytes, fmt_seconds, human_bytes

Emit = Callable[..., None]


def tuned_settings(inputs: TuneInputs, specs: SettingSpecs) -> list[Setting]:
    out: list[Setting] = []

    def emit(group: str, key: str, name: str, layer: str, apply: str, value: object,
             default: str, why: str) -> None:
        out.append(Setting(group=group, key=key, name=name, layer=layer, apply=apply,
                           value=str(value), default=default, rationale=why, source="tuned"))

    def pg(group: str, name: str, value: object, why: str) -> None:
        emit(group, "PG_" + name.upper(), name, "postgresql", "pg", value,
             specs.default(name), why)

    mem = _memory_plan(inputs, specs)
    _instance(inputs, emit)
    _os_memory(inputs, mem, emit)
    _os_files(inputs, emit)
    _os_network(inputs, emit)
    _os_scheduler(inputs, mem, specs, emit)
    _raid(inputs, "data", inputs.hardware.data_volume, emit)
    _raid(inputs, "wal", inputs.hardware.wal_volume, emit)
    _xfs(inputs, emit)
    _block(inputs, "data", inputs.hardware.data_volume, emit)
    _block(inputs, "wal", inputs.hardware.wal_volume, emit)
    _md(inputs, emit)
    _paths(inputs, emit)
    _pg_memory(inputs, mem, pg)
    _pg_io(inputs, specs, pg)
    _pg_wal(inputs, specs, mem, pg)
    _pg_checkpoint(inputs, pg)
    _pg_commit(inputs, pg)
    _pg_bgwriter(inputs, mem, pg)
    _pg_autovacuum(inputs, mem, pg)
    _pg_parallel(inputs, pg)
    _pg_planner_logging(inputs, pg)
    _benchmark(inputs, mem, emit)
    return out


class MemoryPlan:
    """The memory figures several groups share."""

    def __init__(self, inputs: TuneInputs, specs: SettingSpecs) -> None:
        hw = inputs.hardware
        ram = hw.ram_bytes
        self.ram = ram
        share = 1 / 16 if inputs.db_type == "desktop" else (0.15 if ram < 2 * GB else 0.25)
        self.shared_share = share
        shared = int(ram * share)
        # Whole 128MB steps read better and change nothing measurable.
        step = 128 * MB if shared >= GB else MB
        self.shared = max(16 * MB, shared // step * step)
        # Room for everything that connects during a benchmark (sizing.ConnectionRoom);
        # without known clients the server keeps pgdyno's base max_connections.
        self.room: ConnectionRoom = connection_room(inputs.connections or 0, specs)
        self.connections = self.room.needed if inputs.connections else None
        self.budget_connections = self.connections or BASE_CONNECTIONS
        self.write_heavy = inputs.write_heavy
        self.wal_buffers = 64 * MB if inputs.write_heavy and self.shared >= 2 * GB else None
        wal_buf = self.wal_buffers or min(16 * MB, self.shared // 32)
        self.av_workers = max(3, min(8, hw.vcpus // 2))
        self.maintenance = min(max(ram // 16, 64 * MB), 2 * GB) // MB * MB
        self.av_mem = min(self.maintenance, GB)
        available = (ram * BUDGET_RAM_SHARE - self.shared - wal_buf
                     - self.av_workers * self.av_mem)
        per_session = available / (self.budget_connections * BUDGET_WORK_MEM_FACTOR)
        cap = GB if inputs.db_type == "dw" else 128 * MB
        self.work_mem = int(min(max(per_session, 4 * MB), cap)) // MB * MB
        self.work_mem_uncapped = per_session
        ecs_share = 0.75 if ram >= 16 * GB else 0.70
        self.ecs_share = ecs_share
        self.effective_cache = int(ram * ecs_share) // MB * MB
        shm = estimate_shared_memory(self.shared, self.budget_connections, wal_buf)
        self.huge_pages = math.ceil(huge_pages_needed(shm, hw.huge_page_size_kb or 2048) * 1.02)
        self.huge_reserved = hw.huge_pages_total >= self.huge_pages


def _memory_plan(inputs: TuneInputs, specs: SettingSpecs) -> MemoryPlan:
    return MemoryPlan(inputs, specs)


# ----- instance and OS -------------------------------------------------------------------------

def _sysctl_emitter(emit: Emit, group: str, hw: HardwareProfile) -> Emit:
    """emit() for one group's sysctls, keyed the way matrix_keys (and .env files) name them.

    The Default column shows the machine's current value where detection read it."""
    def sysctl(name: str, value: object, default: str, why: str) -> None:
        emit(group, sysctl_key(name), name, "os", "sysctl", value,
             hw.os_settings.get(name, default), why)
    return sysctl


def _limit_emitter(emit: Emit, group: str, hw: HardwareProfile, apply: str = "sysctl") -> Emit:
    """emit() for OS limits: never below what the machine already allows.

    A rule's figure is a floor for what PostgreSQL needs; a kernel (or a distribution) that
    already allows more keeps its value, field by field (kernel.sem and tcp_rmem are several
    limits in one line). The current value is the detected one (/proc/sys, getrlimit), else
    the kernel's stock default when it is a number."""
    def limit(name: str, wanted: object, default: str, why: str, key: str = "") -> None:
        current = hw.os_settings.get(name, default)
        value = _at_least(str(wanted), current)
        if value != str(wanted):
            whose = "this host has" if name in hw.os_settings else "the kernel's default is"
            how = ("kept, never lowered" if value == " ".join(current.split())
                   else "no field lowered")
            why = f"{why}: {wanted} would do, {whose} {current}: {how}"
        emit(group, key or sysctl_key(name), name, "os", apply, value, current, why)
    return limit


def _at_least(wanted: str, current: str) -> str:
    """wanted, raised field by field to current where current is higher (same field count)."""
    want, have = wanted.split(), current.split()
    if len(want) != len(have) or not all(f.isdigit() for f in want + have):
        if current.strip() == "unlimited":
            return current.strip()
        return wanted
    return " ".join(str(max(int(w), int(h))) for w, h in zip(want, have, strict=True))


def _instance(inputs: TuneInputs, emit: Emit) -> None:
    hw = inputs.hardware
    g = "instance"
    emit(g, "INSTANCE_TYPE", "instance_type", "instance", "info", hw.name, "", hw.source)
    # Each figure names its own source: the vCPU count and the RAM come from different files.
    emit(g, "VCPU", "vcpus", "instance", "info", hw.vcpus, "", hw.cpu_source or hw.source)
    emit(g, "RAM_GB", "ram_gb", "instance", "info", f"{hw.ram_gb:.1f}".rstrip("0").rstrip("."),
         "", hw.ram_source or hw.source)
    emit(g, "NETWORK_GBPS", "network_gbps", "instance", "info",
         "" if hw.network_gbps is None else f"{hw.network_gbps:g}", "",
         hw.source if hw.network_gbps is not None
         else "not known for this machine: the network rules assume 10 Gbit/s")
    if hw.is_aws:  # EBS is AWS's: other machines have no such limit to show
        emit(g, "EBS_GBPS", "ebs_gbps", "instance", "info",
             "" if hw.ebs_gbps is None else f"{hw.ebs_gbps:g}", "", hw.source)


def _os_memory(inputs: TuneInputs, mem: MemoryPlan, emit: Emit) -> None:
    hw = inputs.hardware
    g = "os_memory"
    sysctl = _sysctl_emitter(emit, g, hw)
    limit = _limit_emitter(emit, g, hw)

    sysctl("vm.swappiness", 1, "60", "database host: page cache and shared memory stay in RAM")
    sysctl("vm.nr_hugepages", mem.huge_pages, "0",
           f"shared memory for shared_buffers {fmt_bytes(mem.shared)} in "
           f"{hw.huge_page_size_kb} kB pages, +2%")
    background = min(max(mem.ram // 256, 64 * MB), 256 * MB)
    sysctl("vm.dirty_background_bytes", background, "0 (ratio 10)",
           f"RAM {human_bytes(mem.ram)}: start writeback at {fmt_bytes(background)}, "
           "not 10% of RAM")
    sysctl("vm.dirty_bytes", 4 * background, "0 (ratio 20)",
           "4 x dirty_background_bytes: caps stalls when writers outrun the disk")
    sysctl("vm.dirty_expire_centisecs", 500, "3000", "flush dirty pages after 5 s, not 30 s")
    sysctl("vm.dirty_writeback_centisecs", 100, "500", "writeback thread wakes every 1 s")
    sysctl("vm.overcommit_memory", 2, "0",
           "strict accounting: a failed allocation instead of the OOM killer (PostgreSQL docs)")
    sysctl("vm.overcommit_ratio", 80, "50",
           "commit limit 80% of the RAM outside the huge page pool")
    min_free = min(max(mem.ram // 100 // 1024, 65536), 1048576)
    limit("vm.min_free_kbytes", min_free, "kernel-computed",
          f"1% of RAM {human_bytes(mem.ram)} (64 MB .. 1 GB) kept free for atomic allocations")
    sysctl("vm.zone_reclaim_mode", 0, "0",
           f"{hw.numa_nodes} NUMA nodes: use remote memory rather than reclaim page cache"
           if hw.numa_nodes > 1 else "1 NUMA node: off, no remote memory to prefer over reclaim")
    emit(g, "TRANSPARENT_HUGEPAGE", "transparent_hugepage", "os", "sysfs", "never",
         hw.transparent_hugepages or "madvise",
         "compaction stalls; PostgreSQL uses explicit huge pages instead")


def _os_files(inputs: TuneInputs, emit: Emit) -> None:
    g = "os_files"
    hw = inputs.hardware
    limit = _limit_emitter(emit, g, hw)
    limit("fs.file-max", 2097152, "kernel-computed",
          "each backend opens up to max_files_per_process files")
    limit("fs.aio-max-nr", 1048576, "65536",
          "asynchronous I/O contexts for io_method=io_uring/worker and fio")
    ulimit = _limit_emitter(emit, g, hw, apply="limits")
    ulimit("nofile", 65535, "1024", "file descriptors per process for the postgres user",
           key="ULIMIT_NOFILE")
    ulimit("nproc", 65535, "distribution default",
           "one process per connection and background worker", key="ULIMIT_NPROC")


def _os_network(inputs: TuneInputs, emit: Emit) -> None:
    hw = inputs.hardware
    g = "os_network"
    gbps = hw.network_gbps or 10.0
    big = 16 * MB if gbps >= 10 else 4 * MB
    net = f"network {gbps:g} Gbit/s" + ("" if hw.network_gbps else " (assumed)")
    sysctl = _sysctl_emitter(emit, g, hw)
    limit = _limit_emitter(emit, g, hw)

    limit("net.core.somaxconn", 4096, "4096", "listen backlog for bursts of client connects")
    limit("net.core.netdev_max_backlog", 2048 if gbps < 25 else 8192, "1000",
          f"{net}: packets queued per CPU before drop")
    limit("net.core.rmem_default", 262144, "212992", "socket receive buffer for result sets")
    limit("net.core.rmem_max", big, "212992", f"{net}: bandwidth-delay product")
    limit("net.core.wmem_default", 262144, "212992", "socket send buffer for result sets")
    limit("net.core.wmem_max", big, "212992", f"{net}: bandwidth-delay product")
    limit("net.ipv4.tcp_rmem", f"4096 87380 {big}", "4096 131072 6291456",
          f"{net}: autotuning ceiling")
    limit("net.ipv4.tcp_wmem", f"4096 65536 {big}", "4096 16384 4194304",
          f"{net}: autotuning ceiling")
    limit("net.ipv4.tcp_max_syn_backlog", 4096, "kernel-computed",
          "pending connections during connection storms")
    sysctl("net.ipv4.tcp_tw_reuse", 1, "2", "reuse TIME_WAIT ports for short benchmark sessions")
    sysctl("net.ipv4.tcp_fin_timeout", 15, "60", "release closed client sockets sooner")


def _os_scheduler(inputs: TuneInputs, mem: MemoryPlan, specs: SettingSpecs,
                  emit: Emit) -> None:
    hw = inputs.hardware
    g = "os_scheduler"
    sysctl = _sysctl_emitter(emit, g, hw)
    sysctl("kernel.sched_autogroup_enabled", 0, "1",
           "autogroup balances terminal sessions, not database backends")
    # Off either way: across nodes page migration stalls shared memory; on one node there
    # is nothing to balance (the kernel itself leaves it off there).
    if hw.numa_nodes > 1:
        sysctl("kernel.numa_balancing", 0, "1",
               f"{hw.numa_nodes} NUMA nodes: off, page migration stalls shared memory")
    else:
        sysctl("kernel.numa_balancing", 0, "0", "1 NUMA node: off, nothing to balance")
    wanted, why = _semaphores(inputs, mem, specs)
    _limit_emitter(emit, g, hw)("kernel.sem", wanted, "32000 1024000000 500 32000", why)


def _semaphores(inputs: TuneInputs, mem: MemoryPlan,
                specs: SettingSpecs) -> tuple[str, str]:
    """kernel.sem (SEMMSL SEMMNS SEMOPM SEMMNI) for PostgreSQL built with System V semaphores.

    PostgreSQL's docs: one semaphore per connection, autovacuum worker slot, WAL sender,
    background worker and auxiliary process, in sets of 16 (+1 each); Linux builds use
    POSIX semaphores and need none of it, so this is a floor, never a reason to lower."""
    av = "autovacuum_worker_slots" if "autovacuum_worker_slots" in specs else \
        "autovacuum_max_workers"
    counts = [mem.budget_connections, _int_default(specs, av, 3),
              _int_default(specs, "max_wal_senders", 10),
              max(8, inputs.hardware.vcpus), 7]
    processes = sum(counts)
    sets = math.ceil(processes / 16)
    wanted = f"250 {max(32000, sets * 17)} 100 {max(128, sets)}"
    why = (f"System V builds: {sets} sets of 17 for {processes} processes (max_connections "
           f"{counts[0]} + {av} {counts[1]} + max_wal_senders {counts[2]} + "
           f"max_worker_processes {counts[3]} + 7 auxiliary); Linux builds use POSIX "
           "semaphores")
    return wanted, why


def _int_default(specs: SettingSpecs, name: str, fallback: int) -> int:
    try:
        return int(specs.default(name))
    except ValueError:
        return fallback


# ----- storage ----------------------------------------------------------------------------------

def _raid(inputs: TuneInputs, role: str, vol: Volume, emit: Emit) -> None:
    g = f"raid_{role}"
    up = role.upper()
    shared = role == "wal" and not inputs.hardware.separate_wal

    def info(name: str, value: object, why: str, apply: str = "mdadm") -> None:
        emit(g, f"{up}_{name.upper()}", name, "storage", apply, value, "", why)

    mount = vol.mount or ("/data" if role == "data" else "/wal")
    info("mount", mount if not shared else inputs.hardware.data_volume.mount or "/data",
         "WAL shares the data volume" if shared else f"{role} volume", apply="mount")
    per_disk = "" if not vol.size_bytes else f"{vol.size_bytes / GB / max(1, vol.disk_count):.0f}"
    info("disk_size_gb", per_disk, f"profile [{role}] size / disk_count", apply="info")
    info("disk_count", vol.disk_count, f"profile [{role}]", apply="info")
    if vol.disk_count <= 1:
        info("raid_level", "none", "single device: no RAID")
        info("raid_device", vol.device or "", "the device itself", apply="info")
        info("raid_chunk", "", "no RAID")
        info("stripe_width", 1, "single device")
        return
    level = vol.raid_level or "10"
    chunk = "64K" if role == "data" else "256K"
    info("raid_level", level, f"{vol.disk_count} devices: striping for IOPS"
         + (", mirroring for redundancy" if level == "10" else ""))
    info("raid_device", vol.device or ("/dev/md0" if role == "data" else "/dev/md1"),
         "md device", apply="info")
    info("raid_chunk", chunk, "small chunks spread random 8 kB pages" if role == "data"
         else "large chunks keep sequential WAL writes on one device per stripe")
    width = vol.disk_count // 2 if level == "10" else vol.disk_count
    info("stripe_width", width, f"RAID {level} of {vol.disk_count}: data-bearing devices")


def _xfs(inputs: TuneInputs, emit: Emit) -> None:
    hw = inputs.hardware
    g = "xfs"
    data, wal = hw.data_volume, hw.wal_volume
    fs = data.fstype or "xfs"

    def opt(name: str, value: object, default: str, why: str, apply: str = "mkfs") -> None:
        emit(g, name.upper(), name.lower(), "storage", apply, value, default, why)

    opt("FS_TYPE", "xfs", fs, "allocation groups scale parallel writes; the usual PostgreSQL "
        f"choice (now {fs})")
    opt("XFS_DATA_SUNIT", "64k" if data.disk_count > 1 else "", "",
        "= RAID chunk of the data volume" if data.disk_count > 1 else "single device")
    opt("XFS_WAL_SUNIT", "256k" if wal.disk_count > 1 else "", "",
        "= RAID chunk of the WAL volume" if wal.disk_count > 1 else "single device")
    opt("XFS_LOG_STRIPE_UNIT", "1b" if data.disk_count > 1 else "", "",
        "log writes unaligned: small journal commits")
    ags = min(32, max(4, hw.vcpus * 2 if hw.vcpus < 8 else 16))
    opt("XFS_DATA_AGCOUNT", ags, "4", f"{hw.vcpus} vCPUs writing in parallel")
    opt("XFS_WAL_AGCOUNT", max(4, ags // 2), "4", "WAL is written by few processes")
    opt("XFS_MOUNT_OPTS_DATA",
        "defaults,noatime,nodiratime,logbufs=8,logbsize=256k,allocsize=64m,inode64",
        data.mount_options or "defaults",
        "no access-time writes; large log buffers; 64m preallocation for 1 GB segments",
        apply="mount")
    opt("XFS_MOUNT_OPTS_WAL", "defaults,noatime,nodiratime,logbufs=8,logbsize=256k,inode64",
        wal.mount_options or "defaults", "no access-time writes; large log buffers",
        apply="mount")


def _block(inputs: TuneInputs, role: str, vol: Volume, emit: Emit) -> None:
    g = f"block_{role}"
    up = role.upper()
    kind = vol.kind

    def attr(name: str, value: object, default: object, why: str) -> None:
        emit(g, f"{up}_{name.upper()}", name, "storage", "sysfs", value,
             "" if default is None else str(default), why)

    if kind in ("nvme", "ssd", "san"):
        sched = "none" if kind in ("nvme", "san") else "mq-deadline"
        why = {"nvme": "NVMe: the device's own queues reorder better than the kernel",
               "san": "virtual/network storage reorders itself; skip the kernel's pass",
               "ssd": "SATA/SAS SSD: mq-deadline bounds latency; measure none"}[kind]
    else:
        sched, why = "mq-deadline", "spinning disk: deadline keeps reads from starving"
    attr("scheduler", sched, vol.scheduler or "kernel default", f"{kind}: {why}")
    attr("rotational", 1 if kind == "hdd" else 0, "" if vol.rotational is None
         else int(vol.rotational), _rotational_why(vol))
    if role == "data":
        attr("read_ahead_kb", 64 if kind != "hdd" else 256, vol.read_ahead_kb or 128,
             "random 8 kB page reads: large read-ahead wastes bandwidth")
        attr("nr_requests", 256 if kind != "hdd" else 128, vol.nr_requests,
             "queue depth for concurrent backend reads")
    else:
        attr("read_ahead_kb", 4096, vol.read_ahead_kb or 128,
             "WAL is read sequentially (recovery, archiving, replication)")
        attr("nr_requests", 128, vol.nr_requests, "WAL writes are few and sequential")
    attr("max_sectors_kb", 256, vol.max_sectors_kb, "bounds request size; keeps latency steady")
    attr("rq_affinity", 2, 1, "complete I/O on the CPU that issued it")
    attr("add_random", 0, 0, "no entropy collection on every I/O")
    attr("nomerges", 0, 0, "let the block layer merge adjacent requests")


def _rotational_why(vol: Volume) -> str:
    """Why the flag is what the storage class says, in words that agree with the value."""
    value = 1 if vol.kind == "hdd" else 0
    if vol.kind == "san" and vol.bus in ("virtio", "xen"):
        return (f"san: {vol.bus} virtual disk, whatever backs it; its driver reports "
                f"{int(bool(vol.rotational))}: 0 stops the kernel treating it as a spinning disk")
    if vol.rotational is not None and int(vol.rotational) == value:
        return f"{vol.kind}: the device already reports {value}"
    return f"{vol.kind}: {value} tells the kernel (and tools) what the device is"


def _md(inputs: TuneInputs, emit: Emit) -> None:
    levels = {inputs.hardware.data_volume.raid_level, inputs.hardware.wal_volume.raid_level}
    parity = bool(levels & {"5", "6", "raid5", "raid6"})
    emit("md", "MD_STRIPE_CACHE_SIZE", "stripe_cache_size", "storage", "sysfs",
         8192 if parity else "n/a", "256",
         "parity RAID: cache whole stripes to avoid read-modify-write" if parity
         else "only parity RAID (5/6) has a stripe cache")


def _paths(inputs: TuneInputs, emit: Emit) -> None:
    hw = inputs.hardware
    g = "pg_paths"
    data_mount = hw.data_volume.mount or "/data"
    wal_mount = hw.wal_volume.mount if hw.separate_wal else data_mount
    emit(g, "PG_VERSION", "pg_version", "postgresql", "info", inputs.pg_major, "",
         "--pg-version / the target's binaries")
    emit(g, "PG_DATA_DIR", "data_directory", "postgresql", "info",
         f"{data_mount.rstrip('/')}/postgresql", "", "on the data volume")
    emit(g, "PG_WAL_DIR", "wal_directory", "postgresql", "info",
         f"{(wal_mount or '/wal').rstrip('/')}/pg_wal", "",
         "on the WAL volume (initdb --waldir)" if hw.separate_wal else "WAL shares the data volume")
    emit(g, "PG_LISTEN_ADDRESSES", "listen_addresses", "postgresql", "info", "*", "localhost",
         "clients on other hosts (pgdyno's own servers listen on 127.0.0.1 only)")
    emit(g, "PG_PORT", "port", "postgresql", "info", 5432, "5432", "standard port")


# ----- PostgreSQL -------------------------------------------------------------------------------

def _pg_memory(inputs: TuneInputs, mem: MemoryPlan, pg: Emit) -> None:
    g = "pg_memory"
    ram = human_bytes(mem.ram)
    if mem.connections is not None:
        pg(g, "max_connections", mem.connections, mem.room.arithmetic())
    pg(g, "shared_buffers", fmt_bytes(mem.shared),
       f"{mem.shared_share:.0%} of RAM {ram}: the OS page cache keeps the rest")
    if mem.huge_reserved:
        pg(g, "huge_pages", "on", f"{inputs.hardware.huge_pages_total} huge pages reserved >= "
           f"{mem.huge_pages} needed")
    else:
        pg(g, "huge_pages", "try", f"{inputs.hardware.huge_pages_total} huge pages reserved < "
           f"{mem.huge_pages} needed: try, so the server still starts")
    cap_note = " (capped)" if mem.work_mem_uncapped > mem.work_mem else ""
    pg(g, "work_mem", fmt_bytes(mem.work_mem),
       f"memory budget: ({BUDGET_RAM_SHARE:.0%} of RAM - shared_buffers - autovacuum) / "
       f"({mem.budget_connections} connections x {BUDGET_WORK_MEM_FACTOR}){cap_note}")
    pg(g, "maintenance_work_mem", fmt_bytes(mem.maintenance),
       f"RAM {ram} / 16, 64MB .. 2GB")
    pg(g, "autovacuum_work_mem", fmt_bytes(mem.av_mem),
       f"{mem.av_workers} autovacuum workers each take it: maintenance_work_mem capped at 1GB")
    pg(g, "effective_cache_size", fmt_bytes(mem.effective_cache),
       f"{mem.ecs_share:.0%} of RAM {ram}: shared_buffers plus the page cache it can count on")


def _pg_io(inputs: TuneInputs, specs: SettingSpecs, pg: Emit) -> None:
    g = "pg_io"
    kind = inputs.hardware.data_volume.kind
    pg(g, "random_page_cost", 4 if kind == "hdd" else 1.1,
       f"data volume {kind}: " + ("seeks cost 4x a sequential read" if kind == "hdd"
                                   else "random reads cost about what sequential ones do"))
    pg(g, "seq_page_cost", 1.0, "the planner's unit of cost")
    eio = {"nvme": 256, "ssd": 200, "san": 200, "hdd": 2}[kind]
    why = {"nvme": "NVMe queues take hundreds of requests at once",
           "ssd": "SSD internal parallelism", "san": "network storage needs depth to reach "
           "its provisioned IOPS", "hdd": "one actuator per disk"}[kind]
    pg(g, "effective_io_concurrency", eio, f"data volume {kind}: {why}")
    pg(g, "maintenance_io_concurrency", eio, f"data volume {kind}: same depth for vacuum")
    if inputs.pg_major >= 18 and "io_method" in specs:
        pg(g, "io_method", "worker", "works in every build and container; measure io_uring "
           "with --set io_method=io_uring where the build has it")
        workers = min(max(inputs.hardware.vcpus // 4, 3), 32)
        pg(g, "io_workers", workers, f"{inputs.hardware.vcpus} vCPUs / 4, 3 .. 32")


def _pg_wal(inputs: TuneInputs, specs: SettingSpecs, mem: MemoryPlan, pg: Emit) -> None:
    g = "pg_wal"
    cpus = inputs.hardware.vcpus
    if specs.has_enum_value("wal_compression", "lz4"):
        pg(g, "wal_compression", "lz4", "lz4 in this build: fewer full-page-write bytes for "
           "little CPU")
    elif specs.has_enum_value("wal_compression", "zstd") and cpus >= 8:
        pg(g, "wal_compression", "zstd", f"{cpus} vCPUs: spare CPU for zstd, no lz4 in build")
    elif cpus >= 16:
        pg(g, "wal_compression", "pglz", f"{cpus} vCPUs absorb pglz; no lz4 in this build")
    else:
        pg(g, "wal_compression", "off", f"only pglz in this build and {cpus} vCPUs: its CPU cost "
           "on every full-page write outweighs the WAL saved")
    if mem.wal_buffers:
        pg(g, "wal_buffers", fmt_bytes(mem.wal_buffers),
           "write-heavy: many backends insert WAL concurrently; 64MB avoids waits for space")
    else:
        pg(g, "wal_buffers", -1, "automatic: 1/32 of shared_buffers up to one 16MB segment")
    pg(g, "wal_writer_delay", "10ms" if inputs.write_heavy else "200ms",
       "write-heavy: flush WAL often so commits rarely wait for a big write" if
       inputs.write_heavy else "stock: little WAL")
    pg(g, "wal_writer_flush_after", "1MB", "stock: synchronous commits flush on their own")


def _wal_volume_budget(inputs: TuneInputs) -> tuple[int, str]:
    hw = inputs.hardware
    wal = hw.wal_volume
    if hw.separate_wal and wal.size_bytes:
        return int(wal.size_bytes * 0.6), f"60% of the {human_bytes(wal.size_bytes)} WAL volume"
    if wal.size_bytes:
        return int(wal.size_bytes * 0.04), (f"4% of the {human_bytes(wal.size_bytes)} volume "
                                            "shared with data")
    default = 16 * GB if inputs.write_heavy else 4 * GB
    return default, "WAL volume size unknown"


def _pg_checkpoint(inputs: TuneInputs, pg: Emit) -> None:
    g = "pg_checkpoint"
    budget, why = _wal_volume_budget(inputs)
    floor, ceiling = (4 * GB, 64 * GB) if inputs.write_heavy else (2 * GB, 16 * GB)
    max_wal = min(max(budget, floor), ceiling) // GB * GB
    pg(g, "max_wal_size", fmt_bytes(max_wal),
       f"{why}, {fmt_bytes(floor)} .. {fmt_bytes(ceiling)}: checkpoints come from the timeout, "
       "not WAL volume")
    min_wal = min(max(max_wal // 4, GB), 8 * GB)
    pg(g, "min_wal_size", fmt_bytes(min_wal), "max_wal_size / 4: segments recycled, not created")
    timeout = 15 * 60 if inputs.write_heavy else 10 * 60
    pg(g, "checkpoint_timeout", fmt_seconds(timeout),
       ("write-heavy: fewer full-page writes after each checkpoint; recovery stays minutes"
        if inputs.write_heavy else "fewer checkpoints; little to recover"))
    pg(g, "checkpoint_completion_target", 0.9, "spread checkpoint writes over 90% of the interval")


def _pg_commit(inputs: TuneInputs, pg: Emit) -> None:
    g = "pg_commit"
    kind = inputs.hardware.wal_volume.kind
    pg(g, "synchronous_commit", "on", "durability is not traded for speed without an explicit "
       "--set")
    if kind == "hdd" and inputs.write_heavy:
        pg(g, "commit_delay", 200, "WAL on a spinning disk: wait 200 us to share one fsync")
        pg(g, "commit_siblings", 5, "only when 5 other transactions are active")
    else:
        pg(g, "commit_delay", 0, f"WAL on {kind}: fsync is short, group commit happens anyway")
        pg(g, "commit_siblings", 5, "stock")


def _pg_bgwriter(inputs: TuneInputs, mem: MemoryPlan, pg: Emit) -> None:
    g = "pg_bgwriter"
    cpus = inputs.hardware.vcpus
    if inputs.write_heavy:
        pg(g, "bgwriter_delay", "50ms", "write-heavy: clean buffers before backends must")
        pages = min(1000, 100 + 100 * cpus)
        pg(g, "bgwriter_lru_maxpages", pages, f"100 + 100 x {cpus} vCPUs, cap 1000")
        pg(g, "bgwriter_lru_multiplier", 4.0, "anticipate bursts of buffer allocations")
    else:
        pg(g, "bgwriter_delay", "200ms", "read-mostly: stock")
        pg(g, "bgwriter_lru_maxpages", 100, "read-mostly: stock")
        pg(g, "bgwriter_lru_multiplier", 2.0, "read-mostly: stock")


def _pg_autovacuum(inputs: TuneInputs, mem: MemoryPlan, pg: Emit) -> None:
    g = "pg_autovacuum"
    kind = inputs.hardware.data_volume.kind
    cpus = inputs.hardware.vcpus
    pg(g, "autovacuum", "on", "never off: bloat and wraparound")
    pg(g, "autovacuum_max_workers", mem.av_workers, f"{cpus} vCPUs / 2, 3 .. 8")
    if inputs.write_heavy:
        pg(g, "autovacuum_naptime", "15s",
           "write-heavy: small hot tables (branches, tellers, districts) bloat within a minute")
        pg(g, "autovacuum_vacuum_scale_factor", 0.05, "write-heavy: vacuum at 5% dead rows")
        pg(g, "autovacuum_analyze_scale_factor", 0.02, "write-heavy: fresh statistics")
    else:
        pg(g, "autovacuum_naptime", "1min", "read-mostly: stock")
        pg(g, "autovacuum_vacuum_scale_factor", 0.1, "read-mostly: vacuum at 10% dead rows")
        pg(g, "autovacuum_analyze_scale_factor", 0.05, "read-mostly: analyze at 5% changed")
    limit = 400 if kind == "hdd" else 2000
    pg(g, "autovacuum_vacuum_cost_limit", limit, f"data volume {kind}: "
       + ("disk time is scarce" if kind == "hdd" else "10x stock; the device has headroom"))


def _pg_parallel(inputs: TuneInputs, pg: Emit) -> None:
    g = "pg_parallel"
    cpus = inputs.hardware.vcpus
    dw = inputs.db_type == "dw"
    pg(g, "max_worker_processes", max(8, cpus), f"{cpus} vCPUs, at least the stock 8")
    pg(g, "max_parallel_workers", max(2, cpus), f"{cpus} vCPUs")
    gather = max(1, min(cpus // 2, 8 if dw else 2))
    pg(g, "max_parallel_workers_per_gather", gather,
       f"{cpus} vCPUs / 2, cap {8 if dw else 2}: " + ("scans of large tables" if dw
                                                       else "OLTP gains little per query"))
    pg(g, "max_parallel_maintenance_workers", max(1, min(cpus // 2, 4)),
       f"{cpus} vCPUs / 2, cap 4: index builds")
    pg(g, "jit", "on" if dw else "off",
       "long analytic queries" if dw else f"{inputs.db_type}: short queries pay JIT compile time")


def _pg_planner_logging(inputs: TuneInputs, pg: Emit) -> None:
    pg("pg_planner", "default_statistics_target", 500 if inputs.db_type == "dw" else 100,
       f"{inputs.db_type}: " + ("skewed analytic joins" if inputs.db_type == "dw" else "stock"))
    g = "pg_logging"
    pg(g, "log_min_duration_statement", "1s", "statements slower than 1 s, for the report")
    pg(g, "log_temp_files", 0, "every spill to disk: evidence that work_mem is short")
    pg(g, "log_checkpoints", "on", "checkpoint timing for the I/O timeline")
    pg(g, "log_lock_waits", "on", "lock waits beyond deadlock_timeout")
    pg(g, "log_autovacuum_min_duration", "10s", "slow autovacuum runs")


def _benchmark(inputs: TuneInputs, mem: MemoryPlan, emit: Emit) -> None:
    """How to run each installed workload on this machine, in its own words (the workloads'
    ``advice``; none when the caller gave no advisor)."""
    if inputs.advisor is None:
        return
    facts = AdviceInputs(
        vcpus=inputs.hardware.vcpus, ram_bytes=mem.ram, dataset_bytes=inputs.dataset_bytes,
        max_connections=mem.connections or BASE_CONNECTIONS,
        pgdyno_sessions=mem.room.sessions, reserved_slots=mem.room.reserved_total)
    for advice in inputs.advisor.advice(facts):
        emit("benchmark", advice.key, advice.key.lower(), "benchmark", "info", advice.value,
             "", advice.why)
