"""Do short trials measure the config, or the filling of a cold buffer cache?

A search trial restarts the server with the trial's settings, so each short window starts
with empty shared_buffers. This runs the same short window (`pgdyno bench`, one iteration)
for each config with `--cache warm` (as the search's trials run) and `--cache prewarmed`
(the dataset read into shared_buffers with pg_prewarm first), interleaved in rounds whose
order alternates (A B C D, D C B A, ...), so the machine's drift spreads over every
condition. Per condition it prints every run's headline, the median and best-of-N, and per
config the prewarmed median over the warm one. If the short-window ranking of small against
large shared_buffers comes from the cold start, the large config gains most from
prewarming.

    python bench/cold_trials.py --results-dir /var/tmp/cold \\
        --workload tpcb --scale 50 --clients 8 --configs default,pgtune --rounds 2

The dataset is built (or reused) by the first run in pgdyno's default workdir; the runs
are kept under --results-dir (default /var/tmp/pgdyno-bench/cold_trials).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, alternate, kept_dir, new_parser, run

MODES = ("warm", "prewarmed")


def one_run(args: argparse.Namespace, config: str, cache: str) -> float:
    results = args.results_dir
    before = set(results.glob("*/*/summary.json"))
    cmd = [sys.executable, "-m", "pgdyno", "bench", args.workload, *args.workload_args,
           "--clients", str(args.clients), "--duration", str(args.duration), "--warmup",
           str(args.warmup), "--iterations", "1", "--config", config, "--cache", cache,
           "--results-dir", str(results), "--context", "cold-trials", "--no-progress"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    (summary,) = set(results.glob("*/*/summary.json")) - before
    data = json.loads(summary.read_text())
    (it,) = data["iterations"]
    return float(it["metrics"]["nopm" if args.workload == "tprocc" else "tps"])


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="where the runs are kept (default /var/tmp/pgdyno-bench/"
                             "cold_trials)")
    parser.add_argument("--workload", default="tpcb")
    parser.add_argument("--scale", default="50", help="tpcb: --scale; tprocc: --warehouses")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--configs", default="default,pgtune")
    parser.add_argument("--rounds", type=int, default=2)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.results_dir = args.results_dir or kept_dir("cold_trials")
    writer = ResultWriter("cold_trials", args)
    args.workload_args = (["--warehouses", args.scale] if args.workload == "tprocc"
                          else ["--scale", args.scale])
    conditions = list(itertools.product(args.configs.split(","), MODES))
    values: dict[tuple[str, str], list[float]] = {c: [] for c in conditions}
    runs = []
    for r in range(args.rounds):
        for config, cache in alternate(conditions, r):
            value = one_run(args, config, cache)
            values[(config, cache)].append(value)
            runs.append({"round": r + 1, "config": config, "cache": cache,
                         "value": round(value, 1)})
            print(json.dumps(runs[-1]), flush=True)
            writer.write({"runs": runs})
    print(f"\n{'config':<10} {'cache':<10} {'median':>10} {'best':>10}  runs")
    for (config, cache), vs in values.items():
        print(f"{config:<10} {cache:<10} {statistics.median(vs):>10,.0f} {max(vs):>10,.0f}  "
              + ", ".join(f"{v:,.0f}" for v in vs))
    ratios = {}
    for config in args.configs.split(","):
        warm, pre = (statistics.median(values[(config, m)]) for m in MODES)
        ratios[config] = pre / warm
        print(f"{config}: prewarmed / warm = {pre / warm:.3f}")
    writer.finish({"runs": runs, "prewarmed_over_warm_median": ratios})
    return 0


if __name__ == "__main__":
    run(main)
