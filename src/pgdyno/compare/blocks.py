"""Both sides up at once, the load moved between them in short blocks: a comparison that
holds on a machine whose speed drifts.

Running A for minutes and then B for minutes (the sequential design) exposes each side to
whatever speed the machine had at its turn: on a cloud host or a shared VM that jumps
between levels, identical configs come out several percent apart and an interval that
covers the jumps is too wide to decide anything. Here each side is a run of its own, on a
server of its own (its own cluster, its own copy of the dataset, both started before the
first block), and a schedule says which side loads the machine when:

- ``interleaved``: pairs of blocks, one of each side back to back, the order inside each
  pair randomized in balanced quads (AB BA or BA AB), so that neither side always runs
  first and an effect of one block on the next cancels out;
- ``alternating``: both sides' iterations run at once, their loads taking turns of one
  second (``compare.alternate``): a pair is two neighbouring seconds, so that the machine's
  drift, which blocks several seconds apart still see, cancels; the headline only;
- ``duet``: both sides loaded together in every block, so that both see the same
  interference second by second (they also share the machine between them: each sees
  part of it). Every DUET_CHECK_EVERY-th pair is a check pair instead: the two sides
  alone, back to back, as interleaved. Its blocks stay out of the figures; the change
  they show is compared with the duet pairs' (``compare.paired.duet_check``), because
  sharing the machine may favour one side (a config that needs more CPU than half the
  machine loses more under a duet than it would alone).

Each block is one iteration of its side's run (a CHECKPOINT, ``--warmup`` seconds, then
``--duration`` measured seconds), so every figure stays in the runs' raw files as in any
run. After each pair the change is estimated from the pairs so far (``compare.paired``),
and the comparison stops when the interval is as narrow as asked (``--precision``), when
the budget is spent (``--budget``), or after ``--pairs`` pairs, saying which. A Ctrl-C
stops both sides (each run kept and marked interrupted) and removes both clusters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from pgdyno.compare.alternate import (
    ALTERNATING,
    START_LEAD_S,
    Turn,
    Turns,
    balanced_orders,
    lead_seconds,
    pair_values,
    pairs_in,
    turn_order,
    turns_of,
)
from pgdyno.compare.paired import Spending, paired_change, robust_spread_pct
from pgdyno.errors import PgdynoError, RunFailed, RunInterrupted, UsageError
from pgdyno.options import BenchOptions
from pgdyno.results.rundir import utc_now

INTERLEAVED, DUET, SEQUENTIAL, AUTO = "interleaved", "duet", "sequential", "auto"
DESIGNS = (AUTO, ALTERNATING, INTERLEAVED, DUET, SEQUENTIAL)
BLOCK_SCHEMA_VERSION = 3
"""3: an alternating comparison's turns (``BlockRecord.turns``); 2: a duet's check pairs
(``Block.check``); version 1 records had neither."""
DUET_CHECK_EVERY = 4
"""In a duet, one pair in this many runs the sides alone (a check pair)."""
LOOK_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)
"""Where the error rate may be spent when stopping on precision: at these fractions of the
budget (the first pair boundary after each), and at the end."""
MIN_PAIRS_TO_STOP = 4
"""No verdict from fewer pairs: too few to see how the pairs' differences correlate."""
PILOT_PAIRS = 4
"""``--design auto``: pairs of each block design run first, to pick the one that gives the
narrower interval in the time; they are left out of the comparison's figures."""
PILOT_SHARE = 0.25
"""The most of a budget the pilot may take: with less left, the pilot would choose a design
for a comparison too short to use it (a 90 s budget of 5 s blocks left two pairs after
it), so auto picks interleaved without one."""
BLOCK_OVERHEAD_S = 1.0
"""A block's cost beyond its warm-up and window (its CHECKPOINT, the cue): for planning."""
SIDE_STOP_WAIT_S = 120.0
"""How long a side may take to stop its server and write its report once told to."""


@dataclass(frozen=True)
class Side:
    label: str
    config: str = "default"
    sets: tuple[str, ...] = ()
    pg_bin: Path | None = None
    """The side's own server binaries (None: the run's --pg-bin, or the embedded one)."""
    options: BenchOptions | None = None
    """The side's whole run options (a campaign's cell, whose config may change any bench
    option): taken as they are instead of the common options with ``config`` and ``sets``
    over them."""
    role: tuple[tuple[str, Any], ...] = ()
    """What the side's run records of its origin in its manifest (a campaign's cell)."""


@dataclass(frozen=True)
class BlockPlan:
    """How a block comparison runs and when it stops."""

    design: str
    """``interleaved``, ``duet``, ``alternating`` or ``auto``."""
    pairs: int
    """Pairs to run when neither a budget nor a precision is given; else the most. In the
    alternating design, blocks (each of many pairs of turns)."""
    budget_s: float | None = None
    """Seconds of measuring (from the first block) the comparison may use."""
    precision_pct: float | None = None
    """Stop once the headline's interval is at most ± this, in %."""
    confidence: float = 0.95
    seed: int | None = None
    """The order's random seed (None: drawn, and recorded)."""

    def measuring_time(self, opts: BenchOptions) -> tuple[float, str]:
        """How long the comparison measures, and how sure that is: its budget ("up to "),
        else its pairs' blocks of ``opts``' warm-up and window ("about ": a duet's two
        sides share one block's time, a design chosen by pilot pairs may be either)."""
        if self.budget_s is not None:
            return self.budget_s, "up to "
        per_pair = 1 if self.design in (DUET, ALTERNATING) else 2
        return self.pairs * per_pair * (opts.warmup_s + opts.duration_s), "about "


