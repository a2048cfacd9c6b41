"""How long a run's report takes to rebuild: ``pgdyno report RUN`` timed N times.

Makes one real run first (``pgdyno bench tpcb --scale 1 --clients 2 --duration 3
--warmup 0 --iterations 2``, telemetry on, in a scratch workdir and results directory
under /var/tmp), then rebuilds its report from the raw files N times, each in a process of
its own as a user starts it: wall seconds (median, min, max) and CPU seconds of that
process. One more rebuild inside this process times each PNG written (drawing and saving
together, from one save to the next) and the report's non-plot part.

With ``--against DIR`` (a tree holding another commit's ``src/``), each round rebuilds the
same run with both, in turns (ABBA), so that the machine's speed changes fall on both:
figures for each, and the paired differences.

    python bench/report_speed.py [--reports 7] [--keep]
    mkdir /tmp/old && git archive COMMIT src | tar -x -C /tmp/old
    python bench/report_speed.py --against /tmp/old
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import ResultWriter, alternate, children_cpu_s, new_parser, run, scratch

RUN_ARGS = ["bench", "tpcb", "--scale", "1", "--clients", "2", "--duration", "3",
            "--warmup", "0", "--iterations", "2", "--no-progress"]


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--reports", type=int, default=7,
                        help="rebuilds of the report timed (default 7)")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="another checkout (its src/ first on PYTHONPATH) rebuilt in "
                             "turns with this one")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch directory (to look at the plots)")
    return parser


def make_run(root: Path) -> Path:
    """The measured run's directory, made by a real ``pgdyno bench``."""
    results, workdir = root / "results", root / "work"
    env = {**os.environ, "PGDYNO_WORKDIR": str(workdir)}
    done = subprocess.run([sys.executable, "-m", "pgdyno", *RUN_ARGS, "--results-dir",
                           str(results)], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"report_speed.py: pgdyno bench failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-500:]}")
    return next(results.glob("*/tpcb-*"))


def time_report(run_dir: Path, src: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one ``pgdyno report RUN`` in a new process (``src``: a
    checkout whose sources are run instead of this one's)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src / "src"),
                                             *filter(None, [env.get("PYTHONPATH")])])
    started, cpu_before = time.perf_counter(), children_cpu_s()
    done = subprocess.run([sys.executable, "-m", "pgdyno", "report", str(run_dir)],
                          capture_output=True, text=True, check=False, env=env)
    seconds, cpu_s = time.perf_counter() - started, children_cpu_s() - cpu_before
    if done.returncode != 0:
        raise SystemExit(f"report_speed.py: pgdyno report failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-500:]}")
    return seconds, cpu_s


def per_plot(run_dir: Path) -> tuple[float, list[tuple[str, float]]]:
    """(seconds of one in-process rebuild, [(plot, seconds)]) after a warm-up rebuild (the
    imports and the first figure's fonts are paid once per process, not per plot)."""
    from pgdyno.cli import main

    def rebuild() -> None:
        saved = sys.argv
        sys.argv = ["pgdyno", "report", str(run_dir)]
        try:
            main.run()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise SystemExit(f"report_speed.py: pgdyno report exited {exc.code}") from exc
        finally:
            sys.argv = saved

    rebuild()
    saves: list[tuple[str, float]] = []
    from pgdyno.reports import plots

    original = plots.save_png
    last = time.perf_counter()

    def save_png(fig, path: Path, **savefig):  # noqa: ANN001, ANN202 - matplotlib Figure
        nonlocal last
        out = original(fig, path, **savefig)
        now = time.perf_counter()
        saves.append((str(Path(path).relative_to(run_dir)), now - last))
        last = now
        return out

    plots.save_png = save_png
    started = time.perf_counter()
    try:
        rebuild()
    finally:
        plots.save_png = original
    return time.perf_counter() - started, saves


def _spread(samples: list[tuple[float, float]]) -> dict[str, float]:
    wall = [w for w, _ in samples]
    return {"median_s": statistics.median(wall), "min_s": min(wall), "max_s": max(wall),
            "cpu_median_s": statistics.median(c for _, c in samples)}


def _say(name: str, spread: dict[str, float], reports: int) -> None:
    print(f"{name}: pgdyno report, {reports} rebuilds in new processes: median "
          f"{spread['median_s']:.2f} s, min {spread['min_s']:.2f} s, max "
          f"{spread['max_s']:.2f} s (CPU median {spread['cpu_median_s']:.2f} s)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("report_speed", args)
    sides: dict[str, Path | None] = {"this checkout": None}
    if args.against is not None:
        sides["against"] = args.against
    figures: dict = {}
    with scratch("report-speed", keep=args.keep) as root:
        run_dir = make_run(root)
        print(f"run: {run_dir}")
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for round_no in range(args.reports):
            for name in alternate(list(sides), round_no):
                samples[name].append(time_report(run_dir, sides[name]))
        for name in sides:
            spread = _spread(samples[name])
            _say(name, spread, args.reports)
            figures[name] = {"rebuilds": [{"wall_s": w, "cpu_s": c} for w, c in samples[name]],
                             **spread}
        if args.against is not None:
            diffs = [a[1] - b[1] for a, b in zip(samples["this checkout"], samples["against"],
                                                   strict=True)]
            figures["cpu_difference_median_s"] = statistics.median(diffs)
            print(f"CPU seconds, this checkout minus against, median of the rounds' "
                  f"differences: {statistics.median(diffs):+.2f} s")
        in_process, saves = per_plot(run_dir)
    plots_s = sum(s for _, s in saves)
    for name, seconds in saves:
        print(f"  {seconds:6.3f} s  {name}")
    print(f"in one process (warm, this checkout): {in_process:.2f} s, of which "
          f"{len(saves)} plots {plots_s:.2f} s (the first counts from the rebuild's start)")
    writer.finish({**figures, "in_process_s": in_process,
                   "plots": [{"plot": n, "seconds": s} for n, s in saves], "plots_s": plots_s})
    return 0


if __name__ == "__main__":
    run(main)
