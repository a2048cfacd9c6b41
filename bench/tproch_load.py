"""TPROC-H load speed on this machine: seconds per phase (data, keys, vacuum) at one SF.

One embedded PostgreSQL 18 server with the stock configuration, in its own workdir
under /var/tmp; the dataset is loaded from scratch (rebuild) ``--rounds`` times with
the default number of loader connections (one per core) unless --workers says
otherwise. Prints one JSON line per round and writes them all to --out.

    python bench/tproch_load.py --scale-factor 1 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.tproch.loader import default_workers, load
from pgdyno.workloads.tproch.model import LoadOptions, LoadProgress


class CpuMeter:
    """CPU seconds per load phase: of the server's processes (sampled every 0.2 s, so a
    backend that lives less long is missed) and of the generators (this process's
    children, counted when they are reaped)."""

    def __init__(self, server_pid: int) -> None:
        self.server = psutil.Process(server_pid)
        self.phase = "data"
        self.seen: dict[int, float] = {}
        self.postgres: dict[str, float] = {}
        self.generators: dict[str, float] = {}
        self.children = self._children_cpu()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def progress(self, report: LoadProgress) -> None:
        if report.phase != self.phase:
            self._take()
            now = self._children_cpu()
            self.generators[self.phase] = self.generators.get(self.phase, 0) + now - self.children
            self.children = now
            self.phase = report.phase
        _progress(report)

    def close(self) -> dict[str, dict[str, float]]:
        self.stop.set()
        self.thread.join()
        return {"postgres": {k: round(v, 1) for k, v in self.postgres.items()},
                "generators": {k: round(v, 1) for k, v in self.generators.items() if v}}

    @staticmethod
    def _children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _sample(self) -> None:
        while not self.stop.wait(0.2):
            self._take()

    def _take(self) -> None:
        procs = [self.server, *self.server.children()]
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            total = times.user + times.system
            before = self.seen.get(proc.pid, 0.0)
            self.seen[proc.pid] = total
            self.postgres[self.phase] = self.postgres.get(self.phase, 0.0) + total - before


def _progress(report: LoadProgress) -> None:
    print(f"\r  {report.phase:<7} {report.rows:>11,}/{report.rows_total:,} rows  "
          f"{report.steps_done}/{report.steps_total} steps  "
          f"{report.rows_per_s:,.0f} rows/s  {report.elapsed_s:6.1f} s   ", end="",
          file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale-factor", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--split-share", type=float, default=None,
                        help="LoadOptions.split_share (default: the loader's)")
    parser.add_argument("--maintenance-work-mem", default=LoadOptions.maintenance_work_mem)
    parser.add_argument("--parallel-maintenance", type=int,
                        default=LoadOptions.max_parallel_maintenance_workers,
                        help="max_parallel_maintenance_workers of the key builds")
    parser.add_argument("--out", type=Path, default=Path("tproch_load.json"))
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-tproch-load-", dir="/var/tmp"))
    workdir.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=workdir, name="load")
    results = []
    try:
        server.prepare()
        server.start()
        for round_no in range(1, args.rounds + 1):
            options = LoadOptions(scale_factor=args.scale_factor, workers=args.workers,
                                  rebuild=True, split_share=args.split_share,
                                  maintenance_work_mem=args.maintenance_work_mem,
                                  max_parallel_maintenance_workers=args.parallel_maintenance)
            started = time.monotonic()
            meter = CpuMeter(server.pid or 0)
            result = load(server.connection(), options, meter.progress)
            cpu = meter.close()
            print(file=sys.stderr)
            row = {
                "round": round_no,
                "scale_factor": args.scale_factor,
                "workers": result.workers,
                "cpus": default_workers(),
                "parts": {t: n for t, n in result.parts.items() if n > 1},
                "maintenance_work_mem": args.maintenance_work_mem,
                "max_parallel_maintenance_workers": args.parallel_maintenance,
                "seconds": round(result.seconds, 1),
                "wall_seconds": round(time.monotonic() - started, 1),
                "rows": sum(result.rows.values()),
                "rows_per_second": round(result.rows_per_s),
                "phase_seconds": {k: round(v, 1) for k, v in result.phase_seconds.items()},
                "cpu_seconds": cpu,
            }
            print(json.dumps(row), flush=True)
            results.append(row)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    args.out.write_text(json.dumps({"schema_version": 1, "bench": "tproch_load",
                                    "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
