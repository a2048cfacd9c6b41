"""The SSH transport: one multiplexed OpenSSH connection to the database host.

pgdyno drives the OpenSSH client rather than a Python SSH library so that everything users
set up for ``ssh`` works unchanged: ``~/.ssh/config`` (Host aliases, ProxyJump, IdentityFile,
User, Port), agents, known_hosts. The only options pgdyno sets are ``BatchMode=yes`` (a
prompt would hang a benchmark; keys or an agent are required) and the control options: one
master connection (``ControlMaster``) whose socket lives in a private 0700 directory
pgdyno creates and removes, reused by every later command, so that the samplers cost one
connection, not one per sample. pgdyno never sees a password or a key, and records the
destination (``user@host``) only.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import TargetError, UsageError

CONNECT_TIMEOUT_S = 15.0
COMMAND_TIMEOUT_S = 30.0
CONTROL_PERSIST_S = 60
"""The master outlives an idle minute only: a pgdyno killed without closing leaves no
connection behind for long."""

_DESTINATION = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9._:\[\]%-]+$")


def check_destination(destination: str) -> str:
    """``[user@]host`` (a Host alias of ~/.ssh/config is a host): nothing ssh would read as
    an option, no spaces, no password."""
    if not destination or destination.startswith("-") or not _DESTINATION.match(destination):
        raise UsageError(f"--ssh {destination!r}: accepted: [user@]host, e.g. "
                         "postgres@db1 or a Host alias of ~/.ssh/config")
    return destination


def ssh_program() -> str:
    path = shutil.which("ssh")
    if path is None:
        raise UsageError("--ssh needs the OpenSSH client: apt-get install openssh-client")
    return path


@dataclass
class SshTransport:
    """Commands on the database host over one multiplexed connection.

    ``open`` authenticates once (the master); ``run`` and ``popen`` reuse it; ``close``
    ends it and removes the control directory."""

    destination: str
    config_file: Path | None = None
    """An ssh_config file passed as ``ssh -F`` (default: the user's own ~/.ssh/config)."""
    extra_options: tuple[str, ...] = ()
    """``Key=Value`` options passed as ``-o`` (a driver's port or key from an inventory)."""
    _control_dir: Path | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_destination(self.destination)
        if self.config_file is not None and not Path(self.config_file).is_file():
            raise UsageError(f"--ssh-config {self.config_file}: no such file")

    # ----- connection ---------------------------------------------------------------
    @property
    def control_path(self) -> Path:
        if self._control_dir is None:
            # mkdtemp makes the directory 0700: nobody else may reach the master's socket.
            # Short, under /tmp: a Unix socket path is limited to 108 bytes.
            self._control_dir = Path(tempfile.mkdtemp(prefix="pgdyno-ssh-", dir="/tmp"))
        return self._control_dir / "cm"

    def base_args(self, master: str = "no") -> list[str]:
        args = [ssh_program()]
        if self.config_file is not None:
            args += ["-F", str(self.config_file)]
        for option in self.extra_options:
            args += ["-o", option]
        return args + ["-o", "BatchMode=yes", "-o", f"ControlPath={self.control_path}",
                       "-o", f"ControlMaster={master}",
                       "-o", f"ControlPersist={CONTROL_PERSIST_S}"]

    def open(self) -> None:
        """Start the master (authenticates once); a failure is one line with ssh's reason."""
        if self.is_open():
            return
        # A master that died (killed, network lost) leaves its socket behind: a new master
        # would refuse to bind it.
        self.control_path.unlink(missing_ok=True)
        err = self.control_path.parent / "master.err"
        with err.open("w") as fh:
            try:
                # -f: ssh forks to the background once authenticated; -N: no command.
                proc = subprocess.run([*self.base_args("yes"), "-f", "-N", self.destination],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=fh, timeout=CONNECT_TIMEOUT_S, check=False)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = None
        if code != 0 or not self.is_open():
            reason = _last_line(err.read_text()) or ("timed out" if code is None
                                                     else f"ssh exit {code}")
            raise TargetError(f"--ssh {self.destination}: cannot connect: {reason}")

    def is_open(self) -> bool:
        if self._control_dir is None or not self.control_path.exists():
            return False
        proc = subprocess.run([*self.base_args(), "-O", "check", self.destination],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                              check=False)
        return proc.returncode == 0

    def master_pid(self) -> int | None:
        """The master's pid as ``ssh -O check`` states it ("Master running (pid=N)")."""
        if self._control_dir is None:
            return None
        proc = subprocess.run([*self.base_args(), "-O", "check", self.destination],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=10, check=False)
        found = re.search(r"pid=(\d+)", proc.stderr + proc.stdout)
        return int(found.group(1)) if found else None

    def close(self) -> None:
        if self._control_dir is None:
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([*self.base_args(), "-O", "exit", self.destination],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                           check=False)
        shutil.rmtree(self._control_dir, ignore_errors=True)
        self._control_dir = None

    def __enter__(self) -> SshTransport:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- commands -----------------------------------------------------------------
    def remote_command(self, script: str) -> list[str]:
        """The ssh command line running ``script`` with /bin/sh on the host, whatever the
        user's login shell is."""
        return [*self.base_args(), self.destination, "exec sh -c " + shlex.quote(script)]

    def run(self, script: str, input_text: str | None = None,
            timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
        """Run ``script`` remotely; never raises for a non-zero exit (the caller decides)."""
        self.open()
        return subprocess.run(self.remote_command(script), input=input_text,
                              stdin=None if input_text is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout_s, check=False)

    def check_output(self, script: str, input_text: str | None = None,
                     timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        proc = self.run(script, input_text, timeout_s)
        if proc.returncode != 0:
            raise TargetError(f"--ssh {self.destination}: {script.split()[0]!r} failed "
                              f"(exit {proc.returncode}): {_last_line(proc.stderr)}")
        return proc.stdout

    def own_connection(self, script: str, stderr=subprocess.DEVNULL) -> subprocess.Popen:
        """``script`` on a connection of its own, not the master's, with text pipes to its
        stdin and stdout: it lives until this process closes its stdin, or dies (even by
        SIGKILL, which closes the pipe: ssh sends EOF), whatever becomes of the master."""
        args = [ssh_program()]
        if self.config_file is not None:
            args += ["-F", str(self.config_file)]
        for option in self.extra_options:
            args += ["-o", option]
        args += ["-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none",
                 "-o", f"ConnectTimeout={int(CONNECT_TIMEOUT_S)}",
                 self.destination, "exec sh -c " + shlex.quote(script)]
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, text=True)

    def popen(self, script: str) -> subprocess.Popen:
        """A long-lived remote process with pipes to its stdin and stdout."""
        self.open()
        return subprocess.Popen(self.remote_command(script), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
