"""pgbench dataset init speed: pgdyno against bare `pgbench -i` and PostgreSQL's own COPY.

One embedded PostgreSQL 18 server (stock configuration, or wal_level minimal with
--wal-level minimal, as pgdyno's own builds run) in a scratch directory under /var/tmp,
removed at the end.
For each --sizes entry (a dataset size, turned into a pgbench scale as `pgdyno bench
--dataset-size` does), --rounds rounds of these conditions, interleaved (the order reversed
every other round, as this VM's speed jumps between two levels):

* pgdyno: ``pgdyno.workloads.pgbench.dataset.initialise``, the code `pgdyno bench` runs
  (its own schema, guards, registry and session settings), rebuilt from scratch each time;
* pgbench -I dtGvp: bare pgbench, server-side generation;
* pgbench -I dtgvp: bare pgbench, client-side generation (COPY FREEZE): `pgbench -i`'s
  default;
* pgbench -I dtg: its data step alone (COPY FREEZE from pgbench's stream), whose CPU
  seconds compare with the next condition's;
* COPY FREEZE file: PostgreSQL's own COPY of pgbench_accounts' rows from a file the server
  wrote beforehand (``COPY (SELECT ...) TO``, timed apart), into a table
  created in the same transaction: the fastest way PostgreSQL itself loads those rows.

Every condition drops its tables before the next one, so one dataset at a time is on disk;
the COPY file (about 13 bytes a row) exists only for its own condition: the server writes
it just before the clock starts (its seconds are recorded apart) and it is deleted after.
Per run: the wall time, pgbench's own timing of its steps by phase (data, vacuum, keys),
rows/s (accounts + tellers + branches; the COPY condition loads accounts only), and the CPU
seconds of the server's processes and of the client (pgbench): CPU seconds are steadier
than wall times on a shared VM. Then per size
and condition the median and best, the data phase's rows/s against COPY's, and with two
sizes or more a straight-line fit of seconds over rows, with the projected time at
--project (default 30GB): projected, not measured.

Usage (a size needs about 1.15 x itself + 2 GiB free disk, checked before starting: 10GB
needs 13.5 GiB, 30GB 36.5 GiB):

    python bench/pgbench_init.py --sizes 1GB,5GB,10GB --rounds 2
    python bench/pgbench_init.py --sizes 30GB --rounds 1          # a 30 GB build
    python bench/pgbench_init.py --sizes 30GB --rounds 1 --wal-level minimal \
        --conditions "pgdyno,COPY FREEZE file"
    python bench/pgbench_init.py --sizes 100MB --rounds 2        # a quick check
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import psycopg
from harness import (
    ResultWriter,
    alternate,
    children_cpu_s,
    line_fit,
    new_parser,
    process_tree_cpu_s,
    require_free,
    run,
    scratch,
    wait_for_children,
)

from pgdyno.config.units import parse_size
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset
from pgdyno.workloads.bulkload import MINIMAL_WAL
from pgdyno.workloads.pgbench.dataset import ROWS_PER_SCALE, init_phases, initialise
from pgdyno.workloads.pgbench.plugin import BYTES_PER_SCALE

CONDITIONS = ("pgdyno", "pgbench -I dtGvp", "pgbench -I dtgvp", "pgbench -I dtg",
              "COPY FREEZE file")
COPY = CONDITIONS[-1]
FULL_INITS = CONDITIONS[:3]
"""The conditions that build the whole dataset (data, vacuum, keys)."""
ACCOUNTS_PER_SCALE = 100_000
COPY_BYTES_PER_ROW = 20
"""Upper bound of the COPY file's bytes per row ("123456789\\t1235\\t0\\t\\n")."""
ACCOUNTS_DDL = ("CREATE TABLE {} (aid int NOT NULL, bid int, abalance int, filler char(84)) "
                "WITH (fillfactor = 100)")
"""pgbench_accounts as pgbench -i creates it."""


@dataclass
class Measure:
    size: str
    scale: int
    condition: str
    round: int
    seconds: float
    rows: int
    phase_seconds: dict[str, float] = field(default_factory=dict)
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    copy_file_written_s: float | None = None
    """COPY FREEZE file: the seconds the server took to write the file, before the clock."""

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds

    @property
    def data_rows_per_s(self) -> float:
        return self.rows / self.phase_seconds.get("data", self.seconds)


