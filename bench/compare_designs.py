"""A/A comparisons under each design of `pgdyno compare`, given the same wall time: how often
the 95% interval covers 0 (it should, about 19 times in 20) and how wide it is.

Each comparison runs one config on both sides (`--baseline default --candidate default`), so
the true change is 0: an interval that misses 0 is a false difference, and its half-width
is the precision the design reaches in that time on this machine.

- alternating / interleaved / duet: `--design D --budget BUDGET` (blocks of --block
  measured seconds after --block-warmup seconds; alternating: blocks of turns, best a
  minute or so, e.g. `--block 60 --block-warmup 1`);
- sequential: whole runs A B B A ... of --seq-duration s after --seq-warmup s, as many
  pairs as fit in the same budget (at least 2).

Every comparison's figures are a row of the result file (--output, default under
bench/results/), written again as each comparison ends; the table at the end covers this
invocation's rows and those of earlier result files given with --also. The servers'
clusters and the comparisons' runs are kept under /var/tmp/pgdyno-bench/compare_designs
(--workdir, --results-dir), so later invocations reuse the dataset.

Usage:
    python bench/compare_designs.py --workload tpcb --scale 10 --clients 4 \\
        --designs interleaved,sequential --budget 600 --repeats 1
    python bench/compare_designs.py --designs interleaved --budget 120 --repeats 12 \\
        --also bench/results/compare_designs-20261127T101500Z.json
    python bench/compare_designs.py --designs alternating,sequential --budget 600 \\
        --block 60 --block-warmup 1
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from harness import ROOT, ResultWriter, Stopwatch, alternate, kept_dir, load_result, new_parser, run


def compare_args(args: argparse.Namespace, design: str, out: Path) -> list[str]:
    common = [sys.executable, "-m", "pgdyno", "compare", args.workload,
              "--baseline", "default", "--candidate", "default", "--clients",
              str(args.clients), "--design", design, "--no-progress",
              "--results-dir", str(args.results_dir), "--workdir", str(args.workdir),
              "--out", str(out), *args.workload_args]
    scale = args.scale if args.scale is not None else (10 if args.workload == "tpcb" else None)
    if scale is not None:
        common += ["--scale", str(scale)]
    if design == "sequential":
        per_pair = 2 * (args.seq_duration + args.seq_warmup + args.seq_overhead)
        pairs = max(2, math.floor(args.budget / per_pair))
        return [*common, "--pairs", str(pairs), "--iterations", "1",
                "--duration", str(args.seq_duration), "--warmup", str(args.seq_warmup)]
    return [*common, "--budget", f"{args.budget:g}s", "--pairs", "4",
            "--duration", str(args.block), "--warmup", str(args.block_warmup)]


def one(args: argparse.Namespace, design: str, number: int) -> dict:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.results_dir / "bench-compare-designs" / f"{design}-{stamp}-{number}"
    cmd = compare_args(args, design, out)
    with Stopwatch() as watch:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    row = {"design": design, "workload": args.workload, "budget_s": args.budget,
           "wall_s": round(watch.seconds, 1), "returncode": done.returncode,
           "command": " ".join(cmd[2:]), "started_at": stamp}
    if done.returncode != 0:
        row["error"] = done.stderr.strip().splitlines()[-1:] or ["?"]
        return row
    cmp = json.loads((out / "compare.json").read_text())
    head = next(m for m in cmp["metrics"] if m["metric"] == cmp["headline_metric"])
    design_rec = cmp.get("design") or {}
    row.update(change_pct=head["change_pct"], low_pct=head["ci_low_pct"],
               high_pct=head["ci_high_pct"], method=head["method"],
               pairs=design_rec.get("pairs") or head["baseline_n"],
               stop=(design_rec.get("blocks") or {}).get("stop", ""),
               compare_dir=str(out))
    row["half_width_pct"] = max(row["high_pct"] - row["change_pct"],
                                row["change_pct"] - row["low_pct"])
    row["covers_zero"] = row["low_pct"] <= 0.0 <= row["high_pct"]
    return row


def table(rows: list[dict]) -> str:
    lines = [f"{'design':<13}{'budget s':>9}{'n':>4}{'covers 0':>10}{'half-width %':>14}"
             f"{'(min-max)':>16}{'wall s':>9}"]
    keys = sorted({(r["design"], r["budget_s"]) for r in rows})
    for design, budget in keys:
        ok = [r for r in rows if r["design"] == design and r["budget_s"] == budget
              and r["returncode"] == 0]
        if not ok:
            continue
        hw = [r["half_width_pct"] for r in ok]
        lines.append(f"{design:<13}{budget:>9.0f}{len(ok):>4}"
                     f"{sum(r['covers_zero'] for r in ok):>6}/{len(ok):<3}"
                     f"{statistics.median(hw):>14.2f}"
                     f"{f'({min(hw):.2f}-{max(hw):.2f})':>16}"
                     f"{statistics.median(r['wall_s'] for r in ok):>9.0f}")
    return "\n".join(lines)


def earlier_rows(path: Path) -> list[dict]:
    """The comparisons of an earlier result file of this script."""
    result = load_result(path)
    if result.bench != "compare_designs" or "rows" not in result.figures:
        sys.exit(f"--also {path}: a result of bench/{result.bench}.py, not of "
                 "bench/compare_designs.py")
    return result.figures["rows"]


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--workload", default="tpcb")
    parser.add_argument("--scale", type=int, default=None,
                        help="pgbench's scale (default 10 for tpcb; other workloads size "
                        "their data with their own options after --)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--designs", default="interleaved,sequential")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds a comparison")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--block", type=int, default=10, help="measured seconds a block")
    parser.add_argument("--block-warmup", type=int, default=2)
    parser.add_argument("--seq-duration", type=int, default=30)
    parser.add_argument("--seq-warmup", type=int, default=5)
    parser.add_argument("--seq-overhead", type=float, default=7.0,
                        help="seconds a sequential run spends starting and stopping")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="the servers' clusters (default /var/tmp/pgdyno-bench/"
                             "compare_designs/work, kept: the dataset is reused)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="the comparisons' runs (default /var/tmp/pgdyno-bench/"
                             "compare_designs/results)")
    parser.add_argument("--also", type=Path, nargs="*", default=[], metavar="FILE",
                        help="earlier result files of this script whose rows join the table")
    parser.add_argument("workload_args", nargs="*", help="more options for every compare "
                        "(after --), e.g. -- --warehouses 4")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    earlier = [row for path in args.also for row in earlier_rows(path)]
    args.workdir = args.workdir or kept_dir("compare_designs") / "work"
    args.results_dir = args.results_dir or kept_dir("compare_designs") / "results"
    writer = ResultWriter("compare_designs", args)
    designs = args.designs.split(",")
    rows: list[dict] = []
    for number in range(1, args.repeats + 1):
        # Designs alternate inside each repeat (and swap order every other), so the
        # machine's slow drift does not favour one design's figures.
        for design in alternate(designs, number - 1):
            rows.append(one(args, design, number))
            writer.write({"rows": rows})
            print(json.dumps({k: rows[-1].get(k) for k in ("design", "wall_s", "change_pct",
                                                           "low_pct", "high_pct", "pairs",
                                                           "stop", "error")}), flush=True)
    print(table([r for r in earlier + rows if r["workload"] == args.workload]))
    writer.finish({"rows": rows})
    return 0


if __name__ == "__main__":
    run(main)
