"""An unexpected exception (a bug) as a line a user can report and a file with its traceback.

The traceback goes to a file of its own in the temporary directory, not under
``--results-dir``: the results directory may be the very thing that failed (unwritable,
full, a name too long), and a bug in argument handling happens before anyone knows it.
Like every file pgdyno writes, it holds no DSN password.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path

from pgdyno import __version__
from pgdyno.redact import redact

PREFIX = "pgdyno-traceback-"


def describe(exc: BaseException, argv: list[str]) -> str:
    """What failed, in one line: the command, the package the bug is in (pgdyno or a
    plugin's), what was raised and the innermost place outside the standard library it
    came from (``statistics.fmean`` is only where pgdyno's bad value landed)."""
    command = next((arg for arg in argv[1:2] if not arg.startswith("-")), "")
    message = " ".join(str(exc).split())
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    place = _blamed_place(exc)
    package = _package_of(place[0]) if place else "pgdyno"
    where = f", in {place[1]}" if place else ""
    return (f"pgdyno {command}".rstrip() + f" failed on an unexpected error, a bug in "
            f"{package}: {what}{where}")


def _blamed_place(exc: BaseException) -> tuple[str, str] | None:
    """(module, "module (function, line N)") of the innermost frame of ``exc``'s traceback
    outside the standard library, else of the innermost frame."""
    places = []
    for frame, line in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__") or Path(frame.f_code.co_filename).stem)
        places.append((module, f"{module} ({frame.f_code.co_name}, line {line})"))
    for module, place in reversed(places):
        if module.split(".")[0] not in sys.stdlib_module_names | {"__main__"}:
            return module, place
    return places[-1] if places else None


def _package_of(module: str) -> str:
    """The installed package a module comes from: a workload plugin's (by its entry point),
    a dependency's (by the packaging metadata); pgdyno when none says."""
    top = module.split(".")[0]
    try:
        from importlib.metadata import entry_points, packages_distributions

        from pgdyno.workloads.registry import GROUP

        for ep in entry_points(group=GROUP):
            if ep.module.split(".")[0] == top and ep.dist is not None:
                return f"{ep.dist.name} {ep.dist.version}"
        return (packages_distributions().get(top) or ["pgdyno"])[0]
    except Exception:  # noqa: BLE001 - damaged metadata elsewhere must not hide the bug
        return "pgdyno"


def save_traceback(exc: BaseException, argv: list[str]) -> tuple[Path | None, str]:
    """(the file the full traceback was written to, "") or (None, why none was written)."""
    text = "".join(traceback.format_exception(exc))
    header = (f"pgdyno {__version__}, Python {platform.python_version()}, "
              f"{datetime.now(UTC).isoformat(timespec='seconds')}\n"
              f"command: pgdyno {' '.join(argv[1:])}\n\n")
    try:
        fd, name = tempfile.mkstemp(prefix=PREFIX, suffix=".txt", text=True)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as out:
            out.write(redact(header + text))
    except OSError as exc_saving:
        return None, exc_saving.strerror or type(exc_saving).__name__
    return Path(name), ""
