"""The workload plugins' ``pgdyno bench`` options, checked against pgdyno's own and each other's.

Every registered workload's option fields become options of the one ``pgdyno bench``
command (``runner.options``). Two options with one name or one flag break that command for
every workload, ``--help`` included, with an error that names no package; so the CLI checks
the table before it builds its commands, and refuses the plugin that brings the second
name in one line naming its package (exit 2). Workloads may share an option: one name with
one flag (``--scale`` of the pgbench workloads) is a single option.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from pgdyno.runner.options import COMMON
from pgdyno.workloads import registry
from pgdyno.workloads.base import cli_fields, cli_flag
from pgdyno.workloads.registry import PluginError

_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")
RESERVED = {"workload": "the WORKLOAD argument", "--help": "the help option"}
"""Names and flags of ``pgdyno bench`` that are no option of the table."""


def check_plugin_options() -> None:
    """Raise ``PluginError`` for the first plugin option whose name or flag is taken."""
    # option name or flag -> who has it: words, or (flag, workload) for a plugin's option,
    # worded only for an error (naming a plugin's package reads its metadata: slow)
    owners: dict[str, str | tuple[str, str]] = dict(RESERVED)
    flag_of: dict[str, str] = {}  # option name -> its flag (workloads may share an option)
    for opt in COMMON:
        flags = _flags(opt.cli_flag, opt.type is bool)
        for key in (opt.name, *flags):
            owners[key] = f"pgdyno's own option {'/'.join(flags)}"
    # pgdyno's own workloads first: a clash is blamed on the package that came later.
    names = sorted(registry.names(), key=lambda name: not registry.is_pgdyno_own(name))
    for name in names:
        options_type = registry.get(name).options_type
        hints = typing.get_type_hints(options_type)  # readable: checked when it loaded
        for f in cli_fields(options_type):
            is_bool = (f.metadata.get("cli_type") or hints[f.name]) is bool
            _claim(owners, flag_of, f, is_bool, name)


def _claim(owners: dict[str, str | tuple[str, str]], flag_of: dict[str, str],
           f: dataclasses.Field, is_bool: bool, workload: str) -> None:
    """Record one option field of ``workload``; refuse it when its name or flag is taken."""
    flag = cli_flag(f)
    if not _FLAG.fullmatch(flag):
        raise PluginError(f"{_where(workload, flag, f)}: not a usable flag; accepted: -- then "
                          "lower-case letters, digits and dashes")
    if flag_of.get(f.name) == flag:  # the same option as another workload's (--scale)
        return
    keys = (f.name, *_flags(flag, is_bool))
    for key in keys:
        if key in owners:
            raise PluginError(f"{_where(workload, flag, f)} takes the name of "
                              f"{_owner_words(owners[key])}; accepted: a name and flag of "
                              "its own (option(..., flag='--...'))")
    for key in keys:
        owners[key] = (flag, workload)
    flag_of[f.name] = flag


def _where(workload: str, flag: str, f: dataclasses.Field) -> str:
    return f"workload plugin {registry.origin(workload)}: option {flag} (field {f.name})"


def _owner_words(owner: str | tuple[str, str]) -> str:
    if isinstance(owner, str):
        return owner
    flag, workload = owner
    return f"option {flag} of workload plugin {registry.origin(workload)}"


def _flags(flag: str, is_bool: bool) -> tuple[str, ...]:
    """The flags an option takes on the command line (a boolean also --no-...)."""
    return (flag, f"--no-{flag[2:]}") if is_bool else (flag,)
