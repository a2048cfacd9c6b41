"""`pgdyno tune` in one call: the configuration matrix of a named config for a machine and a
workload, validated against the PostgreSQL binaries at hand, or (``--diff``) compared with a
running server's settings. The CLI builds ``TuneOptions`` and renders the ``TuneResult``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgdyno.config import load_hardware, resolve_config
from pgdyno.config.diff import DiffRow, current_settings, diff_rows
from pgdyno.config.resolve import ResolvedConfig
from pgdyno.config.setting_specs import for_install, snapshot
from pgdyno.config.units import parse_size
from pgdyno.errors import UsageError


@dataclass(frozen=True)
class TuneOptions:
    """What `pgdyno tune` was asked for, checked."""

    hardware: str = "detect"
    workload: str = "oltp"
    """A tuning class (oltp, web, ...) or a benchmark workload (``tuning`` then holds its
    class)."""
    config: str = "tuned"
    pg_version: int | None = None
    pg_bin: Path | None = None
    connections: int | None = None
    dataset_bytes: int | None = None
    overrides: tuple[str, ...] = ()
    diff_dsn: str | None = None
    """--diff: the running server to compare the config with."""
    data_dir: Path | None = None
    tuning: tuple[str, bool] | None = field(default=None, compare=False)
    advisor: Any = field(default=None, compare=False)
    """The workloads' advice for the tuned matrix (pgdyno.workloads.registry.ADVICE)."""


def tune_options(*, hardware: str, workload: str, config: str, pg_version: int | None,
                 pg_bin: Path | None, connections: int | None, dataset_size: str | None,
                 overrides: list[str], diff: bool, dsn: str | None, data_dir: Path | None,
                 tuning: tuple[str, bool] | None, advisor: Any) -> TuneOptions:
    """The command line's values as TuneOptions: --diff needs --dsn, --dataset-size a size."""
    if diff and not dsn:
        raise UsageError("--diff needs --dsn URL of the running server to compare with")
    size = None
    if dataset_size:
        try:
            size = parse_size(dataset_size)
        except ValueError as exc:
            raise UsageError(f"--dataset-size: {exc}") from None
    return TuneOptions(hardware=hardware, workload=workload, config=config,
                       pg_version=pg_version, pg_bin=pg_bin, connections=connections,
                       dataset_bytes=size, overrides=tuple(overrides),
                       diff_dsn=dsn if diff else None, data_dir=data_dir, tuning=tuning,
                       advisor=advisor)


@dataclass
class TuneResult:
    resolved: ResolvedConfig
    diff: list[DiffRow] | None = None
    """--diff: each recommended setting against the server's (``differs`` marks those more
    than 5% apart)."""
    server: str = ""
    """--diff: the server compared with, as its connection describes it."""


def tune(opts: TuneOptions) -> TuneResult:
    install, user = _install(opts.pg_bin, opts.pg_version)
    profile = load_hardware(opts.hardware)
    resolved = resolve_config(opts.config, list(opts.overrides), install=install,
                              workload=opts.workload, hardware=profile,
                              connections=opts.connections, dataset_bytes=opts.dataset_bytes,
                              pg_major=opts.pg_version, data_dir=opts.data_dir,
                              server_user=user, tuning=opts.tuning, advisor=opts.advisor)
    if opts.diff_dsn is None:
        return TuneResult(resolved)
    from pgdyno.targets.binaries import embedded_install
    from pgdyno.targets.dsn import DsnServer

    target = DsnServer(dsn=opts.diff_dsn, install=install or embedded_install())
    target.start()
    specs = for_install(install) if install else snapshot(opts.pg_version or 18)
    current = current_settings(target.connection().conninfo(), list(resolved.pg_settings))
    return TuneResult(resolved, diff_rows(resolved, current, specs),
                      target.connection().describe())


def _install(pg_bin: Path | None, pg_version: int | None):
    """Binaries to validate against: --pg-bin, else the embedded ones unless a version is named."""
    from pgdyno.targets.binaries import embedded_install, install_from_dir
    from pgdyno.targets.osuser import server_user

    if pg_bin is not None:
        install = install_from_dir(pg_bin)
        if pg_version is not None and install.major != pg_version:
            raise UsageError(f"--pg-version {pg_version}: --pg-bin {pg_bin} is PostgreSQL "
                             f"{install.major}; give one or the other")
        return install, server_user()
    if pg_version is not None:
        return None, None
    try:
        return embedded_install(), server_user()
    except Exception:  # no wheel: validate against the shipped specs of PostgreSQL 18
        return None, None
