"""TPROC-C load speed on this machine: warehouses per minute at W = 10, 50 and 100.

Each size is loaded from scratch (rebuild) with the default number of loader connections
(one per core) unless --workers says otherwise, into an embedded PostgreSQL 18 with the
stock configuration started in its own workdir under /var/tmp, with the WAL settings and
spaced checkpoints pgdyno gives a load on its own server (workloads.bulkload: wal_level
minimal, wal_buffers 64 MB and wal_writer_delay 10 ms by a restart, or with --load-wal
configured the stock ones; max_wal_size and checkpoint_timeout by a reload, or with
--no-spacing the stock ones), or with
--dsn into an existing server (its database must be empty or hold only pgdyno's tables;
--force loads beside others). Per size it prints one JSON line with each phase's wall
seconds, and where the server runs on this machine its CPU seconds (the postmaster and
every backend, exited ones included) and the WAL it wrote; then it fits seconds = fixed +
per_warehouse x W by least squares and projects W = 1,000 and 10,000 (time, warehouses per
minute, and per core), and fits the server's CPU seconds the same way (the figure that does
not depend on what else the machine runs). Everything is also written to the result file
(--output). The embedded server's cluster is in a scratch directory under --workdir
(default /var/tmp), removed at the end.

    python bench/tprocc_load.py        # W = 10, 50, 100: 4 to 7 min, 14 GB free in /var/tmp
    python bench/tprocc_load.py --warehouses 2,5 --dsn postgresql://user@host/db
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg
from harness import (
    ResultWriter,
    line_fit,
    new_parser,
    process_tree_cpu_s,
    require_free,
    run,
    scratch,
)

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.dsn import dsn_connection
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.bulkload import load_wal_settings_for, spaced_checkpoints
from pgdyno.workloads.tprocc import LoadOptions, LoadProgress, default_workers, load
from pgdyno.workloads.tprocc.model import LOAD_WAL_PER_WAREHOUSE

PROJECT_AT = (1_000, 10_000)
LOAD_WAL_NAMES = ("wal_level", "max_wal_senders", "wal_buffers", "wal_writer_delay")
BYTES_PER_WAREHOUSE = 110 * 2**20
"""A loaded warehouse with its keys and indexes (107 MB measured at W=6)."""
WAL_ROOM = 3 * 2**30
"""pg_wal beside the data: max_wal_size (1 GB stock) and what a checkpoint leaves behind
(spaced checkpoints hold the load's own WAL too: at most half the free space, by rule)."""


class ServerMeter:
    """Server CPU seconds and WAL bytes, for each phase of a load and in all.

    The whole load's CPU is exact: the postmaster's own, its reaped children's (every
    backend that has exited) and its live children's, read before and after the load once
    exited backends have been reaped (outside the load's timing). Per phase, a sampler
    follows every child's CPU five times a second, so a backend's last 200 ms before it
    exits may be missed there (and the sampling shows in this process's own CPU, the
    ``client_cpu_s`` figures). None when the server is not a process of this machine."""

    INTERVAL_S = 0.2

    def __init__(self, target: ConnectionInfo) -> None:
        self.conn = psycopg.connect(target.conninfo(), autocommit=True)
        backend = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        try:
            self.postmaster: psutil.Process | None = psutil.Process(backend).parent()
        except psutil.Error:  # a remote server
            self.postmaster = None
        self.latest: dict[int, float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample_loop, daemon=True)
        if self.postmaster is not None:
            self.thread.start()

    def _sample_loop(self) -> None:
        while not self.stop.wait(self.INTERVAL_S):
            self.sample()

    def sample(self) -> dict[int, float]:
        """Every child's CPU seconds so far (the postmaster's own under key 0), kept with
        the last value seen of children that have exited since."""
        assert self.postmaster is not None
        now = {0: sum(self.postmaster.cpu_times()[:2])}
        for child in self.postmaster.children():
            try:
                now[child.pid] = sum(child.cpu_times()[:2])
            except psutil.Error:
                continue
        with self.lock:
            self.latest.update(now)
            return dict(self.latest)

    def total_cpu_s(self) -> float | None:
        if self.postmaster is None:
            return None
        time.sleep(0.5)  # let the postmaster reap the loader's closed connections
        return process_tree_cpu_s(self.postmaster.pid)

    def wal_lsn(self) -> int:
        return int(self.conn.execute(
            "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0])

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        self.conn.close()


@dataclass
class PhaseMeter:
    """Follows a load's progress reports; at each new phase, the last one's CPU and WAL."""

    meter: ServerMeter
    phase: str | None = None
    cpu_s: dict[str, float] = field(default_factory=dict)
    wal_bytes: dict[str, int] = field(default_factory=dict)
    client_cpu_s: dict[str, float] = field(default_factory=dict)
    _cpu_at: dict[int, float] = field(default_factory=dict)
    _wal_at: int = 0
    _client_at: float = 0.0

    def __call__(self, report: LoadProgress) -> None:
        print(f"\r  {report.phase:<11} {report.warehouses_done}/{report.warehouses_total} "
              f"warehouses  {report.steps_done}/{report.steps_total} steps  "
              f"{report.rows_per_s:,.0f} rows/s  {report.elapsed_s:6.1f} s", end="",
              file=sys.stderr, flush=True)
        if report.phase != self.phase:
            self.switch(report.phase)

    def switch(self, phase: str) -> None:
        cpu = self.meter.sample() if self.meter.postmaster is not None else {}
        wal, client = self.meter.wal_lsn(), time.process_time()
        if self.phase is not None:
            if cpu:
                used = sum(v - self._cpu_at.get(pid, 0.0) for pid, v in cpu.items())
                self.cpu_s[self.phase] = self.cpu_s.get(self.phase, 0.0) + used
            self.wal_bytes[self.phase] = self.wal_bytes.get(self.phase, 0) + wal - self._wal_at
            self.client_cpu_s[self.phase] = (self.client_cpu_s.get(self.phase, 0.0)
                                             + client - self._client_at)
        self.phase, self._cpu_at, self._wal_at, self._client_at = phase, cpu, wal, client


def measure(target: ConnectionInfo, warehouses: int, args: argparse.Namespace,
            server: LocalServer | None) -> dict:
    meter = ServerMeter(target)
    phases = PhaseMeter(meter)
    owned = server if args.spacing else None
    try:
        with spaced_checkpoints(owned, target, LOAD_WAL_PER_WAREHOUSE * warehouses) as spacing:
            options = LoadOptions(warehouses=warehouses, workers=args.workers, rebuild=True,
                                  force=args.force, order_line_partitions=args.partitions,
                                  checkpoint_at_end=spacing.closing_checkpoint)
            cpu_before = meter.total_cpu_s()
            result = load(target, options, phases)
            phases.switch("after")
            cpu_after = meter.total_cpu_s()
    finally:
        meter.close()
    print(file=sys.stderr)
    cpu_total = cpu_after - cpu_before if cpu_before is not None else None
    return {
        "warehouses": warehouses,
        "spacing": spacing.settings,
        "load_wal": {k: v for k, v in server.settings.items() if k in LOAD_WAL_NAMES}
        if server else {},
        "workers": result.workers,
        "cpus": default_workers(),
        "order_line_partitions": result.order_line_partitions,
        "seconds": round(result.seconds, 2),
        "warehouses_per_minute": round(result.warehouses_per_minute, 1),
        "rows": result.rows,
        "rows_per_second": round(result.rows / result.seconds),
        "phase_seconds": {k: round(v, 2) for k, v in result.phase_seconds.items()},
        "server_cpu_s": {k: round(v, 2) for k, v in phases.cpu_s.items()},
        "server_cpu_s_total": None if cpu_total is None else round(cpu_total, 2),
        "server_cpu_s_per_warehouse": (round(cpu_total / warehouses, 3)
                                       if cpu_total is not None else None),
        "client_cpu_s": {k: round(v, 2) for k, v in phases.client_cpu_s.items()},
        "wal_mb": {k: round(v / 2**20, 1) for k, v in phases.wal_bytes.items()},
    }


def projection(rows: list[dict], cores: int) -> dict | None:
    line = line_fit([r["warehouses"] for r in rows], [r["seconds"] for r in rows])
    if line is None:
        return None
    fixed, per_warehouse = line.intercept, line.slope
    projected = {}
    for w in PROJECT_AT:
        seconds = line.at(w)
        projected[str(w)] = {"seconds": round(seconds), "minutes": round(seconds / 60, 1),
                             "warehouses_per_minute": round(w / seconds * 60, 1),
                             "warehouses_per_minute_per_core": round(w / seconds * 60 / cores, 1)}
    cpu = [(r["warehouses"], r["server_cpu_s_total"]) for r in rows
           if r["server_cpu_s_total"] is not None]
    cpu_line = (line_fit([w for w, _ in cpu], [c for _, c in cpu]) if len(cpu) == len(rows)
                else None)
    return {"fixed_s": round(fixed, 2), "per_warehouse_s": round(per_warehouse, 4),
            "r2": round(line.r2, 4), "cores": cores, "projected": projected,
            "server_cpu_fixed_s": None if cpu_line is None else round(cpu_line.intercept, 2),
            "server_cpu_per_warehouse_s": (None if cpu_line is None
                                           else round(cpu_line.slope, 3))}


def _print_phases(row: dict) -> None:
    print(f"W={row['warehouses']}: {row['seconds']:.1f} s, "
          f"{row['warehouses_per_minute']:.1f} warehouses/min", file=sys.stderr)
    print(f"  {'phase':<12}{'wall s':>9}{'server CPU s':>14}{'WAL MB':>10}", file=sys.stderr)
    for phase, seconds in row["phase_seconds"].items():
        cpu = row["server_cpu_s"].get(phase)
        wal = row["wal_mb"].get(phase)
        print(f"  {phase:<12}{seconds:>9.1f}{'' if cpu is None else f'{cpu:.1f}':>14}"
              f"{'' if wal is None else f'{wal:.0f}':>10}", file=sys.stderr)


def _print_projection(fitted: dict) -> None:
    print(f"fit: {fitted['fixed_s']:.1f} s + {fitted['per_warehouse_s']:.3f} s x W "
          f"({fitted['cores']} cores)", file=sys.stderr)
    if fitted["server_cpu_per_warehouse_s"] is not None:
        print(f"server CPU: {fitted['server_cpu_fixed_s']:.1f} s + "
              f"{fitted['server_cpu_per_warehouse_s']:.3f} s x W", file=sys.stderr)
    for w, p in fitted["projected"].items():
        print(f"  W={int(w):,}: {p['minutes']:.1f} min, {p['warehouses_per_minute']:.1f} "
              f"warehouses/min, {p['warehouses_per_minute_per_core']:.1f} per core",
              file=sys.stderr)


def _check_room(workdir: Path, warehouses: int) -> None:
    """Each size replaces the last: the largest one must fit, with its WAL."""
    require_free(workdir, warehouses * BYTES_PER_WAREHOUSE + WAL_ROOM,
                 f"W={warehouses} (--warehouses; --workdir elsewhere)")


def _restart_with_load_wal(server: LocalServer, target: ConnectionInfo) -> ConnectionInfo:
    """The server restarted with the WAL settings pgdyno bench gives a load on its own
    server (workloads.bulkload.minimal_wal)."""
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        wanted = load_wal_settings_for(conn)
    server.write_settings({**server.settings, **wanted})
    server.restart()
    return server.connection()


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--warehouses", default="10,50,100")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--dsn", default=None,
                        help="load into this existing server instead of an embedded one")
    parser.add_argument("--force", action="store_true",
                        help="--dsn: load even when the database holds other tables")
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp"),
                        help="where the embedded server's cluster goes (removed afterwards)")
    parser.add_argument("--no-spacing", dest="spacing", action="store_false",
                        help="load with the server's own checkpoint settings, as into a "
                             "server pgdyno does not own (pgdyno bench spaces them on its "
                             "own servers: workloads.bulkload)")
    parser.add_argument("--load-wal", choices=("minimal", "configured"), default="minimal",
                        help="the embedded server's WAL settings for the load: minimal "
                             "(wal_level minimal, wal_buffers 64 MB and wal_writer_delay "
                             "10 ms, by a restart, as "
                             "pgdyno bench loads on its own servers) or configured (stock)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = [int(w) for w in args.warehouses.split(",")]
    if not args.dsn:
        _check_room(args.workdir, max(sizes))
    writer = ResultWriter("tprocc_load", args)
    results: list[dict] = []
    with (contextlib.nullcontext() if args.dsn else scratch("tprocc-load", args.workdir)
          ) as workdir:
        measure_sizes(args, sizes, workdir, results, writer)
    fitted = projection(results, default_workers())
    if fitted is not None:
        _print_projection(fitted)
        print(json.dumps({"fit": fitted}), flush=True)
    writer.finish({"target": "dsn" if args.dsn else "embedded", "results": results,
                   "fit": fitted})
    return 0


def measure_sizes(args: argparse.Namespace, sizes: list[int], workdir: Path | None,
                  results: list[dict], writer: ResultWriter) -> None:
    """Each size loaded in turn into the --dsn server, or an embedded one in ``workdir``."""
    server = None
    if args.dsn:
        target = dsn_connection(args.dsn)
    else:
        server = LocalServer(install=embedded_install(), workdir=workdir, name="load")
    try:
        if server is not None:
            server.prepare()
            server.start()
            target = server.connection()
            if args.load_wal == "minimal":
                target = _restart_with_load_wal(server, target)
        for warehouses in sizes:
            row = measure(target, warehouses, args, server)
            print(json.dumps(row), flush=True)
            _print_phases(row)
            results.append(row)
            writer.write({"results": results})
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    run(main)
