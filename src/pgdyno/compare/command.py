"""`pgdyno compare` in one call: two sets of runs, two sweeps, or a workload run on both
sides in turns, compared and written (compare.md, .html, .json). The CLI builds
``CompareOptions`` with ``compare_options`` and renders the ``CompareOutcome``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from pgdyno.compare.blocks import ALTERNATING, SEQUENTIAL
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
    pairs: int | None = None
    """Pairs to run (None: SEQUENTIAL_PAIRS or BLOCK_PAIRS, by design)."""
    confidence: float = DEFAULT_CONFIDENCE
    out: Path | None = None
    """Where the comparison goes (None: under ``results_dir``/comparisons)."""
    at_step: int | None = None
    """Two sweeps: the dataset size to look at closely."""
    results_dir: Path = Path("results")
    progress: bool = False
    design: str = "auto"
    """Running both sides: ``auto``, ``interleaved``, ``duet`` or ``sequential``."""
    precision_pct: float | None = None
    """Block designs: stop once the headline's interval is at most ± this (%)."""
    budget_s: float | None = None
    """Block designs: the most seconds of measuring."""
    seed: int | None = None
    """Block designs: the order's random seed (None: drawn and recorded)."""
    baseline_pg_bin: Path | None = None
    candidate_pg_bin: Path | None = None
    """Each side's server binaries (None: the run's --pg-bin, or the embedded server)."""
    bench: BenchOptions | None = field(default=None, compare=False)
    """Running both sides: the runs' options (the sides add their config and sets)."""

    @property
    def running(self) -> bool:
        return self.bench is not None


def compare_options(first: str, second: str | None, *, baseline: str | None,
                    candidate: str | None, baseline_set: list[str], candidate_set: list[str],
                    pairs: int | None, confidence: float, out: Path | None, at_step: int | None,
                    results_dir: Path, progress: bool,
                    bench_args: dict[str, Any], design: str = "auto",
                    precision: str | None = None, budget: str | None = None,
                    seed: int | None = None, baseline_pg_bin: Path | None = None,
                    candidate_pg_bin: Path | None = None) -> CompareOptions:
    """The command line's values as CompareOptions: either two runs (or sweeps), or a
    WORKLOAD with --baseline and/or --candidate, whose bench options ``bench_args`` are
    checked as `pgdyno bench` checks them."""
    from pgdyno.compare.blocks import DESIGNS

    running = (baseline is not None or candidate is not None
               or baseline_pg_bin is not None or candidate_pg_bin is not None)
    if design not in DESIGNS:
        raise UsageError(f"--design {design}: accepted values are {', '.join(DESIGNS)}")
    precision_pct = parse_precision(precision)
    budget_s = parse_budget(budget)
    if precision_pct is not None and budget_s is None:
        budget_s = DEFAULT_BUDGET_S
    if not running and (precision_pct is not None or budget_s is not None):
        raise UsageError("compare: --precision and --budget apply when running both sides "
                         "(WORKLOAD --baseline CONFIG --candidate CONFIG)")
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
                          results_dir=results_dir, progress=progress, design=design,
                          precision_pct=precision_pct, budget_s=budget_s, seed=seed,
                          baseline_pg_bin=baseline_pg_bin, candidate_pg_bin=candidate_pg_bin,
                          bench=bench)


DEFAULT_BUDGET_S = 600.0
"""--precision without --budget: ten minutes of measuring at most."""
_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_precision(text: str | None) -> float | None:
    """``2%`` or ``2`` as 2.0 (a half-width in %); None when not given."""
    if text is None:
        return None
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 < value < 100.0):
        raise UsageError(f"--precision {text}: accepted values are a half-width in % "
                         "above 0 and below 100, e.g. 2%")
    return value


def parse_budget(text: str | None) -> float | None:
    """``10m``, ``90s``, ``1h`` or a number of seconds; None when not given."""
    if text is None:
        return None
    raw = text.strip().lower()
    unit = _UNITS_S.get(raw[-1:]) if raw else None
    try:
        value = float(raw[:-1] if unit is not None else raw) * (unit or 1.0)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 10.0):
        raise UsageError(f"--budget {text}: accepted values are a duration of at least 10 s, "
                         "as 90s, 10m or 1h")
    return value


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
    design = None
    target = opts.out
    if opts.bench is not None:
        from pgdyno.compare.blocks import Side

        a_side = Side(_side_label(opts.baseline, opts.baseline_set, opts.baseline_pg_bin),
                      opts.baseline, opts.baseline_set, opts.baseline_pg_bin)
        b_side = Side(_side_label(opts.candidate, opts.candidate_set, opts.candidate_pg_bin),
                      opts.candidate, opts.candidate_set, opts.candidate_pg_bin)
        chosen, why = _design_for(opts)
        _check_sides(opts, chosen, (a_side, b_side))  # refused before anything starts
        note(f"design: {chosen} ({why})")
        if chosen == SEQUENTIAL:
            a_runs, b_runs = _run_sequential(opts, a_side, b_side, console, note)
            design = _sequential_summary(why, opts.confidence)
        else:
            target = target or _block_out_dir(opts)
            a_runs, b_runs, design = _run_blocks(opts, chosen, why, a_side, b_side, target,
                                                 note, console)
        if a_side == b_side:
            note("note: baseline and candidate are the same config (an A/A test)")
        labels = {"baseline_label": a_side.label, "candidate_label": b_side.label}
    else:
        a_runs = [load_run(resolve_run(r, opts.results_dir)) for r in opts.first.split(",")
                  if r]
        b_runs = [load_run(resolve_run(r, opts.results_dir))
                  for r in (opts.second or "").split(",") if r]
    cmp = compare_runs(a_runs, b_runs, confidence=opts.confidence, design=design, **labels)
    target = target or default_out_dir(opts.results_dir, a_runs[0], b_runs[-1])
    write_comparison(cmp, a_runs, b_runs, target)
    return CompareOutcome(target / "compare.md", comparison=cmp)


