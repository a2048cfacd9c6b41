"""Building a dataset over several connections at once (TPROC-C, TPROC-H and OLTP loads).

``run_pool``: a pool of autocommit connections takes jobs from a queue; each finished job
is yielded to the caller's thread with its result (by default the first value its statement
returned), and so is anything a job hands over while it runs (TPROC-H's rows streamed so
far), so progress bars and counts stay in one thread. The first failure stops the pool:
statements still running on the other connections are cancelled and the error is raised in
the caller's thread. So is anything the caller raises meanwhile (a KeyboardInterrupt, an
exception from a progress callback): no connection is left working on a build that was
given up.

``BuildPhases``: where a build is (data, keys, vacuum, done), the steps of the phase done out
of its total and each phase's seconds, for the loaders' progress reports and results.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pgdyno.targets.connection import ConnectionInfo

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg


class Job(Protocol):
    statement: Any
    params: Any


J = TypeVar("J")
T = TypeVar("T")
Note = Callable[[Any], None]
"""What a running job calls to hand a value to the caller's thread."""


def default_workers() -> int:
    """One loader connection per CPU this process may run on (cgroup/affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_statement(conn: psycopg.Connection, job: Job, note: Note) -> Any:
    """A job that is one statement: the first value it returned, or None."""
    cur = conn.execute(job.statement, job.params or None)
    row = cur.fetchone() if cur.description else None
    return row[0] if row else None


def run_pool(target: ConnectionInfo, jobs: Sequence[J], workers: int,
             settings: dict[str, str] | None = None, *,
             run: Callable[[psycopg.Connection, J, Note], Any] = run_statement,
             on_stop: Callable[[], None] | None = None) -> Iterator[tuple[J | None, Any]]:
    """Run ``jobs`` over ``workers`` connections (each with ``settings`` applied); yield
    (job, its result) as each finishes, and (None, value) for each value a running job
    hands over. ``run(conn, job, note)`` runs one job (by default its ``statement`` with its
    ``params``); ``on_stop`` is called when the pool gives up, before the statements still
    running are cancelled (TPROC-H kills its generator processes)."""
    todo: queue.Queue[J] = queue.Queue()
    for job in jobs:
        todo.put(job)
    events: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
    stop = threading.Event()
    conns = [_connect(target, settings or {}) for _ in range(workers)]

    def work(conn: psycopg.Connection) -> None:
        try:
            while not stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    break
                result = run(conn, job, lambda value: events.put(("note", None, value)))
                events.put(("done", job, result))
        except BaseException as exc:  # handed to the caller's thread
            events.put(("error", None, exc))
        events.put(("exit", None, None))  # this connection has nothing left to do

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in conns]
    for thread in threads:
        thread.start()
    exited = 0
    completed = False
    try:
        while exited < len(threads):
            kind, job, value = events.get()
            if kind == "error":
                raise value
            if kind == "exit":
                exited += 1
            else:
                yield job, value
        completed = True
    finally:
        stop.set()
        if not completed:  # stop what still runs on the other connections
            if on_stop is not None:
                on_stop()
            for conn in conns:
                conn.cancel_safe()
        for thread in threads:
            thread.join()
        for conn in conns:
            conn.close()


def _connect(target: ConnectionInfo, settings: dict[str, str]) -> psycopg.Connection:
    import psycopg

    conn = psycopg.connect(target.conninfo(), autocommit=True)
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    return conn


class BuildPhases:
    """Where a dataset build is: its phase (data, keys, vacuum), the steps of that phase done
    out of its total, and each phase's seconds (a phase run as several pools adds up).
    ``changed`` is called after every change (the loader reports its progress)."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self.changed = changed
        self.phase = "data"
        self.steps_done = 0
        self.steps_total = 0
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}
        self._phase_started = self.started

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def begin(self, phase: str, steps: int) -> None:
        self.phase, self.steps_done, self.steps_total = phase, 0, steps
        self._phase_started = time.monotonic()
        self.changed()

    def step(self) -> None:
        self.steps_done += 1
        self.changed()

    def end(self) -> None:
        self.seconds[self.phase] = (self.seconds.get(self.phase, 0.0)
                                    + time.monotonic() - self._phase_started)

    def follow(self, phase: str, steps: int, finished: Iterable[T]) -> Iterator[T]:
        """``finished`` (a pool's finished jobs) as the ``steps`` steps of ``phase``: each
        counts as a step once the caller has taken it in (and is reported then). Whatever
        ends it early (a failed job, an exception from the report) closes ``finished`` at
        once: a pool stops its statements then, not when the error is finally handled."""
        self.begin(phase, steps)
        try:
            for item in finished:
                yield item
                self.step()
        finally:
            if isinstance(finished, Generator):
                finished.close()
        self.end()
