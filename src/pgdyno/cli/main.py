"""Entry point: builds the typer app from the command modules and maps errors to exit codes.

Every failure the user can act on arrives here as a ``PgdynoError`` (or a click usage
error) and leaves as exactly one line on stderr with the error's exit code; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

import click
import typer

from pgdyno.cli import bench_cmds, config_cmds
from pgdyno.errors import PgdynoError

app = typer.Typer(
    name="pgdyno",
    help="A dynamometer for PostgreSQL: real load, telemetry, bottleneck verdicts, reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for module in (bench_cmds, config_cmds):
    module.register(app)


def fail(message: str, code: int) -> None:
    """Print one line on stderr and exit."""
    first = " ".join(message.split())
    print(f"pgdyno: error: {first}", file=sys.stderr)
    sys.exit(code)


def run() -> None:
    try:
        app(standalone_mode=False)
    except PgdynoError as exc:
        fail(str(exc), exc.exit_code)
    except click.exceptions.NoArgsIsHelpError:
        sys.exit(0)
    except click.UsageError as exc:
        fail(exc.format_message(), 2)
    except click.exceptions.Abort:
        fail("interrupted", 130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)
