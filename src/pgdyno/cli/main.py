"""Entry point: installs the signal handling, builds the typer app, maps errors to exit codes.

Whatever happens, pgdyno ends with at most one line on stderr, never a traceback:

- 0: done;
- 1: a run or a step that failed after it started (``PgdynoError``);
- 2: bad input: an option, a file, a key, a name, a plugin, or a file or device pgdyno
  cannot read or write (a full disk, a name too long), each named in the line;
- 3: ``pgdyno history --fail-on-regression`` found a series whose newest level is worse
  than the one before by more than its threshold (``cli.history_cmds.REGRESSION``);
- 70 (``UNEXPECTED``, sysexits' EX_SOFTWARE): an error nobody foresaw, a bug in pgdyno or
  in a plugin: the line names it and where it was raised, and the file in the temporary
  directory (``$TMPDIR``, else /tmp) its full traceback was saved to;
- 128 + N: ended by signal N (Ctrl-C 130, SIGTERM 143, SIGHUP 129; ``cli.signals``).

Only this module and ``cli.signals`` load before the handlers are in place: typer, the
commands and the workload plugins, most of a second of imports, load after.
"""

from __future__ import annotations

# Only what the interpreter has loaded already, and two small modules of pgdyno's: every
# import here runs before the signal handling is in place. The rest is imported where used.
import errno
import io
import os
import sys

from pgdyno.cli import signals
from pgdyno.errors import PgdynoError, RunInterrupted, interrupted_by

USAGE = 2
UNEXPECTED = 70
"""Exit code of an unexpected exception (a bug): distinct from every code pgdyno means."""

STDOUT = "standard output"
"""The name an error writing the command's output gives (``pgdyno runs >/dev/full``)."""


def run(app: object = None) -> None:
    """The ``pgdyno`` command; ``app``: another typer app to dispatch (tests)."""
    signals.install()
    try:
        _run(app)
    except KeyboardInterrupt:  # the first Ctrl-C landed while an error was being reported
        fail("interrupted", signals.exit_code())
    finally:
        signals.settle()


def fail(message: str, code: int) -> None:
    """Print one line on stderr and exit."""
    import contextlib

    from pgdyno.redact import redact

    first = redact(" ".join(message.split()))
    with contextlib.suppress(OSError, ValueError):  # stderr full or closed: the code tells
        print(f"pgdyno: error: {first}", file=sys.stderr, flush=True)
    sys.exit(code)


def _run(app: object) -> None:
    try:
        _name_stdout_errors()
        code = _dispatch(app)
        sys.stdout.flush()  # output still buffered fails here, not at interpreter exit
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every exception ends as one line
        message, code = _ending(exc)
        if message is None:
            sys.exit(code)
        fail(message, code)
    # typer catches a Ctrl-C itself in non-standalone mode and returns its exit code.
    if signals.first_signal() is not None:
        fail("interrupted", signals.exit_code())
    if isinstance(code, int) and code:
        sys.exit(code)


def _dispatch(app: object) -> object:
    if app is None:
        from pgdyno.cli.app import pgdyno_app

        app = pgdyno_app()
    return app(standalone_mode=False)


