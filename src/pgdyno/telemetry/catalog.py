"""Every statistics query pgdyno runs, for PostgreSQL 15 to 18, in one place: telemetry's
samplers, and the run loop's look at a server (its room for clients, the dataset's size).

The statistics views moved between releases:

- PG 15/16: checkpoint counters live in pg_stat_bgwriter (checkpoints_timed, ...);
  pg_stat_wal has wal_write/wal_sync and their times; pg_stat_io exists from 16.
- PG 17: pg_stat_checkpointer (num_timed, num_requested, write_time, sync_time,
  buffers_written); pg_stat_bgwriter keeps buffers_clean, maxwritten_clean, buffers_alloc;
  buffers_backend/buffers_backend_fsync are gone (pg_stat_io has them).
- PG 18: pg_stat_checkpointer adds num_done and slru_written; pg_stat_wal loses
  wal_write/wal_sync and their times (pg_stat_io rows with object = 'wal' have them);
  pg_stat_io gains read_bytes/write_bytes/extend_bytes (16/17 have op_bytes instead);
  io_method = worker adds "io worker" processes that do reads for backends.

Each query returns the same column names on every version (NULL where a version has no
such counter), so the rest of the package never looks at the version. Values from the
outside (database name, application name) always travel as parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

APPLICATION_NAME = "pgdyno-telemetry"

# Backends whose activity is database time. "io worker" (PG18) does reads on behalf of
# client backends; its idle wait (Activity:IoWorkerMain) is filtered out by the analysis.
SAMPLED_BACKEND_TYPES = ("client backend", "parallel worker", "io worker")

WAIT_SAMPLE_SQL = """
SELECT backend_type, coalesce(state, ''), coalesce(wait_event_type, ''),
       coalesce(wait_event, ''), count(*)
FROM pg_stat_activity
WHERE backend_type = ANY($1::text[])
  AND pid <> pg_backend_pid()
  AND application_name IS DISTINCT FROM $2
