"""What pgbench's own per-transaction log (-l) and progress (-P 1) cost, without pgdyno.

One embedded server, the pgbench dataset built once; then rounds of three alternating
runs with the same flags: bare, with -l (per-transaction log into a temporary dir), and
with -l -P 1 (what pgdyno runs). Prints per round the TPS of each and their ratios to
bare, then the median and best ratio: the share of pgdyno's overhead that is pgbench's
own logging rather than pgdyno's.

Usage: python bench/log_cost.py [--rounds 6] [--duration 10] [--clients 4]
                                [--workload select-only]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer

BUILTIN = {"select-only": "select-only", "tpcb": "tpcb-like"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--workload", default="select-only", choices=sorted(BUILTIN))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pgdyno-logcost-", dir="/var/tmp"))
    work.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=work)
    server.prepare()
    server.start()
    ratios: dict[str, list[float]] = {"-l": [], "-l -P 1": []}
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
            ratios["-l"].append(logged / bare)
            ratios["-l -P 1"].append(progress / bare)
            print(f"round {n}: bare {bare:,.0f}, -l {logged:,.0f} ({logged / bare:.3f}), "
                  f"-l -P 1 {progress:,.0f} ({progress / bare:.3f})", flush=True)
            shutil.rmtree(logs)
        for flags, rs in ratios.items():
            print(f"{flags:<8} median {statistics.median(rs):.3f}, best {max(rs):.3f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _tps(cmd: list[str]) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"^tps = ([\d.]+)", out, re.MULTILINE).group(1))


if __name__ == "__main__":
    main()
