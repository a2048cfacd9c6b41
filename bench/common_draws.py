"""What common random numbers take out of a block comparison: one A/A comparison (one config
on both sides, so the true change is 0) per pgdyno source tree given, each in interleaved
blocks, and the spread of the pairs' log ratios read straight from its blocks.json.

Give a tree from before the block designs seeded both sides alike and one from after (two
`git worktree`s), and the workload where the draws matter most: TPROC-C under compliant
keying and think times, whose New-Orders in a window are set by the terminals' random
waits and transaction choices rather than by the server.

Usage:
    git worktree add /var/tmp/before d15bb0e --detach
    git worktree add /var/tmp/after HEAD --detach
    python bench/common_draws.py --src /var/tmp/before/src --src /var/tmp/after/src \\
        --pairs 14 --block 15 --block-warmup 1 -- --warehouses 2 --keying-thinking \\
        --time-scale 0.2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, kept_dir, new_parser, run


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--src", type=Path, action="append", required=True,
                        help="a pgdyno source tree (its src/ directory); repeat for each")
    parser.add_argument("--workload", default="tprocc")
    parser.add_argument("--pairs", type=int, default=14)
    parser.add_argument("--block", type=int, default=15, help="measured seconds of a block")
    parser.add_argument("--block-warmup", type=int, default=1)
    parser.add_argument("--order-seed", type=int, default=11,
                        help="the same block order for every tree")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--results-dir", type=Path, default=None)
    parser.add_argument("workload_args", nargs="*", help="after --: the workload's options")
    return parser


def _spread(blocks: dict) -> dict:
    """The pairs' ln(B/A) from the record's blocks: their count, mean and spread (%)."""
    by_pair: dict[int, dict[str, float]] = {}
    for b in blocks["blocks"]:
        if not b.get("pilot") and not b.get("check") and b.get("headline"):
            by_pair.setdefault(b["pair"], {})[b["side"]] = b["headline"]
    logs = [math.log(p["B"] / p["A"]) for p in by_pair.values() if {"A", "B"} <= set(p)]
    return {"pairs": len(logs), "mean_log_ratio": statistics.fmean(logs) if logs else None,
            "pair_spread_pct": 100 * math.expm1(statistics.stdev(logs))
            if len(logs) > 1 else None}


def _compare(args: argparse.Namespace, src: Path, out: Path) -> dict:
    cmd = [sys.executable, "-m", "pgdyno", "compare", args.workload, "--baseline", "default",
           "--candidate", "default", "--design", "interleaved", "--pairs", str(args.pairs),
           "--duration", str(args.block), "--warmup", str(args.block_warmup),
           "--order-seed", str(args.order_seed), "--no-progress", "--results-dir",
           str(args.results_dir), "--workdir", str(args.workdir), "--out", str(out),
           *args.workload_args]
    env = {**os.environ, "PYTHONPATH": str(src.absolute())}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"src": str(src), "error": done.stderr.strip()[-500:]}
    cmp = json.loads((out / "compare.json").read_text())
    blocks = cmp["design"]["blocks"]
    head = next(m for m in cmp["metrics"] if m["metric"] == blocks["headline_metric"])
    return {"src": str(src), "change_pct": head["change_pct"], "low_pct": head["ci_low_pct"],
            "high_pct": head["ci_high_pct"], **_spread(blocks)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.workdir = args.workdir or kept_dir("common_draws") / "wd"
    args.results_dir = args.results_dir or kept_dir("common_draws") / "results"
    writer = ResultWriter("common_draws", args)
    rows = []
    for number, src in enumerate(args.src, start=1):
        rows.append(_compare(args, src, args.results_dir / f"aa-{number}"))
        print(json.dumps(rows[-1]), flush=True)
        writer.write({"rows": rows})
    print(f"{'tree':<40} {'pairs':>5} {'spread %':>9} {'change %':>9} {'interval %':>20}")
    for row in rows:
        if "error" in row:
            print(f"{row['src']:<40} failed: {row['error']}")
            continue
        print(f"{row['src']:<40} {row['pairs']:>5} {row['pair_spread_pct']:>9.1f} "
              f"{row['change_pct']:>+9.1f} {row['low_pct']:>+9.1f} to {row['high_pct']:>+7.1f}")
    writer.finish({"rows": rows})
    return 0


if __name__ == "__main__":
    run(main)
