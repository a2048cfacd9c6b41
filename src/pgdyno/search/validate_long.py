"""The search's long-window validation: does the winner hold when the debt comes due?

Short trials reward deferring work (autovacuum, checkpoints). After the interleaved short
comparison (``confirm``), the winner and its baselines (``--validate-against``: pgtune and
tuned by default, tuned always) run once more, interleaved in balanced rounds (W P T,
T P W), each run a long window: ``--validate D`` gives each config D of load in as many
runs as D holds at two checkpoint cycles and two autovacuum cycles of the slowest config,
from MIN_ROUNDS to MAX_ROUNDS (``rounds_for``; MIN_ROUNDS even when D holds fewer, so the
validation may run longer than asked, and says so), and each run's window is
raised, when shorter, to those cycles (``window_rule``): a checkpoint cycle is its
checkpoint_timeout, or less when max_wal_size fills sooner at the WAL rate measured in its
earlier runs; an autovacuum cycle is its autovacuum_naptime. The report says when the asked
duration was raised.

Where both servers fit on the machine at once (the final comparison's ``--compare-design``
decides, as for it), each baseline instead meets the winner in a block comparison of its
own (``compare.blocks``): both servers up, their long windows interleaved in balanced
order, as many pairs as the rule's rounds, each pair of windows compared; so a change of
the machine's speed between two long runs falls on both configs of a pair alike. The
winner's windows in each comparison count for its figures and debt. A winner that changes
OS settings runs the rounds of whole runs (they would hold for both servers).

The winner holds when its long-window headline beats tuned's significantly (the compare
engine's interval) and its debt is bounded (``unbounded``: tables over their autovacuum
threshold with autovacuum off, or, with it on, tables over it that no worker is on, dead
tuples still growing once autovacuum has had two naptimes to act, and at least 1% of the
live tuples owed beyond the thresholds). When it does not hold,
the search says why and recommends the best config that does. State: validate.json in the
search's directory, saved after every run, so a stopped search resumes here.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from pgdyno.analysis.debt import MaintenanceDebt
from pgdyno.analysis.summary import load_summary
from pgdyno.compare.blocks import INTERLEAVED, SEQUENTIAL
from pgdyno.errors import UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import read_versioned
from pgdyno.runner.longstep import long_step, minutes_words, seconds_words
from pgdyno.search.confirm import (
    TARGET_EFFECT_PCT,
    BlockPair,
    Verdict,
    block_verdict,
    blocks_noise,
    compare_labels,
    run_order,
)
from pgdyno.search.noise import Noise, runs_noise
from pgdyno.search.objective import run_debt
from pgdyno.search.select import balanced_order
from pgdyno.serde import Serialisable
from pgdyno.workloads import registry
from pgdyno.workloads.base import headline_metric, headline_of

SCHEMA_VERSION = 2
"""2: block comparisons (``design``, ``why``, ``blocks``); version 1 ran whole runs."""
MIN_ROUNDS = 4
"""Runs per config at least: the fewest whose comparison decides. Each pair of long windows
is one difference, so two pairs leave the paired interval one degree of freedom (t = 12.7
at 95%), and measured on a noisy 2-vCPU host two pairs of 900 s TPC-B windows, which
varied ±3.4%, resolved only ±12.8% and ±31.8%; four pairs give t = 3.2 (the block
comparison's own floor, ``compare.blocks.MIN_PAIRS_TO_STOP``). When ``--validate`` holds
fewer two-cycle windows, the validation runs longer than asked and says so."""
MAX_ROUNDS = 8
"""Runs per config at most. The same load in more, shorter runs gives the comparison's
interval more degrees of freedom, while a run's noise grows only as 1/√window
(``search.noise``; from a search's 20 s runs that rule predicted ±1.9% for the 900 s runs
of its TPROC-C validation, which measured ±1.8%). Beyond eight, t falls little more
(2.36 at seven degrees of freedom, 1.96 at infinity) and each run adds its warm-up; in
the block design the comparison may stop sooner once its interval is within the
precision the search wants (``confirm.TARGET_EFFECT_PCT``)."""
CYCLES = 2
"""Checkpoint and autovacuum cycles each run's window covers at least."""
VALIDATE_FILE = "validate.json"


@dataclass
class CycleFacts:
    """What sets one config's cycles: its settings and its measured WAL rate."""

    label: str
    checkpoint_timeout_s: float
    max_wal_size_bytes: float
    autovacuum_naptime_s: float
    wal_bytes_per_s: float | None = None


@dataclass
class WindowRule:
    """Each run's window, and why it is that long."""

    asked_s: float
    """--validate: each config's load in the long comparison."""
    per_run_s: float
    """asked_s / rounds."""
    needed_s: float
    """CYCLES checkpoint and autovacuum cycles of the slowest config (0: not known)."""
    window_s: int
    """Each run's measured window: max(per_run_s, needed_s) when enforced."""
    slowest: str = ""
    checkpoint_cycle_s: float = 0.0
    autovacuum_cycle_s: float = 0.0
    enforced: bool = True
    note: str = ""
    rounds: int = MIN_ROUNDS
    """Runs per config (``rounds_for``)."""

    @property
    def raised(self) -> bool:
        return self.window_s > math.ceil(self.per_run_s)

    @property
    def load_s(self) -> float:
        """Each config's load over its runs: more than asked when the window was raised."""
        return float(self.rounds * self.window_s)


def checkpoint_cycle_s(facts: CycleFacts) -> float:
    """checkpoint_timeout, or the time max_wal_size takes to fill at the measured WAL rate
    when that is sooner."""
    if facts.wal_bytes_per_s and facts.wal_bytes_per_s > 0:
        return min(facts.checkpoint_timeout_s, facts.max_wal_size_bytes / facts.wal_bytes_per_s)
    return facts.checkpoint_timeout_s


def rounds_for(asked_s: float, needed_s: float, enforce: bool) -> int:
    """Runs per config: as many as ``asked_s`` holds at the window the cycles need, from
    MIN_ROUNDS to MAX_ROUNDS (MIN_ROUNDS when the cycles are unknown or not enforced)."""
    if not enforce or needed_s <= 0:
        return MIN_ROUNDS
    return max(MIN_ROUNDS, min(MAX_ROUNDS, int(asked_s // needed_s)))


def window_rule(asked_s: float, facts: list[CycleFacts], enforce: bool = True) -> WindowRule:
    """Each run's window: the asked share of ``rounds_for`` runs, raised to CYCLES
    checkpoint cycles and CYCLES autovacuum cycles of the slowest config (``enforce``
    False: as asked, said so)."""
    needed, slowest, ckpt, nap = 0.0, "", 0.0, 0.0
    for f in facts:
        need = CYCLES * max(checkpoint_cycle_s(f), f.autovacuum_naptime_s)
        if need > needed:
            needed, slowest = need, f.label
            ckpt, nap = checkpoint_cycle_s(f), f.autovacuum_naptime_s
    rounds = rounds_for(asked_s, needed, enforce)
    per_run = asked_s / rounds
    window = math.ceil(max(per_run, needed) if enforce else per_run)
    rule = WindowRule(asked_s=asked_s, per_run_s=per_run, needed_s=needed, window_s=window,
                      slowest=slowest, checkpoint_cycle_s=ckpt, autovacuum_cycle_s=nap,
                      enforced=enforce, rounds=rounds)
    if not facts:
        rule.note = ("the cycles are not known (no earlier run recorded its settings: "
                     "telemetry off?): each run is as long as asked")
    elif rule.raised:
        rule.note = (f"each run was raised from {per_run:,.0f} s to {window} s: {CYCLES} "
                     f"checkpoint cycles ({ckpt:,.0f} s each) and {CYCLES} autovacuum cycles "
                     f"({nap:,.0f} s each) of {slowest}, in {rounds} runs a config (the "
                     f"fewest whose comparison decides): {minutes_words(rule.load_s)} of "
                     f"load a config where {minutes_words(asked_s)} were asked")
    elif not enforce and needed > per_run:
        rule.note = (f"each run is {window} s as asked, shorter than the {needed:,.0f} s of "
                     f"{CYCLES} checkpoint and autovacuum cycles of {slowest}: debt that "
                     "comes due later is not seen")
    return rule


OWED_FLOOR = 0.01
"""With autovacuum on, debt counts as unbounded only when the dead tuples beyond the tables'
thresholds are at least this share of the workload's live tuples: tiny tables that every
transaction updates (TPC-B's 50 branches and 500 tellers) are always a few thousand dead
tuples over their 50-row threshold between two naptimes, which is autovacuum keeping up,
not a debt that grows (measured: 5,106 to 6,270 owed on 13.4 million live tuples, 0.04%,
for every config of bench/search_goal.py's TPC-B validation)."""


def unbounded(debt: MaintenanceDebt | None) -> str:
    """Why the debt grows without bound ('' when it does not, or is not known)."""
    if debt is None or debt.autovacuum_backlog <= 0:
        return ""
    span = debt.end_epoch - debt.start_epoch
    if debt.autovacuum and (debt.dead_tuples_growth_per_min <= 0
                            or span < CYCLES * debt.autovacuum_naptime_s):
        return ""  # shrinking, or autovacuum has not had its cycles yet: not judged
    if debt.autovacuum and debt.owed_dead_tuples < OWED_FLOOR * debt.live_tuples_end:
        return ""  # hot little tables between two naptimes: autovacuum keeps up
    # With autovacuum off nothing will ever vacuum the tables over their threshold.
    why = "autovacuum is off" if not debt.autovacuum else (
        f"after {span:,.0f} s ({CYCLES}+ naptimes) autovacuum has not caught up")
    return (f"its debt grows without bound: {why}; {debt.autovacuum_backlog} table(s) over "
            f"their autovacuum threshold wait, {debt.dead_tuples_end:,} dead tuples at the end, "
            f"{debt.dead_tuples_growth_per_min:+,.0f} per minute")


@dataclass
class SideResult:
    """One config over the long window."""

    label: str
    config: str
    runs: int
    mean: float | None
    """The headline's mean over its runs (raw, no penalty: the debt is in the figures)."""
    p99_ms: float | None
    debt: MaintenanceDebt | None
    """The debt at the end of its last run."""
    unbounded: str = ""
    series_t_s: list[float] = field(default_factory=list)
    series_value: list[float] = field(default_factory=list)
    """Transactions per second (the 1 s intervals, all transaction types) over its last
    run's measured window, at seconds from the window's start."""


@dataclass
class LongValidation(Serialisable):
    """validate.json: the long comparison's plan, runs and verdicts."""

    sides: dict[str, str]
    """label -> config; the first is the search's winner."""
    rule: WindowRule
    order: list[str]
    done: int = 0
    runs: dict[str, list[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    results: list[SideResult] = field(default_factory=list)
    holds: bool = False
    recommended: str = ""
    recommendation: str = ""
    noise: Noise | None = None
    """The run-to-run noise of the long runs, and what it lets the comparison resolve."""
    design: str = SEQUENTIAL
    """``sequential`` (whole runs in rounds) or ``interleaved`` (each baseline against the
    winner in blocks of the long window)."""
    why: str = ""
    blocks: dict[str, BlockPair] = field(default_factory=dict)
    """Baseline label -> its block comparison with the winner, once done."""
    schema_version: int = SCHEMA_VERSION

    @property
    def winner(self) -> str:
        return next(iter(self.sides))


def load_validation(path: Path) -> LongValidation | None:
    """The long validation saved at ``path`` (None: none begun), or one line naming the
    file when it is damaged or of a version this pgdyno does not read."""
    if not path.exists():
        return None
    return read_versioned(LongValidation, path, SCHEMA_VERSION, "long validation",
                          "; move it away to run the validation afresh",
                          older={1: dict})  # version 1: whole runs, the default


def cycle_facts(label: str, run_dirs: list[str]) -> CycleFacts | None:
    """A config's settings from the debt its earlier runs recorded, and its WAL rate."""
    debt, rate = None, None
    for run_dir in run_dirs:
        got = run_debt(run_dir)
        debt = got or debt
        try:
            summary = load_summary(Path(run_dir) / "summary.json")
        except (OSError, UsageError, ValueError, KeyError, TypeError):
            continue
        rates = [it.telemetry.wal.bytes_per_s for it in summary.iterations
                 if it.telemetry is not None and it.telemetry.wal.bytes_per_s]
        if rates:
            rate = max(rate or 0.0, max(rates))
    if debt is None:
        return None
    return CycleFacts(label, debt.checkpoint_timeout_s, debt.max_wal_size_bytes,
                      debt.autovacuum_naptime_s, rate)


def plan_validation(sides: dict[str, str], asked_s: float, earlier: dict[str, list[str]],
                    enforce: bool = True, design: str = SEQUENTIAL, why: str = ""
                    ) -> LongValidation:
    facts = [f for label in sides if (f := cycle_facts(label, earlier.get(label, [])))]
    rule = window_rule(asked_s, facts, enforce)
    order = balanced_order(list(sides), rule.rounds) if design == SEQUENTIAL else []
    return LongValidation(sides=dict(sides), rule=rule, order=order,
                          runs={label: [] for label in sides}, design=design, why=why)


def validation_design(asked: str, base: BenchOptions, winner_changes_os: bool
                      ) -> tuple[str, str]:
    """(design, why): the final comparison's choice (``confirm.confirmation_design``),
    a duet's interleaved: the long window judges each config's own debt and throughput,
    which sharing the machine for minutes would change."""
    from pgdyno.search.confirm import confirmation_design

    design, why = confirmation_design(asked, base, winner_changes_os)
    if design == SEQUENTIAL:
        return design, why
    return INTERLEAVED, (why if design == INTERLEAVED else
                         "duet asked for the comparison; the long windows run interleaved, "
                         "each config alone in its windows, as its debt is judged alone")


def run_validation(val: LongValidation, base: BenchOptions, search_dir: Path,
                   role: dict[str, Any], console: Console | None,
                   save: Callable[[LongValidation], None],
                   on_run: Callable[[str], None] | None = None,
                   around: Callable[[str], contextlib.AbstractContextManager] | None = None,
                   sides_root: Path | None = None) -> LongValidation:
    """Run what is left of the order (or of the block comparisons), compare, judge the
    debt, and recommend."""
    if val.design == SEQUENTIAL:
        run_order(val, base, role, console, save, on_run, around,
                  duration_s=val.rule.window_s)
        val.verdicts = compare_labels(list(val.sides), val.runs, search_dir, "validate-vs-")
        val.noise = runs_noise(val.runs, base.workload, val.rule.window_s)
    else:
        run_long_blocks(val, base, search_dir, role, console, save, sides_root)
        val.verdicts = [v for label, pair in val.blocks.items()
                        if (v := block_verdict(val.winner, label, pair, search_dir,
                                               "validate-vs-")) is not None]
        val.noise = blocks_noise(val.blocks, val.winner, search_dir, val.rule.window_s)
    val.results = [side_result(label, val.sides[label], val.runs[label], base.workload)
                   for label in val.sides]
    val.holds, val.recommended, val.recommendation = recommend_long(val, direction_of(base))
    save(val)
    return val


def run_long_blocks(val: LongValidation, base: BenchOptions, search_dir: Path,
                    role: dict[str, Any], console: Console | None,
                    save: Callable[[LongValidation], None], sides_root: Path | None = None
                    ) -> None:
    """Each baseline not compared yet meets the winner in interleaved blocks of the long
    window, as many pairs as the rule's rounds; each comparison saved as it ends."""
    import dataclasses

    from pgdyno.compare.blocks import BlockPlan, Side, run_announced
    from pgdyno.results.rundir import safe_name

    long = dataclasses.replace(base, duration_s=val.rule.window_s, iterations=1, sets=(),
                               show_progress=False)
    winner = val.winner
    for label in list(val.sides)[1:]:
        if label in val.blocks:
            continue  # compared before an interruption: kept
        sides = [Side(name, options=dataclasses.replace(long, config=val.sides[name]),
                      role=tuple({**role, "compare_side": side}.items()))
                 for name, side in ((label, "A"), (winner, "B"))]
        out = search_dir / f"validate-blocks-vs-{safe_name(label)}"

        def say(line: str, label: str = label) -> None:
            if console is not None:
                console.print(f"long validation vs {label}: {line}", markup=False,
                              highlight=False, soft_wrap=True)

        # The comparison may stop at a look once its interval is as narrow as the search's
        # final comparison asks (at the fewest pairs the only look is the last).
        plan = BlockPlan(design=INTERLEAVED, pairs=val.rule.rounds,
                         precision_pct=TARGET_EFFECT_PCT / 2)
        record = run_announced(long, sides[0], sides[1], plan, out,
                               val.why, say, console,
                               f"long validation vs {label}: {val.rule.rounds} pairs of "
                               f"{val.rule.window_s} s windows against {winner}",
                               show_progress=base.show_progress, sides_root=sides_root)
        val.blocks[label] = BlockPair(str(out.relative_to(search_dir) / "blocks.json"),
                                      record.baseline_run, record.candidate_run)
        val.runs[label].append(record.baseline_run)
        val.runs[winner].append(record.candidate_run)
        save(val)


def direction_of(base: BenchOptions) -> int:
    return headline_metric(registry.get(base.workload).metrics).direction or 1


def side_result(label: str, config: str, run_dirs: list[str], workload: str) -> SideResult:
    metrics = registry.get(workload).metrics
    values, p99s, series_t, series_v = [], [], [], []
    for run_dir in run_dirs:
        try:
            summary = load_summary(Path(run_dir) / "summary.json")
        except (OSError, UsageError, ValueError, KeyError, TypeError):
            continue
        head = headline_of(summary, metrics)
        if head is None:
            continue
        values.append(head.value)
        if head.p99_ms is not None:
            p99s.append(head.p99_ms)
        its = [it for it in summary.iterations if it.interval_tps]
        if its:
            series_t = [float(s) for s in range(len(its[-1].interval_tps))]
            series_v = [float(v) for v in its[-1].interval_tps]
    debt = run_debt(run_dirs[-1]) if run_dirs else None
    return SideResult(label=label, config=config, runs=len(values),
                        mean=statistics.fmean(values) if values else None,
                        p99_ms=statistics.fmean(p99s) if p99s else None, debt=debt,
                        unbounded=unbounded(debt), series_t_s=series_t, series_value=series_v)


def recommend_long(val: LongValidation, direction: int) -> tuple[bool, str, str]:
    """(the winner holds, label recommended, the sentence saying why)."""
    winner = val.winner
    by_label = {r.label: r for r in val.results}
    won = by_label.get(winner)
    vs_tuned = next((v for v in val.verdicts if v.baseline == "tuned"), None)
    window = f"{val.rule.window_s} s runs, {val.rule.rounds} per config"
    reasons = []
    if won is None or won.mean is None:
        reasons.append("it has no long-window figure (its runs failed)")
    elif won.unbounded:
        reasons.append(won.unbounded)
    if val.sides[winner] != "tuned":
        if vs_tuned is None:
            reasons.append("no long-window verdict against tuned could be computed")
        elif not vs_tuned.better:
            reasons.append(f"against tuned it is '{vs_tuned.verdict}' "
                           f"({vs_tuned.change_pct:+.1f}%, interval {vs_tuned.ci_low_pct:+.1f}% "
                           f"to {vs_tuned.ci_high_pct:+.1f}%)")
    if not reasons:
        lead = (f" beats tuned ({vs_tuned.change_pct:+.1f}%, interval "
                f"{vs_tuned.ci_low_pct:+.1f}% to {vs_tuned.ci_high_pct:+.1f}%)"
                if vs_tuned is not None else " holds")
        return True, winner, (f"Over the long window ({window}) {winner}{lead} with its debt "
                              f"bounded: recommend {winner}.")
    held = [r for r in val.results if r.label != winner and r.mean is not None
            and not r.unbounded]
    if held:
        best = max(held, key=lambda r: direction * (r.mean or 0.0))
        pick = best.label
        why_pick = (f"the best config that holds is {pick} ({best.mean:,.1f} over the long "
                    "window, its debt bounded)")
    else:
        pick, why_pick = "tuned", "no config holds over the long window; tuned is pgdyno's own"
    return False, pick, (f"The search winner does not hold over the long window ({window}): "
                         f"{'; '.join(reasons)}. {why_pick[0].upper()}{why_pick[1:]}: "
                         f"recommend {pick}.")


def validate_winner(search_dir: Path, conf: Any, winner: Any, winner_file: Path,
                    base: BenchOptions, asked_s: float, enforce: bool, role: dict[str, Any],
                    console: Console | None, show_progress: bool,
                    around: Callable[[str], contextlib.AbstractContextManager] | None = None,
                    against: tuple[str, ...] = ("pgtune", "tuned"),
                    design: tuple[str, str] = (SEQUENTIAL, "asked for"),
                    sides_root: Path | None = None) -> LongValidation:
    """The step after the confirmation (``conf``, or None without one): the winner
    (a search ``Candidate``), pgtune and tuned over the long window, resumed from
    validate.json when it is there."""
    from pgdyno.config.resolve import NAMED
    from pgdyno.results.rundir import write_json_atomic

    path = search_dir / VALIDATE_FILE
    val = load_validation(path)
    if val is None:
        is_named = winner.config in NAMED
        label = winner.label if is_named else f"search winner ({winner.label})"
        sides = {label: winner.config if is_named else str(winner_file)}
        for name in dict.fromkeys((*against, "tuned")):
            if sides[label] != name:
                sides[name] = name
        earlier = {label: list(winner.run_dirs)}
        if conf is not None:
            for key, dirs in conf.runs.items():
                earlier.setdefault(key, []).extend(dirs)
        val = plan_validation(sides, asked_s, earlier, enforce, *design)

    def on_run(label: str) -> None:
        if show_progress and console is not None:
            console.print(f"long validation: run {val.done}/{len(val.order)} ({label}, "
                          f"{val.rule.window_s} s)")

    def announced(label: str) -> contextlib.AbstractContextManager:
        """The run's own ``around``, inside it the run's announcement and progress."""
        stack = contextlib.ExitStack()
        if around is not None:
            stack.enter_context(around(label))
        stack.enter_context(long_step(
            console, f"long validation: run {val.done + 1}/{len(val.order)}, {label}",
            base.warmup_s + val.rule.window_s, window_words(val.rule, base.warmup_s),
            show_progress=show_progress))
        return stack

    left = (val.done < len(val.order) if val.design == SEQUENTIAL
            else len(val.blocks) < len(val.sides) - 1)
    if console is not None and left:
        console.print(plan_words(val, base.warmup_s), markup=False, highlight=False,
                      soft_wrap=True)
    return run_validation(val, base, search_dir, role, console,
                          lambda v: write_json_atomic(path, v.to_dict()), on_run, announced,
                          sides_root)


def plan_words(val: LongValidation, warmup_s: float) -> str:
    """The validation's plan in a line: its configs, runs, their length and the whole."""
    if val.design != SEQUENTIAL:
        left_cmp = len(val.sides) - 1 - len(val.blocks)
        total = left_cmp * 2 * val.rule.rounds * (warmup_s + val.rule.window_s)
        most = "" if val.rule.rounds <= MIN_ROUNDS else "up to "
        return (f"long validation: {', '.join(list(val.sides)[1:])} each against "
                f"{val.winner} in {most}{val.rule.rounds} pairs of interleaved windows of "
                f"{seconds_words(warmup_s + val.rule.window_s)}, both servers up at once "
                f"({left_cmp} comparison(s) left), {most or 'about '}{minutes_words(total)} "
                "of load")
    left = len(val.order) - val.done
    total = left * (warmup_s + val.rule.window_s)
    resumed = f", {val.done} done before" if val.done else ""
    return (f"long validation: {', '.join(val.sides)} in {left} runs of "
            f"{seconds_words(warmup_s + val.rule.window_s)}{resumed}, about "
            f"{minutes_words(total)} of load")


def window_words(rule: WindowRule, warmup_s: float) -> str:
    """What a run of the validation holds, and why it is longer than asked when it is."""
    window = f"{warmup_s:g} s warm-up and a {rule.window_s:,} s window" if warmup_s \
        else f"a {rule.window_s:,} s window"
    if rule.raised:
        return (f"{window}, raised from {rule.per_run_s:,.0f} s to hold {CYCLES} checkpoint "
                f"cycles ({rule.checkpoint_cycle_s:,.0f} s each) and {CYCLES} autovacuum "
                f"cycles ({rule.autovacuum_cycle_s:,.0f} s each) of {rule.slowest}")
    if not rule.enforced and rule.needed_s > rule.window_s:
        return (f"{window} as asked, shorter than the {rule.needed_s:,.0f} s of {CYCLES} "
                f"checkpoint and autovacuum cycles of {rule.slowest}")
    return window
