"""How fast, and in how much memory, pgdyno summarises a 3-million-transaction pgbench log.

Writes a log in pgbench's -l format (two thread files, lognormal latencies, 1% failed
transactions), gzips it as a run directory keeps it, then times summarise_logs and
reports the peak RSS of this process. Usage: python bench/log_summary_speed.py [N]
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

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


def main() -> None:
    if sys.argv[1:2] == ["--summarise"]:
        summarise([Path(p) for p in sys.argv[2:]])
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / "tx.1.gz", Path(tmp) / "tx.1.1.gz"]
        for i, path in enumerate(paths):
            write_log(path, n // 2, rng, 50 * i)
        size = sum(p.stat().st_size for p in paths)
        # Summarise in a fresh process so its peak RSS is the summariser's alone.
        subprocess.run([sys.executable, __file__, "--summarise", *map(str, paths)], check=True)
        print(f"log size {size / 2**20:.0f} MiB gzip")


def summarise(paths: list[Path]) -> None:
    started = time.perf_counter()
    stats = summarise_logs(paths, warmup_s=0, duration_s=200, has_lag=False, has_retries=False)
    seconds = time.perf_counter() - started
    # VmHWM is this process image's own peak (ru_maxrss would carry the parent's over exec).
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM"))
    rss = int(hwm.split()[1])
    total = stats.overall.histogram.n + stats.overall.failed + stats.outside_window
    print(f"transactions: {total:,}")
    print(f"summarised in {seconds:.2f} s ({total / seconds / 1e6:.2f} M lines/s)")
    print(f"peak RSS of the summarising process {rss / 1024:.0f} MiB")
    print(f"p99 {stats.overall.histogram.percentiles_us()[99.0] / 1000:.3f} ms, "
          f"distinct latencies {len(stats.overall.histogram.counts):,}")


if __name__ == "__main__":
    main()
