"""The wheels a fleet host installs pgdyno from: hosts have no internet.

pgdyno's own wheel is built from the installed source (``pip wheel --no-deps``; a PyPI
install downloads the same version instead), and its requirements are downloaded once as
binary wheels (``pip download``, which reuses pip's cache), pinned by a constraints file to
the versions installed here, into ``~/.cache/pgdyno/fleet/<version>-<python>/``: the hosts
get the controller's environment. Hosts must match the controller's platform (OS, architecture,
Python minor version): the wheels are the controller's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from pgdyno import __version__
from pgdyno.errors import PgdynoError

PIP_TIMEOUT_S = 1800
REPRODUCIBLE_EPOCH = "315532800"
"""1980-01-01, the earliest time a zip entry can hold: the wheel's and the archive's file
times, unless the caller sets ``SOURCE_DATE_EPOCH`` itself."""


@dataclass(frozen=True)
class Bundle:
    directory: Path
    wheel: Path
    """pgdyno's own wheel, inside ``directory``."""
    version: str
    archive: Path
    """Every wheel of ``directory`` in one tar file, beside it: the playbooks ship this one
    file (Ansible copies a directory a file at a time, two round trips each)."""
    archive_sha256: str
    """The archive's checksum: a host that unpacked this very archive before is not sent it
    again (the same source and pins make the same bytes)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgdyno" / "fleet"


def dependency_pins(dist: str = "pgdyno") -> list[str]:
    """``name==version`` of every installed distribution pgdyno needs, transitively (extras
    and markers that do not apply here left out)."""
    from packaging.requirements import Requirement

    seen: dict[str, str] = {}
    walked: set[tuple[str, str]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(dist, frozenset())]
    while todo:
        name, extras = todo.pop()
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            # psycopg[binary]: the requirements the extra brings count too.
            if req.marker is not None and not any(
                    req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            try:
                seen[_canonical(req.name)] = f"{req.name}=={metadata.version(req.name)}"
            except metadata.PackageNotFoundError:
                continue  # an optional dependency not installed: the host does without
            for extra in {"", *req.extras}:
                if (_canonical(req.name), extra) not in walked:
                    walked.add((_canonical(req.name), extra))
                    todo.append((req.name, frozenset({extra}) if extra else frozenset()))
    return sorted(seen.values())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_bundle(console_print=print) -> Bundle:  # noqa: ANN001 - a print-like callable
    """pgdyno's wheel, then the closure of its requirements (as the wheel states them, so a
    requirement added since this environment was installed is not missed), each pinned to
    the version installed here when there is one (a constraints file)."""
    tag = f"{__version__}-py{sys.version_info.major}{sys.version_info.minor}"
    directory = cache_root() / tag
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("pgdyno-*.whl"):
        old.unlink()
    # A fixed SOURCE_DATE_EPOCH makes the wheel reproducible (its zip entries' times), so
    # an unchanged source gives an unchanged archive that hosts need not be sent again.
    _pip(["wheel", "--no-deps", "-w", str(directory), _own_source()],
         env={"SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", REPRODUCIBLE_EPOCH)})
    wheel = next(directory.glob("pgdyno-*.whl"), None)
    if wheel is None:
        raise PgdynoError(f"fleet: no pgdyno wheel was built in {directory}")
    pins = dependency_pins()
    key = {"pins": pins, "requires": _wheel_requires(wheel)}
    marker = directory / "bundle.json"
    if not marker.exists() or json.loads(marker.read_text()) != key:
        console_print(f"fleet: collecting dependency wheels into {directory}")
        # Wheels of other pins go first: a host installs the highest version it is sent, so
        # a numpy left from an earlier environment would replace the one pinned here.
        for stale in directory.glob("*.whl"):
            if stale != wheel:
                stale.unlink()
        constraints = directory / "constraints.txt"
        constraints.write_text("\n".join(pins) + "\n")
        _pip(["download", "--only-binary=:all:", "-d", str(directory), "-c", str(constraints),
              str(wheel)])
        marker.write_text(json.dumps(key))
    archive = _archive(directory)
    return Bundle(directory, wheel, __version__, archive, _sha256(archive))


def _archive(directory: Path) -> Path:
    """``<directory>.tar``: the directory's wheels at its top level, readable by all (an
    uncompressed tar: wheels are zip files already)."""
    import tarfile

    def readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mode, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, "", ""
        info.mtime = int(REPRODUCIBLE_EPOCH)  # a rebuilt, identical wheel: the same archive
        return info

    archive = directory.with_name(directory.name + ".tar")
    with tarfile.open(archive, "w") as tar:
        for wheel in sorted(directory.glob("*.whl")):
            tar.add(wheel, arcname=wheel.name, filter=readable)
    return archive


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _wheel_requires(wheel: Path) -> list[str]:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode()
    return sorted(line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("Requires-Dist:"))


def _own_source() -> str:
    """The project directory pgdyno was installed from, else the same version from PyPI."""
    try:
        direct = metadata.distribution("pgdyno").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        direct = None
    url = json.loads(direct).get("url", "") if direct else ""
    if url.startswith("file://") and Path(url[7:], "pyproject.toml").exists():
        return url[7:]
    return f"pgdyno=={__version__}"


def _pip(args: list[str], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True,
                          text=True, timeout=PIP_TIMEOUT_S, check=False,
                          env={**os.environ, **env} if env else None)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise PgdynoError(f"fleet: pip {args[0]} failed: {lines[-1] if lines else proc.returncode}")
