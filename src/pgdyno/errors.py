"""Errors that pgdyno reports to users as one line and a non-zero exit code.

The CLI maps every ``PgdynoError`` to its ``exit_code`` and prints ``str(error)``
on one line; anything else is a bug, reported in one line too, its traceback saved to a
file (``pgdyno.cli.main``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI loads this module before its signal handling: nothing heavy
    from pathlib import Path


class PgdynoError(Exception):
    """A failure the user can act on; the message names what is wrong and what is accepted."""

    exit_code = 1


class UsageError(PgdynoError):
    """Bad input: an option, a file or a key that pgdyno cannot accept."""

    exit_code = 2


class TargetError(PgdynoError):
    """The server under test could not be reached, started or stopped."""

    exit_code = 2


class RunError(PgdynoError):
    """A run that ended early; ``run_dir`` holds what it recorded (None: not created)."""

    def __init__(self, message: str, run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


class RunFailed(RunError):
    """A benchmark run failed after it started; the run directory says why."""

    exit_code = 1


class RunRefused(RunError):
    """Bad input found only once the run had started (foreign tables in the database)."""

    exit_code = 2


class RunInterrupted(RunError):
    """The user interrupted a run (Ctrl-C); partial results are kept and marked."""

    exit_code = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: handled exactly like Ctrl-C, by every handler of KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def interrupted_by(exc: BaseException) -> bool:
    """``exc`` was caused, directly or down its chain, by a KeyboardInterrupt (a signal that
    landed inside a C extension's import surfaces as that import's ImportError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
