"""Passwords out of everything pgdyno writes or prints.

A DSN may carry a password (``password=...`` in keyword/value form, ``user:pw@`` in a URI).
pgdyno keeps it in memory only; any text that might hold one (a copied campaign file, a
journal event, an error message quoting the user's input) passes through ``redact``.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
_KEYWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)", re.IGNORECASE)
_URI = re.compile(r"(\bpostgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)", re.IGNORECASE)
_QUERY = re.compile(r"([?&]password=)([^&\s'\"]*)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every DSN password replaced by ***."""
    text = _KEYWORD.sub(lambda m: m.group(1) + MASK, text)
    text = _URI.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    return _QUERY.sub(lambda m: m.group(1) + MASK, text)


def redact_values(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every string redacted, so the
    JSON written from it stays valid."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v) for v in value]
    return value
