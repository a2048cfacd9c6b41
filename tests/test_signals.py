"""Signals end a run like Ctrl-C; a killed pgdyno is recovered by the next one; one pgdyno
per workdir. Each test checks that no postgres process of the workdir is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgdyno.results.index import RunIndex
from tests.conftest import make_shared_dir, postgres_processes, scratch_database, wait_for_load

pytestmark = pytest.mark.server


def _start(workdir: Path, results: Path, duration: int = 30, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
    return subprocess.Popen(
        [sys.executable, "-m", "pgdyno", "bench", "tpcb", "--scale", "1", "--clients", "2",
         "--duration", str(duration), "--warmup", "0", "--iterations", "1", "--no-telemetry",
         "--no-progress", "--results-dir", str(results), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _status(run: Path) -> str:
    return json.loads((run / "manifest.json").read_text())["status"]


def _instance(workdir: Path) -> str:
    """The instance `pgdyno bench` uses (the session's `server` fixture runs another one
    in the same workdir, and must survive these tests)."""
    return str(workdir / "instances" / "pg18-embedded" / "data")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_term_and_hup_end_like_ctrl_c(workdir: Path, signum: int, code: int) -> None:
    results = make_shared_dir("pgdyno-signal-")
    proc = _start(workdir, results)
    run = wait_for_load(proc, results)
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert _status(run) == "interrupted"
    assert (run / "report.md").is_file()  # partial results summarised
    assert postgres_processes(_instance(workdir)) == []


def test_second_ctrl_c_does_not_abort_the_cleanup(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-signal-")
    proc = _start(workdir, results)
    run = wait_for_load(proc, results)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.7)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert _status(run) == "interrupted"
    assert postgres_processes(_instance(workdir)) == []


def test_killed_run_is_recovered_by_the_next_one(server, workdir: Path) -> None:  # noqa: ANN001
    """The killed run's server is stopped; another instance's (the `server` fixture's,
    in the same workdir) is not the killed run's and keeps running. Both runs keep their
    rows in a shared results database too: the recovery marks the killed one there."""
    results = make_shared_dir("pgdyno-signal-")
    for shared in scratch_database(server, "pgdyno_killed_shared"):
        _killed_and_recovered(server, workdir, results, shared)


def _killed_and_recovered(server, workdir: Path, results: Path, shared) -> None:  # noqa: ANN001
    from pgdyno.results.pgindex import PgRunIndex

    db = ("--results-db", f"postgresql://{shared.user}@127.0.0.1:"
          f"{server.connection('tcp').port}/{shared.dbname}")
    proc = _start(workdir, results, 30, *db)
    killed = wait_for_load(proc, results)
    proc.kill()
    proc.communicate(timeout=30)
    orphans = postgres_processes(_instance(workdir))
    assert orphans, "SIGKILL should have left the server running (nothing can catch it)"
    assert _status(killed) == "running"

    assert PgRunIndex(db[1]).get(RunIndex(results).run_id_for(killed)).status == "running"

    nxt = _start(workdir, results, 2, *db)
    out, err = nxt.communicate(timeout=180)
    assert nxt.returncode == 0, err
    assert "was killed" in err
    manifest = json.loads((killed / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "pgdyno was killed" in manifest["reason"]
    index = RunIndex(results)
    assert index.get(index.run_id_for(killed)).status == "failed"
    assert PgRunIndex(db[1]).get(index.run_id_for(killed)).status == "failed"
    assert not any(p in postgres_processes(_instance(workdir)) for p in orphans)
    assert postgres_processes(_instance(workdir)) == []
    assert server.is_running() and server.data_dir != Path(_instance(workdir))


def test_second_pgdyno_on_the_same_workdir_refuses(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-signal-")
    first = _start(workdir, results, duration=6)
    run = wait_for_load(first, results)
    second = _start(workdir, results, duration=2)
    _out, err = second.communicate(timeout=60)
    assert second.returncode == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "another pgdyno is using workdir" in lines[0], err
    assert f"pid {first.pid}" in lines[0] and str(run) in lines[0]
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err  # undisturbed
    assert len(list(results.glob("*--tpcb/tpcb-*"))) == 1  # the refused run made nothing


def test_ctrl_c_during_dataset_build_then_rebuild_without_force(workdir: Path) -> None:
    import psutil

    results = make_shared_dir("pgdyno-signal-")
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
    cmd = [sys.executable, "-m", "pgdyno", "bench", "tpcb", "--clients", "1", "--duration",
           "1", "--warmup", "0", "--iterations", "1", "--no-telemetry", "--no-progress",
           "--results-dir", str(results)]
    proc = subprocess.Popen([*cmd, "--scale", "60"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    building = False
    while time.monotonic() < deadline and not building and proc.poll() is None:
        building = any(p.info["name"] == "pgbench" and "-i" in (p.info["cmdline"] or [])
                       for p in psutil.process_iter(["name", "cmdline"]))
        time.sleep(0.05)
    assert building, "pgbench -i never ran"
    time.sleep(1.0)  # tables created, rows being generated
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    again = subprocess.run([*cmd, "--scale", "1"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr  # the half-built tables were pgdyno's own
    run = max(results.glob("*--tpcb/tpcb-*"))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["dataset"]["reused"] is False and manifest["dataset"]["scale"] == 1
    assert postgres_processes(_instance(workdir)) == []
