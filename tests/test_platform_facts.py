"""The environment table's platform rows: CPU clock and governor, NUMA
nodes, the mounts of the data and WAL directories, NVMe PCIe links. Read from a recorded
/sys and /proc tree (tests/data/sysfs_sample) and from this machine, each checked against
what the test reads from the same files itself; rendered "not exposed" where the host says
nothing, and left out for manifests older than them."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict
from pathlib import Path

import psutil

from pgdyno.reports.platform_rows import platform_rows
from pgdyno.runner.environment import describe_directories, host_facts
from pgdyno.telemetry.platform_facts import collect_platform
from tests.answer import markdown_table
from tests.conftest import CPU_RUN, run_cli_here

SAMPLE = Path(__file__).parent / "data" / "sysfs_sample"
CPU = Path("/sys/devices/system/cpu")


def _text(path: Path) -> str:
    return path.read_text().strip()


def test_recorded_tree_with_cpufreq_numa_and_nvme() -> None:
    dirs = {"data": "/data/pg/base", "wal": "/mnt/wal disk/pg_wal"}
    facts = collect_platform(dirs, root=SAMPLE)
    cpus = sorted((SAMPLE / "sys/devices/system/cpu").glob("cpu[0-9]*"))
    cpu0 = SAMPLE / "sys/devices/system/cpu/cpu0/cpufreq"
    assert facts.cpu_base_mhz == int(_text(cpu0 / "base_frequency")) / 1000
    assert facts.cpu_base_source == "cpufreq base_frequency"
    assert facts.cpu_max_mhz == int(_text(cpu0 / "cpuinfo_max_freq")) / 1000
    governors = [_text(c / "cpufreq/scaling_governor") for c in cpus]
    assert facts.governors == {g: governors.count(g) for g in set(governors)}
    assert sum(facts.governors.values()) == 4 and len(facts.governors) == 2
    assert facts.numa_nodes == len(list((SAMPLE / "sys/devices/system/node").glob("node*")))
    # The mounts: the longest mount point holding each directory, options as /proc/mounts
    # joins them, the escaped space decoded.
    by_role = {m.role: m for m in facts.mounts}
    assert (by_role["data"].mount_point, by_role["data"].fstype,
            by_role["data"].source) == ("/data", "xfs", "/dev/md0")
    assert by_role["data"].options.split(",")[:2] == ["rw", "noatime"]
    assert {"inode64", "logbufs=8", "noquota"} <= set(by_role["data"].options.split(","))
    assert by_role["wal"].mount_point == "/mnt/wal disk"
    assert by_role["wal"].options.count("rw") == 1
    nvme0 = SAMPLE / "sys/class/nvme/nvme0/device"
    link = facts.nvme_links[0]
    assert (link.speed, link.width) == (_text(nvme0 / "current_link_speed"),
                                       _text(nvme0 / "current_link_width"))
    assert (link.generation, link.max_generation) == (4, 5)  # 16 GT/s is Gen4, 32 Gen5
    assert facts.nvme_links[1].speed == ""  # a fabrics controller has no PCI link
    rows = {r[0]: r[1] for r in platform_rows([{"platform": asdict(facts)}])}
    assert rows["CPU clock"] == ("base 2,900 MHz (cpufreq base_frequency), "
                                 "max 4,151 MHz (cpufreq cpuinfo_max_freq)")
    assert rows["CPU governor"] == "performance on 3 CPUs, powersave on 1 CPU (intel_pstate)"
    assert rows["NUMA nodes"] == "2"
    assert rows["Mount (wal)"].startswith("xfs on /mnt/wal disk (/dev/nvme1n1): rw,noatime")
    assert rows["PCIe link (NVMe)"] == (
        "nvme0 (SAMPLE NVME SSD 7.68TB): PCIe Gen4 x4 (16.0 GT/s PCIe), capable of Gen5 x4; "
        "nvme1 (SAMPLE NVME FABRICS): link not exposed")


def test_without_cpufreq_the_clock_is_not_guessed(tmp_path: Path) -> None:
    """A tree without cpufreq, NUMA or NVMe: nothing made up; the model name's stated base
    (Intel's "@ 2.50GHz") is used and named, /proc/cpuinfo's clock is only "when read"."""
    shutil.copytree(SAMPLE / "proc", tmp_path / "proc")
    cpuinfo = tmp_path / "proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace("Sample CPU", "Sample CPU @ 2.50GHz", 1))
    facts = collect_platform({}, root=tmp_path)
    assert (facts.cpu_base_mhz, facts.cpu_base_source) == (2500.0, "model name")
    assert facts.cpu_max_mhz is None and facts.governors == {} and facts.numa_nodes is None
    assert facts.cpu_current_mhz == 3400.012  # the first processor's, not the second's
    rows = {r[0]: r[1] for r in platform_rows([{"platform": asdict(facts)}])}
    assert rows["CPU clock"] == ("base 2,500 MHz (model name), max not exposed; 3,400 MHz "
                                 "when read (/proc/cpuinfo cpu MHz: neither base nor max)")
    assert rows["CPU governor"] == "not exposed (no cpufreq)"
    assert rows["NUMA nodes"] == "not exposed"
    assert rows["PCIe link (NVMe)"] == "no NVMe controller (no /sys/class/nvme)"


def _mountinfo_options(path: Path) -> tuple[str, str]:
    """(mount point, options) of the mount holding ``path``, from psutil's reading of
    /proc/self/mounts: the kernel's own joining of mount and file-system options."""
    best = None
    for part in psutil.disk_partitions(all=True):
        point = part.mountpoint
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mountpoint)):
            best = part
    assert best is not None
    return best.mountpoint, best.opts


