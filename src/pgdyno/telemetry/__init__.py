"""Telemetry sampled during a run, stamped with wall-clock epoch seconds (``time.time()``),
the clock pgbench uses in its per-transaction logs, so that every series shares one axis.

Usage::

    rec = TelemetryRecorder(raw_dir, conn, data_dir, wal_dir, server_log, log_offset,
                            TelemetryConfig())
    rec.start(); rec.mark("measure_start"); ...; rec.mark("measure_end"); rec.stop()

Files written under ``raw_dir/telemetry/`` (CSV files have a header row; JSON-lines files
hold one object per line; ``t`` is always epoch seconds, ``mono`` the monotonic clock used
for interval lengths):

``meta.json``
    a ``TelemetryMeta`` (``pgdyno.analysis.telemetry.meta``, its one model, read back by
    ``read_meta``): schema_version, config, CPU capacity (online CPUs, cgroup quota), the
    data and WAL directories resolved to block devices (top device, chain, physical disks),
    server version and the settings the analysis needs, error counts per sampler.
``marks.csv``
    ``t,label``: phase marks from ``mark()``.
``host_raw.jsonl``
    ``{t, mono, stat, diskstats, meminfo, workload_ticks}``: the raw text of /proc/stat
    (cpu, procs and ctxt lines), /proc/diskstats and /proc/meminfo at each tick, and the
    CPU ticks (utime+stime) of each benchmark process (descendants of the recording
    process and of the postmaster). Everything below in cpu, disk and memory is
    recomputable from these.
``cpu.csv``
    mpstat figures per interval: ``t,interval_s,usr,nice,sys,iowait,irq,soft,steal,idle,
    busy,procs_running,procs_blocked,workload_cores`` (percent of all CPUs; busy = 100 -
    idle - iowait; workload_cores = CPU cores used by the benchmark's own processes).
``disk.csv``
    iostat -x figures per interval and device (long format): ``t,interval_s,device,r_s,w_s,
    rkb_s,wkb_s,r_await_ms,w_await_ms,aqu_sz,util_pct``.
``memory.csv``
    ``t,cached_kb,dirty_kb,writeback_kb,shmem_kb,mem_total_kb,mem_available_kb,
    hugepages_used,anon_hugepages_kb``.
``waits.jsonl``
    ``{t, rows: [[backend_type, state, wait_event_type, wait_event, count], ...]}`` for
    each pg_stat_activity sample (client backends, parallel workers, PG18 io workers; the
    telemetry connections excluded). A tick with no rows is a tick with no session.
``pg_stats.jsonl``
    ``{t, mono, database: {...}, checkpointer: {...}, wal: {...}, io: [{...}, ...]}``:
    cumulative counters with the same names on PostgreSQL 15-18 (see ``catalog``).
``checkpoint_log.txt`` / ``checkpoints.csv``
    the server-log lines about checkpoints from the run's log offset, and their parse:
    ``t,event,reason,buffers,write_s,sync_s,total_s,distance_kb,estimate_kb,apart_s``.
``smart.json``
    ``{before: {t, readings: [...]}, after: {...}}``; a device without SMART has
    ``available: false`` and the reason.
``errors.jsonl``
    ``{t, sampler, error}``: every failure of a sampler (samplers never stop the run).
"""

from pgdyno.telemetry.recorder import SCHEMA_VERSION, TelemetryConfig, TelemetryRecorder

__all__ = ["SCHEMA_VERSION", "TelemetryConfig", "TelemetryRecorder"]
