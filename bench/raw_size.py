"""Raw bytes and summarise time per million transactions: per-transaction logs (before)
against the per-second data (after), on one long select-only run at full speed.

Runs `pgdyno bench select-only` once with `--tx-logs all`, so the iteration keeps both its
gzip'd per-transaction logs (what every run kept before) and its per-second files
(seconds.csv, latency.hlog: what a run keeps now past the cap). Then:

- bytes of each, per million transactions;
- `pgdyno report` with the logs (exact percentiles, the logs parsed) and on a copy without
  them (per-second data alone), best of --repeat, per million transactions;
- with --old-src DIR (a checkout of the commit before bounded raw data, e.g.
  `git worktree add /tmp/old 9d8b505`), that code's summarise_logs on the same logs: the
  summarise time before this change;
- the log reader's CPU during the run (run.json), per million transactions.

Usage: python bench/raw_size.py [--duration 600] [--clients 4] [--scale 10]
                                [--repeat 3] [--old-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=600)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old-src", type=Path)
    args = ap.parse_args()
    results = Path(tempfile.mkdtemp(prefix="pgdyno-rawsize-", dir="/var/tmp"))
    results.chmod(0o755)
    try:
        run = _bench(results, args)
        plan = json.loads((run / "raw" / "run.json").read_text())
        record = plan["records"][0]
        million = record["transactions_logged"] / 1e6
        logs = [run / f for f in record["log_files"]]
        per_second = [run / f for f in record["latency_files"]]
        telemetry = sum(p.stat().st_size for p in (run / "raw").rglob("telemetry/*"))
        print(f"transactions logged: {record['transactions_logged']:,} "
              f"({million:.1f} million) in {args.duration} s")
        _bytes("per-transaction logs, gzip'd (before)", logs, million)
        _bytes("per-second files (after)", per_second, million)
        print(f"telemetry files (both): {telemetry / 2**20:,.1f} MiB")
        with_logs = _best(lambda: _report(run), args.repeat)
        bounded = run.with_name(run.name + "-bounded")
        shutil.copytree(run, bounded)
        for log in record["log_files"]:
            (bounded / log).unlink()
        without = _best(lambda: _report(bounded), args.repeat)
        print(f"pgdyno report with the logs (exact): {with_logs:.1f} s "
              f"({with_logs / million:.2f} s per million)")
        print(f"pgdyno report from per-second data: {without:.1f} s "
              f"({without / million:.3f} s per million)")
        if args.old_src:
            old = _best(lambda: _old_summarise(args.old_src, logs, args.duration), args.repeat)
            print(f"summarise_logs of the code before (--old-src): {old:.1f} s "
                  f"({old / million:.2f} s per million)")
        cpu = record.get("log_reader_cpu_s") or 0.0
        print(f"log reader CPU during the run: {cpu:.1f} s ({cpu / million:.3f} s per million, "
              f"{1000 * cpu / (args.duration + 5):.0f} ms per second)")
    finally:
        shutil.rmtree(results, ignore_errors=True)


def _bench(results: Path, args: argparse.Namespace) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pgdyno", "bench", "select-only", "--scale", str(args.scale),
         "--clients", str(args.clients), "--duration", str(args.duration), "--warmup", "5",
         "--iterations", "1", "--tx-logs", "all", "--no-progress",
         "--results-dir", str(results)], check=True)
    return next(results.glob("*/*/manifest.json")).parent


def _bytes(label: str, paths: list[Path], million: float) -> None:
    size = sum(p.stat().st_size for p in paths)
    print(f"{label}: {size / 2**20:,.1f} MiB ({size / million / 2**10:,.1f} KiB per million)")


def _best(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def _report(run: Path) -> None:
    subprocess.run([sys.executable, "-m", "pgdyno", "report", str(run)], check=True,
                   capture_output=True)


def _old_summarise(src: Path, logs: list[Path], duration: int) -> None:
    code = ("import sys; from pathlib import Path; "
            "from pgdyno.analysis.pgbench_log import summarise_logs; "
            f"summarise_logs([Path(p) for p in sys.argv[1:]], warmup_s=5, "
            f"duration_s={duration}, has_lag=False, has_retries=False)")
    subprocess.run([sys.executable, "-c", code, *map(str, logs)], check=True,
                   env={**os.environ, "PYTHONPATH": str(src / "src")})


if __name__ == "__main__":
    main()
