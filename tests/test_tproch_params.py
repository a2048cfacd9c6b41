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


@pytest.mark.parametrize("sf", [0.01, 1.0, 300.0])
def test_every_drawn_value_is_in_its_domain(sf: float) -> None:
    for seed in SEEDS:
        for stream in STREAMS:
            for query, values in draw_stream(stream, sf, seed).items():
                validate(query, values, sf)


def test_the_spec_ranges_hold_for_many_draws() -> None:
    """The rules restated by hand (not through DOMAINS), over 2,000 streams."""
    seen: dict[str, set] = {"delta": set(), "q6date": set(), "discount": set(), "q4": set(),
                            "q10": set(), "q14": set(), "q3": set()}
    for stream in range(2000):
        v = draw_stream(stream, 1.0, 5)
        assert 60 <= v[1]["delta"] <= 120
        seen["delta"].add(v[1]["delta"])
        assert 1 <= v[2]["size"] <= 50 and v[2]["type"] in {"TIN", "NICKEL", "BRASS", "STEEL",
                                                            "COPPER"}
        assert v[2]["region"] in REGIONS
        assert date(1995, 3, 1) <= v[3]["date"] <= date(1995, 3, 31)
        seen["q3"].add(v[3]["date"])
        for q, low, high, key in ((4, date(1993, 1, 1), date(1997, 10, 1), "q4"),
                                  (15, date(1993, 1, 1), date(1997, 10, 1), None),
                                  (10, date(1993, 2, 1), date(1995, 1, 1), "q10"),
                                  (14, date(1993, 1, 1), date(1997, 12, 1), "q14")):
            d = v[q]["date"]
            assert d.day == 1 and low <= d <= high, (q, d)
            if key:
                seen[key].add(d)
        for q in (5, 6, 12, 20):
            d = v[q]["date"]
            assert d.month == d.day == 1 and 1993 <= d.year <= 1997
        seen["q6date"].add(v[6]["date"])
        assert v[6]["discount"] in {0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09}
        seen["discount"].add(v[6]["discount"])
        assert v[6]["quantity"] in (24, 25)
        assert v[7]["nation1"] != v[7]["nation2"]
        assert REGION_OF[v[8]["nation"]] == v[8]["region"]
        assert len(v[8]["type"].split()) == 3
        assert v[9]["color"] in COLORS and v[20]["color"] in COLORS
        assert v[11]["nation"] in NATION_NAMES
        assert v[12]["shipmode1"] != v[12]["shipmode2"]
        assert v[13]["word1"] in {"special", "pending", "unusual", "express"}
        assert v[13]["word2"] in {"packages", "requests", "accounts", "deposits"}
        brand = v[16]["brand"]
        assert len(brand) == 8 and brand[:6] == "Brand#" and set(brand[6:]) <= set("12345")
        assert len(v[16]["type"].split()) == 2
        assert len(set(v[16]["sizes"])) == 8 and all(1 <= s <= 50 for s in v[16]["sizes"])
        assert v[17]["container"].split()[0] in {"SM", "LG", "MED", "JUMBO", "WRAP"}
        assert 312 <= v[18]["quantity"] <= 315
        assert 1 <= v[19]["quantity1"] <= 10 and 10 <= v[19]["quantity2"] <= 20
        assert 20 <= v[19]["quantity3"] <= 30
        codes = v[22]["codes"]
        assert len(set(codes)) == 7 and all(10 <= c <= 34 for c in codes)
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
