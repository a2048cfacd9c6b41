"""Warm starts and trials shared through Optuna's RDB storage on a real PostgreSQL:
`pgdyno tune --search --storage postgresql://... --workers 2` runs one study
with two workers, each with its own workdir and server; the baselines enter the study with
their settings as parameters; no trial runs twice; a SIGKILLed worker's trial is failed
after the heartbeat's grace period and run again by the other worker. Tiny trials (pgbench
scale 1, 2 s runs, four knobs) and a 1 s heartbeat keep it short."""

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
from optuna.trial import TrialState

from pgdyno.targets.local import LocalServer, stop_orphaned_server
from tests.conftest import interruptible, make_shared_dir, scratch_database

pytestmark = pytest.mark.server

KNOBS = "shared_buffers,work_mem,checkpoint_timeout,wal_compression"
SHORT = ["--scale", "1", "--duration", "2", "--warmup", "1", "--clients", "2",
         "--no-telemetry", "--knobs", KNOBS, "--top", "1", "--reruns", "0",
         "--compare-pairs", "0", "--validate", "0", "--no-progress"]
SECRET = "s3cret-Pa55"
HEARTBEAT = {"PGDYNO_SEARCH_HEARTBEAT_S": "1"}


@pytest.fixture(scope="module")
def storage_db(server: LocalServer) -> Iterator[tuple[str, str]]:
    """A scratch database for Optuna's tables: the URI pgdyno gets (with a password, which
    the trusting test server ignores and which must never be written) and the one the
    test's own reads use."""
    for info in scratch_database(server, "pgdyno_search_rdb"):
        port = server.connection("tcp").port
        yield (f"postgresql://{info.user}:{SECRET}@127.0.0.1:{port}/{info.dbname}",
               f"postgresql+psycopg://{info.user}@127.0.0.1:{port}/{info.dbname}")


def _tune(args: list[str], results: Path, workdir: Path) -> subprocess.Popen:
    env = dict(os.environ, PGDYNO_WORKDIR=str(workdir), COLUMNS="120", **HEARTBEAT)
    return subprocess.Popen(
        [sys.executable, "-m", "pgdyno", "tune", "--search", "tpcb", *SHORT,
         "--results-dir", str(results), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=interruptible)


def _trials(read_url: str, name: str) -> list:
    storage = optuna.storages.RDBStorage(read_url, skip_table_creation=True)
    return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)


def _finished(trials: list) -> list:
    return [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)
            and "status" in t.user_attrs]


def _mb(text: str) -> float:
    """A pg_settings value as the manifest records it ('16384 8kB', '4096 kB') in MB."""
    number, _, unit = text.partition(" ")
    size = {"8kB": 8 / 1024, "kB": 1 / 1024, "MB": 1.0, "": 1.0}[unit]
    return float(number) * size


def _baseline_params_match_their_runs(trials: list, space: dict) -> None:
    """Each baseline's parameters are the settings its server ran with (its manifest's
    pg_settings, PostgreSQL's stock value where it left one alone), clipped to the space."""
    stock = {"shared_buffers": "16384 8kB", "work_mem": "4096 kB", "checkpoint_timeout": "300 s",
             "wal_compression": "off"}
    knobs = {k["name"]: k for k in space["knobs"]}
    baselines = {t.user_attrs["label"]: t for t in trials
                 if t.user_attrs.get("kind") == "baseline"}
    assert sorted(baselines) == ["default", "pgtune", "tuned"]
    for label, t in baselines.items():
        assert set(t.params) == set(knobs), label
        ran = json.loads((Path(t.user_attrs["run_dir"]) / "manifest.json").read_text())[
            "server"]["non_default_settings"]
        for name in ("shared_buffers", "work_mem"):
            want = min(max(_mb(ran.get(name, stock[name])), knobs[name]["low"]),
                       knobs[name]["high"])
            assert abs(t.params[name] - want) <= 0.5 + 1e-9, (label, name, ran.get(name))
        seconds = float(ran.get("checkpoint_timeout", stock["checkpoint_timeout"]).split()[0])
        assert t.params["checkpoint_timeout"] == round(seconds), label
        compression = ran.get("wal_compression", "off").split()[0]
        assert t.params["wal_compression"] == {"on": "pglz"}.get(compression, compression)


