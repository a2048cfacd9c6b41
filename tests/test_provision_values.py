"""Bad OS and storage values are refused up front, from the settings catalogue
(pgdyno.config.matrix_keys): `provision plan|apply --set`, a .env config file and a
campaign's ``[config.os]``. Each refusal is one line naming the key and the catalogue's
accepted values, exit 2, and nothing is created: no state file, no workdir, no run or
campaign directory. The catalogue's ranges are checked against what this kernel holds, and
against every .env file `pgdyno tune` writes, so they never refuse a real value."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.config import load_hardware, resolve_config
from pgdyno.config.envfile import parse_env, plan_to_env, settings_from_env
from pgdyno.config.matrix_keys import MATRIX_KEYS, SCHEDULERS, refusal
from pgdyno.config.profiles import catalogue_names
from pgdyno.provision.system import THP_ENABLED, chosen, sysctl_path
from tests.conftest import run_cli_here

SET_CASES: list[tuple[str, str]] = [
    # (--set item, words the one error line must hold besides the item)
    ("VM_SWAPPINESS=lots", "accepted: an integer from 0 to 200 (vm.swappiness)"),
    ("VM_SWAPPINESS=1000", "accepted: an integer from 0 to 200"),
    ("vm.swappiness=-1", "accepted: an integer from 0 to 200"),
    ("VM_SWAPPINESS=", "accepted: an integer from 0 to 200"),
    ("VM_NR_HUGEPAGES=1.5", "accepted: an integer from 0"),
    ("VM_DIRTY_BYTES=4096", "accepted: an integer from 8192"),
    ("VM_OVERCOMMIT_MEMORY=3", "accepted: an integer from 0 to 2"),
    ("TRANSPARENT_HUGEPAGE=sometimes", "accepted: one of always, madvise, never"),
    ("KERNEL_SEM=32000 1024000000 500", "accepted: 4 integers separated by spaces"),
    ("NET_IPV4_TCP_TW_REUSE=3", "accepted: an integer from 0 to 2"),
    ("ULIMIT_NOFILE=unlimited", "accepted: an integer from 1"),
    ("DATA_SCHEDULER=fastest", "accepted: one of none, mq-deadline, kyber, bfq"),
    ("DATA_READ_AHEAD_KB=64k", "accepted: an integer from 0"),
    ("WAL_NR_REQUESTS=2", "accepted: an integer from 4"),
    ("MD_STRIPE_CACHE_SIZE=16", "accepted: an integer from 17 to 32768"),
    ("XFS_DATA_SUNIT=big", "accepted: a size"),
    ("XFS_DATA_AGCOUNT=0", "accepted: an integer from 1"),
    ("DATA_MOUNT=data", "accepted: an absolute path"),
    ("XFS_MOUNT_OPTS_DATA=noatime;reboot", "accepted: mount options"),
    ("DATA_RAID_LEVEL=7", "accepted: one of none, 0, 1, 4, 5, 6, 10"),
    ("vm.dirty_ratio=101", "accepted: an integer from 0 to 100"),
    ("vm.no_such_sysctl=1", "no such sysctl on this kernel"),
    ("net.ipv4.conf=1", "a directory of sysctls"),
    ("kernel.ngroups_max=1", "read-only on this kernel"),
    ("kernel.pid_max=lots", "accepted: an integer, as /proc/sys/kernel/pid_max holds"),
]

COMMANDS = {
    "plan": ["provision", "plan"],
    "apply": ["provision", "apply", "--yes", "--results-dir", "res"],
    "dry-run": ["provision", "apply", "--results-dir", "res"],
}

CAMPAIGN = """
[campaign]
name = "values"
workloads = ["cpu"]
clients = [1]
repeat = 1

[bench]
duration = 1

