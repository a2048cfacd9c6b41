"""One units policy for every figure pgdyno shows: tables, plot axes, exports, terminal lines.

Measured byte quantities are binary and labelled exactly: B, KiB, MiB, GiB, TiB, PiB (each
1024 of the one before), rates the same per second (MiB/s). A value moves up a prefix once
it reaches 1024 of its unit, and is shown with about three significant digits. "MB" and
"GB" are never written for a measured quantity; PostgreSQL's settings keep PostgreSQL's
own notation (shared_buffers '6GB', which PostgreSQL also counts in powers of 1024).

A column of a table or a plot axis shares one prefix (:func:`common_scale`), chosen by its
largest value, so that numbers in one column compare at a glance.

Latencies and percentiles are milliseconds (:func:`format_ms`); a ratio of two throughputs
is a percentage (:func:`format_ratio_pct`).

Every other figure a report or the terminal shows goes through the formatters at the end:
one rule (:func:`decimals`) decides how many decimals a figure's size earns, and a mean
shown with its deviation (:func:`mean_sd`) gives both the mean's precision, so that
"2,282 ± 36" is never printed as "2,282 ± 36.487".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
"""Every prefix is 1024 times the one before."""
KIB, MIB, GIB, TIB, PIB = (1024 ** i for i in range(1, 6))
MISSING = "–"
"""A value that was not measured: never followed by a unit."""
UNITS_NOTE = ("Units: byte sizes and rates are binary, 1 KiB = 1024 B, 1 MiB = 1024 KiB, "
              "1 GiB = 1024 MiB (MiB/s, GiB/s per second); latencies are in milliseconds.")
"""The one sentence a report with byte units states its policy in."""


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float) -> str:
    """About three significant digits: 1.23, 12.3, 123, 1,234 (thousands separated)."""
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2
    text = f"{value:,.{digits}f}"
    return "0" if text in ("0.00", "-0.00") else text


@dataclass(frozen=True)
class ByteScale:
    """One binary prefix: the unit a value, a column or an axis is shown in."""

    unit: str
    """``B``, ``KiB``, ... ``PiB``."""

    @property
    def factor(self) -> int:
        return 1024 ** BYTE_UNITS.index(self.unit)

    @property
    def rate_unit(self) -> str:
        return f"{self.unit}/s"

    def value(self, n_bytes: float) -> float:
        """``n_bytes`` in this unit (for a plot)."""
        return n_bytes / self.factor

    def number(self, n_bytes: float | None) -> str:
        """The number alone, in this unit: for a column whose header names the unit."""
        return MISSING if _missing(n_bytes) else number(self.value(float(n_bytes)))

    def size(self, n_bytes: float | None) -> str:
        """'512 MiB'."""
        return MISSING if _missing(n_bytes) else f"{self.number(n_bytes)} {self.unit}"

    def rate(self, bytes_per_s: float | None) -> str:
        """'12.3 MiB/s'."""
        return MISSING if _missing(bytes_per_s) else f"{self.number(bytes_per_s)} {self.rate_unit}"


def scale_for(n_bytes: float | None) -> ByteScale:
    """The prefix a single value reads best in: its value there is below 1024 (B for 0)."""
    size = 0.0 if _missing(n_bytes) else abs(float(n_bytes))
    index = 0
    # Rounding first: 1023.9 MiB shows as 1,024 MiB otherwise; it is 1.00 GiB.
    while index < len(BYTE_UNITS) - 1 and round(size / 1024 ** index, 2) >= 1024:
        index += 1
    return ByteScale(BYTE_UNITS[index])


def common_scale(values: Iterable[float | None], empty: str = "MiB") -> ByteScale:
    """One prefix for a table column or a plot axis: the largest value's (``empty`` when
    no value was measured, so that a column of dashes is not headed "B/s")."""
    present = [abs(float(v)) for v in values if not _missing(v)]
    return scale_for(max(present)) if present else ByteScale(empty)


def format_bytes(n_bytes: float | None) -> str:
    """A measured size in its readable prefix: '1.50 GiB', '512 MiB', '100 B'."""
    return scale_for(n_bytes).size(n_bytes)


def format_rate(bytes_per_s: float | None) -> str:
    """A measured byte rate in its readable prefix: '12.3 MiB/s', '1.20 GiB/s'."""
    return scale_for(bytes_per_s).rate(bytes_per_s)


def unit_factor(unit: str) -> int | None:
    """Bytes in one ``unit`` ('MiB', 'MiB/s' -> 2**20), None when it is not a byte unit."""
    base = unit.removesuffix("/s")
    return 1024 ** BYTE_UNITS.index(base) if base in BYTE_UNITS else None


def is_rate(unit: str) -> bool:
    return unit.endswith("/s") and unit_factor(unit) is not None


def format_ms(ms: float | None) -> str:
    """A latency or percentile in milliseconds, the number alone (the header says ms): two
    decimals, none from 1,000 on."""
    if _missing(ms):
        return MISSING
    return f"{ms:,.0f}" if abs(ms) >= 1000 else f"{ms:.2f}"


def format_ratio_pct(ratio: float | None) -> str:
    """A ratio such as real/ideal throughput as a percentage: 0.981 -> '98.1%'."""
    return MISSING if _missing(ratio) else f"{100 * ratio:.1f}%"


# ----- figures --------------------------------------------------------------------------

def decimals(value: float) -> int:
    """How many decimals a figure of this size shows: 105,234 and 12.5 and 1.25 and 0.125
    and 0.0093 (a TPROC-H geometric mean of seconds, not "0.0"): about four significant
    digits, none from 1,000 on, where a decimal is noise beside the thousands."""
    size = abs(value)
    return 0 if size >= 1000 else 1 if size >= 10 else 2 if size >= 1 else 3 if size >= 0.01 \
        else 4


def fixed(value: float | None, digits: int = 1) -> str:
    """``digits`` decimals, thousands separated: 1,234.5 (a column whose decimals its unit
    decides, such as a telemetry table's)."""
    return MISSING if _missing(value) else f"{value:,.{digits}f}"


def rounded(value: float | None, digits: int = 2) -> str:
    """``digits`` decimals below 1,000, none from there on: 0.52 ms, 3,838 TPS."""
    if _missing(value):
        return MISSING
    return fixed(value, 0 if abs(value) >= 1000 else digits)


def figure(value: float | None) -> str:
    """A figure with the decimals its size earns (:func:`decimals`)."""
    return MISSING if _missing(value) else rounded(value, decimals(value))


def count(value: float | None) -> str:
    """A count, thousands separated: 11,515."""
    return MISSING if _missing(value) else f"{round(value):,}"


def alike(reference: float | None, *beside: float | None,
          digits: int | None = None) -> list[str]:
    """A figure and those read beside it (its deviation, its median) at one precision, the
    figure's: ``digits`` decimals below 1,000 when given, else :func:`decimals` of it. A
    deviation finer than that precision is noise beside the figure it qualifies."""
    if _missing(reference):
        shown = digits or 0
    else:
        shown = decimals(reference) if digits is None else 0 if abs(reference) >= 1000 \
            else digits
    return [fixed(value, shown) for value in (reference, *beside)]


def mean_sd(mean: float | None, sd: float | None, digits: int | None = None) -> str:
    """'2,282 ± 36': a mean and its deviation in one cell, at the mean's precision
    (:func:`alike`); a missing mean is '–' alone."""
    return MISSING if _missing(mean) else " ± ".join(alike(mean, sd, digits=digits))


def percent(value_pct: float | None, digits: int = 1) -> str:
    """A value already in percent: 35.5%."""
    return MISSING if _missing(value_pct) else f"{value_pct:.{digits}f}%"


def signed_pct(value_pct: float | None, digits: int = 1) -> str:
    """A change in percent with its sign: +5.7%, -0.3%."""
    return MISSING if _missing(value_pct) else f"{value_pct:+.{digits}f}%"
