"""What pgbench's own per-transaction log (-l) and progress (-P 1) cost, and what pgdyno's
log reader adds, without the rest of pgdyno.

One embedded server, the pgbench dataset built once; then rounds of four alternating
runs with the same flags: bare, with -l (per-transaction log into a temporary dir), with
-l -P 1 (what pgdyno runs), and with -l -P 1 while pgdyno's log reader follows the logs
(the LogTail of a run, in this process, past its cap: binning, histograms, releasing).
Short runs in many rounds: the machine's speed changes between runs far apart, so each
ratio is against the bare run of its own round. Prints per round the TPS of each and their
ratios to bare, then the median and best ratio.

Usage: python bench/log_cost.py [--rounds 20] [--duration 4] [--clients 4]
                                [--workload select-only]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from pgdyno.analysis.per_second import LogLayout
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.engine.txtail import LogTail

BUILTIN = {"select-only": "select-only", "tpcb": "tpcb-like"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workload", default="select-only", choices=sorted(BUILTIN))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pgdyno-logcost-", dir="/var/tmp"))
    work.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=work)
    server.prepare()
    server.start()
    ratios: dict[str, list[float]] = {"-l": [], "-l -P 1": [], "-l -P 1 + reader": [],
                                      "reader / -l -P 1": []}
    try:
        conn = server.connection()
        pgbench = server.install.program("pgbench")
        subprocess.run([pgbench, *conn.client_args(), "-i", "-s", str(args.scale), "-I",
                        "dtGvp", "-q", conn.dbname], check=True, capture_output=True)
        base = [pgbench, *conn.client_args(), "-c", str(args.clients), "-j",
                str(min(args.clients, 2)), "-T", str(args.duration), "-M", "prepared", "-b",
                BUILTIN[args.workload]]
        for n in range(1, args.rounds + 1):
            logs = work / f"logs-{n}"
            logs.mkdir()
            bare = _tps([*base, conn.dbname])
            logged = _tps([*base, "-l", "--log-prefix", str(logs / "a"), conn.dbname])
            progress = _tps([*base, "-l", "--log-prefix", str(logs / "b"), "-P", "1",
                             conn.dbname])
            read = _tps_read([*base, "-l", "--log-prefix", str(logs / "c"), "-P", "1",
                              conn.dbname], logs)
            ratios["-l"].append(logged / bare)
            ratios["-l -P 1"].append(progress / bare)
            ratios["-l -P 1 + reader"].append(read / bare)
            ratios["reader / -l -P 1"].append(read / progress)
            print(f"round {n}: bare {bare:,.0f}, -l {logged:,.0f} ({logged / bare:.3f}), "
                  f"-l -P 1 {progress:,.0f} ({progress / bare:.3f}), with the reader "
                  f"{read:,.0f} ({read / bare:.3f})", flush=True)
            shutil.rmtree(logs)
        for flags, rs in ratios.items():
            print(f"{flags:<18} median {statistics.median(rs):.3f}, best {max(rs):.3f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _tps_read(cmd: list[str], logs: Path) -> float:
    """pgbench with pgdyno's log reader following its logs, as a run past its cap does."""
    tail = LogTail(logs, "c", time.time(), LogLayout(has_lag=False, has_retries=False), None,
                   cap=0)
    tail.start()
    try:
        return _tps(cmd)
    finally:
        tail.finish()


def _tps(cmd: list[str]) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"^tps = ([\d.]+)", out, re.MULTILINE).group(1))


if __name__ == "__main__":
    main()
