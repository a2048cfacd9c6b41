"""A difference known beforehand, found again by the short block comparisons: the right
sign, and an interval that covers the value an independent long measurement gives.

Two oracles (``--oracle``):

- ``mixed`` (the default): the candidate's transaction does a known amount more work, and
  the oracle measures what that costs in one long run in which both transactions are drawn
  at random, one after another, on one server. Each side's transaction sums a series of
  ``pgdyno.work`` integers (a server setting: ``--work BASE,CANDIDATE``); the oracle run
  (``pgdyno bench custom`` with both scripts at equal weight, ``--oracle-duration`` s)
  sets the count in each transaction. Both kinds of transaction share every second of the
  machine, so its changes of speed fall on both alike: the per-second ratio of their mean
  latencies is the throughput ratio at one client (a client's throughput is one over its
  latency), with a t-interval over the seconds. The compared sides run the same
  statement with their own setting, at one client.
- ``sequential``: the candidate differs by one setting (``--setting``, by default
  ``log_min_duration_statement=0``: a log line for every statement), and the oracle is a
  long comparison in whole runs (``--long-pairs`` pairs of ``--long-duration`` s each side).
  On a host whose speed changes between runs its interval is wide (±50% on this project's
  VM): kept to show why the mixed oracle exists.

Then ``--repeats`` short block comparisons (``--design``, ``--budget`` of measuring each)
of the same two sides each report a change and an interval: how many found the difference
with its sign (the interval excludes 0 on the oracle's side), and how many intervals cover
the oracle's value.

Every comparison's figures are a row of the result file (--output, default under
bench/results/). The servers' clusters and the runs are kept under
/var/tmp/pgdyno-bench/known_difference (--workdir, --results-dir).

Usage:
    python bench/known_difference.py --work 20000,21000 --oracle-duration 300 \\
        --design alternating --budget 120 --block 28 --block-warmup 1 --repeats 5
    python bench/known_difference.py --oracle sequential --workload tpcb --scale 10 \\
        --clients 4 --long-pairs 3 --long-duration 120 --design interleaved --budget 120
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from harness import ROOT, ResultWriter, Stopwatch, kept_dir, new_parser, ratio_interval, run

from pgdyno.analysis.per_second import read_seconds

WORK_SQL = ("SELECT sum(i) FROM generate_series(1, current_setting('pgdyno.work')::int) "
            "AS i;\n")
"""The compared sides' transaction: the count comes from the server's setting."""
ORACLE_SQL = ("SELECT sum(i) FROM generate_series(1, set_config('pgdyno.work', '{n}', "
              "false)::int) AS i;\n")
"""The oracle's transactions: the same plan, with the count set in the statement itself,
so that both kinds run on one server in one session."""


def _sides(args: argparse.Namespace) -> list[str]:
    """The workload and the two sides' settings of every comparison."""
    if args.oracle == "mixed":
        script = args.workdir.parent / "work.sql"
        script.write_text(WORK_SQL)
        base, cand = args.work
        return ["custom", "--script", str(script), "--scale", "1",
                "--baseline-set", f"pgdyno.work={base}",
                "--candidate-set", f"pgdyno.work={cand}"]
    sides = [args.workload, "--candidate-set", args.setting]
    return sides + (["--scale", str(args.scale)] if args.scale is not None else [])


