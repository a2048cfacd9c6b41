"""Where ``pgdyno bench fio`` runs, and the refusals that keep data safe.

Directories: each must exist; the test files go into a directory pgdyno creates inside it
(``.pgdyno-fio-XXXX``) and removes afterwards, so nothing of the user's is ever written
or deleted. Directories on the same filesystem are measured once, under all their roles.

A raw block device is overwritten whole, so it is taken only with ``--device /dev/X
--destroy-data`` and a confirmation that names the device (typed at the terminal, or
``--confirm X``), and refused while it or a partition of it is mounted, used as swap or
held by device-mapper/md.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.telemetry.devices import block_device_name, device_users, resolve_path, size_bytes
from pgdyno.workloads.fio.jobs import WAL_FILE_BYTES, Place

WORK_PREFIX = ".pgdyno-fio-"
TEST_FILE = "pgdyno-fio.dat"
SPACE_MARGIN = 1.1
"""Free space needed beyond the test files: the filesystem's own metadata, and room left."""


@dataclass(frozen=True)
class Directory:
    role: str
    """``data``, ``wal`` or ``target``."""
    path: Path


def check_directory(path: Path, flag: str) -> Path:
    """An existing, writable directory, as an absolute path; one line otherwise."""
    real = Path(path).expanduser().absolute()
    if not real.is_dir():
        what = "is not a directory" if real.exists() else "does not exist"
        raise UsageError(f"{flag} {path}: {what}; pgdyno only creates its test files in a "
                         "directory that exists")
    if not os.access(real, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: not writable by this user")
    return real


def group_by_filesystem(dirs: list[Directory]) -> list[tuple[str, Path]]:
    """(label, directory) per filesystem: two roles on one filesystem are measured once,
    labelled ``data+wal``; the first directory of each filesystem holds the test files."""
    groups: dict[int, tuple[list[str], Path]] = {}
    for d in dirs:
        roles, first = groups.setdefault(os.stat(d.path).st_dev, ([], d.path))
        if d.role not in roles:
            roles.append(d.role)
    return [("+".join(roles), path) for roles, path in groups.values()]


def check_free_space(directory: Path, size_bytes_: int, wal_jobs: int) -> None:
    needed = int((size_bytes_ + wal_jobs * WAL_FILE_BYTES) * SPACE_MARGIN)
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise UsageError(f"{directory}: the test files need {needed / 2**20:,.0f} MiB and its "
                         f"filesystem has {free / 2**20:,.0f} MiB free; use a smaller --size")


def make_place(label: str, directory: Path, size: int) -> Place:
    """pgdyno's own directory inside ``directory``, and the test file's path in it."""
    work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=directory))
    return Place(label=label, path=str(work / TEST_FILE), size_bytes=size,
                 device=resolve_path(directory).top)


def remove_place(place: Place) -> None:
    """Remove the directory pgdyno created for ``place`` (never anything else)."""
    if place.raw_device:
        return
    work = Path(place.path).parent
    if work.name.startswith(WORK_PREFIX):
        shutil.rmtree(work, ignore_errors=True)


# ----- raw devices ------------------------------------------------------------------------

def check_device(device: str, *, destroy_data: bool, confirm: str | None,
                 ask: Callable[[str], str] | None = None) -> str:
    """The kernel name of a raw device the user may overwrite; one line when not.

    ``ask`` prompts for the confirmation at a terminal (None: not interactive)."""
    name = block_device_name(device)
    if name is None:
        raise UsageError(f"--device {device}: not a block device")
    if not destroy_data:
        raise UsageError(f"--device {device}: fio would overwrite every byte of it; add "
                         "--destroy-data to accept that (nothing is written otherwise)")
    users = device_users(name)
    if users:
        raise UsageError(f"--device {device}: in use ({'; '.join(users)}); pgdyno never "
                         "writes to a device that is mounted or held")
    accepted = {device, name, f"/dev/{name}"}
    if confirm is None and ask is not None:
        confirm = ask(f"Every byte of /dev/{name} ({(size_bytes(name) or 0) / 2**30:,.1f} GiB) "
                      f"will be overwritten. Type {name} to go on: ").strip()
    if confirm is None:
        raise UsageError(f"--device {device} --destroy-data: confirm by naming the device: "
                         f"add --confirm {name} (or run at a terminal to type it)")
    if confirm not in accepted:
        raise UsageError(f"--confirm {confirm}: does not name {device}; nothing was written")
    return name


def terminal_prompt() -> Callable[[str], str] | None:
    """``input`` when both stdin and stderr are a terminal (someone can read and answer)."""
    if sys.stdin.isatty() and sys.stderr.isatty():
        def ask(text: str) -> str:
            sys.stderr.write(text)
            sys.stderr.flush()
            return sys.stdin.readline()
        return ask
    return None


def device_place(name: str, size: int | None) -> Place:
    whole = size_bytes(name) or 0
    if whole <= 0:
        raise UsageError(f"/dev/{name}: its size is unknown (sysfs); nothing was written")
    return Place(label=name, path=f"/dev/{name}", size_bytes=min(size or whole, whole),
                 device=name, raw_device=True)
