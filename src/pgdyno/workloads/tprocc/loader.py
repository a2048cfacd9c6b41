"""Parallel TPROC-C loader: server-side generation, warehouses spread over connections.

Phases, each a pool of independent jobs over ``workers`` connections:

1. data: the item table and one job per warehouse, each a single call of
   ``tprocc_load_warehouse(w)`` that generates every row inside PostgreSQL
   (INSERT ... SELECT over generate_series), so no row crosses the wire;
2. keys: primary keys and secondary indexes, built after the data, largest first;
3. vacuum: VACUUM ANALYZE per table (per partition), largest first (autovacuum is off
   on the tables until then: it would vacuum and analyze them again and again while
   they fill), then a VACUUM of any table it left with pages out of the visibility map
   (``workloads.visibility``);
4. check: the four TPC-C consistency conditions (consistency.check) over the new data,
   so that a dataset is recorded only once it is known to be right;
5. checkpoint: on a server pgdyno owns, the load runs at wal_level minimal with larger
   wal_buffers and with spaced checkpoints (``workloads.bulkload``: no hint-bit page
   images in the keys and vacuum phases, WAL out of the page cache and written in larger
   pieces) and ends with a CHECKPOINT, timed here. The loader itself changes no setting.

Loader sessions keep synchronous_commit on: each job commits once, so turning it off saves
nothing, and with it off the VACUUM that followed left most heap pages not all-visible
(the new rows' hint bits wait for their commit records' flush), which the test of the
visibility map catches.

Where the time goes (server CPU seconds per warehouse, bench/tprocc_load.py at W=5 on a
stock PostgreSQL 18 with data checksums): data about 1.0 (the INSERTs themselves: stock
0.33, orders with their lines 0.4, customer 0.19), keys about 0.3, vacuum about 0.37,
check about 0.05. WAL: the data's own size (about 100 MB a warehouse), then as much again
in full-page images when the new rows' hint bits are first set (by the keys phase's heap
scans, else by VACUUM) once a checkpoint has passed since their page was filled. Only COPY
FREEZE into a table created or truncated in the same transaction avoids those, and it
would need one job per table and every row sent through the client (measured: twice the
CPU of INSERT ... SELECT, for the vacuum it saves); wal_compression=pglz shrinks the
images threefold for three times the vacuum's CPU.

The dataset is recorded in the lead's registry only after all four succeed, so an
interrupted or inconsistent load is never mistaken for a reusable one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pgdyno import __version__
from pgdyno.config import detect
from pgdyno.errors import RunFailed
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.workloads import dataset, visibility
from pgdyno.workloads.parallel import BuildPhases, default_workers, run_pool
from pgdyno.workloads.tprocc import consistency, schema
from pgdyno.workloads.tprocc.model import (
    SCHEMA_VERSION,
    ConsistencyReport,
    LoadOptions,
    LoadProgress,
    LoadResult,
)

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

ProgressCallback = Callable[[LoadProgress], None]
__all__ = ["default_workers", "load"]


def load(target: ConnectionInfo, options: LoadOptions,
         progress: ProgressCallback | None = None) -> LoadResult:
    """Build (or reuse) the TPROC-C dataset of ``options.warehouses`` in ``target``."""
    import psycopg

    workers = options.workers or default_workers()
    partitions = (schema.auto_partitions(options.warehouses)
                  if options.order_line_partitions is None else options.order_line_partitions)
    target = dataset.scoped(target)
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        state = dataset.inspect(conn, schema.WORKLOAD, options.size_key, list(schema.TABLES))
        if state.reusable and not options.rebuild:
            schema.install_functions(conn)
            return _reused(conn, options, workers, state.build_seconds)
        dataset.prepare_build(conn, state, schema.WORKLOAD, options.size_key,
                              list(schema.TABLES), force=options.force, what="TPROC-C's")
        schema.create_tables(conn, partitions)
        for statement in schema.autovacuum_statements(partitions, enabled=False):
            conn.execute(statement)
        schema.install_functions(conn)
        server_version = conn.info.server_version
        key_memory = key_build_memory(conn, options.maintenance_work_mem, workers,
                                      local=_on_this_machine(target))

    loader = _Loader(target, options, workers, progress, key_memory)
    started = time.monotonic()
    loader.run_data()
    loader.run_keys(partitions)
    loader.run_vacuum(partitions, server_version)
    loader.run_check()
    if options.checkpoint_at_end:
        loader.run_checkpoint()
    with psycopg.connect(target.conninfo(), autocommit=True) as conn:
        for statement in schema.autovacuum_statements(partitions, enabled=True):
            conn.execute(statement)
        seconds = time.monotonic() - started
        loader.report("done")
        dataset.record(conn, schema.WORKLOAD, options.size_key, list(schema.TABLES),
                       seconds, __version__)
    return LoadResult(schema_version=SCHEMA_VERSION, warehouses=options.warehouses,
                      reused=False, workers=workers, order_line_partitions=partitions,
                      rows=loader.rows, seconds=seconds, phase_seconds=loader.phases.seconds,
                      load_c_last=schema.LOAD_C_LAST)


def _reused(conn: psycopg.Connection, options: LoadOptions, workers: int,
            recorded_seconds: float | None) -> LoadResult:
    partitions = conn.execute(
        "SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('order_line')"
    ).fetchone()[0]
    return LoadResult(schema_version=SCHEMA_VERSION, warehouses=options.warehouses,
                      reused=True, workers=workers, order_line_partitions=partitions, rows=0,
                      seconds=0.0, phase_seconds={}, load_c_last=schema.LOAD_C_LAST,
                      recorded_seconds=recorded_seconds)


KEY_MEMORY_SHARE = 4
"""On a server on this machine, index builds may take this fraction (1/4) of RAM in all,
split over the loader connections that build at once."""
KEY_MEMORY_CAP = 2 * 1024**3
"""At most this per connection: enough for W=100's largest key (order_line, 30 million
entries) to sort in memory over PostgreSQL's parallel build workers."""


