"""Hardware profiles: the catalogue, TOML and .env round trips, detection on this host."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from pgdyno.config.detect import cgroup_limits, detect_profile, meminfo
from pgdyno.config.envfile import profile_from_env, profile_to_env
from pgdyno.config.hardware import HardwareProfile
from pgdyno.config.profiles import (
    catalogue_names,
    load_hardware,
    profile_from_toml,
    profile_to_toml,
)
from pgdyno.config.units import GB, KB, MB, TB, parse_size
from pgdyno.errors import UsageError


def test_catalogue_has_the_example_machines() -> None:
    names = catalogue_names()
    for name in ("r8g.large", "r8g.xlarge", "r8g.2xlarge", "r8g.4xlarge", "epyc9254-dc3000me"):
        assert name in names
    xl = load_hardware("r8g.xlarge")
    assert (xl.vcpus, xl.ram_bytes) == (4, 32 * GB)
    assert xl.network_gbps and xl.ebs_gbps and xl.price_month_usd and xl.spot_price_month_usd
    assert xl.spot_price_month_usd < xl.price_month_usd
    epyc = load_hardware("epyc9254-dc3000me")
    assert epyc.vcpus == 96 and epyc.numa_nodes == 2 and epyc.data_volume.kind == "nvme"
    # sizes double along the r8g family
    sizes = [load_hardware(n) for n in ("r8g.large", "r8g.xlarge", "r8g.2xlarge", "r8g.4xlarge")]
    assert [p.vcpus for p in sizes] == [2, 4, 8, 16]
    assert [p.ram_bytes // GB for p in sizes] == [16, 32, 64, 128]


@pytest.mark.parametrize("name", ["r8g.xlarge", "epyc9254-dc3000me"])
def test_toml_and_dict_round_trip(name: str) -> None:
    profile = load_hardware(name)
    again = profile_from_toml(profile_to_toml(profile), origin="x")
    assert again == profile
    assert HardwareProfile.from_dict(json.loads(json.dumps(profile.to_dict()))) == profile


def test_env_round_trip_keeps_what_tuning_needs() -> None:
    profile = load_hardware("r8g.2xlarge")
    again = profile_from_env(profile_to_env(profile), origin="hardware.env")
    assert (again.name, again.vcpus, again.ram_bytes) == ("r8g.2xlarge", 8, 64 * GB)
    assert again.network_gbps == profile.network_gbps and again.ebs_gbps == profile.ebs_gbps
    assert again.data_volume.kind == profile.data_volume.kind
    assert again.data_volume.iops == profile.data_volume.iops


def test_user_profile_file_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "box.toml"
    good.write_text('name = "box"\nvcpus = 8\nram = "64GB"\n[data]\nkind = "nvme"\n'
                    'size = "2TB"\n[wal]\nkind = "ssd"\ndisk_count = 2\n')
    profile = load_hardware(str(good))
    assert profile.separate_wal and profile.wal_volume.disk_count == 2
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nvcpus = 2\nram = "8GB"\n[data]\nkind = "floppy"\n')
    with pytest.raises(UsageError, match="kind"):
        load_hardware(str(bad))
    with pytest.raises(UsageError, match="r8g.xlarge"):
        load_hardware("no-such-machine")


def _cgroup_file_limits() -> tuple[float | None, int | None]:
    """Read this process's cgroup limits straight from /sys/fs/cgroup (v1 or v2)."""
    cpus = mem = None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, ctrls, path = line.split(":", 2)
        rel = path.strip("/")
        if hier == "0" and not ctrls:
            for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                d = base / rel
                if (d / "cpu.max").exists():
                    q, p = (d / "cpu.max").read_text().split()
                    if q != "max":
                        cpus = int(q) / int(p)
                if (d / "memory.max").exists():
                    text = (d / "memory.max").read_text().strip()
                    if text != "max":
                        mem = int(text)
        elif "memory" in ctrls.split(","):
            f = Path("/sys/fs/cgroup/memory") / rel / "memory.limit_in_bytes"
            if f.exists() and int(f.read_text()) < 1 << 60:
                mem = int(f.read_text())
        elif "cpu" in ctrls.split(","):
            d = Path("/sys/fs/cgroup/cpu") / rel
            if (d / "cpu.cfs_quota_us").exists() and int((d / "cpu.cfs_quota_us").read_text()) > 0:
                cpus = int((d / "cpu.cfs_quota_us").read_text()) / int(
                    (d / "cpu.cfs_period_us").read_text())
    return cpus, mem


def test_detect_on_this_host_is_plausible_and_cgroup_aware() -> None:
    profile = detect_profile("/var/tmp")
    host_cpus = len(os.sched_getaffinity(0))
    host_ram = meminfo()["MemTotal"] * 1024
    quota, limit = _cgroup_file_limits()
    want_cpus = host_cpus if quota is None else max(1, min(host_cpus, math.ceil(quota)))
    want_ram = host_ram if limit is None else min(host_ram, limit)
    assert profile.vcpus == want_cpus
    assert profile.ram_bytes <= want_ram  # a parent cgroup may bind tighter than our own
    assert profile.ram_bytes > 256 * 1024 * 1024
    assert profile.kernel == os.uname().release
    assert profile.numa_nodes >= 1 and profile.cpu_model
    assert profile.data is not None and profile.data.fstype and profile.data.mount
    assert profile.devices, "no block devices found in /sys/block"
    assert profile.huge_pages_total == meminfo().get("HugePages_Total", 0)


