"""A study's two sides measured together: each workload both configs run is one block
comparison (both servers up at once, the load alternating between them or shared, in
blocks) instead of whole runs one after the other.

Whole runs in turn expose each side to whatever speed the machine had at its turn; on a
host whose speed drifts (a cloud instance, a shared VM) that drift is most of the
interval. Here the baseline's and the candidate's cells of a workload become the two
sides of a ``compare.blocks.BlockComparison``: each side is still an ordinary run (its
own cluster and dataset, its iterations the blocks), recorded in the journal as its cell's
run, and the comparison's record (``blocks-WORKLOAD/blocks.json`` in the campaign's
directory) is what the study pairs the blocks by. A sweep (TPROC-C's ``warehouses =
"10,30"``) is one block comparison per step, and each side's steps are gathered into a
sweep directory of its own, as ``pgdyno bench`` would have written it.

The pairs replace the repeats: the later repetitions' cells of a compared workload are
recorded as measured in the first one's blocks. A workload the blocks cannot serve here
(no server, a cold cache, OS settings of a config, datasets too large for both to fit)
runs as the campaign's cells, and the journal says why.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from pgdyno.campaign.spec import CampaignSpec, Cell
from pgdyno.errors import PgdynoError, RunFailed, RunInterrupted
from pgdyno.options import BenchOptions
from pgdyno.results.rundir import utc_now

if TYPE_CHECKING:
    from pgdyno.compare.blocks import BlockPlan

BLOCKS_EVENT = "blocks"
"""The journal event naming a block comparison's record (per workload, per sweep step)."""
DESIGN_EVENT = "design"
"""The journal event saying how a compared workload was measured, and why."""


@dataclass(frozen=True)
class PairDesign:
    """How a study's baseline and candidate are compared (the ``[study]`` design keys)."""

    baseline: str
    candidate: str
    design: str = "auto"
    pairs: int | None = None
    budget_s: float | None = None
    precision_pct: float | None = None
    confidence: float = 0.95


@dataclass
class PairedWorkload:
    """One workload run as a block comparison: its cells, the first two its sides."""

    workload: str
    baseline: Cell
    candidate: Cell
    covered: list[Cell]
    """The later repetitions' cells of both configs: measured in these blocks."""
    design: str
    why: str

    @property
    def keys(self) -> set[str]:
        return {self.baseline.key, self.candidate.key, *(c.key for c in self.covered)}


def paired_workloads(spec: CampaignSpec, plan: PairDesign,
                     todo: list[Cell]) -> tuple[dict[str, PairedWorkload], dict[str, str]]:
    """The workloads whose cells still to run become block comparisons, and for each
    workload compared by whole runs instead, why (the ``design`` events' words)."""
    paired: dict[str, PairedWorkload] = {}
    sequential: dict[str, str] = {}
    todo_keys = {c.key for c in todo}
    for workload in spec.workloads:
        cells = [c for c in spec.cells() if c.workload == workload
                 and c.config.label in (plan.baseline, plan.candidate)]
        labels = {c.config.label for c in cells}
        if labels != {plan.baseline, plan.candidate}:
            continue  # one side only (fio, cpu): described, not compared
        if not todo_keys & {c.key for c in cells}:
            continue  # measured before, by whichever design
        first: dict[str, Cell] = {}
        for cell in sorted(cells, key=lambda c: c.repetition):
            first.setdefault(cell.config.label, cell)
        a, b = first[plan.baseline], first[plan.candidate]
        design, why = _design_for(spec, plan, a, b)
        if design == "sequential":
            sequential[workload] = why
            continue
        covered = [c for c in cells if c not in (a, b)]
        paired[workload] = PairedWorkload(workload, a, b, covered, design, why)
    return paired, sequential


