"""Errors that pgdyno reports to users as one line and a non-zero exit code.

The CLI maps every ``PgdynoError`` to its ``exit_code`` and prints ``str(error)``
on one line; anything else is a bug and keeps its traceback.
"""


class PgdynoError(Exception):
    """A failure the user can act on; the message names what is wrong and what is accepted."""

    exit_code = 1


class UsageError(PgdynoError):
    """Bad input: an option, a file or a key that pgdyno cannot accept."""

    exit_code = 2


class TargetError(PgdynoError):
    """The server under test could not be reached, started or stopped."""

    exit_code = 2


class RunFailed(PgdynoError):
    """A benchmark run failed after it started; the run directory says why."""

    exit_code = 1


class RunInterrupted(PgdynoError):
    """The user interrupted a run (Ctrl-C); partial results are kept and marked."""

    exit_code = 130
