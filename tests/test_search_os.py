"""OS knobs in the search space (`tune --search --allow-os-changes`).

Pure tests of the OS dimensions (ranges relative to RAM, conversion to provision settings,
huge pages sized for shared_buffers, refusals); then, as root against the embedded
PostgreSQL, a one-trial search whose run recorded the kernel values it started under (they
are the trial's parameters) and after which the host is as it was, and a search stopped by
SIGINT inside its trial that leaves the host as it was. A fixture records every value these
tests may touch and writes it back whatever happens.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from pgdyno.config.detect import detect_profile
from pgdyno.config.setting_specs import snapshot
from pgdyno.errors import UsageError
from pgdyno.runner.options import build_options
from pgdyno.search import os_knobs
from pgdyno.search.run import SearchOptions, run_search
from pgdyno.search.space import build_space
from pgdyno.search.study import rows
from tests.conftest import interruptible, make_shared_dir

GiB, MiB = 2**30, 2**20
THP_FILE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SYSCTLS = ("vm.dirty_background_bytes", "vm.dirty_background_ratio", "vm.dirty_bytes",
           "vm.dirty_ratio", "vm.nr_hugepages")
KNOBS = "shared_buffers,vm.dirty_background_bytes,transparent_hugepage"


def _sysctl(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _thp() -> str:
    return next(w.strip("[]") for w in THP_FILE.read_text().split() if w.startswith("["))


def _host_values() -> dict[str, str]:
    out = {name: _sysctl(name).read_text().strip() for name in SYSCTLS}
    out["thp"] = _thp()
    return out


@pytest.fixture
def restored_host() -> Iterator[dict[str, str]]:
    """The values these tests may change, as they were; written back at the end whatever
    happened (the ratio or the byte form of each dirty pair, whichever was in force)."""
    if os.geteuid() != 0 or not THP_FILE.exists():
        pytest.skip("needs root and transparent huge pages")
    before = _host_values()
    try:
        yield before
    finally:
        for pair in (("vm.dirty_background_bytes", "vm.dirty_background_ratio"),
                     ("vm.dirty_bytes", "vm.dirty_ratio")):
            in_force = pair[0] if before[pair[0]] != "0" else pair[1]
            _sysctl(in_force).write_text(before[in_force])
        _sysctl("vm.nr_hugepages").write_text(before["vm.nr_hugepages"])
        THP_FILE.write_text(before["thp"])


# ----- pure ------------------------------------------------------------------------------

def _host(ram: int = 16 * GiB) -> os_knobs.HostOs:
    return os_knobs.HostOs(ram_bytes=ram, data_device="vda", huge_page_kb=2048)


def test_os_knobs_are_bounded_by_ram_and_join_the_default_space() -> None:
    table = os_knobs.os_knobs(_host(16 * GiB))
    bg, dirty = table["vm.dirty_background_bytes"], table["vm.dirty_bytes"]
    # log-scaled MB ranges holding the kernel's stock 10% and 20% of RAM
    assert (bg.low, bg.high, bg.unit, bg.log) == (8, 4096, "MB", True)
    assert (dirty.low, dirty.high) == (32, 8192)
    assert bg.low < 0.10 * 16 * 1024 < bg.high and dirty.low < 0.20 * 16 * 1024 < dirty.high
    assert table["transparent_hugepage"].choices == ("always", "madvise", "never")
    assert table["huge_pages"].choices == ("off", "on") and table["huge_pages"].restart
    assert table["read_ahead_kb"].low == 16 and table["read_ahead_kb"].high == 16384
    # without a data device or huge pages the knobs are left out
    bare = os_knobs.os_knobs(os_knobs.HostOs(ram_bytes=GiB))
    assert "read_ahead_kb" not in bare and "huge_pages" not in bare

    hw, specs = detect_profile(), snapshot(18)
    space = build_space(hw, specs, clients=2, write_heavy=True, os_table=table,
                        os_notes=["OS knob x left out: why"])
    assert [k.name for k in space.os_knobs] == list(table)
    assert space.allow_os_changes and "OS knob x left out: why" in space.notes
    plain = build_space(hw, specs, clients=2, write_heavy=True)
    assert not plain.os_knobs and not plain.allow_os_changes
    with pytest.raises(UsageError, match="--allow-os-changes"):
        build_space(hw, specs, clients=2, write_heavy=True, knobs=["vm.dirty_bytes"])


def test_trial_values_become_provision_settings_and_pg_settings_stay_apart() -> None:
    hw, specs = detect_profile(), snapshot(18)
    space = build_space(hw, specs, clients=2, write_heavy=True,
                        knobs=["shared_buffers", *os_knobs.OS_KNOBS],
                        os_table=os_knobs.os_knobs(_host(hw.ram_bytes)))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    trial = study.ask()
    pg = space.suggest(trial)
    drawn = space.suggest_os(trial)
    assert set(pg) - set(space.fixed) == {"shared_buffers", "huge_pages"}
    assert drawn["huge_pages"] == pg["huge_pages"]
    drawn["huge_pages"] = "on"
    out = os_knobs.trial_settings(drawn, {**pg, "shared_buffers": "1GB",
                                          "max_connections": "100", "wal_buffers": "16MB"},
                                  specs, _host())
    assert out["vm.dirty_background_bytes"] == str(
        int(drawn["vm.dirty_background_bytes"].removesuffix("MB")) * MiB)
    assert out["TRANSPARENT_HUGEPAGE"] == drawn["transparent_hugepage"]
    assert out["DATA_READ_AHEAD_KB"] == drawn["read_ahead_kb"]
    # PostgreSQL's segment for 1 GB of buffers as config/sizing.py estimates it, in 2 MB
    # pages, with tuned's 2% margin
    shm = GiB * 1.0264 + 16 * MiB + 43 * MiB + 100 * 80 * 1024
    assert out["vm.nr_hugepages"] == str(math.ceil(math.ceil(shm / (2 * MiB)) * 1.02))
    # a baseline's point: the host's values, clipped to the ranges
    params = space.params_for({"vm.dirty_background_bytes": "1", "vm.dirty_bytes": "999999999",
                               "transparent_hugepage": "never", "read_ahead_kb": "128"})
    assert params["vm.dirty_background_bytes"] == 8
    assert params["vm.dirty_bytes"] == space.knob("vm.dirty_bytes").high
    assert params["transparent_hugepage"] == "never" and params["read_ahead_kb"] == 128


def test_allow_os_changes_is_refused_without_root() -> None:
    with pytest.raises(UsageError, match="--allow-os-changes.*root"):
        os_knobs.check_allowed(True, euid=1000)
    os_knobs.check_allowed(True, euid=0)
    os_knobs.check_allowed(False, euid=1000)


# ----- real ------------------------------------------------------------------------------

def _bench(results: Path, workdir: Path):
    return build_options("tpcb", scale=1, duration=2, warmup=1, iterations=1, clients="2",
                         results_dir=results, workdir=workdir, progress=False, telemetry=False)


@pytest.mark.server
def test_trial_runs_under_its_os_values_and_they_are_reverted(workdir: Path,
                                                              restored_host) -> None:
    before = restored_host
    results = make_shared_dir("pgdyno-search-os-")
    outcome = run_search(SearchOptions(
        bench=_bench(results, workdir), budget=1, baselines=(), top=1, reruns=0,
        compare_pairs=0, name="os", knobs=tuple(KNOBS.split(",")), allow_os_changes=True,
        show_progress=False))
    assert _host_values() == before  # reverted after the trial
    study = optuna.load_study(study_name="search",
                              storage=f"sqlite:///{outcome.search_dir / 'study.db'}")
    (trial,) = study.get_trials()
    (row,) = rows(study)
    assert row.status == "ok", row.reason
    # the kernel values the run started under, as its manifest recorded them, are the
    # trial's parameters
    manifest = json.loads((Path(row.run_dir) / "manifest.json").read_text())
    kernel = manifest["host"]["kernel_settings"]
    assert kernel["vm.dirty_background_bytes"] == str(
        trial.params["vm.dirty_background_bytes"] * MiB)
    assert kernel["transparent_hugepage"] == trial.params["transparent_hugepage"]
    assert trial.user_attrs["os"]["transparent_hugepage"] == trial.params["transparent_hugepage"]
    assert "shared_buffers" in row.settings and "vm.dirty_background_bytes" not in row.settings
    assert not (outcome.search_dir / os_knobs.PENDING_FILE).exists()
    report = (outcome.search_dir / "report.md").read_text()
    assert f"transparent_hugepage={trial.params['transparent_hugepage']}" in report
    trial_file = (outcome.search_dir / "trials" / "trial-0000.toml").read_text()
    assert f"#   TRANSPARENT_HUGEPAGE={trial.params['transparent_hugepage']}" in trial_file


_SCRIPT = """
import sys
from pathlib import Path
from pgdyno.runner.options import build_options
from pgdyno.search.run import SearchOptions, run_search
bench = build_options("tpcb", scale=1, duration=30, warmup=1, iterations=1, clients="2",
                     results_dir=Path(sys.argv[1]), workdir=Path(sys.argv[2]), progress=False,
                     telemetry=False)
run_search(SearchOptions(bench=bench, budget=1, baselines=(), top=1, reruns=0,
                         compare_pairs=0, name="os-int", knobs=tuple(sys.argv[3].split(",")),
                         allow_os_changes=True, show_progress=False))
"""


@pytest.mark.server
def test_sigint_inside_a_trial_leaves_the_host_as_it_was(workdir: Path,
                                                         restored_host) -> None:
    before = restored_host
    results = make_shared_dir("pgdyno-search-os-int-")
    pending = results / "searches" / "os-int" / os_knobs.PENDING_FILE
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(results), str(workdir), KNOBS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 60
        while not pending.exists():  # the trial's OS values are being applied
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the trial never applied its OS values"
            time.sleep(0.1)
        time.sleep(3.0)  # inside the trial's run (30 s of load)
        during = _host_values()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    assert during != before  # the trial had changed something (its values are random)
    assert _host_values() == before, err
    assert not pending.exists()
