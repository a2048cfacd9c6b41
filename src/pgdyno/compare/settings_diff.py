"""What changed between two runs: server settings, config, benchmark options, machine.

The server side comes from the effective settings each server reported
(``pg_settings`` whose source is not the default), so a setting changed by any means shows,
not only those pgdyno wrote. Values that differ on every start (port, socket directory)
are not changes, and neither is a setting written on one side at PostgreSQL's own default
(``autovacuum = on``) and left out on the other: the server runs the same either way.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pgdyno.config.setting_specs import BOOL_WORDS, SettingSpecs, snapshot, unquote
from pgdyno.config.units import STOCK, is_stock, shown_value, side_text, stock_text

VOLATILE = frozenset({"port", "unix_socket_directories", "data_directory", "config_file",
                      "hba_file", "ident_file", "external_pid_file"})
OPTION_KEYS = ("workload", "scale", "clients", "duration_s", "warmup_s", "iterations",
               "protocol", "rate_tps", "latency_limit_ms", "max_tries", "cache", "via")
MACHINE = "(as the machine was)"


@dataclass
class SettingChange:
    layer: str
    """postgresql, config, benchmark, server, os (a campaign cell's [config.os]) or host."""
    name: str
    before: str
    after: str
    """Each side as people read it: a PostgreSQL setting in natural units, "(stock)" after
    the stock value ("128 MB (stock)" where a side leaves it unset)."""
    rationale: str = ""
    """Where the new value came from (the config's source line), when known."""
    stock: str = ""
    """A PostgreSQL setting's stock value when neither side runs it ("128 MB"); empty when
    a side names it, or when it is not known."""


def settings_diff(before: dict[str, Any], after: dict[str, Any]) -> list[SettingChange]:
    """Changes from manifest ``before`` to manifest ``after``, PostgreSQL settings first."""
    out: list[SettingChange] = []
    a_cfg, b_cfg = before.get("config") or {}, after.get("config") or {}
    # The server's own view when both servers answered; else what pgdyno wrote for each
    # (a server that failed to start reported nothing, and every setting would seem changed).
    both = all((m.get("server") or {}).get("non_default_settings") is not None
               for m in (before, after))
    a_set, b_set = _settings(before, both), _settings(after, both)
    sources = b_cfg.get("sources") or {}
    specs = _specs_of(before, after)
    for name in sorted(set(a_set) | set(b_set), key=str.lower):
        old, new = a_set.get(name), b_set.get(name)
        if not same_setting(specs, name, old, new):
            out.append(_pg_change(name, old, new, _stock(specs, name, before, after),
                                  _short(sources.get(name, ""))))
    if a_cfg.get("name", "default") != b_cfg.get("name", "default"):
        out.append(SettingChange("config", "config", str(a_cfg.get("name", "default")),
                                 str(b_cfg.get("name", "default"))))
    a_opt, b_opt = before.get("options") or {}, after.get("options") or {}
    for key in OPTION_KEYS:
        if a_opt.get(key) != b_opt.get(key):
            out.append(SettingChange("benchmark", key, _text(a_opt.get(key)),
                                     _text(b_opt.get(key))))
    a_srv, b_srv = before.get("server") or {}, after.get("server") or {}
    if a_srv.get("version") and b_srv.get("version") and a_srv["version"] != b_srv["version"]:
        out.append(SettingChange("server", "PostgreSQL", _text(a_srv.get("version")),
                                 _text(b_srv.get("version"))))
    a_os, b_os = _os_settings(before), _os_settings(after)
    for key in sorted(set(a_os) | set(b_os)):
        if a_os.get(key) != b_os.get(key):
            out.append(SettingChange("os", key, _text(a_os.get(key, MACHINE)),
                                     _text(b_os.get(key, MACHINE))))
    a_host, b_host = before.get("host") or {}, after.get("host") or {}
    for key in ("hostname", "cpu_count", "ram_bytes", "kernel", "cpu_model"):
        if a_host.get(key) != b_host.get(key):
            out.append(SettingChange("host", key, _text(a_host.get(key)),
                                     _text(b_host.get(key))))
    a_tgt, b_tgt = before.get("target") or {}, after.get("target") or {}
    for key in ("kind", "wal_dir"):
        if a_tgt.get(key) != b_tgt.get(key):
            out.append(SettingChange("target", key, _text(a_tgt.get(key)),
                                     _text(b_tgt.get(key))))
    return out


def _pg_change(name: str, old: str | None, new: str | None, stock: str | None,
               rationale: str) -> SettingChange:
    """A PostgreSQL setting's change in natural units, the stock value named: on the side
    that runs it or leaves it unset, else apart (``SettingChange.stock``)."""
    sides = [None if v is None else unquote_conf(v) for v in (old, new)]
    before, after = (stock_text(stock) if v is None else side_text(v, stock) for v in sides)
    apart = stock is not None and not any(v is None or is_stock(v, stock) for v in sides)
    return SettingChange("postgresql", name, before, after, rationale,
                         stock=shown_value(stock) if apart and stock is not None else "")


def _stock(specs: SettingSpecs | None, name: str, *manifests: dict[str, Any]) -> str | None:
    """A setting's stock value as a run's server reported it (boot_val with its unit,
    ``ServerFacts.stock_settings``), else the specs' of the runs' major version (None:
    neither knows it)."""
    for m in manifests:
        recorded = ((m.get("server") or {}).get("stock_settings") or {}).get(name)
        if recorded is not None:
            return str(recorded)
    spec = specs.spec(name) if specs is not None else None
    if spec is None or spec.boot_val is None:
        return None
    return f"{spec.boot_val} {spec.unit}" if spec.unit else spec.boot_val


def unquote_conf(value: str) -> str:
    """A value as the server would report it: a quoted postgresql.conf token ('8MB', what
    pgdyno wrote when a server did not answer) without its quotes; others as they are."""
    text = str(value)
    return unquote(text) if text.strip().startswith("'") else text


def _os_settings(manifest: dict[str, Any]) -> dict[str, str]:
    """The kernel settings the run started under (read live), and those a campaign cell
    applied ([config.os]) that the live reading does not cover."""
    applied = {k: str(v) for k, v in ((manifest.get("role") or {}).get("os") or {}).items()}
    live = (manifest.get("host") or {}).get("kernel_settings") or {}
    return {**applied, **{k: str(v) for k, v in live.items()}}


def _settings(manifest: dict[str, Any], from_server: bool) -> dict[str, str]:
    if from_server:
        values = (manifest.get("server") or {}).get("non_default_settings") or {}
    else:
        values = (manifest.get("config") or {}).get("pg_settings") or {}
    return {k: str(v) for k, v in values.items() if k not in VOLATILE}


def _specs_of(*manifests: dict[str, Any]) -> SettingSpecs | None:
    """The setting specs of the runs' PostgreSQL major version, for the stock values
    (None when no manifest says which version ran: every difference is then kept)."""
    for m in manifests:
        server = m.get("server") or {}
        num = server.get("version_num")
        match = re.match(r"\s*(\d+)", str(server.get("version") or ""))
        major = int(num) // 10000 if num else int(match.group(1)) if match else None
        if major:
            return snapshot(major)
    return None


def same_setting(specs: SettingSpecs | None, name: str, a: str | None,
                 b: str | None) -> bool:
    """Whether two sides run a setting at the same value; None is "not set" (the stock
    default), so ``None`` and an explicit default are the same."""
    if a == b:
        return True
    spec = specs.spec(name) if specs is not None else None
    if spec is None or (a is None and b is None):
        return False
    stock = spec.boot_val
    if stock is None:
        return False
    left = _normal(specs, name, stock if a is None else a)
    right = _normal(specs, name, stock if b is None else b)
    if isinstance(left, float) and isinstance(right, float):
        return math.isclose(left, right, rel_tol=1e-9, abs_tol=1e-12)
    return left == right


def _normal(specs: SettingSpecs, name: str, value: str) -> float | str:
    """A value in comparable form: numbers in the setting's base unit, booleans on/off,
    words lower-case. The server reports '16384 8kB' (value, then its unit); a config file
    says '128MB'; the specs' stock value is bare ('16384')."""
    spec = specs.spec(name)
    text = unquote(value).strip()
    if spec is not None and spec.unit and text.endswith(" " + spec.unit):
        text = text[:-len(spec.unit) - 1].strip()
    if spec is not None and spec.vartype in ("integer", "real"):
        number = specs.base_units(name, text)
        if number is not None:
            return number
    if spec is not None and spec.vartype in ("bool", "enum") and text.lower() in BOOL_WORDS:
        return BOOL_WORDS[text.lower()]
    return text.lower() if spec is not None and spec.vartype != "string" else text


def changes_block(changes: list[SettingChange]) -> str:
    """The changes as a benchmark journal prints them: ``name = new   # Was old`` (the journal), the
    stock value after the old one when neither side runs it (``# Was 1 GB; stock 128 MB``)."""
    if not changes:
        return "# no difference in settings, options or machine"
    width = max(len(f"{c.name} = {c.after}") for c in changes)
    lines = []
    for c in changes:
        prefix = "" if c.layer == "postgresql" else f"[{c.layer}] "
        left = f"{prefix}{c.name} = {c.after}"
        stock = f"; stock {c.stock}" if c.stock else ""
        lines.append(f"{left:<{width + 3}} # Was {c.before}{stock}")
    return "\n".join(lines)


def diff_block(changes: list[SettingChange]) -> str:
    """The changes from A to B, one a line: ``shared_buffers: 128 MB (stock) → 6 GB``;
    the stock value after them when neither side runs it (``1 GB → 6 GB (stock 128 MB)``)."""
    if not changes:
        return "no difference in settings, options or machine"
    lines = []
    for c in changes:
        prefix = "" if c.layer == "postgresql" else f"[{c.layer}] "
        stock = f" ({STOCK} {c.stock})" if c.stock else ""
        lines.append(f"{prefix}{c.name}: {c.before} → {c.after}{stock}")
    return "\n".join(lines)


def _short(source: str) -> str:
    return " ".join(str(source).split())[:120]


def _text(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
