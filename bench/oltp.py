"""sysbench-style OLTP on this machine: TPS and QPS of oltp-read-only and oltp-read-write at
8 and 32 clients, through `pgdyno bench` (the embedded PostgreSQL 18, stock config).

Each run is `pgdyno bench WORKLOAD --clients 8,32 --iterations N` (iteration-major, so
drift spreads over both client counts); the two workloads alternate for --rounds rounds,
since this VM's throughput jumps between two levels. Prints the per-iteration figures
read from each run's summary.json and, per workload and client count, the median and the
best TPS and QPS over every iteration. The runs go to a scratch directory under /var/tmp,
removed at the end (--keep keeps it).

    python bench/oltp.py --rounds 2 --iterations 3 --duration 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, alternate, new_parser, run, scratch

WORKLOADS = ("oltp-read-only", "oltp-read-write")


def run_workload(workload: str, args: argparse.Namespace, results: Path, workdir: Path) -> Path:
    cmd = [sys.executable, "-m", "pgdyno", "bench", workload, "--clients", args.clients,
           "--tables", str(args.tables), "--table-size", str(args.table_size),
           "--duration", str(args.duration), "--warmup", str(args.warmup),
           "--iterations", str(args.iterations), "--results-dir", str(results),
           "--no-progress"]
    subprocess.run(cmd, check=True, env=dict(os.environ, PGDYNO_WORKDIR=str(workdir)))
    return sorted(results.glob(f"*--{workload}/{workload}-*"))[-1]


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=100_000)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the runs' directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("oltp", args)
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    iterations = []
    with scratch("oltp", keep=args.keep) as base:
        for round_no in range(args.rounds):
            for workload in alternate(WORKLOADS, round_no):
                run_dir = run_workload(workload, args, base / "results", base / "work")
                summary = json.loads((run_dir / "summary.json").read_text())
                for it in summary["iterations"]:
                    m = it["metrics"]
                    samples.setdefault((workload, it["clients"]), []).append(
                        (m["tps"], m["qps"]))
                    iterations.append({"workload": workload, "clients": it["clients"],
                                       "iteration": it["iteration"],
                                       "tps": round(m["tps"], 1), "qps": round(m["qps"], 1),
                                       "run": run_dir.name})
                    print(json.dumps(iterations[-1]))
                writer.write({"iterations": iterations})
    rows = []
    print(f"\n{'workload':<18}{'clients':>8}{'n':>4}{'TPS median':>12}{'TPS best':>10}"
          f"{'QPS median':>12}{'QPS best':>10}")
    for (workload, clients), values in sorted(samples.items()):
        tps, qps = [v[0] for v in values], [v[1] for v in values]
        row = {"workload": workload, "clients": clients, "n": len(values),
               "tps_median": statistics.median(tps), "tps_best": max(tps),
               "qps_median": statistics.median(qps), "qps_best": max(qps)}
        rows.append(row)
        print(f"{workload:<18}{clients:>8}{len(values):>4}{row['tps_median']:>12,.0f}"
              f"{row['tps_best']:>10,.0f}{row['qps_median']:>12,.0f}{row['qps_best']:>10,.0f}")
    writer.finish({"iterations": iterations, "summary": rows})
    return 0


if __name__ == "__main__":
    run(main)
