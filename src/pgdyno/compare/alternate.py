"""Both sides loaded in turns of one second: the design that cancels a drifting machine best.

The block designs move the load between the two servers every few seconds, and each block
is a run's iteration of its own: a CHECKPOINT, a new pgbench, its clients connecting, a
warm-up. Their pairs are as far apart as a block is long, and on a machine whose speed
changes from second to second (this kind of host: TPC-B's per-second rate has a lag-1
autocorrelation near 0.8, falling to 0.3 at five seconds) neighbouring blocks already see
different speeds: a pair of 5 s blocks differed by ±18% (one standard deviation) on an
A/A comparison, so ten minutes gave ±4.5%.

Here both sides run one long iteration each, started at the same epoch, and their load
generators take turns: every second the comparison stops one side's pgbench (SIGSTOP to
its process group) and continues the other's (SIGCONT). A pair is two neighbouring
seconds, one of each side, in an order drawn in balanced quads (AB BA or BA AB) as the
block designs draw theirs. Nothing restarts between turns: the paused side's clients keep
their connections and their server its caches, and a turn costs a signal, not a warm-up.
The same A/A comparison's pairs differed by ±7%, and a pair takes 2 s instead of 12: in
the same time the interval is about four times narrower.

Each side's figure for its turn is its headline in that second, from the per-second file
every pgbench iteration keeps (a transaction counts in the second it ended, seconds counted
from the common start, so a turn is exactly one of those seconds). A transaction in flight
when its side is stopped finishes when the side continues, counted in the side's next turn;
its latency includes the pause, so this design compares the headline only: the runs'
latency percentiles are not the sides' own. Seconds that ran no transaction on a side (a
stall) leave their pair out and are counted in the record.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

ALTERNATING = "alternating"
TURN_S = 1
"""A side's turn: one second, the resolution of the per-second files. Half-second turns
were measured too: their pairs correlated (0.25 at lag 1) and narrowed nothing."""
START_LEAD_S = 0.5
"""The common start lies this far after the cue: time for both sides to launch pgbench."""


@dataclass
class Turn:
    """One measured second of one side: a pair's half."""

    pair: int
    side: str
    """``A`` or ``B``."""
    block: int
    """The block (the sides' common iteration) it belongs to."""
    second: int
    """Its second, counted from the block's common start."""
    position: int
    """0: first of its pair, 1: second."""
    value: float | None
    """The headline in that second (None: no transaction ended in it, or no figure)."""


def lead_seconds(warmup_s: int) -> int:
    """The unmeasured turns at a block's start: its warm-up, and at least one second, in
    which the loads start and their pids reach the comparison."""
    return max(warmup_s, 1)


def pairs_in(warmup_s: int, duration_s: int) -> int:
    """Measured pairs a block holds (its iteration lasts ``warmup_s + duration_s``): whole
    quads, so that both orders weigh the same in every block."""
    measured = warmup_s + duration_s - lead_seconds(warmup_s)
    return (measured // (2 * TURN_S)) // 2 * 2


def balanced_orders(pairs: int, rng: random.Random) -> list[str]:
    """The orders of ``pairs`` pairs in balanced quads: AB BA or BA AB, drawn, so that
    neither side always runs first (the interleaved blocks' order, and the turns')."""
    out: list[str] = []
    while len(out) < pairs:
        out += rng.choice((["AB", "BA"], ["BA", "AB"]))
    return out[:pairs]


def turn_order(warmup_s: int, pairs: int, rng: random.Random) -> list[str]:
    """Which side runs in each second of a block: the lead's seconds alternating (from a
    side drawn), then ``pairs`` pairs in balanced quads."""
    first = rng.choice("AB")
    other = "B" if first == "A" else "A"
    lead = [first if s % 2 == 0 else other for s in range(lead_seconds(warmup_s))]
    return lead + [side for order in balanced_orders(pairs, rng) for side in order]


class Turns:
    """Gives each side its seconds: stops the one, continues the other, on the second."""

    def __init__(self, start_at: float, order: list[str],
                 pid_of: Callable[[str], int | None], pump: Callable[[float], None]) -> None:
        """``pid_of(side)``: the side's load process (None until it has started);
        ``pump(timeout)``: reads what the sides sent meanwhile, waiting up to that."""
        self.start_at, self.order = start_at, order
        self.pid_of, self.pump = pid_of, pump
        self.late_ms: list[float] = []
        """How late each switch came after its second began (the switch's own cost)."""
        self.missed: list[int] = []
        """Seconds whose switch could not be made (a side's load not started yet)."""

    def run(self) -> None:
        try:
            for second, side in enumerate(self.order):
                moment = self.start_at + second * TURN_S
                self._wait_until(moment)
                if not self._switch(side, moment):
                    self.missed.append(second)
            self._wait_until(self.start_at + len(self.order) * TURN_S)  # the last turn whole
        finally:
            self.release()

    def release(self) -> None:
        """Both sides continue (each ends its iteration at its own time, its -T)."""
        for side in "AB":
            self._signal(side, signal.SIGCONT)

    def _wait_until(self, moment: float) -> None:
        # The sides' messages read while waiting (their loads' pids among them), never
        # past the moment; the last stretch slept, which Linux's timers keep to well under
        # a millisecond (``late_ms`` records it).
        while (left := moment - time.time()) > 0.05:
            self.pump(min(left - 0.03, 0.2))
        time.sleep(max(0.0, moment - time.time()))

    def _switch(self, side: str, moment: float) -> bool:
        other = "B" if side == "A" else "A"
        stopped = self._signal(other, signal.SIGSTOP)
        continued = self._signal(side, signal.SIGCONT)
        self.late_ms.append(1000 * (time.time() - moment))
        return stopped and continued

    def _signal(self, side: str, sig: int) -> bool:
        pid = self.pid_of(side)
        if pid is None:
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        return True


def turns_of(block: int, first_pair: int, order: list[str], warmup_s: int,
             seconds: dict[str, list[float] | None], missed: set[int]) -> list[Turn]:
    """The measured turns of one block, from each side's headline second by second; a
    second whose switch was ``missed`` (both sides may have run) has no figure."""
    lead = lead_seconds(warmup_s)
    out = []
    for second in range(lead, len(order)):
        side = order[second]
        values = seconds.get(side)
        value = values[second] if values is not None and second < len(values) else None
        out.append(Turn(pair=first_pair + (second - lead) // 2, side=side, block=block,
                        second=second, position=(second - lead) % 2,
                        value=value if value and second not in missed else None))
    return out


def pair_values(turns: list[Turn]) -> tuple[list[float], list[float], list[bool]]:
    """Each pair's A and B (NaN for a turn without a figure) and whether A ran first."""
    from pgdyno.compare.paired import pair_up

    return pair_up((t.pair, t.side, t.value, t.position) for t in turns)
