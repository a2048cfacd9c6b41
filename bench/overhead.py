"""pgdyno's harness overhead: bare pgbench against `pgdyno bench` on the same server.

Starts one embedded server, builds the pgbench dataset once, then runs rounds: in each
round, for every workload × clients, bare pgbench, bare pgbench with the logging pgdyno
asks of it (`-l -P 1`), and `pgdyno bench` with telemetry on and off, all with the same
scale, clients, threads, protocol and duration, one after the other, so that the machine's
drift spreads over every condition. pgdyno runs through --dsn so all hit the very same
postmaster; its figure is summary.json's TPS (1 s intervals), the bare figures the
"tps = ..." pgbench prints. Each ratio is against the bare run of the same round; per
condition the median and best-of-N ratio. Where the shortfall goes: "pgbench -l -P 1" over
bare is pgbench's own logging, pgdyno over "pgbench -l -P 1" is pgdyno's (its log reader,
and with telemetry its samplers).

Usage: python bench/overhead.py [--pairs 5] [--duration 15] [--clients 4,16]
                                [--workloads select-only,tpcb] [--telemetry on,off]
                                [--tx-logs 1000000|aggregate]

With telemetry on it also prints pgdyno's own share of the busy CPU (log reader and
samplers, from each run's "whose CPU" figures): measured inside one run, it is free of
the machine's speed changes that make single TPS ratios swing by 20%.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer

BUILTIN = {"select-only": "select-only", "tpcb": "tpcb-like", "simple-update": "simple-update"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workloads", default="select-only,tpcb")
    ap.add_argument("--telemetry", default="on,off")
    ap.add_argument("--tx-logs", default="1000000",
                    help="pgdyno's --tx-logs (aggregate: no per-transaction log)")
    args = ap.parse_args()
    conditions = [(w, int(c), t == "on") for w in args.workloads.split(",")
                  for c in args.clients.split(",") for t in args.telemetry.split(",")]
    work = Path(tempfile.mkdtemp(prefix="pgdyno-overhead-", dir="/var/tmp"))
    work.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=work)
    server.prepare()
    server.start()
    ratios: dict[tuple, list[float]] = {}
    try:
        conn = server.connection()
        pgbench = server.install.program("pgbench")
        dsn = f"postgresql://{conn.user}@/{conn.dbname}?host={conn.host}&port={conn.port}"
        # pgdyno builds the dataset (and records it), so its runs reuse what bare pgbench uses.
        _pgdyno(work / "build", dsn, "select-only", 1, False,
                argparse.Namespace(duration=1, scale=args.scale, tx_logs="none"))
        cells = sorted({(w, c) for w, c, _t in conditions}, key=conditions_order(conditions))
        for pair in range(1, args.pairs + 1):
            for workload, clients in cells:
                bare = _bare(pgbench, conn, workload, clients, args.duration)
                logged = _bare(pgbench, conn, workload, clients, args.duration,
                               logs=work / "bare-logs")
                _add(ratios, (workload, clients, "pgbench -l -P 1"), logged / bare)
                line = (f"round {pair} {workload} c{clients}: pgbench {bare:,.0f} tps, "
                        f"pgbench -l -P 1 {logged / bare:.3f}")
                for w, c, telemetry in conditions:
                    if (w, c) != (workload, clients):
                        continue
                    ours = _pgdyno(work / f"r{pair}-{workload}-{clients}-{telemetry}", dsn,
                                   workload, clients, telemetry, args)
                    label = f"pgdyno, telemetry {'on' if telemetry else 'off'}"
                    _add(ratios, (workload, clients, label), ours / bare)
                    _add(ratios, (workload, clients, label + " / pgbench -l -P 1"),
                         ours / logged)
                    line += f", {label} {ours / bare:.3f}"
                print(line, flush=True)
        print("\nworkload      clients  condition                                   median   best"
              "  (TPS ratio to bare pgbench unless said)")
        for (workload, clients, label), rs in ratios.items():
            print(f"{workload:<13}{clients:>8}  {label:<42}{statistics.median(rs):7.3f}"
                  f"  {max(rs):.3f}")
        for (workload, clients), shares in OWN_SHARE.items():
            print(f"{workload:<13}{clients:>8}  pgdyno's own share of the busy CPU: median "
                  f"{100 * statistics.median(shares):.2f}%, max {100 * max(shares):.2f}%")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def conditions_order(conditions: list[tuple]):
    order = {(w, c): i for i, (w, c, _t) in reversed(list(enumerate(conditions)))}
    return lambda cell: order[cell]


def _add(ratios: dict[tuple, list[float]], key: tuple, value: float) -> None:
    ratios.setdefault(key, []).append(value)


def _bare(pgbench: str, conn, workload: str, clients: int, duration: int,
          logs: Path | None = None) -> float:
    """Bare pgbench; with ``logs``, with pgdyno's -l -P 1 (the logs deleted after)."""
    extra = []
    if logs is not None:
        logs.mkdir(exist_ok=True)
        extra = ["-l", "--log-prefix", str(logs / "tx"), "-P", "1"]
    out = subprocess.run(
        [pgbench, *conn.client_args(), "-c", str(clients), "-j", str(min(clients, 2)),
         "-T", str(duration), "-M", "prepared", *extra, "-b", BUILTIN[workload], conn.dbname],
        capture_output=True, text=True, check=True).stdout
    if logs is not None:
        shutil.rmtree(logs)
    return float(re.search(r"^tps = ([\d.]+)", out, re.MULTILINE).group(1))


def _pgdyno(results: Path, dsn: str, workload: str, clients: int, telemetry: bool,
            args: argparse.Namespace) -> float:
    subprocess.run(
        [sys.executable, "-m", "pgdyno", "bench", workload, "--dsn", dsn, "--force",
         "--clients", str(clients), "--threads", str(min(clients, 2)),
         "--duration", str(args.duration), "--warmup", "0", "--iterations", "1",
         "--scale", str(args.scale), "--protocol", "prepared", "--no-progress",
         "--telemetry" if telemetry else "--no-telemetry", "--tx-logs", args.tx_logs,
         "--results-dir", str(results)], check=True, capture_output=True)
    summary = json.loads(next(results.glob("*/*/summary.json")).read_text())
    telemetry_summary = summary["iterations"][0].get("telemetry") or {}
    own = (telemetry_summary.get("contamination") or {})
    if own.get("busy_cores"):
        OWN_SHARE.setdefault((workload, clients), []).append(
            own["sampler_cores"] / own["busy_cores"])
    return summary["per_clients"][0]["tps_mean"]


OWN_SHARE: dict[tuple[str, int], list[float]] = {}
"""pgdyno's own share of the busy CPU (log reader and samplers) in each telemetry-on run:
measured within the run, so the machine's speed changes cancel out."""


if __name__ == "__main__":
    main()
