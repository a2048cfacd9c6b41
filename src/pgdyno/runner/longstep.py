"""A step that takes more than a few seconds says what it will do, for how long and, when
pgdyno changed what was asked, why; then shows that it is still at it.

One line before the step starts ("long validation: tuned, 1,810 s (raised from 60 s to hold
two checkpoint and autovacuum cycles)"), always: a log read afterwards names every long
step. While it runs, on a terminal a progress bar (removed when it ends); where the output
is a log, a line now and then ("long validation: tuned, 360 s of 1,810 s (20%)") and one
when it ends, so that a log's last line is never an hour old.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.errors import LiveError
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

LOG_EVERY_SHARE = 0.2
"""In a log, a line each time this share of the planned time has passed..."""
LOG_EVERY_MIN_S = 2.0
"""...but not more often than this (a short step gets a line or two)..."""
LOG_EVERY_MAX_S = 60.0
"""...nor more rarely (a half-hour step gets a line a minute)."""
LOG_EVERY_UNKNOWN_S = 30.0
"""In a log, the period of a step whose length is not known in advance (a dataset load)."""


def seconds_words(seconds: float) -> str:
    """"1,810 s"; under ten seconds with a decimal ("2.5 s")."""
    return f"{seconds:,.1f} s" if seconds < 10 else f"{seconds:,.0f} s"


def minutes_words(seconds: float) -> str:
    """A length as people plan it: ``seconds_words`` below two minutes, else "43 min"."""
    return seconds_words(seconds) if seconds < 120 else f"{seconds / 60:,.0f} min"


def announcement(what: str, seconds: float | None, why: str = "", qualifier: str = "") -> str:
    """The line before a step: what, how long (when known; ``qualifier``: "about " for an
    estimate, "up to " for a budget) and why it is so long."""
    line = what if seconds is None else f"{what}, {qualifier}{seconds_words(seconds)}"
    return f"{line} ({why})" if why else line


def log_every_s(seconds: float | None) -> float:
    """How often a log hears of a step planned for ``seconds`` (None: not known)."""
    if seconds is None:
        return LOG_EVERY_UNKNOWN_S
    return min(LOG_EVERY_MAX_S, max(LOG_EVERY_MIN_S, LOG_EVERY_SHARE * seconds))


def still_running(what: str, elapsed_s: float, seconds: float | None, detail: str = "",
                  qualifier: str = "") -> str:
    """A log's line while the step runs: "what, 360 s of 1,810 s (20%)"."""
    if seconds:
        done = f"{seconds_words(elapsed_s)} of {qualifier}{seconds_words(seconds)} " \
               f"({min(100.0, 100 * elapsed_s / seconds):.0f}%)"
    else:
        done = f"{seconds_words(elapsed_s)} so far"
    return f"{what}, {done}" + (f": {detail}" if detail else "")


@contextlib.contextmanager
def long_step(console: Console | None, what: str, seconds: float | None = None,
              why: str = "", *, qualifier: str = "", show_progress: bool = True,
              bar: bool = True, detail: Callable[[], str] = lambda: "") -> Iterator[None]:
    """Announce the step, then, with ``show_progress``, a bar on a terminal (``bar``:
    False where the caller's own bar already follows it) or a line every ``log_every_s``
    in a log, with ``detail()`` (what the step says of itself now) appended."""
    if console is None:
        yield
        return
    _print(console, announcement(what, seconds, why, qualifier))
    if not show_progress:
        yield
        return
    if console.is_terminal:
        with _bar(console, what, seconds) if bar else contextlib.nullcontext():
            yield
        return
    started = time.monotonic()
    stop = threading.Event()

    def beat() -> None:
        every = log_every_s(seconds)
        while not stop.wait(every):
            _print(console, still_running(what, time.monotonic() - started, seconds, detail(),
                                          qualifier))

    thread = threading.Thread(target=beat, name="pgdyno-long-step", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    _print(console, f"{what}, done in {seconds_words(time.monotonic() - started)}")


@contextlib.contextmanager
def _bar(console: Console, what: str, seconds: float | None) -> Iterator[None]:
    """A transient bar that fills with the time passed (pulsing when the time is unknown);
    none when the console cannot show another live display (rich before nested lives)."""
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=console, transient=True)
    try:
        progress.start()
    except LiveError:
        yield
        return
    task = progress.add_task(what, total=seconds)
    started = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.5):
            progress.update(task, completed=min(seconds or 0.0, time.monotonic() - started))

    thread = threading.Thread(target=tick, name="pgdyno-long-step-bar", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        progress.stop()


def _print(console: Console, line: str) -> None:
    # One line whatever the width: a log is read by grep, not by eye.
    console.print(line, markup=False, highlight=False, soft_wrap=True)
