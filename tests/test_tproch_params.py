"""TPROC-H substitution parameters, stream orders and --queries, without a server."""

from __future__ import annotations

import math
from datetime import date

import pytest

from pgdyno.errors import UsageError
from pgdyno.workloads.tproch import params
from pgdyno.workloads.tproch.params import (
    COLORS,
    DOMAINS,
    NATION_NAMES,
    QUERIES,
    REGION_OF,
    REGIONS,
    STREAM_ORDERS,
    draw,
    draw_stream,
    stream_order,
    validate,
)
from pgdyno.workloads.tproch.queries import QUERY_NAMES, parse_query_list

SEEDS = (0, 1, 42, 2**40 + 7)
STREAMS = range(0, 45)


def test_every_query_has_a_domain_and_a_name() -> None:
    assert tuple(DOMAINS) == QUERIES == tuple(range(1, 23))
    assert tuple(QUERY_NAMES) == QUERIES
    assert QUERY_NAMES[1] == "Pricing Summary Report"
    assert QUERY_NAMES[22] == "Global Sales Opportunity"


# ----- the specification's rules, restated here (not through DOMAINS or validate) ----------

PARAMETERS = {
    1: {"delta"}, 2: {"size", "type", "region"}, 3: {"segment", "date"}, 4: {"date"},
    5: {"region", "date"}, 6: {"date", "discount", "quantity"}, 7: {"nation1", "nation2"},
    8: {"nation", "region", "type"}, 9: {"color"}, 10: {"date"}, 11: {"nation", "fraction"},
    12: {"shipmode1", "shipmode2", "date"}, 13: {"word1", "word2"}, 14: {"date"},
    15: {"date"}, 16: {"brand", "type", "sizes"}, 17: {"brand", "container"},
    18: {"quantity"}, 19: {"quantity1", "quantity2", "quantity3", "brand1", "brand2",
                           "brand3"},
    20: {"color", "date", "nation"}, 21: {"nation"}, 22: {"codes"}}
"""Each query's substitution parameters, by name."""
SPEC_REGIONS = {"AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"}
SPEC_NATIONS = {"ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE",
                "GERMANY", "INDIA", "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA",
                "MOROCCO", "MOZAMBIQUE", "PERU", "CHINA", "ROMANIA", "SAUDI ARABIA",
                "VIETNAM", "RUSSIA", "UNITED KINGDOM", "UNITED STATES"}
SEGMENTS = {"AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"}
SHIP_MODES = {"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"}
TYPE_WORDS = ({"STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"},
              {"ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"},
              {"TIN", "NICKEL", "BRASS", "STEEL", "COPPER"})
CONTAINER_WORDS = ({"SM", "LG", "MED", "JUMBO", "WRAP"},
                   {"CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"})


def _month_start(d: date, low: date, high: date) -> bool:
    return d.day == 1 and low <= d <= high


def _new_year(d: date) -> bool:
    return d.month == d.day == 1 and 1993 <= d.year <= 1997


def _brand(text: str) -> bool:
    return len(text) == 8 and text[:6] == "Brand#" and set(text[6:]) <= set("12345")


def _type_of(text: str, words: int) -> bool:
    parts = text.split()
    return len(parts) == words and all(w in TYPE_WORDS[i] for i, w in enumerate(parts))


