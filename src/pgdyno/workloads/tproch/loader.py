"""Parallel TPROC-H loader: tpchgen-cli piped straight into COPY, no intermediate files
(except for small datasets, generated once into files: see ONE_GENERATOR_BYTES).

One pool of jobs over ``workers`` connections, in three stages per table:

1. data: one job per table or table part. Each job runs
   ``tpchgen-cli csv -s SF -T TABLE [--parts N --part K] --stdout`` and streams its
   output into ``COPY table FROM STDIN (FORMAT csv, HEADER true)``; for a small dataset
   one tpchgen-cli start writes every table to a temporary directory first, and each job
   streams its table's file instead (the same COPY, the same jobs). A table loaded whole
   is truncated and copied with FREEZE in one transaction: its rows are written frozen
   and all-visible, so the VACUUM after the load has nothing to do on it and no hint
   bits are set (and WAL-logged, checksums being on by default) by the first readers.
   On a server with wal_level = minimal (a server pgdyno starts here runs the load so:
   workloads.bulkload.minimal_wal; the loader itself changes no server setting) that same
   transaction writes no WAL for the rows at all. Only tables too big
   for one worker's share are split into parts (see plan_parts); region and nation come
   from one generator (each tpchgen-cli start costs about 0.8 s of CPU building its text
   pool, whatever the table);
2. keys: primary keys and indexes (schema.key_jobs) of a table, as soon as all of its
   data is in: while the biggest table (lineitem, 69% of the data) still streams, the
   other connections build the smaller tables' keys instead of waiting for it. The last
   build (lineitem's unsorted (l_partkey, l_suppkey) index, which outlasts its primary
   key) gets a parallel worker per other connection, for the cores left idle at the end
   (at SF 1 on 2 cores: keys after the data 4.3-4.4 s instead of 5.2-5.4, the same CPU);
3. vacuum: VACUUM ANALYZE of a table once its keys are built (on a frozen table it skips
   every page and only analyses; it also resets the count of rows inserted since the
   last vacuum, so autovacuum does not pick the table up in the middle of a run).

The pool takes jobs in this order (all data jobs, then keys, then vacuums), and a job
whose table is not ready waits for it on its connection: every job it waits for was
taken before it, so the pool always finishes. Each stage's seconds run from the end of
the previous stage to the end of its own last job (the work done early is in the data
stage's seconds).

A generator, COPY or build failure stops the load with one line: the other generators
are killed and the other statements cancelled (their transactions roll back). The
dataset is recorded in the registry only after every job succeeded, so an interrupted
load is never mistaken for a reusable one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pgdyno import __version__
from pgdyno.errors import RunFailed, UsageError
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.workloads import dataset
from pgdyno.workloads.parallel import BuildPhases, default_workers, run_pool
from pgdyno.workloads.tproch import schema
from pgdyno.workloads.tproch.model import SCHEMA_VERSION, LoadOptions, LoadProgress, LoadResult

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

ProgressCallback = Callable[[LoadProgress], None]

GENERATOR = "tpchgen-cli"

CSV_BYTES_PER_SF = {
    "lineitem": 766_000_000,
    "orders": 173_000_000,
    "partsupp": 120_000_000,
    "customer": 25_000_000,
    "part": 24_000_000,
    "supplier": 1_400_000,
}
"""tpchgen-cli's CSV output per unit of scale factor: the cost model of plan_parts."""

FIXED_TABLES = ("region", "nation")
"""Tiny tables whose size does not depend on SF: one generator writes both to files."""

SPLIT_SHARE = 1.8
"""Default LoadOptions.split_share (see plan_parts). A table copied in parts is not frozen:
its first readers (the index builds) set a hint bit on every row, which checksums (on by
default since PostgreSQL 18) turn into a full-page WAL image per page, and the VACUUM must
visit every page again. At SF 1 on 2 cores that costs more than the parallelism gains:
lineitem whole, about 19 s in all (data 13-14, keys 4.5, vacuum 0.5); lineitem in two
parts, 23-31 s (data 15-20, keys 6-8, vacuum 2-4), with twice the WAL. Splitting pays only
when the biggest table alone takes much longer than the others together, i.e. from about
three or four workers (lineitem is 69% of the data): hence 1.8 x one worker's share."""

MIN_PART_BYTES = 100_000_000
"""The smallest part worth its own generator (about 2 s of COPY)."""

