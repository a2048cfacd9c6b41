"""A difference known beforehand, found again by the short block comparisons: the right
sign, and an interval that covers the value a long sequential comparison measures.

The candidate differs from the baseline by one setting whose cost per transaction is
real and steady (by default ``log_min_duration_statement=0``: the server writes a log line
for every statement). First a long comparison in whole runs (``--design sequential``,
``--long-pairs`` pairs of ``--long-duration`` seconds each side) measures the change: the
long-run value, with its own interval. Then ``--repeats`` short block comparisons
(``--design``, ``--budget`` of measuring each) of the same two sides each report a change
and an interval: how many found the difference with its sign (the interval excludes 0 on
the long-run value's side), and how many intervals cover the long-run value.

Every comparison's figures are a row of the result file (--output, default under
bench/results/). The servers' clusters and the runs are kept under
/var/tmp/pgdyno-bench/known_difference (--workdir, --results-dir).

Usage:
    python bench/known_difference.py --workload tpcb --scale 10 --clients 4 \\
        --long-pairs 3 --long-duration 120 --design interleaved --budget 120 --repeats 4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from harness import ROOT, ResultWriter, Stopwatch, kept_dir, new_parser, run


def _compare(args: argparse.Namespace, out: Path, design: list[str]) -> dict:
    """One `pgdyno compare` of default against default + the known setting: its headline
    row (change, interval, method) and its wall time."""
    cmd = [sys.executable, "-m", "pgdyno", "compare", args.workload, "--baseline", "default",
           "--candidate", "default", "--candidate-set", args.setting, "--clients",
           str(args.clients), "--no-progress", "--results-dir", str(args.results_dir),
           "--workdir", str(args.workdir), "--out", str(out), *design]
    if args.scale is not None:
        cmd += ["--scale", str(args.scale)]
    with Stopwatch() as watch:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    row = {"command": " ".join(cmd[2:]), "wall_s": round(watch.seconds, 1),
           "returncode": done.returncode}
    if done.returncode != 0:
        row["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
        return row
    cmp = json.loads((out / "compare.json").read_text())
    head = next(m for m in cmp["metrics"] if m["metric"] == cmp["headline_metric"])
    row.update(change_pct=head["change_pct"], low_pct=head["ci_low_pct"],
               high_pct=head["ci_high_pct"], method=head["method"],
               pairs=(cmp.get("design") or {}).get("pairs") or head["baseline_n"],
               compare_dir=str(out))
    return row


def _judge(row: dict, long_run: dict) -> None:
    """Whether a short comparison found the long-run difference: its sign, its value."""
    value = long_run["change_pct"]
    low, high = row["low_pct"], row["high_pct"]
    row["right_sign"] = (low > 0) if value > 0 else (high < 0)
    row["covers_long_run"] = low <= value <= high


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--workload", default="tpcb")
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--setting", default="log_min_duration_statement=0",
                        help="the candidate's one setting (its known cost)")
    parser.add_argument("--long-pairs", type=int, default=3)
    parser.add_argument("--long-duration", type=int, default=120)
    parser.add_argument("--long-warmup", type=int, default=10)
    parser.add_argument("--design", default="interleaved")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds a comparison")
    parser.add_argument("--block", type=int, default=10, help="measured seconds a block")
    parser.add_argument("--block-warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="the servers' clusters (default: under /var/tmp/pgdyno-bench)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="the comparisons' runs (default: under /var/tmp/pgdyno-bench)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    home = kept_dir("known_difference")
    args.workdir = args.workdir or home / "work"
    args.results_dir = args.results_dir or home / "results"
    for path in (args.workdir, args.results_dir):
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o755)  # the server's user works in it
    writer = ResultWriter("known_difference", args)
    out = args.results_dir / "bench-known-difference"
    long_run = _compare(args, out / "long", [
        "--design", "sequential", "--pairs", str(args.long_pairs), "--iterations", "1",
        "--duration", str(args.long_duration), "--warmup", str(args.long_warmup)])
    print(json.dumps({"long_run": long_run}), flush=True)
    rows: list[dict] = []
    writer.write({"long_run": long_run, "rows": rows})
    if "change_pct" not in long_run:
        sys.exit(f"the long comparison failed: {long_run.get('error')}")
    for number in range(1, args.repeats + 1):
        row = _compare(args, out / f"short-{number}", [
            "--design", args.design, "--budget", f"{args.budget:g}s", "--pairs", "4",
            "--duration", str(args.block), "--warmup", str(args.block_warmup)])
        if "change_pct" in row:
            _judge(row, long_run)
        rows.append(row)
        print(json.dumps(row), flush=True)
        writer.write({"long_run": long_run, "rows": rows})
    done = [r for r in rows if "change_pct" in r]
    print(f"long run: {long_run['change_pct']:+.2f}% ({long_run['low_pct']:+.2f}% to "
          f"{long_run['high_pct']:+.2f}%); short {args.design} comparisons of "
          f"{args.budget:.0f} s: right sign in {sum(r['right_sign'] for r in done)} of "
          f"{len(done)}, covering the long-run value in "
          f"{sum(r['covers_long_run'] for r in done)} of {len(done)}")


if __name__ == "__main__":
    run(main)
