"""TPROC-C NOPM on this machine: W = 10, 8 and 32 virtual users, 3 iterations.

One embedded PostgreSQL 18 server with the stock configuration (the "default" config;
tuned configs come with the CLI wiring). The dataset is loaded once (reused when
--workdir already holds it). Each run starts pgbench for ramp-up + duration and reads
NOPM/TPM from the database between two snapshots taken by this script after the ramp-up
and at the end of the measured window; the VU counts alternate order across
iterations so that drift from other users of the machine spreads evenly. The four
consistency conditions are checked at the end.

    python bench/tprocc_nopm.py --warehouses 10 --vus 8,32 --iterations 3 --duration 60
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
import time
from pathlib import Path

import psycopg

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.workloads.tprocc import (
    LoadOptions,
    ScriptOptions,
    check_consistency,
    generate,
    load,
    snapshot,
    throughput,
)


def run_once(server: LocalServer, warehouses: int, vus: int, rampup: int, duration: int,
             script_dir: Path) -> dict:
    target = server.connection()
    scripts = generate(ScriptOptions(warehouses=warehouses, protocol="prepared"))
    cmd = [server.install.program("pgbench"), *target.client_args(), "-n", "-M", "prepared",
           "-c", str(vus), "-j", "2", "-T", str(rampup + duration), "--max-tries", "10",
           *scripts.pgbench_args(script_dir), target.dbname]
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, env=target.client_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        time.sleep(max(0.0, rampup - (time.monotonic() - started)))
        start = snapshot(conn)
        time.sleep(max(0.0, rampup + duration - (time.monotonic() - started)))
        end = snapshot(conn)
        out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed: {out[-800:]}")
    metrics = throughput(start, end, warehouses)
    per_script = [int(n) for n in re.findall(r"^ - (\d+) transactions", out, re.M)]
    retried = re.search(r"^number of transactions retried: (\d+)", out, re.M)
    return {
        "vus": vus,
        "nopm": round(metrics.nopm),
        "tpm": round(metrics.tpm),
        "efficiency": round(metrics.efficiency, 2),
        "window_s": round(metrics.duration_s, 2),
        "pgbench_tps": float(re.search(r"^tps = ([\d.]+)", out, re.M).group(1)),
        "per_script": dict(zip([s.name for s in scripts.scripts], per_script, strict=False)),
        "retried": int(retried.group(1)) if retried else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouses", type=int, default=10)
    parser.add_argument("--vus", default="8,32")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rampup", type=int, default=10)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the cluster here (reused next time); default: temporary")
    parser.add_argument("--out", type=Path, default=Path("tprocc_nopm.json"))
    args = parser.parse_args()

    temporary = args.workdir is None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pgdyno-tprocc-nopm-",
                                                    dir="/var/tmp"))
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o755)
    server = LocalServer(install=embedded_install(), workdir=workdir, name="nopm")
    vus_list = [int(v) for v in args.vus.split(",")]
    runs = []
    try:
        server.prepare()
        server.start()
        loaded = load(server.connection(), LoadOptions(warehouses=args.warehouses))
        print(f"dataset W={args.warehouses}: "
              f"{'reused' if loaded.reused else f'loaded in {loaded.seconds:.0f} s'}",
              file=sys.stderr)
        script_dir = workdir / "scripts"
        for iteration in range(1, args.iterations + 1):
            order = vus_list if iteration % 2 else list(reversed(vus_list))
            for vus in order:
                row = {"iteration": iteration, **run_once(server, args.warehouses, vus,
                                                          args.rampup, args.duration,
                                                          script_dir)}
                print(json.dumps(row), flush=True)
                runs.append(row)
        with psycopg.connect(server.connection().conninfo(), autocommit=True) as conn:
            consistency = check_consistency(conn)
    finally:
        server.stop()
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)

    summary = {}
    for vus in vus_list:
        values = [r["nopm"] for r in runs if r["vus"] == vus]
        tpms = [r["tpm"] for r in runs if r["vus"] == vus]
        summary[str(vus)] = {
            "nopm_mean": round(statistics.mean(values)),
            "nopm_median": round(statistics.median(values)),
            "nopm_stdev": round(statistics.stdev(values)) if len(values) > 1 else None,
            "tpm_mean": round(statistics.mean(tpms)),
        }
        print(f"W={args.warehouses} VUs={vus}: NOPM {summary[str(vus)]}", file=sys.stderr)
    print(f"consistency: {'pass' if consistency.passed else 'FAIL'} "
          f"({', '.join(str(c.passed) for c in consistency.conditions)})", file=sys.stderr)
    args.out.write_text(json.dumps({
        "schema_version": 1, "bench": "tprocc_nopm", "config": "default",
        "warehouses": args.warehouses, "rampup_s": args.rampup, "duration_s": args.duration,
        "runs": runs, "summary": summary, "consistency": consistency.to_dict(),
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
