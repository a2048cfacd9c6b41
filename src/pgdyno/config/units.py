"""Sizes and durations as PostgreSQL writes them ('4GB', '15min'), parsed and formatted.

PostgreSQL's memory units are powers of 1024 and case-sensitive ('kB', 'MB', 'GB', 'TB');
time units are 'us', 'ms', 's', 'min', 'h', 'd'. pgdyno computes in bytes and seconds
and converts only at the edges.
"""

from __future__ import annotations

import re

from pgdyno.units import format_bytes

KB = 1024
MB = 1024 * KB
GB = 1024 * MB
TB = 1024 * GB

MEMORY_UNITS: dict[str, int] = {"B": 1, "kB": KB, "MB": MB, "GB": GB, "TB": TB}
TIME_UNITS_MS: dict[str, float] = {
    "us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0,
}
# pg_settings.unit values that name a multiple of bytes (e.g. '8kB' pages, '16MB' segments).
_UNIT_RE = re.compile(r"^(\d+)?\s*(B|kB|MB|GB|TB|us|ms|s|min|h|d)$")
_VALUE_RE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")
# A number, then optionally a prefix letter (with an optional binary 'i'), then optionally 'B':
# 500MB, 3G, 1.5GiB, 100k, 4096, 512 b. 'i' without a prefix letter ('5iB') is refused.
_HUMAN_SIZE_RE = re.compile(r"^\s*(\d*\.?\d+)\s*(?:([KMGT])I?)?B?\s*$", re.IGNORECASE)
_HUMAN_PREFIXES: dict[str, int] = {"": 1, "K": KB, "M": MB, "G": GB, "T": TB}


def unit_scale(unit: str | None) -> tuple[str, float] | None:
    """('memory', bytes per unit) or ('time', ms per unit) for a pg_settings unit, else None."""
    if not unit:
        return None
    match = _UNIT_RE.match(unit)
    if not match:
        return None
    factor = int(match.group(1) or 1)
    name = match.group(2)
    if name in MEMORY_UNITS:
        return "memory", float(factor * MEMORY_UNITS[name])
    return "time", factor * TIME_UNITS_MS[name]


def split_number(text: str) -> tuple[float, str] | None:
    """'4GB' -> (4.0, 'GB'); '0.9' -> (0.9, ''); None when it is not a number with a unit."""
    match = _VALUE_RE.match(text)
    if not match:
        return None
    return float(match.group(1)), match.group(2)


def fmt_bytes(n_bytes: int) -> str:
    """The largest PostgreSQL unit that divides the size exactly: 6GB, 768MB, 20388kB."""
    for name in ("TB", "GB", "MB", "kB"):
        size = MEMORY_UNITS[name]
        if n_bytes >= size and n_bytes % size == 0:
            return f"{n_bytes // size}{name}"
    if n_bytes % KB == 0:
        return f"{n_bytes // KB}kB"
    return f"{n_bytes}B"


def fmt_kb(n_kb: int) -> str:
    return fmt_bytes(int(n_kb) * KB)


def fmt_seconds(seconds: int) -> str:
    """'15min', '1h', '30s'."""
    for name, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{name}"
    return f"{seconds}s"


def human_bytes(n_bytes: float) -> str:
    """Rounded for people: 23.5 GiB, 512 MiB (pgdyno.units' one policy: binary prefixes,
    about three significant digits)."""
    return format_bytes(n_bytes)


def parse_size(text: str) -> int:
    """A size a user typed, in bytes: the project's one parser for --dataset-size, profiles, ...

    A decimal number (fractions allowed) and an optional unit, case-insensitive, spaces
    allowed around and between: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB. Every prefix is a
    power of 1024, as in PostgreSQL ('1GB' = 1GiB); no unit means bytes. Fractions of a
    byte are dropped: '1.5GiB' -> 1610612736, '100k' -> 102400, '4096' -> 4096.
    Raises ValueError naming the input and the accepted forms.
    """
    match = _HUMAN_SIZE_RE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r}; expected a number and an optional unit B, K, "
                         "M, G or T, e.g. 500MB, 3GB, 1.5GiB or 100k (powers of 1024; no unit "
                         "means bytes)")
    number, prefix = match.groups()
    return int(float(number) * _HUMAN_PREFIXES[(prefix or "").upper()])


