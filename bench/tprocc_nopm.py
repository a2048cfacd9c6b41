"""TPROC-C NOPM on this machine, default against tuned config, through pgdyno itself.

Runs ``pgdyno bench tprocc`` once per side and pair in A B B A order (one iteration per
run, so that each value is a separate run and drift of the machine spreads over both
sides), then ``pgdyno compare`` of the default runs against the tuned runs: per VU
count, NOPM and TPM with their change, 95% interval and verdict. The dataset of W
warehouses is loaded by the first run and reused by the others (same workdir).

    python bench/tprocc_nopm.py --warehouses 10 --vus 8,32 --pairs 3 --duration 60

Prints the compare headline and the per-run NOPM, and writes them to the result file
(--output); the runs and the comparison stay under --results-dir (default
/var/tmp/pgdyno-bench/tprocc_nopm/results), the cluster in --workdir.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, abba, kept_dir, new_parser, run


def pgdyno(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pgdyno", *args], text=True,
                          capture_output=True)


def run_side(config: str, args: argparse.Namespace) -> Path:
    proc = pgdyno("bench", "tprocc", "--warehouses", str(args.warehouses), "--vus", args.vus,
                  "--rampup", str(args.rampup), "--duration", str(args.duration),
                  "--iterations", "1", "--config", config, "--results-dir",
                  str(args.results_dir), "--workdir", str(args.workdir), "--no-progress")
    if proc.returncode != 0:
        sys.exit(f"pgdyno bench ({config}) failed: {proc.stderr.strip()[-600:]}")
    report = next(line.split(":", 1)[1].strip() for line in proc.stdout.splitlines()
                  if line.startswith("report:"))
    return Path(report).parent


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--warehouses", type=int, default=10)
    parser.add_argument("--vus", default="8,32")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rampup", type=int, default=10)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--candidate", default="tuned", help="config of the B side")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="the cluster (default /var/tmp/pgdyno-bench/tprocc_nopm/work)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="the runs (default /var/tmp/pgdyno-bench/tprocc_nopm/results)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.workdir = args.workdir or kept_dir("tprocc_nopm") / "work"
    args.results_dir = args.results_dir or kept_dir("tprocc_nopm") / "results"
    writer = ResultWriter("tprocc_nopm", args)
    runs: dict[str, list[Path]] = {"A": [], "B": []}
    for side in abba(args.pairs):
        config = "default" if side == "A" else args.candidate
        run_dir = run_side(config, args)
        runs[side].append(run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        nopm = {it["clients"]: round(it["metrics"]["nopm"]) for it in summary["iterations"]}
        print(f"{config:8s} {run_dir.name}: NOPM by VUs {nopm}", flush=True)

    iterations = []
    for label, side in (("default", "A"), (args.candidate, "B")):
        for path in runs[side]:
            summary = json.loads((path / "summary.json").read_text())
            for it in summary["iterations"]:
                iterations.append({"config": label, "run": path.name, "vus": it["clients"],
                                   **{k: round(it["metrics"][k], 1)
                                      for k in ("nopm", "tpm", "efficiency")}})
                print(json.dumps(iterations[-1]))
    by_vus = []
    for vus in (int(v) for v in args.vus.split(",")):
        for label in ("default", args.candidate):
            values = [it["nopm"] for it in iterations
                      if it["vus"] == vus and it["config"] == label]
            sd = statistics.stdev(values) if len(values) > 1 else float("nan")
            by_vus.append({"vus": vus, "config": label, "nopm_mean": statistics.mean(values),
                           "nopm_sd": sd, "n": len(values)})
            print(f"W={args.warehouses} VUs={vus} {label}: NOPM {statistics.mean(values):,.0f}"
                  f" ± {sd:,.0f} (n={len(values)})")
    out = args.results_dir / f"compare-default-vs-{args.candidate}"
    proc = pgdyno("compare", ",".join(map(str, runs["A"])), ",".join(map(str, runs["B"])),
                  "--out", str(out), "--results-dir", str(args.results_dir))
    print(proc.stdout, proc.stderr, sep="")
    for line in (out / "compare.md").read_text().splitlines():
        if "nopm" in line.lower() or "tpm" in line.lower():
            print(line)
    writer.finish({"iterations": iterations, "by_vus": by_vus, "compare": str(out)})
    return 0


if __name__ == "__main__":
    run(main)
