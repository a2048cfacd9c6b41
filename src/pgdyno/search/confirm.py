"""The search's last step: the winner against pgtune and tuned, compared.

Where both servers fit on the machine at once (``--compare-design auto``, the default),
the winner meets each baseline in a block comparison of its own (``compare.blocks``):
both servers up, the load moved between them in short blocks, each pair of blocks compared
(a machine whose speed drifts moves both blocks of a pair alike). Each comparison gets the
measuring time the whole-run rounds would have taken, and stops early once its interval
is narrow enough to tell a 5% lead.

Otherwise (``sequential``, or a winner that changes OS settings, which would hold for both
servers) the three configs run whole runs in balanced rounds (W P T, T P W, ...: ABBA for
more than two sides, so a linear drift over time falls on each alike), each run a normal
``pgdyno bench`` run made by the run loop's ``run_one``; then ``compare_runs`` gives each
pair's change, interval and verdict, written as a normal comparison (compare.json, .md,
.html). When a verdict is still undetermined (failed runs), or the interval against tuned
is too wide to tell a 5% difference, more rounds are run, up to twice the rounds asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from pgdyno.compare.blocks import AUTO, INTERLEAVED, SEQUENTIAL
from pgdyno.compare.core import compare_runs
from pgdyno.compare.model import Comparison
from pgdyno.compare.render import write_comparison
from pgdyno.compare.runs import load_run
from pgdyno.compare.stats import FASTER, SAME, UNDETERMINED
from pgdyno.options import BenchOptions
from pgdyno.results.manifest import read_versioned
from pgdyno.runner.bench import run_one
from pgdyno.search.noise import Noise, runs_noise
from pgdyno.search.select import balanced_order
from pgdyno.serde import Serialisable

SCHEMA_VERSION = 2
"""2: block comparisons (``design``, ``why``, ``blocks``); version 1 ran whole runs."""
TARGET_EFFECT_PCT = 5.0
"""The smallest lead over tuned worth telling apart: rounds are added while the interval
is wider than twice this (and the cap allows)."""


@dataclass
class Verdict:
    """The winner against one baseline, on the workload's headline figure."""

    baseline: str
    candidate: str
    metric: str
    label: str
    unit: str
    clients: int
    baseline_mean: float
    candidate_mean: float
    baseline_n: int
    candidate_n: int
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    verdict: str
    compare_dir: str

    @property
    def better(self) -> bool:
        """The candidate is significantly better (in the metric's own direction)."""
        return self.verdict == FASTER

    def sentence(self, confidence: float = 0.95) -> str:
        interval = ("no interval" if math.isnan(self.ci_low_pct) else
                    f"{100 * confidence:.0f}% interval {self.ci_low_pct:+.1f}% to "
                    f"{self.ci_high_pct:+.1f}%")
        return (f"{self.candidate} vs {self.baseline}: {self.label} {self.baseline_mean:,.1f} → "
                f"{self.candidate_mean:,.1f} {self.unit} ({self.candidate_n} vs "
                f"{self.baseline_n} runs), change {self.change_pct:+.1f}%, {interval}: "
                f"{self.verdict}")


@dataclass
class BlockPair:
    """One baseline's block comparison with the winner: its record and the two side runs."""

    record: str
    """blocks.json, relative to the search's directory."""
    baseline_run: str
    winner_run: str