def assert_spec(v: dict[int, dict], sf: float) -> None:
    """One stream's values against Clause 2.4's rules for every query."""
    assert {q: set(values) for q, values in v.items()} == PARAMETERS
    assert 60 <= v[1]["delta"] <= 120
    assert 1 <= v[2]["size"] <= 50 and v[2]["type"] in TYPE_WORDS[2]
    assert v[2]["region"] in SPEC_REGIONS
    assert v[3]["segment"] in SEGMENTS
    assert date(1995, 3, 1) <= v[3]["date"] <= date(1995, 3, 31)
    assert _month_start(v[4]["date"], date(1993, 1, 1), date(1997, 10, 1))
    assert v[5]["region"] in SPEC_REGIONS and _new_year(v[5]["date"])
    assert _new_year(v[6]["date"]) and v[6]["quantity"] in (24, 25)
    assert v[6]["discount"] in {0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09}
    assert {v[7]["nation1"], v[7]["nation2"]} <= SPEC_NATIONS
    assert v[7]["nation1"] != v[7]["nation2"]
    assert v[8]["nation"] in SPEC_NATIONS and REGION_OF[v[8]["nation"]] == v[8]["region"]
    assert _type_of(v[8]["type"], 3)
    assert v[9]["color"] in COLORS and v[20]["color"] in COLORS
    assert _month_start(v[10]["date"], date(1993, 2, 1), date(1995, 1, 1))
    assert v[11]["nation"] in SPEC_NATIONS
    assert v[11]["fraction"] == pytest.approx(0.0001 / sf, rel=1e-12)
    assert {v[12]["shipmode1"], v[12]["shipmode2"]} <= SHIP_MODES
    assert v[12]["shipmode1"] != v[12]["shipmode2"] and _new_year(v[12]["date"])
    assert v[13]["word1"] in {"special", "pending", "unusual", "express"}
    assert v[13]["word2"] in {"packages", "requests", "accounts", "deposits"}
    assert _month_start(v[14]["date"], date(1993, 1, 1), date(1997, 12, 1))
    assert _month_start(v[15]["date"], date(1993, 1, 1), date(1997, 10, 1))
    assert _brand(v[16]["brand"]) and _type_of(v[16]["type"], 2)
    assert len(set(v[16]["sizes"])) == 8 and all(1 <= s <= 50 for s in v[16]["sizes"])
    container = v[17]["container"].split()
    assert _brand(v[17]["brand"]) and len(container) == 2
    assert container[0] in CONTAINER_WORDS[0] and container[1] in CONTAINER_WORDS[1]
    assert 312 <= v[18]["quantity"] <= 315
    assert 1 <= v[19]["quantity1"] <= 10 and 10 <= v[19]["quantity2"] <= 20
    assert 20 <= v[19]["quantity3"] <= 30
    assert all(_brand(v[19][f"brand{i}"]) for i in (1, 2, 3))
    assert _new_year(v[20]["date"]) and v[20]["nation"] in SPEC_NATIONS
    assert v[21]["nation"] in SPEC_NATIONS
    codes = v[22]["codes"]
    assert len(set(codes)) == 7 and all(10 <= c <= 34 for c in codes)


def test_the_word_lists_are_the_specifications() -> None:
    assert set(REGIONS) == SPEC_REGIONS and set(NATION_NAMES) == SPEC_NATIONS
    assert set(REGION_OF) == SPEC_NATIONS and set(REGION_OF.values()) == SPEC_REGIONS
    assert REGION_OF["BRAZIL"] == "AMERICA" and REGION_OF["JAPAN"] == "ASIA"
    assert len(set(COLORS)) == 92 and {"almond", "green", "forest", "yellow"} <= set(COLORS)


@pytest.mark.parametrize("sf", [0.01, 1.0, 300.0])
def test_every_drawn_value_keeps_the_specifications_rules(sf: float) -> None:
    for seed in SEEDS:
        for stream in STREAMS:
            assert_spec(draw_stream(stream, sf, seed), sf)


def test_the_spec_ranges_hold_for_many_draws() -> None:
    """2,000 streams, each against the rules; uniform draws reach the whole of each range."""
    seen: dict[str, set] = {"delta": set(), "q6date": set(), "discount": set(), "q4": set(),
                            "q10": set(), "q14": set(), "q3": set()}
    for stream in range(2000):
        v = draw_stream(stream, 1.0, 5)
        assert_spec(v, 1.0)
        for key, value in (("delta", v[1]["delta"]), ("q3", v[3]["date"]),
                           ("q4", v[4]["date"]), ("q10", v[10]["date"]),
                           ("q14", v[14]["date"]), ("q6date", v[6]["date"]),
                           ("discount", v[6]["discount"])):
            seen[key].add(value)
    # Uniform draws reach the whole range: both ends and every month.
    assert seen["delta"] == set(range(60, 121))
    assert len(seen["q3"]) == 31
    assert len(seen["q4"]) == 58 and len(seen["q10"]) == 24 and len(seen["q14"]) == 60
    assert len(seen["q6date"]) == 5 and len(seen["discount"]) == 8


