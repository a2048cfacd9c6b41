"""Provisioning on this machine, as root: apply, verify and revert real kernel settings,
loop devices and XFS. Every test leaves the machine as it found it, even when it fails: the
``machine`` fixture snapshots what provisioning may touch and restores it in teardown."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgdyno.provision import ApplyFailed, apply_settings, plan_settings, revert
from pgdyno.provision.plan import OWNED_FILES
from pgdyno.provision.system import THP_ENABLED, is_root, mounts, sysctl_path
from tests.conftest import make_shared_dir, run_cli_here

# It changes the machine (kernel settings, loop devices, mkfs.xfs): out of the quick tier,
# with the other tests that do real work on the host.
pytestmark = [pytest.mark.server,
              pytest.mark.skipif(not is_root(), reason="changes kernel settings: root only")]

SYSCTLS = ("vm.swappiness", "vm.dirty_background_ratio", "vm.dirty_background_bytes",
           "kernel.sched_autogroup_enabled", "vm.nr_hugepages")
QUEUE = ("read_ahead_kb", "scheduler", "nr_requests", "rq_affinity")
ETC_DIRS = ("/etc/udev/rules.d", "/etc/udev", "/etc/tmpfiles.d")


def _read(path: Path) -> str:
    return path.read_text().strip()


def _bracket(text: str) -> str:
    return text[text.index("[") + 1:text.index("]")] if "[" in text else text


@pytest.fixture
def machine() -> Iterator[None]:
    """Snapshot of every sysctl, file and directory these tests may change; restored after."""
    values = {name: _read(sysctl_path(name)) for name in SYSCTLS}
    thp = _bracket(_read(THP_ENABLED))
    files = {p: (Path(p).read_text() if Path(p).exists() else None)
             for p in (*OWNED_FILES, "/etc/fstab")}
    dirs = {d: Path(d).exists() for d in ETC_DIRS}
    try:
        yield
    finally:
        for path, text in files.items():
            if text is None:
                Path(path).unlink(missing_ok=True)
            elif Path(path).read_text() != text:
                Path(path).write_text(text)
        for d, existed in dirs.items():
            if not existed:
                with contextlib.suppress(OSError):
                    Path(d).rmdir()
        # the byte and ratio forms zero each other: write whichever was in use
        for name in ("vm.swappiness", "kernel.sched_autogroup_enabled", "vm.nr_hugepages"):
            sysctl_path(name).write_text(values[name])
        if values["vm.dirty_background_bytes"] != "0":
            sysctl_path("vm.dirty_background_bytes").write_text(values["vm.dirty_background_bytes"])
        else:
            sysctl_path("vm.dirty_background_ratio").write_text(values["vm.dirty_background_ratio"])
        THP_ENABLED.write_text(thp)
    assert {name: _read(sysctl_path(name)) for name in SYSCTLS} == values


@pytest.fixture
def loops() -> Iterator[list[str]]:
    """Two loop devices on sparse 1 GB files; unmounted, detached and removed afterwards."""
    base = make_shared_dir("pgdyno-provision-")
    devices: list[str] = []
    saved: dict[str, dict[str, str]] = {}
    try:
        for n in range(2):
            image = base / f"disk{n}.img"
            with open(image, "wb") as handle:
                handle.truncate(1 << 30)
            dev = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True,
                                 text=True, check=True).stdout.strip()
            devices.append(dev)
            queue = Path("/sys/block") / Path(dev).name / "queue"
            saved[dev] = {a: _read(queue / a) for a in QUEUE}
        yield devices
    finally:
        for dev in devices:
            for _, mp, _, _ in [m for m in mounts() if m[0] == dev]:
                subprocess.run(["umount", mp], check=False)
            subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _cli(args: list[str], prov_dir: Path):
    return run_cli_here(["provision", *args], prov_dir)


@pytest.fixture
def prov_dir() -> Iterator[Path]:
    path = make_shared_dir("pgdyno-provision-work-")
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def test_apply_verify_revert_sysctl_hugepages_thp_and_queue(machine, loops, prov_dir) -> None:
    dev = loops[0]
    queue = Path("/sys/block") / Path(dev).name / "queue"
    before = {"swappiness": _read(sysctl_path("vm.swappiness")),
              "ratio": _read(sysctl_path("vm.dirty_background_ratio")),
              "hugepages": _read(sysctl_path("vm.nr_hugepages")),
              "thp": _bracket(_read(THP_ENABLED)), "read_ahead": _read(queue / "read_ahead_kb"),
              "scheduler": _bracket(_read(queue / "scheduler"))}
    new_sched = "mq-deadline" if before["scheduler"] != "mq-deadline" else "none"
    new_thp = "never" if before["thp"] != "never" else "madvise"
    env = prov_dir / "os.env"
    env.write_text(f"VM_SWAPPINESS={int(before['swappiness']) % 50 + 7}\n"
                   f"VM_DIRTY_BACKGROUND_RATIO={int(before['ratio']) % 9 + 3}\n"
                   f"VM_NR_HUGEPAGES={int(before['hugepages']) + 4}\n"
                   f"TRANSPARENT_HUGEPAGE={new_thp}\n"
                   f"DATA_READ_AHEAD_KB=64\nDATA_SCHEDULER={new_sched}\n")
    args = ["--config", str(env), "--data-devices", dev, "--results-dir", str(prov_dir / "res"),
            "--context", "t--provision"]
    plan = _cli(["plan", *args[:4], "--format", "json"], prov_dir)
    assert plan.returncode == 0, plan.stderr
    steps = json.loads(plan.stdout)["steps"]
    assert {s["kind"] for s in steps} >= {"sysctl", "hugepages", "thp", "queue", "sysctl.d",
                                          "udev", "tmpfiles"}
    applied = _cli(["apply", *args, "--yes"], prov_dir)
    assert applied.returncode == 0, applied.stderr
    assert _cli(["verify", *args], prov_dir).returncode == 0
    assert _read(queue / "read_ahead_kb") == "64"
    assert Path("/etc/sysctl.d/90-pgdyno.conf").exists()
    reverted = _cli(["revert", "--results-dir", str(prov_dir / "res")], prov_dir)
    assert reverted.returncode == 0, reverted.stderr
    after = _cli(["verify", *args], prov_dir)
    assert after.returncode == 1 and "DRIFT" in after.stdout
    assert before == {"swappiness": _read(sysctl_path("vm.swappiness")),
                      "ratio": _read(sysctl_path("vm.dirty_background_ratio")),
                      "hugepages": _read(sysctl_path("vm.nr_hugepages")),
                      "thp": _bracket(_read(THP_ENABLED)),
                      "read_ahead": _read(queue / "read_ahead_kb"),
                      "scheduler": _bracket(_read(queue / "scheduler"))}
    assert not Path("/etc/sysctl.d/90-pgdyno.conf").exists()
    events = (prov_dir / "res/provision/t--provision/events.jsonl").read_text().splitlines()
    assert [json.loads(e)["action"] for e in events] == ["apply", "verify", "revert", "verify"]


def test_mkfs_xfs_with_stripe_geometry_mounted_verified_and_reverted(machine, loops,
                                                                      prov_dir) -> None:
    mnt = prov_dir / "mnt"
    env = prov_dir / "storage.env"
    env.write_text(f"DATA_MOUNT={mnt}/data\nWAL_MOUNT={mnt}/wal\nFS_TYPE=xfs\n"
                   "XFS_DATA_SUNIT=64k\nDATA_STRIPE_WIDTH=2\nXFS_DATA_AGCOUNT=8\n"
                   "XFS_WAL_SUNIT=256k\nWAL_STRIPE_WIDTH=2\nXFS_WAL_AGCOUNT=4\n"
                   "XFS_MOUNT_OPTS_DATA=defaults,noatime,logbufs=8,logbsize=256k,allocsize=64m\n"
                   "XFS_MOUNT_OPTS_WAL=defaults,noatime,logbufs=8,logbsize=256k\n")
    args = ["--config", str(env), "--data-devices", loops[0], "--wal-devices", loops[1],
            "--results-dir", str(prov_dir / "res")]
    out = _cli(["apply", *args, "--yes", "--destroy-data", ",".join(loops)], prov_dir)
    assert out.returncode == 0, out.stderr
    info = subprocess.run(["xfs_info", str(mnt / "data")], capture_output=True, text=True,
                          check=True).stdout
    assert "agcount=8" in info and "sunit=16" in info and "swidth=32 blks" in info
    info = subprocess.run(["xfs_info", str(mnt / "wal")], capture_output=True, text=True,
                          check=True).stdout
    assert "agcount=4" in info and "sunit=64" in info and "swidth=128 blks" in info
    table = {mp: opts for src, mp, _, opts in mounts()}
    assert "logbsize=256k" in table[str(mnt / "data")] and "noatime" in table[str(mnt / "wal")]
    assert "allocsize=65536k" in table[str(mnt / "data")]
    assert f" {mnt}/data xfs " in Path("/etc/fstab").read_text()
    assert _cli(["verify", *args], prov_dir).returncode == 0
    reverted = _cli(["revert"], prov_dir)
    assert reverted.returncode == 0, reverted.stderr
    assert "cannot be brought back" in reverted.stdout
    assert str(mnt / "data") not in {mp for _, mp, _, _ in mounts()}
    assert str(mnt) not in Path("/etc/fstab").read_text() and not mnt.exists()


def test_refusals_change_nothing(machine, loops, prov_dir) -> None:
    mnt = prov_dir / "m"
    env = prov_dir / "s.env"
    env.write_text(f"DATA_MOUNT={mnt}\nXFS_DATA_AGCOUNT=4\n")
    base = ["apply", "--config", str(env), "--data-devices", loops[0], "--yes"]
    missing = _cli(base, prov_dir)
    assert missing.returncode == 2 and f"--destroy-data {loops[0]}" in missing.stderr
    subprocess.run(["mkfs.ext4", "-q", "-F", loops[0]], check=True, capture_output=True)
    holding = _cli([*base, "--destroy-data", loops[0]], prov_dir)
    assert holding.returncode == 2 and "holds a ext4 file system" in holding.stderr
    other = prov_dir / "other"
    other.mkdir()
    subprocess.run(["mount", loops[0], str(other)], check=True)
    try:
        mounted = _cli([*base, "--destroy-data", loops[0], "--force-device", loops[0]], prov_dir)
    finally:
        subprocess.run(["umount", str(other)], check=True)
    assert mounted.returncode == 2 and f"mounted on {other}" in mounted.stderr
    assert not (prov_dir / "provision").exists()  # no state file: nothing was touched
    assert not mnt.exists()


def test_not_root_prints_the_commands_and_refuses(machine, prov_dir) -> None:
    """A real unprivileged process: forked from this one (its interpreter lives under /root,
    which the user cannot enter), then setuid to pgdyno's server user."""
    from pgdyno.targets.osuser import server_user

    user = server_user()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop root for good, run the CLI, report through the pipe
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            out = _cli(["apply", "--only", "VM_SWAPPINESS", "--set", "VM_SWAPPINESS=33",
                        "--yes"], prov_dir)
            verify = _cli(["verify", "--only", "VM_SWAPPINESS", "--set", "VM_SWAPPINESS=33",
                           "--results-dir", "/nonexistent/x"], prov_dir)
            os.write(write, json.dumps([os.geteuid(), out.returncode, out.stdout, out.stderr,
                                        verify.returncode]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    euid, code, stdout, stderr, verify_code = json.loads(data)
    assert euid == user.uid != 0
    assert code == 1 and "sysctl -w vm.swappiness=33" in stdout
    assert "needs root" in stderr and len(stderr.strip().splitlines()) == 1
    assert verify_code in (0, 1)  # verify works unprivileged (drift or not)


def test_failing_step_mid_apply_leaves_the_system_as_before(machine, loops, prov_dir) -> None:
    dev = loops[0]
    queue = Path("/sys/block") / Path(dev).name / "queue"
    before = (_read(sysctl_path("vm.swappiness")), _read(queue / "read_ahead_kb"))
    settings = {"DATA_READ_AHEAD_KB": "64", "vm.swappiness": str(int(before[0]) % 50 + 11),
                "kernel.pid_max": "1"}  # below PID_MAX_MIN: the kernel refuses the last step
    with pytest.raises(ApplyFailed, match="kernel.pid_max.*rolled back 2 step") as err:
        apply_settings(settings, prov_dir, data_devices=(dev,))
    assert (_read(sysctl_path("vm.swappiness")), _read(queue / "read_ahead_kb")) == before
    state = json.loads(Path(err.value.state.path).read_text())
    assert state["status"] == "rolled back"


def test_campaign_cell_apply_and_revert(machine, prov_dir) -> None:
    old = _read(sysctl_path("vm.dirty_background_ratio"))
    state = apply_settings({"vm.dirty_background_bytes": "67108864"}, prov_dir)
    assert state is not None and _read(sysctl_path("vm.dirty_background_ratio")) == "0"
    report = revert(state)
    assert not report.failed
    assert _read(sysctl_path("vm.dirty_background_ratio")) == old  # the pair restored
    with pytest.raises(Exception, match="storage layout"):
        apply_settings({"XFS_DATA_AGCOUNT": "8"}, prov_dir, data_devices=("/dev/null",))
    assert plan_settings({"vm.swappiness": _read(sysctl_path("vm.swappiness"))}).ordered() == []


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