class Server:
    """The embedded server and its CPU accounting (exited backends included)."""

    def __init__(self, workdir: Path, settings: dict[str, str] | None = None) -> None:
        self.local = LocalServer(install=embedded_install(), workdir=workdir, name="init",
                                 settings=dict(settings or {}))
        self.local.prepare()
        self.local.start()
        self.conn: ConnectionInfo = self.local.connection()
        self.postmaster = psutil.Process(self.local.pid)
        self.background = len(self.postmaster.children())

    def cpu_seconds(self) -> float:
        """The postmaster's, its reaped children's and its live children's CPU seconds,
        once every backend of the last condition has exited and been reaped."""
        wait_for_children(self.postmaster.pid, self.background)
        return process_tree_cpu_s(self.postmaster.pid)

    def execute(self, *statements: str) -> None:
        with psycopg.connect(self.conn.conninfo(), autocommit=True) as db:
            for statement in statements:
                db.execute(statement)


def client_cpu_seconds() -> float:
    """This process's CPU seconds (every thread) and its reaped children's (pgbench)."""
    return time.process_time() + children_cpu_s()


def drop_all(server: Server) -> None:
    """Every condition's tables (pgdyno's schema, pgbench's in public), and the WAL they
    left recycled by a checkpoint, so the next condition starts alike."""
    server.execute(f"DROP SCHEMA IF EXISTS {dataset.SCHEMA} CASCADE",
                   "DROP TABLE IF EXISTS public.pgbench_accounts, public.pgbench_branches, "
                   "public.pgbench_tellers, public.pgbench_history, public.copy_accounts",
                   "CHECKPOINT")


def run_pgdyno(server: Server, scale: int, work: Path) -> tuple[int, dict[str, float]]:
    result = initialise(server.conn, server.local.install, scale, force=False,
                        log_path=work / "pgdyno-init.log")
    assert not result.reused
    return scale * ROWS_PER_SCALE, result.phase_seconds


def run_bare(steps: str) -> Callable[[Server, int, Path], tuple[int, dict[str, float]]]:
    def run(server: Server, scale: int, work: Path) -> tuple[int, dict[str, float]]:
        plain = server.conn.in_schema(None)
        out = subprocess.run([server.local.install.program("pgbench"), *plain.client_args(),
                              "-i", "-s", str(scale), "-I", steps, "-q", plain.dbname],
                             env=plain.client_env(), capture_output=True, text=True,
                             check=True)
        return scale * ROWS_PER_SCALE, init_phases(out.stderr)
    return run


def copy_file(server: Server) -> Path:
    """In the instance's directory, which the server's OS user owns."""
    return server.local.instance_dir / "pgbench_accounts.copy"


def write_copy_file(server: Server, scale: int) -> float:
    """pgbench_accounts' rows as pgbench -I g sends them, written by the server itself
    (so it can read them back); returns the seconds the writing took."""
    started = time.monotonic()
    server.execute(f"COPY (SELECT aid, (aid - 1) / {ACCOUNTS_PER_SCALE} + 1, 0, '' FROM "
                   f"generate_series(1, {scale * ACCOUNTS_PER_SCALE}) AS aid) "
                   f"TO '{copy_file(server)}'")
    return time.monotonic() - started


def run_copy(server: Server, scale: int, work: Path) -> tuple[int, dict[str, float]]:
    """COPY FREEZE into a table created in the same transaction, as pgbench -I g does."""
    with psycopg.connect(server.conn.conninfo()) as db:
        db.execute(ACCOUNTS_DDL.format("public.copy_accounts"))
        db.execute(f"COPY public.copy_accounts FROM '{copy_file(server)}' WITH (FREEZE)")
    return scale * ACCOUNTS_PER_SCALE, {}


RUNNERS = {"pgdyno": run_pgdyno, "pgbench -I dtGvp": run_bare("dtGvp"),
           "pgbench -I dtgvp": run_bare("dtgvp"), "pgbench -I dtg": run_bare("dtg"),
           "COPY FREEZE file": run_copy}


