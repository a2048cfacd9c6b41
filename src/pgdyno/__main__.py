"""``python -m pgdyno``: the same as the ``pgdyno`` command."""

import contextlib
import os
import sys

from pgdyno.cli import signals
from pgdyno.cli.main import run

try:
    run()
except SystemExit as exc:
    if signals.first_signal() is None:
        raise
    # Under ``python -m`` only, CPython ends a process by the signal itself (-2, not the
    # 130 pgdyno chose) once a KeyboardInterrupt has passed through an exec() of source
    # text, which making a dataclass during an import does: a Ctrl-C in the first second.
    # pgdyno's cleanup is done by now (its threads are daemons, it registers no atexit).
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # full or closed: nothing to do
            stream.flush()
    os._exit(code)