# ----- settings as people read them ---------------------------------------------------------

# A setting's value as pg_settings gives it ('16384 8kB', '900 s', '16384' with the unit
# apart) or as postgresql.conf writes it ('128MB', '5min'): a number and an optional unit.
_SETTING_RE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(\d*[A-Za-z]+)?\s*$")
_NATURAL_STEPS = {
    "memory": (("TB", TB), ("GB", GB), ("MB", MB), ("kB", KB), ("B", 1)),
    "time": (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1)),
}
STOCK = "stock"
"""The word for PostgreSQL's own value of a setting (pg_settings.boot_val)."""


def setting_value(text: str, unit: str | None = None) -> str:
    """A setting's value in its natural unit: "16384 8kB" (pg_settings' value and unit),
    "16384" with ``unit`` "8kB" (a boot_val, whose unit is given apart) and "128MB"
    (postgresql.conf) are all "128 MB"; "900 s" is "15 min": the largest unit that holds
    it exactly, as PostgreSQL's SHOW picks it, written with a space. -1 and 0 lose their
    unit (they mean automatic or off); words, strings and plain numbers stay as given."""
    match = _SETTING_RE.match(text)
    if not match:
        return text
    number, given = match.group(1), match.group(2) or unit
    scale = unit_scale(given)
    if scale is None:
        return text
    kind, factor = scale
    value = float(number)
    base = value * factor  # bytes or milliseconds
    if value <= 0:
        return f"{value:g}"
    if base != int(base):
        return f"{number} {given}"
    for name, size in _NATURAL_STEPS[kind]:
        if base % size == 0:
            return f"{int(base) // size} {name}"
    return f"{number} {given}"


def shown_value(text: str, unit: str | None = None) -> str:
    """``setting_value``, an empty string shown as postgresql.conf writes it ('')."""
    return setting_value(text, unit) if text != "" else "''"


def is_stock(value: str, stock: str | None, unit: str | None = None) -> bool:
    """Whether a value is the stock one, both read in natural units (None: not known)."""
    return stock is not None and shown_value(value, unit) == shown_value(stock, unit)


def stock_text(stock: str | None, unit: str | None = None) -> str:
    """The stock value named: "128 MB (stock)"; just "stock" when it is not known."""
    return STOCK if stock is None else f"{shown_value(stock, unit)} ({STOCK})"


def side_text(value: str, stock: str | None, unit: str | None = None) -> str:
    """One side's value in natural units, "(stock)" after it when it is the stock value."""
    shown = shown_value(value, unit)
    return f"{shown} ({STOCK})" if is_stock(value, stock, unit) else shown


def setting_with_stock(value: str, stock: str | None, unit: str | None = None) -> str:
    """A setting beside its stock value, as default/tuned tables read:
    "128 MB (stock) → 6 GB"; "100 (stock)" when it runs at the stock value; just "6 GB"
    when the stock value is unknown (a run recorded before pgdyno kept boot_val).
    ``value`` and ``stock`` as pg_settings gives them; ``unit`` for bare numbers."""
    if stock is None or is_stock(value, stock, unit):
        return side_text(value, stock, unit)
    return f"{stock_text(stock, unit)} → {shown_value(value, unit)}"


def settings_with_stock(settings: dict[str, str],
                        stock: dict[str, str] | None) -> dict[str, str]:
    """``setting_with_stock`` of every setting, the stock values by name (None or a name
    missing: not recorded)."""
    stock = stock or {}
    return {name: setting_with_stock(str(value), None if stock.get(name) is None
                                     else str(stock[name]))
            for name, value in settings.items()}
