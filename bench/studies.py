"""Wall time of each example study on this machine, at its default size (or --size quick).

Each study runs as a user runs it, `pgdyno campaign examples/NAME.toml`, in a fresh results
directory, one after another (never two at once: they share the 2 cores). The wall time is
the whole command: server starts, loads, every cell, every comparison and the report. The
machine's other load is recorded beside each figure (the 1-minute load average at the start
and end) because a study's runs are fixed-length but its loads and starts are not.

    python bench/studies.py                                   # all five, default size
    python bench/studies.py --only storage-pgbench,small-instance --size quick

Prints one JSON line per study and writes them all to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
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
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall_s = time.monotonic() - started
    reports = sorted(results.glob("campaigns/*/study/study.md"))
    return {"study": name, "size": size or "default", "wall_s": round(wall_s, 1),
            "wall_min": round(wall_s / 60, 1), "exit": done.returncode,
            "loadavg_start": round(load_before, 2), "loadavg_end": round(os.getloadavg()[0], 2),
            "report": str(reports[0]) if reports else None,
            "stderr_tail": done.stderr.strip().splitlines()[-3:] if done.returncode else []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(STUDIES),
                        help="comma-separated example names (default: all five)")
    parser.add_argument("--size", default=None, help="a [size.NAME] of the files, e.g. quick")
    parser.add_argument("--out", type=Path, default=Path("studies.json"))
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every study's results under this directory")
    args = parser.parse_args()
    rows = []
    for name in args.only.split(","):
        base = args.keep / name if args.keep else Path(tempfile.mkdtemp(prefix="pgdyno-study-"))
        base.mkdir(parents=True, exist_ok=True)
        try:
            row = run_one(name, args.size, base)
        finally:
            if args.keep is None:
                shutil.rmtree(base, ignore_errors=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{'study':<22} {'size':<8} {'wall':>9}  exit", file=sys.stderr)
    for row in rows:
        print(f"{row['study']:<22} {row['size']:<8} {row['wall_min']:>7.1f} m  {row['exit']}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