ONE_GENERATOR_BYTES = 200_000_000
"""A dataset of at most this much CSV (SF 0.18 and below) is generated by one tpchgen-cli
start into a temporary directory, then each table's file copied, instead of one generator
per table streaming into its COPY. Every start costs about 0.8-0.9 s of CPU and 1.5-2 s of
wall time whatever the size, and the streamed load starts 7 of them. On 2 cores, 2 load
workers, data phase streamed against one start: SF 0.01 5.3-6.0 s against 1.5-1.6 s, SF 0.1
7.2-7.8 s against 3.9-4.0 s, SF 0.3 10.8-11.2 s against 8.7-9.9 s. The gain shrinks as the
data grows (the generation no longer overlaps the COPYs) while the temporary files grow
with it (the whole dataset on disk at once) and the progress stands still while they are
written; hence a bound well below where the two meet, on temporary files of at most 200 MB.
Larger datasets stream, as the parts and parallelism of plan_parts need."""

CHUNK_BYTES = 1 << 20
"""Bytes read from a generator and written to COPY at a time."""

PIPE_BYTES = 1 << 20
"""The generators' pipe size (Linux's default is 64 KB): fewer wake-ups of the generator
and the relay per MB streamed."""

STAGES = ("data", "keys", "vacuum")

PROGRESS_INTERVAL_S = 0.5


def tpchgen_program() -> str:
    """tpchgen-cli of this Python environment (a pgdyno dependency), else one on PATH."""
    beside = Path(sys.executable).parent / GENERATOR
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(GENERATOR)
    if found:
        return found
    raise UsageError(f"{GENERATOR} not found next to {sys.executable} nor on PATH; "
                     "TPROC-H generates its data with it: pip install tpchgen-cli")


def plan_parts(sf: float, workers: int, split_share: float | None = None) -> dict[str, int]:
    """Parts per table: a table bigger than ``split_share`` of one worker's fair share of
    the data is cut into parts of about that size, so that the workers finish together;
    the others stay whole (and are copied with FREEZE). Parts are never smaller than
    MIN_PART_BYTES: each generator start costs a fixed 0.8 s of CPU."""
    share = SPLIT_SHARE if split_share is None else split_share
    sizes = {table: size * sf for table, size in CSV_BYTES_PER_SF.items()}
    chunk = max(share * sum(sizes.values()) / workers, MIN_PART_BYTES)
    parts = {table: 1 for table in schema.DATA_TABLES}
    for table, size in sizes.items():
        if workers > 1 and size > chunk:
            parts[table] = math.ceil(size / chunk)
    return parts


@dataclass(frozen=True)
class CopyJob:
    """One generator piped into one COPY (or, for the fixed tables, files into COPYs)."""

    tables: tuple[str, ...]
    part: int = 1
    parts: int = 1
    weight: float = 0.0

    @property
    def label(self) -> str:
        name = "+".join(self.tables)
        return name if self.parts == 1 else f"{name} part {self.part}/{self.parts}"

    @property
    def freeze(self) -> bool:
        """A whole table: truncate and COPY FREEZE in one transaction."""
        return self.parts == 1


def one_generator(sf: float) -> bool:
    """Whether the dataset of ``sf`` is small enough for one generator (ONE_GENERATOR_BYTES)."""
    return sum(CSV_BYTES_PER_SF.values()) * sf <= ONE_GENERATOR_BYTES


def data_jobs(sf: float, parts: dict[str, int]) -> list[CopyJob]:
    """Every generator to run, largest first."""
    jobs = [CopyJob(FIXED_TABLES)]
    for table, size in CSV_BYTES_PER_SF.items():
        n = parts.get(table, 1)
        jobs += [CopyJob((table,), k, n, size * sf / n) for k in range(1, n + 1)]
    jobs.sort(key=lambda job: job.weight, reverse=True)
    return jobs


