"""Every script's command line: its description from its docstring, ``--output``, and
one line instead of a traceback for what pgdyno refuses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from pgdyno.errors import PgdynoError


def new_parser(doc: str | None, *aliases: str) -> argparse.ArgumentParser:
    """A parser whose description is ``doc`` (the script's docstring, its usage examples
    kept as written), with ``--output FILE`` (also spelt as each of ``aliases``, the
    option's older names)."""
    text = (doc or "").strip()
    parser = argparse.ArgumentParser(description=text,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", *aliases, type=Path, default=None, metavar="FILE",
                        help="where the figures go (JSON; default: bench/results/"
                             "NAME-DATE.json, ignored by git)")
    return parser


def run(main: Callable[[list[str] | None], int | None]) -> None:
    """Run a script's ``main`` as a program: its return value is the exit code; an error
    pgdyno raises for bad input ends in one line, a Ctrl-C with code 130."""
    prog = Path(sys.argv[0]).name
    try:
        code = main(None)
    except PgdynoError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        code = getattr(exc, "exit_code", 1)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code or 0)