def _ending(exc: BaseException) -> tuple[str | None, int]:
    """The line (None: nothing to say) and the exit code ``exc`` ends pgdyno with."""
    if isinstance(exc, RunInterrupted):
        return str(exc), signals.exit_code(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", signals.exit_code()
    if isinstance(exc, PgdynoError):
        return str(exc), exc.exit_code
    cli = _cli_ending(exc)
    if cli is not None:
        return cli
    # A signal that lands inside a C extension surfaces as the extension's own error: with
    # the KeyboardInterrupt as its cause (matplotlib's Agg import: "initialization
    # failed"), or with it dropped (Agg drawing: "Invalid bounding box"). Either way the
    # command was interrupted; an error not chained to the signal keeps its traceback.
    if signals.first_signal() is not None:
        if interrupted_by(exc):
            return "interrupted", signals.exit_code()
        return f"interrupted ({_unexpected_after_signal(exc)})", signals.exit_code()
    if isinstance(exc, OSError) and exc.filename is not None:
        return _os_line(exc), USAGE
    return _unexpected(exc), UNEXPECTED


def _cli_ending(exc: BaseException) -> tuple[str | None, int] | None:
    """Click's own endings (usage errors, --help with no arguments, typer.Exit, Abort);
    None for any other exception."""
    if "pgdyno.cli.app" not in sys.modules:  # raised before click was loaded
        return None
    import typer

    from pgdyno.cli.app import CliException, CliUsageError

    if isinstance(exc, CliUsageError):
        if type(exc).__name__ == "NoArgsIsHelpError":  # help was printed; nothing failed
            return None, 0
        return exc.format_message(), USAGE
    if isinstance(exc, CliException):
        return exc.format_message(), exc.exit_code
    if isinstance(exc, typer.Exit):
        return None, exc.exit_code
    if isinstance(exc, typer.Abort):
        # Click turns any EOFError a command lets out into an abort, which reads as Ctrl-C:
        # without a signal it is not one, but a reader that missed a damaged file (a bug).
        if signals.first_signal() is None and isinstance(exc.__cause__, EOFError):
            return _unexpected(exc.__cause__), UNEXPECTED
        return "interrupted", signals.exit_code()
    return None


def _os_line(exc: OSError) -> str:
    """A file or device that could not be used, named, with the system's reason."""
    reason = exc.strerror or os.strerror(exc.errno or 0)
    if exc.errno == errno.ENAMETOOLONG:
        reason += f" ({_too_long(os.fsdecode(exc.filename))})"
    names = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 is not None else "")
    return f"{names}: {reason}"


def _too_long(name: str) -> str:
    """Which limit a name too long passes: one part's (255 bytes on most file systems) or
    the whole path's (4096 bytes on Linux)."""
    from pathlib import Path

    longest = max(Path(name).parts or (name,), key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > 255:
        return (f"its part {longest[:20]}... is {len(os.fsencode(longest))} bytes long; "
                "most file systems take at most 255")
    return f"the path is {len(os.fsencode(name))} bytes long; Linux takes at most 4096"


def _unexpected_after_signal(exc: BaseException) -> str:
    """What was raised after the signal, and where its traceback went."""
    from pgdyno.cli import crash

    saved, _ = crash.save_traceback(exc, sys.argv)
    then = f"then {type(exc).__name__}: {exc}"
    return then + (f"; its traceback is in {saved}" if saved is not None else "")


def _unexpected(exc: BaseException) -> str:
    """One line for a bug: what was raised and where, and the file holding its traceback."""
    from pgdyno.cli import crash

    what = crash.describe(exc, sys.argv)
    saved, why = crash.save_traceback(exc, sys.argv)
    where = (f"the full traceback is saved in {saved} (a file in the temporary directory)"
             if saved is not None else f"its traceback could not be saved ({why})")
    return f"{what}; {where}; please report it"


# ----- standard output --------------------------------------------------------------------

class _NamedStdout(io.FileIO):
    """File descriptor 1 whose write errors name it ("standard output: No space left on
    device", exit 2) instead of reading as a bug. After the first failure it takes
    everything without writing, so that neither a later line nor the interpreter's final
    flush fails again and prints a traceback of its own."""

    failed = False

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.failed:
            return len(data)
        try:
            return super().write(data)
        except OSError as exc:
            self.failed = True
            raise type(exc)(exc.errno, exc.strerror, STDOUT) from None


def _name_stdout_errors() -> None:
    """Route the real stdout through ``_NamedStdout``; a stdout already replaced (a test's
    capture, a caller's redirection) is left alone."""
    out = sys.stdout
    if out is None or out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper):
        return
    try:
        fd = out.fileno()
        out.flush()
    except (OSError, ValueError):
        return
    raw = _NamedStdout(fd, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=out.encoding,
                                  errors=out.errors, line_buffering=out.line_buffering,
                                  write_through=out.write_through)
