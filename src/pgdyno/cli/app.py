"""The typer app: pgdyno's commands, their options taken from the workload plugins.

Built on first use rather than on import: building it imports every plugin, which takes
most of a second, and ``pgdyno.cli.main`` has its signal handling in place before that,
so that a Ctrl-C at any moment ends in one line.
"""

from __future__ import annotations

import functools

import typer

from pgdyno import __version__

# Recent typer releases vendor their own copy of click; find its exception classes through
# typer's public BadParameter so that both old and new releases are handled.
_CLICK_CLASSES = {c.__name__: c for c in typer.BadParameter.__mro__}
CliUsageError = _CLICK_CLASSES["UsageError"]
CliException = _CLICK_CLASSES["ClickException"]


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"pgdyno {__version__}")
        raise typer.Exit()


def _new_app() -> typer.Typer:
    app = typer.Typer(
        name="pgdyno",
        help="A dynamometer for PostgreSQL: real load, telemetry, bottleneck verdicts, "
             "reports.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def main(version: bool = typer.Option(False, "--version", callback=_show_version,
                                          is_eager=True, help="print the version and exit")
             ) -> None:
        """A dynamometer for PostgreSQL: real load, telemetry, bottleneck verdicts,
        reports."""

    return app


@functools.cache
def pgdyno_app() -> typer.Typer:
    """The app with every command; a plugin that cannot be loaded, or whose options clash
    with another's, raises its one-line ``PluginError`` here (nothing is cached then, so
    the next call tries again)."""
    from pgdyno.cli import (
        bench_cmds,
        compare_cmds,
        config_cmds,
        fleet_cmds,
        history_cmds,
        provision_cmds,
    )
    from pgdyno.runner.plugin_options import check_plugin_options

    check_plugin_options()
    app = _new_app()
    for module in (bench_cmds, config_cmds, compare_cmds, provision_cmds, fleet_cmds,
                   history_cmds):
        module.register(app)
    return app
