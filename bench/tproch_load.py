"""TPROC-H load speed on this machine: seconds and CPU seconds per phase at SF 1, 5 and 10.

Each scale factor is loaded from scratch (rebuild; the previous size's tables are dropped
first, so the disk holds one size at a time) with the default number of loader
connections (one per core) unless --workers says otherwise, into one embedded PostgreSQL
18 with the stock configuration started in a scratch directory (under /var/tmp unless
--workdir says otherwise), removed at the end. ``--wal-level minimal`` starts it with
wal_level = minimal and max_wal_senders = 0, as a user may for a server pgdyno owns
(``--set``): the loader's COPYs into tables truncated in their own transaction and its
index builds then write no WAL at all.

Per round and size it prints one JSON line: each phase's wall seconds (data, keys,
vacuum), and each phase's CPU seconds of the server (the postmaster, its live backends
and its exited ones, read at the phase boundaries), of the generators (tpchgen-cli, this
process's reaped children) and of this process (the loader relaying the generators'
output into COPY); then the WAL written and the database's size. Then it fits
seconds = fixed + per_sf x SF by least squares, for the whole load and for each phase,
and projects SF 30 and 100. Everything is also written to the result file (--output).

Before loading it refuses, in one line, a filesystem without room for the largest size
(DISK_BYTES_PER_SF x SF plus a margin).

    python bench/tproch_load.py                                 # SF 1, 5, 10
    python bench/tproch_load.py --scale-factors 0.1,0.3 --rounds 2

SF 1, 5 and 10 take about 6 to 7 minutes on 2 cores (the three loads: about 20, 120 and
220 s, measured on a busy machine before the last build's parallel worker) and need
about 23 GB free at the peak (SF 10: 17 GB of tables and indexes, sort files, WAL).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import psutil
import psycopg
from harness import (
    ResultWriter,
    children_cpu_s,
    line_fit,
    new_parser,
    process_tree_cpu_s,
    require_free,
    run,
    scratch,
    wait_for_children,
)

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.tproch.loader import default_workers, load
from pgdyno.workloads.tproch.model import LoadOptions, LoadProgress

DISK_BYTES_PER_SF = 2_000_000_000
"""What one SF of TPROC-H takes on disk: heap, keys and indexes once loaded (1.71 GB at
SF 1, pg_database_size as measured here), plus the sort files of lineitem's two index
builds while they run at once (about 0.3 GB per SF once their sorts spill)."""

DISK_MARGIN_BYTES = 3_000_000_000
"""WAL (max_wal_size 1 GB by default, and more while a checkpoint lags behind the load),
the cluster itself and the rest."""

PROJECT_AT = (30, 100)

STAGES = ("data", "keys", "vacuum")


def cpu_of(proc: psutil.Process, children: bool) -> float:
    times = proc.cpu_times()
    total = times.user + times.system
    if children:
        total += times.children_user + times.children_system
    return total


class CpuMeter:
    """CPU seconds of the server, the generators and the loader, taken at each phase
    boundary (from the load's progress callback, in the loader's thread).

    The server: the postmaster's own, its exited children's (reaped: in its children
    times) and its live children's. The loader's connections last the whole load (its
    stages overlap, so a stage's CPU is that of its time window), and at the end the
    meter waits for their backends to be reaped. The generators: this process's reaped children
    (the server is no child of it). The loader: this process, every thread."""

    def __init__(self, postmaster: psutil.Process) -> None:
        self.postmaster = postmaster
        self.me = psutil.Process()
        self.phase = "data"
        self.idle_children = len(postmaster.children())
        self.cpu: dict[str, dict[str, float]] = {"postgres": {}, "generators": {},
                                                 "loader": {}}
        self.last = self._now()

    def _now(self) -> dict[str, float]:
        return {"postgres": process_tree_cpu_s(self.postmaster.pid),
                "generators": children_cpu_s(), "loader": cpu_of(self.me, children=False)}

    def progress(self, report: LoadProgress) -> None:
        if report.phase != self.phase:
            self._take()
            self.phase = report.phase
        _progress(report)

    def _take(self) -> None:
        if self.phase == STAGES[-1]:
            # Once the load is over, until its backends are reaped (their CPU is then in
            # the postmaster's children times; an exited one not yet reaped shows none).
            wait_for_children(self.postmaster.pid, self.idle_children, timeout_s=5.0)
        now = self._now()
        for who, value in now.items():
            self.cpu[who][self.phase] = round(value - self.last[who], 2)
        self.last = now

    def close(self) -> dict[str, dict[str, float]]:
        return self.cpu


def _progress(report: LoadProgress) -> None:
    print(f"\r  {report.phase:<7} {report.rows:>11,}/{report.rows_total:,} rows  "
          f"{report.steps_done}/{report.steps_total} steps  "
          f"{report.rows_per_s:,.0f} rows/s  {report.elapsed_s:6.1f} s   ", end="",
          file=sys.stderr, flush=True)


def wal_lsn(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint").fetchone()[0]


def check_room(workdir: Path, largest_sf: float) -> None:
    """One line and exit 1 when the filesystem of ``workdir`` cannot hold the largest size."""
    require_free(workdir, int(DISK_BYTES_PER_SF * largest_sf + DISK_MARGIN_BYTES),
                 f"SF {largest_sf:g} (--scale-factors; --workdir elsewhere)")


def fit_line(xs: list[float], ys: list[float]) -> dict[str, float] | None:
    """Least squares y = fixed + per_sf x SF; None with fewer than two distinct sizes."""
    line = line_fit(xs, ys)
    if line is None:
        return None
    return {"fixed_s": round(line.intercept, 2), "per_sf_s": round(line.slope, 2),
            "r2": round(line.r2, 4)}


def scaling(rows: list[dict]) -> dict:
    """Fits of the whole load, each phase and the total CPU, with projections."""
    xs = [row["scale_factor"] for row in rows]
    fits: dict[str, dict | None] = {"total": fit_line(xs, [r["seconds"] for r in rows])}
    for phase in ("data", "keys", "vacuum"):
        fits[phase] = fit_line(xs, [r["phase_seconds"].get(phase, 0.0) for r in rows])
    fits["cpu_total"] = fit_line(xs, [r["cpu_total_seconds"] for r in rows])
    total = fits["total"]
    projected = ({f"sf_{sf:g}_s": round(total["fixed_s"] + total["per_sf_s"] * sf)
                  for sf in PROJECT_AT} if total else {})
    return {"fits": fits, "projected": projected,
            "seconds_per_sf": {f"{r['scale_factor']:g}": round(r["seconds"] / r["scale_factor"], 1)
                               for r in rows}}


def load_one(target: ConnectionInfo, sf: float,
             args: argparse.Namespace, round_no: int) -> dict:
    options = LoadOptions(scale_factor=sf, workers=args.workers, rebuild=True,
                          maintenance_work_mem=args.maintenance_work_mem,
                          max_parallel_maintenance_workers=args.parallel_maintenance)
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        lsn = wal_lsn(conn)
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        meter = CpuMeter(psutil.Process(backend).parent())
        started = time.monotonic()
        result = load(target, options, meter.progress)
        wall = time.monotonic() - started
        cpu = meter.close()
        wal = wal_lsn(conn) - lsn
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    print(file=sys.stderr)
    return {
        "round": round_no, "scale_factor": sf, "workers": result.workers,
        "cpus": default_workers(), "wal_level": args.wal_level,
        "parts": {t: n for t, n in result.parts.items() if n > 1},
        "seconds": round(result.seconds, 1), "wall_seconds": round(wall, 1),
        "rows": sum(result.rows.values()), "rows_per_second": round(result.rows_per_s),
        "phase_seconds": {k: round(v, 1) for k, v in result.phase_seconds.items()},
        "cpu_seconds": cpu,
        "cpu_total_seconds": round(sum(v for by in cpu.values() for v in by.values()), 1),
        "wal_bytes": wal, "database_bytes": size,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--scale-factors", default="1,5,10",
                        help="comma-separated scale factors, loaded in this order")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--wal-level", choices=("replica", "minimal"), default="replica",
                        help="the server's wal_level (replica: PostgreSQL's default)")
    parser.add_argument("--maintenance-work-mem", default=LoadOptions.maintenance_work_mem)
    parser.add_argument("--parallel-maintenance", type=int,
                        default=LoadOptions.max_parallel_maintenance_workers,
                        help="max_parallel_maintenance_workers of the key builds")
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        sizes = [float(s) for s in args.scale_factors.split(",") if s.strip()]
    except ValueError:
        sys.exit(f"tproch_load: --scale-factors {args.scale_factors}: expected numbers "
                 "separated by commas, e.g. 1,5,10")
    if not sizes:
        sys.exit("tproch_load: --scale-factors is empty; e.g. 1,5,10")
    for sf in sizes:
        LoadOptions(scale_factor=sf)  # the loader's own refusal, before anything starts
    args.workdir.mkdir(parents=True, exist_ok=True)
    check_room(args.workdir, max(sizes))

    writer = ResultWriter("tproch_load", args)
    settings = ({"wal_level": "minimal", "max_wal_senders": "0"}
                if args.wal_level == "minimal" else {})
    rows: list[dict] = []
    with scratch("tproch-load", args.workdir) as workdir:
        server = LocalServer(install=embedded_install(), workdir=workdir, name="load",
                             settings=settings)
        try:
            server.prepare()
            server.start()
            target = server.connection()
            for round_no in range(1, args.rounds + 1):
                for sf in sizes:
                    row = load_one(target, sf, args, round_no)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                    writer.write({"results": rows})
        finally:
            server.stop()
    summary = scaling(rows)
    print(json.dumps(summary), flush=True)
    writer.finish({"results": rows, "scaling": summary})
    return 0


if __name__ == "__main__":
    run(main)
