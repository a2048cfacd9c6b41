"""TPROC-H's power and throughput tests: query streams over psycopg, one thread per stream.

- Power test: RF1, stream 0's queries in the specification's order, RF2, one after the
  other on one connection.
- Throughput test: streams 1..N concurrently, each its own permutation and parameters, and
  a refresh stream running N RF1/RF2 pairs beside them.

Before each query runs, its ``EXPLAIN (FORMAT JSON)`` is kept (planning only: cheap, not
timed). With ``explain_analyze`` the power stream's queries are run once more under
``EXPLAIN (ANALYZE, BUFFERS)`` right after their timed run, untimed. A query cancelled by
``statement_timeout`` is marked ``timeout`` and its stream goes on.

Every query and refresh function is a line of ``queries.csv`` / ``refresh.csv``, written
and flushed as it ends, so an interrupted iteration keeps what it measured.
"""

from __future__ import annotations

import contextlib
import csv
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgdyno.errors import UsageError
from pgdyno.results.manifest import read_json_file
from pgdyno.workloads.tproch import params, queries, refresh

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

QUERIES_CSV = "queries.csv"
REFRESH_CSV = "refresh.csv"
TESTS_JSON = "tests.json"
POWER, THROUGHPUT = "power", "throughput"
OK, TIMEOUT, ERROR, NOT_RUN = "ok", "timeout", "error", "not run"


@dataclass(frozen=True)
class StreamsPlan:
    """What one iteration runs."""

    scale_factor: float
    seed: int
    queries: tuple[int, ...]
    streams: int
    """Query streams of the throughput test (0: the power test only)."""
    power: bool = True
    refresh: bool = True
    query_timeout_ms: int | None = None
    explain_analyze: bool = False

    def units(self) -> int:
        """Queries and refresh functions the iteration runs: the progress bar's total."""
        rf = 2 if self.refresh else 0
        power = (len(self.queries) + rf) if self.power else 0
        return power + self.streams * (len(self.queries) + rf)


@dataclass
class QueryTiming:
    test: str
    stream: int
    position: int
    query: int
    start: float
    """Epoch seconds when the query was sent (the timeline plot)."""
    end: float
    seconds: float
    rows: int
    status: str
    error: str = ""


@dataclass
class RefreshTiming:
    test: str
    pair: int
    function: str
    """"RF1" or "RF2"."""
    start: float
    end: float
    seconds: float
    rows: int
    status: str
    error: str = ""


@dataclass
class Progress:
    """Units done over the whole iteration, reported from any stream's thread."""

    total: int
    report: Callable[[float, str], None]
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, text: str) -> None:
        with self.lock:
            self.done += 1
            self.report(self.done / max(1, self.total), text)


