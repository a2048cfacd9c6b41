"""How fast, and in how much memory, pgdyno summarises a 3-million-transaction pgbench log.

Writes a log in pgbench's -l format (two thread files, lognormal latencies, 1% failed
transactions) into a scratch directory, gzips it as a run directory keeps it, then times
summarise_logs in a fresh process and reports that process's peak RSS.

    python bench/log_summary_speed.py [TRANSACTIONS]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from harness import ResultWriter, new_parser, run, scratch

from pgdyno.analysis.pgbench_log import summarise_logs


def write_log(path: Path, n: int, rng: np.random.Generator, client_offset: int) -> None:
    start = 1_795_000_000.0
    latency = rng.lognormal(7.0, 0.6, n).astype(np.int64)
    ends = start + np.sort(rng.uniform(0, 200, n))
    with gzip.open(path, "wt", compresslevel=3) as fh:
        for lo in range(0, n, 500_000):
            hi = min(n, lo + 500_000)
            sec = ends[lo:hi].astype(np.int64)
            us = ((ends[lo:hi] - sec) * 1e6).astype(np.int64)
            lat = latency[lo:hi].astype(str).astype(object)
            lat[rng.random(hi - lo) < 0.01] = "failed"
            clients = rng.integers(0, 50, hi - lo) + client_offset
            lines = [f"{c} {i} {t} 0 {s} {u}\n" for c, i, t, s, u in
                     zip(clients, range(lo, hi), lat, sec, us, strict=True)]
            fh.writelines(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("transactions", nargs="?", type=int, default=3_000_000,
                        help="transactions in the log (default 3,000,000)")
    parser.add_argument("--summarise", nargs="+", type=Path, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.summarise:  # the fresh process: its peak RSS is the summariser's alone
        print(json.dumps(summarise(args.summarise)))
        return 0
    writer = ResultWriter("log_summary_speed", args)
    rng = np.random.default_rng(1)
    with scratch("log-summary-speed") as tmp:
        paths = [tmp / "tx.1.gz", tmp / "tx.1.1.gz"]
        for i, path in enumerate(paths):
            write_log(path, args.transactions // 2, rng, 50 * i)
        size = sum(p.stat().st_size for p in paths)
        done = subprocess.run([sys.executable, __file__, "--summarise", *map(str, paths)],
                              check=True, capture_output=True, text=True)
    figures = json.loads(done.stdout.splitlines()[-1]) | {"log_gzip_bytes": size}
    print(f"transactions: {figures['transactions']:,}")
    print(f"summarised in {figures['seconds']:.2f} s "
          f"({figures['transactions'] / figures['seconds'] / 1e6:.2f} M lines/s)")
    print(f"peak RSS of the summarising process {figures['peak_rss_kib'] / 1024:.0f} MiB")
    print(f"p99 {figures['p99_ms']:.3f} ms, distinct latencies "
          f"{figures['distinct_latencies']:,}")
    print(f"log size {size / 2**20:.0f} MiB gzip")
    writer.finish(figures)
    return 0


def summarise(paths: list[Path]) -> dict:
    started = time.perf_counter()
    stats = summarise_logs(paths, warmup_s=0, duration_s=200, has_lag=False, has_retries=False)
    seconds = time.perf_counter() - started
    # VmHWM is this process image's own peak (ru_maxrss would carry the parent's over exec).
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM"))
    return {"transactions": stats.overall.histogram.n + stats.overall.failed
            + stats.outside_window, "seconds": seconds, "peak_rss_kib": int(hwm.split()[1]),
            "p99_ms": stats.overall.histogram.percentiles_us()[99.0] / 1000,
            "distinct_latencies": len(stats.overall.histogram.counts)}


if __name__ == "__main__":
    run(main)
