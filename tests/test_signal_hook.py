"""A signal landing where Python cannot raise (a weakref callback) is kept, not printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import os, signal, weakref
from pgdyno.cli import signals
signals.install()
class Thing: pass
thing = Thing()
# The callback runs while the object is freed: the SIGINT handler's KeyboardInterrupt is
# raised inside it, where Python can only report it as "Exception ignored".
ref = weakref.ref(thing, lambda _: os.kill(os.getpid(), signal.SIGINT))
del thing
print(signals.first_signal(), signals.exit_code())
"""


def test_interrupt_in_a_weakref_callback_is_recorded_quietly() -> None:
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "130"]  # recorded: the CLI ends with "interrupted"
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr, out.stderr


IMPORT_INTERRUPTED = """
import os, signal, sys, typer
from pgdyno.cli import main, signals
signals.install()
command = typer.Typer()

@command.command()
def build() -> None:
    try:  # the signal arrives while a C extension initialises, as matplotlib's Agg did
        os.kill(os.getpid(), signal.SIGINT)
    except KeyboardInterrupt as exc:
        raise ImportError("initialization failed") from exc

main.run(command)
"""


def test_an_import_failed_by_the_interrupt_ends_as_an_interruption() -> None:
    """The KeyboardInterrupt as an ImportError's cause: one line and 130, no traceback."""
    out = subprocess.run([sys.executable, "-c", IMPORT_INTERRUPTED], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 130, (out.returncode, out.stderr)
    assert out.stderr.strip() == "pgdyno: error: interrupted", out.stderr


SWALLOWED = """
import os, signal, sys, typer
from pgdyno.cli import main, signals
signals.install()
command = typer.Typer()

@command.command()
def draw() -> None:
    try:  # the signal arrives inside C code that drops it for its own error, as Agg's
        os.kill(os.getpid(), signal.SIGINT)  # drawing did ("Invalid bounding box")
    except KeyboardInterrupt:
        pass
    raise ValueError("Invalid bounding box")

main.run(command)
"""


def test_an_error_that_swallowed_the_interrupt_still_ends_as_an_interruption(
        tmp_path: Path) -> None:
    """The KeyboardInterrupt dropped by the code it landed in: still exit 130 and one line,
    which names the error that followed and keeps its traceback."""
    out = subprocess.run([sys.executable, "-c", SWALLOWED], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert out.returncode == 130, (out.returncode, out.stderr)
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("pgdyno: error: interrupted (then ValueError: Invalid bounding "
                           "box; its traceback is in "), line
    (saved,) = tmp_path.glob("pgdyno-traceback-*.txt")
    assert saved.name in line and "Invalid bounding box" in saved.read_text()
