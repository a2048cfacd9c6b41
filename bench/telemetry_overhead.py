"""What telemetry costs: select-only TPS at saturation with telemetry on vs off.

Runs alternating pairs (on/off, then off/on, ...) on one embedded server so that drift
and neighbours' load hit both arms alike, and prints each pair's ratio plus the median
and the mean of on/off TPS. Goal: ratio >= 0.98. On a shared, noisy machine the TPS ratio
swings by more than the effect measured, so the script also measures what telemetry
consumes directly: CPU seconds of the sampler threads and of their server backends per
second of run, which bounds the TPS lost by a CPU-saturated workload.

    python bench/telemetry_overhead.py [--pairs 5] [--seconds 10] [--clients 4]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.telemetry import TelemetryConfig, TelemetryRecorder, catalog


def run_pgbench(srv: LocalServer, args: list[str]) -> float:
    conn = srv.connection()
    proc = subprocess.run([srv.install.program("pgbench"), *conn.client_args(), *args,
                           conn.dbname], env=conn.client_env(), capture_output=True, text=True,
                          check=True)
    match = re.search(r"tps = ([\d.]+) \(without initial connection time\)", proc.stdout)
    if match is None:
        raise RuntimeError(proc.stdout + proc.stderr)
    return float(match.group(1))


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of a process from /proc/PID/stat, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _telemetry_backends(srv: LocalServer) -> list[int]:
    import psycopg

    with psycopg.connect(srv.connection().conninfo(), autocommit=True) as pg:
        rows = pg.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                          (catalog.APPLICATION_NAME,)).fetchall()
    return [r[0] for r in rows]


def one_run(srv: LocalServer, raw: Path, telemetry: bool,
            bench: list[str]) -> tuple[float, float | None]:
    """(TPS, CPU seconds per second spent on telemetry: sampler threads + their backends)."""
    if not telemetry:
        return run_pgbench(srv, bench), None
    shutil.rmtree(raw, ignore_errors=True)
    rec = TelemetryRecorder(raw, srv.connection(), srv.data_dir, srv.effective_wal_dir,
                            srv.log_path, srv.log_size(), TelemetryConfig(smart=False))
    result: dict[str, float] = {}
    runner = threading.Thread(target=lambda: result.update(tps=run_pgbench(srv, bench)))
    rec.start()
    try:
        runner.start()
        time.sleep(1.5)  # connections are open by now
        pids = _telemetry_backends(srv)
        t0, own0 = time.monotonic(), sum(os.times()[:2])
        back0 = sum(_proc_cpu_s(p) for p in pids)
        time.sleep(max(1.0, float(bench[-1]) - 3.0))
        back1 = sum(_proc_cpu_s(p) for p in pids)
        t1, own1 = time.monotonic(), sum(os.times()[:2])
        runner.join()
    finally:
        rec.stop()
    # os.times() of this process: its only busy threads are the samplers (the main thread
    # waits for pgbench, whose CPU is counted as a child's, not here).
    return result["tps"], ((own1 - own0) + (back1 - back0)) / (t1 - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=2 * (os.cpu_count() or 1))
    opts = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-overhead-", dir="/var/tmp"))
    workdir.chmod(0o755)
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="overhead")
    bench = ["-S", "-M", "prepared", "-c", str(opts.clients),
             "-j", str(min(opts.clients, os.cpu_count() or 1)), "-T", str(opts.seconds)]
    ratios, costs = [], []
    try:
        srv.prepare()
        srv.start()
        conn = srv.connection()
        subprocess.run([srv.install.program("pgbench"), *conn.client_args(), "-i", "-q",
                        "-s", "1", conn.dbname], env=conn.client_env(), check=True,
                       capture_output=True)
        run_pgbench(srv, bench[:-1] + ["3"])  # warm-up
        for i in range(opts.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            runs = {on: one_run(srv, workdir / "raw", on, bench) for on in order}
            tps = {on: r[0] for on, r in runs.items()}
            cost = runs[True][1] or 0.0
            ratios.append(tps[True] / tps[False])
            costs.append(cost)
            print(f"pair {i + 1}: on {tps[True]:.0f} tps, off {tps[False]:.0f} tps, "
                  f"ratio {ratios[-1]:.4f}; telemetry CPU {1000 * cost:.1f} ms/s", flush=True)
    finally:
        srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"median ratio {statistics.median(ratios):.4f}, mean ratio "
          f"{statistics.fmean(ratios):.4f} over {len(ratios)} pairs "
          f"(select-only, {opts.clients} clients, {opts.seconds} s each)")
    # The noise-free figure: the CPU telemetry takes from a CPU-saturated workload bounds
    # the throughput it can cost there.
    cores = os.cpu_count() or 1
    cost = statistics.median(costs)
    print(f"telemetry CPU {1000 * cost:.1f} ms per second = {100 * cost / cores:.2f}% of "
          f"{cores} cores -> CPU-bound ratio bound {1 - cost / cores:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
