"""A corpus of bad input: each is one line on stderr, exit 2, and nothing created.

Each case is what a user types (command-line arguments), the files they name (written into
the test's own directory first) and the words the one error line must contain: the file,
the key and what is accepted. The run is ``python -m pgdyno`` in a subprocess, as a user
runs it; every case is refused before a server starts, so no case needs one.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pgdyno.config.setting_specs import quote_if_needed, unquote
from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.osuser import server_user, unreachable_ancestor
from tests.conftest import run_cli_here

BENCH = ["bench", "tpcb", "--scale", "1", "--duration", "2", "--warmup", "0",
         "--iterations", "1", "--clients", "1", "--no-progress", "--results-dir", "res"]
CAMPAIGN = ["campaign", "c.toml", "--results-dir", "res", "--no-progress"]
TPROCH = ["bench", "tproch", "--scale-factor", "0.01", "--no-progress", "--results-dir", "res"]
COMPARE_AA = ["compare", "tpcb", "--no-progress", "--baseline", "default", "--candidate",
              "default", "--scale", "1", "--duration", "1", "--iterations", "1",
              "--results-dir", "res"]
SEARCH = ["tune", "--search", "tpcb", "--budget", "1", "--scale", "1", "--no-progress",
          "--results-dir", "res"]
TUNE = ["tune", "--hardware", "r8g.xlarge", "--format", "conf"]
BINARY = bytes(range(128, 256)) * 4
"""Not UTF-8 from its first byte: what a user gets giving an image or a tarball."""
DIRECTORY = None
"""A file entry whose content is DIRECTORY is made as an empty directory."""
EXECUTABLE = 0o755


@dataclass(frozen=True)
class Case:
    id: str
    args: list[str]
    words: list[str]
    files: dict[str, str | bytes | tuple[str, int] | None] = field(default_factory=dict)


def camp(text: str, *, words: list[str], id: str,
         files: dict[str, str | bytes | tuple[str, int] | None] | None = None) -> Case:
    """A campaign file c.toml with ``text``, run with ``pgdyno campaign``."""
    return Case(id, CAMPAIGN, ["c.toml", *words], {"c.toml": text, **(files or {})})


def cfg(text: str | bytes | None, *, words: list[str], id: str, name: str = "cfg.toml") -> Case:
    """``pgdyno bench --config FILE`` with FILE holding ``text``."""
    return Case(id, [*BENCH, "--config", name], [name, *words], {name: text})


CASES: list[Case] = [
    # ----- a config file given as --config ---------------------------------------------------
    cfg("postgresql = 3\n", words=["postgresql is an integer", "a table [postgresql]"],
        id="config-postgresql-scalar"),
    cfg("config = 3\n", words=["config is an integer", "a table [config]"],
        id="config-config-scalar"),
    cfg('[pg]\nshared_buffers = "1GB"\n', words=["unknown table", "pg", "[postgresql]"],
        id="config-pg-table-unknown"),
    cfg('shared_buffers = "1GB"\n', words=["shared_buffers", "top-level key", "[postgresql]"],
        id="config-setting-outside-a-table"),
    cfg("[postgresql]\nwork_mem = [1, 2]\n", words=["work_mem is an array", "a number"],
        id="config-value-array"),
    cfg("[postgresql]\nwork_mem = 2024-01-01\n", words=["work_mem is a date/time"],
        id="config-value-date"),
    cfg("[postgresql.a.b]\nc = 1\n", words=["a.b is a table", "a string, a number"],
        id="config-nested-too-deep"),
    cfg("[postgresql]\nshared_buffers = { a = 1 }\n",
        words=["[postgresql] shared_buffers is a table ({ a = 1 })", "not an extension's prefix",
               "a string, a number or a boolean", "extension.name = value"],
        id="config-inline-table-core-setting"),
    cfg("[postgresql.work_mem]\nx = 1\n", words=["[postgresql] work_mem is a table",
                                                 "not an extension's prefix"],
        id="config-table-named-after-core-setting"),
    cfg("[postgresql]\nShared_Buffers = { a = 1 }\n", words=["Shared_Buffers is a table"],
        id="config-inline-table-core-setting-case"),
    camp('[[config]]\nlabel = "a"\nconfig = "cfg.toml"\n',
         words=["[[config]] a", "cfg.toml", "shared_buffers is a table"],
         id="campaign-config-file-inline-table",
         files={"cfg.toml": "[postgresql]\nshared_buffers = { a = 1 }\n"}),
    cfg('[postgresql]\n"shared_buffers.a" = 1\n',
        words=["'shared_buffers.a'", "shared_buffers is a PostgreSQL setting",
               "not an extension's prefix"], id="config-quoted-key-core-prefix"),
    cfg("[config]\nbase = 3\n", words=["base is an integer", "a non-empty string"],
        id="config-base-int"),
    cfg('[config]\nbase = "fast"\n', words=["base = 'fast'", "default, pgtune, tuned"],
        id="config-base-unknown"),
    cfg('[config]\nnmae = "x"\n', words=["nmae unknown", "name, base"],
        id="config-meta-key-unknown"),
    cfg('[config]\nname = ["x"]\n', words=["name is an array", "a non-empty string"],
        id="config-name-array"),
    cfg(BINARY, words=["not a text file", ".toml/.env"], id="config-binary"),
    cfg(BINARY, words=["not a text file"], id="config-env-binary", name="cfg.env"),
    cfg(DIRECTORY, words=["is a directory", "default, pgtune, tuned"], id="config-directory"),
    cfg("[postgresql\n", words=["not valid TOML"], id="config-not-toml"),
    cfg('[postgresql]\nshared_bufers = "1GB"\n', words=["shared_bufers", "shared_buffers"],
        id="config-setting-misspelt"),
    cfg("PG_WORK_MEM\n", words=["cfg.env:1", "KEY=value"], id="config-env-no-value",
        name="cfg.env"),
    cfg('[postgresql]\napplication_name = "a\\nb"\n',
        words=["application_name", "control character", "\\n", "one line"],
        id="config-value-newline"),
    Case("config-port", [*BENCH, "--config", "cfg.toml"],
         ["port = 5433", "--config", "free port", "without port"],
         {"cfg.toml": "[postgresql]\nport = 5433\n"}),
    Case("config-missing", [*BENCH, "--config", "nofile.toml"],
         ["nofile.toml", "no such config or file", "pgtune"]),

    # ----- --set -----------------------------------------------------------------------------
    Case("set-listen-empty-tcp", [*BENCH, "--via", "tcp", "--set", "listen_addresses="],
         ["listen_addresses", "127.0.0.1", "--via tcp", "accepted"]),
    Case("set-listen-elsewhere", [*BENCH, "--set", "listen_addresses=10.1.2.3"],
         ["listen_addresses", "10.1.2.3", "127.0.0.1, localhost"]),
    Case("set-port", [*BENCH, "--set", "port=5433"], ["port = 5433", "free port"]),
    Case("set-socket-dir", [*BENCH, "--set", "unix_socket_directories=/tmp"],
         ["unix_socket_directories", "socket directory"]),
    Case("set-data-directory", [*BENCH, "--set", "data_directory=/tmp/x"],
         ["data_directory", "--workdir"]),
    Case("set-hba-file", [*BENCH, "--set", "hba_file=/tmp/hba"], ["hba_file", "pg_hba.conf"]),
    Case("set-newline", [*BENCH, "--set", "application_name=a\nb"],
         ["--set application_name", "control character (\\n)", "printable text"]),
    Case("set-tab", [*BENCH, "--set", "application_name=a\tb"], ["control character (\\t)"]),
    Case("set-escape", [*BENCH, "--set", "log_line_prefix=\x1b[31m"],
         ["log_line_prefix", "control character (\\x1b)"]),
    Case("set-quoted-newline", [*BENCH, "--set", "application_name='a\\nb'"],
         ["control character (\\n)"]),
    Case("set-placeholder-injection", [*BENCH, "--set", "x.y\nlisten_addresses=*"],
         ["not a setting name", "extension.setting"]),
    Case("set-placeholder-malformed", [*BENCH, "--set", "x..y=1"],
         ["'x..y'", "not a setting name"]),
    Case("set-no-value", [*BENCH, "--set", "work_mem"], ["--set work_mem", "key=value"]),
    Case("set-core-prefix", [*BENCH, "--set", "Work_Mem.x=1"],
         ["--set Work_Mem.x", "Work_Mem is a PostgreSQL setting", "not an extension's prefix"]),
    camp('[[config]]\nlabel = "a"\nset = ["shared_buffers.a=1"]\n',
         words=["[[config]] a", "shared_buffers is a PostgreSQL setting"],
         id="campaign-set-core-prefix"),
    Case("set-with-dsn", [*BENCH, "--dsn", "host=127.0.0.1 port=1", "--set",
                          "shared_buffers=1GB"], ["--dsn", "never changes", "--set"]),
    Case("config-with-dsn", [*BENCH, "--dsn", "host=127.0.0.1 port=1", "--config", "tuned"],
         ["--dsn", "--config"]),

    # ----- --dsn -----------------------------------------------------------------------------
    Case("dsn-port-word", [*BENCH, "--dsn", "host=x port=abc"],
         ["--dsn", "port 'abc'", "1 to 65535"]),
    Case("dsn-port-range", [*BENCH, "--dsn", "host=x port=99999"], ["port '99999'", "65535"]),
    Case("dsn-multi-port-uri", [*BENCH, "--dsn", "postgresql://u@h:5432,5433/db"],
         ["--dsn", "multi-host", "not supported", "one host and one port"]),
    Case("dsn-multi-host-uri", [*BENCH, "--dsn", "postgresql://u@h1:5432,h2:5433/db"],
         ["multi-host", "h1,h2"]),
    Case("dsn-multi-host-keywords", [*BENCH, "--dsn", "host=a,b port=5432"],
         ["multi-host", "host a,b"]),
    Case("dsn-not-a-dsn", [*BENCH, "--dsn", "host=x port"],
         ["--dsn", "not a valid connection string"]),

    # ----- directories and binaries ----------------------------------------------------------
    Case("wal-dir-file", [*BENCH, "--wal-dir", "afile"], ["--wal-dir afile", "is a file"],
         {"afile": "x"}),
    Case("wal-dir-under-file", [*BENCH, "--wal-dir", "afile/sub"],
         ["--wal-dir afile/sub", "afile is a file"], {"afile": "x"}),
    Case("wal-dir-not-empty", [*BENCH, "--wal-dir", "wal"], ["--wal-dir", "not empty"],
         {"wal/old": "x"}),
    Case("workdir-file", [*BENCH, "--workdir", "afile"], ["--workdir afile", "is a file"],
         {"afile": "x"}),
    Case("pg-bin-not-executable", [*BENCH, "--pg-bin", "bin"],
         ["postgres --version", "cannot be run", "Permission denied"],
         {"bin/postgres": "", "bin/initdb": "", "bin/pgbench": ""}),
    Case("pg-bin-not-postgres", [*BENCH, "--pg-bin", "bin"], ["postgres --version failed"],
         {"bin/postgres": ("#!/bin/sh\necho hello\n", EXECUTABLE), "bin/initdb": "",
          "bin/pgbench": ""}),

    # ----- campaign files --------------------------------------------------------------------
    camp('[bench]\nscale = "x"\n', words=["[bench] scale = 'x'", "a string", "an integer"],
         id="campaign-scale-string"),
    camp("campaign = 3\n", words=["campaign is an integer", "a table [campaign]"],
         id="campaign-campaign-scalar"),
    camp("[[bench]]\nscale = 1\n", words=["bench is an array of tables", "a table [bench]"],
         id="campaign-bench-array-of-tables"),
    camp('[config]\nlabel = "a"\n', words=["config is a table", "[[config]]"],
         id="campaign-config-single-table"),
    camp("config = [1, 2]\n", words=["config is an array", "[[config]]"],
         id="campaign-config-array-of-numbers"),
    camp("config = []\n", words=["config", "one or more [[config]]"],
         id="campaign-config-empty"),
    camp(BINARY, words=["not a text file", "campaign TOML"], id="campaign-binary"),
    camp(DIRECTORY, words=["is a directory"], id="campaign-directory"),
    Case("campaign-missing", CAMPAIGN, ["c.toml", "no such file"]),
    camp("[campaign\n", words=["not valid TOML"], id="campaign-not-toml"),
    camp("[campaign]\nworkloads = []\n", words=["workloads", "one or more of tpcb"],
         id="campaign-workloads-empty"),
    camp('[campaign]\nworkloads = ["tpcc"]\n', words=["'tpcc' is not a workload", "tpcb"],
         id="campaign-workload-unknown"),
    camp('[campaign]\nworkloads = ["tpcb", "tpcb"]\n', words=["workloads", "twice"],
         id="campaign-workload-twice"),
    camp("[campaign]\nworkloads = 3\n", words=["workloads = 3 is an integer"],
         id="campaign-workloads-int"),
    camp("[campaign]\nrepeat = 0\n", words=["repeat = 0", ">= 1"], id="campaign-repeat-zero"),
    camp("[campaign]\nrepeat = true\n", words=["repeat = True is a boolean", "an integer"],
         id="campaign-repeat-bool"),
    camp("[campaign]\nclients = [-4]\n", words=["clients = [-4]", "positive integer"],
         id="campaign-clients-negative"),
    camp("[campaign]\nclients = true\n", words=["clients = True is a boolean"],
         id="campaign-clients-bool"),
    camp("[campaign]\nclients = [4, 4]\n", words=["clients", "each once"],
         id="campaign-clients-twice"),
    camp('[[config]]\nlabel = "a"\n[[config]]\nlabel = "a"\n',
         words=["labels must be unique", "a different label"], id="campaign-labels-twice"),
    camp("[campaign]\nname = 3\n", words=["[campaign] name = 3 is an integer"],
         id="campaign-name-int"),
    camp('[campaign]\nname = "../x"\n', words=["name = '../x'", "results directory"],
         id="campaign-name-escapes"),
    camp('[campaign]\ncontext = "a/b"\n', words=["context = 'a/b'", "without /"],
         id="campaign-context-slash"),
    camp("[campaign]\nresults_dir = 3\n", words=["results_dir = 3 is an integer"],
         id="campaign-results-dir-int"),
    camp('[campaign]\nhardware = "nope"\n', words=["hardware", "nope", "r8g.xlarge"],
         id="campaign-hardware-unknown"),
    camp('[campaign]\nnmae = "x"\n', words=["nmae unknown", "workloads"],
         id="campaign-key-unknown"),
    camp("[bench]\nduration = true\n", words=["duration = True is a boolean", "an integer"],
         id="campaign-duration-bool"),
    camp('[bench]\nrate = "fast"\n', words=["rate = 'fast'", "a number"],
         id="campaign-rate-string"),
    camp('[bench]\nworkdir = ""\n', words=["workdir", "a path"], id="campaign-workdir-empty"),
    camp("[bench]\nmax-tries = 2\nmax_tries = 3\n", words=["given twice"],
         id="campaign-option-twice"),
    camp("[bench]\nclients = 4\n", words=["[bench] clients", "[campaign]"],
         id="campaign-bench-clients"),
    camp("[bench]\nwarehouses = 2\n", words=["tpcb", "--warehouses belongs to tprocc"],
         id="campaign-option-of-another-workload"),
    camp('[bench]\ndsn = "host=x port=abc"\n', words=["--dsn", "port 'abc'"],
         id="campaign-dsn-port"),
    camp('[bench]\nwal_dir = "afile"\n', words=["--wal-dir afile", "is a file"],
         id="campaign-wal-dir-file", files={"afile": "x"}),
    camp('[[config]]\nlabel = "a"\nconfig = "nofile.toml"\n',
         words=["[[config]] a", "nofile.toml", "no such config"], id="campaign-config-missing"),
    camp('[[config]]\nlabel = "a"\nconfig = "cfg.toml"\n',
         words=["[[config]] a", "cfg.toml", "postgresql is an integer"],
         id="campaign-config-file-bad", files={"cfg.toml": "postgresql = 3\n"}),
    camp('[[config]]\nlabel = "a"\nset = ["nosuch=1"]\n', words=["[[config]] a", "nosuch"],
         id="campaign-set-unknown"),
    camp('[[config]]\nlabel = "a"\nset = ["port=5433"]\n', words=["[[config]] a", "port"],
         id="campaign-set-port"),
    camp('[[config]]\nlabel = "a"\nset = ["application_name=a\\nb"]\n',
         words=["control character"], id="campaign-set-newline"),
    camp("[[config]]\nlabel = 3\n", words=["[[config]] label = 3 is an integer"],
         id="campaign-label-int"),
    camp('[[config]]\nlabel = "a"\nset = [1]\n', words=["set = [1]", "a list of strings"],
         id="campaign-set-int"),

    # ----- pgdyno tune: the same readers -----------------------------------------------------
    Case("tune-config-binary", [*TUNE, "--config", "cfg.toml"], ["cfg.toml", "not a text file"],
         {"cfg.toml": BINARY}),
    Case("tune-config-scalar", [*TUNE, "--config", "cfg.toml"], ["postgresql is a string"],
         {"cfg.toml": 'postgresql = "x"\n'}),
    Case("tune-hardware-binary", ["tune", "--hardware", "hw.toml"],
         ["--hardware hw.toml", "not a text file"], {"hw.toml": BINARY}),
    Case("tune-hardware-scalar", ["tune", "--hardware", "hw.toml"],
         ["hardware is an integer", "[hardware]"], {"hw.toml": "hardware = 3\n"}),
    Case("tune-hardware-directory", ["tune", "--hardware", "hw"],
         ["--hardware hw", "is a directory"], {"hw": DIRECTORY}),

    # ----- empty values: a typo or an unset shell variable, never the default ------------
    *[Case(f"empty-{flag[2:]}", [*BENCH, flag, ""], [f"{flag} ''", "an empty value", words])
      for flag, words in (("--archive", "buffered"), ("--config", "pgtune"),
                          ("--set", "key=value"), ("--dsn", "an existing server"),
                          ("--dataset-size", "3GB"), ("--tx-logs", "all | none"),
                          ("--workdir", "clusters"), ("--results-dir", "run directories"),
                          ("--archive-dir", "WAL"), ("--wal-dir", ""), ("--pg-bin", ""),
                          ("--script", ""), ("--protocol", "prepared"))],
    Case("empty-queries", [*TPROCH, "--queries", ""], ["--queries ''", "an empty value",
                                                      "1,3,5-7"]),
    Case("empty-tests", [*TPROCH, "--tests", ""], ["--tests ''", "power"]),
    Case("empty-mix", ["bench", "tprocc", "--no-progress", "--results-dir", "res", "--mix", ""],
         ["--mix ''"]),
    Case("empty-knobs", [*SEARCH, "--knobs", ""], ["--knobs ''", "setting names", "all"]),
    Case("empty-knob-name", [*SEARCH, "--knobs", "work_mem,"],
         ["--knobs 'work_mem,'", "an empty setting name"]),
    Case("empty-search-name", [*SEARCH, "--search-name", ""], ["--search-name ''"]),
    Case("search-name-escapes", [*SEARCH, "--search-name", "../x"],
         ["--search-name '../x'", "without /"]),
    Case("empty-time", [*SEARCH, "--time", ""], ["--time ''", "45m"]),
    Case("empty-validate-against", [*SEARCH, "--validate-against", ""],
         ["--validate-against ''", "default, pgtune, tuned"]),
    Case("validate-against-unknown", [*SEARCH, "--validate-against", "pgtune,fast"],
         ["--validate-against 'pgtune,fast'", "comma-separated"]),
    Case("empty-search-workdir", [*SEARCH, "--workdir", ""], ["--workdir ''", "clusters"]),

    # ----- pgdyno compare running both sides: an A/A note never precedes a refusal ---------
    Case("compare-aa-pairs-zero", [*COMPARE_AA, "--pairs", "0"], ["--pairs 0", "at least 2"]),
    Case("compare-aa-pairs-one", [*COMPARE_AA, "--pairs", "1"], ["--pairs 1", "at least 2"]),
    Case("compare-aa-config-missing", [*COMPARE_AA[:3], "--baseline", "nofile.toml",
                                       "--candidate", "nofile.toml", *COMPARE_AA[7:]],
         ["--config nofile.toml", "no such config"]),
    Case("compare-aa-set-unknown", [*COMPARE_AA, "--baseline-set", "nosuch=1",
                                    "--candidate-set", "nosuch=1"], ["--set nosuch", "unknown"]),
]


def _write(root: Path, files: dict[str, str | bytes | tuple[str, int] | None]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is DIRECTORY:
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, tuple):
            path.write_text(content[0])
            path.chmod(content[1])
        else:
            path.write_text(content)


def test_corpus_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 40


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(tmp_path: Path, case: Case) -> None:
    _write(tmp_path, case.files)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = run_cli_here(case.args, tmp_path / "work", cwd=tmp_path)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), out.stderr
    for word in case.words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    assert not (tmp_path / "res").exists()
    assert not (tmp_path / "work").exists()  # not even the workdir or its lock
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


# ----- values that must reach the server intact ---------------------------------------------

def _postgres_reads(token: str) -> str:
    """What PostgreSQL reads for ``log_line_prefix = <token>`` in a postgresql.conf:
    ``postgres -C`` parses the configuration and starts nothing (the independent oracle)."""
    user = server_user()
    postgres = embedded_install().program("postgres")
    if unreachable_ancestor(Path(postgres), user) is not None:
        pytest.skip(f"{user.name} cannot reach {postgres}")
    # the server user (as root: pgdyno) reads these files: not pytest's private tmp_path
    root = Path(tempfile.mkdtemp(prefix="pgdyno-quote-", dir="/var/tmp"))
    try:
        (root / "data").mkdir()
        for name in ("hba", "ident"):
            (root / name).write_text("")
        conf = root / "postgresql.conf"
        conf.write_text(f"data_directory = '{root / 'data'}'\nhba_file = '{root / 'hba'}'\n"
                        f"ident_file = '{root / 'ident'}'\nlog_line_prefix = {token}\n")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        out = subprocess.run([postgres, f"--config-file={conf}", "-C", "log_line_prefix"],
                             capture_output=True, text=True, check=False, env=user.env(),
                             cwd="/", **user.popen_kwargs())
        assert out.returncode == 0, out.stderr
        return out.stdout.removesuffix("\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("value", ["a\\", "it's", "a\\'b", "C:\\dir\\", "''", "%m [%p] "])
def test_values_pgdyno_writes_are_what_postgres_reads(value: str) -> None:
    """Before, a value ending in a backslash was written as 'a\\', which leaves the
    string unterminated: the server refused to start."""
    assert _postgres_reads(quote_if_needed(value)) == value


@pytest.mark.parametrize("token", ["'it''s'", "'a\\'b'", "'\\101\\\\'", "'x\\qy'",
                                   "'tab\\there'", "plain"])
def test_unquote_reads_a_conf_value_as_postgres_does(token: str) -> None:
    assert unquote(token) == _postgres_reads(token)
