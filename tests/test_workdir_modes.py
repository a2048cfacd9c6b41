"""pgdyno gives a mode only to the directories it makes: a --workdir that was there keeps
its own (the server user only has to pass through it), while the directories pgdyno
creates inside it are opened to the server user."""

from __future__ import annotations

import shutil
import stat

import pytest

from pgdyno.targets.binaries import embedded_install
from pgdyno.targets.local import LocalServer
from pgdyno.targets.osuser import running_as_root
from tests.conftest import make_shared_dir


@pytest.mark.server
def test_an_existing_workdir_keeps_its_mode() -> None:
    if not running_as_root():
        pytest.skip("as the server's own user pgdyno changes no mode for it")
    workdir = make_shared_dir("pgdyno-modes-")
    workdir.chmod(0o711)  # others may pass through, not list it
    try:
        LocalServer(install=embedded_install(), workdir=workdir, name="modes").prepare()
        assert stat.S_IMODE(workdir.stat().st_mode) == 0o711
        for made in (workdir / "instances", workdir / "instances" / "modes"):
            assert stat.S_IMODE(made.stat().st_mode) == 0o755, made
        assert (workdir / "instances" / "modes" / "data" / "PG_VERSION").exists()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
