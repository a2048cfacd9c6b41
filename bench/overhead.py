"""pgdyno's harness overhead: bare pgbench against `pgdyno bench` on the same server.

Starts one embedded server, builds the pgbench dataset once, then runs rounds: in each
round, for every workload × clients, bare pgbench, bare pgbench with the logging pgdyno
asks of it (`-l -P 1`), and `pgdyno bench` with telemetry on and off, all with the same
scale, clients, threads, protocol and duration, one after the other, their order
counterbalanced from round to round (reversed every other round, or drawn at random with
--order random), so that the machine's drift spreads over every condition. pgdyno runs
through --dsn so all hit the very same postmaster; its figure is summary.json's TPS (1 s
intervals), the bare figures the "tps = ..." pgbench prints. Each ratio is against the bare
run of the same round; per condition the median and best-of-N ratio. Where the shortfall
goes: "pgbench -l -P 1" over bare is pgbench's own logging, pgdyno over "pgbench -l -P 1"
is pgdyno's (its log reader, and with telemetry its samplers), and telemetry on over off
(same round, same --tx-logs) is what the samplers cost in throughput. Each --tx-logs mode
given is a condition of its own; with ``sample`` among them, bare pgbench also runs with
the sampled logging pgdyno asks of it (`-l --sampling-rate R -P 1 --progress-timestamp`,
R chosen from the round's bare TPS as pgdyno's auto does), to split the sampled mode's
cost the same way.

Usage: python bench/overhead.py [--pairs 5] [--duration 15] [--clients 4,16]
                                [--workloads select-only,tpcb] [--telemetry on,off]
                                [--tx-logs 1000000,sample,aggregate] [--order random]

    # what telemetry costs a saturated select-only run:
    python bench/overhead.py --workloads select-only --clients 4 --tx-logs aggregate
    # what pgbench's own per-transaction log costs, and pgdyno's reading of it:
    python bench/overhead.py --workloads select-only --clients 4 --telemetry off \\
        --tx-logs 1000000 --pairs 20 --duration 4

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
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import (
    ResultWriter,
    alternate,
    children_cpu_s,
    new_parser,
    round_orders,
    run,
    scratch,
)
from harness.order import ORDERS

from pgdyno.analysis.sampled import choose_sampling_rate
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads import dataset

BUILTIN = {"select-only": "select-only", "tpcb": "tpcb-like", "simple-update": "simple-update"}


BARE, LOGGED, SAMPLED = "pgbench", "pgbench -l -P 1", "pgbench -l sampled -P 1"
"""The bare runs of a cell: without a log, with pgdyno's full log, with its sampled one."""


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--pairs", type=int, default=5, help="rounds")
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--clients", default="4,16")
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--workloads", default="select-only,tpcb",
                        help=f"some of {', '.join(BUILTIN)}")
    parser.add_argument("--telemetry", default="on,off")
    parser.add_argument("--tx-logs", default="1000000,sample",
                        help="pgdyno's --tx-logs modes, comma-separated, one condition each "
                             "(aggregate: no per-transaction log; sample: a sampled one)")
    parser.add_argument("--order", choices=ORDERS, default="alternate",
                        help="each round's order of the runs: reversed every other round, or "
                             "drawn at random (from --order-seed)")
    parser.add_argument("--order-seed", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    modes = args.tx_logs.split(",")
    conditions = [(w, int(c), t == "on", m) for w in args.workloads.split(",")
                  for c in args.clients.split(",") for t in args.telemetry.split(",")
                  for m in modes]
    if unknown := sorted({w for w, *_ in conditions} - set(BUILTIN)):
        sys.exit(f"--workloads {unknown[0]}: expected some of {', '.join(BUILTIN)}")
    writer = ResultWriter("overhead", args)
    cells = list(dict.fromkeys((w, c) for w, c, _t, _m in conditions))
    ratios: dict[tuple, list[float]] = {}
    with scratch("overhead") as work:
        server = LocalServer(install=embedded_install(), workdir=work)
        server.prepare()
        server.start()
        try:
            conn = server.connection()
            dsn = f"postgresql://{conn.user}@/{conn.dbname}?host={conn.host}&port={conn.port}"
            # pgdyno builds the dataset (and records it), so its runs reuse what bare
            # pgbench uses.
            _pgdyno(work / "build", dsn, "select-only", 1, False,
                    argparse.Namespace(duration=1, scale=args.scale), "none")
            runs = {cell: [BARE, LOGGED, *([SAMPLED] if "sample" in modes else []),
                           *[(t, m) for w, c, t, m in conditions if (w, c) == cell]]
                    for cell in cells}
            orders = {cell: round_orders(labels, args.pairs, args.order,
                                         args.order_seed + i)
                      for i, (cell, labels) in enumerate(runs.items())}
            for pair in range(1, args.pairs + 1):
                for cell in alternate(cells, pair - 1):
                    tps = _round(work, server, dsn, cell, orders[cell][pair - 1], pair, args)
                    print(f"round {pair} {_record(ratios, cell, tps)}", flush=True)
                writer.write(_figures(ratios))
        finally:
            server.stop()
    print(f"\n{'workload':<13}{'clients':>8}  {'condition':<62}median   best"
          "  (TPS ratio to bare pgbench unless said)")
    for (workload, clients, label), rs in ratios.items():
        print(f"{workload:<13}{clients:>8}  {label:<62}{statistics.median(rs):6.3f}"
              f"  {max(rs):.3f}")
    _print_costs()
    writer.finish(_figures(ratios))
    return 0


def _round(work: Path, server: LocalServer, dsn: str, cell: tuple[str, int],
           order: list, pair: int, args: argparse.Namespace) -> dict:
    """One round of a workload × clients cell, in ``order``: each run's TPS by label (and
    the bare runs' pgbench CPU µs per transaction under ``(label, "cpu")``)."""
    workload, clients = cell
    if SAMPLED in order and order.index(SAMPLED) < order.index(BARE):
        # The sampled run's rate comes from the round's bare TPS: bare goes first.
        order = [label for label in order if label != SAMPLED]
        order.insert(order.index(BARE) + 1, SAMPLED)
    conn = server.connection()
    pgbench = server.install.program("pgbench")
    out: dict = {}
    for label in order:
        if label in (BARE, LOGGED, SAMPLED):
            rate = choose_sampling_rate(out[BARE]) if label == SAMPLED else None
            out[label], out[(label, "cpu")] = _bare(
                pgbench, conn, workload, clients, args.duration,
                logs=None if label == BARE else work / "bare-logs", sampling_rate=rate)
            if rate is not None:
                out[(label, "rate")] = rate
        else:
            telemetry, mode = label
            out[label] = _pgdyno(work / f"r{pair}-{workload}-{clients}-{telemetry}-{mode}",
                                 dsn, workload, clients, telemetry, args, mode)
    return out


def _pgdyno_label(telemetry: bool, mode: str) -> str:
    return f"pgdyno --tx-logs {mode}, telemetry {'on' if telemetry else 'off'}"


def _record(ratios: dict[tuple, list[float]], cell: tuple[str, int], tps: dict) -> str:
    """A round's ratios added to ``ratios``; the round's line."""
    workload, clients = cell
    bare, logged = tps[BARE], tps[LOGGED]
    _add(ratios, (*cell, LOGGED), logged / bare)
    # Every transaction logged: the difference in pgbench's CPU per transaction is what
    # writing one line costs it (and -P 1, a line a second).
    _add(LINE_COST_US, cell, tps[(LOGGED, "cpu")] - tps[(BARE, "cpu")])
    line = f"{workload} c{clients}: pgbench {bare:,.0f} tps, {LOGGED} {logged / bare:.3f}"
    if SAMPLED in tps:
        _add(ratios, (*cell, SAMPLED), tps[SAMPLED] / bare)
        line += (f", pgbench -l --sampling-rate {tps[(SAMPLED, 'rate')]:g} -P 1 "
                 f"{tps[SAMPLED] / bare:.3f}")
    for key, ours in tps.items():
        if not isinstance(key, tuple) or not isinstance(key[0], bool):
            continue
        label = _pgdyno_label(*key)
        _add(ratios, (*cell, label), ours / bare)
        _add(ratios, (*cell, f"{label} / {LOGGED}"), ours / logged)
        line += f", {label} {ours / bare:.3f}"
        telemetry, mode = key
        if telemetry and (False, mode) in tps:
            _add(ratios, (*cell, f"pgdyno --tx-logs {mode}, telemetry on / off"),
                 ours / tps[(False, mode)])
    return line


def _figures(ratios: dict[tuple, list[float]]) -> dict:
    return {
        "ratios": [{"workload": w, "clients": c, "condition": label, "ratios": rs,
                    "median": statistics.median(rs), "best": max(rs)}
                   for (w, c, label), rs in ratios.items()],
        "pgbench_cpu_us_per_logged_line": [{"workload": w, "clients": c, "rounds": costs}
                                           for (w, c), costs in LINE_COST_US.items()],
        "measuring_costs": [{"workload": w, "clients": c, "tx_logs": mode,
                             "runs": [asdict(r) for r in runs]}
                            for (w, c, mode), runs in RUN_COSTS.items()]}


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
    before = children_cpu_s()
    out = subprocess.run(
        [pgbench, *conn.client_args(), "-c", str(clients), "-j", str(min(clients, 2)),
         "-T", str(duration), "-M", "prepared", *extra, "-b", BUILTIN[workload], conn.dbname],
        capture_output=True, text=True, check=True,
        # pgdyno's dataset lives in its own schema: bare pgbench reaches the same tables
        env=dict(os.environ, PGOPTIONS=f"-c search_path={dataset.SCHEMA}")).stdout
    cpu_s = children_cpu_s() - before
    if logs is not None:
        shutil.rmtree(logs)
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
    run(main)