@dataclass
class Confirmation(Serialisable):
    """The interleaved runs and what they showed (saved as confirm.json)."""

    sides: dict[str, str]
    """label -> config run (named config or file); the first is the winner."""
    order: list[str]
    pairs: int
    max_pairs: int
    done: int = 0
    runs: dict[str, list[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    recommendation: str = ""
    recommended: str = ""
    """The label of the config recommended: the winner, or tuned."""
    noise: Noise | None = None
    """The run-to-run noise of the configs' runs, and what it lets the comparison resolve."""
    design: str = SEQUENTIAL
    """``sequential`` (whole runs in rounds), or a block design (``interleaved``,
    ``duet``)."""
    why: str = ""
    blocks: dict[str, BlockPair] = field(default_factory=dict)
    """Baseline label -> its block comparison with the winner, once done."""
    schema_version: int = SCHEMA_VERSION

    @property
    def winner(self) -> str:
        return next(iter(self.sides))


def confirmation_design(asked: str, base: BenchOptions, winner_changes_os: bool
                        ) -> tuple[str, str]:
    """(design, why) of the final comparison, as `pgdyno compare --design` decides it;
    a winner with OS settings runs whole runs (they would hold for both servers)."""
    import psutil

    from pgdyno.compare.blocks import choose_design
    from pgdyno.errors import UsageError
    from pgdyno.workloads import registry

    if winner_changes_os and asked != SEQUENTIAL:
        if asked != AUTO:
            raise UsageError(f"--compare-design {asked}: the winner changes OS settings, which "
                             "would hold for both servers at once; accepted: auto or "
                             "sequential")
        return SEQUENTIAL, ("auto: the winner changes OS settings, which would hold for both "
                            "servers at once, so the configs run one after the other")
    workload = registry.get(base.workload)
    design, why = choose_design(asked, base, workload.needs_server,
                                workload.dataset_bytes(base), psutil.virtual_memory().available)
    if design == AUTO:
        # No pilot: it would spend the comparison's time. Interleaved measures each config
        # alone and compares every metric (the report reads each side's latency and debt);
        # a duet would rank them by what each does beside another.
        return INTERLEAVED, ("auto: both servers fit on this machine at once, so they run "
                             "in interleaved blocks, each config alone in its blocks")
    return design, why


def plan_confirmation(winner_label: str, winner_config: str, pairs: int,
                      max_pairs: int | None = None, design: str = SEQUENTIAL,
                      why: str = "") -> Confirmation:
    """The winner and whichever of pgtune and tuned it is not."""
    sides = {winner_label: winner_config}
    for name in ("pgtune", "tuned"):
        if winner_config != name:
            sides[name] = name
    order = balanced_order(list(sides), pairs) if design == SEQUENTIAL else []
    return Confirmation(sides=sides, order=order, pairs=pairs,
                        max_pairs=max(pairs, max_pairs or 2 * pairs),
                        runs={label: [] for label in sides}, design=design, why=why)


def run_confirmation(conf: Confirmation, base: BenchOptions, search_dir: Path,
                     role: dict[str, Any], console: Console | None,
                     save: Callable[[Confirmation], None],
                     on_run: Callable[[str], None] | None = None,
                     around: Callable[[str], contextlib.AbstractContextManager] | None = None,
                     sides_root: Path | None = None) -> Confirmation:
    """Run what is left of the order, compare, and add rounds while undecided (whole
    runs); or each baseline's block comparison with the winner (in ``sides_root``'s two
    clusters when given: the trials', their datasets built already)."""
    if conf.design != SEQUENTIAL:
        run_blocks(conf, base, search_dir, role, console, save, sides_root)
        conf.verdicts = compare_sides(conf, search_dir)
        conf.noise = _block_noise(conf, search_dir, base)
        conf.recommended, conf.recommendation = recommend(conf)
        save(conf)
        return conf
    while True:
        run_order(conf, base, role, console, save, on_run, around)
        conf.verdicts = compare_sides(conf, search_dir)
        conf.noise = runs_noise(conf.runs, base.workload, base.duration_s)
        rounds = len(conf.order) // max(1, len(conf.sides))
        if not _undecided(conf) or rounds >= conf.max_pairs:
            break
        conf.order += balanced_order(list(conf.sides), rounds + 1)[-len(conf.sides):]
        save(conf)
    conf.recommended, conf.recommendation = recommend(conf)
    save(conf)
    return conf


class Interleaved(Protocol):
    """An interleaved comparison's progress, saved after every run: the confirmation's and
    the long validation's."""

    sides: dict[str, str]
    order: list[str]
    done: int
    runs: dict[str, list[str]]
    failed: list[str]


def run_order(state: Interleaved, base: BenchOptions, role: dict[str, Any],
              console: Console | None, save: Callable[[Any], None],
              on_run: Callable[[str], None] | None = None,
              around: Callable[[str], contextlib.AbstractContextManager] | None = None,
              **replace: Any) -> None:
    """Run what is left of ``state.order``, one run a label (its config, ``base`` otherwise,
    with ``replace`` on top: the long validation's window), saving after each."""
    while state.done < len(state.order):
        label = state.order[state.done]
        opts = dataclasses.replace(base, config=state.sides[label], sets=(), **replace)
        with around(label) if around is not None else contextlib.nullcontext():
            run_dir = run_one(opts, {**role, "label": label, "compare_side": label,
                                     "order": state.done + 1}, console)
        if run_dir is None:
            state.failed.append(f"run {state.done + 1} ({label}) failed")
        else:
            state.runs[label].append(str(run_dir))
        state.done += 1
        save(state)
        if on_run is not None:
            on_run(label)


BLOCK_S = 10
"""Longest measured block of the final comparison: short blocks give many pairs, and fewer
of them straddle a change of the machine's speed."""
BLOCK_WARMUP_S = 2
"""Longest warm-up after each block's CHECKPOINT (both servers stay up and warm)."""


def block_options(base: BenchOptions) -> BenchOptions:
    """The trials' options with blocks no longer than BLOCK_S after BLOCK_WARMUP_S."""
    return dataclasses.replace(base, duration_s=min(base.duration_s, BLOCK_S),
                               warmup_s=min(base.warmup_s, BLOCK_WARMUP_S), iterations=1)


def block_budget_s(conf: Confirmation, base: BenchOptions) -> float:
    """Each block comparison's measuring time: what the whole-run rounds would have taken
    for one baseline (the winner's runs and the baseline's, with each run's overhead)."""
    from pgdyno.runner.bench import RUN_OVERHEAD_S

    return max(10.0, 2 * conf.pairs * (base.duration_s + base.warmup_s + RUN_OVERHEAD_S))


def run_blocks(conf: Confirmation, base: BenchOptions, search_dir: Path,
               role: dict[str, Any], console: Console | None,
               save: Callable[[Confirmation], None], sides_root: Path | None = None) -> None:
    """Each baseline not compared yet meets the winner in a block comparison of its own."""
    from pgdyno.compare.blocks import BlockPlan, Side, run_announced
    from pgdyno.results.rundir import safe_name

    blocks = block_options(base)
    winner = conf.winner
    for label in list(conf.sides)[1:]:
        if label in conf.blocks:
            continue  # compared before an interruption: kept
        sides = [Side(name, options=dataclasses.replace(blocks, config=conf.sides[name],
                                                          sets=()),
                      role=tuple({**role, "compare_side": name}.items()))
                 for name in (label, winner)]
        plan = BlockPlan(design=conf.design, pairs=MIN_BLOCK_PAIRS,
                         budget_s=block_budget_s(conf, base),
                         precision_pct=TARGET_EFFECT_PCT / 2)
        out = search_dir / f"blocks-vs-{safe_name(label)}"

        def say(line: str, label: str = label) -> None:
            if console is not None:
                console.print(f"final comparison vs {label}: {line}", markup=False,
                              highlight=False, soft_wrap=True)

        record = run_announced(blocks, sides[0], sides[1], plan, out, conf.why, say, console,
                               f"final comparison vs {label}: blocks against {winner} "
                               f"({conf.design})", sides_root=sides_root)
        conf.blocks[label] = BlockPair(str(out.relative_to(search_dir) / "blocks.json"),
                                       record.baseline_run, record.candidate_run)
        conf.runs[label].append(record.baseline_run)
        conf.runs[winner].append(record.candidate_run)
        conf.done += 1
        save(conf)


MIN_BLOCK_PAIRS = 4
"""Pairs of blocks a comparison runs at least (the budget decides beyond)."""


def _block_noise(conf: Confirmation, search_dir: Path, base: BenchOptions) -> Noise | None:
    return blocks_noise(conf.blocks, conf.winner, search_dir,
                        block_options(base).duration_s)


def blocks_noise(blocks: dict[str, BlockPair], winner: str, search_dir: Path,
                 window_s: float) -> Noise | None:
    """The comparisons' noise as their blocks show it: each config's blocks (its headline
    per block, pilot and check pairs included) pooled as runs of the block's window."""
    from pgdyno.compare.blocks import read_block_record
    from pgdyno.search.noise import noise_of

    points: list[tuple[str, float]] = []
    for label, pair in blocks.items():
        record = read_block_record(search_dir / pair.record)
        names = {"A": label, "B": winner}
        points += [(f"{names[b.side]} ({label})", b.headline) for b in record.blocks
                   if b.status == "ok" and b.headline is not None]
    return noise_of(points, window_s=window_s) if points else None


def _undecided(conf: Confirmation) -> bool:
    for v in conf.verdicts:
        if v.verdict == UNDETERMINED:
            return True
        wide = (v.ci_high_pct - v.ci_low_pct) > 2 * TARGET_EFFECT_PCT
        if v.baseline == "tuned" and v.verdict == SAME and wide:
            return True
    return False


def compare_sides(conf: Confirmation, search_dir: Path) -> list[Verdict]:
    """The winner's runs against each baseline's, through the compare engine: pair by
    pair of blocks where they ran as block comparisons."""
    if conf.design == SEQUENTIAL:
        return compare_labels(list(conf.sides), conf.runs, search_dir, "compare-vs-")
    out = []
    for label, pair in conf.blocks.items():
        verdict = block_verdict(conf.winner, label, pair, search_dir)
        if verdict is not None:
            out.append(verdict)
    return out


def block_verdict(winner: str, label: str, pair: BlockPair, search_dir: Path,
                  prefix: str = "compare-vs-") -> Verdict | None:
    """The winner against ``label`` pair by pair of blocks, through the compare engine,
    written to ``prefix`` + label."""
    from pgdyno.compare.blocks import read_block_record
    from pgdyno.compare.design import block_design_summary

    record = read_block_record(search_dir / pair.record)
    a, b = load_run(Path(pair.baseline_run)), load_run(Path(pair.winner_run))
    cmp = compare_runs([a], [b], baseline_label=label, candidate_label=winner,
                       design=block_design_summary(record, a, b))
    out_dir = search_dir / f"{prefix}{label}"
    write_comparison(cmp, [a], [b], out_dir)
    return headline_verdict(cmp, label, winner, out_dir)


def compare_labels(labels: list[str], runs: dict[str, list[str]], search_dir: Path,
                   prefix: str) -> list[Verdict]:
    """The first label's runs against each other label's, written to ``prefix`` + label
    (the long validation compares its own runs the same way)."""
    winner = labels[0]
    out = []
    for label in labels[1:]:
        if not runs.get(label) or not runs.get(winner):
            continue
        a = [load_run(Path(p)) for p in runs[label]]
        b = [load_run(Path(p)) for p in runs[winner]]
        cmp = compare_runs(a, b, baseline_label=label, candidate_label=winner)
        out_dir = search_dir / f"{prefix}{label}"
        write_comparison(cmp, a, b, out_dir)
        verdict = headline_verdict(cmp, label, winner, out_dir)
        if verdict is not None:
            out.append(verdict)
    return out


def headline_verdict(cmp: Comparison, baseline: str, candidate: str,
                     out_dir: Path) -> Verdict | None:
    clients = cmp.chart_clients()
    m = cmp.metric(cmp.headline_metric, clients)
    if m is None:
        return None
    return Verdict(baseline=baseline, candidate=candidate, metric=m.metric,
                   label=m.label or m.metric, unit=m.unit, clients=m.clients,
                   baseline_mean=m.baseline_mean, candidate_mean=m.candidate_mean,
                   baseline_n=m.baseline_n, candidate_n=m.candidate_n,
                   change_pct=m.change_pct, ci_low_pct=m.ci_low_pct,
                   ci_high_pct=m.ci_high_pct, verdict=m.verdict, compare_dir=str(out_dir))


def recommend(conf: Confirmation) -> tuple[str, str]:
    """(label recommended, the sentence saying why)."""
    winner = conf.winner
    if conf.sides[winner] == "tuned":
        return "tuned", ("The search found nothing better than tuned: recommend tuned "
                         "(pgdyno tune --config tuned).")
    vs_tuned = next((v for v in conf.verdicts if v.baseline == "tuned"), None)
    if vs_tuned is not None and vs_tuned.better:
        return winner, (f"{winner} beats tuned significantly ({vs_tuned.change_pct:+.1f}%, "
                        f"interval {vs_tuned.ci_low_pct:+.1f}% to {vs_tuned.ci_high_pct:+.1f}%):"
                        f" recommend {winner}.")
    why = ("no verdict could be computed against tuned" if vs_tuned is None
           else f"against tuned it is '{vs_tuned.verdict}' ({vs_tuned.change_pct:+.1f}%, "
                f"interval {vs_tuned.ci_low_pct:+.1f}% to {vs_tuned.ci_high_pct:+.1f}%)")
    return "tuned", (f"Nothing beats tuned significantly: {why}. Recommend tuned "
                     "(pgdyno tune --config tuned).")


def load_confirmation(path: Path) -> Confirmation | None:
    """The comparison saved at ``path`` (None: none begun), or one line naming the file when
    it is damaged or of a version this pgdyno does not read."""
    if not path.exists():
        return None
    return read_versioned(Confirmation, path, SCHEMA_VERSION, "search comparison",
                          "; move it away to run the final comparison afresh",
                          older={1: dict})  # version 1: whole runs, the default

