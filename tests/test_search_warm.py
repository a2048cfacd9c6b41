"""Warm starts without a server: a config's settings as a point of the
search space, the random start's rule, an earlier search's trials seeding a new study, the
--from refusals; the command lines of local workers and of `pgdyno fleet search` (its
playbook checked by ansible-playbook itself)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from optuna.trial import TrialState

from pgdyno.config.hardware import HardwareProfile
from pgdyno.config.resolve import resolve_config
from pgdyno.config.setting_specs import snapshot
from pgdyno.errors import UsageError
from pgdyno.fleet.run import ansible_playbook
from pgdyno.fleet.search import FleetSearchOptions, check_options, playbook_path, search_args
from pgdyno.runner.options import build_options
from pgdyno.search import study as study_mod
from pgdyno.search.run import seed_rows
from pgdyno.search.space import build_space
from pgdyno.search.worker import worker_argv
from pgdyno.workloads import registry
from tests.conftest import write_search_record

GIB = 2**30
HW = HardwareProfile(name="t", vcpus=4, ram_bytes=16 * GIB)


def _space(knobs: list[str] | None = None):
    return build_space(HW, snapshot(18), clients=10, write_heavy=True, knobs=knobs)


def _mb(text: str) -> float:
    """'6016MB', '220393kB', '8GB' as MB, read here (not by pgdyno's converter)."""
    text = text.strip("'")
    for unit, size in (("kB", 1 / 1024), ("MB", 1.0), ("GB", 1024.0)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * size
    raise AssertionError(text)


@pytest.mark.parametrize("name", ["default", "pgtune", "tuned"])
def test_a_named_config_is_a_point_of_the_space(name: str) -> None:
    space = _space()
    settings = resolve_config(name, [], pg_major=18, workload="tpcb", hardware=HW,
                              connections=10, tuning=registry.get("tpcb").tuning).pg_settings
    params = space.params_for(settings)
    dists = space.distributions()
    assert set(params) == set(dists)
    for key, value in params.items():  # every value inside its distribution
        assert dists[key]._contains(dists[key].to_internal_repr(value)), key
    stock_mb = {"shared_buffers": 128, "work_mem": 4, "max_wal_size": 1024}
    for knob in ("shared_buffers", "work_mem", "max_wal_size"):
        k = space.knob(knob)
        want = _mb(settings[knob]) if knob in settings else stock_mb[knob]
        assert params[knob] == round(min(max(want, k.low), k.high)), (name, knob)
    compression = settings.get("wal_compression", "off")
    assert params["wal_compression"] == {"on": "pglz"}.get(compression, compression)
    if name == "default":  # PostgreSQL's own -1 (automatic) and 0 (off) are the specials
        assert params["wal_buffers~"] == "-1" and params["commit_delay~"] == "0"


def test_random_start_grows_with_the_knobs() -> None:
    assert _space(["shared_buffers"]).random_start() == 3
    full = _space()
    assert full.random_start() == max(3, -(-len(full.knobs) // 4)) == 5


def _earlier(tmp_path: Path, workload: str = "tpcb", ram: int = 16 * GIB) -> Path:
    """An earlier search's directory: its record and a study with two searched trials, one
    failed, and a baseline."""
    directory = tmp_path / "searches" / "old"
    directory.mkdir(parents=True)
    space = build_space(HardwareProfile(name="t", vcpus=4, ram_bytes=ram), snapshot(18),
                        clients=10, write_heavy=True, knobs=["shared_buffers", "work_mem"])
    write_search_record(directory, workload, space)
    study = study_mod.open_study(directory, "maximize", 0)
    study_mod.record_baseline(study, "default", "default", SimpleNamespace(
        status="ok", value=50.0, run_dir="r0", reason="", seconds=1.0))
    for i, (sb, value) in enumerate([("2048MB", 90.0), ("512MB", None)], start=1):
        trial = study.ask()
        space.suggest(trial)
        study_mod.record_searched(study, trial, f"t{i}.toml", {"shared_buffers": sb,
                                                               "work_mem": "8MB"},
                                  SimpleNamespace(status="ok" if value else "failed",
                                                  value=value, run_dir=f"r{i}", reason="",
                                                  seconds=1.0))
    return directory


def test_an_earlier_search_seeds_a_new_study(tmp_path: Path) -> None:
    earlier = _earlier(tmp_path)
    bench = build_options("tpcb", results_dir=tmp_path, progress=False)
    space = _space(["shared_buffers", "work_mem", "checkpoint_timeout"])
    rows, source = seed_rows(str(earlier), bench, space, HW, study_mod.StudyPlace())
    assert source == "old"
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    study = study_mod.open_study(new_dir, "maximize", 0)
    added = study_mod.seed_from(study, rows, source, space.params_for, space.distributions())
    assert added == 1  # the finished searched trial; not the failed one nor the baseline
    (seeded,) = study.get_trials()
    assert seeded.state == TrialState.COMPLETE and seeded.value == 90.0
    assert seeded.params["shared_buffers"] == 2048 and seeded.params["work_mem"] == 8
    assert seeded.params["checkpoint_timeout"] == 300  # stock: the old search left it
    assert seeded.user_attrs["label"] == "seeded: old trial 1"
    assert study_mod.own_rows(study) == [] and len(study_mod.rows(study)) == 1
    assert study_mod.seed_from(study, rows, source, space.params_for,
                               space.distributions()) == 0  # once per study
    # by name under RESULTS/searches too
    assert seed_rows("old", bench, space, HW, study_mod.StudyPlace())[1] == "old"


def test_from_refuses_another_workload_or_hardware(tmp_path: Path) -> None:
    bench = build_options("tpcb", results_dir=tmp_path, progress=False)
    other = _earlier(tmp_path / "a", workload="tprocc")
    with pytest.raises(UsageError, match=r"searched tprocc on 16\.0 GiB.*this search is tpcb"):
        seed_rows(str(other), bench, _space(), HW, study_mod.StudyPlace())
    bigger = _earlier(tmp_path / "b", ram=64 * GIB)
    with pytest.raises(UsageError, match=r"64\.0 GiB of RAM, this search is tpcb on 16\.0"):
        seed_rows(str(bigger), bench, _space(), HW, study_mod.StudyPlace())
    with pytest.raises(UsageError, match="--from nowhere: no search there"):
        seed_rows("nowhere", bench, _space(), HW, study_mod.StudyPlace())


def test_storage_urls_are_postgresql_uris_and_never_shown_with_a_password() -> None:
    url = study_mod.storage_url("postgresql://me:pw@db.example:5432/optuna")
    assert url == "postgresql+psycopg://me:pw@db.example:5432/optuna"
    place = study_mod.StudyPlace(url, "s1")
    assert place.describe() == "study s1 in postgresql://me:***@db.example:5432/optuna"
    for bad in ("sqlite:///x.db", "host=db password=pw", "nonsense"):
        with pytest.raises(UsageError) as err:
            study_mod.storage_url(bad)
        assert "pw" not in str(err.value) and "--storage" in str(err.value)


def test_local_workers_command_line() -> None:
    argv = ["tune", "--search", "tpcb", "--budget", "6", "--workers", "3", "--storage", "u"]
    assert worker_argv(argv, "s", "st", Path("/w/worker-1")) == [
        "tune", "--search", "tpcb", "--budget", "6", "--storage", "u", "--worker",
        "--search-name", "s", "--study-name", "st", "--workdir", "/w/worker-1",
        "--no-progress"]
    assert "--workers=3" not in worker_argv([*argv[:5], "--workers=3"], "s", "st", Path("/w"))


def test_fleet_search_arguments_and_playbook(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[db]\nh1\nh2\n")
    opts = FleetSearchOptions(workload="tpcb", inventory=inventory,
                              storage="postgresql://me@db/optuna", name="fleet one",
                              results_dir=tmp_path, tune_args=("--budget", "20"))
    check_options(opts)
    assert search_args(opts) == "tpcb --search-name 'fleet one' --budget 20"
    for own in ("--workers", "--storage=x", "--worker"):
        bad = FleetSearchOptions(**{**opts.__dict__, "tune_args": (own,)})
        with pytest.raises(UsageError, match="set by the fleet on each host"):
            check_options(bad)
    proc = subprocess.run([ansible_playbook(), "--syntax-check", "-i", str(inventory),
                           str(playbook_path()), "-e", "pgdyno_group=db"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
