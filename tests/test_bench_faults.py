"""Bad input, refusals, interruption and a server that dies: exit codes and run state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from tests.conftest import (
    interruptible,
    make_shared_dir,
    postgres_processes,
    run_cli,
    run_cli_here,
)

SHORT = ["--duration", "1", "--warmup", "0", "--iterations", "1", "--scale", "1",
         "--no-progress"]


def _one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(("args", "words"), [
    (["bench", "tpcc-ish"], ["tpcc-ish", "tpcb, simple-update, select-only"]),
    (["bench", "tpcb", "--clients", "0"], ["--clients", "positive"]),
    (["bench", "tpcb", "--clients", "4,x"], ["--clients", "'x'"]),
    (["bench", "tpcb", "--duration", "-5"], ["--duration", "more than zero"]),
    (["bench", "tpcb", "--protocol", "binary"], ["--protocol", "prepared"]),
    (["bench", "tpcb", "--load-wal", "none"], ["--load-wal", "minimal, configured"]),
    (["bench", "custom", "--script", "/nonexistent.sql"], ["--script", "does not exist"]),
    (["bench", "tpcb", "--script", "tests/data/pgbench_rate_retries.log@x"],
     ["--script", "weight"]),
    (["bench", "tpcb", "--dataset-size", "lots"], ["--dataset-size", "3GB"]),
    (["bench", "tpcb", "--pg-bin", "/nonexistent/bin"], ["--pg-bin", "postgres"]),
    (["bench", "tpcb", "--dsn", "postgresql://nobody@127.0.0.1:1/db", *SHORT],
     ["--dsn", "cannot connect"]),
    (["bench", "tpcb", "--results-dir", "/etc/hostname/results", *SHORT],
     ["--results-dir", "not writable"]),
    (["bench", "tpcb", "--nonsense"], ["--nonsense"]),
])
def test_bad_input_one_line_exit_2(args: list[str], words: list[str], workdir: Path) -> None:
    _one_line_error(run_cli_here(args, workdir, cwd=Path(__file__).parent.parent), *words)


def _workdir_with_user_tables(prefix: str, *statements: str) -> tuple[Path, LocalServer]:
    """A workdir whose (stopped) cluster holds a user's own tables, made by ``statements``."""
    own = make_shared_dir(prefix)
    server = LocalServer(install=embedded_install(), workdir=own)
    server.prepare()
    server.start()
    with psycopg.connect(server.connection().conninfo(), autocommit=True) as db:
        for statement in statements:
            db.execute(statement)
    server.stop()
    return own, server


@pytest.mark.server
def test_refuses_foreign_tables_unless_forced(workdir: Path) -> None:
    own, server = _workdir_with_user_tables(
        "pgdyno-foreign-", "CREATE TABLE customer_data (id int)",
        "INSERT INTO customer_data VALUES (42)")
    results = make_shared_dir("pgdyno-results-")
    refused = run_cli_here(["bench", "tpcb", *SHORT, "--results-dir", str(results)], own)
    _one_line_error(refused, "customer_data", "--force")
    # Seen once the server runs, before the first iteration: no run left.
    assert "run directory" not in refused.stderr
    assert not list(results.rglob("manifest.json")), sorted(results.rglob("*"))
    forced = run_cli_here(["bench", "tpcb", *SHORT, "--results-dir", str(results), "--force"],
                          own)
    assert forced.returncode == 0, forced.stderr
    again = run_cli_here(["bench", "tpcb", *SHORT, "--results-dir", str(results), "--force"],
                         own)
    manifests = sorted(results.glob("*/*/manifest.json"))
    assert [json.loads(m.read_text())["dataset"] for m in manifests][-1]["reused"] is True
    assert again.returncode == 0
    server.start()
    with psycopg.connect(server.connection().conninfo()) as db:
        assert db.execute("SELECT id FROM customer_data").fetchall() == [(42,)]
    server.stop()


def _start_bench(workdir: Path, results: Path, duration: int) -> subprocess.Popen:
    env = dict(os.environ, PGDYNO_WORKDIR=str(workdir))
    return subprocess.Popen(
        [sys.executable, "-m", "pgdyno", "bench", "select-only", "--clients", "2",
         "--duration", str(duration), "--warmup", "0", "--iterations", "2", "--scale", "1",
         "--no-progress", "--results-dir", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=interruptible)


def _wait_for_logs(results: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = [p for p in results.glob("*/*/raw/pgbench/c2-i1/tx.*") if p.stat().st_size > 0]
        if logs:
            return logs[0].parents[3]
        time.sleep(0.2)
    raise AssertionError("pgbench never started logging")


@pytest.mark.server
def test_sigint_leaves_interrupted_run_and_no_server(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-results-")
    proc = _start_bench(workdir, results, duration=30)
    run_dir = _wait_for_logs(results)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    plan = json.loads((run_dir / "raw" / "run.json").read_text())
    assert plan["records"][0]["status"] == "interrupted"
    assert plan["records"][0]["log_files"], "partial logs kept"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["iterations"][0]["transactions"] > 0
    assert postgres_processes(str(workdir / "instances" / "pg18-embedded")) == []


@pytest.mark.server
def test_server_death_marks_run_failed(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-results-")
    proc = _start_bench(workdir, results, duration=20)
    _wait_for_logs(results)
    pid_file = workdir / "instances" / "pg18-embedded" / "data" / "postmaster.pid"
    os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and "failed" in err
    manifest = json.loads(next(results.glob("*/*/manifest.json")).read_text())
    assert manifest["status"] == "failed"
    assert "pgbench" in manifest["reason"] or "server" in manifest["reason"]
    time.sleep(0.5)
    assert postgres_processes(str(workdir / "instances" / "pg18-embedded")) == []


@pytest.mark.server
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_full_disk_marks_run_failed_and_keeps_what_fit(workdir: Path) -> None:
    mount = make_shared_dir("pgdyno-full-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2600k", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        proc = run_cli(["bench", "select-only", "--clients", "2", "--duration", "8",
                        "--warmup", "0", "--iterations", "1", "--scale", "1", "--no-progress",
                        "--results-dir", str(mount)], workdir)
        assert proc.returncode == 1, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        manifest = json.loads(next(mount.glob("*/*/manifest.json")).read_text())
        assert manifest["status"] == "failed"
        assert "No space left" in manifest["reason"]
        plan = json.loads(next(mount.glob("*/*/raw/run.json")).read_text())
        assert plan["records"][0]["status"] == "failed"
        assert plan["records"][0]["log_files"], "the partial log is kept"
        assert postgres_processes(str(workdir / "instances" / "pg18-embedded")) == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)
