"""The sbtest tables of sysbench's OLTP workloads, built inside the server in parallel.

What is built is what ``sysbench oltp_read_write --db-driver=pgsql prepare`` (1.0.20,
``oltp_common.lua``) builds with its defaults, per table ``sbtestN``, N = 1..tables:

* ``id integer``, primary key ``sbtestN_pkey``; ids 1..table_size. sysbench declares
  ``id SERIAL``; the sequence is never used by the workloads (every insert names its
  id), so pgdyno leaves it out.
* ``k integer DEFAULT 0 NOT NULL`` with the secondary index ``k_N``. sysbench fills k with
  ``sb_rand(1, table_size)``, which is ``sysbench.rand.default``: the distribution of
  ``--rand-type``, ``special`` by default. So k is drawn here with sysbench's *special*
  distribution too (75 % of the values in a window of 1 % of the range around its
  middle): that shapes the k_N index (mostly duplicates) exactly as sysbench's does.
* ``c char(120)``: ten groups of 11 random digits joined by '-' (119 characters);
  ``pad char(60)``: five such groups (59 characters).

Rows never cross the wire: each job is one ``INSERT ... SELECT ... FROM
generate_series``. The build has three phases, each a pool of independent jobs over
``workers`` connections:

1. data: every table split into id ranges (tables load in parallel, and a single big
   table is still split over all connections);
2. keys: the unique index behind each primary key and every k_N index, all in parallel
   (CREATE INDEX only takes a SHARE lock, so two builds on one table do not wait for
   each other), then each primary key is attached to its ready index, which is instant;
3. vacuum: VACUUM (ANALYZE) per table, then a VACUUM of any table it left with pages out of
   the visibility map (``workloads.visibility``);
4. checkpoint: on a server pgdyno owns, the build runs with spaced checkpoints
   (``workloads.bulkload``: no hint-bit page images in the keys and vacuum phases) and
   ends with a CHECKPOINT, timed here.

The guard is the one every pgdyno workload uses (``pgdyno.workloads.dataset``): tables
pgdyno did not create stop the build unless forced; the tables are claimed in the
registry under a size that never matches before anything is dropped or created, so an
interrupted build is recognised as pgdyno's own and rebuilt, never reused; the real size
is recorded only after the last phase.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pgdyno import __version__
from pgdyno.errors import UsageError
from pgdyno.results import load as common_load
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.workloads import dataset, visibility
from pgdyno.workloads.parallel import BuildPhases, run_pool

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

DATASET = "oltp"
"""Registry name (pgdyno_dataset.workload), shared by oltp-read-only and oltp-read-write,
which run on the same tables."""

TABLE_PREFIX = "sbtest"

MAX_ROWS_PER_JOB = 500_000
"""Id ranges are at most this long, so that progress moves and the connections finish
together even when there are fewer tables than connections."""


def table_names(tables: int) -> list[str]:
    """sbtest1 .. sbtestN, as sysbench names them."""
    return [f"{TABLE_PREFIX}{n}" for n in range(1, tables + 1)]


def key_name(table_number: int) -> str:
    """The primary key's name, as PostgreSQL names sysbench's ``PRIMARY KEY (id)``."""
    return f"{TABLE_PREFIX}{table_number}_pkey"


def k_index_name(table_number: int) -> str:
    """sysbench's secondary index: ``CREATE INDEX k_N ON sbtestN(k)``."""
    return f"k_{table_number}"


# ----- sysbench's values ------------------------------------------------------------------

def _digit_groups_sql(groups: int) -> str:
    """SQL for ``groups`` groups of 11 random digits joined by '-' (sysbench's ``#`` x 11).

    floor(random() * 1e11) is uniform over 0..99999999999 (random() is in [0, 1) with
    52 random bits, enough for 11 digits); lpad keeps the leading zeros."""
    group = "lpad(floor(random() * 1e11)::bigint::text, 11, '0')"
    return "concat_ws('-', " + ", ".join([group] * groups) + ")"