[[config]]
label = "os"
{config}
[config.os]
{os}
"""

CAMPAIGN_CASES: list[tuple[str, str]] = [
    # ([config.os] line, words of the one error line)
    ('"vm.swappiness" = "lots"', "vm.swappiness=lots: accepted: an integer from 0 to 200"),
    ("VM_SWAPPINESS = 1000", "VM_SWAPPINESS=1000: accepted: an integer from 0 to 200"),
    ('"vm.swappiness" = 1.5', "vm.swappiness=1.5: accepted: an integer"),
    ('"vm.dirty_ratio" = "lots"', "vm.dirty_ratio=lots: accepted: an integer from 0 to 100"),
    ('"vm.no_such_sysctl" = 1', "vm.no_such_sysctl: no such sysctl on this kernel"),
    ('"kernel.ngroups_max" = 1', "kernel.ngroups_max: read-only on this kernel"),
    ('transparent_hugepage = "sometimes"', "accepted: one of always, madvise, never"),
    ('"kernel.sem" = "1 2"', "accepted: 4 integers separated by spaces"),
]


def _refused(tmp_path: Path, args: list[str], words: list[str]) -> None:
    """``pgdyno ARGS`` in ``tmp_path``: exit 2, one line holding ``words``, nothing made."""
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = run_cli_here(args, tmp_path / "work", cwd=tmp_path)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), out.stderr
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    assert not (tmp_path / "work").exists()  # no workdir, no state file
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("item", "accepted"), SET_CASES, ids=[c[0] for c in SET_CASES])
def test_bad_set_value_is_refused_before_a_plan(tmp_path: Path, command: str, item: str,
                                                accepted: str) -> None:
    key = item.partition("=")[0]
    _refused(tmp_path, [*COMMANDS[command], "--set", item],
             [f"--set {key}", accepted])


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_bad_value_in_an_env_config_file(tmp_path: Path, command: str) -> None:
    (tmp_path / "os.env").write_text("VM_DIRTY_BYTES=268435456\nVM_SWAPPINESS=lots\n")
    _refused(tmp_path, [*COMMANDS[command], "--config", "os.env"],
             ["os.env: VM_SWAPPINESS=lots: accepted: an integer from 0 to 200"])


def test_bad_value_in_an_env_config_file_refuses_tune_and_bench(tmp_path: Path) -> None:
    (tmp_path / "os.env").write_text("DATA_SCHEDULER=fastest\n")
    words = ["os.env: DATA_SCHEDULER=fastest: accepted: one of none, mq-deadline"]
    _refused(tmp_path, ["tune", "--hardware", "r8g.xlarge", "--config", "os.env"], words)
    _refused(tmp_path, ["bench", "tpcb", "--scale", "1", "--duration", "2", "--clients", "1",
                        "--no-progress", "--results-dir", "res", "--config", "os.env"], words)


@pytest.mark.parametrize(("line", "accepted"), CAMPAIGN_CASES, ids=[c[0] for c in CAMPAIGN_CASES])
def test_bad_config_os_is_refused_when_the_campaign_is_loaded(tmp_path: Path, line: str,
                                                               accepted: str) -> None:
    (tmp_path / "c.toml").write_text(CAMPAIGN.format(config="", os=line))
    _refused(tmp_path, ["campaign", "c.toml", "--results-dir", "res", "--no-progress",
                        "--allow-os-changes"],
             ["campaign c.toml: [[config]] os [config.os]", accepted])


def test_campaign_config_file_with_a_bad_os_value(tmp_path: Path) -> None:
    (tmp_path / "os.env").write_text("VM_OVERCOMMIT_MEMORY=9\n")
    (tmp_path / "c.toml").write_text(CAMPAIGN.format(config='config = "os.env"',
                                                     os='"vm.swappiness" = 10'))
    _refused(tmp_path, ["campaign", "c.toml", "--results-dir", "res", "--no-progress",
                        "--allow-os-changes"],
             ["os.env: VM_OVERCOMMIT_MEMORY=9: accepted: an integer from 0 to 2"])


# ----- the catalogue's ranges accept every real value -----------------------------------------

def test_every_os_and_storage_key_has_a_type() -> None:
    untyped = [k for k, spec in MATRIX_KEYS.items()
               if spec.layer in ("os", "storage") and spec.accepts is None]
    assert untyped == []


@pytest.mark.parametrize("hardware", catalogue_names())
def test_every_env_file_tune_writes_reads_back(hardware: str) -> None:
    for config in ("default", "pgtune", "tuned"):
        for workload in ("oltp", "olap", "web"):
            resolved = resolve_config(config, [], hardware=load_hardware(hardware),
                                      workload=workload, pg_major=18)
            assert resolved.plan is not None
            values = parse_env(plan_to_env(resolved.plan), "x.env")
            settings_from_env(values, "x.env")  # raises on any value it refuses


def test_raid_values_the_engine_plans_are_accepted() -> None:
    from pgdyno.provision.plan import with_devices

    profile = with_devices(load_hardware("r8g.xlarge"), ("/dev/a", "/dev/b", "/dev/c",
                                                         "/dev/d"), ("/dev/e", "/dev/f"))
    resolved = resolve_config("tuned", [], hardware=profile, workload="oltp", pg_major=18)
    assert resolved.plan is not None
    values = parse_env(plan_to_env(resolved.plan), "x.env")
    assert values["DATA_RAID_LEVEL"] == "10" and values["XFS_LOG_STRIPE_UNIT"] == "1b"
    settings_from_env(values, "x.env")


def test_this_kernels_own_values_are_accepted() -> None:
    """Every catalogue sysctl and block queue value this machine holds passes the catalogue
    (the byte forms of the dirty limits read 0 while the ratios rule, a value the kernel
    refuses to be written)."""
    for key, spec in MATRIX_KEYS.items():
        if spec.apply != "sysctl" or not sysctl_path(spec.name).exists():
            continue
        live = " ".join(sysctl_path(spec.name).read_text().split())
        if spec.name in ("vm.dirty_bytes", "vm.dirty_background_bytes") and live == "0":
            continue
        assert refusal(key, live) == "", (key, live)
    if THP_ENABLED.exists():
        assert refusal("TRANSPARENT_HUGEPAGE", chosen(THP_ENABLED.read_text().strip())) == ""
    for queue in Path("/sys/block").glob("*/queue"):
        for attr in ("read_ahead_kb", "nr_requests", "max_sectors_kb", "rq_affinity",
                     "add_random", "nomerges", "rotational"):
            if (queue / attr).exists():
                live = (queue / attr).read_text().strip()
                assert refusal(f"DATA_{attr.upper()}", live) == "", (queue, attr, live)
        if (queue / "scheduler").exists():
            assert chosen((queue / "scheduler").read_text().strip()) in SCHEDULERS.choices


def test_a_good_value_still_plans(tmp_path: Path) -> None:
    out = run_cli_here(["provision", "plan", "--set", "VM_SWAPPINESS=17", "--set",
                        "kernel.pid_max=40000", "--only", "VM_SWAPPINESS,kernel.pid_max",
                        "--live-only", "--format", "commands"], tmp_path / "work")
    assert out.returncode == 0, out.stderr
    assert "sysctl -w vm.swappiness=17" in out.stdout
    assert "sysctl -w kernel.pid_max=40000" in out.stdout