def measure(server: Server, condition: str, size: str, scale: int, round_no: int,
            work: Path) -> Measure:
    drop_all(server)
    file_written_s = write_copy_file(server, scale) if condition == COPY else None
    server_cpu, client_cpu = server.cpu_seconds(), client_cpu_seconds()
    started = time.monotonic()
    try:
        rows, phases = RUNNERS[condition](server, scale, work)
    finally:
        copy_file(server).unlink(missing_ok=True)
    seconds = time.monotonic() - started
    if condition == COPY:
        phases = {"data": seconds}
    return Measure(size, scale, condition, round_no, seconds, rows, phases,
                   server.cpu_seconds() - server_cpu, client_cpu_seconds() - client_cpu,
                   file_written_s)


def disk_needed(size_bytes: int, scale: int) -> int:
    """The most any condition holds at once: the dataset (+15 % for the heap's share the
    size figure rounds off), 2 GiB of WAL and key-sort temp files; or the COPY file and
    the table it fills."""
    copy = scale * ACCOUNTS_PER_SCALE * COPY_BYTES_PER_ROW + size_bytes
    return max(int(1.15 * size_bytes), copy) + 2 * 2**30


def check_disk(work: Path, sizes: list[tuple[str, int]]) -> None:
    """Refuse before starting when the biggest size cannot fit on the disk."""
    for text, size_bytes in sizes:
        need = disk_needed(size_bytes, max(1, round(size_bytes / BYTES_PER_SCALE)))
        require_free(work, need, f"--sizes {text} (dataset, WAL, sort files)")


def summary_rows(results: list[Measure]) -> list[dict]:
    rows = []
    for (size, scale, condition), group in grouped(results).items():
        seconds = [m.seconds for m in group]
        phases = sorted({p for m in group for p in m.phase_seconds})
        rows.append({
            "size": size, "scale": scale, "condition": condition, "n": len(group),
            "rows": group[0].rows, "seconds_median": statistics.median(seconds),
            "seconds_best": min(seconds),
            "rows_per_s_median": statistics.median(m.rows_per_s for m in group),
            "data_rows_per_s_median": statistics.median(m.data_rows_per_s for m in group),
            "phase_seconds_median": {p: statistics.median(m.phase_seconds.get(p, 0.0)
                                                          for m in group) for p in phases},
            "server_cpu_s_median": statistics.median(m.server_cpu_s for m in group),
            "client_cpu_s_median": statistics.median(m.client_cpu_s for m in group)})
    return rows


def grouped(results: list[Measure]) -> dict[tuple[str, int, str], list[Measure]]:
    groups: dict[tuple[str, int, str], list[Measure]] = {}
    for m in results:
        groups.setdefault((m.size, m.scale, m.condition), []).append(m)
    return groups


def print_summary(rows: list[dict]) -> None:
    print(f"\n{'size':<7}{'scale':>6}  {'condition':<18}{'n':>3}{'median s':>10}"
          f"{'best s':>8}{'rows/s':>12}{'data s':>8}{'vacuum s':>10}{'keys s':>8}"
          f"{'data rows/s':>13}{'server CPU s':>14}{'client CPU s':>14}")
    for r in rows:
        p = r["phase_seconds_median"]
        print(f"{r['size']:<7}{r['scale']:>6}  {r['condition']:<18}{r['n']:>3}"
              f"{r['seconds_median']:>10.2f}{r['seconds_best']:>8.2f}"
              f"{r['rows_per_s_median']:>12,.0f}{p.get('data', 0):>8.2f}"
              f"{p.get('vacuum', 0):>10.2f}{p.get('keys', 0):>8.2f}"
              f"{r['data_rows_per_s_median']:>13,.0f}{r['server_cpu_s_median']:>14.2f}"
              f"{r['client_cpu_s_median']:>14.2f}")
    for size in dict.fromkeys(r["size"] for r in rows):
        by = {r["condition"]: r for r in rows if r["size"] == size}
        if COPY not in by:
            continue
        copy = by[COPY]["data_rows_per_s_median"]
        said = ", ".join(f"{name} {by[name]['data_rows_per_s_median'] / copy:.2f}x"
                         for name in FULL_INITS if name in by)
        print(f"{size}: data phase rows/s against COPY FREEZE from a file: {said}")
        per_million = {name: 1e6 * by[name]["server_cpu_s_median"] / by[name]["rows"]
                       for name in ("pgbench -I dtg", COPY) if name in by}
        print(f"{size}: server CPU s per million rows loaded: " + ", ".join(
            f"{name} {value:.3f}" for name, value in per_million.items()))


