"""Check first, create after: a refusal of `pgdyno tune --search`'s --from or --storage, or of
`--cache prewarmed` on a --dsn role that may not create pg_prewarm, is one line naming the
option and the reason, exit 2, and leaves nothing behind: no searches/NAME/, no run
directory, no dataset in the user's database, and the earlier search --from names as it was."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import sql

from pgdyno.config.detect import detect_profile
from pgdyno.config.setting_specs import snapshot
from pgdyno.search import study as study_mod
from pgdyno.search.space import build_space
from pgdyno.targets.local import LocalServer
from tests.conftest import SHORT_RUN, run_cli_here, scratch_database, write_search_record

SEARCH = ["tune", "--search", "tpcb", "--budget", "1", "--search-name", "t", "--scale", "1",
          "--duration", "2", "--clients", "1", "--no-progress"]


def _tree(root: Path) -> list[tuple[Path, int]]:
    """Every path under ``root`` with its modification time: what "nothing created nor
    changed" compares."""
    return sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))


def _refused(out, option: str) -> str:  # noqa: ANN001 - a CompletedProcess
    """The one line of a refusal naming ``option``, exit 2, without a traceback."""
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pgdyno: error: {option} "), out.stderr
    return lines[0]


# ----- the search's --from ----------------------------------------------------------------

def _earlier(root: Path, workload: str = "tpcb") -> Path:
    """An earlier search of this host's hardware: its record and a study with one finished
    searched trial."""
    directory = root / "old"
    directory.mkdir(parents=True)
    space = build_space(detect_profile(), snapshot(18), clients=1, write_heavy=True,
                        knobs=["shared_buffers", "work_mem"])
    write_search_record(directory, workload, space)
    study = study_mod.open_study(directory, "maximize", 0)
    trial = study.ask()
    space.suggest(trial)
    study_mod.record_searched(study, trial, "t1.toml", {"shared_buffers": "256MB"},
                              SimpleNamespace(status="ok", value=90.0, run_dir="r1",
                                              reason="", seconds=1.0))
    return directory


def _garbage(study: Path) -> None:
    study.write_bytes(b"this is not SQLite at all" * 100)


def _truncated(study: Path) -> None:
    study.write_bytes(study.read_bytes()[:1000])


def _empty(study: Path) -> None:
    study.write_bytes(b"")


def _other_sqlite(study: Path) -> None:
    study.unlink()
    with sqlite3.connect(study) as conn:
        conn.execute("CREATE TABLE notes (x)")
    conn.close()


def _missing_study(study: Path) -> None:
    study.unlink()


def _no_record(study: Path) -> None:
    """A directory that is not a search (a run directory, say): no search.json."""
    (study.parent / "search.json").unlink()


def _record_not_an_object(study: Path) -> None:
    (study.parent / "search.json").write_text("[1, 2]")


def _record_truncated(study: Path) -> None:
    record = study.parent / "search.json"
    record.write_text(record.read_text()[:40])


def _another_workload(study: Path) -> None:
    record = study.parent / "search.json"
    record.write_text(record.read_text().replace('"workload": "tpcb"', '"workload": "tprocc"'))


FROM_CASES = [
    ("not-a-search", _no_record, "no search there"),
    ("record-not-an-object", _record_not_an_object, "the search record is a JSON object"),
    ("record-truncated", _record_truncated, "truncated"),
    ("another-workload", _another_workload, "searched tprocc on"),
    ("study-missing", _missing_study, "has no study.db"),
    ("study-garbage", _garbage, "not a SQLite database"),
    ("study-truncated", _truncated, "truncated or corrupt"),
    ("study-empty", _empty, "empty; no search's study there"),
    ("study-not-optuna", _other_sqlite, "not an Optuna study"),
]


def test_from_a_missing_search_creates_nothing(tmp_path: Path) -> None:
    results = tmp_path / "res"
    out = run_cli_here([*SEARCH, "--results-dir", str(results), "--from", "nowhere"],
                       tmp_path / "work")
    line = _refused(out, "--from")
    assert "--from nowhere: no search there" in line
    assert not results.exists() and not (tmp_path / "work").exists()


@pytest.mark.parametrize("damage, words", [(d, w) for _, d, w in FROM_CASES],
                         ids=[i for i, _, _ in FROM_CASES])
def test_from_is_refused_before_the_search_exists(tmp_path: Path,
                                                  damage: Callable[[Path], None],
                                                  words: str) -> None:
    earlier = _earlier(tmp_path / "earlier")
    damage(earlier / "study.db")
    before = _tree(tmp_path)
    out = run_cli_here([*SEARCH, "--results-dir", str(tmp_path / "res"), "--from",
                        str(earlier)], tmp_path / "work")
    line = _refused(out, "--from")
    assert words in line, line
    assert _tree(tmp_path) == before  # no searches/t/, and the earlier search untouched


def test_from_a_damaged_study_names_its_file_not_this_searchs_way_out(tmp_path: Path) -> None:
    """The advice for this search's own damaged study (move it away, or another
    --search-name) is not the way out of an earlier search's."""
    earlier = _earlier(tmp_path / "earlier")
    _truncated(earlier / "study.db")
    out = run_cli_here([*SEARCH, "--results-dir", str(tmp_path / "res"), "--from",
                        str(earlier)], tmp_path / "work")
    line = _refused(out, "--from")
    assert str(earlier / "study.db") in line and "--search-name" not in line


