"""What one WAL segment costs each archive method, and what starting an interpreter costs.

PostgreSQL runs archive_command once per 16 MB segment, so the command's start-up is paid
per segment. This measures, per segment (median and p90 of N runs, wall clock, in ms):

- ``bash -c :`` and ``python3 -c pass`` (``-S`` too): the start of a shell and of a Python
  interpreter, doing nothing;
- ``python3 copy``: a Python archive command doing the same as pgdyno's buffered method
  (copy, fsync, rename);
- pgdyno's archive command (pgdyno.targets.archive), ``buffered`` and ``direct``, copying a
  16 MB segment from a warm page cache into an empty archive directory (each run's copy is
  removed before the next, outside the timing).

    .venv/bin/python bench/archive_cost.py [--segments 20] [--dir /var/tmp] [--output FILE]

Run it on a quiet machine: the copies are fsynced, so the figures include the device. The
segment and the archive live in a scratch directory under --dir, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness import ResultWriter, Stopwatch, new_parser, run, scratch

from pgdyno.targets.archive import LOG_NAME, SCRIPT, SCRIPT_NAME

SEGMENT_BYTES = 16 * 2**20
PY_COPY = ("import os,shutil,sys; s,d=sys.argv[1],sys.argv[2]; t=d+'.tmp'; "
           "shutil.copyfile(s,t); f=os.open(t,os.O_RDONLY); os.fsync(f); os.close(f); "
           "os.rename(t,d)")


def timed(cmd: list[str], cleanup: list[Path], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        for path in cleanup:
            path.unlink(missing_ok=True)
        with Stopwatch() as watch:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        out.append(watch.seconds * 1000)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--json")
    parser.add_argument("--segments", type=int, default=20, help="runs of each case")
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp"),
                        help="where the segment and the archive are written")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("archive_cost", args)
    with scratch("archive-cost", args.dir) as root:
        src = root / "000000010000000000000001"
        src.write_bytes(os.urandom(SEGMENT_BYTES))
        archive = root / "archive"
        archive.mkdir()
        script = archive / SCRIPT_NAME
        script.write_text(SCRIPT)
        script.chmod(0o755)
        dest = archive / src.name
        log = archive / LOG_NAME
        n = args.segments
        cases = {
            "bash -c : (shell start)": timed(["bash", "-c", ":"], [], n),
            "python3 -c pass (interpreter start)": timed([sys.executable, "-c", "pass"], [], n),
            "python3 -S -c pass": timed([sys.executable, "-S", "-c", "pass"], [], n),
            "python3 copy+fsync+rename": timed(
                [sys.executable, "-S", "-c", PY_COPY, str(src), str(dest)], [dest], n),
        }
        for method in ("buffered", "direct"):
            cases[f"pgdyno {method}"] = timed(
                [str(script), method, str(src), src.name, str(archive), str(log)], [dest], n)
        rows = {name: {"median_ms": statistics.median(v),
                       "p90_ms": sorted(v)[max(0, int(0.9 * len(v)) - 1)],
                       "runs": len(v)} for name, v in cases.items()}
        width = max(map(len, rows))
        print(f"{'per 16 MB segment':<{width}}  {'median ms':>10}  {'p90 ms':>8}")
        for name, r in rows.items():
            print(f"{name:<{width}}  {r['median_ms']:>10.1f}  {r['p90_ms']:>8.1f}")
    writer.finish({"segment_bytes": SEGMENT_BYTES, "cases": rows})
    return 0


if __name__ == "__main__":
    run(main)