C_VALUE_SQL = _digit_groups_sql(10)
"""A fresh random c value (119 characters), evaluated by the server on every call: used
by the load, the non-index update and the insert of the read-write transaction."""

PAD_VALUE_SQL = _digit_groups_sql(5)
"""A fresh random pad value (59 characters)."""

C_LENGTH = 119
PAD_LENGTH = 59

SPEC_ITER = 12
"""sysbench's --rand-spec-iter default: uniforms summed for its gaussian-like draws."""


@dataclass(frozen=True)
class SpecialRand:
    """The constants of sysbench 1.0.20's ``sb_rand_special(1, table_size)``.

    sb_rand.c draws ``rnd`` uniform in [0, 1) and, with t = b - a:

    * if ``rnd * t * 100 / (100 - res) < t`` (probability (100 - res) %): returns
      ``a + sum * t / iter`` (converted to an integer), ``sum`` being ``iter`` fresh
      uniforms: a bell over the whole range;
    * otherwise returns ``a + (int)(rnd * (d + 1) + t / 2 - t * pct / 200)`` with
      d = t * pct / 100: the hot window of pct % of the range around the middle.
      That branch reuses ``rnd``, which is then at least (100 - res) / 100, so only the
      upper part of the window is ever hit (for 1..1000: 498..506 instead of 495..506).
      pgdyno keeps that quirk: the draws have sysbench's exact shape.
    """

    t: float
    span: float
    """t * 100 / (100 - res): ``rnd * span < t`` selects the bell."""
    hot_width: float
    """d + 1."""
    hot_offset: float
    """t / 2 - t * pct / 200."""
    iter_mult: float = 1.0 / SPEC_ITER


def special_rand(table_size: int, pct: float = 1, res: float = 75) -> SpecialRand:
    """Fold sysbench's --rand-spec-pct/--rand-spec-res into the constants of one range.

    Computed in the same order as sb_rand.c (same doubles), for a = 1, b = table_size."""
    t = float(table_size - 1)
    res_mult = 100.0 / (100.0 - res)
    d = t * (pct / 100.0)
    return SpecialRand(t=t, span=t * res_mult, hot_width=d + 1,
                       hot_offset=t / 2 - t * (pct / 200.0))


# ----- options and results --------------------------------------------------------------

