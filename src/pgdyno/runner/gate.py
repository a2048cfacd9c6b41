"""When each measured iteration may start: the run's own pace, or a scheduler's.

A run alone measures its iterations one after another (``OWN_PACE``). A comparison that
keeps two servers up at once and moves the load between them in short blocks
(``pgdyno.compare.blocks``) runs each side as a run of its own whose iterations are the
blocks; the comparison must say when each block starts, so that the two sides never load
the machine at the same time (or, in a duet, always together), and it must see each
block's figures as soon as the block ends, to stop once the answer is known.

``StepGate`` is that hand-over: the run loop asks ``admit`` before each iteration (the
server up and the dataset ready, the first time) and tells ``finished`` after it, with the
iteration's figures. ``PipeGate`` is the gate of a run started by a scheduler in another
process: one message each way on a ``multiprocessing`` connection. A scheduler that goes
away (its end of the pipe closed) stops the run as a Ctrl-C would: its partial results are
kept and marked.

A third kind of comparison runs both sides' iterations at once and pauses one side's load
while the other's runs, switching every second (``compare.alternate``): it gives the
iteration a common start (``arm`` returns the epoch at which both loads start, so that both
sides count their seconds from it), is told the load's process (``load_started``) to pause
and resume it, and asks for the headline second by second (``wants_seconds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgdyno.workloads.base import Step


class StepGate:
    """The run's own pace: every planned iteration, one after another."""

    def admit(self, step: Step) -> bool:
        """Whether ``step`` runs now (blocks until it may); False ends the run here, its
        iterations so far kept as a finished run."""
        return True

    def arm(self, step: Step) -> float | None:
        """``step`` is ready to load the server (its CHECKPOINT done, its samplers up);
        returns when the load may start, with the epoch at which it starts (None: at
        once). Two sides loaded together (a duet) start their windows on the same cue
        however long each one's CHECKPOINT took."""
        return None

    def load_started(self, step: Step, pid: int) -> None:
        """``step``'s load runs as the process group of ``pid`` (one that may be paused)."""

    def finished(self, step: Step, status: str, metrics: dict[str, float],
                 seconds: list[float] | None = None) -> None:
        """``step`` ended with ``status`` and its figures (empty when it has none), and its
        headline second by second when ``wants_seconds``."""

    @property
    def wants_figures(self) -> bool:
        """Whether ``finished`` needs the iteration's figures (summarising costs a little)."""
        return False

    @property
    def wants_seconds(self) -> bool:
        """Whether ``finished`` needs the headline second by second."""
        return False


OWN_PACE = StepGate()


@dataclass
class PipeGate(StepGate):
    """A scheduler in another process decides: ``("ready", n)`` goes out before iteration
    n, and ``"go"``, ``"stop"`` (the run ends here, finished) or ``"abort"`` (it ends as
    interrupted) comes back; ``("armed", n)`` goes out once the iteration is set to load
    the server, and ``"fire"`` (or ``"abort"``) comes back; ``("done", n, status,
    metrics, seconds)`` goes out after it. ``"fire"`` may come as ``("fire", epoch)``: the
    load starts at that epoch; ``("load", n, pid)`` goes out when it has."""

    conn: Any
    """One end of a ``multiprocessing.Pipe``."""
    seconds: bool = False
    """The scheduler pauses the load and reads its headline second by second."""

    def admit(self, step: Step) -> bool:
        try:
            self.conn.send(("ready", step.number))
            answer = self.conn.recv()
        except (EOFError, OSError):
            # The scheduler is gone: end as an interrupted run, partial results kept.
            raise KeyboardInterrupt from None
        if answer not in ("go", "stop"):
            raise KeyboardInterrupt
        return answer == "go"

    def arm(self, step: Step) -> float | None:
        try:
            self.conn.send(("armed", step.number))
            answer = self.conn.recv()
        except (EOFError, OSError):
            raise KeyboardInterrupt from None
        if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == "fire":
            return float(answer[1])
        if answer != "fire":
            raise KeyboardInterrupt
        return None

    def load_started(self, step: Step, pid: int) -> None:
        try:
            self.conn.send(("load", step.number, pid))
        except (EOFError, OSError):
            raise KeyboardInterrupt from None

    def finished(self, step: Step, status: str, metrics: dict[str, float],
                 seconds: list[float] | None = None) -> None:
        try:
            self.conn.send(("done", step.number, status, dict(metrics), seconds))
        except (EOFError, OSError):
            raise KeyboardInterrupt from None

    @property
    def wants_figures(self) -> bool:
        return True

    @property
    def wants_seconds(self) -> bool:
        return self.seconds
