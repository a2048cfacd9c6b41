"""Entry point: builds the typer app from the command modules and maps errors to exit codes.

Every failure the user can act on arrives here as a ``PgdynoError`` (or a click usage
error) and leaves as exactly one line on stderr with the error's exit code; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

import typer

from pgdyno import __version__
from pgdyno.cli import signals
from pgdyno.errors import PgdynoError, RunInterrupted
from pgdyno.redact import redact

# Recent typer releases vendor their own copy of click; find its exception classes through
# typer's public BadParameter so that both old and new releases are handled.
_CLICK_CLASSES = {c.__name__: c for c in typer.BadParameter.__mro__}
CliUsageError = _CLICK_CLASSES["UsageError"]
CliException = _CLICK_CLASSES["ClickException"]

app = typer.Typer(
    name="pgdyno",
    help="A dynamometer for PostgreSQL: real load, telemetry, bottleneck verdicts, reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"pgdyno {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_show_version,
                                      is_eager=True, help="print the version and exit")) -> None:
    """A dynamometer for PostgreSQL: real load, telemetry, bottleneck verdicts, reports."""


try:  # the commands' options come from the workload plugins, loaded here
    from pgdyno.cli import bench_cmds, compare_cmds, config_cmds, fleet_cmds, provision_cmds

    for module in (bench_cmds, config_cmds, compare_cmds, provision_cmds, fleet_cmds):
        module.register(app)
except PgdynoError as exc:  # a workload plugin that fails to load: one line, not a traceback
    print(f"pgdyno: error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)


def fail(message: str, code: int) -> None:
    """Print one line on stderr and exit."""
    first = redact(" ".join(message.split()))
    print(f"pgdyno: error: {first}", file=sys.stderr)
    sys.exit(code)


def run() -> None:
    signals.install()
    try:
        _run()
    finally:
        signals.settle()


def _run() -> None:
    try:
        code = app(standalone_mode=False)
        # typer catches a Ctrl-C itself in non-standalone mode and returns its exit code.
        if signals.first_signal() is not None:
            fail("interrupted", signals.exit_code())
        if isinstance(code, int) and code:
            sys.exit(code)
    except RunInterrupted as exc:
        fail(str(exc), signals.exit_code(exc.exit_code))
    except PgdynoError as exc:
        fail(str(exc), exc.exit_code)
    except CliUsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # help was printed; nothing failed
            sys.exit(0)
        fail(exc.format_message(), 2)
    except CliException as exc:
        fail(exc.format_message(), exc.exit_code)
    except typer.Abort as exc:
        # Click turns any EOFError a command lets out into an abort, which reads as Ctrl-C:
        # without a signal it is not one, but a reader that missed a damaged file (a bug).
        if signals.first_signal() is None and isinstance(exc.__cause__, EOFError):
            raise exc.__cause__ from None
        fail("interrupted", signals.exit_code())
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", signals.exit_code())
    except Exception as exc:
        # A signal that lands inside a C extension's import surfaces as that import's
        # failure (matplotlib's Agg backend: "ImportError: initialization failed"), with
        # the KeyboardInterrupt as its cause: still an interruption, never a traceback.
        if signals.first_signal() is not None and interrupted_by(exc):
            fail("interrupted", signals.exit_code())
        raise


def interrupted_by(exc: BaseException) -> bool:
    """``exc`` was caused, directly or down its chain, by a KeyboardInterrupt."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