def test_two_workers_share_one_study_without_running_a_trial_twice(
        storage_db: tuple[str, str], workdir: Path) -> None:
    url, read_url = storage_db
    results = make_shared_dir("pgdyno-search-shared-")
    proc = _tune(["--budget", "5", "--search-name", "two", "--storage", url, "--workers", "2"],
                 results, workdir)
    out, err = proc.communicate(timeout=300)
    search_dir = results / "searches" / "two"
    logs = "".join(p.read_text() for p in (search_dir / "workers").glob("*.log"))
    assert proc.returncode == 0, err + logs
    assert SECRET not in out + err + logs
    for path in search_dir.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".html", ".toml", ".log"):
            assert SECRET not in path.read_text(errors="replace"), path

    trials = _trials(read_url, "two")
    done = _finished(trials)
    # The budget exactly, each trial once: distinct numbers, run directories and points
    assert len(done) == 5 and all(t.state == TrialState.COMPLETE for t in done)
    assert len({t.number for t in done}) == 5
    run_dirs = [t.user_attrs["run_dir"] for t in done]
    assert len(set(run_dirs)) == 5
    searched = [t for t in done if t.user_attrs["kind"] == "searched"]
    assert len(searched) == 2
    assert len({json.dumps(t.params, sort_keys=True) for t in done}) == 5
    # Both workers ran trials, each in its own workdir; each value is its run's TPS
    assert len({t.user_attrs["worker"] for t in done}) == 2
    for t in done:
        manifest = json.loads((Path(t.user_attrs["run_dir"]) / "manifest.json").read_text())
        summary = json.loads((Path(t.user_attrs["run_dir"]) / "summary.json").read_text())
        tps = [it["metrics"]["tps"] for it in summary["iterations"]]
        assert math.isclose(t.value, sum(tps) / len(tps))
        assert manifest["role"]["search"] == "two"
    # Nothing else was asked: no surplus, no lost trial in a two-worker run of budget 5
    assert [t for t in trials if t not in done] == []
    space = json.loads((search_dir / "search.json").read_text())["space"]
    _baseline_params_match_their_runs(done, space)
    assert "trials shared through study two in postgresql://" in (
        search_dir / "report.md").read_text()


def test_a_killed_workers_trial_is_run_again_by_the_other(storage_db: tuple[str, str],
                                                          workdir: Path) -> None:
    url, read_url = storage_db
    results = make_shared_dir("pgdyno-search-killed-")
    lost_workdir = workdir / "search-killed-worker"
    common = ["--budget", "3", "--search-name", "killed", "--storage", url]
    worker = _tune([*common, "--worker"], results, lost_workdir)
    deadline = time.monotonic() + 120
    killed = None
    while killed is None:  # once its first trial's pgbench runs
        assert time.monotonic() < deadline and worker.poll() is None, worker.communicate()
        running = [t for t in _trials_or_none(read_url, "killed")
                   if t.state == TrialState.RUNNING]
        if running and any(results.glob("*--tpcb/tpcb-*/raw/pgbench/c2-i1/*")):
            time.sleep(1.0)
            killed = running[0]
        time.sleep(0.2)
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=30)
    try:
        lead = _tune(common, results, workdir)
        try:
            out, err = lead.communicate(timeout=240)
        finally:
            if lead.poll() is None:
                lead.send_signal(signal.SIGINT)  # it stops its server
                lead.communicate(timeout=60)
        assert lead.returncode == 0, err
    finally:
        for data_dir in (lost_workdir / "instances").glob("*/data"):
            stop_orphaned_server(data_dir)  # the killed worker's server (SIGKILL left it)

    trials = _trials(read_url, "killed")
    lost = next(t for t in trials if t.number == killed.number)
    assert lost.state == TrialState.FAIL and "status" not in lost.user_attrs
    again = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
    assert len(again) == 1
    rerun = again[0]
    assert rerun.state == TrialState.COMPLETE and rerun.params == lost.params
    assert rerun.user_attrs["label"] == lost.user_attrs["label"]  # the same baseline
    assert rerun.user_attrs["worker"] != killed.user_attrs["worker"]
    done = _finished(trials)
    assert len(done) == 3 and len({t.user_attrs["run_dir"] for t in done}) == 3
    assert sorted(t.user_attrs["label"] for t in done if t.user_attrs["kind"] == "baseline") \
        == ["default", "pgtune", "tuned"]
    assert "trials: 3 (0 failed)" in out
    assert "Warning" not in err, err


def _trials_or_none(read_url: str, name: str) -> list:
    try:
        return _trials(read_url, name)
    except (KeyError, Exception):  # noqa: BLE001 - tables or study not made yet
        return []