def projections(rows: list[dict], project_bytes: int) -> list[dict]:
    """seconds = a + b * rows per condition over the sizes measured (two or more)."""
    scale = max(1, round(project_bytes / BYTES_PER_SCALE))
    out = []
    for condition in CONDITIONS:
        points = [(r["rows"], r["seconds_median"]) for r in rows if r["condition"] == condition]
        if len(points) < 2:
            continue
        fit = line_fit([p[0] for p in points], [p[1] for p in points])
        if fit is None:  # one size measured twice
            continue
        rows_then = scale * (ACCOUNTS_PER_SCALE if condition == "COPY FREEZE file"
                             else ROWS_PER_SCALE)
        seconds = fit.at(rows_then)
        out.append({"condition": condition, "scale": scale, "rows": rows_then,
                    "intercept_s": fit.intercept, "seconds_per_million_rows": fit.slope * 1e6,
                    "r2": fit.r2, "projected_seconds": seconds,
                    "projected_rows_per_s": rows_then / seconds})
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--sizes", default="1GB,5GB,10GB")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--project", default="30GB",
                        help="the dataset size whose time the fit projects")
    parser.add_argument("--wal-level", choices=("replica", "minimal"), default="replica",
                        help="the server's wal_level for every condition (minimal: as "
                             "pgdyno's own builds run, --load-wal minimal)")
    parser.add_argument("--conditions", default=",".join(CONDITIONS),
                        help="a subset of: " + ", ".join(CONDITIONS))
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp"),
                        help="where the server's scratch directory goes")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = [(text, parse_size(text)) for text in args.sizes.split(",")]
    conditions = tuple(c.strip() for c in args.conditions.split(","))
    if unknown := [c for c in conditions if c not in CONDITIONS]:
        sys.exit(f"--conditions {unknown[0]!r}: accepted: {', '.join(CONDITIONS)}")
    check_disk(args.workdir, sizes)
    writer = ResultWriter("pgbench_init", args)
    results: list[Measure] = []
    with scratch("pgbench-init", args.workdir) as work:
        server = Server(work, MINIMAL_WAL if args.wal_level == "minimal" else None)
        try:
            for size, size_bytes in sizes:
                scale = max(1, round(size_bytes / BYTES_PER_SCALE))
                for round_no in range(1, args.rounds + 1):
                    for condition in alternate(conditions, round_no - 1):
                        m = measure(server, condition, size, scale, round_no, work)
                        results.append(m)
                        writer.write({"runs": [asdict(r) for r in results]})
                        print(json.dumps({**asdict(m), "rows_per_s": round(m.rows_per_s),
                                          "data_rows_per_s": round(m.data_rows_per_s)}),
                              flush=True)
            drop_all(server)
        finally:
            server.local.stop()
    rows = summary_rows(results)
    print_summary(rows)
    projected = projections(rows, parse_size(args.project))
    for p in projected:
        if p["seconds_per_million_rows"] <= 0:
            print(f"{args.project}, {p['condition']}: no projection (the fit's slope is not "
                  "positive: the sizes are too close for the noise)")
            continue
        print(f"{args.project} (scale {p['scale']}), {p['condition']}: projected "
              f"{p['projected_seconds']:,.0f} s, {p['projected_rows_per_s']:,.0f} rows/s "
              f"(fit over {len(sizes)} sizes, {p['seconds_per_million_rows']:.2f} s per "
              "million rows; projected, not measured)")
    writer.finish({"runs": [asdict(m) for m in results], "summary": rows,
                   "projections": projected})
    return 0


if __name__ == "__main__":
    run(main)
