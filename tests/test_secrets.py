"""No password reaches a file pgdyno writes or a line it prints."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pgdyno.redact import redact, redact_values
from tests.conftest import make_shared_dir
from tests.conftest import run_cli_here as run_cli

PASSWORD = "S3cret-pw'x"


@pytest.mark.parametrize(("text", "expected"), [
    ("host=h password=abc port=1", "host=h password=*** port=1"),
    ("password = 'a b\\'c' dbname=x", "password = *** dbname=x"),
    ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgres://u@h/db?sslmode=require&password=pw", "postgres://u@h/db?sslmode=require&password=***"),
    ("no secret here", "no secret here"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redacted_json_stays_valid() -> None:
    event = {"reason": 'dsn "host=x password=pw" refused', "n": [1, "password=pw"]}
    text = json.dumps(redact_values(event))
    assert json.loads(text) == {"reason": 'dsn "host=x password=***" refused',
                                "n": [1, "password=***"]}


def _every_file_bytes(root: Path):
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            yield path, gzip.decompress(data) if path.suffix == ".gz" else data


def test_campaign_with_a_dsn_password_writes_it_nowhere(server, workdir: Path) -> None:
    conn = server.connection()
    results = make_shared_dir("pgdyno-secrets-")
    dsn = f"host={conn.host} port={conn.port} user={conn.user} dbname={conn.dbname} " \
          f"password='{PASSWORD.replace(chr(39), chr(92) + chr(39))}'"
    spec = results / "secret.toml"
    spec.write_text(f"""
[campaign]
name = "secret"
workloads = ["select-only"]
clients = [1]
repeat = 1

[bench]
dsn = "{dsn.replace(chr(92), chr(92) * 2)}"
scale = 1
duration = 1
warmup = 0
iterations = 1
telemetry = false
force = true

[[config]]
label = "default"
""")
    out = run_cli(["campaign", str(spec), "--results-dir", str(results)], workdir)
    assert out.returncode == 0, out.stderr
    assert (results / "campaigns" / "secret" / "journal.jsonl").is_file()
    spec.unlink()  # the user's own file holds it, of course
    leaks = [str(p) for p, data in _every_file_bytes(results) if b"S3cret-pw" in data]
    assert leaks == []
    assert "S3cret-pw" not in out.stdout + out.stderr
    copy = (results / "campaigns" / "secret" / "campaign.toml").read_text()
    assert "password=***" in copy