# ----- the search's --storage -------------------------------------------------------------

def test_an_unreachable_storage_creates_nothing(tmp_path: Path) -> None:
    out = run_cli_here([*SEARCH, "--results-dir", str(tmp_path / "res"), "--storage",
                        "postgresql://nobody:pw@127.0.0.1:1/optuna"], tmp_path / "work")
    line = _refused(out, "--storage")
    assert "cannot connect" in line and "Connection refused" in line
    assert "pw" not in line.replace("postgresql://nobody:***@", "")
    assert not (tmp_path / "res").exists()


PROBE_ROLE = "pgdyno_pw_probe"


@pytest.fixture()
def password_role(server: LocalServer) -> Iterator[int]:
    """A role the shared server asks a password of over TCP (its own pg_hba.conf line,
    first, for that role alone; removed afterwards): the server's TCP port."""
    admin = server.admin_connection().conninfo("postgres")
    with psycopg.connect(admin, autocommit=True) as db:
        hba = Path(db.execute("SHOW hba_file").fetchone()[0])
        db.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(PROBE_ROLE)))
        db.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'right-one'").format(
            sql.Identifier(PROBE_ROLE)))
    original = hba.read_text()
    hba.write_text(f"host all {PROBE_ROLE} 127.0.0.1/32 scram-sha-256\n{original}")
    try:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute("SELECT pg_reload_conf()")
        yield server.connection("tcp").port
    finally:
        hba.write_text(original)
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute("SELECT pg_reload_conf()")
            db.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(PROBE_ROLE)))


def test_a_wrong_storage_password_creates_nothing(password_role: int, tmp_path: Path) -> None:
    url = f"postgresql://{PROBE_ROLE}:wrong-one@127.0.0.1:{password_role}/postgres"
    out = run_cli_here([*SEARCH, "--results-dir", str(tmp_path / "res"), "--storage", url],
                       tmp_path / "work")
    line = _refused(out, "--storage")
    assert "password authentication failed" in line and "wrong-one" not in line
    assert not (tmp_path / "res").exists()


# ----- --cache prewarmed on a --dsn role that may not create pg_prewarm -------------------

PLAIN = "pgdyno_prewarm_plain"


@pytest.fixture()
def plain_dsn(server: LocalServer) -> Iterator[tuple[str, str]]:
    """A scratch database a plain role may build a dataset in (CREATE on it), and the
    --dsn of that role: (the DSN, the superuser's conninfo of the database)."""
    for conn in scratch_database(server, "prewarm_refused_early"):
        admin = conn.conninfo()
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(PLAIN)))
            db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(PLAIN)))
            db.execute(sql.SQL("GRANT CREATE ON DATABASE prewarm_refused_early TO {}").format(
                sql.Identifier(PLAIN)))
        port = server.connection("tcp").port
        try:
            yield f"postgresql://{PLAIN}@127.0.0.1:{port}/prewarm_refused_early", admin
        finally:
            with psycopg.connect(admin, autocommit=True) as db:
                db.execute(sql.SQL("REVOKE CREATE ON DATABASE prewarm_refused_early FROM {}")
                           .format(sql.Identifier(PLAIN)))
            with psycopg.connect(server.admin_connection().conninfo("postgres"),
                                 autocommit=True) as db:
                db.execute("DROP DATABASE IF EXISTS prewarm_refused_early WITH (FORCE)")
                db.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(PLAIN)))


USER_RELATIONS = ("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = "
                  "c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
                  "AND n.nspname NOT LIKE 'pg_toast%'")


def _left_as_it_was(admin: str) -> None:
    with psycopg.connect(admin, autocommit=True) as db:
        assert db.execute(USER_RELATIONS).fetchone()[0] == 0  # no dataset table
        assert db.execute("SELECT count(*) FROM pg_namespace WHERE nspname = "
                          "'pgdyno_bench'").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM pg_extension WHERE extname = "
                          "'pg_prewarm'").fetchone()[0] == 0


@pytest.mark.parametrize("command", [["bench", "tpcb"], ["bench", "tprocc", "--warehouses",
                                                          "1,2"]], ids=["run", "sweep"])
def test_cache_prewarmed_is_refused_before_the_dataset_is_built(
        plain_dsn: tuple[str, str], tmp_path: Path, command: list[str]) -> None:
    dsn, admin = plain_dsn
    results = tmp_path / "res"
    args = [*command, "--dsn", dsn, "--cache", "prewarmed", *SHORT_RUN,
            "--results-dir", str(results)]
    if command[1] == "tpcb":
        args += ["--scale", "1"]
    out = run_cli_here(args, tmp_path / "work")
    line = _refused(out, "--cache")
    assert line.startswith("pgdyno: error: --cache prewarmed: pg_prewarm is not in this "
                           f"database and role {PLAIN} may not create it"), line
    assert "postgresql-contrib" in line and "--cache warm" in line
    assert not results.exists() or not any(results.rglob("manifest.json")), \
        sorted(results.rglob("*"))
    assert not any(results.rglob("sweep.json")) if results.exists() else True
    _left_as_it_was(admin)
