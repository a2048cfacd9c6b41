"""Hardware profiles by name: the built-in catalogue, TOML files, .env files or detection.

:func:`load_hardware` picks the source for a ``--hardware`` value. It sits above the
readers it dispatches to (detect.py, envfile.py) and the dataclasses they build
(hardware.py), so none of those needs to import this module.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pgdyno.config.detect import detect_profile
from pgdyno.config.envfile import profile_from_env
from pgdyno.config.hardware import STORAGE_KINDS, BlockDevice, HardwareProfile, Volume
from pgdyno.config.units import parse_size
from pgdyno.config.userfile import read_text, toml_type
from pgdyno.errors import UsageError

CATALOGUE_DIR = "catalogue"

# The dataclasses lived here before hardware.py; callers still import them from this module.
__all__ = ["CATALOGUE_DIR", "STORAGE_KINDS", "BlockDevice", "HardwareProfile", "Volume",
           "catalogue_names", "load_hardware", "profile_from_toml", "profile_to_toml"]


# ----- TOML files --------------------------------------------------------------------------------

def catalogue_names() -> list[str]:
    folder = resources.files("pgdyno.config").joinpath(CATALOGUE_DIR)
    return sorted(e.name[:-5] for e in folder.iterdir() if e.name.endswith(".toml"))


def load_hardware(spec: str) -> HardwareProfile:
    """A profile by catalogue name, TOML file, .env file, or ``detect`` for this host."""
    if spec == "detect":
        return detect_profile()
    if spec in catalogue_names():
        text = resources.files("pgdyno.config").joinpath(CATALOGUE_DIR, f"{spec}.toml").read_text()
        return profile_from_toml(text, origin=f"catalogue {spec}", source=f"catalogue:{spec}")
    path = Path(spec)
    accepted = f"detect, {', '.join(catalogue_names())}, or a .toml/.env file"
    if not path.exists():
        raise UsageError(f"--hardware {spec}: no such profile or file; accepted: {accepted}")
    text = read_text(path, f"--hardware {spec}", accepted)
    if path.suffix == ".env" or path.name.endswith(".env"):
        return profile_from_env(text, origin=str(path))
    return profile_from_toml(text, origin=str(path), source=f"file:{path}")


_SIZE_KEYS = {"ram": "ram_bytes", "size": "size_bytes"}


def profile_from_toml(text: str, origin: str, source: str = "") -> HardwareProfile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{origin}: not valid TOML ({exc})") from None
    table = data.get("hardware", data)
    if not isinstance(table, dict):
        raise UsageError(f"{origin}: hardware is {toml_type(table)}; accepted: a table "
                         "[hardware] (name, vcpus, ram, [data], [wal], ...)")
    try:
        fixed = _sizes_to_bytes(dict(table), origin)
        for vol in ("data", "wal"):
            if isinstance(fixed.get(vol), dict):
                fixed[vol] = _sizes_to_bytes(fixed[vol], f"{origin} [{vol}]")
                kind = fixed[vol].get("kind", "ssd")
                if kind not in STORAGE_KINDS:
                    raise UsageError(f"{origin}: [{vol}] kind = {kind!r}; accepted: "
                                     f"{', '.join(STORAGE_KINDS)}")
        fixed.setdefault("source", source)
        profile = HardwareProfile.from_dict(fixed)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{origin}: {' '.join(str(exc).split())}; see the catalogue files "
                         "for the accepted keys (name, vcpus, ram, [data], [wal], ...)") from None
    if profile.vcpus < 1 or profile.ram_bytes < 256 * 1024 * 1024:
        raise UsageError(f"{origin}: vcpus must be >= 1 and ram >= 256MB")
    return profile


def _sizes_to_bytes(table: dict[str, Any], origin: str) -> dict[str, Any]:
    for key, target in _SIZE_KEYS.items():
        if key in table:
            try:
                table[target] = parse_size(str(table.pop(key)))
            except ValueError as exc:
                raise UsageError(f"{origin}: {key}: {exc}") from None
    return table


def profile_to_toml(profile: HardwareProfile) -> str:
    """A TOML file that :func:`profile_from_toml` reads back to the same profile."""
    data = profile.to_dict()
    lines = [f"# Hardware profile {profile.name} ({profile.source or 'pgdyno'})"]
    tables: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) or (isinstance(value, list) and value
                                       and isinstance(value[0], dict)):
            tables[key] = value
        elif value is not None:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables.items():
        rows = value if isinstance(value, list) else [value]
        for row in rows:
            lines.append("")
            lines.append(f"[[{key}]]" if isinstance(value, list) else f"[{key}]")
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in row.items()
                      if v is not None]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    """A bare key where TOML allows one; quoted otherwise (kernel.sem would nest tables)."""
    if key and all(c.isalnum() or c in "_-" for c in key):
        return key
    return _toml_value(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
