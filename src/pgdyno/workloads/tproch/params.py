"""TPROC-H substitution parameters and query orders, as the TPC-H specification's qgen draws them.

Each query's parameters follow its clause 2.4.N.3 "Substitution Parameters"; the value
lists (nations, regions, part types, containers, segments, ship modes, the words of
P_NAME) are those of clause 4.2.2.13 and 4.2.3, which the generated data uses.

Why a generator per (seed, stream, query) rather than one per stream: running a subset of
the queries (``--queries 3,5``) must give those queries the same values as the full
set, so that a subset run is comparable with a full one. The generator is
``random.Random`` seeded with a string: its seeding (SHA-512 of the text) is the same on
every platform and Python version, unlike ``hash()``.

``DOMAINS`` declares every parameter's domain once; the same objects draw the values and
check them (``validate``), so the rule and its test cannot drift apart.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Protocol

from pgdyno.errors import UsageError

QUERIES: tuple[int, ...] = tuple(range(1, 23))

# ----- value lists of the specification (clause 4.2.2.13, 4.2.3) ----------------------------

REGIONS: tuple[str, ...] = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
"""R_NAME by R_REGIONKEY."""

NATIONS: tuple[tuple[str, int], ...] = (
    ("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
    ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
    ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0),
    ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3),
    ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
)
"""(N_NAME, N_REGIONKEY) by N_NATIONKEY."""

NATION_NAMES: tuple[str, ...] = tuple(name for name, _ in NATIONS)
REGION_OF: dict[str, str] = {name: REGIONS[region] for name, region in NATIONS}

SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
TYPE_SYLLABLE_1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_SYLLABLE_2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_SYLLABLE_3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
CONTAINER_SYLLABLE_1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_SYLLABLE_2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")

_COLOR_WORDS = """
    almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood
    burnished chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim
    dodger drab firebrick floral forest frosted gainsboro ghost goldenrod green grey honeydew
    hot indian ivory khaki lace lavender lawn lemon light lime linen magenta maroon medium
    metallic midnight mint misty moccasin navajo navy olive orange orchid pale papaya peach
    peru pink plum powder puff purple red rose rosy royal saddle salmon sandy seashell sienna
    sky slate smoke snow spring steel tan thistle tomato turquoise violet wheat white yellow
