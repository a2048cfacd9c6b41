"""The sequential design: baseline and candidate as whole runs in turns on the same target.

The order is counterbalanced, A B B A A B B A ...: with plain alternation (A B A B) the
baseline always runs first in each pair, so anything that improves over time (the OS page
cache filling, a neighbour finishing) favours the candidate; ABBA cancels a linear drift.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from pgdyno.compare.blocks import Side
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions
from pgdyno.runner.bench import context_of, run_one


@dataclass
class InterleavedRuns:
    baseline: list[Path] = field(default_factory=list)
    candidate: list[Path] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def abba_order(pairs: int) -> list[str]:
    """``A B B A A B ...`` for ``pairs`` pairs."""
    return [s for i in range(pairs) for s in (("A", "B") if i % 2 == 0 else ("B", "A"))]


def options_for(base: BenchOptions, side: Side, context: str) -> BenchOptions:
    return dataclasses.replace(base, config=side.config, sets=(*base.sets, *side.sets),
                               context=context)


def run_interleaved(base: BenchOptions, baseline: Side, candidate: Side, pairs: int,
                    console: Console | None = None,
                    on_run: Callable[[str, Path], None] | None = None) -> InterleavedRuns:
    """Run both sides ``pairs`` times each; a failed run is recorded and the rest go on."""
    if pairs < 2:
        raise UsageError(f"--pairs {pairs}: at least 2 runs per side are needed for an "
                         "interval (the runs are the samples when --iterations is 1)")
    context = context_of(base)
    out = InterleavedRuns()
    for number, side_name in enumerate(abba_order(pairs), start=1):
        side = baseline if side_name == "A" else candidate
        opts = options_for(base, side, context)
        run_dir = run_one(opts, {"label": side.label, "compare_side": side_name,
                                 "order": number}, console)
        if run_dir is None:
            out.failed.append(f"run {number} ({side_name}: {side.label}) failed")
            continue
        (out.baseline if side_name == "A" else out.candidate).append(run_dir)
        if on_run:
            on_run(side_name, run_dir)
    return out