def key_build_memory(conn: psycopg.Connection, option: str | None, workers: int, *,
                     local: bool) -> str | None:
    """maintenance_work_mem of the loader sessions (None: leave the server's own).

    Never below the server's own setting (a tuned config's is usually larger) nor below
    ``option``; on a server on this machine, also its share of RAM, so that large index
    builds sort in memory instead of spilling sorted runs to disk and merging them. A
    server elsewhere has RAM pgdyno cannot see: only the option and its own setting count
    there."""
    if option is None:
        return None
    wanted, current = conn.execute(
        "SELECT pg_size_bytes(%s), pg_size_bytes(current_setting('maintenance_work_mem'))",
        (option,)).fetchone()
    if local:
        ram = detect.meminfo().get("MemTotal", 0) * 1024
        limit = detect.cgroup_limits().memory_bytes
        if limit is not None:
            ram = min(ram, limit)
        wanted = max(wanted, min(KEY_MEMORY_CAP, ram // KEY_MEMORY_SHARE // max(1, workers)))
    if wanted <= current:
        return None
    return f"{wanted // 1024**2}MB"


def _on_this_machine(target: ConnectionInfo) -> bool:
    return target.via == "socket" or target.host in ("127.0.0.1", "::1", "localhost")


@dataclass
class _Job:
    label: str
    statement: Any
    params: tuple = ()
    warehouse: bool = False


class _Loader:
    def __init__(self, target: ConnectionInfo, options: LoadOptions, workers: int,
                 progress: ProgressCallback | None, key_memory: str | None) -> None:
        self.target = target
        self.key_memory = key_memory
        self.options = options
        self.workers = workers
        self.progress = progress
        self.rows = 0
        self.warehouses_done = 0
        self.phases = BuildPhases(self.report)

    def report(self, phase: str | None = None) -> None:
        if self.progress is None:
            return
        p = self.phases
        self.progress(LoadProgress(
            phase=phase or p.phase, warehouses_done=self.warehouses_done,
            warehouses_total=self.options.warehouses, rows=self.rows,
            elapsed_s=p.elapsed_s, steps_done=p.steps_done, steps_total=p.steps_total))

    # ----- phases ----------------------------------------------------------------------
    def run_data(self) -> None:
        jobs = [_Job("item", "SELECT tprocc_load_items()")]
        jobs += [_Job(f"warehouse {w}", "SELECT tprocc_load_warehouse(%s, %s)",
                      (w, schema.LOAD_C_LAST), warehouse=True)
                 for w in range(1, self.options.warehouses + 1)]
        self._phase("data", jobs)

    def run_keys(self, partitions: int) -> None:
        first, after = schema.key_jobs(self.options.warehouses, partitions)
        self._phase("keys", [_Job(j.table, j.statement) for j in first])
        if after:
            self._phase("keys_attach", [_Job(j.table, j.statement) for j in after])

    def run_vacuum(self, partitions: int, server_version: int) -> None:
        statements = schema.vacuum_statements(partitions, server_version)
        self._phase("vacuum", [_Job("vacuum", s) for s in statements])
        visibility.finish(self.target, schema.vacuum_tables(partitions), self._vacuum_again)

    def _vacuum_again(self, tables: list[str]) -> None:
        """The tables the load's VACUUM left with pages out of the visibility map, again,
        timed as more of the vacuum phase."""
        self._phase("vacuum", [_Job("vacuum", visibility.vacuum_statement(t)) for t in tables])

    def run_check(self) -> None:
        """The consistency conditions on the loaded data: a load that breaks them is a
        failure, never a dataset to record and reuse."""
        jobs = [_Job("consistency", None)]
        pool = run_pool(self.target, jobs, 1, self._session_settings(), run=_check)
        for _, report in self.phases.follow("check", len(jobs), pool):
            if not report.passed:
                failed = [c for c in report.conditions if not c.passed]
                raise RunFailed(
                    "the TPROC-C load broke consistency condition "
                    + ", ".join(f"{c.number} ({c.description}: {c.violations} of {c.checked}"
                                f"{', e.g. ' + c.examples[0] if c.examples else ''})"
                                for c in failed)
                    + "; the dataset is not recorded and will be rebuilt")

    def run_checkpoint(self) -> None:
        """The writes a load with spaced checkpoints deferred, timed as its own phase."""
        self._phase("checkpoint", [_Job("checkpoint", "CHECKPOINT")])

    # ----- the pool ----------------------------------------------------------------------
    def _phase(self, phase: str, jobs: list[_Job]) -> None:
        pool = run_pool(self.target, jobs, min(self.workers, len(jobs)),
                        self._session_settings())
        for job, result in self.phases.follow(phase, len(jobs), pool):
            if job.warehouse:
                self.warehouses_done += 1
            if phase == "data" and result is not None:
                self.rows += int(result)

    def _session_settings(self) -> dict[str, str]:
        settings: dict[str, str] = {}
        if self.key_memory:
            settings["maintenance_work_mem"] = self.key_memory
        return settings


def _check(conn: psycopg.Connection, job: _Job, note: object) -> ConsistencyReport:
    return consistency.check(conn)
