"""Several driver hosts against one server (``bench --drivers``): a driver held to a fraction
of a core, alone and then beside a second one like it.

Two stand-in driver hosts (tests/sshhost.py: a throwaway user behind its own sshd on
loopback), each sshd and everything it starts (the driver's shells, pgbench, the sampler)
in a cgroup of its own limited to ``--quota`` cores (v2 ``cpu.max``, or v1's CFS quota on a
hybrid host). Each round runs the same workload with the same total clients twice, in
alternating order: on driver a alone, then split between a and b. Expected: TPS about
doubles with the second driver, and the one-driver run's verdict is "driver-bound" (pgbench
at its quota while the server's CPU is not saturated). Needs root (users, cgroups).

    python bench/drivers.py [--quota 0.05] [--rounds 2] [--seconds 10] [--clients 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness import ROOT, ResultWriter, alternate, new_parser, run, scratch

sys.path.insert(0, str(ROOT))  # tests.sshhost: the stand-in hosts the test suite uses

from tests.sshhost import SshHost, ssh_hosts  # noqa: E402

PERIOD_US = 100_000


def limit_cpu(host: SshHost, cores: float, name: str) -> Path:
    """The host's sshd (and so all it starts) into a cgroup of ``cores``; the group's path."""
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    if v2.exists() and "cpu" in v2.read_text().split():
        group = Path("/sys/fs/cgroup") / name
        group.mkdir(exist_ok=True)
        (group / "cpu.max").write_text(f"{int(cores * PERIOD_US)} {PERIOD_US}\n")
    else:
        group = Path("/sys/fs/cgroup/cpu") / name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (group / "cpu.cfs_quota_us").write_text(f"{int(cores * PERIOD_US)}\n")
    assert host.sshd is not None
    (group / "cgroup.procs").write_text(f"{host.sshd.pid}\n")
    return group


def one_run(root: Path, workdir: Path, listing: Path, config: Path,
            args: argparse.Namespace) -> dict:
    results = root / "results"
    before = set(results.glob("*/*/summary.json"))
    out = subprocess.run(
        [sys.executable, "-m", "pgdyno", "bench", args.workload, "--drivers", str(listing),
         "--ssh-config", str(config), "--clients", str(args.clients), "--scale",
         str(args.scale), "--warmup", str(args.warmup), "--duration", str(args.seconds),
         "--iterations", "1", "--no-progress", "--results-dir", str(results)],
        env={**os.environ, "PGDYNO_WORKDIR": str(workdir)}, capture_output=True, text=True,
        check=False)
    if out.returncode != 0:
        raise RuntimeError(f"pgdyno exited with {out.returncode}: {out.stderr[-2000:]}")
    (summary_path,) = set(results.glob("*/*/summary.json")) - before
    summary = json.loads(summary_path.read_text())
    it = summary["iterations"][0]
    telemetry = it.get("telemetry") or {}
    verdict = it.get("verdict") or {}
    driver_evidence = [e["figures"] for e in verdict.get("evidence", [])
                       if e["kind"] == "driver_host"]
    contamination = telemetry.get("contamination") or {}
    return {"tps": it["tps_mean"], "p99_ms": it["latency"]["percentiles_ms"]["p99"],
            "verdict": verdict.get("primary"),
            "host_busy_pct": (telemetry.get("cpu") or {}).get("busy_of_limit_pct"),
            "server_cores": contamination.get("server_cores"),
            "driver_evidence": driver_evidence,
            "drivers": [{"name": d["name"], "tps": d["tps"],
                         "pgbench_pct": (d["load"] or {}).get("pgbench_pct"),
                         "throttled_pct": (d["load"] or {}).get("throttled_pct")}
                        for d in it["drivers"]],
            "run_dir": str(summary_path.parent)}


def print_row(number: int, kind: str, got: dict) -> None:
    pcts = ", ".join(f"{d['pgbench_pct']:.0f}" for d in got["drivers"]
                     if d["pgbench_pct"] is not None)
    server = got["server_cores"]
    print(f"{number:>5}  {kind:<7}  {got['tps']:>8,.0f}  {got['p99_ms']:>6.2f}  "
          f"{got['verdict'] or '-':<13}  {'-' if server is None else f'{server:.2f}':>12}  "
          f"{pcts}")


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--quota", type=float, default=0.05, help="cores per driver")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--workload", default="select-only")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("drivers", args)
    rows: list[dict] = []
    groups: list[Path] = []
    try:
        with scratch("drivers") as root, ssh_hosts(2, prefix="pgdyno-bench-drivers-") as hosts:
            config = root / "ssh_config"
            config.write_text("".join(h.config_file.read_text() for h in hosts))
            listings = {"one": root / "one.txt", "two": root / "two.txt"}
            listings["one"].write_text(f"{hosts[0].destination}\n")
            listings["two"].write_text("".join(f"{h.destination}\n" for h in hosts))
            groups += [limit_cpu(h, args.quota, f"pgdyno-bench-{h.alias}") for h in hosts]
            workdir = root / "work"
            one_run(root, workdir, listings["two"], config, args)  # dataset and copies made
            print("round  drivers  TPS       p99 ms  verdict        server cores  pgbench % "
                  "of quota")
            for number in range(args.rounds):
                for kind in alternate(("one", "two"), number):
                    got = one_run(root, workdir, listings[kind], config, args)
                    rows.append({"round": number + 1, "setup": kind, **got})
                    writer.write({"rows": rows})
                    print_row(number + 1, kind, got)
    finally:
        for group in groups:  # empty once the hosts' processes are gone
            with contextlib.suppress(OSError):
                group.rmdir()
    tps = {k: [r["tps"] for r in rows if r["setup"] == k] for k in ("one", "two")}
    ratio = statistics.median(b / a for a, b in zip(tps["one"], tps["two"], strict=True))
    verdicts = [r["verdict"] for r in rows if r["setup"] == "one"]
    print(f"median TPS with two drivers / one: {ratio:.2f}; one driver's verdicts: "
          f"{', '.join(str(v) for v in verdicts)}")
    writer.finish({"rows": rows, "median_two_over_one": ratio,
                   "one_driver_verdicts": verdicts})
    return 0


if __name__ == "__main__":
    run(main)
