"""The goal of issue 18, measured: does `pgdyno tune --search` beat pgtune by >= 10% and
tuned by >= 5%, with a significant verdict, within 30 trials?

Two searches, each ending with its interleaved comparison against pgtune and tuned:

1. pgbench TPC-B (write-heavy) with data larger than the default shared_buffers
   (128 MB): scale 50 is about 785 MB.
2. TPROC-C (write-heavy OLTP).

Run it on a quiet machine (every trial is a real run; the whole script takes about two
hours at the defaults):

    .venv/bin/python bench/search_goal.py --results-dir results-goal

and, to check that it works at all (minutes):

    .venv/bin/python bench/search_goal.py --quick --results-dir /var/tmp/goal-quick

It prints each search's convergence table (trial, config, value, best so far) and the
final comparison's verdicts, read back from the search directories.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SEARCHES = {
    # name: (workload and its options, quick variant)
    "tpcb": (["tpcb", "--scale", "50", "--clients", "8"],
             ["tpcb", "--scale", "1", "--clients", "2"]),
    "tprocc": (["tprocc", "--warehouses", "4", "--vus", "8"],
               ["tprocc", "--warehouses", "1", "--vus", "2"]),
}


def run(name: str, args: argparse.Namespace) -> Path:
    full, quick = SEARCHES[name]
    workload = quick if args.quick else full
    timing = (["--duration", "3", "--warmup", "1", "--budget", "4", "--top", "2",
               "--reruns", "1", "--compare-pairs", "2", "--compare-max-pairs", "2"]
              if args.quick else
              ["--duration", str(args.duration), "--warmup", str(args.warmup),
               "--budget", str(args.budget), "--compare-pairs", "4"])
    cmd = [sys.executable, "-m", "pgdyno", "tune", "--search", *workload, *timing,
           "--search-name", f"goal-{name}{'-quick' if args.quick else ''}",
           "--results-dir", str(args.results_dir)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return args.results_dir / "searches" / f"goal-{name}{'-quick' if args.quick else ''}"


def convergence_table(search_dir: Path) -> list[str]:
    """The trials as the report holds them: read from the report's Markdown table."""
    lines = (search_dir / "report.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Trial |"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(" | ".join(cell.strip() for cell in line.strip("|").split("|")[:5]))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=Path("results-goal"))
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="tiny data, 4 trials: a check")
    parser.add_argument("--only", choices=sorted(SEARCHES))
    args = parser.parse_args()
    for name in [args.only] if args.only else list(SEARCHES):
        search_dir = run(name, args)
        print(f"\n== {name}: convergence ==")
        print("\n".join(convergence_table(search_dir)))
        conf = json.loads((search_dir / "confirm.json").read_text()) \
            if (search_dir / "confirm.json").exists() else {}
        print(f"\n== {name}: final comparison ==")
        for v in conf.get("verdicts", []):
            goal = 10.0 if v["baseline"] == "pgtune" else 5.0
            met = v["verdict"] == "faster" and v["ci_low_pct"] > 0 and v["change_pct"] >= goal
            print(f"vs {v['baseline']}: change {v['change_pct']:+.1f}% (interval "
                  f"{v['ci_low_pct']:+.1f}% to {v['ci_high_pct']:+.1f}%), {v['verdict']}; "
                  f"goal >= {goal:.0f}%: {'met' if met else 'not met'}")
        print(conf.get("recommendation", ""))


if __name__ == "__main__":
    main()