def _design_for(spec: CampaignSpec, plan: PairDesign, a: Cell, b: Cell) -> tuple[str, str]:
    """(design, why) for one workload: as `pgdyno compare` decides it, on every step of
    a sweep, plus what only a campaign has (OS settings, sides that differ in length)."""
    import psutil

    from pgdyno.compare.blocks import SEQUENTIAL, choose_design
    from pgdyno.errors import UsageError
    from pgdyno.runner.sweep import sweep_steps
    from pgdyno.workloads import registry

    if plan.design == SEQUENTIAL:
        return SEQUENTIAL, "asked for"
    blocker = _campaign_blocker(spec, a, b)
    if blocker is not None:
        if plan.design != "auto":
            raise UsageError(f"campaign {spec.path}: [study] design = {plan.design!r}: "
                             f"{a.workload}: {blocker}; accepted: design = \"sequential\" "
                             "or \"auto\"")
        return SEQUENTIAL, f"auto: {blocker}, so the sides run one after the other"
    workload = registry.get(a.workload)
    if not workload.needs_server:  # whatever the design asked: there is no server to keep
        return SEQUENTIAL, (f"{a.workload} runs no server, so there is nothing to keep up "
                            "between blocks: the sides run one after the other")
    steps = []
    for cell in (a, b):
        opts = spec.options_for(cell)
        steps += [o for _, o in sweep_steps(opts)] or [opts]
    available = psutil.virtual_memory().available
    dirs = {spec.options_for(cell).target.archive_dir for cell in (a, b)}
    apart = len(dirs) == 2 and None not in dirs  # each config archives into its own
    try:
        # A study offers turns: where the load can be paused, its verdict is the
        # headline second by second, and its sides say their latency is not their own.
        chosen = [choose_design(plan.design, step, workload.needs_server,
                                workload.dataset_bytes(step), available,
                                archive_dirs_apart=apart,
                                turn_blocker=workload.turn_blocker(step))
                  for step in steps]
    except UsageError as exc:
        reason, _, instead = str(exc).split(": ", 1)[-1].partition("; use --design ")
        raise UsageError(f"campaign {spec.path}: [study] design = {plan.design!r}: "
                         f"{a.workload}: {reason}; accepted: design = "
                         f"\"{instead or 'sequential'}\" or \"auto\"") from None
    # Either side, any step of a sweep: what blocks one blocks the comparison.
    return next((c for c in chosen if c[0] == SEQUENTIAL), chosen[-1])


def _campaign_blocker(spec: CampaignSpec, a: Cell, b: Cell) -> str | None:
    if a.config.os or b.config.os:
        return ("a config changes OS settings ([config.os]), which would hold for both "
                "servers at once")
    oa, ob = spec.options_for(a), spec.options_for(b)
    if (oa.duration_s, oa.warmup_s, oa.clients) != (ob.duration_s, ob.warmup_s, ob.clients):
        return "the two configs' runs differ in duration, warm-up or client counts"
    return None


# ----- running one workload's comparison -------------------------------------------------------

Journal = Callable[[dict[str, Any]], None]


@dataclass
class PairResult:
    """How the workload's comparison ended: each side's run (or sweep) directory."""

    status: str
    reason: str
    baseline_dir: Path | None
    candidate_dir: Path | None


def run_paired(spec: CampaignSpec, plan: PairDesign, paired: PairedWorkload,
               journal: Journal, console: Console) -> PairResult:
    """The workload's block comparison (one per step of a sweep); the sides' run or sweep
    directories. Interrupted, it raises RunInterrupted once both sides stopped."""
    from pgdyno.runner.sweep import sweep_steps

    a_opts = spec.options_for(paired.baseline)
    b_opts = spec.options_for(paired.candidate)
    journal({"event": DESIGN_EVENT, "workload": paired.workload, "design": paired.design,
             "why": paired.why})
    a_steps, b_steps = sweep_steps(a_opts), sweep_steps(b_opts)
    if not a_steps:
        a_run, b_run = _compare_step(spec, plan, paired, a_opts, b_opts, None, journal,
                                     console)
        return PairResult("ok", "", a_run, b_run)
    b_by_size = dict(b_steps)
    sweeps = {"A": _SideSweep.start(a_opts), "B": _SideSweep.start(b_opts)}
    try:
        for size, a_step in a_steps:
            try:
                a_run, b_run = _compare_step(spec, plan, paired, a_step, b_by_size[size],
                                             size, journal, console)
                sweeps["A"].step_done(size, a_run, "ok")
                sweeps["B"].step_done(size, b_run, "ok")
            except RunFailed as exc:  # a step may fail for its own reasons (disk space)
                for side in sweeps.values():
                    side.step_done(size, None, "failed", str(exc))
                console.print(f"[red]{paired.workload}: {size} failed:[/red] {exc}")
    except (RunInterrupted, KeyboardInterrupt):
        for side in sweeps.values():
            side.end(interrupted=True)
        raise
    for side in sweeps.values():
        side.end(interrupted=False)
    statuses = {s.status for s in sweeps["A"].record.steps}
    status = "ok" if statuses == {"ok"} else "failed"
    reason = "" if status == "ok" else "; ".join(
        f"{s.size}: {s.reason or s.status}" for s in sweeps["A"].record.steps
        if s.status != "ok")
    return PairResult(status, reason, sweeps["A"].path, sweeps["B"].path)


