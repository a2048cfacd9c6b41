"""A compliant TPROC-C warehouse sweep through pgdyno: real against ideal NOPM, p90 per type.

    python bench/tprocc_sweep.py --warehouses 10,20,30 --rampup 30 --duration 180
    python bench/tprocc_sweep.py --warehouses 1,2,3,4,6 --time-scale 0.002   # find saturation

With the specification's keying and think times (--time-scale 1), 30 warehouses are 300
terminals asking for about 386 new orders a minute: far below what a 2-core machine
serves, so real/ideal stays near 99%. Shrinking the times (--time-scale) makes each
terminal ask for more, so that the sweep reaches the point where the machine cannot keep
up and real/ideal falls below 90%. Prints the sweep's rows and headline and writes them to
the result file (--output); the sweep stays under --results-dir (default
/var/tmp/pgdyno-bench/tprocc_sweep/results), the cluster in --workdir.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, kept_dir, new_parser, run


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--warehouses", default="10,20,30")
    parser.add_argument("--time-scale", default="1")
    parser.add_argument("--rampup", type=int, default=30)
    parser.add_argument("--duration", type=int, default=180)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--config", default="default")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="the cluster (default /var/tmp/pgdyno-bench/tprocc_sweep/work)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="the sweep (default /var/tmp/pgdyno-bench/tprocc_sweep/results)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.workdir = args.workdir or kept_dir("tprocc_sweep") / "work"
    args.results_dir = args.results_dir or kept_dir("tprocc_sweep") / "results"
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.workdir.chmod(0o755)
    writer = ResultWriter("tprocc_sweep", args)
    proc = subprocess.run(
        [sys.executable, "-m", "pgdyno", "bench", "tprocc", "--warehouses", args.warehouses,
         "--keying-thinking", "--time-scale", args.time_scale, "--rampup", str(args.rampup),
         "--duration", str(args.duration), "--iterations", str(args.iterations),
         "--config", args.config, "--workdir", str(args.workdir),
         "--results-dir", str(args.results_dir), "--no-progress"],
        text=True, capture_output=True)
    if proc.returncode != 0:
        sys.exit(f"pgdyno bench failed: {proc.stderr.strip()[-600:]}")
    report = next(line.split(":", 1)[1].strip() for line in proc.stdout.splitlines()
                  if line.startswith("report:"))
    sweep_dir = Path(report).parent
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    rows = []
    for row in summary["rows"]:
        rows.append({k: (round(v, 3) if isinstance(v, float) else v)
                     for k, v in row.items() if k != "run"}
                    | {"p90_ms": {k: round(v, 2) for k, v in row["p90_ms"].items()}})
        print(json.dumps(rows[-1]))
    in_report = (sweep_dir / "report.md").read_text().split("## Result", 1)[1]
    headline = in_report.strip().split("\n\n")[0]
    print(headline)
    print(f"sweep report: {report}")
    writer.finish({"rows": rows, "headline": headline, "report": report})
    return 0


if __name__ == "__main__":
    run(main)
