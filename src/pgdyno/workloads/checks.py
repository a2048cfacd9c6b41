"""Checks of option values shared by the run loop and the workloads: one line each.

Every failure is a ``UsageError`` naming the option, the bad value and what is accepted.
"""

from __future__ import annotations

import math

from pgdyno.config.units import parse_size
from pgdyno.errors import UsageError


def check_positive(value: float | None, option: str, allow_zero: bool = False) -> None:
    if value is None:
        return
    if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        accepted = "zero or more" if allow_zero else "more than zero"
        raise UsageError(f"{option} {value:g}: must be {accepted}")


def check_at_most(value: float | None, option: str, limit: float, why: str) -> None:
    """Refuse a value above ``limit`` (and inf), saying why the limit exists."""
    if value is None:
        return
    if math.isinf(value) or value > limit:
        raise UsageError(f"{option} {value:g}: at most {limit:,g} ({why})")


def check_choice(value: str, option: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise UsageError(f"{option} {value}: accepted values are {', '.join(accepted)}")


def parse_int_list(text: str, option: str, example: str = "4,16,100") -> tuple[int, ...]:
    """A comma-separated list of positive integers (a sweep)."""
    values = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.lstrip("-").isdigit() or int(part) <= 0:
            raise UsageError(f"{option} {text}: {part!r} is not a positive integer; "
                             f"expected a comma-separated list such as {example}")
        values.append(int(part))
    return tuple(values)


def parse_size_option(text: str, option: str) -> int:
    """A size such as 500MB or 1.5GiB, in bytes."""
    try:
        return parse_size(text)
    except (ValueError, UsageError):
        raise UsageError(f"{option} {text}: expected a size such as 500MB, 3GB or 1.5GiB") \
            from None


def exclusive(values: dict[str, object]) -> None:
    """At most one of these options may be given."""
    given = [name for name, value in values.items() if value is not None]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} both given; use one of them")
