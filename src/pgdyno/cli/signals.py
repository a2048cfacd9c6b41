"""How pgdyno ends on a signal: SIGTERM and SIGHUP (terminal closed) end a run like Ctrl-C.

The first SIGINT, SIGTERM or SIGHUP raises ``KeyboardInterrupt`` (``Terminated`` for the
last two), which every run loop already handles: the child program is stopped, the server
is stopped, the run is marked ``interrupted`` and its report built from what was kept.
Any later signal is only acknowledged: a second Ctrl-C during that cleanup must not abort
it and leave a server running. The exit code is 128 + the first signal's number (130,
143, 129).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

from pgdyno.errors import Terminated

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_first: list[int] = []


def install() -> None:
    for signum in HANDLED:
        signal.signal(signum, _on_signal)
    sys.unraisablehook = _quiet_interruption


def _quiet_interruption(unraisable) -> None:  # noqa: ANN001 - sys.UnraisableHookArgs
    """A signal whose exception lands in a callback Python cannot raise from (a weakref's
    or a finaliser's) is not lost: it is recorded, and the CLI ends with "interrupted" once
    the command returns. Printing the swallowed traceback would only alarm."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):  # Terminated is one too
        return
    sys.__unraisablehook__(unraisable)


def settle() -> None:
    """Once interrupted, ignore further signals while the interpreter exits: Python puts
    back the default handlers while it finalises, and one more Ctrl-C then would kill the
    process by signal instead of letting it exit with its code."""
    if _first:
        for signum in HANDLED:
            signal.signal(signum, signal.SIG_IGN)


def reset() -> None:
    """Forget a signal received (for a caller that runs pgdyno's CLI more than once)."""
    _first.clear()


def first_signal() -> int | None:
    return _first[0] if _first else None


def exit_code(default: int = 130) -> int:
    return 128 + _first[0] if _first else default


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _first:
        print("pgdyno: still cleaning up after the interruption (server, run status, "
              "report); please wait", file=sys.stderr, flush=True)
        return
    _first.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)
