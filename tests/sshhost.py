"""A real sshd on 127.0.0.1 standing in for a remote host, for the --ssh and fleet tests.

Each ``SshHost`` is a throwaway OS user (created here, removed in ``close``) reached through
Debian's own ``/usr/sbin/sshd`` on a free loopback port, with a throwaway host key and
user key, and a throwaway ssh_config (``ssh -F``) naming it by an alias: the user's real
~/.ssh is never read or touched. Nothing is mocked: pgdyno's OpenSSH client really logs
in, as that user, and reads /proc through the connection.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

SSHD = Path("/usr/sbin/sshd")


def require_sshd() -> None:
    if not SSHD.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("needs openssh-server and openssh-client (bash setup.sh installs them)")
    if os.geteuid() != 0:
        pytest.skip("creating the stand-in host's OS user needs root")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshHost:
    """One stand-in host: ``alias`` is its Host name in ``config_file``."""

    alias: str
    base: Path
    user: str = ""
    home: Path = field(default_factory=Path)
    port: int = 0
    sshd: subprocess.Popen | None = None
    key: Path = field(default_factory=Path)
    root: bool = False
    """Log in as root (no throwaway user): the host where pgdyno must run its server as an
    unprivileged user of its own. Only the key this test made is authorised, through this
    sshd's own AuthorizedKeysFile: /root/.ssh is never read or touched."""

    @property
    def config_file(self) -> Path:
        return self.base / "ssh_config"

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.alias}"

    def start(self) -> SshHost:
        self.base.mkdir(parents=True, exist_ok=True)
        self.base.chmod(0o755)
        if self.root:
            self.user, self.home = "root", Path(pwd.getpwnam("root").pw_dir)
        else:
            self.user = "pgdr" + secrets.token_hex(3)
            self.home = self.base / "home"
            subprocess.run(["useradd", "--create-home", "--home-dir", str(self.home),
                            "--shell", "/bin/sh", self.user], check=True, capture_output=True)
            # '*': no password, yet not locked (sshd refuses keys for a locked '!' account).
            subprocess.run(["usermod", "-p", "*", self.user], check=True, capture_output=True)
        keys = self.base / "keys"
        keys.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(keys / "host")], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(keys / "user")], check=True)
        self.key = keys / "user"
        authorized = self.base / "authorized_keys"
        authorized.write_text((keys / "user.pub").read_text())
        authorized.chmod(0o644)
        self.port = _free_port()
        sshd_config = self.base / "sshd_config"
        sshd_config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
            f"PidFile {self.base / 'sshd.pid'}\nAuthorizedKeysFile {authorized}\n"
            f"AllowUsers {self.user}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            f"PermitRootLogin {'prohibit-password' if self.root else 'no'}\nMaxSessions 50\n"
            "MaxStartups 50\nSubsystem sftp internal-sftp\n")
        (self.base / "known_hosts").write_text(
            f"[127.0.0.1]:{self.port} {(keys / 'host.pub').read_text().split(' ', 2)[0]} "
            f"{(keys / 'host.pub').read_text().split(' ', 2)[1]}\n")
        self.config_file.write_text(
            f"Host {self.alias}\n  HostName 127.0.0.1\n  Port {self.port}\n"
            f"  User {self.user}\n  IdentityFile {self.key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.base / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        self.sshd = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(sshd_config)],
                                     stdout=subprocess.DEVNULL,
                                     stderr=(self.base / "sshd.log").open("w"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5):
                return self
            if self.sshd.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"sshd did not start: {(self.base / 'sshd.log').read_text()}")

    def sessions(self) -> list[psutil.Process]:
        """The sshd processes serving connections (children of the listener we started)."""
        if self.sshd is None:
            return []
        try:
            return psutil.Process(self.sshd.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def drop_connections(self) -> int:
        """Kill every session of this sshd (the listener stays): a network cut as the client
        sees it. Only processes the test started, by pid."""
        procs = self.sessions()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        return len(procs)

    def close(self) -> None:
        if self.sshd is not None:
            self.drop_connections()
            self.sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.sshd.wait(timeout=5)
            if self.sshd.poll() is None:
                self.sshd.kill()
        if self.user and not self.root:
            # Processes the user still runs (a venv's pgdyno, a server): ours, by the uid.
            with contextlib.suppress(KeyError):
                uid = pwd.getpwnam(self.user).pw_uid
                for proc in psutil.process_iter(["uids"]):
                    if proc.info["uids"] and proc.info["uids"].real == uid:
                        with contextlib.suppress(psutil.NoSuchProcess):
                            proc.kill()
            subprocess.run(["userdel", "--force", self.user], capture_output=True, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def ssh_hosts(count: int, prefix: str = "pgdyno-sshhost-", root: bool = False):
    """``count`` stand-in hosts, each its own user (or root) and sshd, torn down whatever
    happens."""
    require_sshd()
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    base.chmod(0o755)
    hosts: list[SshHost] = []
    try:
        for i in range(count):
            hosts.append(SshHost(alias=f"host-{chr(ord('a') + i)}", base=base / str(i),
                                 root=root).start())
        yield hosts
    finally:
        for h in hosts:
            h.close()
        shutil.rmtree(base, ignore_errors=True)
