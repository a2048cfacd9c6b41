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
and with telemetry its samplers). Each --tx-logs mode given is a condition of its own; with
``sample`` among them, bare pgbench also runs with the sampled logging pgdyno asks of it
(`-l --sampling-rate R -P 1 --progress-timestamp`, R chosen from the round's bare TPS as
pgdyno's auto does), to split the sampled mode's cost the same way.

Usage: python bench/overhead.py [--pairs 5] [--duration 15] [--clients 4,16]
                                [--workloads select-only,tpcb] [--telemetry on,off]
                                [--tx-logs 1000000,sample,aggregate]

With telemetry on it also prints what measuring cost inside each run, as shares of its
busy CPU: pgdyno's own process (log reader and samplers) and its sessions' backends on the
server, from the run's "whose CPU" figures, and pgbench writing its log (the lines it
logged a second times what a line costs pgbench: its CPU per transaction with -l -P 1 less
without, from the kernel's accounting of each bare run, median over the rounds). Measured
inside runs, these are free of the machine's speed changes that make single TPS ratios
swing by 20%.
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
from dataclasses import dataclass
from pathlib import Path

from pgdyno.analysis.sampled import choose_sampling_rate
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset

BUILTIN = {"select-only": "select-only", "tpcb": "tpcb-like", "simple-update": "simple-update"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workloads", default="select-only,tpcb")
    ap.add_argument("--telemetry", default="on,off")
    ap.add_argument("--tx-logs", default="1000000,sample",
                    help="pgdyno's --tx-logs modes, comma-separated, one condition each "
                         "(aggregate: no per-transaction log; sample: a sampled one)")
    args = ap.parse_args()
    modes = args.tx_logs.split(",")
    conditions = [(w, int(c), t == "on", m) for w in args.workloads.split(",")
                  for c in args.clients.split(",") for t in args.telemetry.split(",")
                  for m in modes]
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
                argparse.Namespace(duration=1, scale=args.scale), "none")
        cells = sorted({(w, c) for w, c, _t, _m in conditions},
                       key=conditions_order(conditions))
        for pair in range(1, args.pairs + 1):
            for workload, clients in cells:
                bare, bare_cpu = _bare(pgbench, conn, workload, clients, args.duration)
                logged, logged_cpu = _bare(pgbench, conn, workload, clients, args.duration,
                                           logs=work / "bare-logs")
                _add(ratios, (workload, clients, "pgbench -l -P 1"), logged / bare)
                # Every transaction logged: the difference in pgbench's CPU per
                # transaction is what writing one line costs it (and -P 1, a line a second).
                _add(LINE_COST_US, (workload, clients), logged_cpu - bare_cpu)
                line = (f"round {pair} {workload} c{clients}: pgbench {bare:,.0f} tps, "
                        f"pgbench -l -P 1 {logged / bare:.3f}")
                if "sample" in modes:
                    rate = choose_sampling_rate(bare)
                    sampled, _ = _bare(pgbench, conn, workload, clients, args.duration,
                                       logs=work / "bare-logs", sampling_rate=rate)
                    _add(ratios, (workload, clients, "pgbench -l sampled -P 1"), sampled / bare)
                    line += f", pgbench -l --sampling-rate {rate:g} -P 1 {sampled / bare:.3f}"
                for w, c, telemetry, mode in conditions:
                    if (w, c) != (workload, clients):
                        continue
                    ours = _pgdyno(work / f"r{pair}-{workload}-{clients}-{telemetry}-{mode}",
                                   dsn, workload, clients, telemetry, args, mode)
                    label = (f"pgdyno --tx-logs {mode}, telemetry "
                             f"{'on' if telemetry else 'off'}")
                    _add(ratios, (workload, clients, label), ours / bare)
                    _add(ratios, (workload, clients, label + " / pgbench -l -P 1"),
                         ours / logged)
                    line += f", {label} {ours / bare:.3f}"
                print(line, flush=True)
        print(f"\n{'workload':<13}{'clients':>8}  {'condition':<62}median   best"
              "  (TPS ratio to bare pgbench unless said)")
        for (workload, clients, label), rs in ratios.items():
            print(f"{workload:<13}{clients:>8}  {label:<62}{statistics.median(rs):6.3f}"
                  f"  {max(rs):.3f}")
        _print_costs()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _print_costs() -> None:
    """What measuring cost within each telemetry-on run, as shares of its busy CPU:
    pgdyno's process, its sessions' backends, and pgbench writing the lines it logged (the
    lines a second of the run times the median cost of a line over the bare pairs)."""
    for (workload, clients), costs in LINE_COST_US.items():
        print(f"{workload:<13}{clients:>8}  pgbench's CPU per logged line: median "
              f"{statistics.median(costs):.2f} µs over {len(costs)} bare pairs")
    for (workload, clients, mode), runs in RUN_COSTS.items():
        line_us = statistics.median(LINE_COST_US.get((workload, clients), [0.0]))
        totals = [run.total_pct(line_us) for run in runs]
        print(f"{workload:<13}{clients:>8}  --tx-logs {mode}: share of the busy CPU, median "
              f"(max): pgdyno's process "
              f"{_median_max([r.process_pct for r in runs])}, its sessions "
              f"{_median_max([r.sessions_pct for r in runs])}, pgbench's log "
              f"{_median_max([r.log_pct(line_us) for r in runs])}; in all "
              f"{_median_max(totals)} ({len(runs)} runs, "
              f"{statistics.median(r.lines_per_s for r in runs):,.0f} lines a second logged)")


def _median_max(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}% ({max(values):.2f}%)"


def conditions_order(conditions: list[tuple]):
    order = {(w, c): i for i, (w, c, _t, _m) in reversed(list(enumerate(conditions)))}
    return lambda cell: order[cell]


def _add(ratios: dict[tuple, list[float]], key: tuple, value: float) -> None:
    ratios.setdefault(key, []).append(value)


def _bare(pgbench: str, conn, workload: str, clients: int, duration: int,
          logs: Path | None = None, sampling_rate: float | None = None
          ) -> tuple[float, float]:
    """Bare pgbench; with ``logs``, with pgdyno's -l -P 1 (the logs deleted after); with
    ``sampling_rate`` too, with what --tx-logs sample adds to them. (TPS, pgbench's own
    CPU µs per transaction, from the kernel's accounting of the finished child.)"""
    extra = []
    if logs is not None:
        logs.mkdir(exist_ok=True)
        extra = ["-l", "--log-prefix", str(logs / "tx"), "-P", "1"]
        if sampling_rate is not None:
            extra += ["--progress-timestamp"]
            if sampling_rate < 1:
                extra += ["--sampling-rate", f"{sampling_rate:g}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [pgbench, *conn.client_args(), "-c", str(clients), "-j", str(min(clients, 2)),
         "-T", str(duration), "-M", "prepared", *extra, "-b", BUILTIN[workload], conn.dbname],
        capture_output=True, text=True, check=True,
        # pgdyno's dataset lives in its own schema: bare pgbench reaches the same tables
        env=dict(os.environ, PGOPTIONS=f"-c search_path={dataset.SCHEMA}")).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if logs is not None:
        shutil.rmtree(logs)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    done = int(re.search(r"^number of transactions actually processed: (\d+)", out,
                         re.MULTILINE).group(1))
    return float(re.search(r"^tps = ([\d.]+)", out, re.MULTILINE).group(1)), 1e6 * cpu_s / done