def load(target: ConnectionInfo, options: LoadOptions,
         progress: ProgressCallback | None = None) -> LoadResult:
    """Build (or reuse) the TPROC-H dataset of ``options.scale_factor`` in ``target``."""
    import psycopg

    workers = options.workers or default_workers()
    target = dataset.scoped(target, schema.DATASET_SCHEMA)
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        state = dataset.inspect(conn, schema.WORKLOAD, options.size_key, list(schema.TABLES),
                                schema.DATASET_SCHEMA)
        if state.reusable and not options.rebuild:
            return _reused(options, workers, state.build_seconds)
        program = tpchgen_program()
        wal_level = conn.execute("SHOW wal_level").fetchone()[0]
        dataset.prepare_build(conn, state, schema.WORKLOAD, options.size_key,
                              list(schema.TABLES), force=options.force, what="TPROC-H's")
        schema.create_tables(conn)

    parts = plan_parts(options.scale_factor, workers, options.split_share)
    loader = _Loader(target, options, workers, program, progress)
    started = time.monotonic()
    loader.run(data_jobs(options.scale_factor, parts))
    seconds = time.monotonic() - started
    loader.report("done")

    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        dataset.record(conn, schema.WORKLOAD, options.size_key, list(schema.TABLES),
                       seconds, __version__, schema.DATASET_SCHEMA)
    total = sum(loader.table_rows.values())
    return LoadResult(schema_version=SCHEMA_VERSION, scale_factor=options.scale_factor,
                      reused=False, workers=workers, rows=dict(loader.table_rows),
                      seconds=seconds, phase_seconds=loader.phases.seconds,
                      rows_per_s=total / seconds if seconds > 0 else 0.0, parts=parts,
                      wal_level=wal_level)


def _reused(options: LoadOptions, workers: int, recorded_seconds: float | None) -> LoadResult:
    return LoadResult(schema_version=SCHEMA_VERSION, scale_factor=options.scale_factor,
                      reused=True, workers=workers, rows={}, seconds=0.0, phase_seconds={},
                      rows_per_s=0.0, recorded_seconds=recorded_seconds)


@dataclass(frozen=True)
class StageJob:
    """A key build or a vacuum of one table, run once the table's previous stage is done."""

    stage: str
    """``keys`` (after the table's data) or ``vacuum`` (after its keys)."""
    table: str
    statement: Any
    weight: float = 0.0
    parallel_workers: int | None = None
    """max_parallel_maintenance_workers for this build alone (None: the connection's)."""


def data_ready(data: list[CopyJob], workers: int) -> dict[str, float]:
    """When each table's data should be in, in units of the jobs' weights: each job is
    taken, in order, by the first of ``workers`` connections to be free."""
    free = [0.0] * max(1, workers)
    ready: dict[str, float] = {}
    for job in data:
        worker = free.index(min(free))
        free[worker] += job.weight
        for table in job.tables:
            ready[table] = max(ready.get(table, 0.0), free[worker])
    return ready


def stage_jobs(sf: float, data: list[CopyJob], workers: int,
               last_build_workers: int | None = None) -> list[StageJob]:
    """Keys, then vacuums, each stage's tables in the order their data should be in
    (data_ready: at 2 workers the small tables' keys while lineitem still streams, its
    own last), the biggest build first within a table. The last build of all (lineitem's
    (l_partkey, l_suppkey) index: its rows come unsorted, so it outlasts the primary key
    built beside it) gets ``last_build_workers`` parallel workers: once the others are
    done it is all that runs, and would leave the other cores idle."""
    ready = data_ready(data, workers)
    keys = [StageJob("keys", k.table, k.statement, k.weight) for k in schema.key_jobs(sf)]
    keys.sort(key=lambda job: (ready[job.table], -job.weight))
    if keys and last_build_workers:
        keys[-1] = dataclasses.replace(keys[-1], parallel_workers=last_build_workers)
    tables = sorted(schema.DATA_TABLES, key=lambda t: ready[t])
    vacuums = [StageJob("vacuum", t, schema.vacuum_statement(t)) for t in tables]
    return keys + vacuums


