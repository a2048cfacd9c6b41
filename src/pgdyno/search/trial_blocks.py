"""A search's trials measured against the incumbent in blocks, so that drift of the
machine's speed does not rank the configs.

A trial measured alone (``runs``: one normal run) is exposed to whatever speed the machine
has at its turn: on a shared host whose speed jumps between levels, a 5% lead is lost in
the jumps and the optimiser chases the lucky windows. Here (``interleaved``) each trial
runs as a block comparison against the incumbent, the best config measured so far: both
servers up at once, the load moved between them in short blocks, balanced in order
(``compare.blocks``). Each pair of blocks sees the machine at nearly the same speed, so
the pairs' ratio of the trial's headline to the incumbent's is what the optimiser is told,
on one scale:

    trial figure = incumbent's figure × exp(mean over the pairs of ln(trial / incumbent))

then charged for the maintenance debt the trial's own blocks left, as a trial run is
(``objective.debt_penalty``). The first trial, with nothing to compare against, is one
normal run: its figure sets the scale. A re-run of a leading candidate is measured the
same way, against the best trial (a re-run of the best itself against the second best).

Both sides' clusters and datasets stay in one directory of the search's workdir between
trials (each trial restarts them with its sides' configs, as a trial run restarts its
server), so that no trial builds a dataset; the search removes them once the trials and
re-runs are done. Each trial's blocks are recorded in ``trials/blocks-N/blocks.json`` and
its change with its interval in the trial's record, which the report lays out.

Where the workload's load can be paused (``Workload.turn_blocker``), ``auto`` measures a
trial in turns instead (``alternating``): both sides' loads run at once for one block and
take turns of one second, each pair two neighbouring seconds (``compare.alternate``), the
block long enough to give the trial config the measuring time a trial run would have.
The same ratio of the pairs makes the trial's figure.

Blocks cannot serve (``auto`` falls back to runs, and says why) where the two servers
cannot be up at once (``compare.blocks.choose_design``'s reasons), where OS knobs are
searched (they would hold for both servers), and where several workers share the study
(each would measure against an incumbent of its own).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from pgdyno.compare.alternate import pair_values, pairs_in
from pgdyno.compare.blocks import ALTERNATING, AUTO, INTERLEAVED, BlockRecord
from pgdyno.errors import RunFailed, RunRefused, UsageError
from pgdyno.options import BenchOptions
from pgdyno.search.confirm import BLOCK_S, BLOCK_WARMUP_S
from pgdyno.search.objective import (
    TrialResult,
    debt_penalty,
    first_line,
    headline_spec,
    penalised,
    run_debt,
)

RUNS = "runs"
TRIAL_DESIGNS = (AUTO, ALTERNATING, INTERLEAVED, RUNS)
MIN_PAIRS = 2


@dataclass(frozen=True)
class TrialDesign:
    """How the search measures its trials, and why."""

    design: str
    """``alternating`` (against the incumbent, in turns of a second), ``interleaved``
    (against the incumbent, in blocks) or ``runs`` (one run each)."""
    why: str
    pairs: int = 0
    """Pairs of blocks a trial runs (interleaved); its blocks (alternating: one)."""
    block_s: int = 0
    warmup_s: int = 0

    @property
    def in_blocks(self) -> bool:
        return self.design in (INTERLEAVED, ALTERNATING)

    def sentence(self) -> str:
        if not self.in_blocks:
            return f"Trials: one run each ({self.why})."
        if self.design == ALTERNATING:
            return (f"Trials: each measured against the incumbent (the best config so far), "
                    f"both servers up and both loads running at once for {self.block_s} s "
                    f"after {self.warmup_s} s of warm-up, taking turns of one second "
                    f"({pairs_in(self.warmup_s, self.block_s)} pairs of neighbouring "
                    "seconds); a trial's figure is the incumbent's times the pairs' geometric "
                    "mean ratio, so the machine's changes of speed between trials do not "
                    f"rank them ({self.why}). The first trial is one run: its figure sets the "
                    "scale.")
        return (f"Trials: each measured against the incumbent (the best config so far) in "
                f"{self.pairs} pairs of interleaved blocks of {self.block_s} s after "
                f"{self.warmup_s} s of warm-up, both servers up at once; a trial's figure is "
                "the incumbent's times the pairs' geometric mean ratio, so the machine's "
                f"changes of speed between trials do not rank them ({self.why}). The first "
                "trial is one run: its figure sets the scale.")


def trial_design(asked: str, bench: BenchOptions, *, os_changes: bool, shared: bool
                 ) -> TrialDesign:
    """The trials' design: ``asked`` when it can run here, ``auto``'s pick otherwise; a
    design asked for that cannot run is refused in one line."""
    import psutil

    from pgdyno.compare.blocks import SEQUENTIAL, choose_design
    from pgdyno.workloads import registry

    if asked not in TRIAL_DESIGNS:
        raise UsageError(f"--trial-design {asked}: accepted values are "
                         f"{', '.join(TRIAL_DESIGNS)}")
    if asked == RUNS:
        return TrialDesign(RUNS, "asked for")
    workload = registry.get(bench.workload)
    blockers = []
    if os_changes:
        blockers.append("OS knobs are searched, and a trial's OS values would hold for the "
                        "incumbent's server too")
    if shared:
        blockers.append("several workers share the study, and each would measure against "
                        "an incumbent of its own")
    if not blockers:
        try:
            design, why = choose_design(INTERLEAVED if asked == INTERLEAVED else AUTO, bench,
                                        workload.needs_server, workload.dataset_bytes(bench),
                                        psutil.virtual_memory().available)
        except UsageError as exc:
            raise UsageError(str(exc).replace("use --design sequential",
                                              "use --trial-design runs")
                             .replace("--design", "--trial-design")) from None
        if design == SEQUENTIAL:
            blockers.append(why.removeprefix("auto: ").split(", so ")[0])
    if blockers:
        if asked in (INTERLEAVED, ALTERNATING):
            raise UsageError(f"--trial-design {asked}: {blockers[0]}; accepted: auto or "
                             "runs")
        return TrialDesign(RUNS, f"auto: {blockers[0]}, so each trial is one run")
    if asked in (AUTO, ALTERNATING):
        turns = _in_turns(asked, bench, workload.turn_blocker(bench))
        if turns is not None:
            return turns
    block_s = min(bench.duration_s, BLOCK_S)
    warmup_s = min(bench.warmup_s, BLOCK_WARMUP_S)
    # As many pairs as give the trial config the measuring time a trial run would.
    pairs = max(MIN_PAIRS, round(bench.iterations * bench.duration_s / max(1, block_s)))
    why = "asked for" if asked == INTERLEAVED else (
        "auto: both servers fit on this machine at once")
    return TrialDesign(INTERLEAVED, why, pairs, block_s, warmup_s)


def _in_turns(asked: str, bench: BenchOptions, blocker: str) -> TrialDesign | None:
    """Trials in turns of a second: one block whose measured seconds give the trial config
    the time a trial run measures (half of them are the incumbent's); None where the load
    cannot take turns and ``auto`` was asked (``alternating`` asked is refused)."""
    warmup_s = max(1, min(bench.warmup_s, BLOCK_WARMUP_S))
    block_s = 2 * bench.iterations * bench.duration_s
    if not blocker and pairs_in(warmup_s, block_s) < MIN_PAIRS:
        blocker = (f"a trial of {bench.iterations} × {bench.duration_s} s gives fewer than "
                   f"{MIN_PAIRS} pairs of turns")
    if blocker:
        if asked == ALTERNATING:
            raise UsageError(f"--trial-design alternating: {blocker}; accepted: auto, "
                             "interleaved or runs")
        return None
    why = "asked for" if asked == ALTERNATING else (
        "auto: both servers fit on this machine at once and the load can be paused")
    return TrialDesign(ALTERNATING, why, 1, block_s, warmup_s)


@dataclass(frozen=True)
class Reference:
    """The config a trial is measured against, and its figure before the debt penalty."""

    number: int
    label: str
    config: str
    raw_value: float


def reference_for(rows: list, direction: int, leaving_out: int | None = None
                  ) -> Reference | None:
    """The best finished trial with a raw figure (``leaving_out`` one of them: a re-run of
    the best is measured against the second best); None before any."""
    ok = [r for r in rows if r.status == "ok" and r.value is not None
          and r.raw_value is not None and r.number != leaving_out]
    if not ok:
        return None
    best = max(ok, key=lambda r: direction * r.value)
    return Reference(best.number, best.label, best.config, float(best.raw_value))


def sides_root(bench: BenchOptions, search_name: str) -> Path:
    """Where the two sides' clusters stay between trials."""
    return bench.target.workdir / f"search-{search_name}-sides"


def remove_sides(bench: BenchOptions, search_name: str) -> None:
    shutil.rmtree(sides_root(bench, search_name), ignore_errors=True)


def measure_against(bench: BenchOptions, design: TrialDesign, reference: Reference,
                    config: str, label: str, role: dict[str, Any], out_dir: Path,
                    search_name: str, console: Console | None = None) -> TrialResult:
    """``config`` against ``reference`` in ``design``'s pairs of blocks: a trial's result
    on the search's scale (module docstring), its comparison in ``against``."""
    from pgdyno.compare.blocks import BlockPlan, Side, run_announced

    spec = headline_spec(bench.workload)
    direction = spec.direction or 1
    blocks = dataclasses.replace(bench, duration_s=design.block_s, warmup_s=design.warmup_s,
                                 iterations=1, sets=(), show_progress=False)
    sides = [Side(name, options=dataclasses.replace(blocks, config=cfg),
                  role=tuple({**role, "compare_side": side}.items()))
             for name, cfg, side in ((reference.label, reference.config, "A"),
                                     (label, config, "B"))]
    plan = BlockPlan(design=design.design, pairs=design.pairs)
    started = time.monotonic()

    def say(line: str) -> None:
        if console is not None and bench.show_progress:
            console.print(f"{label} against {reference.label}: {line}", markup=False,
                          highlight=False, soft_wrap=True)

    root = sides_root(bench, search_name)
    root.mkdir(parents=True, exist_ok=True)
    try:
        record = run_announced(blocks, sides[0], sides[1], plan, out_dir, design.why, say,
                               console, f"{label}: blocks against {reference.label}",
                               show_progress=bench.show_progress, bar=False, sides_root=root)
    except (RunFailed, RunRefused, UsageError) as exc:
        return TrialResult("failed", None, "", first_line(str(exc)), time.monotonic() - started)
    seconds = time.monotonic() - started
    pairs = pair_figures(record)
    if not pairs:
        return TrialResult("failed", None, record.candidate_run,
                           "no pair of blocks finished with both figures", seconds)
    against = against_record(record, reference, pairs, direction, out_dir)
    raw = reference.raw_value * against["ratio"]
    penalty = debt_penalty(run_debt(record.candidate_run)) if record.candidate_run else \
        debt_penalty(None)
    return TrialResult("ok", penalised(raw, penalty.share, direction), record.candidate_run,
                       "", seconds, raw_value=raw, penalty=penalty, against=against)


def pair_figures(record: BlockRecord) -> list[tuple[float, float]]:
    """Each counted pair's (reference, trial) headline, both positive, in pair order (of
    blocks, or of turns)."""
    if record.turns:
        a, b, _ = pair_values(record.turns)
        return [(x, y) for x, y in zip(a, b, strict=True) if x > 0 and y > 0]
    by_pair: dict[int, dict[str, float]] = {}
    for b in record.blocks:
        if b.status == "ok" and not b.pilot and not b.check and b.headline is not None:
            by_pair.setdefault(b.pair, {})[b.side] = b.headline
    return [(p["A"], p["B"]) for _, p in sorted(by_pair.items())
            if p.get("A", 0) > 0 and p.get("B", 0) > 0]


def against_record(record: BlockRecord, reference: Reference,
                   pairs: list[tuple[float, float]], direction: int, out_dir: Path
                   ) -> dict[str, Any]:
    """What the trial's record keeps of its comparison: the reference, the change with
    its 95% interval (``compare.paired``), the pairs and where the blocks are (relative
    to the search's directory)."""
    from pgdyno.compare.paired import paired_change

    est = paired_change([a for a, _ in pairs], [b for _, b in pairs], level=0.95,
                        direction=direction).change
    logs = [math.log(b / a) for a, b in pairs]
    return {"trial": reference.number, "label": reference.label,
            "ratio": math.exp(sum(logs) / len(logs)),
            "change_pct": est.change_pct, "low_pct": est.low_pct, "high_pct": est.high_pct,
            "method": est.method, "pairs": len(pairs),
            "blocks": f"{out_dir.parent.name}/{out_dir.name}/blocks.json",
            "reference_run": record.baseline_run}
