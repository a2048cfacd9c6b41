"""How long pgdyno takes to start: wall seconds of ``pgdyno --help``, ``pgdyno runs`` (on an
empty results directory) and ``pgdyno --version``, each started N times as a new process;
wall seconds, and CPU seconds (user + system, which a shared machine's speed changes disturb
far less).

Every test, fleet host and SSH target that starts pgdyno pays this before any work. One
version at a time (the checkout's, or another commit's source with ``--src``); rounds
go through the commands in turn, and the figures are medians with their spread. Two ways
of running Python, both measured: as the environment says (``PYTHONDONTWRITEBYTECODE``
set means every start compiles pgdyno's sources anew), and with bytecode cached (in a
scratch ``PYTHONPYCACHEPREFIX``, so the checkout gets no ``__pycache__``).

    python bench/startup.py [--starts 25]
    mkdir /tmp/old && git archive COMMIT src | tar -x -C /tmp/old
    python bench/startup.py --src /tmp/old --src-commit COMMIT
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import ROOT, ResultWriter, children_cpu_s, new_parser, run, scratch

COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "runs": ["runs", "--results-dir", "{results}"],
    "--version": ["--version"],
}


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--starts", type=int, default=25,
                        help="starts of each command in each mode (default 25)")
    parser.add_argument("--src", type=Path, default=None,
                        help="a checkout of another commit whose src/ is measured instead "
                             "of this checkout's (put first on PYTHONPATH)")
    parser.add_argument("--src-commit", default=None,
                        help="the commit --src holds, for the record (default: its git HEAD)")
    return parser


def _environments(src: Path | None, pycache: Path) -> dict[str, dict[str, str]]:
    """The measured process's environment in each mode."""
    base = dict(os.environ)
    if src is not None:
        base["PYTHONPATH"] = os.pathsep.join(
            [str(src / "src"), *filter(None, [base.get("PYTHONPATH")])])
    cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(pycache)
    return {"as-environment": base, "bytecode-cached": cached}


def _start_s(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one start of ``python -m pgdyno ARGV``, to its exit."""
    started, cpu_before = time.perf_counter(), children_cpu_s()
    done = subprocess.run([sys.executable, "-m", "pgdyno", *argv], env=env,
                          capture_output=True, text=True, check=False)
    seconds, cpu_s = time.perf_counter() - started, children_cpu_s() - cpu_before
    if done.returncode != 0:
        raise SystemExit(f"startup.py: pgdyno {' '.join(argv)} failed "
                         f"(exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return seconds, cpu_s


def _spread(samples: list[tuple[float, float]]) -> dict[str, float]:
    wall = [w for w, _ in samples]
    quartiles = statistics.quantiles(wall, n=4)
    return {"median_s": statistics.median(wall), "min_s": min(wall), "max_s": max(wall),
            "q1_s": quartiles[0], "q3_s": quartiles[2],
            "cpu_median_s": statistics.median(c for _, c in samples), "starts": len(wall)}


def _commit(src: Path | None, named: str | None) -> str:
    if named:
        return named
    done = subprocess.run(["git", "-C", str(src or ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("startup", args)
    modes: dict[str, dict[str, dict[str, float]]] = {}
    figures = {"measured_commit": _commit(args.src, args.src_commit), "modes": modes}
    with scratch("startup") as tmp:
        results = tmp / "results"
        results.mkdir()
        for mode, env in _environments(args.src, tmp / "pycache").items():
            commands = {name: [w.format(results=results) for w in words]
                        for name, words in COMMANDS.items()}
            _start_s(commands["runs"], env)  # untimed: fills the bytecode cache, if any
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for _ in range(args.starts):
                for name, words in commands.items():
                    samples[name].append(_start_s(words, env))
            modes[mode] = {name: _spread(s) for name, s in samples.items()}
            for name, s in samples.items():
                spread = _spread(s)
                print(f"{mode:16} pgdyno {name:10} median {spread['median_s']:.3f} s "
                      f"(quartiles {spread['q1_s']:.3f}-{spread['q3_s']:.3f}, "
                      f"min {spread['min_s']:.3f}, max {spread['max_s']:.3f}; "
                      f"CPU median {spread['cpu_median_s']:.3f} s; {len(s)} starts)")
            writer.write(figures)
    writer.finish(figures)
    return 0


if __name__ == "__main__":
    run(main)
