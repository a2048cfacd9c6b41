"""Current settings of a running server against a config's recommendations (like timescaledb-tune:
values within 5% of each other are not worth a change and are hidden)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from pgdyno.config.resolve import ResolvedConfig
from pgdyno.config.setting_specs import SettingSpecs, unquote

TOLERANCE = 0.05


@dataclass
class DiffRow:
    name: str
    current: str
    recommended: str
    unit: str
    differs: bool
    restart: bool
    """The setting takes effect only after a restart (context postmaster)."""


_QUERY = ("SELECT name, setting, unit, context FROM pg_settings WHERE name = ANY(%s) "
          "ORDER BY name")


def current_settings(conninfo: str, names: list[str]) -> dict[str, tuple[str, str, str]]:
    with psycopg.connect(conninfo, connect_timeout=5) as conn:
        rows = conn.execute(_QUERY, (names,)).fetchall()
    return {name: (setting, unit or "", context) for name, setting, unit, context in rows}


def diff_rows(resolved: ResolvedConfig, current: dict[str, tuple[str, str, str]],
              specs: SettingSpecs) -> list[DiffRow]:
    rows = []
    for name, value in resolved.pg_settings.items():
        if name not in current:
            continue
        setting, unit, context = current[name]
        spec = specs.spec(name)
        recommended = specs.base_units(name, value)
        if recommended is not None:
            try:
                now = float(setting)
            except ValueError:
                now = None
            differs = now is None or not _close(now, recommended)
            shown_now = spec.display(setting) if spec else setting
        else:
            differs = setting.lower() != unquote(value).lower()
            shown_now = setting
        rows.append(DiffRow(name, shown_now, unquote(value), unit, differs,
                            context == "postmaster"))
    return rows


def _close(a: float, b: float) -> bool:
    if a == b:
        return True
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))