def test_same_seed_and_stream_give_the_same_values() -> None:
    assert draw_stream(3, 1.0, 99) == draw_stream(3, 1.0, 99)
    assert draw(16, 3, 1.0, 99) == draw_stream(3, 1.0, 99)[16]


def test_a_subset_of_queries_draws_what_the_full_set_draws() -> None:
    full = draw_stream(2, 10.0, 7)
    subset = draw_stream(2, 10.0, 7, queries=(18, 3, 3))
    assert list(subset) == [3, 18]
    assert subset == {3: full[3], 18: full[18]}


def test_different_streams_and_seeds_differ() -> None:
    streams = [draw_stream(s, 1.0, 11) for s in range(41)]
    assert all(a != b for i, a in enumerate(streams) for b in streams[i + 1:])
    assert draw_stream(1, 1.0, 11) != draw_stream(1, 1.0, 12)
    # Not only as a whole: most single queries' values differ between two streams too.
    a, b = streams[1], streams[2]
    assert sum(a[q] != b[q] for q in QUERIES) >= 15


def test_q11_fraction_is_one_ten_thousandth_over_sf() -> None:
    assert draw(11, 0, 1.0, 1)["fraction"] == pytest.approx(0.0001, rel=1e-12)
    assert draw(11, 0, 0.1, 1)["fraction"] == pytest.approx(0.001, rel=1e-12)
    assert draw(11, 5, 100.0, 1)["fraction"] == pytest.approx(0.000001, rel=1e-12)


def test_validate_refuses_values_outside_their_domain() -> None:
    good = draw(7, 0, 1.0, 1)
    validate(7, good, 1.0)
    bad_cases = [
        (1, {"delta": 59}), (1, {"delta": 121}), (1, {"delta": 90.0}),
        (2, {"size": 15, "type": "BRASS", "region": "ATLANTIS"}),
        (3, {"segment": "BUILDING", "date": date(1995, 4, 1)}),
        (4, {"date": date(1997, 11, 1)}), (4, {"date": date(1994, 3, 2)}),
        (6, {"date": date(1994, 1, 1), "discount": 0.1, "quantity": 24}),
        (6, {"date": date(1994, 1, 1), "discount": 0.065, "quantity": 24}),
        (7, {"nation1": "FRANCE", "nation2": "FRANCE"}),
        (8, {"nation": "BRAZIL", "region": "ASIA", "type": "ECONOMY ANODIZED STEEL"}),
        (10, {"date": date(1993, 1, 1)}),
        (11, {"nation": "GERMANY", "fraction": 0.0001}),  # at SF 10: 0.00001
        (12, {"shipmode1": "MAIL", "shipmode2": "MAIL", "date": date(1994, 1, 1)}),
        (16, {"brand": "Brand#45", "type": "MEDIUM POLISHED",
              "sizes": (49, 14, 23, 45, 19, 3, 36, 36)}),
        (16, {"brand": "Brand#46", "type": "MEDIUM POLISHED",
              "sizes": (49, 14, 23, 45, 19, 3, 36, 9)}),
        (18, {"quantity": 300}),
        (22, {"codes": (13, 31, 23, 29, 30, 18, 9)}),
        (21, {"nation": "SAUDI ARABIA", "extra": 1}),
        (21, {}),
    ]
    for query, values in bad_cases:
        with pytest.raises(UsageError) as info:
            validate(query, values, 10.0)
        assert "\n" not in str(info.value) and f"Q{query}" in str(info.value)