class _Loader:
    def __init__(self, target: ConnectionInfo, options: LoadOptions, workers: int,
                 program: str, progress: ProgressCallback | None) -> None:
        self.target = target
        self.options = options
        self.workers = workers
        self.program = program
        self.progress = progress
        self.rows = 0
        self.rows_total = sum(schema.approx_rows(options.scale_factor).values())
        self.table_rows: dict[str, int] = {}
        self.phases = BuildPhases(self.report)
        self.done = dict.fromkeys(STAGES, 0)
        self.total = dict.fromkeys(STAGES, 0)

    def report(self, phase: str | None = None) -> None:
        if self.progress is None:
            return
        p = self.phases
        self.progress(LoadProgress(
            phase=phase or p.phase, rows=self.rows, rows_total=self.rows_total,
            elapsed_s=p.elapsed_s, steps_done=p.steps_done, steps_total=p.steps_total))

    def run(self, data: list[CopyJob]) -> None:
        """Every stage in one pool (see the module's docstring)."""
        import psycopg

        later = stage_jobs(self.options.scale_factor, data, self.workers,
                           self.options.last_build_workers(self.workers))
        self.total = {"data": len(data), "keys": sum(j.stage == "keys" for j in later),
                      "vacuum": sum(j.stage == "vacuum" for j in later)}
        self.phases.begin("data", self.total["data"])
        sf = self.options.scale_factor
        try:
            with _generated_files(self.program, sf) as files:
                pool = _load_pool(self.target, [*data, *later], self.workers, self.program,
                                  sf, self._maintenance_settings(), files)
                with contextlib.closing(pool):  # an exception here stops the pool at once
                    self._follow(pool)
        except (_GeneratorFailed, _StageFailed, psycopg.Error) as exc:
            raise _one_line_error(exc) from None
        self.table_rows = {t: self.table_rows.get(t, 0) for t in schema.DATA_TABLES}
        self.phases.end()

    def _follow(self, pool: Iterator[tuple[CopyJob | StageJob | None, Any]]) -> None:
        last_report = time.monotonic()
        for job, value in pool:
            if job is None:  # rows streamed so far by some generator
                self.rows += value
                if time.monotonic() - last_report < PROGRESS_INTERVAL_S:
                    continue
                self.report()
            elif isinstance(job, CopyJob):
                copied, streamed = value
                self.rows += sum(copied.values()) - streamed
                for table, rows in copied.items():
                    self.table_rows[table] = self.table_rows.get(table, 0) + rows
                self._finished("data")
            else:
                self._finished(job.stage)
            last_report = time.monotonic()

    def _finished(self, stage: str) -> None:
        """Count a finished job; move to the next stage once the current one is done (its
        jobs done early count at once)."""
        self.done[stage] += 1
        phase = self.phases.phase
        if stage == phase:
            self.phases.step()
        while self.done[phase] == self.total[phase] and phase != STAGES[-1]:
            self.phases.end()
            phase = STAGES[STAGES.index(phase) + 1]
            self.phases.begin(phase, self.total[phase])
            if self.done[phase]:
                self.phases.steps_done = self.done[phase]
                self.report()

    def _maintenance_settings(self) -> dict[str, str]:
        settings = {}
        if self.options.maintenance_work_mem:
            settings["maintenance_work_mem"] = self.options.maintenance_work_mem
        if self.options.max_parallel_maintenance_workers is not None:
            settings["max_parallel_maintenance_workers"] = str(
                self.options.max_parallel_maintenance_workers)
        return settings


# ----- the data pool: generators piped into COPY --------------------------------------------

class _Stopped(Exception):
    """The pool is stopping (another job failed, or the caller gave up)."""


class _Generators:
    """The running generators, so that a failure anywhere can kill all of them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[subprocess.Popen] = set()
        self.stopped = False

    def start(self, cmd: list[str], stdout: Any, stderr: IO[bytes]) -> subprocess.Popen:
        with self.lock:
            if self.stopped:
                raise _Stopped
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stdout,
                                    stderr=stderr)
            self.running.add(proc)
            return proc

    def finish(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.running.discard(proc)
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def kill_all(self) -> None:
        with self.lock:
            self.stopped = True
            for proc in self.running:
                if proc.poll() is None:
                    proc.kill()


class _Stages:
    """Which tables are through which stage, for the jobs that wait on them."""

    def __init__(self, data: list[CopyJob], later: list[StageJob]) -> None:
        self.ready = threading.Condition()
        self.stopped = False
        self.left: dict[tuple[str, str], int] = {}
        for job in data:
            for table in job.tables:
                self.left[("data", table)] = self.left.get(("data", table), 0) + 1
        for job in later:
            self.left[(job.stage, job.table)] = self.left.get((job.stage, job.table), 0) + 1

    def done(self, stage: str, tables: tuple[str, ...]) -> None:
        with self.ready:
            for table in tables:
                self.left[(stage, table)] -= 1
            self.ready.notify_all()

    def wait_for(self, job: StageJob) -> None:
        """Until the stage before ``job``'s is done on its table (or the pool stops)."""
        before = STAGES[STAGES.index(job.stage) - 1]
        with self.ready:
            self.ready.wait_for(lambda: self.stopped or self.left[(before, job.table)] == 0)
            if self.stopped:
                raise _Stopped

    def stop(self) -> None:
        with self.ready:
            self.stopped = True
            self.ready.notify_all()


