"""`pgdyno provision` and the CPU frequency governor: planned by the tuned
config (performance, on every CPU), applied behind --yes with each CPU's previous governor
in the state file, verified, reverted exactly; and, on a host without cpufreq (this VM),
planned as "cannot be set here" and skipped by apply, verify and revert.

The cycle runs against a directory shaped like /sys (the root is a parameter), so that it
can change governors on a machine that has none; this machine's own /sys is only read."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.provision import (
    PlanOptions,
    check_settings,
    plan_for_config,
    plan_settings,
    read_events,
)
from pgdyno.provision.commands import (
    ApplyRequest,
    apply_command,
    revert_command,
    verify_command,
)
from pgdyno.provision.kinds import NO_CPUFREQ
from pgdyno.provision.render import commands, render_script
from pgdyno.provision.system import is_root
from tests.conftest import run_cli_here

START = {"cpu0": "powersave", "cpu1": "powersave", "cpu2": "schedutil", "cpu3": "performance"}
CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


def _fake_sys(root: Path, governors: dict[str, str] = START) -> Path:
    for cpu, governor in governors.items():
        d = root / "sys/devices/system/cpu" / cpu / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_available_governors").write_text("performance powersave schedutil\n")
    (root / "sys/devices/system/cpu/cpuidle").mkdir()  # not a CPU: left alone
    return root


def _governors(root: Path) -> dict[str, str]:
    return {cpu: (root / "sys/devices/system/cpu" / cpu / "cpufreq/scaling_governor")
            .read_text().strip() for cpu in START}


@pytest.mark.skipif(not is_root(), reason="apply and revert refuse without root")
def test_plan_apply_verify_revert_on_a_sysfs_shaped_root(tmp_path: Path) -> None:
    root = _fake_sys(tmp_path / "root")
    opts = PlanOptions(hardware="r8g.xlarge", pg_version=18, only=("CPU_GOVERNOR",),
                       sysfs_root=root)
    plan = plan_for_config(opts)  # the tuned config plans it
    (step,) = plan.steps
    assert (step.kind, step.value, step.status) == ("governor", "performance", "change")
    assert step.current == "powersave on 2 CPUs; schedutil on 1 CPU; performance on 1 CPU"
    results, work = tmp_path / "results", tmp_path / "work"
    warnings: list[str] = []
    out = apply_command(ApplyRequest(plan=opts, yes=True, workdir=work, results_dir=results,
                                     context="gov--test"), warnings.append)
    assert out.state is not None and not warnings
    assert _governors(root) == dict.fromkeys(START, "performance")
    # The state file (the write-ahead record) holds each CPU's governor as it was.
    saved = json.loads(Path(out.state.path).read_text())["steps"][0]
    assert {k: v for k, v in saved["previous"].items() if k != "value"} == START
    assert saved["done"] is True
    assert verify_command(opts, results, "gov--test", warnings.append).exit_code == 0
    drifted = root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
    drifted.write_text("powersave\n")  # something else changed one CPU since
    bad = verify_command(opts, results, "gov--test", warnings.append)
    assert bad.exit_code == 1 and bad.drifted[0].live.startswith("performance on 3 CPUs")
    revert = revert_command(Path(out.state.path), work, results, "gov--test", warnings.append)
    assert revert.exit_code == 0 and _governors(root) == START  # exactly as found
    events = read_events(results, "gov--test")
    assert [e.action for e in events] == ["apply", "verify", "verify", "revert"]
    assert [e.exit_status for e in events] == [0, 0, 1, 0]
    assert events[0].changed == 1 and events[0].state_file == out.state.path
    assert events[2].drifted == 1


def test_the_shell_script_saves_every_cpu_and_its_backup_restores_them(tmp_path: Path) -> None:
    """`tune --format script`'s rendering of the step, run by sh for real."""
    root = _fake_sys(tmp_path / "root")
    plan = plan_settings({"CPU_GOVERNOR": "performance"}, sysfs_root=root)
    script = tmp_path / "provision.sh"
    script.write_text(render_script(plan, ["test"]))
    backup = tmp_path / "backup.sh"
    dry = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True)
    assert "scaling_governor" in dry.stdout and _governors(root) == START
    subprocess.run(["sh", str(script)], env={"APPLY": "1", "BACKUP": str(backup),
                                             "PATH": "/usr/bin:/bin"}, check=True,
                   capture_output=True)
    assert _governors(root) == dict.fromkeys(START, "performance")
    subprocess.run(["sh", str(backup)], check=True)
    assert _governors(root) == START


def test_a_governor_this_host_does_not_offer_is_refused(tmp_path: Path) -> None:
    root = _fake_sys(tmp_path / "root")
    with pytest.raises(UsageError, match="accepted values are performance, powersave, "
                                        "schedutil"):
        plan_settings({"CPU_GOVERNOR": "ondemand"}, sysfs_root=root)
    out = run_cli_here(["provision", "plan", "--set", "CPU_GOVERNOR=turbo"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "CPU_GOVERNOR=turbo: accepted values are" in out.stderr


@pytest.mark.skipif(CPUFREQ.exists(), reason="this host exposes cpufreq")
def test_this_host_without_cpufreq_cannot_set_it_and_nothing_tries(tmp_path: Path) -> None:
    plan = plan_for_config(PlanOptions(hardware="r8g.xlarge", pg_version=18))
    (step,) = [s for s in plan.steps if s.kind == "governor"]
    assert step.current == NO_CPUFREQ and step.status == "skipped"
    assert step.note.startswith("the CPU governor cannot be set here: not exposed")
    assert not any("scaling_governor" in c for c in commands(plan))
    out = apply_command(ApplyRequest(plan=PlanOptions(hardware="r8g.xlarge", pg_version=18,
                                                      only=("CPU_GOVERNOR",)),
                                     yes=True, workdir=tmp_path / "work",
                                     results_dir=tmp_path / "results"), print)
    assert out.state is None and out.commands == [] and out.summary.startswith("nothing")
    assert not (tmp_path / "work").exists()  # no state file: nothing to revert
    # A campaign cell asking for it would run as its neighbours do: refused in one line.
    with pytest.raises(UsageError, match=r"\[config.os\] CPU_GOVERNOR: the CPU governor "
                                         "cannot be set here"):
        check_settings({"CPU_GOVERNOR": "performance"})
    out = run_cli_here(["provision", "plan", "--only", "CPU_GOVERNOR", "--format", "md"],
                       tmp_path)
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("| CPU_GOVERNOR")]
    assert "skipped: the CPU governor cannot be set here" in line
    verify = run_cli_here(["provision", "verify", "--only", "CPU_GOVERNOR",
                           "--results-dir", str(tmp_path / "results")], tmp_path)
    assert verify.returncode == 0, verify.stderr
