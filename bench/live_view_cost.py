"""What the live view (runner.live) costs: CPU time of the pgdyno process with and without it.

Alternating pairs of the same short run (``pgdyno bench select-only``, one iteration), one
with the live view (PGDYNO_LIVE_LOG=1: the model follows the run's files once a second and
writes each line to live.log; --no-progress, so no terminal rendering: the bars' own
refresh already redraws ten times a second, and the line adds one text to it) and one
without (--no-progress alone: no live view at all). Each run's pgdyno process reports its
own CPU time (user + system, all its threads; pgbench and the server are other processes
and not counted). Prints each pair's CPU seconds, their difference, and the view's thread
time as live.log records it, then the medians. Goal: the difference lost in the noise; the
thread's own time under 0.5% of a core.

    python bench/live_view_cost.py [--pairs 5] [--seconds 20] [--clients 4] [--scale 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import ResultWriter, alternate, new_parser, run, scratch

from pgdyno.runner.live import LIVE_LOG_ENV, LIVE_LOG_NAME

# Runs pgdyno's CLI in a process of its own and writes that process's CPU time to argv[1].
MEASURED = """
import json, resource, sys
from pgdyno.cli import main
out, sys.argv = sys.argv[1], ["pgdyno", *sys.argv[2:]]
code = 0
try:
    main.run()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 0
usage = resource.getrusage(resource.RUSAGE_SELF)
with open(out, "w") as fh:
    json.dump({"cpu_s": usage.ru_utime + usage.ru_stime, "code": code}, fh)
"""
COST = re.compile(r"^# live view: ([\d.]+) s of CPU in (\d+) looks$", re.MULTILINE)


def one_run(root: Path, workdir: Path, live: bool, args: argparse.Namespace
            ) -> tuple[float, float | None]:
    """(CPU seconds of the pgdyno process, CPU seconds of the live view's thread)."""
    results = Path(tempfile.mkdtemp(dir=root))
    usage = results / "usage.json"
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
    env.pop(LIVE_LOG_ENV, None)
    if live:
        env[LIVE_LOG_ENV] = "1"
    subprocess.run([sys.executable, "-c", MEASURED, str(usage), "bench", "select-only",
                    "--clients", str(args.clients), "--scale", str(args.scale), "--warmup",
                    "0", "--duration", str(args.seconds), "--iterations", "1",
                    "--no-progress", "--results-dir", str(results)],
                   env=env, check=True, capture_output=True)
    measured = json.loads(usage.read_text())
    if measured["code"] != 0:
        raise RuntimeError(f"pgdyno exited with {measured['code']}")
    view = None
    for log in results.rglob(LIVE_LOG_NAME):
        found = COST.search(log.read_text())
        view = float(found.group(1)) if found else None
    return measured["cpu_s"], view


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--scale", type=int, default=10)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("live_view_cost", args)
    pairs = []
    with scratch("live-view-cost") as root:
        workdir = root / "work"
        one_run(root, workdir, False, args)  # the dataset built once, outside the pairs
        diffs, views = [], []
        print("pair  with view (s CPU)  without (s CPU)  difference  view thread (s CPU)")
        for pair in range(args.pairs):
            cpu, view = {}, None
            for live in alternate((True, False), pair):
                cpu[live], seen = one_run(root, workdir, live, args)
                if live and seen is not None:
                    view = seen
                    views.append(seen)
            diffs.append(cpu[True] - cpu[False])
            pairs.append({"pair": pair + 1, "with_view_cpu_s": cpu[True],
                          "without_cpu_s": cpu[False], "view_thread_cpu_s": view})
            writer.write({"pairs": pairs})
            print(f"{pair + 1:>4}  {cpu[True]:>17.3f}  {cpu[False]:>15.3f}  "
                  f"{diffs[-1]:>10.3f}  {views[-1] if views else float('nan'):>19.3f}")
    view_share = 100 * statistics.median(views) / args.seconds if views else None
    print(f"median difference {statistics.median(diffs):.3f} s CPU over "
          f"{args.seconds} s runs; the view's thread: "
          f"{'–' if view_share is None else f'{view_share:.2f}'}% of a core")
    writer.finish({"pairs": pairs, "median_difference_cpu_s": statistics.median(diffs),
                   "view_thread_pct_of_a_core": view_share})
    return 0


if __name__ == "__main__":
    run(main)