def _block_plan(plan: PairDesign, paired: PairedWorkload) -> BlockPlan:
    from pgdyno.compare.blocks import BlockPlan
    from pgdyno.compare.command import pairs_for_design

    return BlockPlan(design=paired.design, pairs=plan.pairs or pairs_for_design(paired.design),
                     budget_s=plan.budget_s, precision_pct=plan.precision_pct,
                     confidence=plan.confidence)


BLOCK_OVERHEAD_S = 2.0
"""A block's CHECKPOINT and pgbench's start and end, beyond its warm-up and window."""


def estimate_paired_seconds(spec: CampaignSpec, plan: PairDesign,
                            paired: PairedWorkload) -> float:
    """The planned time of a workload's block comparisons, one a sweep step: their measuring
    time and each block's overhead; starting both servers and their datasets is not in it."""
    from pgdyno.runner.sweep import sweep_steps

    opts = spec.options_for(paired.baseline)
    block_plan = _block_plan(plan, paired)
    total = 0.0
    for step in [o for _, o in sweep_steps(opts)] or [opts]:
        seconds, _ = block_plan.measuring_time(step)
        blocks = seconds / max(1, step.warmup_s + step.duration_s)
        total += seconds + BLOCK_OVERHEAD_S * blocks
    return total


def blocks_dir(spec: CampaignSpec, workload: str, size: int | None) -> Path:
    """Where a workload's (or a sweep step's) block comparison keeps its record."""
    return spec.journal_dir / (f"blocks-{workload}" + (f"-{size}" if size is not None
                                                        else ""))


def _compare_step(spec: CampaignSpec, plan: PairDesign, paired: PairedWorkload,
                  a_opts: BenchOptions, b_opts: BenchOptions, size: int | None,
                  journal: Journal, console: Console) -> tuple[Path, Path]:
    """One block comparison between the two cells' options; the sides' run directories."""
    from pgdyno.compare.blocks import Side, run_announced

    sides = [Side(cell.config.label, options=opts, role=tuple(_role(spec, cell, size).items()))
             for cell, opts in ((paired.baseline, a_opts), (paired.candidate, b_opts))]
    block_plan = _block_plan(plan, paired)
    out = blocks_dir(spec, paired.workload, size)
    where = f"{paired.workload}" + (f" at {size}" if size is not None else "")
    started = time.monotonic()

    def say(line: str) -> None:
        console.print(f"{where}: {line}", markup=False, highlight=False, soft_wrap=True)

    record = run_announced(a_opts, sides[0], sides[1], block_plan, out, paired.why, say,
                           console, f"{where}: block comparison, {sides[0].label} against "
                           f"{sides[1].label} ({paired.design})")
    journal({"event": BLOCKS_EVENT, "workload": paired.workload, "size": size,
             "record": str(out.relative_to(spec.journal_dir) / "blocks.json"),
             "design": record.design, "stop": record.stop, "pairs": record.pairs_done(),
             "seconds": round(time.monotonic() - started, 1)})
    say(f"stopped: {record.stop} after {record.pairs_done()} pairs")
    return Path(record.baseline_run), Path(record.candidate_run)


def _role(spec: CampaignSpec, cell: Cell, size: int | None) -> dict[str, Any]:
    role: dict[str, Any] = {"campaign": spec.name, "cell": cell.key,
                            "repetition": cell.repetition, "config": cell.config.config,
                            "sets": list(cell.config.sets), "hardware": spec.hardware}
    if size is not None:
        role["step"] = size
    return role


@dataclass
class _SideSweep:
    """One side's sweep directory, filled step by step from its block comparisons' runs
    (the same ``sweep.json`` and report as ``pgdyno bench`` writes for a sweep)."""

    path: Path
    record: Any

    @classmethod
    def start(cls, opts: BenchOptions) -> _SideSweep:
        from pgdyno.runner.sweep import new_sweep

        return cls(*new_sweep(opts))

    def step_done(self, size: int, run: Path | None, status: str, reason: str = "") -> None:
        step = next(s for s in self.record.steps if s.size == size)
        step.run = run.name if run is not None and str(run) else None
        step.status, step.reason = status, reason
        self.record.save(self.path)

    def end(self, interrupted: bool) -> None:
        from pgdyno.runner.report import build_sweep_reports
        from pgdyno.runner.sweep import overall_status

        self.record.status = overall_status(self.record, interrupted)
        self.record.ended_at = utc_now()
        self.record.save(self.path)
        # The study reads the runs; a sweep report that fails is rebuilt by `pgdyno report`.
        with contextlib.suppress(PgdynoError, OSError):
            build_sweep_reports(self.path)
