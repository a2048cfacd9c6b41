"""pgdyno fleet run: a campaign on two stand-in hosts through real ansible-playbook.

Two throwaway OS users behind two real sshd (tests/sshhost.py) are the fleet; Ansible logs
in over SSH, copies the wheels (one archive), makes a venv per host, runs each host's
campaign and fetches the results. One host is made to fail (its Python is missing); the
other finishes; a rerun with the host repaired resumes: the finished host runs nothing
again, the repaired one runs its cell. Installing takes most of the time, so the hosts are
shared by the module.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import sys
from importlib import metadata
from pathlib import Path

import pytest

from pgdyno import __version__
from pgdyno.fleet.bundle import cache_root
from pgdyno.fleet.run import parse_play
from tests.conftest import make_shared_dir, run_cli_here
from tests.sshhost import SshHost, ssh_hosts

CAMPAIGN = """[campaign]
name = "tiny"
workloads = ["tpcb"]
clients = [1]
repeat = 1

[bench]
scale = 1
duration = 1
warmup = 0
iterations = 1

[[config]]
label = "default"
"""


def test_recap_and_failures_are_read_per_host() -> None:
    lines = [
        'fatal: [host-b]: FAILED! => {"changed": true, "msg": "non-zero return code", '
        '"stderr": "sh: 1: /nonexistent/python3: not found"}',
        "ok: [host-a] => {",
        '    "msg": "pgdyno: ran 1, skipped 0 already done, failed 0 | journal: /x"',
        "}",
        "PLAY RECAP ****",
        "host-a                     : ok=9    changed=8    unreachable=0    failed=0    ",
        "host-b                     : ok=3    changed=2    unreachable=0    failed=1    ",
    ]
    hosts = {h.host: h for h in parse_play(lines)}
    assert hosts["host-a"].status == "ok"
    assert hosts["host-a"].campaign == "ran 1, skipped 0 already done, failed 0"
    assert hosts["host-b"].status == "failed"
    assert hosts["host-b"].error == "non-zero return code"


def _bundle_directory() -> Path:
    return cache_root() / f"{__version__}-py{sys.version_info.major}{sys.version_info.minor}"


def _archive_sha256() -> str:
    """The controller's archive of the bundle, hashed here."""
    directory = _bundle_directory()
    return hashlib.sha256(directory.with_name(directory.name + ".tar").read_bytes()).hexdigest()


def _wheel_changed_at(host: SshHost) -> int:
    """When the host's copy of pgdyno's wheel was last written (unpacked)."""
    wheel = host.home / ".pgdyno-fleet" / "wheels" / f"pgdyno-{__version__}-py3-none-any.whl"
    return wheel.stat().st_ctime_ns


def _install_without_bytecode(host: SshHost) -> None:
    """The stand-in host's pip (its user's pip.conf) compiles no bytecode when it installs:
    compiling every module of numpy, matplotlib and the rest is most of an install's time,
    and the campaign imports a fraction of them (compiled as they load). The key is
    ``compile = false``: pip reads a config key by its option's name and ``--no-compile``
    stores False, so ``no-compile = true`` would set compiling on."""
    user = pwd.getpwnam(host.user)
    conf = host.home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("[install]\ncompile = false\n")
    for path in (conf.parent.parent, conf.parent, conf):
        os.chown(path, user.pw_uid, user.pw_gid)


def _runs(results: Path) -> dict[str, list[str]]:
    return {ctx.name: sorted(m.parent.name for m in ctx.glob("*/manifest.json"))
            for ctx in results.iterdir() if ctx.is_dir() and ctx.name.endswith("--tpcb")}