def _side_label(config: str, sets: tuple[str, ...], pg_bin: Path | None = None) -> str:
    label = config + (" + " + ", ".join(sets) if sets else "")
    return label + (f" ({pg_bin})" if pg_bin is not None else "")


def _design_for(opts: CompareOptions) -> tuple[str, str]:
    """The design the comparison runs in, and why (``--design auto`` decides here)."""
    import psutil

    from pgdyno.compare.blocks import choose_design
    from pgdyno.workloads import registry

    assert opts.bench is not None
    workload = registry.get(opts.bench.workload)
    return choose_design(opts.design, opts.bench, workload.needs_server,
                         workload.dataset_bytes(opts.bench),
                         psutil.virtual_memory().available,
                         turn_blocker=workload.turn_blocker(opts.bench))


ALTERNATING_BLOCKS = 2
"""The alternating design's blocks when neither --pairs nor --budget is given."""
SEQUENTIAL_PAIRS = 3
"""Whole runs a side when --pairs is not given (the sequential design)."""
BLOCK_PAIRS = 10
"""Pairs of blocks when neither --pairs nor --budget is given: enough for the signed-rank
interval at 95% (6 is the least) with some room to resolve a few percent."""


def pairs_for(opts: CompareOptions, design: str) -> int:
    """The pairs to run: as asked, else the design's default."""
    return opts.pairs if opts.pairs is not None else pairs_for_design(design)


def pairs_for_design(design: str) -> int:
    """A design's pairs when none are asked for (the alternating design's blocks: each
    holds many pairs of turns)."""
    if design == ALTERNATING:
        return ALTERNATING_BLOCKS
    return SEQUENTIAL_PAIRS if design == SEQUENTIAL else BLOCK_PAIRS


def _check_sides(opts: CompareOptions, design: str, sides: tuple[Any, Any]) -> None:
    """What each side would be refused for, found before either starts: too few pairs,
    a config that does not exist, a setting the server does not know."""
    from pgdyno.compare.blocks import options_for_side
    from pgdyno.runner.settings import build_settings
    from pgdyno.targets import install_for
    from pgdyno.workloads import registry

    assert opts.bench is not None
    if pairs_for(opts, design) < (1 if design == ALTERNATING else 2):
        raise UsageError(f"--pairs {opts.pairs}: at least 2 pairs are needed for an interval")
    workload = registry.get(opts.bench.workload)
    if not workload.needs_server:
        return
    for side in sides:
        side_opts = options_for_side(opts.bench, side)
        build_settings(side_opts, workload, install_for(side_opts.target))


def _run_sequential(opts: CompareOptions, a_side: Any, b_side: Any, console: Console,
                    note: Callable[[str], None]) -> tuple[list, list]:
    """Whole runs, A B B A ..., each with its own server start (one workdir, one cluster)."""
    from pgdyno.compare.interleave import run_interleaved
    from pgdyno.compare.runs import load_run

    assert opts.bench is not None
    if opts.precision_pct is not None or opts.budget_s is not None:
        note("note: --precision and --budget steer block designs only; the sequential "
             f"design runs its {pairs_for(opts, SEQUENTIAL)} pairs")
    bench = opts.bench
    if a_side.pg_bin is not None or b_side.pg_bin is not None:
        raise UsageError("compare: --baseline-pg-bin and --candidate-pg-bin need a block "
                         "design (both servers up at once); use --design interleaved")
    done = run_interleaved(bench, a_side, b_side, pairs_for(opts, SEQUENTIAL), console,
                           on_run=lambda side, path: console.print(f"{side}: {path}")
                           if opts.progress else None)
    for msg in done.failed:
        note(f"warning: {msg}")
    return [load_run(p) for p in done.baseline], [load_run(p) for p in done.candidate]


def _sequential_summary(why: str, confidence: float) -> Any:
    from pgdyno.compare.design import sequential_summary

    return sequential_summary(why, confidence)


def _block_out_dir(opts: CompareOptions) -> Path:
    from datetime import UTC, datetime

    from pgdyno.results.rundir import safe_name

    assert opts.bench is not None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return opts.results_dir / "comparisons" / safe_name(f"{opts.bench.workload}-{stamp}")


def _run_blocks(opts: CompareOptions, design: str, why: str, a_side: Any, b_side: Any,
                out_dir: Path, note: Callable[[str], None],
                console: Console | None = None) -> tuple[list, list, Any]:
    """Both servers up, the load alternating (or shared) in blocks until the plan stops;
    announced with how long it measures, and heard of now and then in a log."""
    from pgdyno.compare.blocks import BlockPlan, run_announced
    from pgdyno.compare.design import block_design_summary
    from pgdyno.compare.runs import load_run

    assert opts.bench is not None
    plan = BlockPlan(design=design, pairs=pairs_for(opts, design), budget_s=opts.budget_s,
                     precision_pct=opts.precision_pct, confidence=opts.confidence,
                     seed=opts.seed)
    record = run_announced(opts.bench, a_side, b_side, plan, out_dir, why, note, console,
                           f"comparison: {a_side.label} against {b_side.label} in {design} "
                           "blocks", show_progress=opts.progress, bar=False)
    note(f"stopped: {record.stop} after {record.pairs_done()} pairs "
         f"({record.measuring_s:.0f} s measuring, {record.setup_s:.0f} s to set up)")
    a_run, b_run = load_run(Path(record.baseline_run)), load_run(Path(record.candidate_run))
    return [a_run], [b_run], block_design_summary(record, a_run, b_run)
