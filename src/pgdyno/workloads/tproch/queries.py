"""TPROC-H's 22 queries as literal SQL, with one stream's parameters substituted.

Why literal SQL rather than bind parameters: the text is what a DBA saves, EXPLAINs and
re-runs by hand, and PostgreSQL plans a literal (a date, a nation) with its statistics,
as the specification's qgen output is planned. Values are quoted here, never pasted:
every string goes through ``quote`` and every other value must be an int, a float, a
date or a sequence of those.

The SQL lives in ``sql/qNN.sql``, written from the specification's query semantics with
the standard column names, in a form that PostgreSQL and DuckDB both read the same way
(the tests compare the two). A file holds one statement, the query, or three separated by
``;`` (Q15: create the view, query it, drop it). ``{name}`` marks a parameter.

Where the text departs from the specification's letter, and why:

- Q1 writes ``interval '90' day`` without the specification's ``day (3)``: PostgreSQL takes
  a precision on seconds only; the value is the same.
- Q22 writes ``substring(c_phone, 1, 2)`` for ``substring(c_phone from 1 for 2)``: the
  same function, in the form every engine reads.
- Q19 keeps the specification's ``l_shipmode in ('AIR', 'AIR REG')`` as written: 'AIR REG'
  matches no row (the mode is 'REG AIR'), but changing it would change the query.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

from pgdyno.errors import UsageError
from pgdyno.workloads.tproch.params import DOMAINS, QUERIES

QUERY_NAMES: dict[int, str] = {
    1: "Pricing Summary Report",
    2: "Minimum Cost Supplier",
    3: "Shipping Priority",
    4: "Order Priority Checking",
    5: "Local Supplier Volume",
    6: "Forecasting Revenue Change",
    7: "Volume Shipping",
    8: "National Market Share",
    9: "Product Type Profit Measure",
    10: "Returned Item Reporting",
    11: "Important Stock Identification",
    12: "Shipping Modes and Order Priority",
    13: "Customer Distribution",
    14: "Promotion Effect",
    15: "Top Supplier",
    16: "Parts/Supplier Relationship",
    17: "Small-Quantity-Order Revenue",
    18: "Large Volume Customer",
    19: "Discounted Revenue",
    20: "Potential Part Promotion",
    21: "Suppliers Who Kept Orders Waiting",
    22: "Global Sales Opportunity",
}
"""The specification's title of each query (without the trailing "Query")."""

ROW_LIMITS: dict[int, int] = {2: 100, 3: 10, 10: 20, 18: 100, 21: 100}
"""The rows the specification keeps of a query's answer (its LIMIT)."""


@dataclass(frozen=True)
class QueryText:
    """One query ready to run: ``setup`` statements, the timed ``body``, then ``teardown``
    (run even when the body fails, so a stream's Q15 view never outlives it)."""

    setup: tuple[str, ...]
    body: str
    teardown: tuple[str, ...]


def render(query: int, params: dict[str, Any], stream: int) -> QueryText:
    """Query ``query`` with ``params`` substituted as SQL literals; Q15's view is named
    ``revenue_s<stream>`` so that concurrent streams do not collide."""
    if type(query) is not int or query not in QUERY_NAMES:
        raise UsageError(f"query {query!r} is not a TPROC-H query; accepted: 1 to 22")
    if type(stream) is not int or stream < 0:
        raise UsageError(f"stream {stream!r} is not a stream number; accepted: 0 or more")
    _check_names(query, params)
    values = {name: literal(value) for name, value in params.items()}
    values.update(_PATTERNS.get(query, _no_patterns)(params))
    values["view"] = f"revenue_s{stream}"
    statements = [s.format_map(values) for s in _statements(query)]
    if len(statements) == 1:
        return QueryText(setup=(), body=statements[0], teardown=())
    setup, body, teardown = statements
    return QueryText(setup=(setup,), body=body, teardown=(teardown,))


def _check_names(query: int, params: dict[str, Any]) -> None:
    expected = list(DOMAINS[query])
    if sorted(params) != sorted(expected):
        raise UsageError(f"Q{query} takes parameters {', '.join(expected)}; "
                         f"got {', '.join(params) or 'none'}")


