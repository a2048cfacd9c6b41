"""PGDYNO_WORKDIR as a program sets it (Ansible's environment, a unit file): a leading "~"
is the user's home, as a shell would have made it, never a directory named "~"."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.options import default_workdir


def test_a_tilde_in_the_variable_is_the_home(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PGDYNO_WORKDIR", "~/.pgdyno-fleet/work")
    assert default_workdir() == tmp_path / ".pgdyno-fleet" / "work"
    monkeypatch.setenv("PGDYNO_WORKDIR", "/srv/pg")
    assert default_workdir() == Path("/srv/pg")
