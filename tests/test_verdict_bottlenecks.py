"""The verdict suite: drive a real embedded server into each bottleneck, assert the verdict.

Each test gets its own cluster with the settings that produce the bottleneck, initialises
a small pgbench dataset, runs pgbench for ~10 s while TelemetryRecorder samples, and then
analyses the measured window only. The machine is a noisy 2-vCPU VM shared with other
test runs, so where the physics allows two answers the test accepts the top two and says
why; where it does not, it asserts the primary class.

Set PGDYNO_VERDICT_VERBOSE=1 to print the inputs and scores of each run (the numbers the
thresholds in pgdyno.analysis.verdict were set from).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgdyno.analysis.telemetry import TelemetrySummary, analyse_telemetry
from pgdyno.analysis.verdict import Verdict, decide_bottleneck
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.telemetry import TelemetryConfig, TelemetryRecorder

pytestmark = [pytest.mark.verdict, pytest.mark.server]

CPUS = os.cpu_count() or 1
RUN_S = 10


@dataclass
class Outcome:
    summary: TelemetrySummary
    verdict: Verdict
    pgbench_out: str


def _pgbench(srv: LocalServer, args: list[str], timeout: float = 120) -> str:
    conn = srv.connection()
    proc = subprocess.run([srv.install.program("pgbench"), *conn.client_args(), *args,
                           conn.dbname], env=conn.client_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def run_scenario(workdir: Path, name: str, settings: dict[str, str], scale: int,
                 clients: int, bench_args: list[str], script: str | None = None,
                 before: Callable[[LocalServer], None] | None = None,
                 during: Callable[[threading.Event], None] | None = None) -> Outcome:
    srv = LocalServer(install=embedded_install(), workdir=workdir, name=f"verdict-{name}",
                      settings=settings)
    raw = workdir / f"raw-{name}"
    shutil.rmtree(raw, ignore_errors=True)
    try:
        srv.prepare()
        srv.start()
        _pgbench(srv, ["-i", "-q", "-s", str(scale)])
        if before is not None:
            before(srv)
        args = ["-c", str(clients), "-j", str(min(clients, CPUS)), "-T", str(RUN_S), *bench_args]
        if script is not None:
            script_path = workdir / f"{name}.pgbench"
            script_path.write_text(script)
            args += ["-f", str(script_path)]
        rec = TelemetryRecorder(raw, srv.connection(), srv.data_dir, srv.effective_wal_dir,
                                srv.log_path, srv.log_size(), TelemetryConfig(smart=False))
        rec.start()
        stop_side = threading.Event()
        side = threading.Thread(target=during, args=(stop_side,), daemon=True) if during else None
        t0 = time.time()
        rec.mark("measure_start")
        if side is not None:
            side.start()
        out = _pgbench(srv, args)
        t1 = time.time()
        rec.mark("measure_end")
        stop_side.set()
        if side is not None:
            side.join(5)
        rec.stop()
        # Skip the first second: connections are being opened.
        summary = analyse_telemetry(raw, (t0 + 1.0, t1))
        verdict = decide_bottleneck(summary, clients=clients, cpu_count=CPUS)
        if os.environ.get("PGDYNO_VERDICT_VERBOSE"):
            tps = [line for line in out.splitlines() if line.startswith("tps")]
            events = [(e.wait_class, e.event, round(e.pct)) for e in summary.waits.by_event[:6]]
            print(f"\n[{name}] {tps} primary={verdict.primary} "
                  f"ranked={[(c.name, c.score) for c in verdict.ranked]}\n"
                  f"  inputs={verdict.inputs}\n  evidence={verdict.evidence}\n"
                  f"  events={events}"
                  f"\n  ckpt={summary.checkpoints.started}/{summary.checkpoints.wal_triggered}"
                  f" warn={summary.checkpoints.too_frequent_warnings}")
        return Outcome(summary, verdict, out)
    finally:
        srv.stop()
        shutil.rmtree(srv.instance_dir, ignore_errors=True)


def test_cpu_bound(workdir: Path) -> None:
    # Select-only on a dataset that fits in shared_buffers, 4x as many clients as cores:
    # nothing waits but the CPU. pgbench shares the two cores, which keeps some sessions
    # idle, so the CPU share of DB time is not 100%, but the host is saturated.
    out = run_scenario(workdir, "cpu", {}, scale=1, clients=4 * CPUS, bench_args=["-S"])
    assert out.verdict.primary == "cpu", out.verdict.ranked


def test_data_file_reads(workdir: Path) -> None:
    # shared_buffers at its floor and a dataset 100x larger, with the OS cache dropped
    # before the run and every 2 s during it, so reads go to the device.
    def keep_cold(stop: threading.Event) -> None:
        while not stop.wait(2.0):
            _drop_caches()

    out = run_scenario(
        workdir, "reads", {"shared_buffers": "'2MB'"}, scale=20, clients=4,
        bench_args=["-S"], before=lambda srv: (srv.restart(), _drop_caches()),
        during=keep_cold)
    # On a 2-core VM the reads are fast (about 0.1 ms) and cost CPU in syscalls, so CPU
    # can come close; reads must be the primary.
    assert out.verdict.primary == "data_reads", out.verdict.ranked


WAL_SCRIPT = """\\set aid random(1, 100000 * :scale)
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""


def test_wal_sync(workdir: Path) -> None:
    # Single-row autocommit updates on random rows: no row contention, tiny transactions,
    # and every commit waits for its WAL flush.
    out = run_scenario(workdir, "wal", {"synchronous_commit": "on", "commit_delay": "0"},
                       scale=1, clients=16, bench_args=["-n"], script=WAL_SCRIPT)
    assert out.verdict.primary == "wal", out.verdict.ranked


LOCK_SCRIPT = """\\set tid random(1, 2)
BEGIN;
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;
UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = :tid;
END;
"""


def test_lock_contention(workdir: Path) -> None:
    # Every client updates the same branch row and one of two teller rows.
    out = run_scenario(workdir, "lock", {}, scale=1, clients=16, bench_args=["-n"],
                       script=LOCK_SCRIPT)
    assert out.verdict.primary == "lock", out.verdict.ranked


def test_checkpoint_storm(workdir: Path) -> None:
    # max_wal_size at 32MB: write-heavy updates of random rows fill it in about a second,
    # so checkpoints are forced back to back and each one restarts the full-page images.
    out = run_scenario(workdir, "storm", {"max_wal_size": "'32MB'", "min_wal_size": "'32MB'",
                                          "checkpoint_timeout": "'30s'"},
                       scale=10, clients=4, bench_args=["-N", "-n"])
    assert out.summary.checkpoints.wal_triggered >= 2
    assert out.verdict.primary == "checkpoint_storm", out.verdict.ranked


CLIENT_SCRIPT = """\\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
\\sleep 5 ms
"""


def test_client_bound(workdir: Path) -> None:
    # One client that thinks 5 ms between 0.1 ms queries: the server is idle, waiting.
    out = run_scenario(workdir, "client", {}, scale=1, clients=1, bench_args=["-n"],
                       script=CLIENT_SCRIPT)
    assert out.verdict.primary == "client", out.verdict.ranked
