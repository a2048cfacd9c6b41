"""TelemetryRecorder: background samplers that run while a benchmark runs.

Three daemon threads, each with its own clock and its own failure domain:

- host: /proc/stat, /proc/diskstats, /proc/meminfo every ``interval_s``;
- waits: pg_stat_activity at ``wait_sample_hz`` (the PostgreSQL ASH);
- stats: pg_stat_database, checkpointer/bgwriter, pg_stat_wal, pg_stat_io every ``interval_s``.

Threads rather than a subprocess: the benchmark driver (pgbench) is a separate C process,
so the Python process is otherwise idle, and a thread costs no start-up time. A sampler that
fails records the error in ``errors.jsonl``, reconnects or retries at its next tick, and never
lets an exception out: telemetry must never break a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pgdyno import serde
from pgdyno.analysis.hosttick import HostTick
from pgdyno.analysis.telemetry.meta import (
    META_FILE,
    META_SCHEMA_VERSION,
    ClientMeta,
    CpuMeta,
    DeviceMeta,
    HostMeta,
    ServerMeta,
    TelemetryConfig,
    TelemetryMeta,
)
from pgdyno.targets.archive import ArchiveSpec
from pgdyno.targets.connection import ConnectionInfo
from pgdyno.telemetry import catalog, checkpoints, host, pg, remote, smart
from pgdyno.telemetry.archiver import start_archiver
from pgdyno.telemetry.debt import start_debt
from pgdyno.telemetry.devices import DeviceResolution, resolve_path
from pgdyno.telemetry.files import CsvWriter, JsonlWriter
from pgdyno.telemetry.remote import RemoteHost

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.
if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = META_SCHEMA_VERSION
JOIN_TIMEOUT_S = 5.0
RECONNECT_BACKOFF_S = 1.0
MAX_ERRORS_PER_SAMPLER = 200  # a sampler failing every tick must not flood the run directory


class TelemetryRecorder:
    def __init__(self, raw_dir: Path, conn: ConnectionInfo | None, data_dir: Path | None,
                 wal_dir: Path | None, server_log: Path | None, server_log_offset: int,
                 config: TelemetryConfig, sample_dbname: str | None = None,
                 remote: RemoteHost | None = None, archive: ArchiveSpec | None = None) -> None:
        self.out = Path(raw_dir) / "telemetry"
        # --archive: the archiver and the page cache are sampled too (telemetry.archiver).
        self.archive = archive
        # --ssh: the host samplers read the database host through this; the machine pgdyno
        # runs on (the client) is sampled too, into telemetry/client/.
        self.remote = remote
        self.conn = conn
        # The samplers may connect to another database than the workload's (conn.dbname,
        # whose statistics they read), so that their own transactions stay out of it.
        self.sample_dbname = sample_dbname
        self.data_dir = data_dir
        self.wal_dir = wal_dir
        self.server_log = server_log
        self.server_log_offset = server_log_offset
        self.config = config
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._stopped = False
        self._lock = threading.Lock()
        self._error_counts: dict[str, int] = {}
        self._meta = TelemetryMeta()
        self._errors: JsonlWriter | None = None
        self._marks: CsvWriter | None = None
        self._roles: dict[str, DeviceResolution] = {}
        # pids of the server backends of the samplers' sessions, so that the server's side
        # of pgdyno's cost is told from the benchmark's (HostTick.sampler_backends).
        self._own_backends: set[int] = set()

    # ----- public API ------------------------------------------------------------------
    def start(self) -> None:
        if self._started or not self.config.enabled:
            return
        self._started = True
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            self._errors = JsonlWriter(self.out / "errors.jsonl")
            self._marks = CsvWriter(self.out / "marks.csv", ["t", "label"])
            self._write_initial_meta()
            if self.config.smart:
                self._record_smart("before")
        except Exception as exc:  # noqa: BLE001 - never break a run
            self.record_error("setup", exc)
        self.spawn("host", self._host_loop)
        if self.remote is not None:
            self.spawn("client", self._client_loop)
        if self.conn is None:  # a workload without a server (cpu, fio): the host alone
            return
        if self.config.wait_sample_hz > 0:
            self.spawn("waits", self._wait_loop)
        self.spawn("stats", self._stats_loop)
        start_debt(self)  # dead tuples, WAL since the checkpoint: what the run leaves
        if self.archive is not None:
            start_archiver(self)

    def mark(self, label: str) -> None:
        if self._marks is not None:
            self._marks.write([time.time(), label])

    def stop(self) -> None:
        with self._lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
        self._stop.set()
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT_S)
        for step, fn in (("checkpoint log", self._collect_checkpoints),
                         ("smart", lambda: self._record_smart("after") if self.config.smart
                          else None),
                         ("meta", self._finish_meta)):
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                with contextlib.suppress(Exception):  # recording can fail too (disk full)
                    self.record_error(step, exc)
        for writer in (self._marks, self._errors):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()

    # ----- setup -----------------------------------------------------------------------
    def _write_initial_meta(self) -> None:
        capacity = host.cpu_capacity()
        wal_dir = self.wal_dir
        if wal_dir is None and self.data_dir is not None:
            wal_dir = Path(self.data_dir) / "pg_wal"  # resolve_path follows a symlinked pg_wal
        roles = {"data": self.data_dir, "wal": wal_dir}
        if self.archive is not None and self.archive.directory is not None:
            roles["archive"] = self.archive.directory
        self._roles = {role: resolve_path(path) for role, path in roles.items() if path}
        remote_meta = None
        if self.remote is not None:
            try:
                remote_meta = self.remote.meta()
                self._roles = {role: res for role, (res, _i) in self.remote.resolved().items()}
                self.server_log_offset = self.remote.log_offset()
            except Exception as exc:  # noqa: BLE001 - the samplers still try, and record gaps
                self.record_error("host", exc)
                self._roles = {}
        meta = TelemetryMeta(
            started_at=time.time(), config=self.config,
            host=HostMeta(platform.node(), platform.release(), platform.machine()),
            cpu=CpuMeta(**asdict(capacity), effective_cores=capacity.effective_cores),
            devices={role: DeviceMeta(**asdict(res)) for role, res in self._roles.items()},
            server=ServerMeta(connection=self.conn.describe()) if self.conn else None,
            server_log=str(self.server_log) if self.server_log else None,
            server_log_offset=self.server_log_offset)
        if remote_meta is not None:
            # The host figures are the database host's; this machine is the client.
            meta.client = ClientMeta(meta.host, meta.cpu)
            meta.host = HostMeta(remote_meta.hostname, remote_meta.kernel, remote_meta.machine)
            meta.cpu = CpuMeta(online=remote_meta.online_cpus,
                               source=f"ssh {self.remote.destination}",
                               effective_cores=float(remote_meta.online_cpus))
            meta.remote = remote_meta
            meta.server_log = remote_meta.server_log
        self._meta = meta
        self._write_meta()

    def _write_meta(self) -> None:
        tmp = self.out / f"{META_FILE}.tmp"
        tmp.write_text(json.dumps(serde.to_dict(self._meta), indent=2))
        os.replace(tmp, self.out / META_FILE)

    def _finish_meta(self) -> None:
        self._meta.stopped_at = time.time()
        self._meta.errors = dict(self._error_counts)
        self._write_meta()

    # ----- what a sampler runs on (telemetry.archiver's samplers too) --------------------
    @property
    def interval_s(self) -> float:
        """The period of the host samplers and the statistics snapshots."""
        return self.config.interval_s

    def spawn(self, name: str, target: Callable[[], None]) -> None:
        """Run ``target`` on a daemon thread of its own, joined by ``stop``; whatever it
        raises is recorded under ``name``, never let out."""

        def guarded() -> None:
            try:
                target()
            except Exception as exc:  # noqa: BLE001 - last line of defence
                # Recording the error can fail too (a full disk is one way to get here):
                # a sampler must end quietly rather than print over the run's output.
                with contextlib.suppress(Exception):
                    self.record_error(name, exc)

        thread = threading.Thread(target=guarded, name=f"pgdyno-telemetry-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def ticks(self, period_s: float) -> Iterator[None]:
        """Yield at a fixed rate on the monotonic clock until ``stop``; late ticks are
        skipped, not bunched."""
        next_at = time.monotonic()
        while not self._stop.is_set():
            yield
            next_at += period_s
            now = time.monotonic()
            if next_at < now:
                next_at = now + period_s - ((now - next_at) % period_s)
            if self._stop.wait(next_at - now):
                return

    def poll_server(self, name: str, period_s: float,
                    work: Callable[[psycopg.Connection, catalog.Catalog], None]) -> None:
        """Call ``work`` every ``period_s`` until ``stop``, with a connection of the samplers
        (reconnected after a loss, backing off) and the catalogue of its server's version;
        each failure is recorded under ``name`` and the next tick goes on."""
        pgconn: psycopg.Connection | None = None
        cat: catalog.Catalog | None = None
        retry_at = 0.0
        try:
            for _ in self.ticks(period_s):
                try:
                    if pgconn is None or pgconn.closed:
                        if time.monotonic() < retry_at:
                            continue
                        pgconn = self.connect(self.sample_dbname)
                        cat = catalog.Catalog(pg.server_version_num(pgconn))
                        if name == "stats":
                            self._record_server(pgconn, cat)
                    assert cat is not None
                    work(pgconn, cat)
                except Exception as exc:  # noqa: BLE001
                    self.record_error(name, exc)
                    if pgconn is not None and (pgconn.closed or pgconn.broken):
                        pgconn = None
                        retry_at = time.monotonic() + RECONNECT_BACKOFF_S
        finally:
            if pgconn is not None:
                with contextlib.suppress(Exception):
                    pgconn.close()

    def connect(self, dbname: str | None) -> psycopg.Connection:
        """A samplers' session (``pg.connect``) whose backend is counted as pgdyno's."""
        assert self.conn is not None
        pgconn = pg.connect(self.conn, dbname)
        self.count_as_ours(pgconn.info.backend_pid)
        return pgconn

    def count_as_ours(self, backend_pid: int) -> None:
        """Count a server backend as pgdyno's from the next host tick on: a samplers'
        session, or one a workload opens to measure (TPROC-C's NOPM snapshots). Its CPU
        is then the harness's cost, not the benchmark's."""
        self._own_backends.add(backend_pid)

    def record_error(self, sampler: str, exc: BaseException) -> None:
        """One line in ``errors.jsonl`` (at most MAX_ERRORS_PER_SAMPLER a sampler); every
        failure counted in meta.json."""
        count = self._error_counts.get(sampler, 0) + 1
        self._error_counts[sampler] = count
        if self._errors is None or count > MAX_ERRORS_PER_SAMPLER:
            return
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        self._errors.write({"t": time.time(), "sampler": sampler, "error": detail})

    # ----- samplers ----------------------------------------------------------------------
    def _dsn_postmaster(self) -> int | None:
        """The postmaster of a --dsn server that runs on this host (found from a backend of
        ours): its processes are the benchmark's, not other load."""
        if self.conn is None or self.data_dir is not None:
            return None
        try:
            with pg.connect(self.conn, self.sample_dbname) as pgconn:
                backend = pgconn.execute("SELECT pg_backend_pid()").fetchone()[0]
        except Exception as exc:  # noqa: BLE001 - a remote or unreachable server: no tree
            self.record_error("host", exc)
            return None
        return host.local_postmaster(int(backend))

    def _host_loop(self) -> None:
        keep = {name for res in self._roles.values() for name in res.chain}
        # The benchmark's processes: whatever this process starts (pgbench, an embedded
        # server) and a local server's postmaster tree. Their CPU tells our load from a
        # neighbour's on a shared host.
        roots = {os.getpid()}
        if self.remote is not None:
            return self._sample_host(self.out, self.remote.read_tick, keep, "host")
        pm = host.postmaster_pid(self.data_dir) or self._dsn_postmaster()
        if pm is not None:
            roots.add(pm)
        # A copy of the samplers' backends each tick: a session may reconnect meanwhile.
        self._sample_host(self.out, lambda: host.read_tick(roots, frozenset(self._own_backends)),
                          keep, "host")

    def _client_loop(self) -> None:
        """--ssh: the CPU of the machine that runs the load (pgbench and pgdyno), its own
        series, so a verdict can tell a saturated driver from a saturated server."""
        roots = {os.getpid()}
        self._sample_host(self.out / "client", lambda: host.read_tick(roots), set(), "client")

    def _sample_host(self, out: Path, read: Callable[[], HostTick], keep: set[str],
                     name: str) -> None:
        out.mkdir(parents=True, exist_ok=True)
        writers = host.HostWriters(out)
        prev: HostTick | None = None
        gap_since: float | None = None
        try:
            for _ in self.ticks(self.config.interval_s):
                try:
                    try:
                        cur = read()
                    except OSError:
                        # A lost connection (--ssh): a marked gap, then the next ticks retry.
                        if gap_since is None:
                            gap_since = time.time()
                            self.mark(f"telemetry_gap_start {name}")
                        prev = None  # no rate across the gap
                        raise
                    if gap_since is not None:
                        self.mark(f"telemetry_gap_end {name}")
                        gap_since = None
                    writers.raw.write(asdict(cur))
                    if prev is not None:
                        cpu_row, disk_rows, mem_row = host.derive(prev, cur, keep)
                        writers.cpu.write(cpu_row)
                        for row in disk_rows:
                            writers.disk.write(row)
                        writers.mem.write(mem_row)
                    prev = cur
                except Exception as exc:  # noqa: BLE001
                    self.record_error(name, exc)
            # One last tick so the final interval is not lost.
            with contextlib.suppress(Exception):
                writers.raw.write(asdict(read()))
        finally:
            writers.close()

    def _wait_loop(self) -> None:
        writer = JsonlWriter(self.out / "waits.jsonl")
        sampler = pg.WaitSampler()

        def work(pgconn: psycopg.Connection, _cat: catalog.Catalog) -> None:
            t = time.time()
            writer.write({"t": t, "rows": sampler.sample(pgconn)})

        try:
            self.poll_server("waits", 1.0 / self.config.wait_sample_hz, work)
        finally:
            writer.close()

    def _stats_loop(self) -> None:
        writer = JsonlWriter(self.out / "pg_stats.jsonl")

        def work(pgconn: psycopg.Connection, cat: catalog.Catalog) -> None:
            writer.write(pg.snapshot_stats(pgconn, cat, self.conn.dbname))

        try:
            self.poll_server("stats", self.config.interval_s, work)
            # A final snapshot after the load stopped, so the last interval has an end.
            with contextlib.suppress(Exception):
                pgconn = self.connect(self.sample_dbname)
                with pgconn:
                    cat = catalog.Catalog(pg.server_version_num(pgconn))
                    writer.write(pg.snapshot_stats(pgconn, cat, self.conn.dbname))
        finally:
            writer.close()

    def _record_server(self, pgconn: psycopg.Connection, cat: catalog.Catalog) -> None:
        server = self._meta.server or ServerMeta()  # set at start, as the server is sampled
        server.version_num = cat.version_num
        server.supported = cat.supported()
        server.settings = pg.read_settings(pgconn)
        self._meta.server = server
        self._write_meta()

    # ----- after the run ---------------------------------------------------------------
    def _collect_checkpoints(self) -> None:
        if self.remote is not None and self.remote.log_path:
            lines = remote.checkpoint_lines(self.remote.transport, self.remote.log_path,
                                            self.server_log_offset)
            self._write_checkpoints(lines)
            return
        if self.server_log is None or not Path(self.server_log).exists():
            return
        lines = checkpoints.read_checkpoint_lines(Path(self.server_log), self.server_log_offset)
        self._write_checkpoints(lines)

    def _write_checkpoints(self, lines: list[str]) -> None:
        (self.out / "checkpoint_log.txt").write_text("\n".join(lines) + ("\n" if lines else ""))
        columns = ["t", "event", "reason", "buffers", "write_s", "sync_s", "total_s",
                   "distance_kb", "estimate_kb", "apart_s"]
        writer = CsvWriter(self.out / "checkpoints.csv", columns)
        try:
            for ev in checkpoints.parse_lines(lines):
                writer.write([getattr(ev, c) for c in columns])
        finally:
            writer.close()

    def _record_smart(self, phase: str) -> None:
        devices = sorted({d for res in self._roles.values() for d in res.physical})
        path = self.out / "smart.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data[phase] = {"t": time.time(),
                       "readings": [(remote.read_smart(self.remote.transport, d)
                                     if self.remote is not None else smart.read_smart(d)
                                     ).to_dict() for d in devices]}
        path.write_text(json.dumps(data, indent=2, default=str))
