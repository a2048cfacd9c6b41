"""sysbench-style OLTP: pgdyno's sbtest workloads against real sysbench, on the same tables.

Every sbtest workload has its sysbench test (``WORKLOADS``): oltp-read-only and
oltp-read-write, and the microbenchmark battery (point select, random points, random
ranges at three lengths, update index, update non-index, insert, delete, write-only). The
tables get their rows back (ids 1..table_size) before every run, pgdyno's as sysbench's,
so a delete or insert run leaves nothing for the next.

One embedded PostgreSQL 18 server (stock configuration) in its own workdir under /var/tmp;
pgdyno builds the sbtest tables once (a 1 s run through --dsn, which records them), and
every later run, pgdyno's and sysbench's, uses those very tables: sysbench 1.0.20's
``oltp_read_only`` / ``oltp_read_write`` reach them through libpq's PGOPTIONS
(``search_path=pgdyno_bench``), with the same tables, table size, clients (sysbench
--threads), warm-up and measured seconds. pgdyno runs as a user runs it (`pgdyno bench
WORKLOAD --dsn ...`, its defaults otherwise: prepared statements, as sysbench's pgsql
driver prepares them; --telemetry says whether it samples). sysbench 1.0.20 has no
warm-up option: it runs warm-up + measured seconds with a report every second, and its
figure is the mean TPS of the seconds after the warm-up, as pgdyno's is the mean of its
1 s intervals inside the measured window.

Pairs are interleaved in ABBA order (pgdyno first in odd pairs, sysbench first in even
ones) and the two workloads alternate inside each pair, since this VM's speed jumps
between two levels. pgdyno's figure is summary.json's TPS, sysbench's the mean of its
per-second reports after the warm-up. Prints per pair the TPS ratio pgdyno / sysbench,
then per workload the median of the pair ratios, the best-of-N ratio (best pgdyno TPS
over best sysbench TPS), and the pairs' geometric mean ratio with its 95% interval (a
t-interval on the ratios' logarithms: the pairs' spread is this VM's noise, and the
interval says whether that noise leaves room for a real difference).

    python bench/oltp_vs_sysbench.py --pairs 5 --duration 30 --clients 8
    python bench/oltp_vs_sysbench.py --pairs 2 --duration 5 --table-size 10000  # quick
    python bench/oltp_vs_sysbench.py --pairs 10 --threads-also 8  # pgbench -j 8 beside
    python bench/oltp_vs_sysbench.py --pairs 10 --bare-also  # pgdyno's script, no pgdyno
    python bench/oltp_vs_sysbench.py --workloads all --pairs 3 --duration 10  # the battery

``--bare-also`` splits the ratio in two: it runs, in every pair, the very pgbench command
pgdyno ran (its script file, clients, threads, protocol, --max-tries) without pgdyno
around it and without -l, its TPS taken as sysbench's is (the mean of the -P 1 seconds
after the warm-up). bare / sysbench is then the script's parity with sysbench, and
pgdyno / bare what pgdyno's harness (its telemetry, its transaction log) costs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import ResultWriter, alternate, new_parser, ratio_interval, run, scratch
from harness import process_tree_cpu_s as server_cpu_s

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset
from pgdyno.workloads.oltp.battery import BATTERY
from pgdyno.workloads.oltp.restore import restore_rows

WORKLOADS = {"oltp-read-only": "oltp_read_only", "oltp-read-write": "oltp_read_write",
             **{name: bench.sysbench for name, bench in BATTERY.items()},
             "oltp-random-ranges-100": "select_random_ranges",
             "oltp-random-ranges-1000": "select_random_ranges"}
"""pgdyno's workload name: sysbench's test of the same transaction."""
SYSBENCH_OPTIONS = {"oltp-random-ranges": ["--delta=5"],
                    "oltp-random-ranges-100": ["--delta=100"],
                    "oltp-random-ranges-1000": ["--delta=1000"]}
"""sysbench's options that make its test the workload's (the range length)."""
DEFAULT_WORKLOADS = ("oltp-read-only", "oltp-read-write")
_INTERVAL = re.compile(r"^\[ (\d+)s \] thds: \d+ tps: ([\d.]+)", re.MULTILINE)
"""sysbench's per-second report line: ``[ 7s ] thds: 8 tps: 1234.56 qps: ...``."""
_PROGRESS = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps", re.MULTILINE)
"""pgbench -P 1's line: ``progress: 7.0 s, 1234.5 tps, lat 6.4 ms stddev 2.1, 0 failed``."""
_PROCESSED = re.compile(r"^number of transactions actually processed: (\d+)", re.MULTILINE)
"""pgbench's closing count of the transactions it committed."""
_TOTAL = re.compile(r"^\s+transactions:\s+(\d+)", re.MULTILINE)
"""sysbench's closing count: ``    transactions:     12345  (411.50 per sec.)``."""
SERVER_US: dict[tuple[str, str], list[float]] = {}
"""(tool, workload) -> the server's CPU µs per transaction, one figure per run: from
pgdyno's own accounting for pgdyno's runs (its window), from the postmaster's process tree
over the whole run for bare pgbench and sysbench (``server_cpu_s``). Equal figures mean
the two statement streams cost the server the same."""
REAP_S = 0.5
"""Wait after a driver exits before reading the server's CPU: its backends exit and are
reaped by the postmaster (their CPU then moves into its children's times)."""
DRIVER_US: dict[tuple[str, str], list[float]] = {}
"""(tool, workload) -> the load driver's CPU µs per transaction, one figure per run:
pgbench's from pgdyno's own accounting (telemetry on), sysbench's from the kernel's
accounting of the finished process. On 2 cores the driver shares the CPUs with the
server, so a heavier driver costs the server throughput."""


