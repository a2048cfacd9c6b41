"""Reading files the user names (config, campaign, hardware profile): one line for any fault.

A file that is missing, a directory, unreadable, binary or not valid TOML becomes a
``UsageError`` naming the file and what is accepted; it never escapes as a traceback.
"""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path
from typing import Any

from pgdyno.errors import UsageError


def read_text(path: Path, label: str, accepted: str) -> str:
    """The file's text; ``label`` names it in messages (``--config x.toml``), ``accepted``
    says what would do instead (``a .toml or .env config file``)."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{label}: is a directory; accepted: {accepted}")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{label}: no such file; accepted: {accepted}") from None
    except PermissionError:
        raise UsageError(f"{label}: permission denied; accepted: {accepted} that this "
                         "user may read") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{label}: not a text file (byte {exc.start} is not UTF-8); "
                         f"accepted: {accepted}") from None
    except OSError as exc:
        raise UsageError(f"{label}: cannot be read ({exc.strerror or exc}); "
                         f"accepted: {accepted}") from None


def read_toml(path: Path, label: str, accepted: str) -> dict[str, Any]:
    text = read_text(path, label, accepted)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{label}: not valid TOML ({' '.join(str(exc).split())})") from None


def toml_type(value: Any) -> str:
    """What a TOML value is, as a message says it: ``a string``, ``an array of tables``."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return "an array of tables"
        return "an array"
    if isinstance(value, datetime.date | datetime.time):
        return "a date/time"
    return type(value).__name__


def control_character(text: str) -> str | None:
    """The first control character of ``text`` (newline, tab, NUL, DEL, ...) as ``\\n``,
    else None: such characters cannot be written into postgresql.conf or a one-line log."""
    for char in text:
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return repr(char)[1:-1]
    return None