@pytest.mark.server
def test_fleet_of_two_hosts_one_failing_then_resumed(workdir: Path) -> None:
    base = make_shared_dir("pgdyno-fleet-")
    try:
        with ssh_hosts(2) as (a, b):
            for h in (a, b):
                _install_without_bytecode(h)
            # A wheel of another numpy, left by an environment whose pins were different: the
            # bundle collected for this one must not ship it beside the pinned one.
            bundle_dir = _bundle_directory()
            bundle_dir.mkdir(parents=True, exist_ok=True)
            stale = bundle_dir / "numpy-0.0.1-cp311-cp311-manylinux_2_28_x86_64.whl"
            stale.write_bytes(b"")
            (bundle_dir / "bundle.json").write_text("{}")
            campaign = base / "tiny.toml"
            campaign.write_text(CAMPAIGN)
            results = base / "results"

            def inventory(b_python: str | None) -> Path:
                path = base / "hosts.ini"
                lines = ["[db]"]
                for h in (a, b):
                    extra = f" pgdyno_python={b_python}" if h is b and b_python else ""
                    lines.append(f"{h.alias} ansible_user={h.user} ansible_ssh_common_args="
                                 f"'-F {h.config_file}' ansible_python_interpreter="
                                 f"/usr/bin/python3{extra}")
                path.write_text("\n".join(lines) + "\n")
                return path

            args = ["fleet", "run", str(campaign), "--group", "db", "--results-dir",
                    str(results)]
            first = run_cli_here([*args, "--inventory",
                                  str(inventory("/nonexistent/python3"))], workdir)
            assert first.returncode == 1, first.stderr
            assert "host-b  failed" in first.stdout
            assert "host-a  ok" in first.stdout, first.stdout[-4000:]
            sent = {h.alias: _wheel_changed_at(h) for h in (a, b)}
            first_archive = _archive_sha256()
            before = _runs(results)
            assert set(before) == {"host-a--tpcb"} and len(before["host-a--tpcb"]) == 1

            second = run_cli_here([*args, "--inventory", str(inventory(None))], workdir)
            assert second.returncode == 0, second.stdout + second.stderr
            runs = _runs(results)
            assert set(runs) == {"host-a--tpcb", "host-b--tpcb"}
            assert runs["host-a--tpcb"] == before["host-a--tpcb"]  # the same run, not again
            assert len(runs["host-b--tpcb"]) == 1
            # host-a resumed from its journal (nothing ran again), host-b ran its cell.
            assert "skipped 1 already done" in second.stdout.split("host-a  ok", 1)[1]
            assert "ran 1, skipped 0" in second.stdout.split("host-b  ok", 1)[1]
            for h in (a, b):
                journal = results / "fleet" / "hosts" / h.alias / "campaigns" / "tiny" / \
                    "journal.jsonl"
                events = [json.loads(line) for line in journal.read_text().splitlines()]
                assert sum(e["event"] == "run-start" for e in events) == 1
                manifest = json.loads(next((results / f"{h.alias}--tpcb").glob(
                    "*/manifest.json")).read_text())
                assert manifest["status"] == "ok"
                assert manifest["context"] == f"{h.alias}--tpcb"
            listing = run_cli_here(["runs", "--results-dir", str(results), "--context",
                                    "host-b--tpcb"], workdir)
            assert listing.returncode == 0 and "host-b--tpcb" in listing.stdout
            # Each host unpacked the one archive it was sent into the bundle's wheels.
            wheels = {p.name for p in _bundle_directory().glob("*.whl")}
            assert "pgdyno-" + __version__ + "-py3-none-any.whl" in wheels
            # One wheel a distribution, of the version installed here.
            names = [w.split("-")[0].lower() for w in wheels]
            assert len(names) == len(set(names)) and stale.name not in wheels, sorted(wheels)
            numpy_wheel = next(w for w in wheels if w.startswith("numpy-"))
            assert numpy_wheel.split("-")[1] == metadata.version("numpy")
            for h in (a, b):
                shipped = h.home / ".pgdyno-fleet" / "wheels"
                assert {p.name for p in shipped.iterdir()} - {"bundle.sha256"} == wheels, \
                    h.alias
                assert (shipped / "bundle.sha256").read_text().strip() == _archive_sha256()
                # The same archive as the first run's (the same source, rebuilt) is not sent
                # again: the host's wheels are the ones it unpacked then.
                if _archive_sha256() == first_archive:
                    assert _wheel_changed_at(h) == sent[h.alias], h.alias
                # The clusters live where the playbook put them ("~" of PGDYNO_WORKDIR
                # expanded), not in a directory named "~".
                assert (h.home / ".pgdyno-fleet" / "work").is_dir(), h.alias
                assert not (h.home / "~").exists(), h.alias
    finally:
        shutil.rmtree(base, ignore_errors=True)