@dataclass
class Block:
    """One measured block: one iteration of one side's run."""

    pair: int
    side: str
    """``A`` (baseline) or ``B`` (candidate)."""
    iteration: int
    """Its iteration number in the side's run."""
    position: int
    """0: first of its pair (or both at once in a duet), 1: second."""
    started_at: str
    seconds: float
    status: str
    headline: float | None
    pilot: bool = False
    """Run to choose the design (``--design auto``), left out of the figures."""
    check: bool = False
    """A duet's check pair: the sides alone, left out of the figures."""


@dataclass
class Look:
    """One look at the pairs so far: the interval at the level this look could spend."""

    pairs: int
    elapsed_s: float
    fraction: float
    alpha: float
    change_pct: float
    low_pct: float
    high_pct: float


@dataclass
class BlockRecord:
    """What a block comparison did, in order: saved as ``blocks.json`` beside compare.md
    and carried in compare.json."""

    schema_version: int
    design: str
    why: str
    """Why this design (``auto``'s reasons, or "asked for")."""
    seed: int
    block_s: int
    warmup_s: int
    headline_metric: str
    orders: list[str] = field(default_factory=list)
    """Each pair's order: ``AB``, ``BA``, or ``A+B`` (a duet block), pilot pairs first."""
    pilot_pairs: int = 0
    """The first pairs, run to choose the design and left out of the figures."""
    blocks: list[Block] = field(default_factory=list)
    looks: list[Look] = field(default_factory=list)
    stop: str = ""
    """Why it stopped: precision reached, budget spent, pairs done, interrupted."""
    budget_s: float | None = None
    precision_pct: float | None = None
    confidence: float = 0.95
    setup_s: float = 0.0
    """From the start until both sides were ready (servers up, datasets built)."""
    measuring_s: float = 0.0
    baseline_run: str = ""
    candidate_run: str = ""
    side_workdirs: list[str] = field(default_factory=list)
    """The clusters' directories, removed when the comparison ended."""
    turns: list[Turn] = field(default_factory=list)
    """The alternating design's measured seconds, a side each, in pairs."""
    switch_late_ms: list[float] = field(default_factory=list)
    """Alternating: per block, the latest a switch came after its second began."""
    missed_switches: int = 0
    """Alternating: switches not made (a side's load not started by then)."""
    common_seed: int | None = None
    """pgbench's --random-seed of both sides' first block (block i: + i - 1), so a pair's
    loads drew alike; None: each side drew its own (not pgbench, or --drivers)."""

    @property
    def final_level(self) -> float:
        """The level of the last look's interval (what the comparison reports)."""
        return 1.0 - self.looks[-1].alpha if self.looks else self.confidence

    def pairs_done(self) -> int:
        """Pairs that count (pilot and check pairs left out)."""
        if self.turns:
            return len({t.pair for t in self.turns})
        return len({b.pair for b in self.blocks
                    if b.status == "ok" and not b.pilot and not b.check})

    def check_pairs(self) -> list[int]:
        """The duet's check pairs (the sides alone), by number."""
        return sorted({b.pair for b in self.blocks if b.check})


def read_block_record(path: Path) -> BlockRecord:
    """A block comparison's record (``blocks.json``), refused in one line when damaged or
    of a version this pgdyno does not read; versions 1 and 2 (no check pairs, no turns)
    are read as they are."""
    from pgdyno.results.manifest import read_versioned

    return read_versioned(BlockRecord, path, BLOCK_SCHEMA_VERSION, "block comparison record",
                          older={1: dict, 2: dict})