def _load_pool(target: ConnectionInfo, jobs: list[CopyJob | StageJob], workers: int,
               program: str, sf: float, settings: dict[str, str], files: Path | None = None
               ) -> Iterator[tuple[CopyJob | StageJob | None, Any]]:
    """Run ``jobs`` over ``workers`` connections (``parallel.run_pool``), the data jobs
    copying from ``files`` (every table generated already) if given, else each from its
    own generator; yield (None, rows streamed) as the data streams, (job, (rows copied per
    table, newlines streamed)) as each data job finishes and (job, None) as each key build
    or vacuum does. The first failure (or the caller's exception) kills every generator,
    releases the jobs waiting for a table and cancels every statement (each in its own
    transaction, rolled back)."""
    generators = _Generators()
    stages = _Stages([j for j in jobs if isinstance(j, CopyJob)],
                     [j for j in jobs if isinstance(j, StageJob)])

    def run(conn: psycopg.Connection, job: CopyJob | StageJob, note: Callable[[int], None]
            ) -> tuple[dict[str, int], int] | None:
        import psycopg

        if isinstance(job, CopyJob):
            result = _run_job(conn, job, program, sf, generators, note, files)
            stages.done("data", job.tables)
            return result
        stages.wait_for(job)
        try:
            _run_statement(conn, job)
        except psycopg.Error as exc:
            if stages.stopped:  # cancelled because another job failed: that one's error
                raise _Stopped from None
            raise _StageFailed(f"TPROC-H load stopped in phase {job.stage}: "
                               f"{_first_line(exc)}") from None
        stages.done(job.stage, (job.table,))
        return None

    def stop() -> None:
        generators.kill_all()
        stages.stop()

    return run_pool(target, jobs, min(workers, len(jobs)), settings, run=run, on_stop=stop)


def _run_statement(conn: psycopg.Connection, job: StageJob) -> None:
    if job.parallel_workers is None:
        conn.execute(job.statement)
        return
    setting = "max_parallel_maintenance_workers"
    before = conn.execute("SELECT current_setting(%s)", (setting,)).fetchone()[0]
    conn.execute("SELECT set_config(%s, %s, false)", (setting, str(job.parallel_workers)))
    try:
        conn.execute(job.statement)
    finally:
        if not conn.closed:
            conn.execute("SELECT set_config(%s, %s, false)", (setting, before))


def _run_job(conn: psycopg.Connection, job: CopyJob, program: str, sf: float,
             generators: _Generators, streamed: Callable[[int], None],
             files: Path | None) -> tuple[dict[str, int], int]:
    """One job in one transaction: returns rows copied per table and newlines streamed."""
    with conn.transaction():
        if files is not None:
            return _copy_files(conn, job, files, generators, streamed)
        if job.tables == FIXED_TABLES:
            return _copy_fixed(conn, program, sf, generators), 0
        return _copy_stream(conn, job, program, sf, generators, streamed)


@contextlib.contextmanager
def _generated_files(program: str, sf: float) -> Iterator[Path | None]:
    """A temporary directory holding every table's CSV, written by one generator, for a
    small dataset (one_generator); None (each job runs its own generator) otherwise."""
    if not one_generator(sf):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="pgdyno-tproch-") as tmp:
        _generate(program, sf, schema.DATA_TABLES, Path(tmp), _Generators())
        yield Path(tmp)


def _generate(program: str, sf: float, tables: tuple[str, ...], directory: Path,
              generators: _Generators) -> None:
    """``tables`` whole into ``directory`` (TABLE.csv each), in one generator start."""
    with tempfile.TemporaryFile() as errors:
        cmd = _generator_command(program, sf, tables, 1, 1) + ["--output-dir", str(directory)]
        proc = generators.start(cmd, subprocess.DEVNULL, errors)
        try:
            proc.wait()
            _check_generator(proc, errors, "+".join(tables))
        finally:
            generators.finish(proc)


def _generator_command(program: str, sf: float, tables: tuple[str, ...], part: int,
                       parts: int) -> list[str]:
    cmd = [program, "csv", "--scale-factor", f"{sf:g}", "--tables", ",".join(tables),
           "--num-threads", "1", "--quiet"]
    if parts > 1:
        cmd += ["--parts", str(parts), "--part", str(part)]
    return cmd


def _copy_statement(table: str, freeze: bool) -> sql.Composed:
    from psycopg import sql

    options = "FORMAT csv, HEADER true" + (", FREEZE true" if freeze else "")
    return sql.SQL("COPY {} FROM STDIN ({})").format(sql.Identifier(table), sql.SQL(options))


