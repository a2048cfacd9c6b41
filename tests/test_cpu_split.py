"""Whose CPU: the server's and the load driver's shares apart, recomputed from the per-process
/proc samples the run recorded; TPROC-C's CPU per New-Order; many clients: open-file room,
max_connections room and pgbench's connection time."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pgdyno.analysis.hosttick import CLK_TCK
from pgdyno.config.sizing import PGDYNO_SESSIONS
from pgdyno.telemetry.host import _scan_processes, sample_processes
from pgdyno.workloads.engine.process import raise_open_files
from tests.conftest import make_shared_dir, run_cli


def _proc_ticks(pid: int) -> int:
    """utime + stime of a process, read here from /proc/PID/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_processes_split_into_server_tree_and_driver() -> None:
    """A stand-in "postmaster" with a child, and a busy "driver" child of this process: each
    lands on its side, with the CPU ticks /proc gives."""
    server = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    driver = subprocess.Popen([sys.executable, "-c",
                               "import time\nt = time.process_time()\n"
                               "while time.process_time() - t < 0.3: pass\n"
                               "print(flush=True)\ntime.sleep(30)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert driver.stdout is not None
        driver.stdout.readline()  # its 0.3 s of CPU are spent
        me = os.getpid()
        sample = sample_processes({me, server.pid}, me, server.pid)
        backend = next(int(p) for p in sample.ticks
                       if p not in sample.driver and int(p) != server.pid)
        assert Path(f"/proc/{backend}/comm").read_text().strip() == "sleep"
        assert sample.driver[str(driver.pid)] == Path(f"/proc/{driver.pid}/comm").read_text(
            ).strip()
        assert str(server.pid) in sample.ticks and str(server.pid) not in sample.driver
        assert str(me) not in sample.ticks  # the sampler is counted apart
        assert sample.ticks[str(driver.pid)] == _proc_ticks(driver.pid) >= 0.2 * CLK_TCK
    finally:
        for proc in (server, driver):
            proc.kill()
            proc.wait()


def test_tree_walk_finds_what_a_scan_of_all_proc_finds() -> None:
    """The trees walked down through /proc/PID/task/TID/children hold the same processes,
    on the same sides, as a scan of every process on the host: a grandchild forked by a
    second thread of a child, and a "postmaster" root that is itself this process's child
    (an embedded server), included."""
    server = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    threaded = subprocess.Popen([sys.executable, "-c",
                                 "import subprocess, threading, time\n"
                                 "started = threading.Event()\n"
                                 "def fork():\n"
                                 "    subprocess.Popen(['sleep', '30'])\n"
                                 "    started.set()\n"
                                 "    time.sleep(30)\n"  # the thread lives: its child is its
                                 "threading.Thread(target=fork, daemon=True).start()\n"
                                 "started.wait(); print(flush=True); time.sleep(30)"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert threaded.stdout is not None
        threaded.stdout.readline()  # its grandchild is started
        me = os.getpid()
        roots = {me, server.pid}
        walked = sample_processes(roots, me, server.pid)
        scanned = _scan_processes(roots, me, server.pid)
        assert set(walked.ticks) == set(scanned.ticks) and walked.driver == scanned.driver
        tasks = list(Path(f"/proc/{threaded.pid}/task").iterdir())
        main_children = (Path(f"/proc/{threaded.pid}/task/{threaded.pid}/children")
                         .read_text().split())
        assert len(tasks) == 2 and main_children == []  # the sleep is the second thread's
        assert str(threaded.pid) in walked.driver and "sleep" in walked.driver.values()
        assert len([p for p in walked.ticks if p not in walked.driver]) == 3  # sh, 2 sleeps
    finally:
        for proc in (server, threaded):
            proc.kill()
            proc.wait()


def test_open_files_are_raised_within_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        assert raise_open_files(soft) == ""
        if hard != resource.RLIM_INFINITY and hard > soft:
            assert raise_open_files(hard) == ""
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
            note = raise_open_files(hard + 1)
            assert f"open files limited to {hard}" in note and f"{hard + 1} needed" in note
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _window_ticks(tdir: Path, start: float, end: float) -> list[dict]:
    """The recorded host samples of the window, as the summary takes them: within half an
    interval of its edges, none closer than half an interval to the one kept before."""
    interval = json.loads((tdir / "meta.json").read_text())["config"]["interval_s"]
    rows = [json.loads(line) for line in (tdir / "host_raw.jsonl").read_text().splitlines()]
    kept: list[dict] = []
    for row in rows:
        if start - interval / 2 <= row["t"] <= end + interval / 2 and (
                not kept or row["mono"] - kept[-1]["mono"] >= interval / 2):
            kept.append(row)
    return kept


def _recomputed_cores(ticks: list[dict]) -> tuple[float, float, float]:
    """(server, driver, pgdyno's sessions) cores over the window from the recorded utime +
    stime per pid."""
    server = driver = own = 0
    for a, b in zip(ticks, ticks[1:], strict=False):
        for pid, used in b["workload_ticks"].items():
            if pid in a["workload_ticks"]:
                spent = max(0, used - a["workload_ticks"][pid])
                if pid in b["driver_pids"]:
                    driver += spent
                elif pid in b["sampler_backends"]:
                    own += spent
                else:
                    server += spent
    wall = ticks[-1]["mono"] - ticks[0]["mono"]
    return server / CLK_TCK / wall, driver / CLK_TCK / wall, own / CLK_TCK / wall


def assert_tprocc_cpu_split(run: Path) -> None:
    """A real TPROC-C run's "whose CPU" table: server and driver cores recomputed from the
    recorded per-process ticks, per New-Order. test_bench_tprocc calls it on its run (one
    TPROC-C run serves both)."""
    (it,) = json.loads((run / "summary.json").read_text())["iterations"]
    c = it["telemetry"]["contamination"]
    tdir = run / "raw" / "pgbench" / "c2-i1" / "telemetry"
    ticks = _window_ticks(tdir, it["window_start_epoch"],
                          it["window_start_epoch"] + it["duration_s"])
    server, driver, own = _recomputed_cores(ticks)
    assert server > 0 and driver > 0
    # pgdyno's own sessions (its samplers', the NOPM snapshots') were known at every tick and
    # counted among the server's processes, so ``own`` sums real processes' ticks (a few
    # ms a second: it may round to zero ticks, never to more than the benchmark's).
    assert all(set(t["sampler_backends"] or ()) & set(t["workload_ticks"]) for t in ticks)
    assert own < server
    assert c["server_cores"] == pytest.approx(server) and c["driver_cores"] == pytest.approx(
        driver)
    assert c["sampler_server_cores"] == pytest.approx(own)
    # The split adds up to the figure the table showed before it.
    assert c["server_cores"] + c["driver_cores"] + c["sampler_server_cores"] == pytest.approx(
        c["benchmark_cores"] - c["sampler_cores"])
    assert c["driver_programs"] == ["pgbench"]
    (postmaster,) = {t["server_pid"] for t in ticks}
    assert postmaster and all(str(postmaster) in t["workload_ticks"] for t in ticks)
    per = c["per_unit"]
    rate = it["metrics"]["nopm"] / 60
    assert per["unit"] == "New-Order" and per["units_per_s"] == pytest.approx(rate)
    assert per["server_cpu_s"] == pytest.approx(server / rate)
    assert per["driver_cpu_s"] == pytest.approx(driver / rate)
    assert per["driver_share_pct"] == pytest.approx(100 * driver / server)
    md = (run / "report.md").read_text()
    assert (f"| server (postmaster and backends) | {server:,.2f} | "
            f"{1000 * server / rate:,.3f} |") in md
    assert (f"| load driver (pgbench) | {driver:,.3f} | {1000 * driver / rate:,.3f} | "
            f"{100 * driver / server:.1f} |") in md
    assert f"the driver spent {100 * driver / server:.1f}% of the server's CPU" in md


@pytest.mark.server
def test_three_hundred_clients_run_with_room_and_connection_time(workdir: Path) -> None:
    results = make_shared_dir("pgdyno-clients-")
    proc = run_cli(["bench", "select-only", "--scale", "1", "--clients", "300", "--warmup",
                    "2", "--duration", "2", "--iterations", "1", "--no-progress",
                    "--no-telemetry", "--results-dir", str(results)], workdir)
    assert proc.returncode == 0, proc.stderr
    run = next(results.glob("*/select-only-*"))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    (it,) = json.loads((run / "summary.json").read_text())["iterations"]
    stdout = (run / "raw" / "pgbench" / "c300-i1" / "stdout.txt").read_text()
    assert "number of clients: 300" in stdout and "number of failed transactions: 0" in stdout
    printed = float(re.search(r"initial connection time = ([\d.]+) ms", stdout)[1])
    assert it["metrics"]["connection_ms"] == printed
    # max_connections as the server reported it (pg_settings, read by pgdyno while it ran):
    # the clients, pgdyno's own sessions and the reserved slots all fit.
    settings = manifest["server"]["non_default_settings"]
    stock = manifest["server"]["stock_settings"]
    reserved = sum(int(settings.get(k, stock.get(k)) or 0)
                   for k in ("superuser_reserved_connections", "reserved_connections"))
    assert int(settings["max_connections"]) >= 300 + PGDYNO_SESSIONS + reserved
    md = (run / "report.md").read_text()
    shown = f"{printed:,.0f}" if printed >= 1000 else f"{printed:.1f}"
    assert "Connection setup (ms)" in md and f"| {shown} |" in md


def test_the_answer_says_how_p99_grows_past_the_peak() -> None:
    from pgdyno.runner.outcome import answer_rows, outcome_of
    from pgdyno.workloads import registry
    from pgdyno.workloads.base import headline_of
    from tests.test_report_rendering import iteration, run_summary

    figures = {1: (900.0, 1.5), 10: (2000.0, 4.0), 100: (1900.0, 40.0), 1000: (1500.0, 700.0)}
    its = []
    for clients, (tps, p99) in figures.items():
        it = iteration(clients, 1, [tps])
        it.metrics = {"tps": tps, "latency_p99_ms": p99}
        its.append(it)
    summary = run_summary(its)
    head = headline_of(summary, registry.get("select-only").metrics)
    assert head is not None and head.clients == 10
    said = {r.item: r.text for r in answer_rows(outcome_of(summary, head, ""))}
    assert said["p99 at the peak"] == "4.00 ms"
    assert said["p99 past the peak"] == "700.00 ms at 1,000 clients, 175.0× the peak's"
