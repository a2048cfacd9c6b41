"""The tests' own reading of PostgreSQL settings in natural units, to check what pgdyno shows
against (no pgdyno code): pg_settings' value times its unit, written in the largest of
PostgreSQL's units (powers of 1024: kB, MB, GB, TB; ms, s, min, h, d) that divides it."""

from __future__ import annotations

import re

import psycopg

MEMORY = (("TB", 1024 ** 4), ("GB", 1024 ** 3), ("MB", 1024 ** 2), ("kB", 1024), ("B", 1))
TIME_MS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))
UNITS = {**dict(MEMORY), "8kB": 8 * 1024, "16MB": 16 * 1024 ** 2}
TIMES = {"ms": 1, "s": 1000, "min": 60_000}


def natural(setting: str, unit: str | None) -> str:
    """pg_settings' (setting, unit) as people read it: ('16384', '8kB') -> '128 MB'; an
    empty string as postgresql.conf writes it ('')."""
    if setting == "":
        return "''"
    if not unit or not re.fullmatch(r"\d+", setting) or int(setting) <= 0:
        return setting
    if unit in UNITS:
        amount, steps = int(setting) * UNITS[unit], MEMORY
    else:
        amount, steps = int(setting) * TIMES[unit], TIME_MS
    name, size = next((n, s) for n, s in steps if amount % s == 0)
    return f"{amount // size} {name}"


def recorded(text: str) -> str:
    """A value as a manifest records pg_settings ('98304 kB', 'off') in natural units."""
    setting, _, unit = text.rpartition(" ")
    if unit in UNITS or unit in TIMES:
        return natural(setting, unit)
    return natural(text, None)


def stock(conninfo: str, name: str) -> str:
    """The setting's stock value (pg_settings.boot_val) on a live server, natural."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        boot, unit = conn.execute("SELECT boot_val, unit FROM pg_settings WHERE name = %s",
                                  (name,)).fetchone()
    return natural(boot, unit)


def with_stock(value: str, stock_value: str) -> str:
    """Both natural: '64 MB (stock) → 96 MB', or '100 (stock)' at the stock value."""
    return f"{value} (stock)" if value == stock_value else f"{stock_value} (stock) → {value}"
