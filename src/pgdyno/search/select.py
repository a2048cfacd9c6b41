"""Choosing the winner on repeated measurements, not on one lucky trial.

The best single trial of a search is biased upwards: among many noisy measurements the
highest is partly the highest noise (the winner's curse). The leading candidates (the top
``k`` trials) are therefore measured again, ``reruns`` more times each, in a balanced order
(forward, then backward: c1 c2 c3 c3 c2 c1) so that drift over time falls on all of them
alike, and the winner is the candidate with the best mean over all its measurements. A
candidate whose re-run fails cannot win: a config that sometimes does not start is no
recommendation.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.results.manifest import read_versioned
from pgdyno.serde import Serialisable

SCHEMA_VERSION = 1


@dataclass
class Candidate:
    """A config in the running for winner, with every measurement of it."""

    key: str
    """The trial number as text."""
    label: str
    config: str
    values: list[float] = field(default_factory=list)
    """The trial's own value first, then each re-run's."""
    run_dirs: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else float("nan")


@dataclass
class Selection(Serialisable):
    """The leading candidates, their re-runs and the one chosen (saved as select.json)."""

    candidates: list[Candidate]
    order: list[str]
    """Candidate keys in the order their re-runs are (or were) made."""
    done: int = 0
    """How many of ``order`` have been measured (a resumed search goes on from there)."""
    winner: str = ""
    direction: int = 1
    schema_version: int = SCHEMA_VERSION

    def candidate(self, key: str) -> Candidate:
        return next(c for c in self.candidates if c.key == key)


def load_selection(path: Path) -> Selection | None:
    """The selection saved at ``path`` (None: none begun), or one line naming the file when
    it is damaged or of a version this pgdyno does not read."""
    if not path.exists():
        return None
    return read_versioned(Selection, path, SCHEMA_VERSION, "search selection",
                          "; move it away to choose the winner afresh")


def leading(candidates: list[Candidate], k: int, direction: int) -> list[Candidate]:
    """The ``k`` candidates with the best single value (direction +1: highest)."""
    ranked = sorted((c for c in candidates if c.values), key=lambda c: -direction * c.values[0])
    return ranked[:max(1, k)]


def balanced_order(keys: list[str], rounds: int) -> list[str]:
    """``rounds`` passes over ``keys``, alternately forward and backward (ABBA for two)."""
    return [key for r in range(rounds) for key in (keys if r % 2 == 0 else keys[::-1])]


def plan_selection(candidates: list[Candidate], k: int, reruns: int,
                   direction: int) -> Selection:
    lead = leading(candidates, k, direction)
    order = balanced_order([c.key for c in lead], reruns) if len(lead) > 1 else []
    return Selection(candidates=lead, order=order, direction=direction)


def choose(selection: Selection) -> Candidate:
    """The candidate with the best mean; one with a failed re-run only when all failed."""
    sound = [c for c in selection.candidates if c.values and not c.failures]
    pool = sound or [c for c in selection.candidates if c.values]
    return max(pool, key=lambda c: (selection.direction * c.mean, len(c.values)))


def run_selection(selection: Selection,
                  measure: Callable[[Candidate], tuple[float | None, str, str]],
                  after_each: Callable[[Selection], None] | None = None) -> Candidate:
    """Measure what is left of ``selection.order``; ``measure`` returns (value or None when
    it failed, run directory, reason). ``after_each`` saves the state (for resuming)."""
    while selection.done < len(selection.order):
        cand = selection.candidate(selection.order[selection.done])
        value, run_dir, reason = measure(cand)
        if run_dir:
            cand.run_dirs.append(run_dir)
        if value is None:
            cand.failures.append(reason or "failed")
        else:
            cand.values.append(value)
        selection.done += 1
        if after_each is not None:
            after_each(selection)
    winner = choose(selection)
    selection.winner = winner.key
    if after_each is not None:
        after_each(selection)
    return winner
