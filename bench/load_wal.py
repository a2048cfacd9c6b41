"""A dataset build with --load-wal minimal (the default) against --load-wal configured.

Each run is a whole `pgdyno bench WORKLOAD ... --load-wal MODE` in a fresh workdir (a new
cluster, so the dataset is built, never reused), with one short measured second; the build's
time and phases are read from the run's manifest (dataset.load_record), the WAL the cluster
wrote from its own pg_stat_wal, read by starting the cluster again afterwards (the counter
survives a clean shutdown; it includes the measured second). The modes alternate, the order
reversed every other round (ABBA), as this VM's speed jumps between two levels; the summary
gives the median and the best of each mode and the ratio of the medians.

Usage:
    python bench/load_wal.py --workload tpcb --size "--scale 300" --rounds 3
    python bench/load_wal.py --workload tprocc --size "--warehouses 10" --rounds 3
    python bench/load_wal.py --workload tprocc --size "--warehouses 100" --rounds 1
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import psycopg
from harness import ResultWriter, alternate, new_parser, run, scratch

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer

MODES = ("minimal", "configured")


def one_run(workload: str, size_args: list[str], mode: str) -> dict:
    with scratch("load-wal") as work:
        results = work / "results"
        cmd = [sys.executable, "-m", "pgdyno", "bench", workload, *size_args, "--load-wal", mode,
               "--clients", "1", "--duration", "1", "--warmup", "0", "--iterations", "1",
               "--no-telemetry", "--no-progress", "--results-dir", str(results),
               "--workdir", str(work / "w")]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        manifest = json.loads(next(results.glob(f"*/{workload}-*/manifest.json")).read_text())
        record = manifest["dataset"]["load_record"]
        return {"mode": mode, "seconds": record["seconds"],
                "phases": {p["phase"]: p["seconds"] for p in record["phases"]},
                "settings": record.get("settings", {}), "wal_mb": cluster_wal_mb(work / "w")}


def cluster_wal_mb(workdir: Path) -> float:
    srv = LocalServer(install=embedded_install(), workdir=workdir, name="pg18-embedded")
    srv.start()
    try:
        with psycopg.connect(srv.admin_connection().conninfo(), autocommit=True) as db:
            return float(db.execute("SELECT wal_bytes FROM pg_stat_wal").fetchone()[0]) / 2**20
    finally:
        srv.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--workload", default="tpcb")
    parser.add_argument("--size", default="--scale 100",
                        help="the workload's size options, as on the command line")
    parser.add_argument("--rounds", type=int, default=3)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("load_wal", args)
    runs = []
    for r in range(args.rounds):
        for mode in alternate(MODES, r):
            run_ = {"round": r + 1, **one_run(args.workload, shlex.split(args.size), mode)}
            runs.append(run_)
            writer.write({"runs": runs})
            print(json.dumps(run_), flush=True)
    print(f"\n{'mode':<12}{'n':>3}{'median s':>10}{'best s':>8}  median phases (s)"
          f"{'':<20}{'WAL MB':>9}")
    medians = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        medians[mode] = statistics.median(r["seconds"] for r in mine)
        phases = {p: statistics.median(r["phases"].get(p, 0.0) for r in mine)
                  for p in mine[0]["phases"]}
        text = ", ".join(f"{p} {v:.1f}" for p, v in phases.items())
        print(f"{mode:<12}{len(mine):>3}{medians[mode]:>10.2f}"
              f"{min(r['seconds'] for r in mine):>8.2f}  {text:<37}"
              f"{statistics.median(r['wal_mb'] for r in mine):>9,.0f}")
    print(f"minimal / configured, medians: {medians['minimal'] / medians['configured']:.3f}")
    writer.finish({"runs": runs, "medians": medians})
    return 0


if __name__ == "__main__":
    run(main)
