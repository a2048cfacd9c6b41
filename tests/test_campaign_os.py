"""Campaign cells with OS settings ([config.os]): applied before the cell, reverted after,
recorded in the campaign journal, in the context's provision events and in each run's
manifest (the kernel settings read live when it started), and shown in `pgdyno journal`.

The live test changes vm.dirty_ratio and transparent huge pages for real (as root) and puts
them back in a ``finally`` whatever happens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgdyno.campaign.journal import place_os_events
from pgdyno.campaign.runner import read_journal, run_campaign
from pgdyno.campaign.spec import load_spec
from pgdyno.compare.settings_diff import MACHINE, settings_diff
from pgdyno.errors import UsageError
from pgdyno.provision import ProvisionEvent, apply_settings, read_events
from pgdyno.provision.state import load_state
from tests.conftest import run_cli_here

DIRTY = Path("/proc/sys/vm/dirty_ratio")
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

CAMPAIGN = """
[campaign]
name = "os"
context = "camp--os"
workloads = ["select-only"]
clients = [1]
repeat = 1

[bench]
scale = 1
duration = 2
warmup = 1
iterations = 1
telemetry = false

[[config]]
label = "stock"

[[config]]
label = "dirty"
[config.os]
"vm.dirty_ratio" = {dirty}
transparent_hugepage = "{thp}"
"""


def chosen_thp() -> str:
    return THP.read_text().split("[")[1].split("]")[0]


def campaign_text(dirty: int = 7, thp: str = "never") -> str:
    return CAMPAIGN.format(dirty=dirty, thp=thp)


# ----- the file and the refusals (no server, nothing changed) ------------------------------------

def test_config_os_is_read_with_kernel_names(tmp_path: Path) -> None:
    spec_file = tmp_path / "c.toml"
    spec_file.write_text(campaign_text() + "VM_SWAPPINESS = 10\n")
    spec = load_spec(spec_file, tmp_path)
    assert spec.configs[0].os == ()
    # The env-style key is stored as the kernel names it, the integers as text.
    assert dict(spec.configs[1].os) == {"vm.dirty_ratio": "7", "transparent_hugepage": "never",
                                        "vm.swappiness": "10"}


@pytest.mark.parametrize(("os_table", "message"), [
    ('bogus = 1', "bogus: not an OS setting"),
    ('DATA_MOUNT = "/mnt/x"', "storage layout is not a per-cell setting"),
    ('DATA_READ_AHEAD_KB = 128', "would change nothing here"),
    ('"vm.dirty_ratio" = [1, 2]', "accepted: a number or a string on one line"),
])
def test_bad_config_os_is_one_line(tmp_path: Path, os_table: str, message: str) -> None:
    spec_file = tmp_path / "c.toml"
    spec_file.write_text(campaign_text().split("[config.os]")[0] + "[config.os]\n" + os_table)
    with pytest.raises(UsageError, match=message) as info:
        load_spec(spec_file, tmp_path)
    assert "\n" not in str(info.value) and str(spec_file) in str(info.value)


def test_os_changes_need_the_flag_and_nothing_is_created(tmp_path: Path) -> None:
    spec_file = tmp_path / "c.toml"
    spec_file.write_text(campaign_text())
    before = DIRTY.read_text()
    proc = run_cli_here(["campaign", str(spec_file), "--results-dir", str(tmp_path / "r"),
                         "--no-progress"], tmp_path / "w")
    assert proc.returncode != 0
    assert "--allow-os-changes" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists() and DIRTY.read_text() == before


def test_os_events_sit_before_the_run_that_followed_them() -> None:
    class Run:
        def __init__(self, started_at: str) -> None:
            self.started_at = started_at

    def event(time: str, action: str) -> ProvisionEvent:
        return ProvisionEvent(time=time, action=action, exit_status=0, summary=action)

    runs = [Run("2026-11-23T10:00:05Z"), Run("2026-11-23T10:01:00Z")]
    events = [event("2026-11-23T10:02:00Z", "verify"), event("2026-11-23T10:00:01Z", "apply"),
              event("2026-11-23T10:00:40Z", "revert")]
    before, after = place_os_events(runs, events)  # type: ignore[arg-type]
    assert [[e.action for e in group] for group in before] == [["apply"], ["revert"]]
    assert [e.action for e in after] == ["verify"]


def test_settings_diff_shows_kernel_settings_and_cell_settings() -> None:
    stock = {"host": {"kernel_settings": {"vm.dirty_ratio": "20", "vm.swappiness": "60"}}}
    cell = {"host": {"kernel_settings": {"vm.dirty_ratio": "7", "vm.swappiness": "60"}},
            "role": {"os": {"vm.dirty_ratio": "7", "kernel.sched_autogroup_enabled": "0"}}}
    changes = {(c.layer, c.name): (c.before, c.after) for c in settings_diff(stock, cell)}
    assert changes == {("os", "vm.dirty_ratio"): ("20", "7"),
                       ("os", "kernel.sched_autogroup_enabled"): (MACHINE, "0")}


# ----- for real: applied around the cell, reverted after -----------------------------------------

@pytest.fixture()
def kernel_restored() -> Iterator[tuple[str, str]]:
    """The live vm.dirty_ratio and THP mode, written back after the test whatever happens."""
    if os.geteuid() != 0 or not THP.exists():
        pytest.skip("needs root and transparent huge pages")
    dirty, thp = DIRTY.read_text().strip(), chosen_thp()
    try:
        yield dirty, thp
    finally:
        DIRTY.write_text(dirty)
        THP.write_text(thp)


def other_thp(current: str) -> str:
    return "never" if current != "never" else "madvise"


@pytest.mark.server
def test_campaign_applies_and_reverts_os_settings(tmp_path: Path,
                                                  kernel_restored: tuple[str, str],
                                                  workdir: Path) -> None:
    dirty0, thp0 = kernel_restored
    dirty1, thp1 = (7 if dirty0 != "7" else 8), other_thp(thp0)
    spec_file = tmp_path / "c.toml"
    spec_file.write_text(campaign_text(dirty1, thp1))
    results = tmp_path / "results"
    env = {"PGDYNO_WORKDIR": str(workdir)}
    os.environ.update(env)
    spec = load_spec(spec_file, results)
    outcome = run_campaign(spec, show_progress=False, allow_os_changes=True)
    assert sorted(outcome.ran) == ["r1:select-only:dirty", "r1:select-only:stock"]
    # Put back as the machine was.
    assert DIRTY.read_text().strip() == dirty0 and chosen_thp() == thp0

    # Each run recorded the kernel settings it started under, read live.
    manifests = {json.loads((Path(d) / "manifest.json").read_text())["role"]["label"]:
                 json.loads((Path(d) / "manifest.json").read_text())
                 for d in outcome.run_dirs.values()}
    live = {label: m["host"]["kernel_settings"] for label, m in manifests.items()}
    assert live["dirty"]["vm.dirty_ratio"] == str(dirty1)
    assert live["dirty"]["transparent_hugepage"] == thp1
    assert live["stock"]["vm.dirty_ratio"] == dirty0
    assert live["stock"]["transparent_hugepage"] == thp0

    # The campaign journal: apply before the cell's run (its state file named before the
    # first change, then the apply's outcome), revert after, with the state file.
    events = read_journal(results / "campaigns" / "os" / "journal.jsonl")
    kinds = [(e["event"], e.get("cell")) for e in events if e["event"] != "campaign-start"]
    dirty_cell = "r1:select-only:dirty"
    at = kinds.index(("os-apply", dirty_cell))
    assert kinds[at - 2: at] == [("run-start", dirty_cell), ("os-apply-start", dirty_cell)]
    assert kinds[at + 1: at + 3] == [("os-revert", dirty_cell), ("run-end", dirty_cell)]
    state_file = next(e["state"] for e in events if e["event"] == "os-revert")
    assert load_state(Path(state_file)).status == "reverted"

    # The context's provision events and the journal that shows them beside the runs.
    provision = read_events(results, "camp--os")
    assert [(e.action, e.exit_status) for e in provision] == [("apply", 0), ("revert", 0)]
    assert f"vm.dirty_ratio={dirty1}" in provision[0].summary
    text = run_cli_here(["journal", "camp--os", "--results-dir", str(results)], workdir).stdout
    assert "provision apply (exit 0)" in text and "provision revert (exit 0)" in text
    assert f"[os] vm.dirty_ratio = {dirty1}" in text or f"[os] vm.dirty_ratio = {dirty0}" in text


@pytest.mark.server
def test_settings_left_applied_by_a_dead_campaign_are_reverted_first(
        tmp_path: Path, kernel_restored: tuple[str, str], workdir: Path) -> None:
    """A campaign killed inside an OS cell: the next start reverts from the state file
    before it runs anything (here the apply is made for real, the death simulated by a
    journal that ends after it)."""
    dirty0, _ = kernel_restored
    dirty1 = 7 if dirty0 != "7" else 8
    spec_file = tmp_path / "c.toml"
    spec_file.write_text(campaign_text(dirty1, chosen_thp()).replace("repeat = 1",
                                                                     "repeat = 1\n"))
    results = tmp_path / "results"
    state = apply_settings({"vm.dirty_ratio": str(dirty1)}, workdir)
    assert state is not None and DIRTY.read_text().strip() == str(dirty1)
    journal = results / "campaigns" / "os" / "journal.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text(json.dumps({"event": "os-apply", "cell": "r1:select-only:dirty",
                                   "state": state.path, "changed": 1}) + "\n")
    spec = load_spec(spec_file, results)
    spec.configs = spec.configs[:1]  # only the stock cell: what runs must see the old value
    outcome = run_campaign(spec, show_progress=False, allow_os_changes=True)
    assert DIRTY.read_text().strip() == dirty0
    assert load_state(Path(state.path)).status == "reverted"
    (run_dir,) = outcome.run_dirs.values()
    manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
    assert manifest["host"]["kernel_settings"]["vm.dirty_ratio"] == dirty0
