"""sysbench-style OLTP: pgdyno's oltp-read-only / oltp-read-write against real sysbench.

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
then per workload the median of the pair ratios and the best-of-N ratio (best pgdyno TPS
over best sysbench TPS).

    python bench/oltp_vs_sysbench.py --pairs 5 --duration 30 --clients 8
    python bench/oltp_vs_sysbench.py --pairs 2 --duration 5 --table-size 10000  # quick
    python bench/oltp_vs_sysbench.py --pairs 10 --threads-also 8  # pgbench -j 8 beside
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
import tempfile
from pathlib import Path

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset

WORKLOADS = {"oltp-read-only": "oltp_read_only", "oltp-read-write": "oltp_read_write"}
"""pgdyno's workload name: sysbench's test of the same transaction."""
_INTERVAL = re.compile(r"^\[ (\d+)s \] thds: \d+ tps: ([\d.]+)", re.MULTILINE)
"""sysbench's per-second report line: ``[ 7s ] thds: 8 tps: 1234.56 qps: ...``."""
_TOTAL = re.compile(r"^\s+transactions:\s+(\d+)", re.MULTILINE)
"""sysbench's closing count: ``    transactions:     12345  (411.50 per sec.)``."""
DRIVER_US: dict[tuple[str, str], list[float]] = {}
"""(tool, workload) -> the load driver's CPU µs per transaction, one figure per run:
pgbench's from pgdyno's own accounting (telemetry on), sysbench's from the kernel's
accounting of the finished process. On 2 cores the driver shares the CPUs with the
server, so a heavier driver costs the server throughput."""


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
    return tps


def run_sysbench(workload: str, conn: ConnectionInfo, args: argparse.Namespace) -> float:
    """Real sysbench on pgdyno's tables: its libpq session resolves sbtestN in pgdyno's
    schema, as pgdyno's own connections do."""
    cmd = ["sysbench", WORKLOADS[workload], "--db-driver=pgsql", f"--pgsql-host={conn.host}",
           f"--pgsql-port={conn.port}", f"--pgsql-user={conn.user}",
           f"--pgsql-db={conn.dbname}", f"--tables={args.tables}",
           f"--table-size={args.table_size}", f"--threads={args.clients}",
           f"--time={args.warmup + args.duration}", "--report-interval=1", "run"]
    env = dict(os.environ, PGOPTIONS=f"-c search_path={dataset.SCHEMA}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = _TOTAL.search(out.stdout)
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


def _tools(pair: int, threads_also: int | None) -> list[str]:
    """The runs of a pair in ABBA order: pgdyno first in odd pairs, sysbench in even ones,
    pgdyno at --threads-also between them."""
    tools = ["pgdyno", *([f"pgdyno-t{threads_also}"] if threads_also else []), "sysbench"]
    return tools if pair % 2 else list(reversed(tools))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--out", type=Path, default=Path("oltp_vs_sysbench.json"))
    args = parser.parse_args()
    if shutil.which("sysbench") is None:
        sys.exit("sysbench is not installed (setup.sh installs sysbench 1.0.20)")
    workloads = args.workloads.split(",")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        sys.exit(f"--workloads {','.join(unknown)}: expected some of {', '.join(WORKLOADS)}")

    work = Path(tempfile.mkdtemp(prefix="pgdyno-oltp-sysbench-", dir="/var/tmp"))
    work.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=work, name="oltp")
    server.prepare()
    server.start()
    pairs: list[dict] = []
    try:
        conn = server.connection()
        # pgdyno builds and records the tables once; every later run reuses them.
        run_pgdyno(workloads[0], conn, args, work / "build", duration=1, warmup=0)
        for pair in range(1, args.pairs + 1):
            order = workloads if pair % 2 else list(reversed(workloads))
            for workload in order:
                tps = {}
                for tool in _tools(pair, args.threads_also):
                    if tool == "sysbench":
                        tps[tool] = run_sysbench(workload, conn, args)
                    else:
                        threads = args.threads_also if tool != "pgdyno" else None
                        tps[tool] = run_pgdyno(workload, conn, args,
                                               work / f"p{pair}-{workload}-{tool}",
                                               args.duration, args.warmup, threads, tool)
                row = {"pair": pair, "workload": workload, "pgdyno_tps": tps["pgdyno"],
                       "sysbench_tps": tps["sysbench"],
                       "ratio": tps["pgdyno"] / tps["sysbench"]}
                line = (f"pair {pair} {workload:<16} pgdyno {tps['pgdyno']:>10,.1f} tps  "
                        f"sysbench {tps['sysbench']:>10,.1f} tps  ratio {row['ratio']:.3f}")
                if args.threads_also:
                    other = tps[f"pgdyno-t{args.threads_also}"]
                    row |= {"pgdyno_threads_also_tps": other,
                            "ratio_threads_also": other / tps["sysbench"]}
                    line += (f"  pgdyno --threads {args.threads_also} {other:>10,.1f} tps "
                             f"ratio {row['ratio_threads_also']:.3f}")
                pairs.append(row)
                print(line, flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    summary = []
    print(f"\n{'workload':<17}{'pairs':>6}{'median ratio':>14}{'best-of-N ratio':>17}"
          f"{'pgdyno best TPS':>17}{'sysbench best TPS':>19}")
    for workload in workloads:
        rows = [r for r in pairs if r["workload"] == workload]
        best_pgdyno = max(r["pgdyno_tps"] for r in rows)
        best_sysbench = max(r["sysbench_tps"] for r in rows)
        line = {"workload": workload, "pairs": len(rows),
                "median_ratio": statistics.median(r["ratio"] for r in rows),
                "best_of_n_ratio": best_pgdyno / best_sysbench,
                "pgdyno_best_tps": best_pgdyno, "sysbench_best_tps": best_sysbench}
        summary.append(line)
        print(f"{workload:<17}{len(rows):>6}{line['median_ratio']:>14.3f}"
              f"{line['best_of_n_ratio']:>17.3f}{best_pgdyno:>17,.1f}{best_sysbench:>19,.1f}")
        if args.threads_also:
            best = max(r["pgdyno_threads_also_tps"] for r in rows)
            line |= {"median_ratio_threads_also": statistics.median(
                r["ratio_threads_also"] for r in rows),
                "best_of_n_ratio_threads_also": best / best_sysbench}
            print(f"{workload + f' -j {args.threads_also}':<17}{len(rows):>6}"
                  f"{line['median_ratio_threads_also']:>14.3f}"
                  f"{line['best_of_n_ratio_threads_also']:>17.3f}{best:>17,.1f}"
                  f"{best_sysbench:>19,.1f}")
    for (tool, workload), values in sorted(DRIVER_US.items()):
        print(f"{workload:<17} {tool:<9} driver CPU per transaction: median "
              f"{statistics.median(values):,.1f} µs ({len(values)} runs)")
    args.out.write_text(json.dumps({
        "schema_version": 1, "bench": "oltp_vs_sysbench", "cpus": os.cpu_count(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "pairs": pairs, "summary": summary,
        "driver_cpu_us_per_tx": {f"{tool} {workload}": values
                                 for (tool, workload), values in DRIVER_US.items()}},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