class CsvLog:
    """A CSV file of one dataclass's rows, appended and flushed row by row (thread-safe)."""

    def __init__(self, path: Path, row_type: type) -> None:
        self.lock = threading.Lock()
        self.path = path
        names = list(row_type.__dataclass_fields__)
        new = not path.exists()
        self.file = path.open("a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=names)
        if new:
            self.writer.writeheader()

    def write(self, row: Any) -> None:
        with self.lock:
            self.writer.writerow(asdict(row))
            self.file.flush()

    def close(self) -> None:
        self.file.close()


class Iteration:
    """One iteration's tests against one database; raw files under ``it_dir``."""

    def __init__(self, conninfo: str, plan: StreamsPlan, it_dir: Path,
                 report: Callable[[float, str], None], first_pair: int) -> None:
        self.conninfo, self.plan, self.dir = conninfo, plan, it_dir
        self.progress = Progress(plan.units(), report)
        self.next_pair = first_pair
        self.connections: list[psycopg.Connection] = []
        self.lock = threading.Lock()
        it_dir.mkdir(parents=True, exist_ok=True)
        for sub in ("sql", "plans", "streams", "refresh"):
            (it_dir / sub).mkdir(exist_ok=True)
        self.query_log = CsvLog(it_dir / QUERIES_CSV, QueryTiming)
        self.refresh_log = CsvLog(it_dir / REFRESH_CSV, RefreshTiming)
        self.tests: dict[str, dict[str, float]] = {}

    # ----- the tests ----------------------------------------------------------------
    def run(self) -> None:
        try:
            self._prepare_pairs()
            if self.plan.power:
                self._timed(POWER, self._power)
            if self.plan.streams > 0:
                self._timed(THROUGHPUT, self._throughput)
        finally:
            self.query_log.close()
            self.refresh_log.close()

    def _timed(self, test: str, body: Callable[[], None]) -> None:
        start = time.time()
        self.tests[test] = {"start": start}
        try:
            body()
        finally:
            self.tests[test]["end"] = time.time()
            (self.dir / TESTS_JSON).write_text(json.dumps(self.tests, indent=2))

    def _power(self) -> None:
        with self._connect() as conn:
            pair = self._take_pair() if self.plan.refresh else None
            if pair is not None:
                self._refresh(conn, POWER, pair, "RF1")
            self._stream(conn, POWER, 0)
            if pair is not None:
                self._refresh(conn, POWER, pair, "RF2")

    def _throughput(self) -> None:
        errors: list[BaseException] = []
        workers = [threading.Thread(target=self._guarded, args=(self._stream_alone, s, errors),
                                    name=f"tproch-stream-{s}", daemon=True)
                   for s in range(1, self.plan.streams + 1)]
        if self.plan.refresh:
            workers.append(threading.Thread(target=self._guarded,
                                            args=(self._refresh_stream, 0, errors),
                                            name="tproch-refresh", daemon=True))
        for w in workers:
            w.start()
        try:
            for w in workers:
                while w.is_alive():
                    w.join(0.2)  # short joins: Ctrl-C reaches this thread promptly
        except BaseException:
            self.cancel()
            for w in workers:
                w.join(10)
            raise
        if errors:
            raise errors[0]

    @staticmethod
    def _guarded(fn: Callable[[int], None], arg: int, errors: list[BaseException]) -> None:
        try:
            fn(arg)
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    def _stream_alone(self, stream: int) -> None:
        with self._connect() as conn:
            self._stream(conn, THROUGHPUT, stream)

    def _refresh_stream(self, _: int) -> None:
        with self._connect() as conn:
            for _n in range(self.plan.streams):
                pair = self._take_pair()
                self._refresh(conn, THROUGHPUT, pair, "RF1")
                self._refresh(conn, THROUGHPUT, pair, "RF2")

    # ----- one stream -----------------------------------------------------------------
    def _stream(self, conn: psycopg.Connection, test: str, stream: int) -> None:
        order = [q for q in params.stream_order(stream) if q in self.plan.queries]
        values = params.draw_stream(stream, self.plan.scale_factor, self.plan.seed,
                                    self.plan.queries)
        (self.dir / "streams" / f"stream-{stream}.json").write_text(json.dumps(
            {"stream": stream, "test": test, "seed": self.plan.seed, "order": order,
             "parameters": {str(q): values[q] for q in order}}, indent=2, default=str))
        for position, q in enumerate(order, start=1):
            text = queries.render(q, values[q], stream)
            name = f"s{stream}-q{q:02d}"
            (self.dir / "sql" / f"{name}.sql").write_text(_sql_file(text))
            timing = self._query(conn, test, stream, position, q, text, name)
            self.query_log.write(timing)
            self.progress.step(f"{test}: stream {stream} Q{q} {timing.seconds:.2f} s")

    def _query(self, conn: psycopg.Connection, test: str, stream: int, position: int,
               q: int, text: queries.QueryText, name: str) -> QueryTiming:
        import psycopg

        start, seconds, rows, status, error = time.time(), 0.0, 0, OK, ""
        try:
            seconds += _execute(conn, text.setup)
            self._explain(conn, text.body, self.dir / "plans" / f"{name}.json")
            start = time.time() - seconds
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                cur.execute(text.body)
                rows = len(cur.fetchall()) if cur.description is not None else 0
            seconds += time.perf_counter() - t0
            if self.plan.explain_analyze and test == POWER:
                self._explain(conn, text.body, self.dir / "plans" / f"{name}.analyze.json",
                              analyze=True)
        except psycopg.errors.QueryCanceled:
            status, seconds = TIMEOUT, float(self.plan.query_timeout_ms or 0) / 1000
        except psycopg.Error as exc:
            if conn.closed or conn.broken:
                raise
            status, error = ERROR, _one_line(exc)
        finally:
            if text.teardown and not (conn.closed or conn.broken):
                try:
                    seconds += _execute(conn, text.teardown)
                except psycopg.Error as exc:
                    status, error = (status, error) if status != OK else (ERROR, _one_line(exc))
        return QueryTiming(test=test, stream=stream, position=position, query=q, start=start,
                           end=start + seconds, seconds=seconds, rows=rows, status=status,
                           error=error)

    @staticmethod
    def _explain(conn: psycopg.Connection, body: str, path: Path, analyze: bool = False) -> None:
        options = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
        plan = conn.execute(f"EXPLAIN ({options}) {body}").fetchone()[0]  # type: ignore[index]
        path.write_text(json.dumps(plan, indent=1))

    # ----- refresh functions ------------------------------------------------------------
    def _prepare_pairs(self) -> None:
        """Every pair the iteration applies, generated before any test starts: making the
        rows (and reading what RF2 deletes) is not part of what is timed or loaded."""
        count = (1 if self.plan.power else 0) + self.plan.streams if self.plan.refresh else 0
        self.pairs: list[refresh.RefreshSet] = []
        with self._connect() as conn:
            for pair in range(self.next_pair, self.next_pair + count):
                rs = refresh.prepare_pair(conn, self.plan.scale_factor, pair, self.plan.seed)
                rs.save(self.dir / "refresh")
                self.pairs.append(rs)

    def _take_pair(self) -> refresh.RefreshSet:
        with self.lock:
            return self.pairs.pop(0)

    def _refresh(self, conn: psycopg.Connection, test: str, rs: refresh.RefreshSet,
                 function: str) -> None:
        import psycopg

        start, t0, rows, status, error = time.time(), time.perf_counter(), 0, OK, ""
        try:
            rows = (refresh.rf1 if function == "RF1" else refresh.rf2)(conn, rs)
        except psycopg.errors.QueryCanceled:
            status = TIMEOUT
        except psycopg.Error as exc:
            if conn.closed or conn.broken:
                raise
            status, error = ERROR, _one_line(exc)
        seconds = time.perf_counter() - t0
        self.refresh_log.write(RefreshTiming(test=test, pair=rs.pair, function=function,
                                             start=start, end=start + seconds,
                                             seconds=seconds, rows=rows, status=status,
                                             error=error))
        self.progress.step(f"{test}: {function} pair {rs.pair} {seconds:.2f} s")

    # ----- connections ----------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        import psycopg

        conn = psycopg.connect(self.conninfo, autocommit=True,
                               application_name="pgdyno-tproch")
        if self.plan.query_timeout_ms:
            conn.execute(f"SET statement_timeout = {int(self.plan.query_timeout_ms)}")
        with self.lock:
            self.connections.append(conn)
        return conn

    def cancel(self) -> None:
        """Cancel what every stream's connection is running (Ctrl-C)."""
        with self.lock:
            for conn in self.connections:
                if not conn.closed:
                    with contextlib.suppress(Exception):  # best effort while giving up
                        conn.cancel_safe(timeout=5)


def _execute(conn: psycopg.Connection, statements: tuple[str, ...]) -> float:
    t0 = time.perf_counter()
    for statement in statements:
        conn.execute(statement)  # type: ignore[arg-type]
    return time.perf_counter() - t0


def _sql_file(text: queries.QueryText) -> str:
    parts = [*text.setup, text.body, *text.teardown]
    return "\n\n".join(p.strip().rstrip(";") + ";" for p in parts) + "\n"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def read_queries(it_dir: Path) -> list[QueryTiming]:
    path = it_dir / QUERIES_CSV
    return [_typed(QueryTiming, row, path, n) for n, row in enumerate(_rows(path), 1)]


def read_refresh(it_dir: Path) -> list[RefreshTiming]:
    path = it_dir / REFRESH_CSV
    return [_typed(RefreshTiming, row, path, n) for n, row in enumerate(_rows(path), 1)]


def read_tests(it_dir: Path) -> dict[str, dict[str, float]]:
    """The power and throughput tests' times; a damaged file is one line naming it."""
    path = it_dir / TESTS_JSON
    if not path.is_file():
        return {}
    data = read_json_file(path, "TPROC-H test record")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UsageError(f"{path}: not a pgdyno TPROC-H test record (an object of tests)")
    return data


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: binary data, not a pgdyno timings file (CSV text)") from None
    return list(csv.DictReader(text.splitlines()))


def _typed(cls: type, row: dict[str, str], path: Path, number: int) -> Any:
    """One row of a timings file; a row cut short (a crash, a full disk) or edited is one
    line naming the file."""
    kinds = {name: f.type for name, f in cls.__dataclass_fields__.items()}
    out: dict[str, Any] = {}
    for name, kind in kinds.items():
        value = row.get(name, "")
        try:
            out[name] = (int(value) if kind == "int" else float(value) if kind == "float"
                         else value)
        except (TypeError, ValueError):
            raise UsageError(f"{path}: row {number} is damaged or truncated ({name} = "
                             f"{value!r}; expected a number)") from None
    return cls(**out)
