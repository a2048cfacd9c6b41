"""Workload drivers: what differs between pgbench built-ins and TPROC-C inside one run loop.

A driver prepares the dataset and the pgbench scripts, takes a database snapshot at
the start and at the end of each measured window (for figures measured by the database
itself, such as NOPM), and runs checks after the last iteration. Snapshots and checks
are written under ``raw/`` so that reports can be rebuilt without the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg

from pgdyno.runner.options import BenchOptions, ScriptSpec
from pgdyno.targets import ConnectionInfo, PgInstall
from pgdyno.workloads import pgbench


@dataclass
class Prepared:
    scripts: tuple[ScriptSpec, ...]
    dataset: dict[str, Any]
    commands: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    """Workload parameters the report needs (warehouses, mix, ...), saved in raw/run.json."""


class Driver(Protocol):
    def prepare(self, conn: ConnectionInfo, install: PgInstall, raw_dir: Path,
                progress: Callable[[str], None]) -> Prepared: ...

    def open_session(self, conn: ConnectionInfo) -> Any:
        """A connection for the window snapshots (None when the driver takes none)."""
        ...

    def snapshot(self, session: Any) -> dict[str, Any] | None: ...

    def session_options(self, reads_server_log: bool) -> str | None:
        """PGOPTIONS for pgbench's sessions (None: none)."""
        ...

    def collect(self, it_dir: Path, server_log: Path | None, log_offset: int) -> None:
        """Copy what the iteration left in the server log (from ``log_offset``) to raw/."""
        ...

    def finish(self, conn: ConnectionInfo, raw_dir: Path) -> None: ...


@dataclass
class PgbenchDriver:
    """pgbench's built-ins and user scripts over the pgbench tables."""

    opts: BenchOptions

    def prepare(self, conn, install, raw_dir, progress) -> Prepared:
        progress(f"pgbench dataset, scale {self.opts.scale}")
        init = pgbench.initialise(conn, install, self.opts.scale, self.opts.force,
                                  raw_dir / "pgbench" / "init.log")
        return Prepared(
            scripts=self.opts.scripts,
            dataset={"kind": "pgbench", "scale": self.opts.scale, "reused": init.reused,
                     "build_seconds": round(init.seconds, 3)},
            commands=[" ".join(init.command)] if init.command else [],
            parameters={"scale": self.opts.scale})

    def open_session(self, conn) -> Any:
        return None

    def snapshot(self, session) -> dict[str, Any] | None:
        return None

    def session_options(self, reads_server_log: bool) -> str | None:
        return None

    def collect(self, it_dir, server_log, log_offset) -> None:
        """pgbench's own log has everything."""

    def finish(self, conn, raw_dir) -> None:
        """Nothing to check after pgbench's own workloads."""


@dataclass
class TproccDriver:
    """TPROC-C: parallel server-side load, PL/pgSQL transactions, NOPM from the database."""

    opts: BenchOptions

    def prepare(self, conn, install, raw_dir, progress) -> Prepared:
        from pgdyno.workloads import tprocc

        t = self.opts.tprocc
        assert t is not None

        def on_load(p: tprocc.LoadProgress) -> None:
            progress(f"TPROC-C load {p.phase}: {p.warehouses_done}/{p.warehouses_total} "
                     f"warehouses, {p.rows_per_s:,.0f} rows/s")

        result = tprocc.load(conn, tprocc.LoadOptions(warehouses=t.warehouses,
                                                      workers=t.load_workers,
                                                      force=self.opts.force), on_load)
        script_set = tprocc.generate(tprocc.ScriptOptions(
            warehouses=t.warehouses, mix=tprocc.Mix.parse(t.mix) if t.mix else tprocc.Mix(),
            all_warehouses=t.all_warehouses, keying_thinking=t.keying_thinking,
            time_scale=t.time_scale, protocol=self.opts.protocol))
        paths = script_set.write(raw_dir / "scripts")
        scripts = tuple(ScriptSpec(name=info.name, weight=info.weight, path=path)
                        for info, path in zip(script_set.scripts, paths, strict=True))
        return Prepared(
            scripts=scripts,
            dataset={"kind": "tprocc", "warehouses": t.warehouses, "reused": result.reused,
                     "build_seconds": round(result.seconds, 3),
                     "warehouses_per_minute": round(result.warehouses_per_minute, 2),
                     "load": result.to_dict()},
            parameters={"warehouses": t.warehouses, "mix": t.mix or "45,43,4,4,4",
                        "all_warehouses": t.all_warehouses,
                        "keying_thinking": t.keying_thinking, "time_scale": t.time_scale,
                        "constants": script_set.constants.to_dict()})

    def open_session(self, conn) -> psycopg.Connection:
        return psycopg.connect(conn.conninfo(), autocommit=True,
                               application_name="pgdyno-snapshot")

    def snapshot(self, session) -> dict[str, Any] | None:
        from pgdyno.workloads import tprocc

        return tprocc.snapshot(session).to_dict()

    def session_options(self, reads_server_log: bool) -> str | None:
        """Compliant mode: every call's duration in the server log (response times)."""
        from pgdyno.workloads.tprocc import response

        t = self.opts.tprocc
        if t is not None and t.keying_thinking and reads_server_log:
            return response.SESSION_OPTIONS
        return None

    def collect(self, it_dir, server_log, log_offset) -> None:
        from pgdyno.workloads.tprocc import response

        if server_log is not None and self.session_options(True) is not None:
            response.extract(server_log, log_offset, it_dir / response.RAW_FILE)

    def finish(self, conn, raw_dir) -> None:
        from pgdyno.workloads import tprocc

        with psycopg.connect(conn.conninfo(), autocommit=True) as db:
            report = tprocc.check_consistency(db)
        (raw_dir / "consistency.json").write_text(json.dumps(report.to_dict(), indent=2))


def driver_for(opts: BenchOptions) -> Driver:
    return TproccDriver(opts) if opts.workload == "tprocc" else PgbenchDriver(opts)
