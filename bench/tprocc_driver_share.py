"""The TPROC-C load driver's CPU per New-Order against the server's, at saturation.

Runs ``pgdyno bench tprocc`` at a few virtual-user counts (by default 2, 4 and 8 per core,
past where NOPM stops growing on a small machine), then reads each iteration's whose-CPU
figures from summary.json: the server's and pgbench's cores, their CPU milliseconds per
New-Order and the driver's share of the server's. On a small machine the driver shares
the cores with the server, so its share should stay at most 5% at saturation; the exit
code is 1 when the most saturated count is above it.

The scripts pgbench runs are one SELECT each: the server draws the random inputs (see
sql/transactions.sql), so what is left of the driver's CPU is pgbench's own cost per
transaction (waking for each result, libpq, the -l log line). On 2 cores the defaults take
about 3 minutes: the W=4 load, then three 5 + 30 s iterations.

Usage: python bench/tprocc_driver_share.py [--warehouses 4] [--duration 30]
                                           [--vus 4,8,16] [--results-dir DIR]

The run is kept under --results-dir (default /var/tmp/pgdyno-bench/tprocc_driver_share).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, kept_dir, new_parser, run

LIMIT_PCT = 5.0


def build_parser() -> argparse.ArgumentParser:
    cores = len(os.sched_getaffinity(0))
    parser = new_parser(__doc__)
    parser.add_argument("--warehouses", type=int, default=4)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--rampup", type=int, default=5)
    parser.add_argument("--vus", default=",".join(str(k * cores) for k in (2, 4, 8)))
    parser.add_argument("--results-dir", type=Path, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = args.results_dir or kept_dir("tprocc_driver_share")
    results.mkdir(parents=True, exist_ok=True)
    results.chmod(0o755)  # the server runs as the unprivileged pgdyno user: it must enter
    args.results_dir = results
    writer = ResultWriter("tprocc_driver_share", args)
    cmd = [sys.executable, "-m", "pgdyno", "bench", "tprocc", "--warehouses",
           str(args.warehouses), "--vus", args.vus, "--rampup", str(args.rampup),
           "--duration", str(args.duration), "--iterations", "1", "--no-progress",
           "--results-dir", str(results)]
    subprocess.run(cmd, check=True)
    run_summary = max(results.glob("*/tprocc-*/summary.json"), key=lambda p: p.stat().st_mtime)
    rows, figures = [], []
    print(f"{'VUs':>5} {'NOPM':>9} {'server cores':>13} {'driver cores':>13} "
          f"{'server ms/NO':>13} {'driver ms/NO':>13} {'driver share':>13}")
    for it in json.loads(run_summary.read_text())["iterations"]:
        c = (it.get("telemetry") or {}).get("contamination") or {}
        per = c.get("per_unit")
        if not per or per.get("driver_share_pct") is None:
            print(f"{it['clients']:>5} no CPU split recorded")
            continue
        rows.append((it["metrics"]["nopm"], it["clients"], per["driver_share_pct"]))
        figures.append({"vus": it["clients"], "nopm": it["metrics"]["nopm"],
                         "server_cores": c["server_cores"], "driver_cores": c["driver_cores"],
                         "server_ms_per_new_order": 1000 * per["server_cpu_s"],
                         "driver_ms_per_new_order": 1000 * per["driver_cpu_s"],
                         "driver_share_pct": per["driver_share_pct"]})
        print(f"{it['clients']:>5} {it['metrics']['nopm']:>9,.0f} {c['server_cores']:>13.2f} "
              f"{c['driver_cores']:>13.3f} {1000 * per['server_cpu_s']:>13.3f} "
              f"{1000 * per['driver_cpu_s']:>13.3f} {per['driver_share_pct']:>12.1f}%")
    if not rows:
        writer.finish({"iterations": figures, "run": str(run_summary.parent)})
        return 1
    _nopm, vus, share = max(rows)  # the highest NOPM: the saturated point
    print(f"at the peak ({vus} VUs) the driver spent {share:.1f}% of the server's CPU per "
          f"New-Order (limit {LIMIT_PCT:g}%); runs in {results}")
    writer.finish({"iterations": figures, "run": str(run_summary.parent),
                   "peak_vus": vus, "peak_driver_share_pct": share, "limit_pct": LIMIT_PCT})
    return 0 if share <= LIMIT_PCT else 1


if __name__ == "__main__":
    run(main)
