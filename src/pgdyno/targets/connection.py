"""How a client reaches the server under test, without ever writing a password down."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConnectionInfo:
    """Where and as whom to connect.

    ``host`` is either a TCP address or a Unix socket directory (an absolute path),
    exactly as libpq reads ``PGHOST``. The password is held in memory only: it is
    excluded from ``repr`` and from everything that is serialised.
    """

    host: str
    port: int
    user: str
    dbname: str
    password: str | None = field(default=None, repr=False, compare=False)
    extra: tuple[tuple[str, str], ...] = ()
    """Other libpq parameters from a DSN (sslmode, ...), never secrets."""
    search_path: str | None = None
    """The only schema unqualified names resolve to (workloads use pgdyno's own schema,
    so that no table of the user's is ever found by name, whatever their search_path)."""

    @property
    def via(self) -> str:
        """``socket`` when ``host`` is a socket directory (or, as libpq reads it, an
        abstract socket name starting with ``@``), else ``tcp``."""
        return "socket" if self.host.startswith(("/", "@")) else "tcp"

    def conninfo(self, dbname: str | None = None) -> str:
        """A libpq keyword/value string for psycopg (may contain the password)."""
        parts = {
            "host": self.host,
            "port": str(self.port),
            "user": self.user,
            "dbname": dbname or self.dbname,
            **dict(self.extra),
        }
        if self.search_path:
            parts["options"] = " ".join(
                filter(None, [parts.get("options", ""), self._search_path_option()]))
        if self.password:
            parts["password"] = self.password
        return " ".join(f"{k}={_quote(v)}" for k, v in parts.items())

    def with_dbname(self, dbname: str) -> ConnectionInfo:
        return dataclasses.replace(self, dbname=dbname)

    def in_schema(self, schema: str | None) -> ConnectionInfo:
        """The same way in, with unqualified names resolving in ``schema`` only."""
        return dataclasses.replace(self, search_path=schema)

    def _search_path_option(self) -> str:
        # A schema name pgdyno chose (letters and underscores): no quoting needed inside
        # the options string, and none is possible for "$user"-style names anyway.
        return f"-c search_path={self.search_path}"

    def client_args(self) -> list[str]:
        """Connection arguments for pgbench and psql, password excluded."""
        return ["-h", self.host, "-p", str(self.port), "-U", self.user]

    def client_env(self) -> dict[str, str]:
        """Environment for client programs: the password travels here, not on a command line."""
        env = dict(os.environ)
        for key in ("PGPASSWORD", "PGSERVICE", "PGOPTIONS"):
            env.pop(key, None)
        if self.password:
            env["PGPASSWORD"] = self.password
        for key, value in self.extra:
            if key == "sslmode":
                env["PGSSLMODE"] = value
            elif key == "options":
                env["PGOPTIONS"] = value
        if self.search_path:
            env["PGOPTIONS"] = " ".join(
                filter(None, [env.get("PGOPTIONS", ""), self._search_path_option()]))
        return env

    def describe(self) -> str:
        """How clients really connect, said once; human-readable and safe to log (no
        password): ``user@127.0.0.1:5432/db (tcp, sslmode=require)`` or
        ``user@/run/sock/.s.PGSQL.5432/db (socket)``: a socket is named by its file."""
        if self.via == "socket":
            where = f"{self.host.rstrip('/')}/.s.PGSQL.{self.port}"
        else:
            where = f"{self.host}:{self.port}"
        details = [self.via] + [f"{k}={v}" for k, v in self.extra if k == "sslmode"]
        return f"{self.user}@{where}/{self.dbname} ({', '.join(details)})"


def _quote(value: str) -> str:
    if value and all(c not in value for c in " '\\"):
        return value
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"
