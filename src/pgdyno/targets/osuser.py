"""The unprivileged OS user that runs PostgreSQL when pgdyno itself runs as root.

PostgreSQL refuses to start as root. pgdyno creates a system user (``pgdyno`` by
default) once, hands it the directories pgdyno made, and starts the server's
programs under that user's uid and gid. When pgdyno is not root, the server simply
runs as the invoking user and nothing here changes anything.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import TargetError

DEFAULT_SERVER_USER = "pgdyno"


@dataclass(frozen=True)
class ServerUser:
    name: str
    uid: int
    gid: int
    home: str

    @property
    def is_current(self) -> bool:
        return self.uid == os.geteuid()

    def popen_kwargs(self) -> dict:
        """Keyword arguments for ``subprocess`` that run a program as this user."""
        if self.is_current:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update({"HOME": self.home, "USER": self.name, "LOGNAME": self.name, "LC_ALL": "C"})
        return env


def running_as_root() -> bool:
    return os.geteuid() == 0


def server_user(name: str = DEFAULT_SERVER_USER) -> ServerUser:
    """The user to run PostgreSQL as: the current user, or (as root) ``name``, created if absent."""
    if not running_as_root():
        entry = pwd.getpwuid(os.geteuid())
        return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = _create_system_user(name)
    if entry.pw_uid == 0:
        raise TargetError(f"server user {name!r} has uid 0; PostgreSQL refuses to run as root")
    return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir or "/")


def _create_system_user(name: str) -> pwd.struct_passwd:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not Path(useradd).exists():
        raise TargetError(
            "running as root needs an unprivileged user for PostgreSQL, but useradd is missing; "
            f"create user {name!r} yourself or run pgdyno as a normal user"
        )
    result = subprocess.run(
        [useradd, "--system", "--user-group", "--no-create-home",
         "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
        capture_output=True, text=True, check=False,
    )
    if result.returncode not in (0, 9):  # 9: the user appeared concurrently
        raise TargetError(f"useradd {name} failed: {result.stderr.strip()}")
    return pwd.getpwnam(name)


def give_to(user: ServerUser, path: Path) -> None:
    """Hand a directory tree that pgdyno made to the server user."""
    if user.is_current:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, user.uid, user.gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), user.uid, user.gid)


def unreachable_ancestor(path: Path, user: ServerUser) -> Path | None:
    """The first ancestor of ``path`` that ``user`` cannot traverse, or None.

    Checks the permission bits as the kernel would for a user that is neither owner
    nor group member of root-owned directories (ACLs are not considered).
    """
    if user.is_current:
        return None
    current = Path("/")
    for part in path.resolve().parts[1:]:
        current = current / part
        if not current.exists():
            return None
        if current.is_dir() and not _permits(current, user, execute=True):
            return current
    return None


def writable_by(path: Path, user: ServerUser) -> bool:
    """``user`` may create files in the directory ``path``: write and search permission by
    the mode bits that apply to it (owner, group, others), as ``unreachable_ancestor``
    reads them (supplementary groups and ACLs are not considered, so a directory that only
    they open is taken as closed)."""
    if user.is_current:
        return os.access(path, os.W_OK | os.X_OK)
    return _permits(path, user, write=True, execute=True)


_CLASSES = ((stat.S_IWUSR, stat.S_IXUSR), (stat.S_IWGRP, stat.S_IXGRP),
            (stat.S_IWOTH, stat.S_IXOTH))


def _permits(path: Path, user: ServerUser, *, write: bool = False,
             execute: bool = False) -> bool:
    """The mode bits of the one class that applies to ``user`` (owner, else group, else
    others), as the kernel picks it, grant every access asked for."""
    info = path.stat()
    owner_group_other = (0 if info.st_uid == user.uid else 1 if info.st_gid == user.gid
                         else 2)
    w, x = _CLASSES[owner_group_other]
    wanted = (w if write else 0) | (x if execute else 0)
    return info.st_mode & wanted == wanted
