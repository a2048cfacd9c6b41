"""`pgdyno provision plan` and the parts of provisioning that change nothing: the plan of a
catalogue config, RAID where md is missing, bad input, state and journal files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.provision import (
    PlanOptions,
    ProvisionState,
    plan_for_config,
    plan_settings,
    read_events,
    record_event,
)
from pgdyno.provision.apply import ApplyOptions, CannotHere, check
from pgdyno.provision.kinds import describe_xfs, mount_options
from pgdyno.provision.model import AppliedStep, Step
from pgdyno.provision.state import load_state, write_state
from pgdyno.provision.system import md_available
from tests.conftest import run_cli_here


def _plan(**kw):
    return plan_for_config(PlanOptions(hardware="r8g.xlarge", pg_version=18, **kw))


def test_plan_of_r8g_xlarge_tuned_lists_every_os_setting_with_command_and_undo() -> None:
    plan = _plan()
    keys = {k for s in plan.steps for k in s.keys}
    for key in ("VM_SWAPPINESS", "VM_NR_HUGEPAGES", "TRANSPARENT_HUGEPAGE", "ULIMIT_NOFILE",
                "NET_CORE_SOMAXCONN", "KERNEL_SEM", "DATA_READ_AHEAD_KB", "XFS_DATA_AGCOUNT",
                "XFS_MOUNT_OPTS_DATA", "DATA_RAID_LEVEL"):
        assert key in keys, key
    swap = next(s for s in plan.steps if s.target == "vm.swappiness")
    assert swap.command == "sysctl -w vm.swappiness=1" and swap.reversibility == "live"
    assert swap.current.isdigit() and swap.rationale
    hp = next(s for s in plan.steps if s.kind == "hugepages")
    assert int(hp.value) > 4096  # 8GB shared_buffers in 2 MB pages, sized by the engine
    kinds = {s.kind: s.reversibility for s in plan.steps if s.status != "skipped"}
    assert kinds["sysctl.d"] == "persistent" and kinds["limits"] == "persistent"
    # no device named: storage steps are shown with their command, skipped
    mkfs = next(s for s in plan.steps if s.kind == "mkfs" and "XFS_DATA_AGCOUNT" in s.keys)
    assert mkfs.status == "skipped" and "agcount=8" in mkfs.command


def test_settings_at_target_are_shown_as_such() -> None:
    current = Path("/proc/sys/vm/swappiness").read_text().strip()
    plan = plan_settings({"vm.swappiness": current})
    assert [s.status for s in plan.steps] == ["at target"]


def test_raid_is_planned_with_mdadm_commands_and_apply_stops_without_md() -> None:
    data = ("/dev/pgdyno-test-a", "/dev/pgdyno-test-b", "/dev/pgdyno-test-c",
            "/dev/pgdyno-test-d")
    wal = ("/dev/pgdyno-test-e", "/dev/pgdyno-test-f")
    plan = _plan(data_devices=data, wal_devices=wal)
    md = {s.target: s for s in plan.steps if s.kind == "mdadm"}
    assert md["/dev/md0"].command == ("mdadm --create /dev/md0 --run --metadata=1.2 --level=10 "
                                      "--raid-devices=4 --chunk=64K " + " ".join(data))
    assert "--chunk=256K" in md["/dev/md1"].command
    mkfs = next(s for s in plan.steps if s.kind == "mkfs" and s.target == "/dev/md0")
    assert "su=64k,sw=2" in mkfs.command and mkfs.reversibility == "destructive"
    if md_available():
        with pytest.raises(CannotHere, match="nothing was changed"):
            check(plan, ApplyOptions(destroy_data=data + wal), need_root=False)


@pytest.mark.parametrize("args, needle", [
    (["--format", "yaml"], "--format yaml: accepted values are table, md, json, commands"),
    (["--set", "VM_SWAPPINESS"], "--set VM_SWAPPINESS: expected KEY=value"),
    (["--only", "VM_NOPE"], "--only VM_NOPE: not an OS or storage setting"),
    (["--data-devices", "sda"], "--data-devices sda: accepted: block device paths"),
    (["--data-devices", "/dev/x", "--wal-devices", "/dev/x"], "--wal-devices /dev/x: also"),
    (["--set", "VM_SWAPPINESS=1;reboot"], "VM_SWAPPINESS=1;reboot: accepted: an integer"),
    (["--set", "kernel.hostname=a;reboot"], "KERNEL_HOSTNAME='a;reboot': accepted"),
    (["--hardware", "nope"], "--hardware nope: no such profile"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str, tmp_path: Path) -> None:
    out = run_cli_here(["provision", "plan", "--hardware", "r8g.xlarge", *args], tmp_path)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_campaign_settings_refuse_unknown_keys() -> None:
    with pytest.raises(UsageError, match="not an OS setting"):
        plan_settings({"shared_buffers": "1GB"})


def test_state_file_round_trip(tmp_path: Path) -> None:
    step = Step(kind="sysctl", target="vm.swappiness", value="10", keys=["VM_SWAPPINESS"],
                params={"a": "b"})
    state = ProvisionState(created="t", host="h", kernel="k", config="c", hardware="hw",
                           steps=[AppliedStep(step=step, previous={"value": "60"}, done=True)],
                           status="applied", context="ctx")
    state.path = str(tmp_path / "state-x.json")
    write_state(state)
    back = load_state(Path(state.path))
    assert back.to_dict() == state.to_dict() and back.path == state.path
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="bad.json: cannot read the provision state file"):
        load_state(tmp_path / "bad.json")
    # A newer pgdyno's state file is refused, not misread: a revert from it could restore
    # the wrong values.
    (tmp_path / "newer.json").write_text(json.dumps({**state.to_dict(), "schema_version": 2}))
    with pytest.raises(UsageError, match="newer.json: provision state file schema_version 2 "
                       "is not supported .a newer pgdyno wrote it"):
        load_state(tmp_path / "newer.json")


def test_journal_events_append_and_read(tmp_path: Path) -> None:
    path = record_event(tmp_path, "r8g.xlarge--tpcb", "apply", exit_status=0, summary="ok",
                        state_file="/x/state.json", changed=3, config="tuned")
    record_event(tmp_path, "r8g.xlarge--tpcb", "verify", exit_status=1, summary="2 drifted",
                 drifted=2)
    assert path == tmp_path / "provision" / "r8g.xlarge--tpcb" / "events.jsonl"
    events = read_events(tmp_path, "r8g.xlarge--tpcb")
    assert [(e.action, e.changed, e.drifted, e.exit_status) for e in events] == [
        ("apply", 3, 0, 0), ("verify", 0, 2, 1)]
    assert json.loads(path.read_text().splitlines()[0])["state_file"] == "/x/state.json"
    # A line a crash cut short is skipped; an event a newer pgdyno wrote is refused in one
    # line naming the file and the line, since skipping it would hide an apply.
    with path.open("a") as out:
        out.write('{"time": "t", "act\n')
    assert len(read_events(tmp_path, "r8g.xlarge--tpcb")) == 2
    with path.open("a") as out:
        out.write(json.dumps({"schema_version": 2, "action": "apply"}) + "\n")
    with pytest.raises(UsageError, match=f"{path} line 4: provision event schema_version 2 "
                       "is not supported"):
        read_events(tmp_path, "r8g.xlarge--tpcb")


def test_mount_options_compare_as_the_kernel_shows_them() -> None:
    planned = mount_options("defaults,noatime,logbsize=256k,allocsize=64m,inode64")
    live = mount_options("rw,noatime,inode64,allocsize=65536k,logbufs=8,logbsize=256k")
    assert planned <= live
    assert describe_xfs({"agcount": 8, "bsize": 4096, "sunit": 16, "swidth": 32}) == \
        "xfs agcount=8 su=64k sw=2"


def test_tune_script_comes_from_the_provision_plan(tmp_path: Path) -> None:
    out = run_cli_here(["tune", "--hardware", "r8g.xlarge", "--pg-version", "18", "--format",
                        "script"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Generated from `pgdyno provision plan`" in out.stdout
    assert "/etc/sysctl.d/90-pgdyno.conf" in out.stdout
