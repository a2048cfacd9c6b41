"""Names that become one directory (or file name part) under the results directory.

A campaign's name, its ``--size``, a context, a search's name and a study's config labels
are each joined to ``--results-dir`` as one path component. Every such name goes through
``check_dir_name`` before anything is created, so that none of them can point outside the
results tree (``..``, ``/``, an absolute path), at the results directory itself (``.``,
empty), or fail later as a path the system refuses (NUL, too long).
"""

from __future__ import annotations

import os

from pgdyno.errors import UsageError

NAME_MAX_BYTES = 100
"""Longest name accepted, in bytes as the file system stores it. File systems allow 255 a
component; pgdyno adds to some names (``NAME--SIZE``, ``plan-LABEL.json``, temporary
suffixes), so a name keeps well under that."""
ACCEPTED_NAME = (f"a name without / or \\, not . or .., of 1 to {NAME_MAX_BYTES} bytes on one "
                 "line")
SHOWN_CHARS = 60
"""A refused name longer than this is shown cut, so its one line stays readable."""


def dir_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one path component under the results directory (None: it
    can)."""
    if not name.strip():
        return "an empty name"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "a control character in the name"
    if name == ".":
        return "names the results directory itself"
    if "/" in name or "\\" in name or name == "..":
        return "would leave the results directory"
    # os.fsencode, not str.encode: argv bytes that are not UTF-8 arrive as surrogates.
    size = len(os.fsencode(name))
    if size > NAME_MAX_BYTES:
        return f"{size} bytes long"
    return None


def check_dir_name(name: str, what: str, example: str) -> str:
    """``name`` when it can be one directory under the results directory; else a
    UsageError naming ``what`` (the option or key, e.g. ``--size`` or ``campaign FILE:
    [campaign] name =``), the name, why, and what is accepted."""
    problem = dir_name_problem(name)
    if problem is None:
        return name
    shown = name if len(name) <= SHOWN_CHARS else name[:SHOWN_CHARS] + "…"
    raise UsageError(f"{what} {shown!r}: {problem}; accepted: {ACCEPTED_NAME} "
                     f"(e.g. {example})")