"""
COLORS: tuple[str, ...] = tuple(_COLOR_WORDS.split())
"""The 92 words P_NAME is made of (the spec's list for P_NAME)."""


def _words(*syllables: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(" ".join(parts) for parts in itertools.product(*syllables))


TYPES = _words(TYPE_SYLLABLE_1, TYPE_SYLLABLE_2, TYPE_SYLLABLE_3)
"""The 150 three-syllable P_TYPE values."""
TYPE_PREFIXES = _words(TYPE_SYLLABLE_1, TYPE_SYLLABLE_2)
"""First two syllables of a type (Q16): uniform over these is uniform over a type's first
two syllables."""
CONTAINERS = _words(CONTAINER_SYLLABLE_1, CONTAINER_SYLLABLE_2)
BRANDS: tuple[str, ...] = tuple(f"Brand#{m}{n}" for m in range(1, 6) for n in range(1, 6))
"""Brand#MN, M and N each uniform in 1..5."""
COUNTRY_CODES: tuple[int, ...] = tuple(range(10, 35))
"""C_PHONE's country code is N_NATIONKEY + 10 (clause 4.2.2.9)."""
Q13_WORD1 = ("special", "pending", "unusual", "express")
Q13_WORD2 = ("packages", "requests", "accounts", "deposits")

# ----- domains: each draws a value and knows whether a value belongs ---------------------


class Domain(Protocol):
    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> Any: ...

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool: ...


@dataclass(frozen=True)
class Choice:
    """One of ``values``, uniformly."""

    values: tuple[Any, ...]

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> Any:
        return rng.choice(self.values)

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return value in self.values and type(value) is type(self.values[0])


@dataclass(frozen=True)
class Integers:
    """An integer in [low, high], uniformly."""

    low: int
    high: int

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> int:
        return rng.randint(self.low, self.high)

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return type(value) is int and self.low <= value <= self.high


@dataclass(frozen=True)
class Hundredths:
    """A value in [low/100, high/100] with two decimals (Q6's DISCOUNT): qgen draws the
    integer and divides, so 0.02, 0.03, ... 0.09, never 0.0437."""

    low: int
    high: int

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> float:
        return rng.randint(self.low, self.high) / 100

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return (type(value) is float and round(value * 100) / 100 == value
                and self.low <= round(value * 100) <= self.high)


@dataclass(frozen=True)
class Days:
    """A day in [first, last], uniformly."""

    first: date
    last: date

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> date:
        return self.first + timedelta(days=rng.randint(0, (self.last - self.first).days))

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return type(value) is date and self.first <= value <= self.last


def _month_starts(first: date, last: date) -> tuple[date, ...]:
    months = (last.year - first.year) * 12 + last.month - first.month
    return tuple(date(first.year + (first.month - 1 + k) // 12, (first.month - 1 + k) % 12 + 1, 1)
                 for k in range(months + 1))


def month_starts(first: date, last: date) -> Choice:
    """The first day of a month from ``first``'s month to ``last``'s, uniformly."""
    return Choice(_month_starts(first, last))


def year_starts(first: int, last: int) -> Choice:
    """January 1st of a year in [first, last], uniformly."""
    return Choice(tuple(date(y, 1, 1) for y in range(first, last + 1)))


@dataclass(frozen=True)
class OtherThan:
    """One of ``values`` other than the value of parameter ``key`` (Q7's NATION2, Q12's
    SHIPMODE2): uniform over the rest, as qgen's draw-again-until-different is."""

    values: tuple[Any, ...]
    key: str

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> Any:
        return rng.choice([v for v in self.values if v != drawn[self.key]])

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return value in self.values and value != drawn.get(self.key)


@dataclass(frozen=True)
class RegionOfNation:
    """The region of parameter ``key``'s nation (Q8's REGION): not drawn, derived."""

    key: str

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> str:
        return REGION_OF[drawn[self.key]]

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return value == REGION_OF.get(drawn.get(self.key))


@dataclass(frozen=True)
class PerScaleFactor:
    """``numerator / SF`` (Q11's FRACTION): the share of the stock value that keeps the
    answer's size independent of the scale factor."""

    numerator: float

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> float:
        return self.numerator / sf

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return type(value) is float and math.isclose(value, self.numerator / sf, rel_tol=1e-12)


@dataclass(frozen=True)
class DistinctSet:
    """``count`` different values of ``values``, in drawn order (Q16's sizes, Q22's codes)."""

    count: int
    values: tuple[Any, ...]

    def draw(self, rng: random.Random, drawn: dict[str, Any], sf: float) -> tuple[Any, ...]:
        return tuple(rng.sample(self.values, self.count))

    def holds(self, value: Any, drawn: dict[str, Any], sf: float) -> bool:
        return (isinstance(value, tuple | list) and len(value) == self.count
                and len(set(value)) == self.count and all(v in self.values for v in value))


ANY_NATION = Choice(NATION_NAMES)
ANY_REGION = Choice(REGIONS)
FIRST_OF_YEAR = year_starts(1993, 1997)
"""Jan 1st of a year in 1993..1997 (Q5, Q6, Q12, Q20)."""

DOMAINS: dict[int, dict[str, Domain]] = {
    # 2.4.1.3: DELTA in [60, 120] days.
    1: {"delta": Integers(60, 120)},
    # 2.4.2.3: SIZE in [1, 50]; TYPE a syllable 3; REGION any R_NAME.
    2: {"size": Integers(1, 50), "type": Choice(TYPE_SYLLABLE_3), "region": ANY_REGION},
    # 2.4.3.3: SEGMENT any; DATE a day in [1995-03-01, 1995-03-31].
    3: {"segment": Choice(SEGMENTS), "date": Days(date(1995, 3, 1), date(1995, 3, 31))},
    # 2.4.4.3: DATE the first day of a month, January 1993 to October 1997.
    4: {"date": month_starts(date(1993, 1, 1), date(1997, 10, 1))},
    # 2.4.5.3: REGION any; DATE Jan 1st of 1993..1997.
    5: {"region": ANY_REGION, "date": FIRST_OF_YEAR},
    # 2.4.6.3: DATE Jan 1st of 1993..1997; DISCOUNT in [0.02, 0.09]; QUANTITY in [24, 25].
    6: {"date": FIRST_OF_YEAR, "discount": Hundredths(2, 9), "quantity": Integers(24, 25)},
    # 2.4.7.3: two different nations.
    7: {"nation1": ANY_NATION, "nation2": OtherThan(NATION_NAMES, "nation1")},
    # 2.4.8.3: NATION any; REGION the nation's region; TYPE any 3-syllable type.
    8: {"nation": ANY_NATION, "region": RegionOfNation("nation"), "type": Choice(TYPES)},
    # 2.4.9.3: COLOR a word of P_NAME.
    9: {"color": Choice(COLORS)},
    # 2.4.10.3: DATE the first day of a month, February 1993 to January 1995.
    10: {"date": month_starts(date(1993, 2, 1), date(1995, 1, 1))},
    # 2.4.11.3: NATION any; FRACTION = 0.0001 / SF.
    11: {"nation": ANY_NATION, "fraction": PerScaleFactor(0.0001)},
    # 2.4.12.3: two different ship modes; DATE Jan 1st of 1993..1997.
    12: {"shipmode1": Choice(SHIP_MODES), "shipmode2": OtherThan(SHIP_MODES, "shipmode1"),
         "date": FIRST_OF_YEAR},
    # 2.4.13.3: WORD1 and WORD2 from their lists.
    13: {"word1": Choice(Q13_WORD1), "word2": Choice(Q13_WORD2)},
    # 2.4.14.3: DATE the first day of a month of a year in 1993..1997.
    14: {"date": month_starts(date(1993, 1, 1), date(1997, 12, 1))},
    # 2.4.15.3: DATE the first day of a month, January 1993 to October 1997.
    15: {"date": month_starts(date(1993, 1, 1), date(1997, 10, 1))},
    # 2.4.16.3: BRAND Brand#MN; TYPE a type's first 2 syllables; 8 different SIZEs in 1..50.
    16: {"brand": Choice(BRANDS), "type": Choice(TYPE_PREFIXES),
         "sizes": DistinctSet(8, tuple(range(1, 51)))},
    # 2.4.17.3: BRAND Brand#MN; CONTAINER any 2-syllable container.
    17: {"brand": Choice(BRANDS), "container": Choice(CONTAINERS)},
    # 2.4.18.3: QUANTITY in [312, 315].
    18: {"quantity": Integers(312, 315)},
    # 2.4.19.3: QUANTITY1 in [1, 10], QUANTITY2 in [10, 20], QUANTITY3 in [20, 30];
    # BRAND1..3 each Brand#MN, drawn independently.
    19: {"quantity1": Integers(1, 10), "quantity2": Integers(10, 20),
         "quantity3": Integers(20, 30), "brand1": Choice(BRANDS), "brand2": Choice(BRANDS),
         "brand3": Choice(BRANDS)},
    # 2.4.20.3: COLOR a word of P_NAME; DATE Jan 1st of 1993..1997; NATION any.
    20: {"color": Choice(COLORS), "date": FIRST_OF_YEAR, "nation": ANY_NATION},
    # 2.4.21.3: NATION any.
    21: {"nation": ANY_NATION},
    # 2.4.22.3: I1..I7 seven different country codes (10..34).
    22: {"codes": DistinctSet(7, COUNTRY_CODES)},
}
"""Every query's parameters, in draw order (a derived one follows what it derives from)."""

# ----- Appendix A: the query order of each stream ---------------------------------------

STREAM_ORDERS: tuple[tuple[int, ...], ...] = (
    (14, 2, 9, 20, 6, 17, 18, 8, 21, 13, 3, 22, 16, 4, 11, 15, 1, 10, 19, 5, 7, 12),
    (21, 3, 18, 5, 11, 7, 6, 20, 17, 12, 16, 15, 13, 10, 2, 8, 14, 19, 9, 22, 1, 4),
    (6, 17, 14, 16, 19, 10, 9, 2, 15, 8, 5, 22, 12, 7, 13, 18, 1, 4, 20, 3, 11, 21),
    (8, 5, 4, 6, 17, 7, 1, 18, 22, 14, 9, 10, 15, 11, 20, 2, 21, 19, 13, 16, 12, 3),
    (5, 21, 14, 19, 15, 17, 12, 6, 4, 9, 8, 16, 11, 2, 10, 18, 1, 13, 7, 22, 3, 20),
    (21, 15, 4, 6, 7, 16, 19, 18, 14, 22, 11, 13, 3, 1, 2, 5, 8, 20, 12, 17, 10, 9),
    (10, 3, 15, 13, 6, 8, 9, 7, 4, 11, 22, 18, 12, 1, 5, 16, 2, 14, 19, 20, 17, 21),
    (18, 8, 20, 21, 2, 4, 22, 17, 1, 11, 9, 19, 3, 13, 5, 7, 10, 16, 6, 14, 15, 12),
    (19, 1, 15, 17, 5, 8, 9, 12, 14, 7, 4, 3, 20, 16, 6, 22, 10, 13, 2, 21, 18, 11),
    (8, 13, 2, 20, 17, 3, 6, 21, 18, 11, 19, 10, 15, 4, 22, 1, 7, 12, 9, 14, 5, 16),
    (6, 15, 18, 17, 12, 1, 7, 2, 22, 13, 21, 10, 14, 9, 3, 16, 20, 19, 11, 4, 8, 5),
    (15, 14, 18, 17, 10, 20, 16, 11, 1, 8, 4, 22, 5, 12, 3, 9, 21, 2, 13, 6, 19, 7),
    (1, 7, 16, 17, 18, 22, 12, 6, 8, 9, 11, 4, 2, 5, 20, 21, 13, 10, 19, 3, 14, 15),
    (21, 17, 7, 3, 1, 10, 12, 22, 9, 16, 6, 11, 2, 4, 5, 14, 8, 20, 13, 18, 15, 19),
    (2, 9, 5, 4, 18, 1, 20, 15, 16, 17, 7, 21, 13, 14, 19, 8, 22, 11, 10, 3, 12, 6),
    (16, 9, 17, 8, 14, 11, 10, 12, 6, 21, 7, 3, 15, 5, 22, 20, 1, 13, 19, 2, 4, 18),
    (1, 3, 6, 5, 2, 16, 14, 22, 17, 20, 4, 9, 10, 11, 15, 8, 12, 19, 18, 13, 7, 21),
    (3, 16, 5, 11, 21, 9, 2, 15, 10, 18, 17, 7, 8, 19, 14, 13, 1, 4, 22, 20, 6, 12),
    (14, 4, 13, 5, 21, 11, 8, 6, 3, 17, 2, 20, 1, 19, 10, 9, 12, 18, 15, 7, 22, 16),
    (4, 12, 22, 14, 5, 15, 16, 2, 8, 10, 17, 9, 21, 7, 3, 6, 13, 18, 11, 20, 19, 1),
    (16, 15, 14, 13, 4, 22, 18, 19, 7, 1, 12, 17, 5, 10, 20, 3, 9, 21, 11, 2, 6, 8),
    (20, 14, 21, 12, 15, 17, 4, 19, 13, 10, 11, 1, 16, 5, 18, 7, 8, 22, 9, 6, 3, 2),
    (16, 14, 13, 2, 21, 10, 11, 4, 1, 22, 18, 12, 19, 5, 7, 8, 6, 3, 15, 20, 9, 17),
    (18, 15, 9, 14, 12, 2, 8, 11, 22, 21, 16, 1, 6, 17, 5, 10, 19, 4, 20, 13, 3, 7),
    (7, 3, 10, 14, 13, 21, 18, 6, 20, 4, 9, 8, 22, 15, 2, 1, 5, 12, 19, 17, 11, 16),
    (18, 1, 13, 7, 16, 10, 14, 2, 19, 5, 21, 11, 22, 15, 8, 17, 20, 3, 4, 12, 6, 9),
    (13, 2, 22, 5, 11, 21, 20, 14, 7, 10, 4, 9, 19, 18, 6, 3, 1, 8, 15, 12, 17, 16),
    (14, 17, 21, 8, 2, 9, 6, 4, 5, 13, 22, 7, 15, 3, 1, 18, 16, 11, 10, 12, 20, 19),
    (10, 22, 1, 12, 13, 18, 21, 20, 2, 14, 16, 7, 15, 3, 4, 17, 5, 19, 6, 8, 9, 11),
    (10, 8, 9, 18, 12, 6, 1, 5, 20, 11, 17, 22, 16, 3, 13, 2, 15, 21, 14, 19, 7, 4),
    (7, 17, 22, 5, 3, 10, 13, 18, 9, 1, 14, 15, 21, 19, 16, 12, 8, 6, 11, 20, 4, 2),
    (2, 9, 21, 3, 4, 7, 1, 11, 16, 5, 20, 19, 18, 8, 17, 13, 10, 12, 15, 6, 14, 22),
    (15, 12, 8, 4, 22, 13, 16, 17, 18, 3, 7, 5, 6, 1, 9, 11, 21, 10, 14, 20, 19, 2),
    (15, 16, 2, 11, 17, 7, 5, 14, 20, 4, 21, 3, 10, 9, 12, 8, 13, 6, 18, 19, 22, 1),
    (1, 13, 11, 3, 4, 21, 6, 14, 15, 22, 18, 9, 7, 5, 10, 20, 12, 16, 17, 8, 19, 2),
    (14, 17, 22, 20, 8, 16, 5, 10, 1, 13, 2, 21, 12, 9, 4, 18, 3, 7, 6, 19, 15, 11),
    (9, 17, 7, 4, 5, 13, 21, 18, 11, 3, 22, 1, 6, 16, 20, 14, 15, 10, 8, 2, 12, 19),
    (13, 14, 5, 22, 19, 11, 9, 6, 18, 15, 8, 10, 7, 4, 17, 16, 3, 1, 12, 2, 21, 20),
    (20, 5, 4, 14, 11, 1, 6, 16, 8, 22, 7, 3, 2, 12, 21, 19, 17, 13, 10, 15, 18, 9),
    (3, 7, 14, 15, 6, 5, 21, 20, 18, 10, 4, 16, 19, 1, 13, 9, 8, 17, 11, 12, 22, 2),
    (13, 15, 17, 1, 22, 11, 3, 4, 7, 20, 14, 21, 9, 8, 2, 18, 16, 6, 10, 12, 5, 19),
)
"""Appendix A's 41 orders: row s is stream s's (stream 0 is the power test's)."""


def stream_order(stream: int) -> list[int]:
    """Stream ``stream``'s query order; streams past 40 reuse the table (s mod 41), as the
    specification does for more streams than it lists."""
    _check_stream(stream)
    return list(STREAM_ORDERS[stream % len(STREAM_ORDERS)])


# ----- drawing ------------------------------------------------------------------------------


def draw(query: int, stream: int, sf: float, seed: int) -> dict[str, Any]:
    """Query ``query``'s parameters for ``stream``: the same for the same (seed, stream)
    whatever other queries are drawn with it."""
    _check_query(query)
    _check_stream(stream)
    _check_sf(sf)
    rng = random.Random(f"tproch:{seed}:{stream}:{query}")
    drawn: dict[str, Any] = {}
    for name, domain in DOMAINS[query].items():
        drawn[name] = domain.draw(rng, drawn, sf)
    return drawn


def draw_stream(stream: int, sf: float, seed: int,
                queries: Iterable[int] = QUERIES) -> dict[int, dict[str, Any]]:
    """Every query of ``queries``'s parameters for ``stream``, by query number."""
    return {q: draw(q, stream, sf, seed) for q in sorted(set(queries))}


def validate(query: int, params: dict[str, Any], sf: float) -> None:
    """Refuse (UsageError) parameters outside the specification's domain for ``query``:
    a hand-edited parameter file must not silently measure another workload."""
    _check_query(query)
    _check_sf(sf)
    domains = DOMAINS[query]
    if set(params) != set(domains):
        raise UsageError(f"Q{query} parameters must be exactly {', '.join(domains)}; "
                         f"got {', '.join(params) or 'none'}")
    for name, domain in domains.items():
        if not domain.holds(params[name], params, sf):
            raise UsageError(f"Q{query} parameter {name}={params[name]!r} is outside its "
                             f"domain ({_describe(domain)})")


def _describe(domain: Domain) -> str:
    """A short domain text for an error message (not the 150 types in full)."""
    text = repr(domain)
    return text if len(text) <= 120 else text[:117] + "..."


def _check_query(query: int) -> None:
    if type(query) is not int or query not in DOMAINS:
        raise UsageError(f"query {query!r} is not a TPROC-H query; accepted: 1 to 22")


def _check_stream(stream: int) -> None:
    if type(stream) is not int or stream < 0:
        raise UsageError(f"stream {stream!r} is not a stream number; accepted: 0 or more")


def _check_sf(sf: float) -> None:
    if not isinstance(sf, int | float) or isinstance(sf, bool) or not sf > 0 \
            or not math.isfinite(sf):
        raise UsageError(f"scale factor {sf!r} is not accepted; accepted: a number above 0")
