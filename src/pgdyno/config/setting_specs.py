"""The setting specs of a PostgreSQL version, and validation of values against them.

Every PostgreSQL value pgdyno writes is checked here first: the key must exist in the
target version, the value must parse as its type, carry a unit of the right kind and lie
between the version's minimum and maximum (or be one of its enum values). The specs
come from ``pg_settings`` snapshots shipped with pgdyno (``pg_settings/pg<major>.toml``,
written from a real server by :func:`snapshot_toml`); for a version without a snapshot the
nearest one is used and, when binaries are at hand, ``postgres --describe-config`` adds
the names, types and ranges of that exact build.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from pgdyno.config.units import TIME_UNITS_MS, fmt_bytes, split_number, unit_scale
from pgdyno.config.userfile import control_character
from pgdyno.errors import UsageError

SNAPSHOT_DIR = "pg_settings"
BOOL_WORDS = {"on": "on", "off": "off", "true": "on", "false": "off", "yes": "on", "no": "off",
              "1": "on", "0": "off"}
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A custom (extension) setting as the server's lexer reads a name: ident(.ident)+.
_PLACEHOLDER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)+$")


@dataclass(frozen=True)
class SettingSpec:
    """One row of pg_settings, as far as validation needs it."""

    name: str
    vartype: str
    """bool, integer, real, string or enum."""
    unit: str | None = None
    min_val: str | None = None
    max_val: str | None = None
    enumvals: tuple[str, ...] = ()
    boot_val: str | None = None
    context: str = ""
    category: str = ""

    def default_text(self) -> str:
        """The stock default in the units people read ('128MB', '5min', 'off')."""
        if self.boot_val is None:
            return ""
        return self.display(self.boot_val)

    def display(self, raw: str) -> str:
        """A value in base units (as pg_settings stores it) in readable units."""
        scale = unit_scale(self.unit)
        if scale is None or self.vartype not in ("integer", "real"):
            return raw
        try:
            number = float(raw)
        except ValueError:
            return raw
        if number < 0:
            return raw  # -1 and friends mean "automatic" or "disabled"
        kind, size = scale
        if kind == "memory":
            return fmt_bytes(int(number * size))
        return _fmt_ms(number * size)

    def accepted(self) -> str:
        """The accepted range or values, for error messages."""
        if self.vartype == "enum":
            return "one of " + ", ".join(self.enumvals)
        if self.vartype == "bool":
            return "on or off"
        if self.vartype in ("integer", "real") and self.min_val is not None:
            low, high = self.display(self.min_val), self.display(self.max_val or "")
            return f"{low} .. {high}" + (f" (unit {self.unit})" if self.unit else "")
        return "a string"


@dataclass
class SettingSpecs:
    """All settings of one PostgreSQL major version."""

    major: int
    version: str
    by_name: dict[str, SettingSpec] = field(default_factory=dict)
    source: str = ""
    """Where the specs came from (snapshot file, describe-config of a build)."""

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def spec(self, name: str) -> SettingSpec | None:
        return self.by_name.get(name)

    def default(self, name: str) -> str:
        spec = self.by_name.get(name)
        return spec.default_text() if spec else ""

    def has_enum_value(self, name: str, value: str) -> bool:
        spec = self.by_name.get(name)
        return spec is not None and value.lower() in (v.lower() for v in spec.enumvals)

    def check(self, key: str, value: str, origin: str) -> str:
        """The value in postgresql.conf syntax, or a one-line UsageError naming origin and key."""
        bad = control_character(str(value)) or control_character(unquote(value))
        if bad is not None:
            raise UsageError(f"{origin}: {key} value has a control character ({bad}); "
                             "accepted: printable text on one line")
        spec = self.by_name.get(key)
        if spec is None:
            if "." in key:
                # an extension placeholder such as pg_stat_statements.max
                if not _PLACEHOLDER.match(key):
                    raise UsageError(f"{origin}: {key!r} is not a setting name; accepted: "
                                     "extension.setting in letters, digits and _")
                prefix = key.split(".")[0]
                if prefix.lower() in {name.lower() for name in self.by_name}:
                    raise UsageError(f"{origin}: {key!r}: {prefix} is a PostgreSQL setting, "
                                     "not an extension's prefix; accepted: "
                                     f"{prefix} = value, or an extension's setting as "
                                     "extension.setting")
                return quote_if_needed(unquote(value))
            close = difflib.get_close_matches(key, self.by_name.keys(), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"{origin}: unknown PostgreSQL {self.major} setting {key!r}{hint}")
        text = unquote(value)
        if spec.vartype != "string":
            text = text.strip()
        try:
            return _check_value(spec, text)
        except ValueError as exc:
            raise UsageError(
                f"{origin}: {key} = {text!r} {exc}; accepted: {spec.accepted()}") from None

    def base_units(self, key: str, value: str) -> float | None:
        """A numeric setting's value in its base unit (8kB pages, ms, ...), else None."""
        spec = self.by_name.get(key)
        if spec is None or spec.vartype not in ("integer", "real"):
            return None
        try:
            return _to_base(spec, unquote(value).strip())
        except ValueError:
            return None

    def to_bytes(self, key: str, value: str) -> int | None:
        """A memory setting's value in bytes."""
        spec = self.by_name.get(key)
        base = self.base_units(key, value)
        scale = unit_scale(spec.unit) if spec else None
        if base is None or scale is None or scale[0] != "memory":
            return None
        return int(base * scale[1])


