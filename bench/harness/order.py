"""The order of a script's conditions, round by round.

This machine's speed drifts and jumps between levels, so conditions measured in a fixed
order are not measured alike: the one always run first meets other weather than the one
always run last. Counterbalanced orders (A B, B A, ...) cancel a linear drift; random
orders, drawn from a recorded seed, cancel any pattern of it on average.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from pgdyno.compare.interleave import abba_order

T = TypeVar("T")

ORDERS = ("alternate", "random")
"""What ``round_orders`` accepts: counterbalanced, or drawn."""


def abba(pairs: int) -> list[str]:
    """``A B B A A B ...`` for ``pairs`` pairs: the order of `pgdyno compare`'s sequential
    design, for scripts that compare two sides run by run."""
    return abba_order(pairs)


def alternate(items: Sequence[T], round_no: int) -> list[T]:
    """``items`` in their order in even rounds (0, 2, ...), reversed in odd ones: ABBA for
    two conditions, A B C, C B A for three."""
    return list(items) if round_no % 2 == 0 else list(reversed(items))


def rotate(items: Sequence[T], round_no: int) -> list[T]:
    """``items`` starting at position ``round_no`` (a Latin square over as many rounds as
    items: each condition takes each place once)."""
    shift = round_no % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def random_orders(items: Sequence[T], rounds: int, seed: int) -> list[list[T]]:
    """One random permutation of ``items`` a round, drawn from ``seed``: the same seed
    gives the same orders."""
    rng = random.Random(seed)
    return [rng.sample(list(items), len(items)) for _ in range(rounds)]


def round_orders(items: Sequence[T], rounds: int, how: str = "alternate",
                 seed: int = 0) -> list[list[T]]:
    """Every round's order: ``alternate`` (counterbalanced) or ``random`` (from ``seed``)."""
    if how == "random":
        return random_orders(items, rounds, seed)
    if how != "alternate":
        raise ValueError(f"order {how!r}: expected one of {', '.join(ORDERS)}")
    return [alternate(items, r) for r in range(rounds)]
