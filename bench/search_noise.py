"""The noise of finished searches: what their short comparison and long validation could
tell apart, recomputed from the runs' own summary.json files (search/noise.py).

For each search directory given: each step's window, configs × runs, run-to-run noise (the
pooled SD of ln(headline)), the lead its comparison resolves, the runs per config a 5% and a
10% lead need, the neighbour correlation (does pairing pay?), the trial window the short
runs' noise points to, and the 1/√window rule's prediction for the long runs against what
they measured.

Usage (the searches bench/search_goal.py keeps):
    python bench/search_noise.py /var/tmp/pgdyno-bench/search_goal/searches/goal-tpcb \
        /var/tmp/pgdyno-bench/search_goal/searches/goal-tprocc
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness import ResultWriter, new_parser, run

from pgdyno import serde
from pgdyno.search.noise import runs_noise, search_noise


def step_noise(search_dir: Path, name: str, window_s: float, workload: str):
    path = search_dir / name
    if not path.exists():
        return None
    return runs_noise(json.loads(path.read_text())["runs"], workload, window_s)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    parser.add_argument("search_dirs", nargs="+", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    writer = ResultWriter("search_noise", args)
    figures = []
    print(f"{'search':<16}{'step':<18}{'window s':>9}{'configs×runs':>14}{'noise':>8}"
          f"{'resolves':>10}{'n for 5%':>10}{'n for 10%':>11}{'rho':>7}")
    for search_dir in args.search_dirs:
        record = json.loads((search_dir / "search.json").read_text())
        workload = record["workload"]
        short_s = float(record["options"]["duration_s"])
        val_path = search_dir / "validate.json"
        long_s = (float(json.loads(val_path.read_text())["rule"]["window_s"])
                  if val_path.exists() else 0.0)
        short = step_noise(search_dir, "confirm.json", short_s, workload)
        long = step_noise(search_dir, "validate.json", long_s, workload)
        for step, n in (("short comparison", short), ("long validation", long)):
            if n is None:
                continue
            rho = "–" if n.neighbour_corr is None else f"{n.neighbour_corr:+.2f}"
            print(f"{search_dir.name:<16}{step:<18}{n.window_s:>9,.0f}"
                  f"{f'{n.configs}×{n.runs_per_config}':>14}{n.sd_pct:>7.1f}%"
                  f"{n.resolution_pct:>9.1f}%{n.runs_needed['5']:>10,}"
                  f"{n.runs_needed['10']:>11,}{rho:>7}")
        both = search_noise(short, long)
        figures.append({"search": str(search_dir), "short": serde.to_dict(short),
                        "long": serde.to_dict(long),
                        "trial_window_s": both.trial_window_s if both else None,
                        "long_predicted_sd_pct": both.long_predicted_sd_pct if both else None})
        if both is not None and both.trial_window_s is not None:
            print(f"{search_dir.name}: trials of {both.trial_window_s:,.0f} s would rank two "
                  "configs 5% apart one-on-one")
        if both is not None and both.long_predicted_sd_pct is not None and long is not None:
            print(f"{search_dir.name}: 1/sqrt(window) predicts {both.long_predicted_sd_pct:.1f}% "
                  f"at {long.window_s:,.0f} s; measured {long.sd_pct:.1f}%")


    writer.finish({"searches": figures})
    return 0


if __name__ == "__main__":
    run(main)
