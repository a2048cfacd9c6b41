"""The plain option records of a run: what the user chose, validated, frozen.

``BenchOptions`` (one ``pgdyno bench`` run) and ``TargetSpec`` (the server under test) are
read by every layer, from the CLI down to the run record (``results.manifest``), so they
live here, at the bottom, and import nothing of pgdyno: loading the record of a run loads
no server code (``pgdyno.targets``, its SSH transport). ``pgdyno.runner.options`` builds them
from the command line; ``pgdyno.targets`` opens the server a ``TargetSpec`` names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TX_LOG_CAP = 1_000_000
"""About 12 MB of gzip'd log an iteration: exact percentiles for every run of up to a
minute at 16,000 TPS, per-second histograms beyond."""
SAMPLE_AUTO = 0.0
"""``BenchOptions.tx_sampling_rate`` of ``--tx-logs sample``: R chosen per iteration from
the expected rate."""


def default_workdir() -> Path:
    """Where clusters live between runs, so that datasets can be reused.

    As root the default is outside /root, which the unprivileged server user cannot enter.
    """
    if env := os.environ.get("PGDYNO_WORKDIR"):
        # A "~" set by a program (Ansible's environment, a unit file) is not the shell's to
        # expand: unexpanded it would name a directory called "~" in the current one.
        return Path(env).expanduser()
    if os.geteuid() == 0:
        return Path("/var/lib/pgdyno")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pgdyno"


@dataclass(frozen=True)
class TargetSpec:
    """The user's choice of server, validated by ``pgdyno.targets.target_spec``; what such
    a server can do is asked of ``pgdyno.targets`` (``target_class``), never of ``kind``."""

    kind: str = "embedded"
    """``embedded``, ``local`` (with pg_bin), ``dsn``, or ``remote`` (--ssh without --dsn:
    pgdyno starts the server on that host, from --pg-bin there or the embedded one)."""
    workdir: Path = field(default_factory=lambda: default_workdir())
    pg_bin: Path | None = None
    dsn: str | None = field(default=None, repr=False, metadata={"serialise": False})
    """Never written anywhere: it may hold a password."""
    wal_dir: Path | None = None
    keep: bool = False
    ssh: str | None = None
    """``user@host`` (or an ssh_config Host alias) of the database host: its telemetry is read
    over SSH (pgdyno.targets.ssh). Only the destination is recorded, never a key."""
    ssh_config: Path | None = None
    """An ssh_config file for ``ssh -F`` (default: the user's ~/.ssh/config)."""
    remote_workdir: str | None = None
    """--remote-workdir: where the clusters live on the --ssh host (kind ``remote``)."""
    archive: str = "off"
    """``--archive``: off, buffered, direct, or the user's own archive_command
    (pgdyno.targets.archive)."""
    archive_dir: Path | None = None
    """``--archive-dir``, made absolute (buffered/direct: <workdir>/archive by default)."""


@dataclass(frozen=True)
class NoOptions:
    """For workloads without options of their own."""


@dataclass(frozen=True)
class BenchOptions:
    """One ``pgdyno bench`` run: what every workload shares, and the workload's own options.

    Built and validated by ``pgdyno.runner.options.build_options``; serialised once, into
    the run's manifest (the DSN, which may hold a password, never)."""

    workload: str
    clients: tuple[int, ...]
    """Client counts (a sweep); for a program workload such as cpu, its threads."""
    threads: int | None
    duration_s: int
    warmup_s: int
    iterations: int
    workload_options: Any = field(default_factory=NoOptions)
    """The workload's own frozen options dataclass (its plugin's ``options_type``)."""
    protocol: str = "prepared"
    rate_tps: float | None = None
    latency_limit_ms: float | None = None
    max_tries: int = 1
    random_seed: int | None = None
    """pgbench's --random-seed of iteration 1 (iteration i: this + i - 1), so that a run is
    drawn again alike; None: pgbench seeds from the time. The block designs give both sides
    one seed, so each pair's blocks draw the same keys, transactions and think times."""
    cache: str = "warm"
    via: str = "socket"
    force: bool = False
    load_wal: str = "minimal"
    """Dataset builds on a server pgdyno starts here: minimal (wal_level minimal, wal_buffers
    of at least 64 MB and wal_writer_delay of at most 10 ms for the build, by restarts:
    workloads.bulkload.minimal_wal) or configured."""
    results_dir: Path = Path("results")
    context: str | None = None
    target: TargetSpec = field(default_factory=TargetSpec)
    config: str = "default"
    sets: tuple[str, ...] = ()
    telemetry: bool = True
    tx_log_cap: int | None = DEFAULT_TX_LOG_CAP
    """Per-transaction logs kept for iterations of at most this many transactions; None:
    always (``--tx-logs all``), 0: never. Per-second data is kept regardless."""
    tx_aggregate_only: bool = False
    """``--tx-logs aggregate``: pgbench writes only its per-second aggregates (count, latency
    sum, sum of squares, min, max), no line per transaction: no percentiles, and none of
    the per-transaction log's cost to pgbench."""
    tx_sampling_rate: float | None = None
    """``--tx-logs sample[:R]``: pgbench logs a random fraction R of the transactions
    (``--sampling-rate``); 0: R chosen per iteration from the expected rate (auto). TPS
    and counts then come from pgbench's progress lines, percentiles from the sample."""
    drivers: Path | None = None
    """``--drivers``: a file naming the hosts that run pgbench (SSH destinations or an
    Ansible inventory, ``pgdyno.targets.drivers``); None: pgbench runs here."""
    drivers_group: str | None = None
    """``--drivers-group``: only the hosts of this group of the ``--drivers`` inventory (and
    of its child groups); None: every host."""
    show_progress: bool = field(default=True, metadata={"serialise": False})
    results_db: str | None = field(default=None, metadata={"serialise": False})
    """``--results-db``: the shared PostgreSQL index of runs, also written; never saved in
    the manifest (its DSN may hold a password)."""

    def threads_for(self, clients: int) -> int:
        """pgbench -j: one thread per core, never more than clients (pgbench requires it)."""
        if self.threads:
            return min(self.threads, clients)
        return max(1, min(clients, os.cpu_count() or 1))

    @property
    def has_lag_column(self) -> bool:
        return self.rate_tps is not None

    @property
    def has_retries_column(self) -> bool:
        return self.max_tries != 1
