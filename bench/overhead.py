"""pgdyno's harness overhead: bare pgbench against `pgdyno bench` on the same server.

Starts one embedded server, builds the pgbench dataset once, then runs rounds: in each
round every condition (workload × clients × telemetry on/off) runs one alternating pair,
bare pgbench then `pgdyno bench` with the same scale, clients, threads, protocol and
duration, so that the machine's drift spreads over every condition. pgdyno runs through
--dsn so both hit the very same postmaster; its figure is summary.json's TPS (1 s
intervals), the bare figure is the "tps = ..." pgbench prints. Prints each pair's ratio,
then per condition the median and best-of-N ratio.

Usage: python bench/overhead.py [--pairs 5] [--duration 15] [--clients 4,16]
                                [--workloads select-only,tpcb] [--telemetry on,off]
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
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workloads", default="select-only,tpcb")
    ap.add_argument("--telemetry", default="on,off")
    args = ap.parse_args()
    conditions = [(w, int(c), t == "on") for w in args.workloads.split(",")
                  for c in args.clients.split(",") for t in args.telemetry.split(",")]
    work = Path(tempfile.mkdtemp(prefix="pgdyno-overhead-", dir="/var/tmp"))
    work.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=work)
    server.prepare()
    server.start()
    ratios: dict[tuple, list[float]] = {c: [] for c in conditions}
    try:
        conn = server.connection()
        pgbench = server.install.program("pgbench")
        dsn = f"postgresql://{conn.user}@/{conn.dbname}?host={conn.host}&port={conn.port}"
        # pgdyno builds the dataset (and records it), so its runs reuse what bare pgbench uses.
        _pgdyno(work / "build", dsn, "select-only", 1, False,
                argparse.Namespace(duration=1, scale=args.scale))
        for pair in range(1, args.pairs + 1):
            for workload, clients, telemetry in conditions:
                bare = _bare(pgbench, conn, workload, clients, args.duration)
                ours = _pgdyno(work / f"r{pair}-{workload}-{clients}-{telemetry}", dsn,
                               workload, clients, telemetry, args)
                ratios[(workload, clients, telemetry)].append(ours / bare)
                print(f"pair {pair} {workload} c{clients} telemetry "
                      f"{'on' if telemetry else 'off'}: pgbench {bare:,.0f} tps, pgdyno "
                      f"{ours:,.0f} tps, ratio {ours / bare:.3f}", flush=True)
        print("\nworkload      clients  telemetry  median  best  (pgdyno/pgbench TPS)")
        for (workload, clients, telemetry), rs in ratios.items():
            print(f"{workload:<13}{clients:>8}  {'on' if telemetry else 'off':>9}  "
                  f"{statistics.median(rs):6.3f}  {max(rs):.3f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _bare(pgbench: str, conn, workload: str, clients: int, duration: int) -> float:
    out = subprocess.run(
        [pgbench, *conn.client_args(), "-c", str(clients), "-j", str(min(clients, 2)),
         "-T", str(duration), "-M", "prepared", "-b", BUILTIN[workload], conn.dbname],
        capture_output=True, text=True, check=True).stdout
    return float(re.search(r"^tps = ([\d.]+)", out, re.MULTILINE).group(1))


def _pgdyno(results: Path, dsn: str, workload: str, clients: int, telemetry: bool,
            args: argparse.Namespace) -> float:
    subprocess.run(
        [sys.executable, "-m", "pgdyno", "bench", workload, "--dsn", dsn, "--force",
         "--clients", str(clients), "--threads", str(min(clients, 2)),
         "--duration", str(args.duration), "--warmup", "0", "--iterations", "1",
         "--scale", str(args.scale), "--protocol", "prepared", "--no-progress",
         "--telemetry" if telemetry else "--no-telemetry", "--results-dir", str(results)],
        check=True, capture_output=True)
    summary = json.loads(next(results.glob("*/*/summary.json")).read_text())
    return summary["per_clients"][0]["tps_mean"]


if __name__ == "__main__":
    main()
