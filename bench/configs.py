"""default vs pgtune vs tuned on this machine: a write-heavy and a read-heavy pgbench run.

Three embedded PostgreSQL servers (one per config) hold the same pgbench dataset, larger
than the stock 128MB shared_buffers. For each workload every server gets its config's
settings for that workload and a restart, then a warm-up; the timed runs alternate between
the configs, rotating the order each iteration so drift and noise from other users of the
machine spread evenly. TPS comes from pgbench's summary, p99 latency from its
per-transaction log. The figures go to the result file (--output); ratios are printed.
The servers' clusters stay in --workdir (default /var/tmp/pgdyno-bench/configs).

    python bench/configs.py --scale 50 --duration 30 --iterations 3 --clients 8
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import ResultWriter, kept_dir, new_parser, rotate, run

from pgdyno.config import resolve_config
from pgdyno.config.detect import detect_profile
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer

CONFIGS = ("default", "pgtune", "tuned")
WORKLOADS = {"tpcb": [], "select-only": ["-S"]}  # write-heavy, read-heavy


def pgbench(srv: LocalServer, args: list[str], cwd: Path | None = None) -> str:
    conn = srv.connection()
    cmd = [srv.install.program("pgbench"), *conn.client_args(), *args, conn.dbname]
    out = subprocess.run(cmd, capture_output=True, text=True, env=conn.client_env(), cwd=cwd,
                         check=False)
    if out.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)} failed: {out.stderr[-500:]}")
    return out.stdout


def timed_run(srv: LocalServer, workload: str, clients: int, duration: int,
              workdir: Path) -> dict:
    logdir = Path(tempfile.mkdtemp(prefix="tx-logs-", dir=workdir))
    try:
        out = pgbench(srv, [*WORKLOADS[workload], "-c", str(clients), "-j", "2", "-T",
                            str(duration), "-M", "prepared", "-n", "-l",
                            "--log-prefix", str(logdir / "tx")])
        latencies = []
        for log in logdir.glob("tx*"):
            for line in log.read_text().splitlines():
                fields = line.split()
                if len(fields) >= 3:
                    latencies.append(int(fields[2]) / 1000.0)  # us -> ms
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan")
    return {"tps": tps, "p99_ms": p99, "transactions": len(latencies)}


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--scale", type=int, default=50, help="pgbench scale (~15.7 MB each)")
    parser.add_argument("--duration", type=int, default=30, help="seconds per timed run")
    parser.add_argument("--warmup", type=int, default=10, help="seconds of warm-up per config")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="the servers' clusters (default /var/tmp/pgdyno-bench/configs)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.workdir = args.workdir or kept_dir("configs")
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.workdir.chmod(0o755)
    writer = ResultWriter("configs", args)
    install = embedded_install()
    hardware = detect_profile(args.workdir)
    servers = {name: LocalServer(install=install, workdir=args.workdir, name=f"cfg-{name}")
               for name in CONFIGS}
    results: dict = {"hardware": hardware.to_dict(), "runs": [], "settings": {}}
    try:
        for name, srv in servers.items():
            srv.prepare()
            srv.start()
            print(f"[{name}] pgbench -i -s {args.scale}", flush=True)
            pgbench(srv, ["-i", "-s", str(args.scale), "-q"])
        for workload in WORKLOADS:
            for name, srv in servers.items():
                resolved = resolve_config(name, [], install=install, workload=workload,
                                          hardware=hardware, connections=None,
                                          dataset_bytes=args.scale * 16 * 1024 * 1024)
                results["settings"][f"{workload}/{name}"] = resolved.pg_settings
                srv.write_settings(resolved.pg_settings)
                srv.restart()
                pgbench(srv, ["-S", "-c", str(args.clients), "-j", "2", "-T", str(args.warmup),
                              "-n"])  # warm the caches alike for every config
            for iteration in range(args.iterations):
                for name in rotate(CONFIGS, iteration):
                    run_ = timed_run(servers[name], workload, args.clients, args.duration,
                                     args.workdir)
                    run_.update(workload=workload, config=name, iteration=iteration,
                                finished_at=time.time())
                    results["runs"].append(run_)
                    writer.write(results)
                    print(f"{workload:12s} it{iteration} {name:8s} tps {run_['tps']:9.1f} "
                          f"p99 {run_['p99_ms']:7.2f} ms", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
    results["summary"] = summarise(results["runs"])
    print(json.dumps(results["summary"], indent=2))
    writer.finish(results)
    return 0


def summarise(runs: list[dict]) -> dict:
    summary: dict = {}
    for workload in WORKLOADS:
        per = {}
        for name in CONFIGS:
            rows = [r for r in runs if r["workload"] == workload and r["config"] == name]
            tps = [r["tps"] for r in rows]
            p99 = [r["p99_ms"] for r in rows]
            per[name] = {"tps_mean": statistics.mean(tps),
                         "tps_stdev": statistics.stdev(tps) if len(tps) > 1 else 0.0,
                         "p99_ms_mean": statistics.mean(p99), "tps_all": tps, "p99_all": p99}
        ratio = {f"{a}/{b}": {"tps": per[a]["tps_mean"] / per[b]["tps_mean"],
                              "p99": per[a]["p99_ms_mean"] / per[b]["p99_ms_mean"]}
                 for a, b in (("tuned", "pgtune"), ("pgtune", "default"), ("tuned", "default"))}
        summary[workload] = {"configs": per, "ratios": ratio}
    return summary


if __name__ == "__main__":
    run(main)
