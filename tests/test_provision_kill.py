"""A kill between a kernel write and its record: `pgdyno provision apply` and a campaign cell
with ``[config.os]`` SIGKILLed inside that window, then reverted.

The test hook PGDYNO_TEST_PAUSE_AFTER_WRITE (pgdyno.provision.apply) holds the window open:
each test waits until the new value is live, which proves the write happened, and kills the
process before it can record the step as done. Only the write-ahead record (the step
``started``, with its old value, fsynced before the write) tells revert to restore it.
vm.swappiness is the setting changed; a ``finally`` puts the machine's value back whatever
happens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgdyno.provision import revert
from pgdyno.provision.apply import PAUSE_AFTER_WRITE
from pgdyno.provision.model import AppliedStep, ProvisionState, Step
from pgdyno.provision.state import load_state, write_state
from pgdyno.provision.system import is_root
from tests.conftest import run_cli_here as run_cli

SWAPPINESS = Path("/proc/sys/vm/swappiness")

pytestmark = [pytest.mark.skipif(not is_root(), reason="changes kernel settings: root only"),
              pytest.mark.server]  # changes the machine (and put it back)

CAMPAIGN = """
[campaign]
name = "killed"
context = "camp--killed"
workloads = ["cpu"]
clients = [1]
repeat = 1

[bench]
duration = 1
warmup = 1
iterations = 1
telemetry = false

[[config]]
label = "swap"
[config.os]
"vm.swappiness" = {value}
"""


@pytest.fixture
def swappiness() -> Iterator[tuple[str, str]]:
    """(the machine's vm.swappiness, another value); the machine's is written back after
    the test, pass or fail."""
    before = SWAPPINESS.read_text().strip()
    try:
        yield before, ("33" if before != "33" else "34")
    finally:
        SWAPPINESS.write_text(before)


def _kill_after_write(args: list[str], workdir: Path, written: Callable[[], bool]) -> None:
    """Start ``pgdyno ARGS`` with a 60 s pause between each write and its record, wait until
    ``written()`` (the write happened), then SIGKILL it: inside the window, for sure."""
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir), PAUSE_AFTER_WRITE: "60"}
    proc = subprocess.Popen([sys.executable, "-m", "pgdyno", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not written():
            if proc.poll() is not None:
                pytest.fail(f"pgdyno exited {proc.returncode} before its write: "
                            f"{proc.communicate()[1]}")
            if time.monotonic() > deadline:
                pytest.fail("the write never happened")
            time.sleep(0.01)
        proc.kill()
        proc.wait(timeout=30)
        assert proc.returncode == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.communicate()


def _only_state(workdir: Path) -> Path:
    (path,) = (workdir / "provision").glob("state-*.json")
    return path


def test_kill_between_write_and_record_is_reverted(tmp_path: Path,
                                                   swappiness: tuple[str, str]) -> None:
    before, new = swappiness
    workdir, results = tmp_path / "work", tmp_path / "results"
    _kill_after_write(["provision", "apply", "--set", f"VM_SWAPPINESS={new}", "--only",
                       "VM_SWAPPINESS", "--live-only", "--yes", "--workdir", str(workdir),
                       "--results-dir", str(results), "--context", "t--kill"], workdir,
                      lambda: SWAPPINESS.read_text().strip() == new)
    assert SWAPPINESS.read_text().strip() == new  # the kill left the setting changed
    state = json.loads(_only_state(workdir).read_text())
    (step,) = state["steps"]
    # The kill landed between the write and its record: started (with the old value), not
    # done. Revert used to undo only the steps marked done, and left swappiness changed.
    assert state["status"] == "applying"
    assert (step["started"], step["done"], step["previous"]["value"]) == (True, False, before)

    out = run_cli(["provision", "revert", "--workdir", str(workdir), "--results-dir",
                   str(results)], workdir)
    assert out.returncode == 0, out.stderr
    assert SWAPPINESS.read_text().strip() == before
    assert f"vm.swappiness: {before} (the apply stopped between its write" in out.stdout
    assert load_state(_only_state(workdir)).status == "reverted"
    events = (results / "provision" / "t--kill" / "events.jsonl").read_text().splitlines()
    assert [json.loads(e)["action"] for e in events] == ["revert"]  # the context was kept


def test_campaign_killed_while_applying_os_settings_reverts_them_on_restart(
        tmp_path: Path, swappiness: tuple[str, str]) -> None:
    """A real campaign cell (the CPU workload, no server), killed inside its apply."""
    before, new = swappiness
    workdir, results = tmp_path / "work", tmp_path / "results"
    (tmp_path / "c.toml").write_text(CAMPAIGN.format(value=new))
    args = ["campaign", str(tmp_path / "c.toml"), "--allow-os-changes", "--no-progress",
            "--results-dir", str(results)]
    _kill_after_write(args, workdir, lambda: SWAPPINESS.read_text().strip() == new)
    assert SWAPPINESS.read_text().strip() == new
    journal = results / "campaigns" / "killed" / "journal.jsonl"
    killed = [json.loads(line) for line in journal.read_text().splitlines()]
    # The state file was named in the journal before the first change; the apply never
    # returned, so the old journal (an os-apply event after apply) would not know of it.
    assert [e["event"] for e in killed] == ["campaign-start", "run-start", "os-apply-start"]
    state_file = killed[-1]["state"]

    # The restart reverts the killed apply before anything runs, then runs the cell (its
    # apply finds the old value again, so its own revert puts that back too).
    out = run_cli(args, workdir)
    assert out.returncode == 0, out.stderr
    assert "reverting the OS settings r1:cpu:swap left applied" in out.stderr
    assert SWAPPINESS.read_text().strip() == before
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    first_revert = next(e for e in events if e["event"] == "os-revert")
    assert first_revert["state"] == state_file and first_revert["status"] == "ok"
    assert f"vm.swappiness: {before} (the apply stopped" in first_revert["summary"]
    assert load_state(Path(state_file)).status == "reverted"
    applied = [e for e in events if e["event"] == "os-apply"]
    assert len(applied) == 1 and applied[0]["changed"] == 1  # the rerun changed it again


def test_a_step_cut_short_before_its_write_is_not_reported_as_restored(
        tmp_path: Path, swappiness: tuple[str, str]) -> None:
    """The other side of the window: killed after the write-ahead record but before the
    write. Reading back shows nothing changed, so revert writes nothing and says so."""
    before, new = swappiness
    step = Step(kind="sysctl", target="vm.swappiness", value=new, keys=["VM_SWAPPINESS"])
    state = ProvisionState(created="t", host="h", kernel="k", config="c", hardware="hw",
                           steps=[AppliedStep(step=step, previous={"value": before},
                                              started=True)])
    state.path = str(tmp_path / "state-x.json")
    write_state(state)
    report = revert(state.path)
    assert (report.restored, report.failed) == ([], [])
    assert SWAPPINESS.read_text().strip() == before
    back = load_state(Path(state.path))
    assert back.status == "reverted" and not back.steps[0].started
