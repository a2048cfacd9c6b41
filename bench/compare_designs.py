"""A/A comparisons under each design of `pgdyno compare`, given the same wall time: how often
the 95% interval covers 0 (it should, about 19 times in 20) and how wide it is.

Each comparison runs one config on both sides (`--baseline default --candidate default`), so
the true change is 0: an interval that misses 0 is a false difference, and its half-width
is the precision the design reaches in that time on this machine.

- interleaved / duet: `--design D --budget BUDGET` (blocks of --block measured seconds
  after --block-warmup seconds);
- sequential: whole runs A B B A ... of --seq-duration s after --seq-warmup s, as many
  pairs as fit in the same budget (at least 2).

Every comparison's figures are appended as one JSON line to --out (default
bench/results/compare_designs.jsonl); the table at the end is recomputed from that file.

Usage:
    python bench/compare_designs.py --workload tpcb --scale 10 --clients 4 \\
        --designs interleaved,sequential --budget 600 --repeats 1
    python bench/compare_designs.py --designs interleaved --budget 120 --repeats 12
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compare_args(args: argparse.Namespace, design: str, out: Path) -> list[str]:
    common = [sys.executable, "-m", "pgdyno", "compare", args.workload,
              "--baseline", "default", "--candidate", "default", "--clients",
              str(args.clients), "--design", design, "--no-progress",
              "--results-dir", str(args.results_dir), "--workdir", str(args.workdir),
              "--out", str(out), *args.workload_args]
    if args.scale is not None:
        common += ["--scale", str(args.scale)]
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
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - started
    row = {"design": design, "workload": args.workload, "budget_s": args.budget,
           "wall_s": round(wall, 1), "returncode": done.returncode,
           "command": " ".join(cmd[2:]), "started_at": stamp, "host": platform.node()}
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="tpcb")
    parser.add_argument("--scale", type=int, default=10)
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
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp/pgdyno-bench-work"))
    parser.add_argument("--results-dir", type=Path,
                        default=Path("/var/tmp/pgdyno-bench-results"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/compare_designs.jsonl")
    parser.add_argument("workload_args", nargs="*", help="more options for every compare "
                        "(after --), e.g. -- --warehouses 4")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    designs = args.designs.split(",")
    for number in range(1, args.repeats + 1):
        # Designs alternate inside each repeat (and swap order every other), so the
        # machine's slow drift does not favour one design's figures.
        order = designs if number % 2 else designs[::-1]
        for design in order:
            row = one(args, design, number)
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps({k: row.get(k) for k in ("design", "wall_s", "change_pct",
                                                      "low_pct", "high_pct", "pairs",
                                                      "stop", "error")}), flush=True)
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    print(table([r for r in rows if r["workload"] == args.workload]))


if __name__ == "__main__":
    main()
