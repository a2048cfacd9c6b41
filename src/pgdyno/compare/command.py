"""`pgdyno compare` in one call: two sets of runs, two sweeps, or a workload run on both
sides in turns, compared and written (compare.md, .html, .json). The CLI builds
``CompareOptions`` with ``compare_options`` and renders the ``CompareOutcome``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from pgdyno.compare.model import Comparison
from pgdyno.compare.stats import DEFAULT_CONFIDENCE
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions
from pgdyno.workloads.base import SweepComparison


@dataclass(frozen=True)
class CompareOptions:
    """What `pgdyno compare` was asked for, checked."""

    first: str
    """Baseline run(s), comma-separated, a sweep directory, or the WORKLOAD to run."""
    second: str | None = None
    """Candidate run(s) or sweep; None when running both sides."""
    baseline: str = "default"
    candidate: str = "default"
    """The configs of each side when running."""
    baseline_set: tuple[str, ...] = ()
    candidate_set: tuple[str, ...] = ()
    pairs: int = 3
    confidence: float = DEFAULT_CONFIDENCE
    out: Path | None = None
    """Where the comparison goes (None: under ``results_dir``/comparisons)."""
    at_step: int | None = None
    """Two sweeps: the dataset size to look at closely."""
    results_dir: Path = Path("results")
    progress: bool = False
    bench: BenchOptions | None = field(default=None, compare=False)
    """Running both sides: the runs' options (the sides add their config and sets)."""

    @property
    def running(self) -> bool:
        return self.bench is not None


def compare_options(first: str, second: str | None, *, baseline: str | None,
                    candidate: str | None, baseline_set: list[str], candidate_set: list[str],
                    pairs: int, confidence: float, out: Path | None, at_step: int | None,
                    results_dir: Path, progress: bool,
                    bench_args: dict[str, Any]) -> CompareOptions:
    """The command line's values as CompareOptions: either two runs (or sweeps), or a
    WORKLOAD with --baseline and/or --candidate, whose bench options ``bench_args`` are
    checked as `pgdyno bench` checks them."""
    running = baseline is not None or candidate is not None
    if running and second is not None:
        raise UsageError("compare: give either two runs, or a WORKLOAD with --baseline "
                         "and --candidate, not both")
    bench = None
    if running:
        from pgdyno.runner.options import build_options

        bench = build_options(first, **bench_args)
    elif second is None:
        raise UsageError("compare: give RUN_A RUN_B, or WORKLOAD --baseline CONFIG "
                         "--candidate CONFIG")
    return CompareOptions(first=first, second=second, baseline=baseline or "default",
                          candidate=candidate or "default", baseline_set=tuple(baseline_set),
                          candidate_set=tuple(candidate_set), pairs=pairs,
                          confidence=confidence, out=out, at_step=at_step,
                          results_dir=results_dir, progress=progress, bench=bench)


@dataclass
class CompareOutcome:
    report: Path
    """compare.md."""
    comparison: Comparison | None = None
    """Runs against runs."""
    sweeps: SweepComparison | None = None
    """Sweep against sweep."""


def run_compare(opts: CompareOptions, console: Console,
                note: Callable[[str], None]) -> CompareOutcome:
    """Compare (running both sides first when asked) and write the comparison. ``note``
    gets what the user should know before the result: an A/A test, the runs that failed."""
    from pgdyno.compare.core import compare_runs
    from pgdyno.compare.render import default_out_dir, write_comparison
    from pgdyno.compare.runs import load_run, resolve_run
    from pgdyno.compare.sweeps import (
        compare_sweeps,
        is_sweep_dir,
        sweep_out_dir,
        write_sweep_comparison,
    )

    if opts.second is not None and is_sweep_dir(opts.first) and is_sweep_dir(opts.second):
        a, b = Path(opts.first), Path(opts.second)
        cmp = compare_sweeps(a, b, opts.at_step)
        report = write_sweep_comparison(cmp, opts.out or sweep_out_dir(opts.results_dir, a, b))
        return CompareOutcome(report, sweeps=cmp)
    labels: dict[str, str] = {}
    if opts.bench is not None:
        from pgdyno.compare.interleave import Side, run_interleaved

        a_side = Side(_side_label(opts.baseline, opts.baseline_set), opts.baseline,
                      opts.baseline_set)
        b_side = Side(_side_label(opts.candidate, opts.candidate_set), opts.candidate,
                      opts.candidate_set)
        done = run_interleaved(opts.bench, a_side, b_side, opts.pairs, console,
                               on_run=lambda side, path: console.print(f"{side}: {path}")
                               if opts.progress else None)
        if a_side == b_side:  # after the runs: a refused command (--pairs 0) says one line
            note("note: baseline and candidate are the same config (an A/A test)")
        for msg in done.failed:
            note(f"warning: {msg}")
        a_runs = [load_run(p) for p in done.baseline]
        b_runs = [load_run(p) for p in done.candidate]
        labels = {"baseline_label": a_side.label, "candidate_label": b_side.label}
    else:
        a_runs = [load_run(resolve_run(r, opts.results_dir)) for r in opts.first.split(",")
                  if r]
        b_runs = [load_run(resolve_run(r, opts.results_dir))
                  for r in (opts.second or "").split(",") if r]
    cmp = compare_runs(a_runs, b_runs, confidence=opts.confidence, **labels)
    target = opts.out or default_out_dir(opts.results_dir, a_runs[0], b_runs[-1])
    write_comparison(cmp, a_runs, b_runs, target)
    return CompareOutcome(target / "compare.md", comparison=cmp)


def _side_label(config: str, sets: tuple[str, ...]) -> str:
    return config + (" + " + ", ".join(sets) if sets else "")