def _timed_pgdyno(args: list[str]) -> tuple[dict, bool]:
    """Run `python -m pgdyno ARGS` from the checkout: the row every result starts from
    (command, wall time, exit code, the last line of stderr on failure) and whether it
    succeeded."""
    cmd = [sys.executable, "-m", "pgdyno", *args]
    with Stopwatch() as watch:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    row = {"command": " ".join(cmd[2:]), "wall_s": round(watch.seconds, 1),
           "returncode": done.returncode}
    if done.returncode != 0:
        row["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
    return row, done.returncode == 0


def _compare(args: argparse.Namespace, out: Path, design: list[str]) -> dict:
    """One `pgdyno compare` of the two sides: its headline row (change, interval,
    method) and its wall time."""
    row, ok = _timed_pgdyno(
        ["compare", *_sides(args), "--baseline", "default", "--candidate", "default",
         "--clients", str(args.clients), "--no-progress", "--results-dir",
         str(args.results_dir), "--workdir", str(args.workdir), "--out", str(out), *design])
    if not ok:
        return row
    cmp = json.loads((out / "compare.json").read_text())
    head = next(m for m in cmp["metrics"] if m["metric"] == cmp["headline_metric"])
    row.update(change_pct=head["change_pct"], low_pct=head["ci_low_pct"],
               high_pct=head["ci_high_pct"], method=head["method"],
               pairs=(cmp.get("design") or {}).get("pairs") or head["baseline_n"],
               compare_dir=str(out))
    return row


def latency_ratios(seconds_csv: Path) -> list[float]:
    """Each second's mean latency of script 0 over script 1's (seconds where both ran):
    the candidate's throughput over the baseline's at one client, second by second."""
    rows = read_seconds(seconds_csv)
    ratios = []
    for second in sorted({s for s, _ in rows}):
        a, b = rows.get((second, 0)), rows.get((second, 1))
        if a is not None and b is not None and a.ok and b.ok:
            ratios.append((a.latency_sum_us / a.ok) / (b.latency_sum_us / b.ok))
    return ratios


def _mixed_oracle(args: argparse.Namespace, out: Path) -> dict:
    """The long run with both transactions drawn at random, and the change it implies."""
    out.mkdir(parents=True, exist_ok=True)
    scripts = []
    for name, n in zip(("baseline", "candidate"), args.work, strict=True):
        path = out / f"{name}.sql"
        path.write_text(ORACLE_SQL.format(n=n))
        scripts += ["--script", f"{path}@1"]
    before = set(args.results_dir.glob("*/*/summary.json"))
    row, ok = _timed_pgdyno(
        ["bench", "custom", *scripts, "--scale", "1", "--clients", "1", "--duration",
         str(args.oracle_duration), "--warmup", str(args.long_warmup), "--iterations", "1",
         "--results-dir", str(args.results_dir), "--workdir", str(args.workdir),
         "--context", "known-difference-oracle", "--no-progress"])
    if not ok:
        return row
    (summary,) = set(args.results_dir.glob("*/*/summary.json")) - before
    seconds_csv = summary.parent / "raw" / "pgbench" / "c1-i1" / "seconds.csv"
    ratios = latency_ratios(seconds_csv)
    mean, low, high = ratio_interval(ratios)
    row.update(change_pct=100 * (mean - 1), low_pct=100 * (low - 1), high_pct=100 * (high - 1),
               method="one mixed run: per-second latency ratio, t-interval", seconds=len(ratios),
               run_dir=str(summary.parent))
    return row


def _judge(row: dict, oracle: dict) -> None:
    """Whether a short comparison found the oracle's difference: its sign, its value."""
    value = oracle["change_pct"]
    low, high = row["low_pct"], row["high_pct"]
    row["right_sign"] = (low > 0) if value > 0 else (high < 0)
    row["covers_oracle"] = low <= value <= high


def _work_pair(text: str) -> tuple[int, int]:
    base, cand = (int(n) for n in text.split(","))
    return base, cand


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("--oracle", choices=("mixed", "sequential"), default="mixed")
    parser.add_argument("--work", type=_work_pair, default=(20000, 21000),
                        help="mixed: integers summed by a baseline,candidate transaction")
    parser.add_argument("--oracle-duration", type=int, default=300,
                        help="mixed: seconds of the oracle's run")
    parser.add_argument("--workload", default="tpcb", help="sequential: the workload")
    parser.add_argument("--scale", type=int, default=10, help="sequential: its scale")
    parser.add_argument("--clients", type=int, default=None,
                        help="clients of the comparisons (mixed: 1, sequential: 4)")
    parser.add_argument("--setting", default="log_min_duration_statement=0",
                        help="sequential: the candidate's one setting (its known cost)")
    parser.add_argument("--long-pairs", type=int, default=3)
    parser.add_argument("--long-duration", type=int, default=120)
    parser.add_argument("--long-warmup", type=int, default=10)
    parser.add_argument("--design", default="alternating")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds a comparison")
    parser.add_argument("--block", type=int, default=28, help="measured seconds a block")
    parser.add_argument("--block-warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="the servers' clusters (default: under /var/tmp/pgdyno-bench)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="the comparisons' runs (default: under /var/tmp/pgdyno-bench)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.clients is None:
        args.clients = 1 if args.oracle == "mixed" else 4
    home = kept_dir("known_difference")
    args.workdir = args.workdir or home / "work"
    args.results_dir = args.results_dir or home / "results"
    for path in (args.workdir, args.results_dir):
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o755)  # the server's user works in it
    writer = ResultWriter("known_difference", args)
    out = args.results_dir / "bench-known-difference"
    if args.oracle == "mixed":
        oracle = _mixed_oracle(args, out / "oracle")
    else:
        oracle = _compare(args, out / "long", [
            "--design", "sequential", "--pairs", str(args.long_pairs), "--iterations", "1",
            "--duration", str(args.long_duration), "--warmup", str(args.long_warmup)])
    print(json.dumps({"oracle": oracle}), flush=True)
    rows: list[dict] = []
    writer.write({"oracle": oracle, "rows": rows})
    if "change_pct" not in oracle:
        sys.exit(f"the oracle's measurement failed: {oracle.get('error')}")
    for number in range(1, args.repeats + 1):
        row = _compare(args, out / f"short-{number}", [
            "--design", args.design, "--budget", f"{args.budget:g}s", "--pairs", "4",
            "--duration", str(args.block), "--warmup", str(args.block_warmup)])
        if "change_pct" in row:
            _judge(row, oracle)
        rows.append(row)
        print(json.dumps(row), flush=True)
        writer.write({"oracle": oracle, "rows": rows})
    done = [r for r in rows if "change_pct" in r]
    print(f"oracle ({args.oracle}): {oracle['change_pct']:+.2f}% ({oracle['low_pct']:+.2f}% "
          f"to {oracle['high_pct']:+.2f}%); short {args.design} comparisons of "
          f"{args.budget:.0f} s: right sign in {sum(r['right_sign'] for r in done)} of "
          f"{len(done)}, covering the oracle's value in "
          f"{sum(r['covers_oracle'] for r in done)} of {len(done)}")


if __name__ == "__main__":
    run(main)