def test_cgroup_v2_quota_and_limit_are_read(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    (root / "a" / "b").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "a" / "cpu.max").write_text("150000 100000\n")
    (root / "a" / "b" / "cpu.max").write_text("max 100000\n")
    (root / "a" / "b" / "memory.max").write_text(str(4 * GB) + "\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/a/b\n")
    limits = cgroup_limits(proc, root)
    assert limits.cpus == 1.5 and limits.memory_bytes == 4 * GB


@pytest.mark.parametrize(("text", "expected"), [
    ("500MB", 500 * MB), ("3GB", 3 * GB), ("1.5GiB", int(1.5 * GB)), ("100k", 100 * KB),
    ("4096", 4096), ("512B", 512), ("32g", 32 * GB), ("2 TiB", 2 * TB), (" 7mi ", 7 * MB),
    (".5G", GB // 2), ("8KIB", 8 * KB), ("0", 0),
])
def test_parse_size_accepts_the_usual_spellings(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "abc", "-1GB", "1e3", "5iB", "5PB", "1.", "10 MBs"])
def test_parse_size_refuses_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a size: .*e\.g\. 500MB, 3GB, 1\.5GiB"):
        parse_size(text)


# ----- detection against this host's /sys --------------------------------------------------

VIRTUAL_SUBSYSTEMS = ("virtio", "xen")


def sys_block_kinds() -> dict[str, str]:
    """Each disk's storage class from /sys/block as read here: a paravirtual disk is virtual
    storage (san) whatever its rotational flag says; NVMe is nvme; otherwise the flag."""
    kinds = {}
    for entry in sorted(Path("/sys/block").iterdir()):
        if entry.name.startswith(("loop", "ram", "zram", "sr", "fd")):
            continue
        subsystem = entry / "device" / "subsystem"
        bus = Path(os.path.realpath(subsystem)).name if subsystem.exists() else ""
        if (entry / "md").is_dir() or (entry / "dm").is_dir():
            bus = "md/dm"
        model = (entry / "device" / "model").read_text().strip() \
            if (entry / "device" / "model").exists() else ""
        rotational = (entry / "queue" / "rotational").read_text().strip() == "1"
        if bus in VIRTUAL_SUBSYSTEMS or "QEMU" in model or "Elastic Block Store" in model:
            kinds[entry.name] = "san"
        elif bus.startswith("nvme"):
            kinds[entry.name] = "nvme"
        else:
            kinds[entry.name] = "hdd" if rotational else "ssd"
    return kinds


def test_disk_kind_follows_the_device_type_and_flag() -> None:
    """The bug: vda (virtio, rotational=1) was called both rotational and san."""
    from pgdyno.config.detect import describe_device

    expected = sys_block_kinds()
    profile = detect_profile("/var/tmp")
    found = {d.name: d for d in profile.devices}
    assert set(found) == set(expected)
    for name, kind in expected.items():
        dev = found[name]
        assert dev.kind == kind, name
        words = describe_device(dev)
        assert f"({kind})" in words
        others = {"san", "nvme", "ssd", "hdd"} - {kind}
        assert not any(f"({k})" in words for k in others), words
        if kind != "hdd":
            assert "spinning" not in words and "rotational disk" not in words
    data = profile.data_volume
    device = data.device.removeprefix("/dev/")
    if device in expected:
        assert data.kind == expected[device]


def test_vcpu_and_ram_lines_name_their_own_sources() -> None:
    """The bug: RAM_GB's rationale was a copy of VCPU's (both lines named both sources)."""
    from pgdyno.config import resolve_config

    profile = detect_profile("/var/tmp")
    r = resolve_config("tuned", [], pg_major=18, workload="oltp", hardware=profile)
    rows = {s.key: s for s in r.plan.settings if s.group == "instance"}
    vcpu, ram = rows["VCPU"].rationale, rows["RAM_GB"].rationale
    assert vcpu != ram
    assert f"sched_getaffinity ({len(os.sched_getaffinity(0))})" in vcpu and "RAM" not in vcpu
    assert "/proc/meminfo" in ram and "vCPU" not in ram and "sched_getaffinity" not in ram
    budget_ram = next(line for line in r.plan.sizing if line.label == "RAM for the database")
    assert budget_ram.formula == ram


def test_aws_keys_only_for_aws_machines() -> None:
    from pgdyno.config import resolve_config

    vendor = Path("/sys/class/dmi/id/sys_vendor")
    on_aws = vendor.exists() and vendor.read_text().strip() == "Amazon EC2"
    host = resolve_config("tuned", [], pg_major=18, workload="oltp",
                          hardware=detect_profile("/var/tmp"))
    assert any(s.key == "EBS_GBPS" for s in host.plan.settings) == on_aws
    r8g = resolve_config("tuned", [], pg_major=18, workload="oltp",
                         hardware=load_hardware("r8g.large"))
    ebs = next(s for s in r8g.plan.settings if s.key == "EBS_GBPS")
    assert ebs.value == f"{load_hardware('r8g.large').ebs_gbps:g}"
    epyc = resolve_config("tuned", [], pg_major=18, workload="oltp",
                          hardware=load_hardware("epyc9254-dc3000me"))
    assert not any(s.key == "EBS_GBPS" for s in epyc.plan.settings)


def test_detected_profile_round_trips_with_os_settings() -> None:
    """Dotted sysctl names survive the TOML file (they must not become nested tables)."""
    profile = detect_profile("/var/tmp")
    assert profile.os_settings["kernel.sem"] == " ".join(
        Path("/proc/sys/kernel/sem").read_text().split())
    assert profile_from_toml(profile_to_toml(profile), origin="x") == profile
