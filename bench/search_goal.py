"""Does the winner of `pgdyno tune --search` hold over a long window? The goal measured: the
validated winner at least 1.10x pgtune and at least 1.05x tuned, each with a significant
verdict (95% interval above zero), over a 30-minute interleaved validation, in at most 20
trials.

Two searches, each ending with its short interleaved comparison and then the long-window
validation of the winner against pgtune and tuned:

1. pgbench TPC-B (write-heavy) with data larger than the default shared_buffers
   (128 MB): scale 50 is about 785 MB.
2. TPROC-C (write-heavy OLTP), 4 warehouses, 8 virtual users.

Run it on a quiet machine (every trial is a real run). By default each trial after the
first is measured against the incumbent in interleaved blocks (`--trial-design auto`);
`--trial-design runs` gives each trial one run of its own, as searches did before, for a
comparison. At the defaults one search takes about two hours with trials of runs: 20
trials of 20 s, the re-runs and the short comparison (about 30 min), then the validation:
30 min of load per config, three configs (90 min); trials in blocks measure the incumbent
too, about twice the trials' time:

    .venv/bin/python bench/search_goal.py --only tpcb --results-dir /var/tmp/goal

and, to check that it works at all (minutes):

    .venv/bin/python bench/search_goal.py --quick --results-dir /var/tmp/goal-quick

It prints each search's convergence (trial, config, raw figure, debt penalty, penalised
figure, best so far), the short comparison's verdicts, the long validation's verdicts
against the goal, and the debt each config left at the end of its last long run, all read
back from the search directory, and writes them to the result file (--output). The
searches stay under --results-dir (default /var/tmp/pgdyno-bench/search_goal), in
searches/goal-tpcb and searches/goal-tprocc, for bench/search_noise.py to read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import ResultWriter, Stopwatch, kept_dir, new_parser, run

SEARCHES = {
    # name: (workload and its options, quick variant)
    "tpcb": (["tpcb", "--scale", "50", "--clients", "8"],
             ["tpcb", "--scale", "1", "--clients", "2"]),
    "tprocc": (["tprocc", "--warehouses", "4", "--vus", "8"],
               ["tprocc", "--warehouses", "1", "--vus", "2"]),
}
GOALS = {"pgtune": 10.0, "tuned": 5.0}
"""Least change in %, with the 95% interval above zero, against each baseline."""


def search_name(name: str, quick: bool, trial_design: str = "auto") -> str:
    """goal-NAME[-quick][-DESIGN]: a search resumed only with the trials' design it began
    with, so another design is another search."""
    design = "" if trial_design == "auto" else f"-{trial_design}"
    return f"goal-{name}{'-quick' if quick else ''}{design}"


def run_search(name: str, args: argparse.Namespace) -> tuple[Path, float]:
    full, quick = SEARCHES[name]
    workload = quick if args.quick else full
    timing = (["--duration", "3", "--warmup", "1", "--budget", "5", "--top", "2",
               "--reruns", "1", "--compare-pairs", "2", "--compare-max-pairs", "2",
               "--validate", "20s"]
              if args.quick else
              ["--duration", str(args.duration), "--warmup", str(args.warmup),
               "--budget", str(args.budget), "--validate", args.validate,
               "--validate-against", args.validate_against])
    cmd = [sys.executable, "-m", "pgdyno", "tune", "--search", *workload, *timing,
           "--trial-design", args.trial_design,
           "--search-name", search_name(name, args.quick, args.trial_design),
           "--results-dir", str(args.results_dir), "--no-progress"]
    print("$", " ".join(cmd), flush=True)
    with Stopwatch() as watch:
        subprocess.run(cmd, check=True)
    return (args.results_dir / "searches" / search_name(name, args.quick, args.trial_design),
            watch.seconds)


def convergence_table(search_dir: Path) -> list[str]:
    """The trials as the report holds them (trial, config, status, raw, penalty,
    penalised, best so far), read from the report's Markdown table."""
    lines = (search_dir / "report.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Trial |"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(" | ".join(cell.strip() for cell in line.strip("|").split("|")[:7]))
    return table


def goal_lines(verdicts: list[dict[str, Any]], compared: list[str] | None = None
               ) -> tuple[list[str], bool]:
    """The goal against each baseline; one left out of ``compared`` (--validate-against)
    is said to be so, and the goal is not met."""
    lines, all_met = [], True
    for baseline, goal in GOALS.items():
        if compared is not None and baseline not in compared:
            lines.append(f"vs {baseline}: not compared (--validate-against); goal >= "
                         f"{goal:.0f}%: not shown")
            all_met = False
            continue
        v = next((v for v in verdicts if v["baseline"] == baseline), None)
        if v is None:
            lines.append(f"vs {baseline}: no verdict; goal >= {goal:.0f}%: not met")
            all_met = False
            continue
        met = v["verdict"] == "faster" and v["ci_low_pct"] > 0 and v["change_pct"] >= goal
        all_met = all_met and met
        lines.append(f"vs {baseline}: {v['baseline_mean']:,.1f} -> {v['candidate_mean']:,.1f} "
                     f"{v['unit']}, change {v['change_pct']:+.1f}% (95% interval "
                     f"{v['ci_low_pct']:+.1f}% to {v['ci_high_pct']:+.1f}%), {v['verdict']}; "
                     f"goal >= {goal:.0f}%: {'met' if met else 'not met'}")
    return lines, all_met


def debt_line(result: dict[str, Any]) -> str:
    d = result.get("debt") or {}
    wal = d.get("wal_since_checkpoint_bytes")
    return (f"{result['label']}: mean {result['mean'] or 0:,.1f}, p99 "
            f"{result['p99_ms'] or 0:,.1f} ms, dead tuples at end "
            f"{d.get('dead_tuples_end', 0):,} ({d.get('dead_tuples_growth_per_min', 0):+,.0f}"
            f"/min), autovacuum backlog {d.get('autovacuum_backlog', 0)}, WAL since "
            f"checkpoint {'-' if wal is None else f'{wal / 2**20:,.0f} MB'}"
            f"{'; UNBOUNDED: ' + result['unbounded'] if result.get('unbounded') else ''}")


def report(name: str, search_dir: Path, seconds: float) -> dict[str, Any]:
    def read(file: str) -> dict[str, Any]:
        path = search_dir / file
        return json.loads(path.read_text()) if path.exists() else {}

    conf, val = read("confirm.json"), read("validate.json")
    out: dict[str, Any] = {"search": name, "dir": str(search_dir), "wall_s": round(seconds)}
    print(f"\n== {name}: {seconds / 60:.1f} min ==\n-- convergence --")
    out["convergence"] = convergence_table(search_dir)
    print("\n".join(out["convergence"]))
    print("-- short interleaved comparison --")
    out["short"], out["short_goal_met"] = goal_lines(conf.get("verdicts", []))
    print("\n".join(out["short"]))
    print("-- long-window validation --")
    rule = val.get("rule", {})
    print(f"{val.get('design', 'sequential')}: {rule.get('rounds')} runs a config of "
          f"{rule.get('window_s')} s each; {rule.get('note') or 'as asked'}")
    out["long"], out["goal_met"] = goal_lines(val.get("verdicts", []),
                                              list(val.get("sides", {}))[1:])
    print("\n".join(out["long"]))
    out["debt"] = [debt_line(r) for r in val.get("results", [])]
    print("\n".join(out["debt"]))
    out["holds"], out["recommendation"] = val.get("holds"), val.get("recommendation", "")
    print(out["recommendation"])
    print(f"GOAL ({name}): {'met' if out['goal_met'] else 'not met'}")
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__, "--json")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="where the searches are kept (default /var/tmp/pgdyno-bench/"
                             "search_goal)")
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--validate", default="30m")
    parser.add_argument("--validate-against", default="pgtune,tuned",
                        help="the baselines of the long validation (each about 1.5 h on "
                             "TPC-B at the default --validate)")
    parser.add_argument("--quick", action="store_true", help="tiny data, 5 trials: a check")
    parser.add_argument("--trial-design", default="auto", choices=("auto", "interleaved", "runs"),
                        help="how the search measures each trial (runs: one run each, as "
                             "before trials met the incumbent in blocks)")
    parser.add_argument("--only", choices=sorted(SEARCHES))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.results_dir = args.results_dir or kept_dir("search_goal")
    writer = ResultWriter("search_goal", args)
    results = []
    for name in [args.only] if args.only else list(SEARCHES):
        search_dir, seconds = run_search(name, args)
        results.append(report(name, search_dir, seconds))
        writer.write({"searches": results})
    writer.finish({"searches": results})
    return 0


if __name__ == "__main__":
    run(main)