def _pgdyno(results: Path, dsn: str, workload: str, clients: int, telemetry: bool,
            args: argparse.Namespace, tx_logs: str) -> float:
    subprocess.run(
        [sys.executable, "-m", "pgdyno", "bench", workload, "--dsn", dsn, "--force",
         "--clients", str(clients), "--threads", str(min(clients, 2)),
         "--duration", str(args.duration), "--warmup", "0", "--iterations", "1",
         "--scale", str(args.scale), "--protocol", "prepared", "--no-progress",
         "--telemetry" if telemetry else "--no-telemetry", "--tx-logs", tx_logs,
         "--results-dir", str(results)], check=True, capture_output=True)
    summary = json.loads(next(results.glob("*/*/summary.json")).read_text())
    telemetry_summary = summary["iterations"][0].get("telemetry") or {}
    own = (telemetry_summary.get("contamination") or {})
    tps = summary["per_clients"][0]["tps_mean"]
    if own.get("busy_cores"):
        rate = 1.0 if tx_logs != "aggregate" else 0.0
        sampling = next(results.glob("*/*/raw/*/*/sampling.json"), None)
        if sampling is not None:
            rate = json.loads(sampling.read_text())["sampling_rate"]
        RUN_COSTS.setdefault((workload, clients, tx_logs), []).append(RunCost(
            busy_cores=own["busy_cores"], process_cores=own["sampler_cores"],
            sessions_cores=own.get("sampler_server_cores") or 0.0, lines_per_s=rate * tps))
    return tps


@dataclass
class RunCost:
    """One telemetry-on run's measurement costs, from its own CPU accounting: measured
    within the run, so the machine's speed changes cancel out."""

    busy_cores: float
    process_cores: float
    """pgdyno's own process: samplers, log reader, run loop."""
    sessions_cores: float
    """The server backends of pgdyno's sampling sessions."""
    lines_per_s: float
    """Per-transaction log lines pgbench wrote a second (sampling rate × TPS)."""

    @property
    def process_pct(self) -> float:
        return 100 * self.process_cores / self.busy_cores

    @property
    def sessions_pct(self) -> float:
        return 100 * self.sessions_cores / self.busy_cores

    def log_pct(self, line_us: float) -> float:
        return 100 * self.lines_per_s * line_us / 1e6 / self.busy_cores

    def total_pct(self, line_us: float) -> float:
        return self.process_pct + self.sessions_pct + self.log_pct(line_us)


RUN_COSTS: dict[tuple[str, int, str], list[RunCost]] = {}
LINE_COST_US: dict[tuple[str, int], list[float]] = {}
"""pgbench's CPU µs per logged line, one figure per round (bare with -l -P 1 less bare)."""


if __name__ == "__main__":
    main()
