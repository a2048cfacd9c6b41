"""pgdyno's harness overhead: bare pgbench against `pgdyno bench` on the same server.

Starts one embedded server, builds the pgbench dataset once, then runs alternating
pairs (bare, pgdyno, bare, pgdyno, ...) with the same scale, clients, threads, protocol
and duration. pgdyno runs through --dsn so both hit the very same postmaster; its
figure is summary.json's TPS (1 s intervals, telemetry on), the bare figure is the
"tps = ..." pgbench prints. Prints each pair's ratio and the median.

Usage: python bench/overhead.py [--pairs 5] [--duration 20] [--clients 4] [--workload select-only]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer

BUILTIN = {"select-only": "select-only", "tpcb": "tpcb-like", "simple-update": "simple-update"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workload", default="select-only", choices=sorted(BUILTIN))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pgdyno-overhead-", dir="/var/tmp"))
    work.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=work)
    server.prepare()
    server.start()
    try:
        conn = server.connection()
        pgbench = server.install.program("pgbench")
        threads = min(args.clients, 2)
        subprocess.run([pgbench, *conn.client_args(), "-i", "-s", str(args.scale), "-I", "dtGvp",
                        "-q", conn.dbname], check=True, capture_output=True)
        dsn = f"postgresql://{conn.user}@/{conn.dbname}?host={conn.host}&port={conn.port}"
        ratios = []
        for pair in range(1, args.pairs + 1):
            out = subprocess.run(
                [pgbench, *conn.client_args(), "-c", str(args.clients), "-j", str(threads),
                 "-T", str(args.duration), "-M", "prepared", "-b", BUILTIN[args.workload],
                 conn.dbname], capture_output=True, text=True, check=True).stdout
            bare = float(re.search(r"^tps = ([\d.]+)", out, re.MULTILINE).group(1))
            results = work / f"results-{pair}"
            subprocess.run(
                [sys.executable, "-m", "pgdyno", "bench", args.workload, "--dsn", dsn,
                 "--force", "--clients", str(args.clients), "--threads", str(threads),
                 "--duration", str(args.duration), "--warmup", "0", "--iterations", "1",
                 "--scale", str(args.scale), "--protocol", "prepared", "--no-progress",
                 "--results-dir", str(results)], check=True, capture_output=True)
            summary = json.loads(next(results.glob("*/*/summary.json")).read_text())
            ours = summary["per_clients"][0]["tps_mean"]
            ratios.append(ours / bare)
            print(f"pair {pair}: pgbench {bare:,.0f} tps, pgdyno {ours:,.0f} tps, "
                  f"ratio {ours / bare:.3f}", flush=True)
        print(f"median ratio pgdyno/pgbench over {args.pairs} pairs: "
              f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