@dataclass(frozen=True)
class LoadOptions:
    tables: int
    table_size: int
    workers: int | None = None
    """Loader connections; None: min(4, CPUs)."""
    force: bool = False
    """Build beside tables pgdyno did not create (never over one named like ours)."""
    checkpoint_at_end: bool = False
    """End with a CHECKPOINT, timed as the build's last phase (a build with spaced
    checkpoints: ``workloads.bulkload``)."""

    def __post_init__(self) -> None:
        if self.tables < 1 or self.table_size < 1:
            raise UsageError(f"oltp dataset: tables ({self.tables}) and table size "
                             f"({self.table_size}) must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"oltp dataset: workers ({self.workers}) must be at least 1")

    @property
    def size_key(self) -> str:
        return f"tables={self.tables},table_size={self.table_size}"


@dataclass
class LoadProgress:
    phase: str
    """data, keys, vacuum, then done."""
    rows_done: int
    rows_total: int
    rows_per_s: float
    """Rows generated per second since the build started."""


@dataclass
class LoadResult:
    reused: bool
    seconds: float
    rows: int
    """Rows generated (0 when reused)."""
    tables: int
    table_size: int
    phase_seconds: dict[str, float] = field(default_factory=dict)
    recorded_seconds: float | None = None
    """Reused: the seconds its build took, as the dataset registry recorded them."""

    def load_record(self) -> common_load.LoadRecord:
        """The load in the shape every workload records it (``results.load``)."""
        if self.reused:
            return common_load.reused(self.recorded_seconds)
        return common_load.built(self.rows, self.seconds, self.phase_seconds)


LOAD_WAL_PER_ROW = 400
"""WAL bytes a row's build writes when no checkpoint falls inside it: the heap tuple's
insert record and its two index entries (measured: 46 MB for 120,000 rows, 385 a row)."""


def default_workers() -> int:
    return min(4, os.cpu_count() or 1)


# ----- the build ----------------------------------------------------------------------------

def load(conn: ConnectionInfo, opts: LoadOptions,
         progress: Callable[[LoadProgress], None] | None = None) -> LoadResult:
    """Build (or reuse) ``opts.tables`` sbtest tables of ``opts.table_size`` rows."""
    import psycopg
    from psycopg import sql

    tables = table_names(opts.tables)
    conn = dataset.scoped(conn)
    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        state = dataset.inspect(db, DATASET, opts.size_key, tables)
        if state.reusable:
            return LoadResult(reused=True, seconds=0.0, rows=0, tables=opts.tables,
                              table_size=opts.table_size,
                              recorded_seconds=state.build_seconds)
        # A previous build of another size may have had more tables: they go too.
        claimed = sorted(set(tables) | set(_previous_tables(state)))
        dataset.prepare_build(db, state, DATASET, opts.size_key, claimed,
                              force=opts.force, what="sysbench's")
        _create_tables(db, tables)

    builder = _Builder(conn, opts, opts.workers or default_workers(), progress)
    started = time.monotonic()
    builder.run_phase("data", _data_jobs(opts, builder.workers))
    builder.run_phase("keys", _index_jobs(opts.tables))
    builder.run_phase("keys", _primary_key_jobs(opts.tables))
    builder.run_phase("vacuum", _vacuum_jobs(opts.tables))
    visibility.finish(conn, tables, lambda short: builder.run_phase(
        "vacuum", [_Job(visibility.vacuum_statement(t)) for t in short]))
    if opts.checkpoint_at_end:  # what the spaced checkpoints deferred, timed
        builder.run_phase("checkpoint", [_Job(sql.Composed([sql.SQL("CHECKPOINT")]))])
    seconds = time.monotonic() - started
    builder.report("done")

    with psycopg.connect(conn.conninfo(), autocommit=True) as db:
        dataset.record(db, DATASET, opts.size_key, tables, seconds, __version__)
    return LoadResult(reused=False, seconds=seconds, rows=builder.rows_done,
                      tables=opts.tables, table_size=opts.table_size,
                      phase_seconds=builder.phase_seconds)


_SBTEST = re.compile(rf"{TABLE_PREFIX}[0-9]+")


def _previous_tables(state: dataset.DatasetState) -> list[str]:
    """sbtest tables pgdyno recorded in its own schema (an older build's, of any size)."""
    names = [t.split(".", 1)[1] for t in state.ours if t.startswith(f"{dataset.SCHEMA}.")]
    return [name for name in names if _SBTEST.fullmatch(name)]


_CREATE_TABLE = """
CREATE TABLE {} (
    id  integer NOT NULL,
    k   integer DEFAULT 0 NOT NULL,
    c   char(120) DEFAULT '' NOT NULL,
    pad char(60) DEFAULT '' NOT NULL
)"""


def _create_tables(db: psycopg.Connection, tables: list[str]) -> None:
    """Bare tables: keys are built after the data, which is much faster."""
    from psycopg import sql

    for table in tables:
        db.execute(sql.SQL(_CREATE_TABLE).format(sql.Identifier(table)))


# ----- the jobs of each phase ---------------------------------------------------------------

@dataclass(frozen=True)
class _Job:
    statement: sql.Composed
    params: dict[str, float | int] = field(default_factory=dict)
    rows: int = 0
    """Rows this job generates (data phase)."""


# k is drawn as sb_rand_special (see SpecialRand): ``u`` is drawn once per row in the
# inner query, which PostgreSQL never flattens (its target list is volatile), so both
# uses of u see the same value; CASE evaluates only the branch it takes.
_INSERT_ROWS = """
INSERT INTO {table} (id, k, c, pad)
SELECT id,
       CASE WHEN u * %(span)s < %(t)s
            THEN floor(1 + ({uniform_sum}) * %(t)s * %(iter_mult)s)
            ELSE 1 + floor(u * %(hot_width)s + %(hot_offset)s)
       END::integer,
       {c}, {pad}
FROM (SELECT id, random() AS u
      FROM generate_series(%(first)s::integer, %(last)s::integer) AS id) AS draws"""


def _data_jobs(opts: LoadOptions, workers: int) -> list[_Job]:
    """Id ranges of every table, enough of them to keep all connections busy."""
    from psycopg import sql

    per_table = max(-(-workers // opts.tables), -(-opts.table_size // MAX_ROWS_PER_JOB))
    per_table = min(per_table, opts.table_size)
    spec = special_rand(opts.table_size)
    constants = {"span": spec.span, "t": spec.t, "iter_mult": spec.iter_mult,
                 "hot_width": spec.hot_width, "hot_offset": spec.hot_offset}
    jobs = []
    for table in table_names(opts.tables):
        statement = sql.SQL(_INSERT_ROWS).format(
            table=sql.Identifier(table),
            uniform_sum=sql.SQL(" + ".join(["random()"] * SPEC_ITER)),
            c=sql.SQL(C_VALUE_SQL), pad=sql.SQL(PAD_VALUE_SQL))
        for first, last in _split(opts.table_size, per_table):
            jobs.append(_Job(statement, {**constants, "first": first, "last": last},
                             rows=last - first + 1))
    return jobs


def _split(size: int, parts: int) -> Iterator[tuple[int, int]]:
    """1..size as ``parts`` contiguous ranges of nearly equal length."""
    for part in range(parts):
        first = size * part // parts + 1
        last = size * (part + 1) // parts
        yield first, last


def _index_jobs(tables: int) -> list[_Job]:
    """Every index at once: the unique index of each primary key first, then k_N."""
    from psycopg import sql

    unique = [sql.SQL("CREATE UNIQUE INDEX {} ON {} (id)").format(
        sql.Identifier(key_name(n)), sql.Identifier(table))
        for n, table in enumerate(table_names(tables), 1)]
    by_k = [sql.SQL("CREATE INDEX {} ON {} (k)").format(
        sql.Identifier(k_index_name(n)), sql.Identifier(table))
        for n, table in enumerate(table_names(tables), 1)]
    return [_Job(statement) for statement in unique + by_k]


def _primary_key_jobs(tables: int) -> list[_Job]:
    """Turn each unique index into the primary key (id is already NOT NULL: no scan)."""
    from psycopg import sql

    return [_Job(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY USING INDEX {}").format(
        sql.Identifier(table), sql.Identifier(key_name(n)), sql.Identifier(key_name(n))))
        for n, table in enumerate(table_names(tables), 1)]


def _vacuum_jobs(tables: int) -> list[_Job]:
    from psycopg import sql

    return [_Job(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
            for table in table_names(tables)]


# ----- running the jobs ---------------------------------------------------------------------

class _Builder:
    """Runs the phases over ``workers`` connections and reports progress."""

    def __init__(self, conn: ConnectionInfo, opts: LoadOptions, workers: int,
                 progress: Callable[[LoadProgress], None] | None) -> None:
        self.conn = conn
        self.workers = workers
        self.progress = progress
        self.rows_total = opts.tables * opts.table_size
        self.rows_done = 0
        self.phases = BuildPhases(self.report)

    @property
    def phase_seconds(self) -> dict[str, float]:
        return self.phases.seconds

    def report(self, phase: str | None = None) -> None:
        if self.progress is None:
            return
        elapsed = max(self.phases.elapsed_s, 1e-9)
        self.progress(LoadProgress(phase=phase or self.phases.phase, rows_done=self.rows_done,
                                   rows_total=self.rows_total,
                                   rows_per_s=self.rows_done / elapsed))

    def run_phase(self, phase: str, jobs: list[_Job]) -> None:
        # "keys" runs as two pools (indexes, then primary keys): their times add up.
        pool = run_pool(self.conn, jobs, min(self.workers, len(jobs)))
        for job, _ in self.phases.follow(phase, len(jobs), pool):
            self.rows_done += job.rows
