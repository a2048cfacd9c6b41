"""Wall time of each example study on this machine, at its default size (or --size quick).

Each study runs as a user runs it, `pgdyno campaign examples/NAME.toml`, in a fresh results
directory, one after another (never two at once: they share the 2 cores). The wall time is
the whole command: server starts, loads, every cell, every comparison and the report. The
machine's other load is recorded beside each figure (the 1-minute load average at the start
and end) because a study's runs are fixed-length but its loads and starts are not.

    python bench/studies.py                                   # all five, default size
    python bench/studies.py --only storage-pgbench,small-instance --size quick

Prints one JSON line per study and writes them all to the result file (--output), each
study's results in a scratch directory under /var/tmp removed after it (or under --keep).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from harness import ROOT, ResultWriter, Stopwatch, new_parser, run, scratch

EXAMPLES = ROOT / "examples"
STUDIES = ["drive-qualification", "storage-pgbench", "instance-report", "wal-archiving",
           "small-instance"]


def run_one(name: str, size: str | None, results: Path) -> dict:
    """Run one example study as a user would; its wall time, exit code and report path."""
    command = [sys.executable, "-m", "pgdyno", "campaign", str(EXAMPLES / f"{name}.toml"),
               "--results-dir", str(results), "--no-progress"]
    if size:
        command += ["--size", size]
    # Its own workdir: a server of another pgdyno on the default workdir must not refuse it.
    env = {**os.environ, "PGDYNO_WORKDIR": str(results / "workdir")}
    load_before = os.getloadavg()[0]
    with Stopwatch() as watch:
        done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall_s = watch.seconds
    reports = sorted(results.glob("campaigns/*/study/study.md"))
    return {"study": name, "size": size or "default", "wall_s": round(wall_s, 1),
            "wall_min": round(wall_s / 60, 1), "exit": done.returncode,
            "loadavg_start": round(load_before, 2), "loadavg_end": round(os.getloadavg()[0], 2),
            "report": str(reports[0]) if reports else None,
            "stderr_tail": done.stderr.strip().splitlines()[-3:] if done.returncode else []}


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--out")
    parser.add_argument("--only", default=",".join(STUDIES),
                        help="comma-separated example names (default: all five)")
    parser.add_argument("--size", default=None, help="a [size.NAME] of the files, e.g. quick")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every study's results under this directory")
    return parser


def study_dir(name: str, keep: Path | None) -> contextlib.AbstractContextManager[Path]:
    """Where a study's results go: under --keep, or a scratch directory removed after."""
    if keep is None:
        return scratch(f"study-{name}")
    (keep / name).mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(keep / name)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("studies", args)
    rows = []
    for name in args.only.split(","):
        with study_dir(name, args.keep) as base:
            rows.append(run_one(name, args.size, base))
        print(json.dumps(rows[-1]), flush=True)
        writer.write({"studies": rows})
    print(f"{'study':<22} {'size':<8} {'wall':>9}  exit", file=sys.stderr)
    for row in rows:
        print(f"{row['study']:<22} {row['size']:<8} {row['wall_min']:>7.1f} m  {row['exit']}",
              file=sys.stderr)
    writer.finish({"studies": rows})
    return 0


if __name__ == "__main__":
    run(main)
