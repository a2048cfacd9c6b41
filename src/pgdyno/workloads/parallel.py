"""Running dataset-build statements over several connections at once (TPROC-C, OLTP loads).

A pool of autocommit connections takes jobs from a queue; each finished job is yielded to
the caller's thread with the first value its statement returned, so progress bars and
counts stay in one thread. The first failure stops the pool: statements still running on
the other connections are cancelled and the error is raised in the caller's thread. So is
anything the caller raises meanwhile (a KeyboardInterrupt, an exception from a progress
callback): no connection is left working on a build that was given up.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeVar

import psycopg

from pgdyno.targets.connection import ConnectionInfo


class Job(Protocol):
    statement: Any
    params: Any


J = TypeVar("J", bound=Job)


def run_pool(target: ConnectionInfo, jobs: Sequence[J], workers: int,
             settings: dict[str, str] | None = None) -> Iterator[tuple[J, Any]]:
    """Run ``jobs`` over ``workers`` connections (each with ``settings`` applied); yield
    (job, first value of its result or None) as each finishes."""
    todo: queue.Queue[J] = queue.Queue()
    for job in jobs:
        todo.put(job)
    done: queue.Queue[tuple[J | None, Any, BaseException | None]] = queue.Queue()
    stop = threading.Event()
    conns = [_connect(target, settings or {}) for _ in range(workers)]

    def work(conn: psycopg.Connection) -> None:
        while not stop.is_set():
            try:
                job = todo.get_nowait()
            except queue.Empty:
                break
            try:
                cur = conn.execute(job.statement, job.params or None)
                row = cur.fetchone() if cur.description else None
                done.put((job, row[0] if row else None, None))
            except BaseException as exc:  # handed to the caller's thread
                done.put((job, None, exc))
                return
        done.put((None, None, None))  # this connection has nothing left to do

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in conns]
    for thread in threads:
        thread.start()
    finished = 0
    completed = False
    try:
        while finished < len(threads):
            job, value, error = done.get()
            if error is not None:
                raise error
            if job is None:
                finished += 1
                continue
            yield job, value
        completed = True
    finally:
        stop.set()
        if not completed:  # stop statements still running on the other connections
            for conn in conns:
                conn.cancel_safe()
        for thread in threads:
            thread.join()
        for conn in conns:
            conn.close()


def _connect(target: ConnectionInfo, settings: dict[str, str]) -> psycopg.Connection:
    conn = psycopg.connect(target.conninfo(), autocommit=True)
    for name, value in settings.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    return conn
