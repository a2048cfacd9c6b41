"""An existing server reached through a DSN: measured, never restarted or reconfigured."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pgdyno.errors import UsageError
from pgdyno.targets.binaries import PgInstall
from pgdyno.targets.connection import ConnectionInfo

# psycopg is imported where used: every start of pgdyno loads this module (with the
# workload plugins), and start-up stays fast.

CONNECT_TIMEOUT_S = 5
SAFE_EXTRA_KEYS = ("sslmode", "application_name", "target_session_attrs")
NOT_DROPPED = "the page cache of an existing server's host is never dropped (--dsn)"


@dataclass
class DsnServer:
    """A server pgdyno does not own. ``start`` only checks that it answers."""

    dsn: str = field(repr=False)
    install: PgInstall
    """Where pgbench comes from (the embedded wheel's unless --pg-bin is given)."""

    kind = "dsn"
    is_local: ClassVar[bool] = False
    """Its files are not pgdyno's to read: the server may run anywhere."""
    restartable: ClassVar[bool] = False
    """Never restarted, stopped or reconfigured: an existing server is only measured."""
    data_dir: Path | None = None
    log_path: Path | None = None
    pid: int | None = None

    def __post_init__(self) -> None:
        self._conn = dsn_connection(self.dsn)

    @property
    def effective_wal_dir(self) -> Path | None:
        return None

    @property
    def bin_dir(self) -> str:
        """Where pgbench comes from."""
        return str(self.install.bin_dir)

    def locate(self) -> None:
        """Nothing to find: the server names its own directories (``server_files``)."""

    def server_files(self) -> None:
        """Unknown to pgdyno: the server itself names its directories and log, to a role
        that may read its settings (``telemetry.remote.RemoteHost.describe_server``)."""
        return None

    def workdir_lock(self) -> None:
        """None: no workdir; other clients of an existing server are not pgdyno's to stop."""
        return None

    def preflight(self) -> None:
        """An unreachable server is bad input, refused before a run writes anything (a
        server pgdyno starts is different: one that does not start is a result)."""
        self.start()

    def prepare(self) -> None:
        """Nothing to create: the server exists already."""

    def start(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self._conn.conninfo(), connect_timeout=CONNECT_TIMEOUT_S):
                pass
        except psycopg.OperationalError as exc:
            raise UsageError(f"--dsn {self._conn.describe()}: cannot connect "
                             f"({_first_line(exc)})") from exc

    def stop(self) -> None:
        """Never stops a server pgdyno does not own."""

    def restart(self) -> None:
        raise UsageError("--cache cold needs a server pgdyno may restart; "
                         "with --dsn pgdyno never restarts the server")

    def is_running(self) -> bool:
        return True

    def drop_os_cache(self) -> str:
        """Never: the host of an existing server is not pgdyno's (--cache cold is refused
        with --dsn)."""
        return NOT_DROPPED

    def meminfo_available(self) -> int | None:
        """Unknown: the server's host is not pgdyno's to read."""
        return None

    def write_settings(self, settings: dict[str, str]) -> None:
        if settings:
            raise UsageError("--dsn: pgdyno never changes the settings of an existing server; "
                             "use --config only with the embedded or --pg-bin targets")

    def admin_connection(self) -> ConnectionInfo:
        return self._conn

    def connection(self, via: str = "socket") -> ConnectionInfo:
        """The DSN's own way in, whatever ``via`` asks: its host says socket or TCP, and
        the ConnectionInfo (its ``via`` and ``describe()``) records which one was used."""
        return self._conn

    def remember_good_settings(self, config_name: str) -> None:
        """Nothing to remember: an existing server's settings are never changed."""

    def last_good_settings(self) -> tuple[str, dict[str, str]]:
        return "server's own", {}

    def log_tail(self, lines: int = 15) -> str:
        return "(server log not accessible with --dsn)"

    def log_size(self) -> int:
        return 0


def dsn_connection(dsn: str) -> ConnectionInfo:
    """The one server a DSN names; a DSN pgdyno cannot use is a one-line UsageError
    (the DSN itself is never repeated: it may hold a password)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise UsageError(f"--dsn: not a valid connection string ({_first_line(exc)}); "
                         "expected e.g. postgresql://user@host:5432/dbname") from exc
    for key in ("host", "hostaddr", "port"):
        if "," in str(params.get(key) or ""):
            # libpq would try each in turn: the measured server would depend on which answers.
            raise UsageError(f"--dsn: multi-host connection strings are not supported "
                             f"({key} {params[key]}); accepted: one host and one port, "
                             "e.g. postgresql://user@host:5432/dbname")
    return ConnectionInfo(
        # hostaddr alone is a TCP address too; neither: libpq's default socket.
        host=str(params.get("host") or params.get("hostaddr") or "/var/run/postgresql"),
        port=_port(str(params.get("port") or "5432")),
        user=str(params.get("user") or "postgres"),
        dbname=str(params.get("dbname") or params.get("user") or "postgres"),
        password=params.get("password"),
        extra=tuple((k, str(params[k])) for k in SAFE_EXTRA_KEYS if k in params),
    )


def _port(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= 65535:
        raise UsageError(f"--dsn: port {text!r} is not a port number; accepted: a number "
                         "from 1 to 65535, e.g. port=5432")
    return int(text)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