def _truncate(conn: psycopg.Connection, table: str) -> None:
    """Make the table new in this transaction, which COPY FREEZE requires."""
    from psycopg import sql

    conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))


def _copy_stream(conn: psycopg.Connection, job: CopyJob, program: str, sf: float,
                 generators: _Generators, streamed: Callable[[int], None]
                 ) -> tuple[dict[str, int], int]:
    (table,) = job.tables
    if job.freeze:
        _truncate(conn, table)
    cmd = _generator_command(program, sf, job.tables, job.part, job.parts) + ["--stdout"]
    with tempfile.TemporaryFile() as errors:
        proc = generators.start(cmd, subprocess.PIPE, errors)
        _widen_pipe(proc.stdout)
        try:
            with conn.cursor() as cur:
                with cur.copy(_copy_statement(table, job.freeze)) as copy:
                    lines = _relay(proc.stdout, copy, generators, streamed)
                    # Never end a COPY on the output of a generator that failed or was
                    # killed: raising here aborts it and rolls the transaction back.
                    _check_generator(proc, errors, job.label)
                rows = cur.rowcount
        finally:
            proc.stdout.close()
            generators.finish(proc)
    return {table: rows}, lines


def _copy_files(conn: psycopg.Connection, job: CopyJob, directory: Path,
                generators: _Generators, streamed: Callable[[int], None]
                ) -> tuple[dict[str, int], int]:
    """Each of the job's tables, whole and frozen, from its file in ``directory``."""
    copied, lines = {}, 0
    for table in job.tables:
        _truncate(conn, table)
        with Path(directory, f"{table}.csv").open("rb") as source, conn.cursor() as cur:
            with cur.copy(_copy_statement(table, True)) as copy:
                lines += _relay(source, copy, generators, streamed)
            copied[table] = cur.rowcount
    return copied, lines


def _relay(source: IO[bytes], copy: psycopg.Copy, generators: _Generators,
           streamed: Callable[[int], None]) -> int:
    """``source`` (CSV with a header line) into ``copy``, CHUNK_BYTES at a time; returns
    the rows (newlines after the header's) relayed, as each chunk is also reported."""
    lines = 0
    header = 1  # the first line is the header, not a row
    while chunk := source.read(CHUNK_BYTES):
        if generators.stopped:
            raise _Stopped
        copy.write(chunk)
        count = chunk.count(b"\n") - header
        header = 0
        lines += count
        streamed(count)
    return lines


def _widen_pipe(pipe: IO[bytes]) -> None:
    """PIPE_BYTES of pipe buffer where Linux allows it (F_SETPIPE_SZ), else as it is."""
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def _copy_fixed(conn: psycopg.Connection, program: str, sf: float,
                generators: _Generators) -> dict[str, int]:
    """region and nation: one generator writes both (a few KB) to files, copied whole."""
    copied = {}
    with tempfile.TemporaryDirectory(prefix="pgdyno-tproch-") as tmp:
        _generate(program, sf, FIXED_TABLES, Path(tmp), generators)
        for table in FIXED_TABLES:
            _truncate(conn, table)
            with conn.cursor() as cur:
                with cur.copy(_copy_statement(table, True)) as copy:
                    copy.write(Path(tmp, f"{table}.csv").read_bytes())
                copied[table] = cur.rowcount
    return copied


class _GeneratorFailed(Exception):
    pass


class _StageFailed(Exception):
    """A key build or a vacuum failed: its one-line message."""


def _check_generator(proc: subprocess.Popen, errors: IO[bytes], label: str) -> None:
    code = proc.wait()
    if code == 0:
        return
    errors.seek(0)
    said = [line.strip() for line in errors.read().decode(errors="replace").splitlines()
            if line.strip()]
    detail = said[-1] if said else ("killed" if code < 0 else "no message")
    raise _GeneratorFailed(f"{GENERATOR} failed generating {label} (exit {code}): {detail}")


def _one_line_error(exc: BaseException) -> BaseException:
    """What the caller sees: one line for generator and database failures; anything else
    (KeyboardInterrupt, a bug) unchanged."""
    import psycopg

    if isinstance(exc, _GeneratorFailed):
        return RunFailed(f"TPROC-H load stopped: {exc}")
    if isinstance(exc, _StageFailed):
        return RunFailed(str(exc))
    if isinstance(exc, psycopg.Error):
        return RunFailed(f"TPROC-H load stopped: COPY failed: {_first_line(exc)}")
    return exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