@cache
def _statements(query: int) -> tuple[str, ...]:
    """The query's SQL file split into its statements (one, or setup/body/teardown)."""
    text = resources.files(__package__).joinpath("sql", f"q{query:02d}.sql").read_text()
    parts = tuple(p.strip() for p in text.split(";") if p.strip())
    if len(parts) not in (1, 3):
        raise RuntimeError(f"sql/q{query:02d}.sql holds {len(parts)} statements, not 1 or 3")
    return parts


# ----- literals ---------------------------------------------------------------------------


def quote(text: str) -> str:
    """``text`` as an SQL string literal: quotes doubled, read the same by PostgreSQL (with
    standard_conforming_strings, its default) and DuckDB; NUL refused."""
    if not isinstance(text, str) or "\0" in text:
        raise UsageError(f"parameter value {text!r} is not a text without NUL characters")
    return "'" + text.replace("'", "''") + "'"


def literal(value: Any) -> str:
    """A parameter value as SQL: dates as ``date 'YYYY-MM-DD'``, numbers in plain decimal
    notation, strings quoted, a sequence as a comma-separated list (for ``in (...)``)."""
    if isinstance(value, bool):
        raise UsageError(f"parameter value {value!r} is not a number, a date or a text")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        return _decimal(value)
    if isinstance(value, date):
        return f"date '{value.isoformat()}'"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, Sequence) and value:
        return ", ".join(literal(v) for v in value)
    raise UsageError(f"parameter value {value!r} is not a number, a date or a text")


def _decimal(value: float | Decimal) -> str:
    """Plain decimal notation (0.0000333..., never 3.3e-05): exact as written in both
    engines, where a float literal would make DuckDB compute in doubles."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"parameter value {value!r} is not a finite number")
    number = Decimal(repr(value)) if isinstance(value, float) else value
    if not number.is_finite():
        raise UsageError(f"parameter value {value!r} is not a finite number")
    return format(number, "f")


def _no_patterns(params: dict[str, Any]) -> dict[str, str]:
    return {}


def _like(prefix: str, word: Any, suffix: str) -> str:
    """A LIKE pattern around a drawn word, as the specification substitutes it inside the
    pattern's quotes (``'%green%'``)."""
    if not isinstance(word, str):
        raise UsageError(f"parameter value {word!r} is not a text")
    return quote(prefix + word + suffix)


_PATTERNS: dict[int, Callable[[dict[str, Any]], dict[str, str]]] = {
    # interval '90' day: the number of days goes inside the interval's quotes.
    1: lambda p: {"delta": quote(str(_int(p["delta"])))},
    2: lambda p: {"type": _like("%", p["type"], "")},
    9: lambda p: {"color": _like("%", p["color"], "%")},
    13: lambda p: {"pattern": _like("%", f"{p['word1']}%{p['word2']}", "%")},
    16: lambda p: {"type": _like("", p["type"], "%")},
    20: lambda p: {"color": _like("", p["color"], "%")},
    # Country codes are compared with substring(c_phone, 1, 2): text, not numbers.
    22: lambda p: {"codes": ", ".join(quote(str(_int(c))) for c in p["codes"])},
}
"""Parameters that the SQL uses inside a literal rather than as one."""


def _int(value: Any) -> int:
    if type(value) is not int:
        raise UsageError(f"parameter value {value!r} is not an integer")
    return value


# ----- --queries --------------------------------------------------------------------------

_ITEM = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


def parse_query_list(text: str) -> tuple[int, ...]:
    """``--queries 1,3,5-7`` as sorted unique query numbers."""
    if not isinstance(text, str):
        raise _bad_queries(str(text))
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or not all(items):
        raise _bad_queries(text)
    chosen: set[int] = set()
    for item in items:
        chosen.update(_query_range(item, text))
    return tuple(sorted(chosen))


def _query_range(item: str, text: str) -> range:
    match = _ITEM.match(item)
    if match is None:
        raise _bad_queries(text)
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) is not None else low
    if not (QUERIES[0] <= low <= high <= QUERIES[-1]):
        raise _bad_queries(text)
    return range(low, high + 1)


def _bad_queries(text: str) -> UsageError:
    return UsageError(f"--queries {text!r} is not accepted; accepted: query numbers 1 to 22 "
                      "and ranges, comma-separated (e.g. 1,3,5-7)")