GROUP BY 1, 2, 3, 4
"""
"""Prepared through libpq (``pg.WaitSampler``), hence $1 and $2: SAMPLED_BACKEND_TYPES as
an array literal and APPLICATION_NAME, both passed as text (``wait_sample_params``)."""


def wait_sample_params() -> list[bytes]:
    """$1 and $2 of WAIT_SAMPLE_SQL in PostgreSQL's text form: the backend types as an
    array literal (each element double-quoted, with \\ and " escaped) and the name."""
    quoted = ('"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
              for t in SAMPLED_BACKEND_TYPES)
    return [("{" + ",".join(quoted) + "}").encode(), APPLICATION_NAME.encode()]


DATABASE_SQL = """
SELECT numbackends, xact_commit, xact_rollback, blks_read, blks_hit, tup_returned,
       tup_fetched, tup_inserted, tup_updated, tup_deleted, temp_files, temp_bytes, deadlocks,
       blk_read_time, blk_write_time, session_time, active_time, idle_in_transaction_time,
       extract(epoch FROM stats_reset)::float8 AS stats_reset
FROM pg_stat_database WHERE datname = %(dbname)s
"""

_CHECKPOINTER_PRE17 = """
SELECT checkpoints_timed AS num_timed, checkpoints_req AS num_requested,
       NULL::bigint AS num_done, checkpoint_write_time AS write_time_ms,
       checkpoint_sync_time AS sync_time_ms, buffers_checkpoint, NULL::bigint AS slru_written,
       buffers_clean, maxwritten_clean, buffers_backend, buffers_backend_fsync, buffers_alloc,
       extract(epoch FROM stats_reset)::float8 AS stats_reset
FROM pg_stat_bgwriter
"""

_CHECKPOINTER_17 = """
SELECT c.num_timed, c.num_requested, {num_done} AS num_done, c.write_time AS write_time_ms,
       c.sync_time AS sync_time_ms, c.buffers_written AS buffers_checkpoint,
       {slru_written} AS slru_written, b.buffers_clean, b.maxwritten_clean,
       NULL::bigint AS buffers_backend, NULL::bigint AS buffers_backend_fsync, b.buffers_alloc,
       extract(epoch FROM c.stats_reset)::float8 AS stats_reset
FROM pg_stat_checkpointer c, pg_stat_bgwriter b
"""

_WAL_PRE18 = """
SELECT wal_records, wal_fpi, wal_bytes::float8 AS wal_bytes, wal_buffers_full, wal_write,
       wal_sync, wal_write_time AS wal_write_time_ms, wal_sync_time AS wal_sync_time_ms,
       extract(epoch FROM stats_reset)::float8 AS stats_reset
FROM pg_stat_wal
"""

# PG18 moved WAL writes and fsyncs to pg_stat_io (object 'wal'); their times are filled
# only when track_wal_io_timing is on, like wal_write_time was before.
_WAL_18 = """
SELECT w.wal_records, w.wal_fpi, w.wal_bytes::float8 AS wal_bytes, w.wal_buffers_full,
       io.writes AS wal_write, io.fsyncs AS wal_sync, io.write_time AS wal_write_time_ms,
       io.fsync_time AS wal_sync_time_ms, extract(epoch FROM w.stats_reset)::float8 AS stats_reset
FROM pg_stat_wal w,
     (SELECT sum(writes)::bigint AS writes, sum(fsyncs)::bigint AS fsyncs,
             sum(write_time) AS write_time, sum(fsync_time) AS fsync_time
      FROM pg_stat_io WHERE object = 'wal') io
"""

_IO_COLUMNS = """backend_type, object, context, reads, read_time, writes, write_time, writebacks,
       writeback_time, extends, extend_time, hits, evictions, reuses, fsyncs, fsync_time"""

# Rows that never moved are left out: absent rows count as zero in the deltas.
_IO_ACTIVE = """(coalesce(reads, 0) + coalesce(writes, 0) + coalesce(extends, 0)
        + coalesce(hits, 0) + coalesce(fsyncs, 0) + coalesce(writebacks, 0)) > 0"""

_IO_16_17 = f"""
SELECT {_IO_COLUMNS},
       (reads * op_bytes)::float8 AS read_bytes, (writes * op_bytes)::float8 AS write_bytes,
       (extends * op_bytes)::float8 AS extend_bytes
FROM pg_stat_io WHERE {_IO_ACTIVE}
"""

_IO_18 = f"""
SELECT {_IO_COLUMNS},
       read_bytes::float8, write_bytes::float8, extend_bytes::float8
FROM pg_stat_io WHERE {_IO_ACTIVE}
"""


@dataclass(frozen=True)
class Catalog:
    """The queries for one server version (``server_version_num``, e.g. 180006)."""

    version_num: int

    @property
    def major(self) -> int:
        return self.version_num // 10000

    def supported(self) -> bool:
        return 15 <= self.major <= 18

    def checkpointer_sql(self) -> str:
        if self.major < 17:
            return _CHECKPOINTER_PRE17
        newer = self.major >= 18
        return _CHECKPOINTER_17.format(
            num_done="c.num_done" if newer else "NULL::bigint",
            slru_written="c.slru_written" if newer else "NULL::bigint",
        )

    def wal_sql(self) -> str:
        return _WAL_18 if self.major >= 18 else _WAL_PRE18

    def io_sql(self) -> str | None:
        """None before PG16, which has no pg_stat_io."""
        if self.major < 16:
            return None
        return _IO_18 if self.major >= 18 else _IO_16_17

    def archiver_sql(self) -> str:
        """pg_stat_archiver, the segment being written and the ``.ready`` segments waiting
        for the archiver (``telemetry.archiver``: ARCHIVER_COLUMNS)."""
        return _ARCHIVER.format(ready=_READY_V12 if self.version_num >= 120000
                                else "NULL::int8")

    def snapshot_queries(self) -> dict[str, str]:
        """Name -> SQL of each single-row view snapshotted every interval."""
        return {
            "database": DATABASE_SQL,
            "checkpointer": self.checkpointer_sql(),
            "wal": self.wal_sql(),
        }


_ARCHIVER = """
SELECT extract(epoch FROM clock_timestamp())::float8, a.archived_count, a.failed_count,
       a.last_archived_wal, extract(epoch FROM a.last_archived_time)::float8,
       a.last_failed_wal, extract(epoch FROM a.last_failed_time)::float8,
       pg_walfile_name(pg_current_wal_lsn()), (pg_current_wal_lsn() - '0/0')::int8,
       {ready}, pg_size_bytes(current_setting('wal_segment_size'))
FROM pg_stat_archiver a
"""
_READY_V12 = ("(SELECT count(*) FROM pg_ls_archive_statusdir() "
              "WHERE name LIKE '%.ready')")
"""pg_ls_archive_statusdir() exists from PostgreSQL 12 on; before it, no .ready count."""


CONNECTION_ROOM_SQL = """
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int
       + coalesce(current_setting('reserved_connections', true)::int, 0),
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
"""
"""max_connections, the slots reserved (reserved_connections exists from PostgreSQL 16 on)
and the client sessions open now: the room an existing server has for a run's clients."""

DATASET_SIZE_SQL = """
SELECT pg_database_size(current_database()), pg_size_bytes(current_setting('shared_buffers'))
"""
"""The prepared database's size and shared_buffers, in bytes: where the dataset lives."""


SETTINGS_SQL = """
SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%(names)s)
"""

# Settings the analysis needs to interpret the counters (block size, checkpoint spacing...).
SETTINGS_OF_INTEREST = (
    "block_size", "shared_buffers", "max_wal_size", "checkpoint_timeout",
    "checkpoint_completion_target", "synchronous_commit", "commit_delay", "wal_level",
    "io_method", "io_workers", "max_connections", "track_io_timing", "track_wal_io_timing",
    "full_page_writes", "wal_compression", "fsync",
)

# Maintenance debt (telemetry.debt): what a window leaves for autovacuum and the next
# checkpoint. pg_stat_user_tables is per database: read on a connection to the workload's.
DEBT_TABLES_SQL = """
SELECT s.schemaname, s.relname, s.n_live_tup, s.n_dead_tup,
       greatest(c.reltuples, 0)::float8 AS reltuples, s.autovacuum_count, s.vacuum_count
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
"""

# Settings in base units (pg_settings' own: max_wal_size in MB, the times in s), and the
# autovacuum workers at work. autovacuum_vacuum_max_threshold is PG18's (NULL before).
DEBT_SERVER_SQL = """
SELECT current_setting('autovacuum') = 'on' AS autovacuum,
       current_setting('autovacuum_vacuum_threshold')::float8 AS vacuum_threshold,
       current_setting('autovacuum_vacuum_scale_factor')::float8 AS vacuum_scale_factor,
       nullif(current_setting('autovacuum_vacuum_max_threshold', true), '')::float8
           AS vacuum_max_threshold,
       (SELECT setting::float8 FROM pg_settings WHERE name = 'autovacuum_naptime')
           AS autovacuum_naptime_s,
       (SELECT setting::float8 FROM pg_settings WHERE name = 'checkpoint_timeout')
           AS checkpoint_timeout_s,
       (SELECT setting::float8 * 1048576 FROM pg_settings WHERE name = 'max_wal_size')
           AS max_wal_size_bytes,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker')
           AS autovacuum_workers
"""

# WAL written since the last checkpoint's redo point: what the next checkpoint covers.
# pg_control_checkpoint() needs a superuser or a grant; without one the figure is missing.
DEBT_WAL_SQL = """
SELECT (pg_current_wal_lsn() - (pg_control_checkpoint()).redo_lsn)::float8
    AS wal_since_redo_bytes
"""
