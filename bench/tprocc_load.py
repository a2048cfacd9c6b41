"""TPROC-C load speed on this machine: warehouses per minute at W = 10 and W = 50.

One embedded PostgreSQL 18 server with the stock configuration, in its own workdir
under /var/tmp; each size is loaded from scratch (rebuild) with the default number of
loader connections (one per core) unless --workers says otherwise. Prints one JSON line
per size and writes them all to --out.

    python bench/tprocc_load.py --warehouses 10,50
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.tprocc import LoadOptions, LoadProgress, default_workers, load


def _progress(report: LoadProgress) -> None:
    print(f"\r  {report.phase:<7} {report.warehouses_done}/{report.warehouses_total} "
          f"warehouses  {report.steps_done}/{report.steps_total} steps  "
          f"{report.rows_per_s:,.0f} rows/s  {report.elapsed_s:6.1f} s", end="",
          file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouses", default="10,50")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("tprocc_load.json"))
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-tprocc-load-", dir="/var/tmp"))
    workdir.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=workdir, name="load")
    results = []
    try:
        server.prepare()
        server.start()
        for warehouses in (int(w) for w in args.warehouses.split(",")):
            options = LoadOptions(warehouses=warehouses, workers=args.workers, rebuild=True,
                                  order_line_partitions=args.partitions)
            started = time.monotonic()
            result = load(server.connection(), options, _progress)
            print(file=sys.stderr)
            row = {
                "warehouses": warehouses,
                "workers": result.workers,
                "cpus": default_workers(),
                "order_line_partitions": result.order_line_partitions,
                "seconds": round(result.seconds, 1),
                "wall_seconds": round(time.monotonic() - started, 1),
                "warehouses_per_minute": round(result.warehouses_per_minute, 1),
                "rows": result.rows,
                "rows_per_second": round(result.rows / result.seconds),
                "phase_seconds": {k: round(v, 1) for k, v in result.phase_seconds.items()},
            }
            print(json.dumps(row), flush=True)
            results.append(row)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    args.out.write_text(json.dumps({"schema_version": 1, "bench": "tprocc_load",
                                    "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
