"""Generated configs against real servers: every value accepted, the catalogue true to pg_settings,
huge pages as PostgreSQL itself counts them, and --diff against a running server."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pgdyno.config import load_hardware, resolve_config
from pgdyno.config.detect import detect_profile
from pgdyno.config.setting_specs import for_install
from pgdyno.config.sizing import estimate_shared_memory, huge_pages_needed
from pgdyno.config.units import MB
from pgdyno.targets.binaries import embedded_install, install_from_dir
from pgdyno.targets.local import LocalServer
from tests.conftest import run_cli_here

pytestmark = pytest.mark.server  # every test here starts PostgreSQL

PG15_BIN = Path("/usr/lib/postgresql/15/bin")


def live_settings(srv: LocalServer, names: list[str]) -> dict[str, str]:
    with psycopg.connect(srv.connection().conninfo()) as conn:
        rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                            (names,)).fetchall()
    return dict(rows)


def assert_applied(srv: LocalServer, settings: dict[str, str], specs) -> None:
    """Every generated value is what the running server reports (in its base units)."""
    live = live_settings(srv, list(settings))
    assert set(live) == set(settings)
    for name, value in settings.items():
        want = specs.base_units(name, value)
        if want is not None and want < 0:
            continue  # -1: PostgreSQL computes the value itself
        if want is not None:
            assert float(live[name]) == pytest.approx(want, rel=1e-6), name
        else:
            text = value.strip("'").lower()
            if name == "wal_compression" and text == "on":
                text = "pglz"  # PostgreSQL reports the method that "on" means
            assert live[name].lower() == text, name


def test_pgtune_and_tuned_start_a_real_pg18_server(workdir: Path) -> None:
    install = embedded_install()
    specs = for_install(install)
    host = detect_profile(workdir)
    srv = LocalServer(install=install, workdir=workdir, name="cfg-generated")
    srv.prepare()
    try:
        cases = [("pgtune", "oltp", host), ("tuned", "oltp", host), ("tuned", "web", host),
                 ("pgtune", "web", host), ("tuned", "oltp", load_hardware("r8g.large"))]
        for name, workload, hardware in cases:
            resolved = resolve_config(name, [], install=install, workload=workload,
                                      hardware=hardware)
            assert resolved.pg_settings
            srv.write_settings(resolved.pg_settings)
            srv.restart()
            assert_applied(srv, resolved.pg_settings, specs)
    finally:
        srv.stop()


@pytest.mark.skipif(not PG15_BIN.is_dir(), reason="no PostgreSQL 15 binaries")
def test_tuned_starts_a_real_pg15_server(workdir: Path) -> None:
    install = install_from_dir(PG15_BIN)
    resolved = resolve_config("tuned", [], install=install, workload="oltp",
                              hardware=detect_profile(workdir))
    assert "io_method" not in resolved.pg_settings  # a PostgreSQL 18 setting
    srv = LocalServer(install=install, workdir=workdir, name="cfg-pg15",
                      settings=resolved.pg_settings)
    srv.prepare()
    try:
        srv.start()
        assert_applied(srv, resolved.pg_settings, for_install(install))
    finally:
        srv.stop()


def test_shipped_catalogue_matches_live_pg_settings(server: LocalServer) -> None:
    specs = for_install(server.install)
    with psycopg.connect(server.connection().conninfo()) as conn:
        rows = conn.execute("SELECT name, vartype, unit, min_val, max_val, enumvals, boot_val "
                            "FROM pg_settings").fetchall()
    for name, vartype, unit, low, high, enumvals, boot in rows:
        spec = specs.spec(name)
        assert spec is not None, name
        assert (spec.vartype, spec.unit) == (vartype, unit), name
        if vartype in ("integer", "real"):
            assert float(spec.min_val) == float(low) and float(spec.max_val) == float(high), name
        if vartype == "enum":
            assert list(spec.enumvals) == list(enumvals), name
        assert spec.boot_val == boot, name


def test_huge_pages_from_postgres_and_estimate_agree(workdir: Path) -> None:
    install = embedded_install()
    srv = LocalServer(install=install, workdir=workdir, name="cfg-hugepages")
    srv.prepare()  # initdb only: postgres -C needs a stopped cluster
    hardware = load_hardware("r8g.xlarge")
    # srv.install: the copy of the binaries the server user can execute
    resolved = resolve_config("tuned", [], install=srv.install, workload="oltp",
                              hardware=hardware, data_dir=srv.data_dir, server_user=srv.user)
    assert resolved.plan is not None
    line = next(x for x in resolved.plan.sizing if x.label == "pages needed")
    assert line.formula.startswith("postgres -C")
    from_server = int(line.value)
    estimate = huge_pages_needed(estimate_shared_memory(8192 * MB, 300, 64 * MB), 2048)
    assert abs(estimate - from_server) / from_server < 0.03


def test_cli_diff_against_a_running_server(server: LocalServer, workdir: Path) -> None:
    dsn = (f"host={server.connection().host} port={server.port} user=pgdyno dbname=pgdyno")
    out = run_cli_here(["tune", "--hardware", "r8g.xlarge", "--workload", "oltp", "--diff",
                        "--dsn", dsn], workdir)
    assert out.returncode == 0, out.stderr
    assert "shared_buffers" in out.stdout and "8GB" in out.stdout
    assert "settings differ" in out.stdout
    # checkpoint_completion_target is 0.9 by default: within 5%, so hidden
    assert "checkpoint_completion_target" not in out.stdout