def test_the_specifications_qualification_values_are_in_the_domains() -> None:
    """Clause 2.4.N.3's validation values (all but Q18's 300, outside the drawn 312..315)."""
    qualification = {
        1: {"delta": 90}, 2: {"size": 15, "type": "BRASS", "region": "EUROPE"},
        3: {"segment": "BUILDING", "date": date(1995, 3, 15)}, 4: {"date": date(1993, 7, 1)},
        5: {"region": "ASIA", "date": date(1994, 1, 1)},
        6: {"date": date(1994, 1, 1), "discount": 0.06, "quantity": 24},
        7: {"nation1": "FRANCE", "nation2": "GERMANY"},
        8: {"nation": "BRAZIL", "region": "AMERICA", "type": "ECONOMY ANODIZED STEEL"},
        9: {"color": "green"}, 10: {"date": date(1993, 10, 1)},
        11: {"nation": "GERMANY", "fraction": 0.0001},
        12: {"shipmode1": "MAIL", "shipmode2": "SHIP", "date": date(1994, 1, 1)},
        13: {"word1": "special", "word2": "requests"}, 14: {"date": date(1995, 9, 1)},
        15: {"date": date(1996, 1, 1)},
        16: {"brand": "Brand#45", "type": "MEDIUM POLISHED",
             "sizes": (49, 14, 23, 45, 19, 3, 36, 9)},
        17: {"brand": "Brand#23", "container": "MED BOX"},
        19: {"quantity1": 1, "quantity2": 10, "quantity3": 20, "brand1": "Brand#12",
             "brand2": "Brand#23", "brand3": "Brand#34"},
        20: {"color": "forest", "date": date(1994, 1, 1), "nation": "CANADA"},
        21: {"nation": "SAUDI ARABIA"}, 22: {"codes": (13, 31, 23, 29, 30, 18, 17)},
    }
    for query, values in qualification.items():
        validate(query, values, 1.0)


def test_bad_query_stream_or_scale_factor_is_refused() -> None:
    for call in (lambda: draw(0, 0, 1.0, 1), lambda: draw(23, 0, 1.0, 1),
                 lambda: draw(1, -1, 1.0, 1), lambda: draw(1, 0, 0.0, 1),
                 lambda: draw(1, 0, math.nan, 1), lambda: stream_order(-1),
                 lambda: draw_stream(0, 1.0, 1, queries=(1, 40))):
        with pytest.raises(UsageError):
            call()


def test_the_41_stream_orders_are_permutations() -> None:
    assert len(STREAM_ORDERS) == 41
    for order in STREAM_ORDERS:
        assert sorted(order) == list(range(1, 23))
    assert len(set(STREAM_ORDERS)) == 41
    assert stream_order(0) == [14, 2, 9, 20, 6, 17, 18, 8, 21, 13, 3, 22, 16, 4, 11, 15, 1,
                               10, 19, 5, 7, 12]
    assert stream_order(1)[:3] == [21, 3, 18]
    assert stream_order(40) == [13, 15, 17, 1, 22, 11, 3, 4, 7, 20, 14, 21, 9, 8, 2, 18, 16,
                                6, 10, 12, 5, 19]
    assert stream_order(41) == stream_order(0) and stream_order(85) == stream_order(3)


def test_parameter_values_are_plain_python() -> None:
    """What streams.py writes to JSON: ints, floats, strings, dates and tuples of them."""
    for values in draw_stream(0, 1.0, 1).values():
        for value in values.values():
            items = value if isinstance(value, tuple) else (value,)
            assert all(isinstance(v, int | float | str | date) for v in items)


@pytest.mark.parametrize(("text", "expected"), [
    ("1", (1,)), ("22", (22,)), ("1,3,5-7", (1, 3, 5, 6, 7)), (" 7 , 3,3 ", (3, 7)),
    ("1-22", tuple(range(1, 23))), ("5-5", (5,)), ("20-22,1-2", (1, 2, 20, 21, 22)),
])
def test_parse_query_list_accepts(text: str, expected: tuple[int, ...]) -> None:
    assert parse_query_list(text) == expected


@pytest.mark.parametrize("text", [
    "", " ", "0", "23", "1,,2", "1,", "a", "1-", "-3", "7-5", "1-23", "1.5", "q1", "1;2",
    "1 2", "+1", "١",
])
def test_parse_query_list_refuses(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_query_list(text)
    message = str(info.value)
    assert "--queries" in message and "1 to 22" in message and "\n" not in message


def test_module_exposes_the_documented_names() -> None:
    for name in ("draw", "draw_stream", "stream_order", "validate", "DOMAINS"):
        assert hasattr(params, name)