def test_this_machine_against_its_own_files(tmp_path: Path) -> None:
    data = tmp_path / "not-yet" / "base"  # created later: its parent's mount
    host = host_facts()
    describe_directories(host, {"data": data, "wal": Path("/dev/shm")})
    facts = host.platform
    assert facts is not None
    nodes = [n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)] \
        if Path("/sys/devices/system/node").is_dir() else []
    assert facts.numa_nodes == (len(nodes) if nodes else None)
    by_role = {m.role: m for m in facts.mounts}
    assert (by_role["data"].mount_point, by_role["data"].options) == \
        _mountinfo_options(tmp_path.resolve())
    assert (by_role["wal"].mount_point, by_role["wal"].options) == \
        _mountinfo_options(Path("/dev/shm"))
    cpufreq = CPU / "cpu0" / "cpufreq"
    # The governor is also a kernel setting the run started under (compare's "Changes").
    assert ("scaling_governor" in host.kernel_settings) == bool(facts.governors)
    if not cpufreq.exists():  # this VM: no cpufreq, so no governor and no max clock
        assert facts.governors == {} and facts.cpu_max_mhz is None
        assert facts.cpu_base_source in ("", "model name")
    else:
        governors = [_text(c / "cpufreq/scaling_governor") for c in CPU.glob("cpu[0-9]*")
                     if (c / "cpufreq/scaling_governor").exists()]
        assert sum(facts.governors.values()) == len(governors)
    mhz = next((line.split(":")[1] for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("cpu MHz")), None)
    assert facts.cpu_current_mhz == (float(mhz) if mhz else None)
    nvme = Path("/sys/class/nvme")
    assert facts.nvme_exposed == nvme.is_dir()
    assert len(facts.nvme_links) == (len(list(nvme.glob("nvme*"))) if nvme.is_dir() else 0)


def test_a_run_records_them_and_its_report_shows_them(tmp_path: Path) -> None:
    """One `bench cpu` (no server, ~3 s): the manifest's platform and the report's rows."""
    results = tmp_path / "results"
    out = run_cli_here([*CPU_RUN, "--results-dir", str(results)], tmp_path)
    assert out.returncode == 0, out.stderr
    run = next(results.rglob("manifest.json")).parent
    platform = json.loads((run / "manifest.json").read_text())["host"]["platform"]
    rows = {r[0]: r[1] for r in markdown_table((run / "report.md").read_text(),
                                               "| Item | Value |")[2:]}
    nodes = len([n for n in os.listdir("/sys/devices/system/node")
                 if re.fullmatch(r"node\d+", n)])
    assert platform["numa_nodes"] == nodes and rows["NUMA nodes"] == str(nodes)
    if not (CPU / "cpu0" / "cpufreq").exists():
        assert rows["CPU governor"] == "not exposed (no cpufreq)"
        assert "max not exposed" in rows["CPU clock"] or \
            rows["CPU clock"].startswith("not exposed (no cpufreq)")
    if not Path("/sys/class/nvme").is_dir():
        assert rows["PCIe link (NVMe)"] == "no NVMe controller (no /sys/class/nvme)"


def test_older_manifests_keep_their_table() -> None:
    """No machine with platform facts: no rows; one without beside one with: "–"."""
    assert platform_rows([{"hostname": "old"}]) == []
    facts = asdict(collect_platform({}, root=SAMPLE))
    rows = platform_rows([{"platform": facts}, {"hostname": "old"}])
    assert [r[0] for r in rows] == ["CPU clock", "CPU governor", "NUMA nodes",
                                    "PCIe link (NVMe)"]
    assert all(r[2] == "–" for r in rows)


def test_an_ssh_host_is_read_by_the_same_code() -> None:
    """--ssh: the facts come from the database host, read there by this module's source;
    the stand-in host is this machine, so they are this machine's (the clock when read
    aside: it may move between two readings)."""
    from dataclasses import replace

    from pgdyno.targets.ssh import SshTransport
    from pgdyno.telemetry.remote import platform_of
    from tests.sshhost import ssh_hosts

    with ssh_hosts(1) as (host,), SshTransport(host.destination, host.config_file) as ssh:
        remote = platform_of(ssh, {"data": "/dev/shm/pgdyno-not-yet"})
    local = collect_platform({"data": "/dev/shm/pgdyno-not-yet"})
    assert remote is not None and remote.mounts[0].mount_point == "/dev/shm"
    assert replace(remote, cpu_current_mhz=None) == replace(local, cpu_current_mhz=None)