def unquote(value: str) -> str:
    """The value a postgresql.conf token means: a quoted string is read as the server's
    lexer reads it ('' and \\' are a quote, \\\\ a backslash, \\n a newline, ...)."""
    text = str(value).strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return _CONF_ESCAPE.sub(_unescape, text[1:-1])
    return text


# One pass, as the lexer reads a quoted string: '' or a backslash and what it escapes.
_CONF_ESCAPE = re.compile(r"''|\\([0-7]{1,3}|.)", re.DOTALL)
_CONF_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code is None:
        return "'"
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _CONF_ESCAPES.get(code, code)


def quote_if_needed(text: str) -> str:
    """Bare for numbers and identifiers, single-quoted otherwise (postgresql.conf syntax).

    A backslash is doubled: the server's lexer reads backslash escapes inside quotes, so a
    value ending in a backslash would otherwise leave the string unterminated."""
    if _BARE_WORD.match(text) or _is_float(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_value(spec: SettingSpec, text: str) -> str:
    if spec.vartype == "bool":
        word = BOOL_WORDS.get(text.lower())
        if word is None:
            raise ValueError("is not a boolean")
        return word
    if spec.vartype == "enum":
        lowered = {v.lower(): v for v in spec.enumvals}
        if text.lower() in lowered:
            return quote_if_needed(lowered[text.lower()])
        if ("on" in lowered or "off" in lowered) and text.lower() in BOOL_WORDS:
            return BOOL_WORDS[text.lower()]
        raise ValueError("is not accepted by this build")
    if spec.vartype in ("integer", "real"):
        base = _to_base(spec, text)
        low = float(spec.min_val) if spec.min_val not in (None, "") else None
        high = float(spec.max_val) if spec.max_val not in (None, "") else None
        if (low is not None and base < low) or (high is not None and base > high):
            raise ValueError("is out of range")
        return text if _is_float(text) else quote_if_needed(text)
    return quote_if_needed(text)


def _to_base(spec: SettingSpec, text: str) -> float:
    parsed = split_number(text)
    if parsed is None:
        raise ValueError("is not a number")
    number, unit = parsed
    if unit:
        target = unit_scale(spec.unit)
        given = unit_scale(unit)
        if target is None or given is None or given[0] != target[0]:
            raise ValueError(f"has a unit ({unit}) this setting does not take")
        number = number * given[1] / target[1]
        if spec.vartype == "integer":
            number = float(round(number))
    elif spec.vartype == "integer" and number != int(number):
        raise ValueError("is not an integer")
    return number


def _fmt_ms(ms: float) -> str:
    if ms == 0:
        return "0"
    for name in ("d", "h", "min", "s", "ms"):
        size = TIME_UNITS_MS[name]
        if ms >= size and abs(ms / size - round(ms / size)) < 1e-9:
            return f"{round(ms / size)}{name}"
    return f"{ms:g}ms"


# ----- loading ---------------------------------------------------------------------------------

def available_majors() -> list[int]:
    folder = resources.files("pgdyno.config").joinpath(SNAPSHOT_DIR)
    majors = []
    for entry in folder.iterdir():
        match = re.match(r"pg(\d+)\.toml$", entry.name)
        if match:
            majors.append(int(match.group(1)))
    return sorted(majors)


@lru_cache(maxsize=8)
def snapshot(major: int) -> SettingSpecs:
    """The shipped specs of a major version, or the nearest one (marked in ``source``)."""
    majors = available_majors()
    nearest = min(majors, key=lambda m: (abs(m - major), -m))
    text = resources.files("pgdyno.config").joinpath(SNAPSHOT_DIR, f"pg{nearest}.toml").read_text()
    data = tomllib.loads(text)
    specs = {name: SettingSpec(name=name, vartype=row["vartype"], unit=row.get("unit") or None,
                               min_val=row.get("min"), max_val=row.get("max"),
                               enumvals=tuple(row.get("enumvals", ())), boot_val=row.get("boot"),
                               context=row.get("context", ""), category=row.get("category", ""))
             for name, row in data["settings"].items()}
    source = f"pg_settings snapshot of PostgreSQL {data['version']}"
    if nearest != major:
        source += f" (nearest to {major})"
    return SettingSpecs(major=major, version=str(data["version"]), by_name=specs, source=source)


def for_install(install) -> SettingSpecs:  # install: pgdyno.targets.binaries.PgInstall
    """The specs of real binaries: the snapshot, corrected by ``--describe-config``."""
    return _for_binary(install.program("postgres"), install.major, install.version)


@lru_cache(maxsize=8)
def _for_binary(postgres: str, major: int, version: str) -> SettingSpecs:
    base = snapshot(major)
    described = describe_config(postgres)
    if not described:
        return base
    # --describe-config leaves out developer options: keep the snapshot's rows for those.
    specs = dict(base.by_name)
    for name, (vartype, low, high) in described.items():
        known = base.by_name.get(name)
        if known is not None and known.vartype == vartype:
            specs[name] = SettingSpec(name, vartype, known.unit, low or known.min_val,
                                      high or known.max_val, known.enumvals,
                                      known.boot_val, known.context, known.category)
        else:
            # A setting of this build the snapshot does not know: type and range only.
            specs[name] = SettingSpec(name, vartype, None, low or None, high or None)
    return SettingSpecs(major=major, version=version, by_name=specs,
                             source=f"{base.source}, ranges from {postgres} --describe-config")


def describe_config(postgres: str) -> dict[str, tuple[str, str, str]]:
    """name -> (vartype, min, max) from ``postgres --describe-config`` (no server needed)."""
    try:
        out = subprocess.run([postgres, "--describe-config"], capture_output=True, text=True,
                             check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    types = {"BOOLEAN": "bool", "INTEGER": "integer", "REAL": "real", "STRING": "string",
             "ENUM": "enum"}
    result = {}
    for line in out.stdout.splitlines():
        cols = line.split("\t")
        if len(cols) < 5 or cols[3] not in types:
            continue
        vartype = types[cols[3]]
        numeric = vartype in ("integer", "real") and len(cols) > 6
        low, high = (cols[5], cols[6]) if numeric else ("", "")
        result[cols[0]] = (vartype, low, high)
    return result


# ----- writing snapshots -------------------------------------------------------------------------

_SNAPSHOT_QUERY = """
SELECT name, vartype, unit, min_val, max_val, enumvals, boot_val, context, category
FROM pg_settings ORDER BY name"""


def snapshot_toml(conn) -> str:  # conn: psycopg.Connection to a server of the version
    """A snapshot of the specs from a live server's pg_settings, as TOML text."""
    version = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    lines = [f"# pg_settings of PostgreSQL {version}, written by pgdyno.config.setting_specs."
             "snapshot_toml", f'version = "{version}"', ""]
    for name, vartype, unit, low, high, enumvals, boot, context, category in conn.execute(
            _SNAPSHOT_QUERY):
        lines.append(f"[settings.{name}]")
        lines.append(f'vartype = "{vartype}"')
        for key, val in (("unit", unit), ("min", low), ("max", high), ("boot", boot),
                         ("context", context), ("category", category)):
            if val is not None:
                lines.append(f"{key} = {toml_string(str(val))}")
        if enumvals:
            lines.append("enumvals = [" + ", ".join(toml_string(v) for v in enumvals) + "]")
        lines.append("")
    return "\n".join(lines)


def toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'