def schedule(pairs: int, design: str, rng: random.Random, *, checks: bool = True
             ) -> list[str]:
    """The order of ``pairs`` pairs: balanced quads (AB BA or BA AB, drawn) when
    interleaved; in a duet both sides at once (``A+B``), except that every
    DUET_CHECK_EVERY-th pair is a check pair of the sides alone, its orders drawn in
    balanced quads too (none when ``checks`` is False: the pilot's). An alternating
    comparison's blocks are ``A/B``: both at once, in turns drawn when each starts."""
    if design == ALTERNATING:
        return ["A/B"] * pairs
    if design == DUET:
        solo = iter(schedule(pairs // DUET_CHECK_EVERY, INTERLEAVED, rng) if checks else [])
        return [next(solo) if checks and i % DUET_CHECK_EVERY == DUET_CHECK_EVERY - 1
                else "A+B" for i in range(pairs)]
    return balanced_orders(pairs, rng)


class Stopper:
    """When a block comparison stops, and the interval it reports: the looks, kept apart
    from the processes so that the rule can be checked on its own.

    Without ``precision_pct`` there is one look, after the last pair (the pairs asked, or
    the last that fits in the budget), spending the whole error rate. With it, a look is
    due at each of LOOK_FRACTIONS of the budget (at a whole quad of pairs, from
    MIN_PAIRS_TO_STOP on), spending α t² so far; the comparison stops at the first look
    whose interval is within ± the precision, or at the last, which spends what is left."""

    def __init__(self, plan: BlockPlan, direction: int = 1,
                 planned_pairs: int | None = None) -> None:
        self.plan, self.direction = plan, direction
        self.planned_pairs = planned_pairs or plan.pairs
        """The pairs a comparison without a budget runs (an alternating one's: its blocks'
        turns)."""
        self.spending = Spending(alpha=1.0 - plan.confidence)
        self.looks: list[Look] = []
        self.stop = ""

    def after_pair(self, a: list[float], b: list[float], elapsed: float, *,
                   last: bool) -> bool:
        """Look if a look is due after this pair; True when the comparison stops here."""
        pairs = len(a)
        if last:
            look = self.take(a, b, elapsed, 1.0, final=True)
            self.stop = "pairs done" if self.plan.budget_s is None else "budget spent"
            if self.narrow_enough(look):
                self.stop = "precision reached"
            return True
        if self.plan.precision_pct is None or pairs < MIN_PAIRS_TO_STOP or pairs % 2:
            # Pairs are looked at in whole quads, so that both orders weigh the same.
            return False
        fraction = (elapsed / self.plan.budget_s if self.plan.budget_s is not None
                    else pairs / self.planned_pairs)
        due = [f for f in LOOK_FRACTIONS if f <= fraction + 1e-9]
        if not due or due[-1] <= self.spending.last_fraction + 1e-9:
            return False
        if self.narrow_enough(self.take(a, b, elapsed, due[-1], final=False)):
            self.stop = "precision reached"
            return True
        return False

    def end(self, a: list[float], b: list[float], elapsed: float) -> None:
        """The budget ran out before the last look was due: it is taken now."""
        if not self.stop:
            self.take(a, b, elapsed, 1.0, final=True)
            self.stop = "budget spent"

    def narrow_enough(self, look: Look) -> bool:
        if self.plan.precision_pct is None or math.isnan(look.low_pct):
            return False
        half = max(look.high_pct - look.change_pct, look.change_pct - look.low_pct)
        return half <= self.plan.precision_pct

    def take(self, a: list[float], b: list[float], elapsed: float, fraction: float, *,
             final: bool) -> Look:
        alpha = self.spending.look(fraction, final=final)
        est = paired_change(a, b, level=1.0 - alpha, direction=self.direction).change
        look = Look(pairs=len(a), elapsed_s=round(elapsed, 1), fraction=round(fraction, 3),
                    alpha=alpha, change_pct=est.change_pct, low_pct=est.low_pct,
                    high_pct=est.high_pct)
        self.looks.append(look)
        return look


# ----- the side processes -------------------------------------------------------------

def _side_main(opts: BenchOptions, role: dict[str, Any], conn: Any, log_path: str) -> None:
    """One side's run in a process of its own, paced by the comparison through ``conn``.

    A session of its own: a Ctrl-C at the terminal reaches the comparison, which stops the
    sides itself (one signal each, so that none aborts its own cleanup)."""
    os.setsid()
    # SIGTERM (the comparison's last resort) ends the run as a Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    _end_with_the_comparison()
    from rich.console import Console

    from pgdyno.runner.bench import run_bench
    from pgdyno.runner.gate import PipeGate

    with open(log_path, "a") as log:
        console = Console(file=log, force_terminal=False, width=120)
        try:
            gate = PipeGate(conn, seconds=role.get("design") == ALTERNATING)
            result = run_bench(opts, console, role=role, gate=gate)
            message = ("finished", str(result.run_dir), result.status, "")
        except (RunFailed, RunInterrupted) as exc:
            status = "interrupted" if isinstance(exc, RunInterrupted) else "failed"
            message = ("finished", str(exc.run_dir or ""), status, str(exc))
        except KeyboardInterrupt:
            message = ("finished", "", "interrupted", "interrupted before the run started")
        except PgdynoError as exc:  # refused (bad input found late): its own line
            message = ("finished", "", "failed", str(exc))
        except Exception as exc:  # broken: the comparison says so in one line
            message = ("finished", "", "failed", f"{type(exc).__name__}: {exc}")
        console.print(f"side ended: {message[2]} {message[3]}", markup=False)
    with contextlib.suppress(Exception):
        conn.send(message)


def _end_with_the_comparison() -> None:
    """A SIGTERM to this side when the comparison's process dies, however it dies (a kill
    -9 included): the side then ends its run as on a Ctrl-C, continuing a load the
    comparison had stopped, stopping its server and keeping its partial run; without it
    a stopped pgbench would wait for a SIGCONT that never comes. Linux's prctl; elsewhere
    nothing."""
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:  # the comparison died before the prctl: nothing started yet
        raise SystemExit(1)


@dataclass
class _SideProcess:
    name: str
    """``A`` or ``B``."""
    process: Any
    conn: Any
    ready: int | None = None
    """The iteration number the side waits to start (None: busy or not yet ready)."""
    armed: bool = False
    """Its block is set to load the server and waits for the cue."""
    done: tuple[str, float, dict[str, float]] | None = None
    seconds: list[float] | None = None
    """The last block's headline second by second (the alternating design's turns)."""
    load_pid: int | None = None
    """The current block's load process (its process group), once it has started."""
    finished: tuple[str, str, str] | None = None
    """(run directory, status, reason) once the side's run ended."""

    def handle(self, message: Any) -> None:
        kind = message[0]
        if kind == "ready":
            self.ready = message[1]
        elif kind == "armed":
            self.armed = True
        elif kind == "load":
            self.load_pid = message[2]
        elif kind == "done":
            self.done = (message[2], time.monotonic(), message[3])
            self.seconds = message[4] if len(message) > 4 else None
        elif kind == "finished":
            self.finished = (message[1], message[2], message[3])

    def alive(self) -> bool:
        return self.finished is None and self.process.is_alive()


class BlockComparison:
    """Runs the two sides block by block until the plan says stop."""

    def __init__(self, base: BenchOptions, baseline: Side, candidate: Side, plan: BlockPlan,
                 out_dir: Path, headline: str, direction: int, why: str,
                 say: Callable[[str], None], sides_root: Path | None = None) -> None:
        self.base, self.plan, self.out_dir, self.say = base, plan, out_dir, say
        self.sides = {"A": baseline, "B": candidate}
        self.headline, self.direction = headline, direction
        seed = plan.seed if plan.seed is not None else random.SystemRandom().randrange(2**31)
        self.rng = random.Random(seed)
        # Which side of a duet hears each cue first, drawn apart from the blocks' order:
        # a side always told first would always start its CHECKPOINT and its load first.
        self.cue_rng = random.Random(seed + 1)
        self.record = BlockRecord(
            schema_version=BLOCK_SCHEMA_VERSION, design=plan.design, why=why, seed=seed,
            block_s=base.duration_s, warmup_s=base.warmup_s, headline_metric=headline,
            budget_s=plan.budget_s, precision_pct=plan.precision_pct,
            confidence=plan.confidence)
        self.procs: dict[str, _SideProcess] = {}
        self._seeds: dict[str, int | None] = {}
        """Each side's pgbench seed of its first block (None: it draws its own)."""
        # The stamp and this process: two comparisons never share a side's cluster. A
        # caller that gives its own root keeps the clusters (and their datasets) for its
        # next comparison, as the search's trials do, and removes them itself.
        self.workdir_root = sides_root or (
            base.target.workdir / f"compare-{utc_now().replace(':', '')}-{os.getpid()}")
        self.owns_root = sides_root is None
        self.values: dict[str, list[float]] = {"A": [], "B": []}
        self.piloting = False

    # ----- the whole comparison ---------------------------------------------------------
    def run(self) -> BlockRecord:
        started = time.monotonic()
        made_root = self.owns_root and not self.workdir_root.exists()
        try:
            self._start_sides()
            self._await_ready(list(self.procs.values()))
            self.record.setup_s = time.monotonic() - started
            self._measure()
            self._finish_sides("stop")
        except KeyboardInterrupt:
            self.record.stop = "interrupted"
            self._interrupt_sides()
            self._save()
            raise RunInterrupted("comparison interrupted; both servers stopped, partial runs "
                                 f"kept ({self._run_dirs()})", None) from None
        except BaseException:
            self._interrupt_sides()
            self._save()
            raise
        finally:
            if made_root:
                shutil.rmtree(self.workdir_root, ignore_errors=True)
        self._save()
        return self.record

    def _run_dirs(self) -> str:
        dirs = [p.finished[0] for p in self.procs.values() if p.finished and p.finished[0]]
        return ", ".join(dirs) or "none"

    def _save(self) -> None:
        from pgdyno import serde
        from pgdyno.results.rundir import write_json_atomic

        for name, attr in (("A", "baseline_run"), ("B", "candidate_run")):
            proc = self.procs.get(name)
            if proc is not None and proc.finished is not None:
                setattr(self.record, attr, proc.finished[0])
        with contextlib.suppress(OSError):
            self.out_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.out_dir / "blocks.json", serde.to_dict(self.record))

    # ----- the sides ----------------------------------------------------------------------
    def _side_options(self, name: str) -> BenchOptions:
        workdir = self.workdir_root / ("baseline" if name == "A" else "candidate")
        opts = options_for_side(self.base, self.sides[name], workdir,
                                iterations=self._most_blocks())
        seeded = opts.drivers is None and self._draws_with_pgbench()
        if seeded and opts.random_seed is None:
            # Common random numbers: block i of each side draws from one seed, so a pair's
            # two blocks run the same keys, transactions and think times, and what the
            # workload draws (a paced load's arrivals most of all) leaves the pair's ratio.
            opts = dataclasses.replace(opts, random_seed=self.record.seed)
        self._seeds[name] = opts.random_seed if seeded else None
        both = set(self._seeds.values())
        self.record.common_seed = (next(iter(both)) if len(self._seeds) == 2
                                   and len(both) == 1 else None)
        return opts

    def _draws_with_pgbench(self) -> bool:
        from pgdyno.workloads import registry

        return getattr(registry.get(self.base.workload), "engine", None) == "pgbench"

    def _most_blocks(self) -> int:
        """Blocks a side may run: the pairs asked, or as many as the budget could hold,
        and the pilot's (``--design auto``)."""
        pilot = (2 * PILOT_PAIRS if self.plan.design == AUTO
                 and pilot_fits(self.plan, self.base) else 0)
        if self.plan.budget_s is None:
            return self.plan.pairs + pilot
        per_block = max(1, self.base.duration_s + self.base.warmup_s)
        return max(self.plan.pairs + pilot, math.ceil(self.plan.budget_s / per_block) + 1)

    def _start_sides(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name in ("A", "B"):
            side = self.sides[name]
            parent, child = ctx.Pipe()
            role = {**dict(side.role), "label": side.label, "compare_side": name,
                    "design": self.plan.design}
            opts = self._side_options(name)
            self.record.side_workdirs.append(str(opts.target.workdir))
            log = self.out_dir / f"side-{name}.log"
            process = ctx.Process(target=_side_main, args=(opts, role, child, str(log)),
                                  name=f"pgdyno-compare-{name}", daemon=False)
            process.start()
            child.close()
            self.procs[name] = _SideProcess(name, process, parent)
        self.say(f"starting both servers and building each side's dataset "
                 f"({self.sides['A'].label} and {self.sides['B'].label})")

    def _pump(self, timeout: float | None = None) -> None:
        """Read whatever the sides sent (waiting up to ``timeout``); a side whose process
        ended without a word is marked failed."""
        conns = {p.conn: p for p in self.procs.values() if p.finished is None}
        sentinels = {p.process.sentinel: p for p in self.procs.values() if p.finished is None}
        if not conns:
            return
        for ready in wait([*conns, *sentinels], timeout):
            proc = conns.get(ready)
            if proc is not None:
                try:
                    proc.handle(proc.conn.recv())
                except (EOFError, OSError):
                    proc.finished = proc.finished or ("", "failed", "ended without a word")
            elif (proc := sentinels[ready]).finished is None and not proc.conn.poll():
                proc.process.join(1)
                proc.finished = ("", "failed",
                                 f"its process ended (exit code {proc.process.exitcode})")

    def _check_alive(self, waiting: list[_SideProcess] | None = None) -> None:
        """Fail when a side the comparison waits for ended (any side that failed)."""
        for proc in self.procs.values():
            if proc.finished is not None and (proc.finished[1] != "ok"
                                              or proc in (waiting or [])):
                run_dir, status, reason = proc.finished
                side = self.sides[proc.name].label
                where = f" (run {run_dir})" if run_dir else ""
                raise RunFailed(f"compare: side {proc.name} ({side}) {status} before the "
                                f"comparison ended: {reason}{where}", None)

    def _await_ready(self, procs: list[_SideProcess]) -> None:
        while any(p.ready is None for p in procs):
            self._check_alive(procs)
            self._pump(1.0)
        self._check_alive(procs)

    def _finish_sides(self, word: str) -> None:
        """Tell the sides, once each waits at its gate, to end their runs; wait for their
        reports."""
        while any(p.alive() and p.ready is None for p in self.procs.values()):
            self._pump(1.0)
        for proc in self.procs.values():
            if proc.alive() and proc.ready is not None:
                with contextlib.suppress(OSError):
                    proc.conn.send(word)
                proc.ready = None
        deadline = time.monotonic() + SIDE_STOP_WAIT_S
        while any(p.alive() for p in self.procs.values()) and time.monotonic() < deadline:
            self._pump(1.0)
        for proc in self.procs.values():
            proc.process.join(5)
            if proc.process.is_alive():
                proc.process.kill()
        self._drain()
        for proc in self.procs.values():
            if proc.finished is not None and proc.finished[1] == "failed":
                raise RunFailed(f"compare: side {proc.name} failed: {proc.finished[2]}", None)

    def _drain(self) -> None:
        """Read what ended sides sent last: a side's process may exit (so it no longer
        counts as alive) before its report of the run it made has been read."""
        for proc in self.procs.values():
            with contextlib.suppress(EOFError, OSError):
                while proc.finished is None and proc.conn.poll():
                    proc.handle(proc.conn.recv())

    def _interrupt_sides(self) -> None:
        """One SIGINT to every side still running (a Ctrl-C, as the run loop handles it),
        then wait for them to stop their servers and keep their partial runs."""
        for proc in self.procs.values():
            if proc.process.is_alive() and proc.finished is None:
                if proc.ready is not None:  # waiting at the gate: a word is enough
                    with contextlib.suppress(OSError):
                        proc.conn.send("abort")
                else:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.process.pid, signal.SIGINT)
        deadline = time.monotonic() + SIDE_STOP_WAIT_S
        while any(p.alive() for p in self.procs.values()) and time.monotonic() < deadline:
            with contextlib.suppress(KeyboardInterrupt):
                self._pump(1.0)
        for proc in self.procs.values():
            proc.process.join(5)
            if proc.process.is_alive():
                proc.process.kill()
        self._drain()

    # ----- the blocks -----------------------------------------------------------------------
    def _measure(self) -> None:
        started = time.monotonic()
        design = self.plan.design
        if design == AUTO:
            design = self._pilot() if pilot_fits(self.plan, self.base) else self._no_pilot()
        first = self.record.pilot_pairs + 1
        orders = schedule(self._most_blocks() - self.record.pilot_pairs, design, self.rng)
        planned = (len(orders) * pairs_in(self.base.warmup_s, self.base.duration_s)
                   if design == ALTERNATING
                   else None)
        stopper = Stopper(self.plan, self.direction, planned)
        a, b = self.values["A"], self.values["B"]
        pair_s: list[float] = []
        for pair, order in enumerate(orders, start=first):
            if self._out_of_budget(time.monotonic() - started, pair_s):
                break
            t0 = time.monotonic()
            self.record.orders.append(order)
            self._run_pair(pair, order)
            pair_s.append(time.monotonic() - t0)
            elapsed = time.monotonic() - started
            self.record.measuring_s = elapsed
            looked = len(stopper.looks)
            stop = stopper.after_pair(a, b, elapsed, last=pair == first + len(orders) - 1
                                      or self._out_of_budget(elapsed, pair_s))
            for look in stopper.looks[looked:]:
                self.say(_look_words(look, self.headline))
            if stop:
                break
        looked = len(stopper.looks)
        stopper.end(a, b, time.monotonic() - started)
        for look in stopper.looks[looked:]:
            self.say(_look_words(look, self.headline))
        self.record.looks, self.record.stop = stopper.looks, stopper.stop
        self.record.measuring_s = time.monotonic() - started

    def _pilot(self) -> str:
        """``--design auto``: PILOT_PAIRS pairs of each block design, then the one whose
        pairs would give the narrower interval in the same time (spread² × seconds a pair
        the smaller); recorded with its figures in the design's ``why``."""
        self.piloting = True
        spread: dict[str, tuple[float, float]] = {}
        pair = 0
        for design in (INTERLEAVED, DUET):
            ratios, seconds = [], []
            for order in schedule(PILOT_PAIRS, design, self.rng, checks=False):
                pair += 1
                t0 = time.monotonic()
                self.record.orders.append(order)
                self._run_pair(pair, order)
                seconds.append(time.monotonic() - t0)
                got = {b.side: b.headline for b in self.record.blocks if b.pair == pair}
                if all(v and v > 0 for v in (got.get("A"), got.get("B"))):
                    ratios.append(math.log(got["B"] / got["A"]))
            spread[design] = (robust_spread_pct(ratios) if len(ratios) > 1 else math.inf,
                              statistics.median(seconds))
        self.piloting = False
        self.record.pilot_pairs = pair
        self.record.design, self.record.why = pilot_choice(spread)
        self.say(self.record.why)
        return self.record.design

    def _no_pilot(self) -> str:
        self.record.design, self.record.why = INTERLEAVED, no_pilot_why(self.plan, self.base)
        self.say(self.record.why)
        return INTERLEAVED

    def _out_of_budget(self, elapsed: float, pair_s: list[float]) -> bool:
        """Whether another pair would end after the budget (never before the first)."""
        if self.plan.budget_s is None or not pair_s:
            return False
        return elapsed + statistics.median(pair_s) > self.plan.budget_s

    def _run_pair(self, pair: int, order: str) -> None:
        if order == "A/B":
            self._run_turns(pair)
            return
        if order == "A+B":
            self._run_blocks(pair, ["A", "B"], position=0)
            return
        # In a duet, a pair of the sides alone is a check pair (``schedule``).
        check = self.record.design == DUET and not self.piloting
        for position, name in enumerate(order):
            self._run_blocks(pair, [name], position, check=check)

    def _run_blocks(self, pair: int, names: list[str], position: int, *,
                    check: bool = False) -> None:
        """Start the named sides' next blocks together and wait for them to end."""
        procs = [self.procs[n] for n in names]
        self.cue_rng.shuffle(procs)
        starts = self._arm(procs)
        for proc in procs:
            proc.conn.send("fire")
        for proc, value in self._await_done(procs, starts, pair, position, check=check):
            if not self.piloting and not check:
                self.values[proc.name].append(value if value is not None else math.nan)

    def _arm(self, procs: list[_SideProcess]) -> dict[str, tuple[int, float, str]]:
        """Each side's next block started up to its cue: (iteration, start, stamp) by side.
        Every side's CHECKPOINT is done before any load starts, so that sides loaded
        together begin on the same cue, whichever side's checkpoint took longer."""
        self._await_ready(procs)
        starts = {}
        for proc in procs:
            proc.done, proc.armed, proc.load_pid, proc.seconds = None, False, None, None
            starts[proc.name] = ((proc.ready or 0) + 1, time.monotonic(), utc_now())
            proc.ready = None
            proc.conn.send("go")
        while any(not p.armed for p in procs):
            self._check_alive([p for p in procs if not p.armed])
            self._pump(1.0)
        return starts

    def _await_done(self, procs: list[_SideProcess], starts: dict[str, tuple[int, float, str]],
                    pair: int, position: int, *, check: bool = False
                    ) -> list[tuple[_SideProcess, float | None]]:
        """Wait for the sides' blocks to end and record them; each side's headline."""
        while any(p.done is None for p in procs):
            self._check_alive([p for p in procs if p.done is None])
            self._pump(1.0)
        out = []
        for proc in procs:
            assert proc.done is not None
            status, ended, metrics = proc.done
            iteration, t0, stamp = starts[proc.name]
            value = metrics.get(self.headline)
            self.record.blocks.append(Block(pair=pair, side=proc.name, iteration=iteration,
                                            position=position, started_at=stamp,
                                            seconds=round(ended - t0, 3), status=status,
                                            headline=value, pilot=self.piloting,
                                            check=check))
            out.append((proc, value))
        return out

    def _run_turns(self, block: int) -> None:
        """One alternating block: both sides' next iterations started at one epoch, their
        loads given turns of a second, each turn's headline from its side's seconds."""
        procs = [self.procs["A"], self.procs["B"]]
        starts = self._arm(procs)
        order = turn_order(self.base.warmup_s,
                           pairs_in(self.base.warmup_s, self.base.duration_s), self.rng)
        start_at = time.time() + START_LEAD_S
        self.cue_rng.shuffle(procs)
        for proc in procs:
            proc.conn.send(("fire", start_at))
        turns = Turns(start_at, order, lambda side: self.procs[side].load_pid, self._pump)
        turns.run()
        self._await_done(procs, starts, block, 0)
        first_pair = len({t.pair for t in self.record.turns}) + 1
        measured_from = lead_seconds(self.base.warmup_s)
        missed = {s for s in turns.missed if s >= measured_from}
        new = turns_of(block, first_pair, order, self.base.warmup_s,
                       {p.name: p.seconds for p in procs}, missed)
        self.record.turns += new
        self.record.switch_late_ms.append(
            round(max(turns.late_ms[measured_from:], default=0.0), 2))
        self.record.missed_switches += len(missed)
        a, b, _ = pair_values(new)
        self.values["A"] += a
        self.values["B"] += b


def run_announced(base: BenchOptions, baseline: Side, candidate: Side, plan: BlockPlan,
                  out_dir: Path, why: str, say: Callable[[str], None], console: Any,
                  what: str, *, show_progress: bool = True, bar: bool = True,
                  sides_root: Path | None = None) -> BlockRecord:
    """A block comparison on ``base``'s workload headline, announced as a long step (what,
    how long it measures) before it starts and heard of now and then in a log: how
    `pgdyno compare`, a study and the search's final comparison each run one."""
    from pgdyno.runner.longstep import long_step
    from pgdyno.workloads import registry
    from pgdyno.workloads.metrics import headline_metric

    metric = headline_metric(registry.get(base.workload).metrics)
    seconds, qualifier = plan.measuring_time(base)
    with long_step(console, what, seconds,
                   "measuring time, besides starting both servers and their datasets",
                   qualifier=qualifier, show_progress=show_progress, bar=bar):
        return BlockComparison(base, baseline, candidate, plan, out_dir, metric.name,
                               metric.direction or 1, why, say, sides_root).run()


def _look_words(look: Look, metric: str) -> str:
    if math.isnan(look.low_pct):
        return f"after {look.pairs} pairs: {metric} change undetermined so far"
    return (f"after {look.pairs} pairs ({look.elapsed_s:.0f} s): {metric} "
            f"{look.change_pct:+.2f}% ({100 * (1 - look.alpha):.2f}% interval "
            f"{look.low_pct:+.2f}% to {look.high_pct:+.2f}%)")


def options_for_side(base: BenchOptions, side: Side, workdir: Path | None = None, *,
                     iterations: int | None = None) -> BenchOptions:
    """One side's run options: its config, settings and binaries over the common ones; in
    a block design its own workdir (its cluster) and as many iterations as blocks."""
    from pgdyno.runner.bench import context_of

    if side.options is not None:  # a campaign's cell: its options are the side's own
        base, config, sets = side.options, side.options.config, side.options.sets
    else:
        config, sets = side.config, (*base.sets, *side.sets)
    pg_bin = side.pg_bin or base.target.pg_bin
    kind = base.target.kind
    if side.pg_bin is not None and kind == "embedded":  # its own binaries: a local server
        kind = "local"
    target = dataclasses.replace(base.target, workdir=workdir or base.target.workdir,
                                 pg_bin=pg_bin, kind=kind,
                                 archive_dir=_side_archive_dir(base, workdir),
                                 keep=False if workdir is not None else base.target.keep)
    return dataclasses.replace(base, config=config, sets=sets,
                               target=target, iterations=iterations or base.iterations,
                               context=context_of(base),
                               show_progress=base.show_progress if workdir is None else False)


def _side_archive_dir(base: BenchOptions, workdir: Path | None) -> Path | None:
    """Where a side archives its WAL: the archive directory pgdyno would make in the
    workdir (no --archive-dir given) moves into the side's own workdir, so that the two
    servers never write one directory; one the user named stays as named (and blocks
    the block designs, ``_block_blockers``)."""
    given = base.target.archive_dir
    if workdir is None or given is None or not _is_default_archive_dir(base):
        return given
    return (Path(workdir) / "archive").absolute()


def _is_default_archive_dir(opts: BenchOptions) -> bool:
    """The archive directory is the one pgdyno makes inside the workdir (no --archive-dir
    given: ``targets.archive.parse_archive``)."""
    given = opts.target.archive_dir
    return given is not None and opts.target.workdir is not None and (
        Path(given) == (Path(opts.target.workdir) / "archive").absolute())


def pilot_seconds(opts: BenchOptions) -> float:
    """About how long the pilot takes: PILOT_PAIRS interleaved pairs (two blocks each)
    and PILOT_PAIRS duet pairs (one block each)."""
    return 3 * PILOT_PAIRS * (opts.warmup_s + opts.duration_s + BLOCK_OVERHEAD_S)


def pilot_fits(plan: BlockPlan, opts: BenchOptions) -> bool:
    """Whether ``auto`` may run its pilot: always without a budget (its pairs come on top
    of the pairs asked), else when it takes at most PILOT_SHARE of the budget."""
    return plan.budget_s is None or pilot_seconds(opts) <= PILOT_SHARE * plan.budget_s


def no_pilot_why(plan: BlockPlan, opts: BenchOptions) -> str:
    return (f"auto: both servers fit here, but a pilot of both block designs would take about "
            f"{pilot_seconds(opts):.0f} s of the {plan.budget_s:.0f} s budget (more than "
            f"{PILOT_SHARE:.0%}), so interleaved without one: each side alone in its "
            "blocks, which assumes nothing of how the two share the machine")


def pilot_choice(spread: dict[str, tuple[float, float]]) -> tuple[str, str]:
    """(design, why) from the pilot's (spread of a pair's log ratio in %, seconds a pair)
    per block design: the one whose interval narrows faster (spread² × seconds, the time a
    given precision takes, the smaller; interleaved on a tie, as it shares nothing while
    measuring)."""
    cost = {d: s * s * t for d, (s, t) in spread.items()}
    chosen = min(cost, key=lambda d: (cost[d], d != INTERLEAVED))
    others = [cost[d] for d in cost if d != chosen]
    gain = (min(others) / cost[chosen] if others and cost[chosen] > 0 else math.inf)
    words = ", ".join(f"{d} ±{s:.1f}% a pair in {t:.1f} s" for d, (s, t) in spread.items())
    return chosen, (f"auto: both servers fit here; a pilot of {PILOT_PAIRS} pairs of each "
                    f"block design measured {words}, so {chosen} reaches a given precision "
                    f"about {gain:.1f}× sooner (the pilot pairs are left out of the figures)")


# ----- choosing the design --------------------------------------------------------------

def choose_design(asked: str, opts: BenchOptions, needs_server: bool,
                  dataset_bytes: int | None, available_bytes: int, *,
                  archive_dirs_apart: bool = False, turn_blocker: str | None = None
                  ) -> tuple[str, str]:
    """(design, why): ``asked`` when it can run here, ``auto``'s pick otherwise; a design
    asked for that cannot run is refused in one line. ``archive_dirs_apart``: each side
    names an archive directory of its own (a campaign's configs), which blocks nothing;
    ``turn_blocker``: why the workload's load cannot take turns (``Workload.turn_blocker``,
    "" when it can, which makes ``auto`` pick the alternating design where nothing else
    blocks it); None: the caller offers no turns (it reads each side's latency and
    telemetry, as the search's final comparison does)."""
    if asked not in DESIGNS:
        raise UsageError(f"--design {asked}: accepted values are {', '.join(DESIGNS)}")
    blockers = _block_blockers(opts, needs_server, dataset_bytes, available_bytes,
                               archive_dirs_apart)
    if asked == SEQUENTIAL:
        return SEQUENTIAL, "asked for"
    if asked == ALTERNATING:
        blockers += _turn_blockers(opts, turn_blocker)
        if blockers:
            raise UsageError(f"--design {asked}: {blockers[0]}; use --design interleaved")
        return asked, "asked for"
    if asked in (INTERLEAVED, DUET):
        if blockers:
            raise UsageError(f"--design {asked}: {blockers[0]}; use --design sequential")
        return asked, "asked for"
    if blockers:
        return SEQUENTIAL, f"auto: {blockers[0]}, so the sides run one after the other"
    if turn_blocker is not None and not _turn_blockers(opts, turn_blocker):
        return ALTERNATING, (
            "auto: both servers fit on this machine at once and the load can be paused, so "
            "the two loads take turns of one second: a pair is two neighbouring seconds, "
            "which the machine's drift cannot tell apart (only the headline is compared; "
            "--design interleaved compares latency and telemetry too)")
    return AUTO, ("auto: both servers fit on this machine at once (each side's dataset and "
                  "shared memory within the memory available): a pilot of each block "
                  "design picks the one that resolves more in the time")


def _turn_blockers(opts: BenchOptions, turn_blocker: str | None) -> list[str]:
    """Why the two loads cannot take turns of a second here (empty: they can)."""
    out = []
    if turn_blocker is None:
        out.append("the alternating design compares the headline only, and this "
                   "comparison reads each side's own latency and telemetry")
    elif turn_blocker:
        out.append(turn_blocker)
    if pairs_in(opts.warmup_s, opts.duration_s) < 2:
        lead = lead_seconds(opts.warmup_s)
        out.append(f"a block of {opts.warmup_s + opts.duration_s} s holds no quad of turns "
                   f"after its {lead} s lead (--warmup + --duration of at least {lead + 4} s)")
    return out


def _block_blockers(opts: BenchOptions, needs_server: bool, dataset_bytes: int | None,
                    available_bytes: int, archive_dirs_apart: bool = False) -> list[str]:
    """Why both sides cannot be up at once here (empty: they can)."""
    out = []
    if not needs_server:
        out.append(f"{opts.workload} runs no server, so there is nothing to keep up between "
                   "blocks")
    if opts.target.dsn or opts.target.ssh or opts.target.kind not in ("embedded", "local"):
        out.append("the server is not one pgdyno starts on this machine (--dsn, --ssh): a "
                   "second one cannot be started beside it")
    if len(opts.clients) != 1:
        out.append("blocks compare one client count at a time (--clients has "
                   f"{len(opts.clients)})")
    if opts.cache == "cold":
        out.append("--cache cold drops the OS page cache, which the other side's blocks "
                   "would lose too")
    if opts.target.archive not in ("off", "buffered", "direct"):
        out.append("--archive runs a command of yours, which both servers would run into "
                   "the same place")
    elif (opts.target.archive != "off" and not _is_default_archive_dir(opts)
          and not archive_dirs_apart):
        out.append(f"--archive-dir {opts.target.archive_dir} is one directory, which both "
                   "servers would write (without --archive-dir each side archives into its "
                   "own workdir)")
    if dataset_bytes is not None and 2 * dataset_bytes > 0.7 * available_bytes:
        out.append(f"two copies of the dataset ({2 * dataset_bytes / 2**30:.1f} GiB) would not "
                   f"fit in the memory available ({available_bytes / 2**30:.1f} GiB): the "
                   "sides would evict each other's cache")
    return out