def _interval_text(ratios: list[float]) -> str:
    mean, low, high = ratio_interval(ratios)
    return f"{mean:.3f}" + (f" [{low:.3f}, {high:.3f}]" if low is not None else "")


def _record_server(tool: str, workload: str, postmaster: int, before: float,
                   transactions: int) -> None:
    time.sleep(REAP_S)
    if transactions:
        SERVER_US.setdefault((tool, workload), []).append(
            1e6 * (server_cpu_s(postmaster) - before) / transactions)


def dsn_of(conn: ConnectionInfo) -> str:
    return f"postgresql://{conn.user}@/{conn.dbname}?host={conn.host}&port={conn.port}"


def run_pgdyno(workload: str, conn: ConnectionInfo, args: argparse.Namespace, results: Path,
               duration: int, warmup: int, threads: int | None = None,
               tool: str = "pgdyno") -> float:
    cmd = [sys.executable, "-m", "pgdyno", "bench", workload, "--dsn", dsn_of(conn),
           "--clients", str(args.clients), "--duration", str(duration), "--warmup",
           str(warmup), "--iterations", "1", "--tables", str(args.tables), "--table-size",
           str(args.table_size), "--no-progress", "--results-dir", str(results),
           "--telemetry" if args.telemetry == "on" else "--no-telemetry"]
    if threads or args.threads:
        cmd += ["--threads", str(threads or args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pgdyno bench {workload} failed (exit {out.returncode}): "
                 f"{out.stderr.strip().splitlines()[-1:]}")
    summary = json.loads(next(results.glob("*/*/summary.json")).read_text())
    tps = summary["per_clients"][0]["tps_mean"]
    split = ((summary["iterations"][0].get("telemetry") or {}).get("contamination") or {})
    if split.get("driver_cores") is not None and tps:
        # The run's own accounting: pgbench's cores over the window per transaction.
        DRIVER_US.setdefault((tool, workload), []).append(
            1e6 * split["driver_cores"] / tps)
    if split.get("server_cores") is not None and tps:
        SERVER_US.setdefault((tool, workload), []).append(1e6 * split["server_cores"] / tps)
    return tps


BARE_COMMANDS: dict[str, list[str]] = {}
"""workload -> the pgbench command pgdyno ran for it (raw/run.json), for --bare-also."""


def remember_command(workload: str, results: Path) -> None:
    """Keep the pgbench command of pgdyno's run of ``workload`` under ``results``."""
    plan = json.loads(next(results.glob("*/*/raw/run.json")).read_text())
    BARE_COMMANDS[workload] = plan["records"][0]["command"]


def bare_command(command: list[str], seconds: int) -> list[str]:
    """pgdyno's pgbench command without its transaction log, for ``seconds``."""
    out, skip = [], False
    for index, word in enumerate(command):
        if skip:
            skip = False
            continue
        if word in ("--log-prefix", "--sampling-rate", "--aggregate-interval"):
            skip = True
            continue
        if word == "-l":
            continue
        out.append(str(seconds) if index and command[index - 1] == "-T" else word)
    return out


def run_bare(workload: str, args: argparse.Namespace, postmaster: int,
             conn: ConnectionInfo) -> float:
    """pgdyno's pgbench command run bare; TPS as sysbench's is computed."""
    cmd = bare_command(BARE_COMMANDS[workload], args.warmup + args.duration)
    restore_rows(conn, args.tables, args.table_size)  # as pgdyno's runs start
    # pgdyno's sessions resolve names in its schema only, as sysbench's do here.
    env = dict(os.environ, PGOPTIONS=f"-c search_path={dataset.SCHEMA}")
    before = server_cpu_s(postmaster)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    processed = _PROCESSED.search(out.stdout)
    _record_server("bare", workload, postmaster, before,
                   int(processed.group(1)) if processed else 0)
    measured = [float(tps) for second, tps in _PROGRESS.findall(out.stderr)
                if float(second) > args.warmup]
    if out.returncode != 0 or not measured:
        tail = out.stderr.strip().splitlines()[-3:]
        sys.exit(f"bare pgbench failed (exit {out.returncode}): {' | '.join(tail)}")
    return statistics.fmean(measured)


def run_sysbench(workload: str, conn: ConnectionInfo, args: argparse.Namespace,
                 postmaster: int) -> float:
    """Real sysbench on pgdyno's tables: its libpq session resolves sbtestN in pgdyno's
    schema, as pgdyno's own connections do."""
    cmd = ["sysbench", WORKLOADS[workload], "--db-driver=pgsql", f"--pgsql-host={conn.host}",
           f"--pgsql-port={conn.port}", f"--pgsql-user={conn.user}",
           f"--pgsql-db={conn.dbname}", f"--tables={args.tables}",
           f"--table-size={args.table_size}", f"--threads={args.clients}",
           f"--time={args.warmup + args.duration}", "--report-interval=1",
           *SYSBENCH_OPTIONS.get(workload, []), "run"]
    env = dict(os.environ, PGOPTIONS=f"-c search_path={dataset.SCHEMA}")
    restore_rows(conn, args.tables, args.table_size)  # as pgdyno's runs start
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = server_cpu_s(postmaster)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = _TOTAL.search(out.stdout)
    _record_server("sysbench", workload, postmaster, server_before,
                   int(total.group(1)) if total else 0)
    if total:  # sysbench's CPU over its whole run (warm-up too) per transaction it made
        cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        DRIVER_US.setdefault(("sysbench", workload), []).append(
            1e6 * cpu_s / int(total.group(1)))
    measured = [float(tps) for second, tps in _INTERVAL.findall(out.stdout)
                if int(second) > args.warmup]
    if out.returncode != 0 or not measured:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        sys.exit(f"sysbench {WORKLOADS[workload]} failed (exit {out.returncode}): "
                 f"{' | '.join(tail)}")
    return statistics.fmean(measured)


def _summary_line(label: str, suffix: str, rows: list[dict], ratio: str, first: str,
                  second: str) -> dict:
    """Print one comparison's line over the pairs ``rows``; its figures, keys suffixed."""
    ratios = [r[ratio] for r in rows]
    best_first, best_second = max(r[first] for r in rows), max(r[second] for r in rows)
    mean, low, high = ratio_interval(ratios)
    figures = {"median_ratio": statistics.median(ratios),
               "best_of_n_ratio": best_first / best_second,
               "geometric_mean_ratio": mean, "ratio_95_low": low, "ratio_95_high": high}
    print(f"{label:<21}{len(rows):>6}{figures['median_ratio']:>14.3f}"
          f"{figures['best_of_n_ratio']:>17.3f}{best_first:>11,.1f}{best_second:>15,.1f}  "
          f"{_interval_text(ratios)}")
    return {key + suffix: value for key, value in figures.items()} | {
        f"{first}_best": best_first, f"{second}_best": best_second}


def _tools(pair: int, threads_also: int | None, bare_also: bool) -> list[str]:
    """The runs of a pair in ABBA order: pgdyno first in odd pairs, sysbench in even ones,
    pgdyno at --threads-also and bare pgbench between them."""
    tools = ["pgdyno", *([f"pgdyno-t{threads_also}"] if threads_also else []),
             *(["bare"] if bare_also else []), "sysbench"]
    return alternate(tools, pair - 1)


def measure_pairs(args: argparse.Namespace, workloads: list[str], server: LocalServer,
                  work: Path, pairs: list[dict], writer: ResultWriter) -> None:
    """Every pair's runs, appended to ``pairs`` (and to the result file) as each ends."""
    conn = server.connection()
    # pgdyno builds and records the tables once; every later run reuses them. A short
    # run of each workload also leaves its pgbench command, for --bare-also.
    for workload in workloads:
        run_pgdyno(workload, conn, args, work / f"build-{workload}", duration=1, warmup=0)
        remember_command(workload, work / f"build-{workload}")
    DRIVER_US.clear()  # the builds' 1 s runs are not measurements
    SERVER_US.clear()
    for pair in range(1, args.pairs + 1):
        for workload in alternate(workloads, pair - 1):
            tps = {}
            for tool in _tools(pair, args.threads_also, args.bare_also):
                if tool == "sysbench":
                    tps[tool] = run_sysbench(workload, conn, args, server.pid)
                elif tool == "bare":
                    tps[tool] = run_bare(workload, args, server.pid, conn)
                else:
                    threads = args.threads_also if tool != "pgdyno" else None
                    tps[tool] = run_pgdyno(workload, conn, args,
                                           work / f"p{pair}-{workload}-{tool}",
                                           args.duration, args.warmup, threads, tool)
            row = {"pair": pair, "workload": workload, "pgdyno_tps": tps["pgdyno"],
                   "sysbench_tps": tps["sysbench"],
                   "ratio": tps["pgdyno"] / tps["sysbench"]}
            line = (f"pair {pair} {workload:<23} pgdyno {tps['pgdyno']:>10,.1f} tps  "
                    f"sysbench {tps['sysbench']:>10,.1f} tps  ratio {row['ratio']:.3f}")
            if args.threads_also:
                other = tps[f"pgdyno-t{args.threads_also}"]
                row |= {"pgdyno_threads_also_tps": other,
                        "ratio_threads_also": other / tps["sysbench"]}
                line += (f"  pgdyno --threads {args.threads_also} {other:>10,.1f} tps "
                         f"ratio {row['ratio_threads_also']:.3f}")
            if args.bare_also:
                row |= {"bare_tps": tps["bare"], "ratio_bare": tps["bare"] / tps["sysbench"],
                        "ratio_pgdyno_bare": tps["pgdyno"] / tps["bare"]}
                line += (f"  bare pgbench {tps['bare']:>10,.1f} tps ratio "
                         f"{row['ratio_bare']:.3f} "
                         f"(pgdyno/bare {row['ratio_pgdyno_bare']:.3f})")
            pairs.append(row)
            writer.write({"pairs": pairs})
            print(line, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--table-size", type=int, default=100_000)
    parser.add_argument("--telemetry", choices=("on", "off"), default="on")
    parser.add_argument("--threads", type=int, default=None,
                        help="pgdyno's --threads (pgbench -j); default: pgdyno's own")
    parser.add_argument("--threads-also", type=int, default=None,
                        help="also run pgdyno at this --threads in every pair (a third "
                             "condition, its ratio to sysbench printed apart)")
    parser.add_argument("--bare-also", action="store_true",
                        help="also run pgdyno's pgbench command bare (no pgdyno, no -l) in "
                             "every pair: the script's parity and the harness's cost apart")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help=f"some of {', '.join(WORKLOADS)}, or all")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if shutil.which("sysbench") is None:
        sys.exit("sysbench is not installed (setup.sh installs sysbench 1.0.20)")
    workloads = list(WORKLOADS) if args.workloads == "all" else args.workloads.split(",")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        sys.exit(f"--workloads {','.join(unknown)}: expected some of {', '.join(WORKLOADS)}")

    writer = ResultWriter("oltp_vs_sysbench", args)
    pairs: list[dict] = []
    with scratch("oltp-sysbench") as work:
        server = LocalServer(install=embedded_install(), workdir=work, name="oltp")
        server.prepare()
        server.start()
        try:
            measure_pairs(args, workloads, server, work, pairs, writer)
        finally:
            server.stop()
    summary = []
    print(f"\n{'workload':<21}{'pairs':>6}{'median ratio':>14}{'best-of-N ratio':>17}"
          f"{'best TPS':>11}{'over best TPS':>15}  geometric mean [95% interval]")
    for workload in workloads:
        rows = [r for r in pairs if r["workload"] == workload]
        line = {"workload": workload, "pairs": len(rows)}
        # (label, key prefix, ratio of the pair rows, TPS of the first, TPS of the second)
        comparisons = [(workload, "", "ratio", "pgdyno_tps", "sysbench_tps")]
        if args.threads_also:
            comparisons.append((f"{workload} -j {args.threads_also}", "_threads_also",
                                "ratio_threads_also", "pgdyno_threads_also_tps",
                                "sysbench_tps"))
        if args.bare_also:
            comparisons += [(f"{workload} bare", "_bare", "ratio_bare", "bare_tps",
                             "sysbench_tps"),
                            ("  pgdyno / bare", "_pgdyno_bare", "ratio_pgdyno_bare",
                             "pgdyno_tps", "bare_tps")]
        for label, suffix, ratio, first, second in comparisons:
            line |= _summary_line(label, suffix, rows, ratio, first, second)
        summary.append(line)
    for what, figures in (("driver", DRIVER_US), ("server", SERVER_US)):
        for (tool, workload), values in sorted(figures.items()):
            print(f"{workload:<17} {tool:<9} {what} CPU per transaction: median "
                  f"{statistics.median(values):,.1f} µs, {min(values):,.1f} to "
                  f"{max(values):,.1f} ({len(values)} runs)")
    writer.finish({
        "pairs": pairs, "summary": summary,
        "driver_cpu_us_per_tx": {f"{tool} {workload}": values
                                 for (tool, workload), values in DRIVER_US.items()},
        "server_cpu_us_per_tx": {f"{tool} {workload}": values
                                 for (tool, workload), values in SERVER_US.items()}})
    return 0


if __name__ == "__main__":
    run(main)
